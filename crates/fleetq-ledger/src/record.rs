//! What the ledger remembers about each workload and cluster. These records
//! are the replicated state; the scheduler's snapshot is derived from them.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetq_model::{Cluster, Timestamp, Workload};
use fleetq_scheduler::{Assignment, PendingReason, WorkloadId};
use serde::{Deserialize, Serialize};

use crate::command::Epoch;

/// How many state changes a workload keeps in its history.
pub const HISTORY_LIMIT: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadState {
    Pending,
    Admitted,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl WorkloadState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            WorkloadState::Succeeded | WorkloadState::Failed | WorkloadState::Cancelled
        )
    }

    /// Holds a quota reservation.
    pub fn is_reserved(self) -> bool {
        matches!(self, WorkloadState::Admitted | WorkloadState::Running)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadState::Pending => "Pending",
            WorkloadState::Admitted => "Admitted",
            WorkloadState::Running => "Running",
            WorkloadState::Succeeded => "Succeeded",
            WorkloadState::Failed => "Failed",
            WorkloadState::Cancelled => "Cancelled",
        }
    }
}

/// A quota reservation: where and how a workload was admitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    pub epoch: Epoch,
    pub cluster_queue: String,
    pub local_queue: String,
    pub priority: i32,
    pub assignment: Assignment,
    pub admitted_at: Timestamp,
    pub budget_charge: u64,
    /// Set when the workload must stop (preempted, cancelled, evicted); it
    /// keeps its quota until the executor confirms.
    #[serde(default)]
    pub stopping: Option<String>,
    /// What becomes of the workload once it has stopped.
    #[serde(default, skip_serializing_if = "AfterStop::is_requeue")]
    pub after_stop: AfterStop,
    /// When its executor reported it running.
    #[serde(default)]
    pub started_at: Option<Timestamp>,
}

/// What a stopping admission turns into once its executor confirms the
/// stop (or its cluster is fenced): quota is released only then, because
/// until then the workload may still be running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AfterStop {
    /// Back to its queue (preemption).
    #[default]
    Requeue,
    /// Back to its queue, backing off (wait-for-ready eviction).
    BackOff,
    /// Failed: evicted more often than the requeue limit allows.
    Deactivate,
}

impl AfterStop {
    pub fn is_requeue(&self) -> bool {
        *self == AfterStop::Requeue
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: Timestamp,
    pub state: WorkloadState,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    pub id: WorkloadId,
    pub workload: Arc<Workload>,
    #[serde(default)]
    pub request_id: Option<String>,
    pub created_at: Timestamp,
    pub state: WorkloadState,
    /// Boxed: most records at scale are pending and hold none, and an
    /// inline reservation would cost every record its size (serialised
    /// the same either way).
    #[serde(default)]
    pub reservation: Option<Box<Reservation>>,
    /// The user asked to cancel; honoured once the executor confirms.
    #[serde(default)]
    pub cancel_requested: bool,
    /// Why it is pending (the last cycle's reason, an eviction, a
    /// misconfiguration), or how it ended.
    #[serde(default)]
    pub reason: Option<Box<PendingReason>>,
    pub history: Vec<Event>,
    /// Evictions for not becoming ready in time (wait-for-ready).
    #[serde(default)]
    pub requeue_count: u32,
    /// Requeue backoff: not admitted before this time.
    #[serde(default)]
    pub not_before: Option<Timestamp>,
    /// Its preemptions were applied and it waits for its victims' room
    /// (see `PendingWorkload::nominated`); cleared when it is admitted or
    /// a cycle gives it a reason other than Preempting. Left out of the
    /// serialised state (and so the hash) while false, as before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nominated: bool,
    /// The cluster its victims were on, while nominated: the scheduler
    /// admits it there only (`Snapshot::set_nominated_on`). Absent while
    /// none, as before it existed; a nomination recorded without it lets
    /// the workload go anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominated_on: Option<String>,
}

impl WorkloadRecord {
    pub fn key(&self) -> String {
        self.workload.key()
    }

    /// When it ended (its last event, which `finish` recorded), if it did.
    /// Nothing happens to a workload after it ended, so this never moves.
    pub fn finished_at(&self) -> Option<Timestamp> {
        if self.state.is_terminal() {
            self.history.last().map(|e| e.at)
        } else {
            None
        }
    }

