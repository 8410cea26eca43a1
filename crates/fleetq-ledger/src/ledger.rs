//! The replicated state machine: [`Ledger::apply`] turns one stamped command
//! into the next state, re-validating every decision against the state at
//! that log index (docs/architecture.md §4-5). It is pure: no clock, no I/O.
//!
//! Dispatch and the invariants are here, with the seam between the
//! records and the scheduler's snapshot (`requeue_binding`, `admitted_of`); each
//! command family has a room of its own: `configuration` (objects
//! applied and deleted), `submission` (submit, cancel, stop and resume),
//! `admission` (the leader's batches, preemption), `clusters`
//! (registration, reconcile, expiry, drain), `reports` (executors'
//! reports, release), `eviction` (wait-for-ready), `retention`
//! (finished workloads) and `export` (snapshot bytes, the state hash).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetq_model::config::Object;
use fleetq_model::{Cluster, ClusterState, Config, FieldError, Timestamp, Workload};
use fleetq_scheduler::snapshot::LocalQueueState;
use fleetq_scheduler::{
    Admission, AdmittedWorkload, PendingReason, PendingWorkload, ReasonKind, SchedulerConfig,
    Snapshot, WorkloadId,
};
use serde::{Deserialize, Serialize};

use crate::command::{
    AdmissionOnSubmit, AdmitBatch, AdmitOutcome, Command, CycleId, Epoch, Outcome, Phase, Request,
    Response, RunningWorkload, StatusReport, Submission, SubmitResult,
};
use crate::config::LedgerConfig;
use crate::nodes_left;
use crate::record::{
    AfterStop, ClusterRecord, Counters, LeasePolicy, Reservation, WorkloadRecord, WorkloadState,
};
use crate::retention::{cutoff, FinishedIndex, RemovedIds};

mod admission;
mod clusters;
mod configuration;
mod eviction;
mod export;
mod reports;
mod retention;
mod submission;

pub use export::Exported;

pub use fleetq_scheduler::BigMap;

/// The replicated part of the ledger: what snapshots carry and the state
/// hash covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerState {
    pub config: Config,
    pub clusters: BTreeMap<String, ClusterRecord>,
    pub workloads: BigMap<WorkloadId, WorkloadRecord>,
    /// `namespace/name` -> id (idempotent submission by name).
    pub by_name: BigMap<String, WorkloadId>,
    /// Client request id -> id (idempotent retries).
    pub by_request: BigMap<String, WorkloadId>,
    pub next_id: WorkloadId,
    pub next_epoch: Epoch,
    /// The newest admission cycle accepted.
    pub last_cycle: CycleId,
    /// The latest leader stamp seen; apply() never lets time go backwards.
    pub now: Timestamp,
    /// Reasons that hold for a whole ClusterQueue's unexamined workloads.
    pub queue_reasons: BTreeMap<String, PendingReason>,
    /// LocalQueue usage and budgets (kept live in the scheduler snapshot,
    /// copied here when the state is exported).
    pub local_queues: BTreeMap<String, LocalQueueState>,
    /// Workloads removed after they finished (`RemoveFinished`): an
    /// acknowledged workload is either in `workloads` or here. Left out of
    /// the serialisation while empty, so a ledger that never removed
    /// anything hashes as before retention existed.
    #[serde(default, skip_serializing_if = "RemovedIds::is_empty")]
    pub removed: RemovedIds,
}

/// The ledger: replicated records plus the scheduler snapshot derived from
/// them, kept in step incrementally.
#[derive(Clone, Debug)]
pub struct Ledger {
    state: LedgerState,
    snapshot: Snapshot,
    counters: Counters,
    config: LedgerConfig,
    /// Check invariants 1 and 2 after every command (debug builds and the
    /// simulator).
    check_invariants: bool,
    /// Workloads whose records changed since [`Ledger::take_changed`]
    /// (not replicated: a feed for watchers and executors).
    changed: Vec<WorkloadId>,
    /// Finished workloads by when they ended (derived from the records).
    finished: FinishedIndex,
}

/// `FLEETQ_LEDGER_CHECKS`: `on` or `off` overrides the build's default
/// for the after-every-command invariant check of every ledger this
/// process creates (including those a snapshot install or a restart
/// creates). The simulator and live chaos turn it on in release builds;
/// the mutant test turns it off to show the outside checks stand alone.
pub const INVARIANT_CHECKS_ENV: &str = "FLEETQ_LEDGER_CHECKS";

