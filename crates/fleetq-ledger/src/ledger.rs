//! The replicated state machine: [`Ledger::apply`] turns one stamped command
//! into the next state, re-validating every decision against the state at
//! that log index (docs/architecture.md §4-5). It is pure: no clock, no I/O.
//!
//! Dispatch, configuration, submission, admission, preemption, clusters
//! and the invariants are here; command families with rooms of their
//! own: `reports` (executors' reports, release), `retention`
//! (finished workloads), `export` (snapshot bytes and the state hash).

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
    AdmitBatch, AdmitOutcome, Command, CycleId, Epoch, FreshAdmission, Outcome, Phase, Request,
    Response, RunningWorkload, StatusReport, Submission, SubmitResult,
};
use crate::nodes_left;
use crate::record::{
    AfterStop, ClusterRecord, Counters, LeasePolicy, Reservation, WorkloadRecord, WorkloadState,
};
use crate::retention::{cutoff, FinishedIndex, RemovedIds};

mod export;
mod reports;
mod retention;

pub use export::Exported;

/// The replicated part of the ledger: what snapshots carry and the state
/// hash covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerState {
    pub config: Config,
    pub clusters: BTreeMap<String, ClusterRecord>,
    pub workloads: BTreeMap<WorkloadId, WorkloadRecord>,
    /// `namespace/name` -> id (idempotent submission by name).
    pub by_name: BTreeMap<String, WorkloadId>,
    /// Client request id -> id (idempotent retries).
    pub by_request: BTreeMap<String, WorkloadId>,
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
    scheduler: SchedulerConfig,
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
        Ledger::new(SchedulerConfig::default())
    }
}

