//! What only the leader does with the ledger: admission (the scheduling
//! loop, and admission on submit handed to the write path) and the
//! retention of finished workloads, each a job of one shape
//! ([`task`]). Lease expiry, a job of the same shape, is the agents' room
//! ([`crate::agents::leases`]).

use std::time::Duration;

pub mod admission;
pub mod retention;
pub mod task;

/// Policies only the leader reads: they decide what it proposes, never
/// how an entry applies, so replicas need not agree on them (unlike
/// [`fleetq_ledger::LedgerConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderPolicies {
    /// The leader plans admissions for the workloads it is about to queue
    /// and puts them in the same entry, so a workload that finds room is
    /// admitted with one Raft commit instead of two.
    pub admit_on_submit: bool,
    /// Retention of finished workloads (Kueue's
    /// `objectRetentionPolicies.workloads.afterFinished`): the leader
    /// removes a workload from the ledger this long after it ended, so the
    /// ledger holds what is live and recent rather than all history.
    /// `None`: kept forever.
    pub finished_retention: Option<Duration>,
}

/// A day: `fleetq get workloads` shows what ended today, and a fleet
/// admitting a workload a second keeps under 100,000 finished records.
pub const DEFAULT_FINISHED_RETENTION: Duration = Duration::from_secs(24 * 3600);

impl Default for LeaderPolicies {
    fn default() -> Self {
        LeaderPolicies {
            admit_on_submit: true,
            finished_retention: Some(DEFAULT_FINISHED_RETENTION),
        }
    }
}