/// Whether a new ledger checks its invariants after every command: on in
/// debug builds and in builds with the planted bugs, unless
/// [`INVARIANT_CHECKS_ENV`] says otherwise.
pub fn invariant_checks_default() -> bool {
    static FROM_ENV: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let from_env = *FROM_ENV.get_or_init(|| match std::env::var(INVARIANT_CHECKS_ENV).as_deref() {
        Ok("on") => Some(true),
        Ok("off") => Some(false),
        _ => None,
    });
    from_env.unwrap_or(cfg!(debug_assertions) || fleetq_model::mutants::COMPILED)
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger::new(LedgerConfig::default())
    }
}

impl Ledger {
    /// An empty ledger under `config` (a [`SchedulerConfig`] alone means
    /// wait-for-ready off).
    pub fn new(config: impl Into<LedgerConfig>) -> Ledger {
        Ledger {
            state: LedgerState {
                next_id: 1,
                next_epoch: 1,
                ..LedgerState::default()
            },
            snapshot: Snapshot::new(Config::default(), &[]),
            counters: Counters::default(),
            config: config.into(),
            check_invariants: invariant_checks_default(),
            changed: Vec::new(),
            finished: FinishedIndex::default(),
        }
    }

    /// Turns the after-every-command invariant check on or off (it is on in
    /// debug builds and in builds with the planted bugs of the mutant test).
    pub fn set_invariant_checks(&mut self, on: bool) {
        self.check_invariants = on;
    }

    /// The workloads whose records changed since the last call, in order
    /// of change, without repeats.
    pub fn take_changed(&mut self) -> Vec<WorkloadId> {
        let mut seen = std::collections::HashSet::new();
        let mut out = std::mem::take(&mut self.changed);
        out.retain(|id| seen.insert(*id));
        out
    }

    /// Mutable access to a record, noting it as changed.
    fn record_mut(&mut self, id: WorkloadId) -> Option<&mut WorkloadRecord> {
        self.changed.push(id);
        self.state.workloads.get_mut(&id)
    }

    pub fn state(&self) -> &LedgerState {
        &self.state
    }

    /// The scheduler's view, for the leader's admission cycle.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The scheduler's settings, for the leader's admission cycle.
    pub fn scheduler_config(&self) -> &SchedulerConfig {
        &self.config.scheduler
    }

    /// What this ledger runs under (what a replica rebuilt from its
    /// snapshot needs).
    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    /// Finished workloads, oldest end first (what retention removes).
    pub fn finished(&self) -> &FinishedIndex {
        &self.finished
    }

    /// Whether some finished workload ended at least `retention` before
    /// `now`: a `RemoveFinished` would remove something.
    pub fn finished_due(&self, now: Timestamp, retention: std::time::Duration) -> bool {
        let cutoff = cutoff(now, retention.as_millis() as u64);
        self.finished.ended_by(cutoff).next().is_some()
    }

    pub fn workload(&self, id: WorkloadId) -> Option<&WorkloadRecord> {
        self.state.workloads.get(&id)
    }

    pub fn workload_by_name(&self, namespace: &str, name: &str) -> Option<&WorkloadRecord> {
        self.state
            .by_name
            .get(&format!("{namespace}/{name}"))
            .and_then(|id| self.state.workloads.get(id))
    }

    /// The reason shown for a pending workload: its own, else its
    /// ClusterQueue's.
    pub fn reason_of<'a>(&'a self, record: &'a WorkloadRecord) -> Option<&'a PendingReason> {
        if record.state != WorkloadState::Pending {
            return record.reason.as_deref();
        }
        record.reason.as_deref().or_else(|| {
            self.snapshot
                .get_pending(record.id)
                .and_then(|p| self.state.queue_reasons.get(&p.cluster_queue))
        })
    }

    /// Applies one command. A refused command changes nothing but the
    /// counters.
    pub fn apply(&mut self, request: &Request) -> Response {
        self.apply_in_term(request, None)
    }