impl Ledger {
    pub fn new(scheduler: SchedulerConfig) -> Ledger {
        Ledger {
            state: LedgerState {
                next_id: 1,
                next_epoch: 1,
                ..LedgerState::default()
            },
            snapshot: Snapshot::new(Config::default(), &[]),
            counters: Counters::default(),
            scheduler,
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

    pub fn scheduler_config(&self) -> &SchedulerConfig {
        &self.scheduler
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

    // ----- configuration -------------------------------------------------

    fn apply_objects(&mut self, objects: &[Object]) -> Response {
        let mut config = self.state.config.clone();
        let mut errors = Vec::new();
        let mut changes = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            let name = object.display_name();
            let before = config.get(object.kind(), &object.key());
            if config.upsert(object.clone()).is_err() {
                errors.push(
                    FieldError::new(
                        &name,
                        "kind",
                        "a Workload is submitted (fleetq submit), not applied as configuration",
                    )
                    .in_document(i + 1),
                );
                continue;
            }
            if let (Some(Object::Topology(old)), Object::Topology(new)) = (&before, object) {
                if let Some(problem) = old.update_problem(new) {
                    errors.push(FieldError::new(&name, "spec.levels", problem).in_document(i + 1));
                }
            }
            let change = match before {
                None => "created",
                Some(b) if &b == object => "unchanged",
                Some(_) => "configured",
            };
            changes.push((name, change.to_string()));
        }
        errors.extend(config.validate());
        if !errors.is_empty() {
            return Response::refused(errors);
        }
        match self.reconfigure(config) {
            Ok(()) => Response::ok(Outcome::Applied { changes }),
            Err(errors) => Response::refused(errors),
        }
    }

    fn delete_object(&mut self, kind: &str, name: &str) -> Response {
        let object = format!("{kind}/{name}");
        let mut config = self.state.config.clone();
        if config.remove(kind, name).is_none() {
            return Response::refused(vec![FieldError::new(
                &object,
                "metadata.name",
                format!("{kind} {name:?} does not exist"),
            )]);
        }
        if kind == "Topology" {
            // The flavors are named here rather than left to validate(),
            // which would report each flavor's topologyName as dangling.
            let users = self.state.config.flavors_using_topology(name);
            if !users.is_empty() {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "metadata.name",
                    match users.as_slice() {
                        [one] => format!(
                            "ResourceFlavor {one:?} still names it in spec.topologyName; change or delete that flavor first"
                        ),
                        many => format!(
                            "ResourceFlavors {} still name it in spec.topologyName; change or delete those flavors first",
                            many.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", ")
                        ),
                    },
                )]);
            }
        }
        if kind == "ClusterQueue" {
            let holders = self
                .state
                .workloads
                .values()
                .filter(|w| {
                    w.reservation
                        .as_ref()
                        .is_some_and(|r| r.cluster_queue == name)
                })
                .count();
            if holders > 0 {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "metadata.name",
                    format!("{holders} admitted workloads still hold quota in it; cancel them or wait for them to finish"),
                )]);
            }
        }
        let errors = config.validate();
        if !errors.is_empty() {
            return Response::refused(errors);
        }
        match self.reconfigure(config) {
            Ok(()) => Response::ok(Outcome::Deleted { object }),
            Err(errors) => Response::refused(errors),
        }
    }

    /// Installs a new configuration, rebuilding the scheduler snapshot from
    /// the records. Refused (nothing changes) if reservations that exist
    /// would no longer fit: quota is never taken away from under running
    /// work by a configuration change.
    fn reconfigure(&mut self, config: Config) -> Result<(), Vec<FieldError>> {
        let snapshot = self.derive_snapshot(&config)?;
        self.state.config = config;
        self.snapshot = snapshot;
        self.state
            .queue_reasons
            .retain(|cq, _| self.state.config.cluster_queues.contains_key(cq));
        // Re-bind pending workloads: their LocalQueue may now point
        // elsewhere, or exist at last.
        self.requeue_all_pending();
        Ok(())
    }

    /// Queues every pending workload under its current binding.
    fn requeue_all_pending(&mut self) {
        let pending: Vec<WorkloadId> = self
            .state
            .workloads
            .values()
            .filter(|w| w.state == WorkloadState::Pending)
            .map(|w| w.id)
            .collect();
        for id in pending {
            self.requeue_binding(id);
        }
    }

    /// A scheduler snapshot of `config` holding every reservation (pending
    /// workloads are added by the caller).
    fn derive_snapshot(&self, config: &Config) -> Result<Snapshot, Vec<FieldError>> {
        let clusters = self.cluster_list();
        let mut snapshot = Snapshot::new(config.clone(), &clusters);
        for (lq, state) in self.snapshot.local_queue_states() {
            snapshot.restore_local_queue_state(lq, *state);
        }
        // A reservation whose ClusterQueue or (flavor, resource) cell is
        // gone would be charged nowhere (the snapshot skips unknown
        // cells), so its quota and devices could be given away twice.
        let mut uncharged = Vec::new();
        for record in self.state.workloads.values() {
            if let Some(admitted) = admitted_of(record) {
                let cq = admitted.pending.cluster_queue.clone();
                let tree = snapshot.tree();
                if tree.cluster_queue(&cq).is_none() {
                    uncharged.push(FieldError::new(
                        format!("ClusterQueue/{cq}"),
                        "metadata.name",
                        format!("admitted workload {} still holds quota in it", record.key()),
                    ));
                }
                for fr in admitted.assignment.usage.keys() {
                    if tree.cell(fr).is_none() {
                        uncharged.push(FieldError::new(
                            format!("ClusterQueue/{cq}"),
                            "spec.resourceGroups",
                            format!(
                                "admitted workload {} still holds {fr}; keep that quota until it ends",
                                record.key()
                            ),
                        ));
                    }
                }
                // Ids are unique, so a restore cannot collide.
                let _ = snapshot.restore_admitted(admitted);
            }
        }
        if !uncharged.is_empty() {
            return Err(uncharged);
        }
        let violations = snapshot.violations();
        if violations.is_empty() {
            Ok(snapshot)
        } else {
            Err(violations
                .into_iter()
                .map(|v| {
                    FieldError::new(
                        "",
                        "spec.resourceGroups",
                        format!("the change would leave admitted workloads over quota: {v}"),
                    )
                })
                .collect())
        }
    }

    fn cluster_list(&self) -> Vec<Cluster> {
        self.state
            .clusters
            .values()
            .map(|c| c.cluster.clone())
            .collect()
    }

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

    // ----- workloads -----------------------------------------------------

    fn submit(
        &mut self,
        submissions: &[Submission],
        max_pending: Option<u64>,
        admit: &[FreshAdmission],
        at: Timestamp,
    ) -> Response {
        let nothing_waiting = self.snapshot.pending_count() == 0;
        let results: Vec<SubmitResult> = submissions
            .iter()
            .map(|s| self.submit_one(s, max_pending, at))
            .collect();
        let admitted_on_submit = if admit.is_empty() {
            0
        } else {
            self.admit_fresh(admit, &results, nothing_waiting, at)
        };
        Response::ok(Outcome::Submitted {
            results,
            admitted_on_submit,
        })
    }

    /// The leader's planned admissions of workloads this command created.
    /// The plan assumed nothing else waited and that its decisions hold in
    /// order; where either is no longer so, the rest of the plan is dropped
    /// and those workloads wait for the ordinary cycle, which orders them
    /// with everything else.
    fn admit_fresh(
        &mut self,
        admit: &[FreshAdmission],
        results: &[SubmitResult],
        nothing_waiting: bool,
        at: Timestamp,
    ) -> u32 {
        let mut made = 0u32;
        for fresh in admit {
            if !nothing_waiting {
                break;
            }
            let created = match results.get(fresh.submission as usize) {
                Some(SubmitResult::Created { id }) => Some(*id),
                _ => None,
            };
            let Some(id) = created else {
                break;
            };
            if self.admit_one(&fresh.for_workload(id), true, at).is_err() {
                break;
            }
            made += 1;
        }
        self.counters.fresh_admissions += u64::from(made);
        self.counters.fresh_rejected += admit.len() as u64 - u64::from(made);
        made
    }

    /// Plans admissions for `submissions` as the next cycle would make them
    /// once they were queued, for the leader to put in the
    /// `SubmitWorkloads` entry that queues them (see
    /// [`fleetq_scheduler::schedule_fresh`], which answers nothing where
    /// its plan could differ from the cycle's). Leaves out submissions
    /// that would not create a workload.
    pub fn plan_fresh(&self, submissions: &[Submission], now: Timestamp) -> Vec<FreshAdmission> {
        if self.snapshot.pending_count() > 0 || submissions.is_empty() {
            return Vec::new();
        }
        let now = now.max(self.state.now);
        let mut names = std::collections::HashSet::new();
        let mut fresh = Vec::with_capacity(submissions.len());
        for (position, s) in submissions.iter().enumerate() {
            let key = s.workload.key();
            let known = s
                .request_id
                .as_ref()
                .is_some_and(|r| self.state.by_request.contains_key(r))
                || self.state.by_name.contains_key(&key);
            // An inactive submission is kept, not queued: nothing to plan.
            if known || !names.insert(key) || s.workload.spec.inactive {
                continue;
            }
            let Ok(binding) = self.state.config.bind_workload(&s.workload) else {
                continue;
            };
            fresh.push(PendingWorkload {
                // Stands for the submission until apply assigns the id;
                // ordered as the real ids will be.
                id: position as WorkloadId,
                workload: Arc::clone(&s.workload),
                local_queue: binding.local_queue,
                cluster_queue: binding.cluster_queue,
                priority: binding.priority,
                created_at: now,
                not_before: None,
                nominated: false,
                borrow_preemptions: 0,
                reclaimed: 0,
                reclaimed_for: None,
            });
        }
        fleetq_scheduler::schedule_fresh(&self.snapshot, fresh, now, &self.scheduler)
            .into_iter()
            .map(|a| FreshAdmission::planned(a.workload as u32, a))
            .collect()
    }

    fn submit_one(
        &mut self,
        submission: &Submission,
        max_pending: Option<u64>,
        at: Timestamp,
    ) -> SubmitResult {
        if let Some(id) = submission
            .request_id
            .as_ref()
            .and_then(|r| self.state.by_request.get(r))
        {
            return SubmitResult::Existing { id: *id };
        }
        let workload = &submission.workload;
        let key = workload.key();
        if let Some(&id) = self.state.by_name.get(&key) {
            // The same spec again is a retry; another spec under a taken
            // name is a conflict (Kueue's AlreadyExists), not an update.
            let difference = self
                .state
                .workloads
                .get(&id)
                .and_then(|existing| existing.workload.difference(workload));
            return match difference {
                None => SubmitResult::Existing { id },
                Some(d) => SubmitResult::Refused {
                    errors: vec![FieldError::new(
                        format!("Workload/{key}"),
                        d.path.clone(),
                        format!(
                            "workload {:?} already exists in namespace {:?} with another spec: {} is {} there, {} in this submission (cancel it first, or submit under another name)",
                            workload.name, workload.namespace, d.path, d.existing, d.submitted
                        ),
                    )],
                },
            };
        }
        let binding = match self.state.config.bind_workload(workload) {
            Ok(b) => b,
            Err(errors) => return SubmitResult::Refused { errors },
        };
        if let Some(limit) = max_pending.filter(|l| *l > 0) {
            let queued = self.snapshot.pending_in_local_queue(&binding.local_queue);
            if queued as u64 >= limit {
                return SubmitResult::QueueFull {
                    errors: vec![FieldError::new(
                        format!("Workload/{key}"),
                        "spec.queueName",
                        format!(
                            "LocalQueue {:?} is full: it already holds {queued} pending workloads and the limit is {limit} (max_pending_per_local_queue); wait until some are admitted, or cancel some",
                            binding.local_queue
                        ),
                    )],
                };
            }
        }
        let id = self.state.next_id;
        let workload = Arc::clone(workload);
        let queued = if workload.spec.inactive {
            // Kept, not queued (requeue_binding gives it its reason below).
            Ok(())
        } else {
            self.snapshot.add_pending(PendingWorkload {
                id,
                workload: Arc::clone(&workload),
                local_queue: binding.local_queue,
                cluster_queue: binding.cluster_queue,
                priority: binding.priority,
                created_at: at,
                not_before: None,
                nominated: false,
                borrow_preemptions: 0,
                reclaimed: 0,
                reclaimed_for: None,
            })
        };
        if let Err(e) = queued {
            return SubmitResult::Refused {
                errors: vec![FieldError::new(
                    format!("Workload/{key}"),
                    "spec.queueName",
                    e.to_string(),
                )],
            };
        }
        self.state.next_id += 1;
        let mut record = WorkloadRecord {
            id,
            workload,
            request_id: submission.request_id.clone(),
            created_at: at,
            state: WorkloadState::Pending,
            reservation: None,
            cancel_requested: false,
            reason: None,
            history: Vec::new(),
            requeue_count: 0,
            not_before: None,
            nominated: false,
            nominated_on: None,
        };
        record.push_event(at, WorkloadState::Pending, "submitted");
        self.state.by_name.insert(key, id);
        if let Some(r) = &submission.request_id {
            self.state.by_request.insert(r.clone(), id);
        }
        let inactive = record.workload.spec.inactive;
        self.state.workloads.insert(id, record);
        if inactive {
            self.requeue_binding(id);
        }
        self.changed.push(id);
        SubmitResult::Created { id }
    }

    /// The record of `namespace/name`, or the refusal naming the field.
    fn named(&self, namespace: &str, name: &str) -> Result<&WorkloadRecord, Response> {
        let key = format!("{namespace}/{name}");
        let object = format!("Workload/{key}");
        let refuse = |message: String| {
            Response::refused(vec![FieldError::new(&object, "metadata.name", message)])
        };
        let Some(&id) = self.state.by_name.get(&key) else {
            return Err(refuse(format!(
                "workload {name:?} does not exist in namespace {namespace:?}"
            )));
        };
        self.state
            .workloads
            .get(&id)
            .ok_or_else(|| refuse("workload index is inconsistent".into()))
    }

    fn cancel(&mut self, namespace: &str, name: &str, at: Timestamp) -> Response {
        let object = format!("Workload/{namespace}/{name}");
        let record = match self.named(namespace, name) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        let id = record.id;
        match record.state {
            WorkloadState::Pending => {
                self.snapshot.remove_pending(id);
                if let Some(record) = self.record_mut(id) {
                    record.cancel_requested = true;
                    record.reason = None;
                    record.push_event(at, WorkloadState::Cancelled, "cancelled while pending");
                }
            }
            WorkloadState::Admitted | WorkloadState::Running if record.cancel_requested => {
                // Already asked; asking again changes nothing.
            }
            WorkloadState::Admitted | WorkloadState::Running => {
                // Quota follows physical truth: it stays charged until the
                // executor confirms the processes are gone.
                let _ = self.snapshot.mark_evicting(id);
                if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::ReleaseOnCancel) {
                    self.release(id, at);
                }
                if let Some(record) = self.record_mut(id) {
                    record.cancel_requested = true;
                    if let Some(r) = record.reservation.as_mut() {
                        r.stopping = Some("cancelled by user".into());
                    }
                    let state = record.state;
                    record.push_event(
                        at,
                        state,
                        "cancel requested; waiting for the executor to stop it",
                    );
                }
            }
            s => {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "status",
                    format!("workload already ended ({})", s.as_str()),
                )]);
            }
        }
        let state = self
            .state
            .workloads
            .get(&id)
            .map(|r| r.state)
            .unwrap_or(WorkloadState::Cancelled);
        Response::ok(Outcome::Cancelled { id, state })
    }

    /// Kueue's `spec.active` ([`Command::SetWorkloadActive`]). A
    /// deactivated workload that holds quota is evicted as a preempted one
    /// is (quota follows physical truth: released when the executor
    /// confirms the stop) and is not requeued; `requeue_binding` keeps
    /// every inactive workload out of the queues.
    fn set_active(&mut self, namespace: &str, name: &str, active: bool, at: Timestamp) -> Response {
        let object = format!("Workload/{namespace}/{name}");
        let record = match self.named(namespace, name) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        let (id, state) = (record.id, record.state);
        if state.is_terminal() || record.cancel_requested {
            let why = if state.is_terminal() {
                format!("workload already ended ({})", state.as_str())
            } else {
                "workload is being cancelled".to_string()
            };
            return Response::refused(vec![FieldError::new(&object, "status", why)]);
        }
        if record.workload.spec.inactive != active {
            return Response::ok(Outcome::Activation {
                id,
                state,
                changed: false,
            });
        }
        let stopping = record
            .reservation
            .as_ref()
            .is_some_and(|r| r.stopping.is_some());
        if let Some(record) = self.record_mut(id) {
            let mut workload = (*record.workload).clone();
            workload.spec.inactive = !active;
            record.workload = Arc::new(workload);
            let message = match (active, state.is_reserved(), stopping) {
                (true, _, _) => "resumed (spec.active: true)",
                (false, false, _) => "stopped (spec.active: false)",
                (false, true, true) => "stopped (spec.active: false); not requeued once it stops",
                (false, true, false) => {
                    "stopped (spec.active: false); waiting for the executor to stop it"
                }
            };
            record.push_event(at, state, message);
        }
        if state.is_reserved() && !active && !stopping {
            let _ = self.snapshot.mark_evicting(id);
            if let Some(r) = self.record_mut(id).and_then(|r| r.reservation.as_mut()) {
                r.stopping = Some("stopped (spec.active: false)".into());
            }
        }
        if state == WorkloadState::Pending {
            if let Some(record) = self.record_mut(id) {
                record.reason = None;
            }
            self.requeue_binding(id);
        }
        let state = self.state.workloads.get(&id).map_or(state, |r| r.state);
        Response::ok(Outcome::Activation {
            id,
            state,
            changed: true,
        })
    }

    fn admit_batch(&mut self, batch: &AdmitBatch, term: Option<u64>, at: Timestamp) -> Response {
        self.counters.admit_batches += 1;
        let mut outcome = AdmitOutcome::default();
        let other_term = term.is_some_and(|t| t != batch.cycle.term);
        if batch.cycle <= self.state.last_cycle || other_term {
            outcome.stale_batch = true;
            self.counters.stale_batches += 1;
            let n = batch.admissions.len() + batch.preemptions.len();
            self.counters.admissions_rejected += batch.admissions.len() as u64;
            self.counters.preemptions_rejected += batch.preemptions.len() as u64;
            self.counters.rejected("StaleBatch", n as u64);
            outcome.rejected = batch
                .admissions
                .iter()
                .map(|a| a.workload)
                .chain(batch.preemptions.iter().map(|p| p.victim))
                .map(|id| (id, format!("stale batch {:?}", batch.cycle)))
                .take(n)
                .collect();
            return Response::ok(Outcome::Admitted(outcome));
        }
        for p in &batch.preemptions {
            match self.preempt(p.victim, p.preemptor, &p.reason, p.cluster.as_deref(), at) {
                Ok(()) => {
                    outcome.preempted += 1;
                    self.counters.preemptions += 1;
                }
                Err((reason, e)) => {
                    self.counters.preemptions_rejected += 1;
                    self.counters.rejected(reason, 1);
                    outcome.rejected.push((p.victim, e));
                }
            }
        }
        for a in &batch.admissions {
            match self.admit_one(a, false, at) {
                Ok(()) => outcome.admitted += 1,
                Err(e) => {
                    self.counters.admissions_rejected += 1;
                    self.counters.rejected(rejection_reason(&e), 1);
                    outcome.rejected.push((a.workload, e.to_string()));
                }
            }
        }
        if batch.has_decisions() && outcome.admitted == 0 && outcome.preempted == 0 {
            // Every decision was refused: the batch changes nothing, not
            // even the reasons it carries (they were computed from a state
            // that is gone).
            return Response::ok(Outcome::Admitted(outcome));
        }
        self.state.last_cycle = batch.cycle;
        for (id, reason) in &batch.reasons {
            // A nominated workload the cycle no longer sees preempting
            // (its victims' room went elsewhere, the configuration changed)
            // gives up its nomination: it must not go first for ever.
            let denominate = reason.kind != ReasonKind::Preempting;
            let mut cleared = false;
            if let Some(record) = self.record_mut(*id) {
                if record.state == WorkloadState::Pending {
                    record.reason = Some(Box::new(reason.clone()));
                    if denominate && record.nominated {
                        record.nominated = false;
                        record.nominated_on = None;
                        cleared = true;
                    }
                }
            }
            if cleared {
                self.snapshot.set_nominated(*id, false);
            }
        }
        for (cq, reason) in &batch.queue_reasons {
            if self.state.config.cluster_queues.contains_key(cq) {
                self.state.queue_reasons.insert(cq.clone(), reason.clone());
            }
        }
        Response::ok(Outcome::Admitted(outcome))
    }

    /// Admits one pending workload after re-validating the decision
    /// (`fresh`: planned into the entry that submitted it). On error
    /// nothing changed.
    fn admit_one(
        &mut self,
        a: &Admission,
        fresh: bool,
        at: Timestamp,
    ) -> Result<(), fleetq_scheduler::SnapshotError> {
        // Queued since submission or the last requeue (Kueue's
        // admission wait), read before the record changes.
        let queued_since = self.state.workloads.get(&a.workload).map(|r| {
            r.history
                .iter()
                .rev()
                .find(|e| e.state == WorkloadState::Pending)
                .map_or(r.created_at, |e| e.at)
        });
        self.check_not_held(a)?;
        if fresh {
            self.snapshot.admit_fresh(a, at)?;
        } else {
            self.snapshot.admit(a, at)?;
        }
        self.counters.admissions += 1;
        if let Some(since) = queued_since {
            self.counters
                .admission_wait
                .entry(a.cluster_queue.clone())
                .or_default()
                .observe(at.since(since).as_millis() as u64);
        }
        let epoch = self.state.next_epoch;
        self.state.next_epoch += 1;
        let (lq, priority) = self
            .snapshot
            .get_admitted(a.workload)
            .map(|w| (w.pending.local_queue.clone(), w.pending.priority))
            .unwrap_or_default();
        if let Some(record) = self.record_mut(a.workload) {
            record.reservation = Some(Box::new(Reservation {
                epoch,
                cluster_queue: a.cluster_queue.clone(),
                local_queue: lq,
                priority,
                assignment: a.assignment.clone(),
                admitted_at: at,
                budget_charge: a.budget_charge,
                stopping: None,
                after_stop: AfterStop::Requeue,
                started_at: None,
            }));
            record.reason = None;
            record.not_before = None;
            record.nominated = false;
            record.nominated_on = None;
            record.push_event(
                at,
                WorkloadState::Admitted,
                format!(
                    "admitted by ClusterQueue {} to cluster {}",
                    a.cluster_queue, a.assignment.cluster
                ),
            );
        }
        Ok(())
    }

    /// apply()'s side of `Snapshot::borrowing_held_by`, the victim read
    /// from its record: a workload whose reclaimer is pending (or
    /// evicting) may not be admitted by borrowing.
    fn check_not_held(&self, a: &Admission) -> Result<(), fleetq_scheduler::SnapshotError> {
        let Some(reclaimer) = self
            .state
            .workloads
            .get(&a.workload)
            .and_then(|r| reclaimed_for_of(r, &self.state.workloads))
        else {
            return Ok(());
        };
        // Pending as the scheduler sees it (a workload its binding keeps
        // out of the queues waits for nothing), or about to be: this
        // batch's preemptions are applied before its admissions.
        let waits = self.snapshot.waits_or_will(reclaimer);
        if waits
            && self
                .snapshot
                .admission_borrows(&a.cluster_queue, &a.assignment)
        {
            return Err(fleetq_scheduler::SnapshotError::NoLongerFits {
                workload: a.workload,
                detail: format!(
                    "it would borrow while workload {reclaimer}, which took its borrowed quota back, waits to be admitted"
                ),
            });
        }
        Ok(())
    }

    fn preempt(
        &mut self,
        victim: WorkloadId,
        preemptor: WorkloadId,
        reason: &fleetq_scheduler::PreemptionReason,
        room_on: Option<&str>,
        at: Timestamp,
    ) -> Result<(), (&'static str, String)> {
        let Some(p) = self.snapshot.get_pending(preemptor) else {
            return Err((
                "PreemptorNotPending",
                format!("preemptor {preemptor} is not pending any more"),
            ));
        };
        let (p_cq, p_rank) = (
            p.cluster_queue.clone(),
            fleetq_scheduler::policy::Rank {
                priority: p.priority,
                created_at: p.created_at,
            },
        );
        let record = self.state.workloads.get(&victim).ok_or_else(|| {
            (
                "VictimNotReserved",
                format!("victim {victim} does not exist"),
            )
        })?;
        let reservation = record.reservation.as_ref().ok_or_else(|| {
            (
                "VictimNotReserved",
                format!("victim {victim} holds no reservation"),
            )
        })?;
        if reservation.stopping.is_some() {
            return Err((
                "VictimAlreadyStopping",
                format!("victim {victim} is already stopping"),
            ));
        }
        let victim_cq = reservation.cluster_queue.clone();
        let victim_rank = fleetq_scheduler::policy::Rank {
            priority: reservation.priority,
            created_at: record.created_at,
        };
        let shield = (
            borrow_preemptions_of(record),
            self.state.workloads.get(&preemptor).map_or(0, reclaimed_of),
        );
        let proposed = fleetq_scheduler::policy::Proposed {
            preemptor_cq: &p_cq,
            preemptor: p_rank,
            victim_cq: &victim_cq,
            victim: victim_rank,
            victim_borrow_preemptions: shield.0,
            preemptor_reclaimed: shield.1,
            reason: *reason,
        };
        fleetq_scheduler::policy::check_scope(self.snapshot.tree(), &self.state.config, &proposed)
            .map_err(|e| ("PreemptionNotAllowed", format!("victim {victim}: {e}")))?;
        self.snapshot
            .mark_evicting(victim)
            .map_err(|e| ("VictimNotReserved", e.to_string()))?;
        self.counters.evicted(&victim_cq, EVICTED_PREEMPTED);
        if record
            .history
            .iter()
            .any(|e| e.message.starts_with("preempted ("))
        {
            self.counters.preemptions_repeated += 1;
        }
        self.counters.preempted_by(&p_cq, &format!("{reason:?}"));
        // What the victim frees is meant for its preemptor: nominate it,
        // with the cluster the scheduler planned its room on (entries
        // written before decisions named it nominate without a cluster).
        let on = room_on.map(str::to_string);
        self.snapshot.set_nominated(preemptor, true);
        self.snapshot.end_hold_by(preemptor, victim);
        if on.is_some() {
            self.snapshot.set_nominated_on(preemptor, on.clone());
        }
        if let Some(record) = self.record_mut(preemptor) {
            record.nominated = true;
            if on.is_some() {
                record.nominated_on = on;
            }
        }
        if let Some(record) = self.record_mut(victim) {
            let message = format!("preempted ({reason:?}) to admit workload {preemptor}");
            if let Some(r) = record.reservation.as_mut() {
                r.stopping = Some(message.clone());
            }
            let state = record.state;
            record.push_event(at, state, message);
        }
        Ok(())
    }

    // ----- clusters and executors ----------------------------------------

    fn register_cluster(
        &mut self,
        cluster: &Cluster,
        policy: LeasePolicy,
        at: Timestamp,
    ) -> Response {
        let object = format!("Cluster/{}", cluster.name);
        if cluster.name.is_empty() {
            return Response::refused(vec![FieldError::new(&object, "name", "must not be empty")]);
        }
        // Nodes, when reported, must add up to what the cluster reports
        // (none did before nodes existed, so old entries replay alike).
        let problems = cluster.node_problems();
        if !problems.is_empty() {
            return Response::refused(
                problems
                    .into_iter()
                    .map(|p| FieldError::new(&object, "nodes", p))
                    .collect(),
            );
        }
        let mut clusters = self.state.clusters.clone();
        let previous = self.state.clusters.get(&cluster.name).map(|c| &c.cluster);
        let (mut registered, left) =
            nodes_left::merge(previous, cluster, &self.pods_by_node(&cluster.name));
        // Re-registering (new inventory, an agent restart) keeps a drain the
        // operator asked for; anything else comes back Ready.
        let draining = self
            .state
            .clusters
            .get(&cluster.name)
            .is_some_and(|c| c.cluster.state == ClusterState::Draining);
        registered.state = if draining || cluster.state == ClusterState::Draining {
            ClusterState::Draining
        } else {
            ClusterState::Ready
        };
        clusters.insert(
            cluster.name.clone(),
            ClusterRecord {
                cluster: registered,
                lease_policy: policy,
                registered_at: at,
            },
        );
        let list: Vec<Cluster> = clusters.values().map(|c| c.cluster.clone()).collect();
        let mut snapshot = self.snapshot.clone();
        snapshot.set_clusters(&list);
        let violations = snapshot.violations();
        if !violations.is_empty() {
            return Response::refused(
                violations
                    .into_iter()
                    .map(|v| {
                        FieldError::new(
                            &object,
                            "capacity",
                            format!(
                                "reported capacity is below what is already assigned there: {v}"
                            ),
                        )
                    })
                    .collect(),
            );
        }
        self.state.clusters = clusters;
        self.snapshot = snapshot;
        for l in left {
            self.node_left_under(&cluster.name, policy, &l, at);
        }
        Response::ok(Outcome::ClusterRegistered {
            cluster: cluster.name.clone(),
        })
    }

    /// Per node of `cluster`, the workloads whose reservations place pods
    /// there (stopping ones too: their pods may still run).
    fn pods_by_node(&self, cluster: &str) -> BTreeMap<String, Vec<WorkloadId>> {
        let mut out: BTreeMap<String, Vec<WorkloadId>> = BTreeMap::new();
        for record in self.state.workloads.values() {
            let Some(r) = record.reservation.as_ref() else {
                continue;
            };
            if r.assignment.cluster != cluster {
                continue;
            }
            for placed in r.assignment.pod_sets.iter().flat_map(|p| &p.nodes) {
                let ids = out.entry(placed.node.clone()).or_default();
                if ids.last() != Some(&record.id) {
                    ids.push(record.id);
                }
            }
        }
        out
    }

    /// A node left under `l.workload`'s pods: by the cluster's lease
    /// policy, evicted (requeued once its executor confirms the stop) or
    /// kept running, and said in its history either way.
    fn node_left_under(
        &mut self,
        cluster: &str,
        policy: LeasePolicy,
        l: &nodes_left::LeftUnder,
        at: Timestamp,
    ) {
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::NodeLeftIgnored) {
            return;
        }
        let live = self.state.workloads.get(&l.workload).is_some_and(|r| {
            !r.cancel_requested && r.reservation.as_ref().is_some_and(|r| r.stopping.is_none())
        });
        if !live {
            return;
        }
        let what = format!("node {} of cluster {cluster} {} under it", l.node, l.how);
        let message = match policy {
            LeasePolicy::Fence => {
                self.count_involuntary_stop(l.workload, EVICTED_NODE_LOST);
                let _ = self.snapshot.mark_evicting(l.workload);
                format!("{what}; evicted (lease policy Fence): requeued once its executor stops it")
            }
            LeasePolicy::Keep => format!("{what}; kept running (lease policy Keep)"),
        };
        if let Some(r) = self.record_mut(l.workload) {
            if policy == LeasePolicy::Fence {
                if let Some(res) = r.reservation.as_mut() {
                    res.stopping = Some(message.clone());
                    res.after_stop = AfterStop::Requeue;
                }
            }
            let state = r.state;
            r.push_event(at, state, message);
        }
    }

    fn set_cluster_state(&mut self, name: &str, state: ClusterState) {
        if let Some(c) = self.state.clusters.get_mut(name) {
            c.cluster.state = state;
        }
        let list = self.cluster_list();
        self.snapshot.set_clusters(&list);
    }

    fn unknown_cluster(name: &str) -> Response {
        Response::refused(vec![FieldError::new(
            format!("Cluster/{name}"),
            "cluster",
            format!("cluster {name:?} is not registered"),
        )])
    }

    fn reservations_on(&self, cluster: &str) -> Vec<WorkloadId> {
        self.state
            .workloads
            .values()
            .filter(|w| {
                w.reservation
                    .as_ref()
                    .is_some_and(|r| r.assignment.cluster == cluster)
            })
            .map(|w| w.id)
            .collect()
    }

    fn reconcile_cluster(
        &mut self,
        cluster: &str,
        running: &[RunningWorkload],
        at: Timestamp,
    ) -> Response {
        if !self.state.clusters.contains_key(cluster) {
            return Self::unknown_cluster(cluster);
        }
        let reported: BTreeSet<(WorkloadId, Epoch)> =
            running.iter().map(|r| (r.workload, r.epoch)).collect();
        let mut requeued = Vec::new();
        let mut assigned = BTreeSet::new();
        for id in self.reservations_on(cluster) {
            let Some(record) = self.state.workloads.get(&id) else {
                continue;
            };
            let Some(epoch) = record.reservation.as_ref().map(|r| r.epoch) else {
                continue;
            };
            if reported.contains(&(id, epoch)) {
                assigned.insert((id, epoch));
                if record.state == WorkloadState::Admitted {
                    if let Some(record) = self.record_mut(id) {
                        if let Some(r) = record.reservation.as_mut() {
                            r.started_at = Some(at);
                        }
                        record.push_event(at, WorkloadState::Running, "running (reconciled)");
                    }
                }
            } else if record.state == WorkloadState::Running {
                self.count_involuntary_stop(id, EVICTED_NOT_RUNNING);
                // It ran there and is gone: release exactly once. (An
                // admission never reported running is left alone: the
                // reconcile may predate its assignment in this very
                // session, so the agent may be starting it right now. A
                // stop, if one is due, settles it.)
                self.settle_stopped(
                    id,
                    format!("no longer running on cluster {cluster} after its agent reconnected"),
                    at,
                );
                requeued.push(id);
            }
        }
        let stop = running
            .iter()
            .filter(|r| !assigned.contains(&(r.workload, r.epoch)))
            .cloned()
            .collect();
        let was = self.state.clusters.get(cluster).map(|c| c.cluster.state);
        if matches!(was, Some(ClusterState::Unreachable | ClusterState::Lost)) {
            self.set_cluster_state(cluster, ClusterState::Ready);
        }
        Response::ok(Outcome::Reconciled { stop, requeued })
    }

    fn expire_cluster(&mut self, cluster: &str, at: Timestamp) -> Response {
        let Some(policy) = self.state.clusters.get(cluster).map(|c| c.lease_policy) else {
            return Self::unknown_cluster(cluster);
        };
        let (mut requeued, mut kept) = (Vec::new(), Vec::new());
        match policy {
            LeasePolicy::Fence => {
                self.set_cluster_state(cluster, ClusterState::Lost);
                for id in self.reservations_on(cluster) {
                    self.count_involuntary_stop(id, EVICTED_CLUSTER_LOST);
                    // Its agent fenced it: stopped, whatever stop was
                    // already asked of it.
                    self.settle_stopped(
                        id,
                        format!("cluster {cluster} lost its lease; its workloads were fenced"),
                        at,
                    );
                    requeued.push(id);
                }
            }
            LeasePolicy::Keep => {
                self.set_cluster_state(cluster, ClusterState::Unreachable);
                kept = self.reservations_on(cluster);
            }
        }
        Response::ok(Outcome::Expired { requeued, kept })
    }

    fn drain_cluster(&mut self, cluster: &str) -> Response {
        if !self.state.clusters.contains_key(cluster) {
            return Self::unknown_cluster(cluster);
        }
        self.set_cluster_state(cluster, ClusterState::Draining);
        Response::ok(Outcome::Drained {
            cluster: cluster.to_string(),
        })
    }

    fn uncordon_cluster(&mut self, cluster: &str) -> Response {
        let Some(record) = self.state.clusters.get(cluster) else {
            return Self::unknown_cluster(cluster);
        };
        // Only a drain is undone: an unreachable or lost cluster comes
        // back through its agent, not through an operator.
        if record.cluster.state == ClusterState::Draining {
            self.set_cluster_state(cluster, ClusterState::Ready);
        }
        Response::ok(Outcome::Uncordoned {
            cluster: cluster.to_string(),
        })
    }

    /// Wait-for-ready (Kueue's waitForPodsReady): an admission its executor
    /// did not report running within the timeout is evicted: marked
    /// stopping, its quota kept until the executor confirms the stop or its
    /// cluster is fenced (a Running report may have been lost with a
    /// leader). It is then requeued with exponential backoff, or
    /// deactivated (Failed) past the requeue limit.
    fn evict_not_ready(&mut self, workloads: &[RunningWorkload], at: Timestamp) -> Response {
        let Some(policy) = self.scheduler.wait_for_ready else {
            return Response::refused(vec![FieldError::new(
                "",
                "waitForReady",
                "wait-for-ready is not enabled on this control plane",
            )]);
        };
        let (mut requeued, mut deactivated, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for w in workloads {
            let due = self.state.workloads.get(&w.workload).is_some_and(|r| {
                r.state == WorkloadState::Admitted
                    && r.reservation.as_ref().is_some_and(|res| {
                        res.epoch == w.epoch
                            && res.stopping.is_none()
                            && res.admitted_at.saturating_add(policy.timeout) <= at
                    })
            });
            if !due {
                skipped.push(w.workload);
                continue;
            }
            let id = w.workload;
            let count = self
                .state
                .workloads
                .get(&id)
                .map_or(1, |r| r.requeue_count.saturating_add(1));
            let why = format!(
                "not reported running within {} of admission (eviction {count})",
                fleetq_model::time::format_duration(policy.timeout)
            );
            // The executor may have started it after all (a Running report
            // lost with a leader): ask it to stop, and release the quota
            // only once it confirms or its cluster is fenced.
            let deactivate = policy
                .backoff_limit_count
                .is_some_and(|limit| count > limit);
            let (message, after) = if deactivate {
                let message = format!(
                    "deactivated: {why}; the requeue limit is {}",
                    policy.backoff_limit_count.unwrap_or(0)
                );
                (message, AfterStop::Deactivate)
            } else {
                let wait = policy.backoff(count);
                let message = format!(
                    "{why}; requeued, backing off {}",
                    fleetq_model::time::format_duration(wait)
                );
                if let Some(r) = self.record_mut(id) {
                    r.not_before = Some(at.saturating_add(wait));
                }
                (message, AfterStop::BackOff)
            };
            let _ = self.snapshot.mark_evicting(id);
            if let Some(cq) = self
                .state
                .workloads
                .get(&id)
                .and_then(|r| r.reservation.as_ref())
                .map(|r| r.cluster_queue.clone())
            {
                self.counters.evicted(&cq, EVICTED_PODS_READY_TIMEOUT);
            }
            if let Some(r) = self.record_mut(id) {
                r.requeue_count = count;
                if let Some(res) = r.reservation.as_mut() {
                    res.stopping = Some(message.clone());
                    res.after_stop = after;
                }
                let state = r.state;
                r.push_event(
                    at,
                    state,
                    format!("{message}; waiting for its executor to stop it"),
                );
            }
            if deactivate {
                deactivated.push(id);
            } else {
                requeued.push(id);
            }
        }
        Response::ok(Outcome::NotReadyEvicted {
            requeued,
            deactivated,
            skipped,
        })
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
    workloads: &BTreeMap<WorkloadId, WorkloadRecord>,
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
