//! The ledger as bytes and as a hash: what a Raft snapshot, a backup and
//! the replicas' agreement check carry.

use super::*;

impl Ledger {
    /// The replicated state, with LocalQueue state copied in.
    pub fn exported_state(&self) -> LedgerState {
        let mut state = self.state.clone();
        state.local_queues = self.snapshot.local_queue_states().clone();
        state
    }

    /// Serialises the whole ledger for a Raft snapshot.
    pub fn export(&self) -> Result<Vec<u8>, serde_json::Error> {
        self.exported().to_bytes()
    }

    /// A copy of everything a snapshot holds. Cheap next to serialising it
    /// (workloads are shared), so a caller can take it under a lock and
    /// serialise after releasing it.
    pub fn exported(&self) -> Exported {
        Exported {
            state: self.exported_state(),
            counters: self.counters.clone(),
        }
    }

    /// Rebuilds a ledger from [`Ledger::export`] output.
    pub fn import(bytes: &[u8], config: impl Into<LedgerConfig>) -> Result<Ledger, String> {
        let exported: Exported =
            crate::format::decode(bytes, || "the snapshot".into()).map_err(|e| match e {
                crate::format::DecodeError::Newer(newer) => newer.to_string(),
                crate::format::DecodeError::Json(e) => format!("snapshot is unreadable: {e}"),
            })?;
        let mut ledger = Ledger::new(config);
        ledger.counters = exported.counters;
        let mut state = exported.state;
        let local_queues = std::mem::take(&mut state.local_queues);
        ledger.state = state;
        // derive_snapshot carries LocalQueue state over from the current
        // snapshot: put the exported one there first.
        for (lq, s) in &local_queues {
            ledger.snapshot.restore_local_queue_state(lq, *s);
        }
        let config = ledger.state.config.clone();
        ledger.snapshot = ledger.derive_snapshot(&config).map_err(|errors| {
            let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            format!(
                "snapshot reservations do not fit its configuration: {}",
                text.join("; ")
            )
        })?;
        // Queue the pending workloads again without touching their records:
        // requeue_binding drops a Misconfigured reason once the binding
        // holds, but that reason may be the scheduler's (an AdmitBatch
        // carried it), which the replicas that applied the log still show
        // (found by fuzz/ command_apply).
        let reasons: Vec<(WorkloadId, Option<Box<PendingReason>>)> = ledger
            .state
            .workloads
            .values()
            .map(|w| (w.id, w.reason.clone()))
            .collect();
        ledger.requeue_all_pending();
        ledger.finished = FinishedIndex::of(ledger.state.workloads.values());
        for (id, reason) in reasons {
            if let Some(record) = ledger.state.workloads.get_mut(&id) {
                record.reason = reason;
            }
        }
        let violations = ledger.violations();
        if !violations.is_empty() {
            return Err(format!(
                "snapshot violates the ledger invariants: {}",
                violations.join("; ")
            ));
        }
        Ok(ledger)
    }

    /// SHA-256 over the canonical serialisation of the replicated state.
    /// Replicas at the same applied index must agree (invariant 6).
    /// The clock (`now`) is left out: it only follows the stamps of the
    /// log, and a refused command must leave the hash unchanged.
    pub fn state_hash(&self) -> String {
        Ledger::hash_of(self.exported_state())
    }

    /// [`Ledger::state_hash`] of a state copied out with
    /// [`Ledger::exported_state`]: the copy is quick to take under a lock,
    /// the hash can then be computed without it.
    pub fn hash_of(mut state: LedgerState) -> String {
        state.now = Timestamp::default();
        crate::hash::state_hash(&state)
    }
}

/// The contents of a Raft snapshot: the replicated state and the counters.
#[derive(Serialize, Deserialize)]
pub struct Exported {
    state: LedgerState,
    counters: Counters,
}

impl Exported {
    /// JSON with its format first ([`crate::format`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        crate::format::encode(self)
    }

    /// [`Ledger::state_hash`] of the ledger this was exported from (a
    /// backup records it next to the bytes).
    pub fn state_hash(&self) -> String {
        Ledger::hash_of(self.state.clone())
    }
}