    /// Applies one command from a log entry of Raft term `term`. An
    /// `AdmitBatch` is accepted only from the leader of that very term: a
    /// deposed leader's batch that still made it into the log is stale.
    pub fn apply_in_term(&mut self, request: &Request, term: Option<u64>) -> Response {
        if request.at > self.state.now {
            self.state.now = request.at;
        }
        let at = self.state.now;
        let changed_from = self.changed.len();
        self.counters.commands += 1;
        *self
            .counters
            .by_command
            .entry(request.command.name().to_string())
            .or_default() += 1;
        let mut response = match &request.command {
            Command::ApplyObjects { objects } => self.apply_objects(objects),
            Command::DeleteObject { kind, name } => self.delete_object(kind, name),
            Command::SubmitWorkloads {
                submissions,
                max_pending_per_local_queue,
                admit,
            } => self.submit(submissions, *max_pending_per_local_queue, admit, at),
            Command::CancelWorkload { namespace, name } => self.cancel(namespace, name, at),
            Command::SetWorkloadActive {
                namespace,
                name,
                active,
            } => self.set_active(namespace, name, *active, at),
            Command::AdmitBatch(batch) => self.admit_batch(batch, term, at),
            Command::RegisterCluster {
                cluster,
                lease_policy,
            } => self.register_cluster(cluster, *lease_policy, at),
            Command::ReportStatus { reports } => self.report_status(reports, at),
            Command::ReconcileCluster { cluster, running } => {
                self.reconcile_cluster(cluster, running, at)
            }
            Command::ExpireCluster { cluster } => self.expire_cluster(cluster, at),
            Command::DrainCluster { cluster } => self.drain_cluster(cluster),
            Command::UncordonCluster { cluster } => self.uncordon_cluster(cluster),
            Command::EvictNotReady { workloads } => self.evict_not_ready(workloads, at),
            Command::RemoveFinished { retention_ms, max } => {
                self.remove_finished(*retention_ms, *max, at)
            }
        };
        if !response.is_ok() {
            self.counters.refused_commands += 1;
        }
        let changed = match (&request.command, &response.outcome) {
            (Command::AdmitBatch(_), Outcome::Admitted(o)) => o.admitted > 0 || o.preempted > 0,
            _ => response.is_ok(),
        };
        if changed {
            self.counters.changes += 1;
        }
        if let Outcome::Admitted(o) = &mut response.outcome {
            o.changes = self.counters.changes;
        }
        self.index_finished(changed_from);
        if self.check_invariants {
            let violations = self.violations();
            assert!(
                violations.is_empty(),
                "ledger invariant broken after {}: {}",
                request.command.name(),
                violations.join("; ")
            );
        }
        response
    }

    // ----- the seam between the records and the snapshot ----------------

    /// Puts a pending workload (back) into the scheduler's queues under its
    /// current binding, or records why it cannot be queued.
    fn requeue_binding(&mut self, id: WorkloadId) {
        let Some(record) = self.state.workloads.get(&id) else {
            return;
        };
        self.snapshot.remove_pending(id);
        if record.workload.spec.inactive {
            let resume = format!(
                "stopped (spec.active: false); `fleetq resume workload {} -n {}` queues it again",
                record.workload.name, record.workload.namespace
            );
            if let Some(record) = self.record_mut(id) {
                record.nominated = false;
                record.nominated_on = None;
                record.reason = Some(Box::new(PendingReason::new(ReasonKind::Suspended, resume)));
            }
            return;
        }
        let binding = self.state.config.bind_workload(&record.workload);
        let created_at = record.created_at;
        let not_before = record.not_before;
        let nominated = record.nominated;
        let nominated_on = record.nominated_on.clone();
        let borrow_preemptions = borrow_preemptions_of(record);
        let reclaimed = reclaimed_of(record);
        let reclaimed_for = reclaimed_for_of(record, &self.state.workloads);
        let workload = Arc::clone(&record.workload);
        match binding {
            Ok(b) => {
                let queued = self.snapshot.add_pending(PendingWorkload {
                    id,
                    workload,
                    local_queue: b.local_queue,
                    cluster_queue: b.cluster_queue,
                    priority: b.priority,
                    created_at,
                    not_before,
                    nominated,
                    borrow_preemptions,
                    reclaimed,
                    reclaimed_for,
                });
                if queued.is_ok() && nominated {
                    self.snapshot.set_nominated_on(id, nominated_on);
                }
                if let (Err(e), Some(record)) = (queued, self.record_mut(id)) {
                    record.reason = Some(Box::new(PendingReason::new(
                        ReasonKind::Misconfigured,
                        e.to_string(),
                    )));
                } else if let Some(record) = self.record_mut(id) {
                    if record
                        .reason
                        .as_ref()
                        .is_some_and(|r| r.kind == ReasonKind::Misconfigured)
                    {
                        record.reason = None;
                    }
                }
            }
            Err(errors) => {
                if let Some(record) = self.record_mut(id) {
                    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                    record.reason = Some(Box::new(PendingReason::new(
                        ReasonKind::Misconfigured,
                        text.join("; "),
                    )));
                }
            }
        }
    }

