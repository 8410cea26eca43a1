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
use tokio::sync::watch;

use crate::clock::SharedClock;
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

pub async fn run(
    retention: Option<Duration>,
    handle: LedgerHandle,
    proposer: Arc<Proposer>,
    clock: SharedClock,
    mut shutdown: watch::Receiver<bool>,
) {
    // tokio's clock, not std's: the simulator drives tokio's.
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
        if let (Some(retention), true) = (retention, proposer.is_leader()) {
            remove_due(retention, &handle, &proposer, &clock).await;
        }
    }
}

/// Proposes removals until nothing due is left or a proposal fails.
async fn remove_due(
    retention: Duration,
    handle: &LedgerHandle,
    proposer: &Proposer,
    clock: &SharedClock,
) {
    loop {
        let command = {
            let sm = handle.read();
            remove_finished(&sm.ledger, retention, clock.now())
        };
        let Some(command) = command else {
            return;
        };
        match proposer.write_local(command).await.written() {
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
