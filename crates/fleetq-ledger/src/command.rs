//! The ledger's whole vocabulary (docs/architecture.md §5). Every command travels in a
//! [`Request`] stamped by the leader's clock; apply() uses that stamp, never
//! the local clock, so every replica computes the same state.

use fleetq_model::config::Object;
use fleetq_model::{Cluster, FieldError, Timestamp, Workload};
use fleetq_scheduler::{Admission, Assignment, PendingReason, Preemption, WorkloadId};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

use crate::record::{LeasePolicy, WorkloadState};

/// Identifies one admission of one workload. Reports from agents carry it
/// back; a report with another epoch is stale and changes nothing.
pub type Epoch = u64;

/// A command as it sits in the Raft log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The proposing leader's clock, in milliseconds since the Unix epoch.
    pub at: Timestamp,
    pub command: Command,
}

/// Externally tagged (`{"AdmitBatch": {...}}`): serde decodes that
/// without buffering, which matters on the log's hot path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Creates or replaces configuration objects (flavors, cohorts,
    /// ClusterQueues, LocalQueues, priority classes), all or nothing.
    ApplyObjects {
        objects: Vec<Object>,
    },
    /// Deletes one configuration object by kind and name (`namespace/name`
    /// for a LocalQueue).
    DeleteObject {
        kind: String,
        name: String,
    },
    /// Queues workloads; idempotent by request id and by namespace/name
    /// with the same spec (another spec under a taken name is refused).
    SubmitWorkloads {
        submissions: Vec<Submission>,
        /// The most pending workloads one LocalQueue may hold: a
        /// submission that finds its LocalQueue that full is refused
        /// ([`SubmitResult::QueueFull`]). The leader stamps its setting
        /// into the command, as it stamps its clock, so every replica
        /// (and a replay after the setting changed) decides alike. None:
        /// no limit (and entries written before the limit existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_pending_per_local_queue: Option<u64>,
        /// Admissions the leader planned for these submissions, so that a
        /// workload that finds room is admitted by the entry that queues it
        /// (one commit instead of two). Applied after every submission,
        /// only if nothing else was waiting before the command, each
        /// re-validated as an `AdmitBatch` admission is; the first that no
        /// longer holds ends them, and the rest stay queued for the
        /// ordinary cycle. The leader replaces whatever a command arrives
        /// with by its own plan (Proposer::write_local).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        admit: Vec<AdmissionOnSubmit>,
    },
    CancelWorkload {
        namespace: String,
        name: String,
    },
    /// Kueue's `spec.active`: `false` takes a workload out of its queue
    /// (evicting it first if it holds quota) and keeps it; `true` queues it
    /// again. Setting what already holds changes nothing.
    SetWorkloadActive {
        namespace: String,
        name: String,
        active: bool,
    },
    /// One admission cycle's decisions, re-validated one by one.
    AdmitBatch(AdmitBatch),
    RegisterCluster {
        cluster: Cluster,
        #[serde(default)]
        lease_policy: LeasePolicy,
    },
    ReportStatus {
        reports: Vec<StatusReport>,
    },
    /// What an agent really runs after a restart or reconnect.
    ReconcileCluster {
        cluster: String,
        running: Vec<RunningWorkload>,
    },
    /// The cluster's lease ran out: its workloads are evicted (policy
    /// `fence`) or kept charged until it returns (policy `keep`).
    ExpireCluster {
        cluster: String,
    },
    /// No new work goes to the cluster; what runs there finishes.
    DrainCluster {
        cluster: String,
    },
    /// Undoes a drain: the cluster takes new work again (kubectl's
    /// uncordon). A cluster that is not draining is left as it is.
    UncordonCluster {
        cluster: String,
    },
    /// Wait-for-ready: admissions whose executor has not reported them
    /// running within the timeout are evicted and requeued with backoff
    /// (re-checked at apply against the stamp).
    EvictNotReady {
        workloads: Vec<RunningWorkload>,
    },
    /// Retention of finished workloads (Kueue's
    /// `objectRetentionPolicies.workloads.afterFinished`): removes up to
    /// `max` workloads that ended (Succeeded, Failed, Cancelled) at least
    /// `retention_ms` before the command's stamp, oldest first. apply()
    /// picks them from its own state and re-checks each (ended, holding
    /// no quota, queued nowhere), so a stale or repeated command removes
    /// nothing it should not. The leader stamps its setting into the
    /// command, as it stamps its clock, so every replica removes the same.
    RemoveFinished {
        retention_ms: u64,
        max: u32,
    },
}