    // ----- invariants, export, hash --------------------------------------

    /// Invariants 1 and 2 of docs/architecture.md §6 plus the agreement between the
    /// records and the derived snapshot. Empty when all hold.
    pub fn violations(&self) -> Vec<String> {
        let mut out = self.snapshot.violations();
        for record in self.state.workloads.values() {
            let admitted = self.snapshot.get_admitted(record.id);
            let pending = self.snapshot.get_pending(record.id);
            match (record.state, &record.reservation) {
                (s, Some(r)) if s.is_reserved() => match admitted {
                    None => out.push(format!(
                        "workload {} is {} but holds no reservation",
                        record.id,
                        s.as_str()
                    )),
                    Some(a) if a.assignment != r.assignment => out.push(format!(
                        "workload {} reservation differs from the scheduler's",
                        record.id
                    )),
                    Some(_) => {}
                },
                (s, None) if s.is_reserved() => out.push(format!(
                    "workload {} is {} without a reservation record",
                    record.id,
                    s.as_str()
                )),
                (s, _) => {
                    if admitted.is_some() || record.reservation.is_some() {
                        out.push(format!(
                            "workload {} is {} but still holds a reservation (double charge)",
                            record.id,
                            s.as_str()
                        ));
                    }
                    if record.workload.spec.inactive && pending.is_some() {
                        out.push(format!("workload {} is inactive but queued", record.id));
                    }
                    if s != WorkloadState::Pending && pending.is_some() {
                        out.push(format!(
                            "workload {} is {} but still queued",
                            record.id,
                            s.as_str()
                        ));
                    }
                }
            }
        }
        out.extend(self.retention_violations());
        let reserved = self
            .state
            .workloads
            .values()
            .filter(|w| w.reservation.is_some())
            .count();
        if reserved != self.snapshot.admitted().count() {
            out.push(format!(
                "{} reservations recorded but the scheduler holds {}",
                reserved,
                self.snapshot.admitted().count()
            ));
        }
        out
    }

    /// The finished index holds exactly the finished records, at the time
    /// each ended; no removed id has a record or was never handed out.
    fn retention_violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let derived = FinishedIndex::of(self.state.workloads.values());
        if derived != self.finished {
            out.push(format!(
                "the finished index ({} entries) is not the finished records' ({}); (end ms, id) in one only: {:?}",
                self.finished.len(),
                derived.len(),
                derived.differences(&self.finished, 5)
            ));
        }
        for record in self.state.workloads.values() {
            if self.state.removed.contains(record.id) {
                out.push(format!(
                    "workload {} was removed but still has a record",
                    record.id
                ));
            }
        }
        if self
            .state
            .removed
            .max()
            .is_some_and(|max| max >= self.state.next_id)
        {
            out.push(format!(
                "ids up to {:?} removed, but only ids below {} were handed out",
                self.state.removed.max(),
                self.state.next_id
            ));
        }
        out
    }
}

/// Eviction reasons of [`Counters::evictions`]: Kueue's where Kueue has
/// one.
pub const EVICTED_PREEMPTED: &str = "Preempted";
pub const EVICTED_PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
/// fleetq's own: the cluster's lease expired and its workloads were fenced.
pub const EVICTED_CLUSTER_LOST: &str = "ClusterLost";
/// fleetq's own: a node its pods ran on left the cluster (no longer
/// reported, cordoned or NotReady) under the lease policy `Fence`.
pub const EVICTED_NODE_LOST: &str = "NodeLost";
/// fleetq's own: after a reconnect the agent no longer ran it.
pub const EVICTED_NOT_RUNNING: &str = "NotRunningOnCluster";

