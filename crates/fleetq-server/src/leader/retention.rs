//! The leader's side of retention (`Command::RemoveFinished`, Kueue's
//! `objectRetentionPolicies.workloads.afterFinished`): once a second, if
//! some finished workload has been over for the retention, propose removing
//! the due ones, a bounded number per command, until none is due. apply()
//! picks and re-checks them itself, so a stale or repeated proposal (a
//! deposed leader's, say) removes nothing it should not.
//!
//! A task of its own rather than a step of the admission loop: removal is
//! housekeeping, and waiting for its commits must not delay a cycle.

use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{Command, Ledger, Outcome};
use fleetq_model::Timestamp;

use crate::clock::SharedClock;
use crate::leader::task::{LeaderTask, Office, Wakes};
use crate::raft::proposer::Proposer;

/// How often the leader looks for finished workloads past the retention.
const EVERY: Duration = Duration::from_secs(1);

/// The most finished workloads one `RemoveFinished` removes. Every replica
/// applies it under the state machine's lock, about 2 µs a workload whose
/// record has gone cold (`cargo bench -p fleetq-ledger --bench retention`),
/// so this bounds the hold to about a millisecond; a larger backlog goes
/// in several commands with other entries between them. At 10,000
/// admissions/s with a 2 s retention the p99 from submit to admitted was
/// 8-9 ms at 500 a command (this task), 11-15 ms at 1,000 and 26-32 ms at
/// 20,000 (both from the admission loop), against 5 ms without retention.
pub const REMOVE_PER_COMMAND: u32 = 500;

/// Retention as a leader job ([`crate::leader::task`]): every second,
/// removals until nothing due is left or a proposal fails.
pub struct Retention {
    pub retention: Duration,
    pub handle: LedgerHandle,
    pub proposer: Arc<Proposer>,
    pub clock: SharedClock,
}

impl LeaderTask for Retention {
    fn wakes(&self) -> Wakes {
        Wakes {
            every: EVERY,
            on_raft_change: false,
            on_ledger_change: None,
        }
    }

    async fn pass(&mut self, _office: &Office) {
        loop {
            let command = {
                let sm = self.handle.read();
                remove_finished(&sm.ledger, self.retention, self.clock.now())
            };
            let Some(command) = command else {
                return;
            };
            match self.proposer.write_local(command).await.written() {
                Ok(w)
                    if matches!(
                        w.response.outcome,
                        Outcome::RemovedFinished { more: true, .. }
                    ) => {}
                Ok(_) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "removal of finished workloads not applied");
                    return;
                }
            }
        }
    }
}

/// The `RemoveFinished` to propose at `now`, if some finished workload is
/// past `retention`.
pub fn remove_finished(ledger: &Ledger, retention: Duration, now: Timestamp) -> Option<Command> {
    let now = now.max(ledger.state().now);
    ledger
        .finished_due(now, retention)
        .then_some(Command::RemoveFinished {
            retention_ms: retention.as_millis() as u64,
            max: REMOVE_PER_COMMAND,
        })
}