impl Command {
    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::ApplyObjects { .. } => "ApplyObjects",
            Command::DeleteObject { .. } => "DeleteObject",
            Command::SubmitWorkloads { .. } => "SubmitWorkloads",
            Command::CancelWorkload { .. } => "CancelWorkload",
            Command::SetWorkloadActive { .. } => "SetWorkloadActive",
            Command::AdmitBatch(_) => "AdmitBatch",
            Command::RegisterCluster { .. } => "RegisterCluster",
            Command::ReportStatus { .. } => "ReportStatus",
            Command::ReconcileCluster { .. } => "ReconcileCluster",
            Command::ExpireCluster { .. } => "ExpireCluster",
            Command::DrainCluster { .. } => "DrainCluster",
            Command::UncordonCluster { .. } => "UncordonCluster",
            Command::EvictNotReady { .. } => "EvictNotReady",
            Command::RemoveFinished { .. } => "RemoveFinished",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Submission {
    /// Client-chosen id that makes a retried submission a no-op.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Shared, not owned: a log entry is cloned for every follower it is
    /// sent to and again when it is applied, and the record the workload
    /// becomes keeps the same allocation. Serialized as the plain object.
    pub workload: Arc<Workload>,
}

/// An admission planned for a workload the same command submits
/// ([`Command::SubmitWorkloads`]): it names the submission by position,
/// since the workload's id is assigned at apply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdmissionOnSubmit {
    /// Index into the command's `submissions`.
    pub submission: u32,
    pub cluster_queue: String,
    pub assignment: Assignment,
    #[serde(default)]
    pub budget_charge: u64,
    #[serde(default)]
    pub afs_penalty: u64,
}

impl AdmissionOnSubmit {
    /// The decision for submission `submission`, from a plan that named
    /// the workloads by any ids (`schedule_on_submit`'s input).
    pub fn planned(submission: u32, admission: Admission) -> AdmissionOnSubmit {
        AdmissionOnSubmit {
            submission,
            cluster_queue: admission.cluster_queue,
            assignment: admission.assignment,
            budget_charge: admission.budget_charge,
            afs_penalty: admission.afs_penalty,
        }
    }

    /// The decision for the workload the submission created.
    pub fn for_workload(&self, workload: WorkloadId) -> Admission {
        Admission {
            workload,
            cluster_queue: self.cluster_queue.clone(),
            assignment: self.assignment.clone(),
            budget_charge: self.budget_charge,
            afs_penalty: self.afs_penalty,
        }
    }
}

/// Identifies the admission cycle that produced a batch: the leader's Raft
/// term and a sequence number inside that term. The ledger accepts only
/// batches newer than the last one it accepted, so a duplicated proposal or
/// a deposed leader's late batch changes nothing.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct CycleId {
    pub term: u64,
    pub seq: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdmitBatch {
    pub cycle: CycleId,
    pub admissions: Vec<Admission>,
    pub preemptions: Vec<Preemption>,
    /// Changed pending reasons of workloads the cycle examined.
    #[serde(default)]
    pub reasons: Vec<(WorkloadId, PendingReason)>,
    /// Reasons that hold for every workload of a ClusterQueue the cycle did
    /// not examine one by one (StrictFIFO behind its head, scan limits).
    #[serde(default)]
    pub queue_reasons: Vec<(String, PendingReason)>,
}

impl AdmitBatch {
    /// True when the batch would change nothing but reasons.
    pub fn has_decisions(&self) -> bool {
        !self.admissions.is_empty() || !self.preemptions.is_empty()
    }
}

