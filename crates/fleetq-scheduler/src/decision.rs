//! What one scheduling cycle decides: admissions, preemptions, and a reason
//! for everything left pending.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use fleetq_model::Timestamp;
use serde::{Deserialize, Serialize};

use crate::WorkloadId;

// Model types (an agent reads them without the scheduler), re-exported
// where the scheduler's decisions always had them.
pub use fleetq_model::assignment::{Assignment, PodSetAssignment};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Admission {
    pub workload: WorkloadId,
    pub cluster_queue: String,
    pub assignment: Assignment,
    /// GPU-seconds (milli) taken from the LocalQueue's budget, 0 if none.
    pub budget_charge: u64,
    /// Admission fair sharing's entry penalty (milli-GPU-seconds): counted
    /// as the LocalQueue's usage until its usage is next sampled, so that
    /// admissions alternate between tenants across cycles too. 0 if the
    /// ClusterQueue does not use admission fair sharing.
    #[serde(default)]
    pub afs_penalty: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreemptionReason {
    /// A higher-priority workload of the same ClusterQueue.
    InClusterQueue,
    /// The owner of lent quota takes it back.
    InCohortReclamation,
    /// A borrowing workload displaced a lower priority one (borrowWithinCohort).
    InCohortReclaimWhileBorrowing,
    /// Fair sharing moved quota towards the queue with the lower share.
    InCohortFairSharing,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    pub victim: WorkloadId,
    pub preemptor: WorkloadId,
    pub reason: PreemptionReason,
    /// Time the executor gives the victim to checkpoint before the kill.
    pub grace_period: Option<Duration>,
    /// The cluster the preemptor's room was planned on. The nomination
    /// keeps that room for it (`Snapshot::set_nominated_on`). Absent in
    /// entries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// Why a workload is still pending, as the CLI, API and metrics show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReasonKind {
    /// Quota is in use; it fits once something finishes.
    WaitingForQuota,
    /// More than the queue could ever get, even with the cohort idle.
    ExceedsMaxQuota,
    /// Quota is free but no eligible cluster has the devices.
    NoClusterCapacity,
    /// The configuration cannot serve it (resource not covered, ...).
    Misconfigured,
    /// Its LocalQueue or ClusterQueue is stopped.
    Suspended,
    /// Requeued after an eviction; waits for its backoff to pass.
    BackingOff,
    /// Its LocalQueue's GPU-second budget is spent.
    BudgetExhausted,
    /// Victims were chosen; it waits for them to stop.
    Preempting,
    /// StrictFIFO: the head of its queue does not fit.
    BlockedByHead,
    /// Not reached this cycle (per-cycle limits); it is looked at again.
    NotYetConsidered,
    /// Requeued after it was preempted or its cluster stopped running it.
    Evicted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReason {
    pub kind: ReasonKind,
    /// Human-readable, with numbers ("3 more needed").
    pub message: String,
    /// When waiting alone will make it admissible (budget refill, backoff).
    pub retry_at: Option<Timestamp>,
}

impl PendingReason {
    pub fn new(kind: ReasonKind, message: impl Into<String>) -> PendingReason {
        PendingReason {
            kind,
            message: message.into(),
            retry_at: None,
        }
    }

    pub fn retry_at(mut self, at: Timestamp) -> PendingReason {
        self.retry_at = Some(at);
        self
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

/// Counters of one cycle, for metrics and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleStats {
    /// Workloads the cycle tried to place.
    pub examined: u64,
    pub admitted: u64,
    pub preemption_searches: u64,
    /// Attempts answered from the per-cycle memo of failed shapes.
    pub memo_hits: u64,
}

/// The output of [`crate::schedule`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    pub admissions: Vec<Admission>,
    pub preemptions: Vec<Preemption>,
    /// Reasons of the workloads this cycle examined and left pending.
    pub pending: BTreeMap<WorkloadId, PendingReason>,
    /// Reason for every workload of a ClusterQueue that this cycle did not
    /// reach (blocked by its head, stopped, or over a per-cycle limit).
    pub queue_reasons: BTreeMap<String, PendingReason>,
    pub stats: CycleStats,
}

impl Decisions {
    /// The reason a pending workload of `cluster_queue` waits, if this cycle
    /// gave one: its own, else its queue's.
    pub fn reason_for(&self, id: WorkloadId, cluster_queue: &str) -> Option<&PendingReason> {
        self.pending
            .get(&id)
            .or_else(|| self.queue_reasons.get(cluster_queue))
    }
}