    pub fn push_event(&mut self, at: Timestamp, state: WorkloadState, message: impl Into<String>) {
        self.state = state;
        if self.history.len() >= HISTORY_LIMIT {
            self.history.remove(1);
        }
        // Most workloads at scale have one event (queued): room for one,
        // not the four a first push would allocate.
        if self.history.is_empty() {
            self.history.reserve_exact(1);
        }
        self.history.push(Event {
            at,
            state,
            message: message.into(),
        });
    }
}

/// What happens to a cluster's workloads when its lease runs out
/// (docs/architecture.md §7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeasePolicy {
    /// The agent stops them before the lease could expire; the ledger then
    /// releases their quota and requeues them.
    #[default]
    Fence,
    /// Their quota stays charged until the cluster comes back.
    Keep,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterRecord {
    pub cluster: Cluster,
    pub lease_policy: LeasePolicy,
    pub registered_at: Timestamp,
}

/// Counters of what apply() refused; not part of the state hash (a
/// rejected duplicate must leave the hash unchanged).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub commands: u64,
    /// Commands that changed something a scheduling decision depends on:
    /// every accepted command except an `AdmitBatch` that admitted and
    /// preempted nothing (reasons alone do not count). The leader does
    /// not propose a decision apply() refused again until this moves.
    #[serde(default)]
    pub changes: u64,
    pub admit_batches: u64,
    pub admissions: u64,
    pub admissions_rejected: u64,
    /// Admissions made by the entry that submitted the workload (leader
    /// planned, see `Command::SubmitWorkloads`); also counted in
    /// `admissions`.
    #[serde(default, alias = "fresh_admissions")]
    pub admissions_on_submit: u64,
    /// Such planned admissions apply() did not make (something waited
    /// before the command, the submission created nothing, or the decision
    /// no longer held); those workloads stay queued for the cycle.
    #[serde(default, alias = "fresh_rejected")]
    pub rejected_on_submit: u64,
    pub preemptions: u64,
    /// Preemptions of a workload that had been preempted before: churn.
    /// A preemption livelock shows as this climbing with `preemptions`.
    #[serde(default)]
    pub preemptions_repeated: u64,
    pub preemptions_rejected: u64,
    pub stale_batches: u64,
    pub stale_reports: u64,
    pub refused_commands: u64,
    /// Finished workloads removed after the retention (`RemoveFinished`).
    #[serde(default)]
    pub finished_removed: u64,
    pub by_command: BTreeMap<String, u64>,
    /// Admission wait (from submission or the last requeue to admission,
    /// on the leader's stamps) per ClusterQueue: Kueue's
    /// `admission_wait_time_seconds`, identical on every replica.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub admission_wait: BTreeMap<String, WaitHistogram>,
    /// Evictions per ClusterQueue and reason (Kueue's reasons where Kueue
    /// has one: `Preempted`, `PodsReadyTimeout`; fleetq's own:
    /// `ClusterLost`, `NotRunningOnCluster`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evictions: BTreeMap<String, BTreeMap<String, u64>>,
    /// Preemptions per preempting ClusterQueue and reason
    /// (`InClusterQueue`, `InCohortReclamation`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub preemptions_by: BTreeMap<String, BTreeMap<String, u64>>,
    /// AdmitBatch decisions (admissions and preemptions) that apply()
    /// refused, per reason.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rejected_decisions: BTreeMap<String, u64>,
}

impl Counters {
    pub(crate) fn evicted(&mut self, cluster_queue: &str, reason: &str) {
        bump(
            self.evictions.entry(cluster_queue.to_string()).or_default(),
            reason,
        );
    }

    pub(crate) fn preempted_by(&mut self, cluster_queue: &str, reason: &str) {
        bump(
            self.preemptions_by
                .entry(cluster_queue.to_string())
                .or_default(),
            reason,
        );
    }

    pub(crate) fn rejected(&mut self, reason: &str, n: u64) {
        *self
            .rejected_decisions
            .entry(reason.to_string())
            .or_default() += n;
    }
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    *map.entry(key.to_string()).or_default() += 1;
}

/// Upper bounds (milliseconds) of [`WaitHistogram`]'s buckets: Kueue's
/// `generateExponentialBuckets(14)`, 1 s then 2.5 s doubling to 10240 s.
pub const WAIT_BUCKETS_MS: [u64; 14] = [
    1_000, 2_500, 5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 1_280_000,
    2_560_000, 5_120_000, 10_240_000,
];

/// A histogram of durations in exact milliseconds with the bounds of
/// [`WAIT_BUCKETS_MS`]; `buckets[i]` counts the observations in bucket `i`
/// alone (not cumulative), the last one those above every bound.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHistogram {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ms: u64,
}

impl WaitHistogram {
    pub fn observe(&mut self, ms: u64) {
        if self.buckets.len() != WAIT_BUCKETS_MS.len() + 1 {
            self.buckets.resize(WAIT_BUCKETS_MS.len() + 1, 0);
        }
        let i = WAIT_BUCKETS_MS
            .iter()
            .position(|&bound| ms <= bound)
            .unwrap_or(WAIT_BUCKETS_MS.len());
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
    }

    /// `(upper bound in seconds, count in that bucket)`, +Inf last, as a
    /// Prometheus encoder takes them.
    pub fn seconds_buckets(&self) -> Vec<(f64, u64)> {
        WAIT_BUCKETS_MS
            .iter()
            .map(|&b| b as f64 / 1000.0)
            .chain(std::iter::once(f64::INFINITY))
            .enumerate()
            .map(|(i, bound)| (bound, self.buckets.get(i).copied().unwrap_or(0)))
            .collect()
    }
}