/// The reason label of an admission apply() refused.
fn rejection_reason(e: &fleetq_scheduler::SnapshotError) -> &'static str {
    use fleetq_scheduler::SnapshotError as E;
    match e {
        E::NotPending(_) => "NotPending",
        E::NotAdmitted(_) => "NotAdmitted",
        E::Duplicate(_) => "Duplicate",
        E::UnknownClusterQueue(_) => "UnknownClusterQueue",
        E::WrongClusterQueue { .. } => "WrongClusterQueue",
        E::ClusterUnavailable(_) => "ClusterUnavailable",
        E::QueueStopped { .. } => "QueueStopped",
        E::NamespaceNotSelected { .. } => "NamespaceNotSelected",
        E::UnknownCell(_) => "UnknownCell",
        E::NoLongerFits { .. } => "NoLongerFits",
        E::Inconsistent { .. } => "Inconsistent",
    }
}

/// How often a borrowing preemptor (`borrowWithinCohort`, or a
/// fair-sharing strategy) preempted this workload, by its history (the
/// ledger's and the scheduler's shield against borrowers taking turns,
/// `fleetq_scheduler::policy::BORROWER_PREEMPTIONS`).
fn borrow_preemptions_of(record: &WorkloadRecord) -> u32 {
    record
        .history
        .iter()
        .filter(|e| {
            e.message
                .starts_with("preempted (InCohortReclaimWhileBorrowing)")
                || e.message.starts_with("preempted (InCohortFairSharing)")
        })
        .count() as u32
}

/// How often other queues took this workload's borrowed quota back
/// (reclaimed it, or preempted it by fair sharing), by its history
/// (`fleetq_scheduler::policy::RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION`).
fn reclaimed_of(record: &WorkloadRecord) -> u32 {
    record
        .history
        .iter()
        .filter(|e| {
            e.message.starts_with("preempted (InCohortReclamation)")
                || e.message.starts_with("preempted (InCohortFairSharing)")
        })
        .count() as u32
}

/// The workload of another queue whose preemption sent this one back to
/// the queue, if it has not been admitted since, by its history
/// (`PendingWorkload::reclaimed_for`). None once this one has preempted
/// that workload in turn (`Snapshot::end_hold_by`): read from the other's
/// history, a preemption of it for this one at or after this one's
/// eviction.
fn reclaimed_for_of(
    record: &WorkloadRecord,
    workloads: &BigMap<WorkloadId, WorkloadRecord>,
) -> Option<WorkloadId> {
    let last =
        record.history.iter().rev().find(|e| {
            e.message.starts_with("preempted (") || e.message.starts_with("admitted by ")
        })?;
    let reclaimer = preemptor_of(&last.message).filter(|_| {
        [
            "preempted (InCohortReclamation)",
            "preempted (InCohortReclaimWhileBorrowing)",
            "preempted (InCohortFairSharing)",
        ]
        .iter()
        .any(|p| last.message.starts_with(p))
    })?;
    let turned = workloads.get(&reclaimer).is_some_and(|r| {
        r.history.iter().rev().any(|e| {
            e.at >= last.at
                && e.message.starts_with("preempted (")
                && preemptor_of(&e.message) == Some(record.id)
        })
    });
    (!turned).then_some(reclaimer)
}

/// The preemptor named by a "preempted (...) to admit workload N" event.
fn preemptor_of(message: &str) -> Option<WorkloadId> {
    let (_, id) = message.rsplit_once("to admit workload ")?;
    id.parse().ok()
}

/// The scheduler's view of a record's reservation, if it holds one.
fn admitted_of(record: &WorkloadRecord) -> Option<AdmittedWorkload> {
    let r = record.reservation.as_ref()?;
    Some(AdmittedWorkload {
        pending: PendingWorkload {
            id: record.id,
            workload: Arc::clone(&record.workload),
            local_queue: r.local_queue.clone(),
            cluster_queue: r.cluster_queue.clone(),
            priority: r.priority,
            created_at: record.created_at,
            not_before: None,
            nominated: false,
            borrow_preemptions: borrow_preemptions_of(record),
            reclaimed: reclaimed_of(record),
            reclaimed_for: None,
        },
        assignment: r.assignment.clone(),
        admitted_at: r.admitted_at,
        evicting: r.stopping.is_some(),
        budget_charge: r.budget_charge,
    })
}

/// Convenience for tests and tools: a workload submission without a
/// request id.
pub fn submission(workload: Workload) -> Submission {
    Submission {
        request_id: None,
        workload: Arc::new(workload),
    }
}