/// What an executor says happened to one admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Running,
    Succeeded,
    Failed,
    /// Stopped on request (cancel, preemption, eviction); its processes are gone.
    Stopped,
    /// Admitted, but its pods cannot start yet (a node does not take
    /// them); the message says why. Changes no state: it is said in the
    /// workload's history, once per message, and wait-for-ready decides.
    Waiting,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    pub cluster: String,
    pub workload: WorkloadId,
    pub epoch: Epoch,
    pub phase: Phase,
    #[serde(default)]
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningWorkload {
    pub workload: WorkloadId,
    pub epoch: Epoch,
}

/// The outcome of one command, returned to the proposer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Field errors when the command was refused as a whole; nothing changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    #[serde(default, skip_serializing_if = "Outcome::is_none")]
    pub outcome: Outcome,
}

impl Response {
    pub fn ok(outcome: Outcome) -> Response {
        Response {
            errors: Vec::new(),
            outcome,
        }
    }

    pub fn refused(errors: Vec<FieldError>) -> Response {
        Response {
            errors,
            outcome: Outcome::None,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    #[default]
    None,
    Applied {
        /// `Kind/name` and what happened to it: created, configured, unchanged.
        changes: Vec<(String, String)>,
    },
    Deleted {
        object: String,
    },
    Submitted {
        results: Vec<SubmitResult>,
        /// How many of the leader's planned admissions (the command's
        /// `admit`) apply() made; the rest wait for the ordinary cycle.
        #[serde(default, skip_serializing_if = "is_zero")]
        admitted_on_submit: u32,
    },
    Cancelled {
        id: WorkloadId,
        /// The state after the command: Cancelled, or still Admitted/Running
        /// until the executor confirms its processes are gone.
        state: WorkloadState,
    },
    Admitted(AdmitOutcome),
    /// [`Command::SetWorkloadActive`]'s answer.
    Activation {
        id: WorkloadId,
        /// The state after the command: Pending, or still Admitted/Running
        /// until the executor confirms a deactivated workload stopped.
        state: WorkloadState,
        /// Whether the command changed anything.
        changed: bool,
    },
    ClusterRegistered {
        cluster: String,
    },
    Reported {
        applied: u32,
        stale: u32,
    },
    Reconciled {
        /// Workloads the agent runs that the ledger does not assign to it
        /// with that epoch: the agent must stop them.
        stop: Vec<RunningWorkload>,
        requeued: Vec<WorkloadId>,
    },
    Expired {
        requeued: Vec<WorkloadId>,
        kept: Vec<WorkloadId>,
    },
    Drained {
        cluster: String,
    },
    Uncordoned {
        cluster: String,
    },
    NotReadyEvicted {
        /// Requeued with backoff.
        requeued: Vec<WorkloadId>,
        /// Past the requeue limit: deactivated (Failed).
        deactivated: Vec<WorkloadId>,
        /// Not evicted: running by now, another epoch, or not yet due.
        skipped: Vec<WorkloadId>,
    },
    RemovedFinished {
        removed: u32,
        /// More finished workloads are past the retention than `max` let
        /// this command remove.
        more: bool,
    },
}

impl Outcome {
    fn is_none(&self) -> bool {
        matches!(self, Outcome::None)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SubmitResult {
    Created {
        id: WorkloadId,
    },
    /// The same request id, or the same namespace/name with the same
    /// labels and spec, was already submitted. The same name with another
    /// spec is [`SubmitResult::Refused`], naming the first differing field.
    Existing {
        id: WorkloadId,
    },
    Refused {
        errors: Vec<FieldError>,
    },
    /// Refused because its LocalQueue already holds the most pending
    /// workloads allowed (the command's `max_pending_per_local_queue`);
    /// nothing was queued. The error names the LocalQueue and the limit.
    QueueFull {
        errors: Vec<FieldError>,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmitOutcome {
    pub admitted: u32,
    pub preempted: u32,
    /// Decisions that no longer held at apply, with the reason.
    pub rejected: Vec<(WorkloadId, String)>,
    /// The whole batch was older than one already accepted.
    pub stale_batch: bool,
    /// `Counters::changes` right after this batch applied: what its
    /// refusals are remembered against. Read later, it may already count
    /// a change applied after the batch (soak seed 253520: a cluster that
    /// came back just after a refused batch was never tried again).
    #[serde(default)]
    pub changes: u64,
}
