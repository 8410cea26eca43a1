//! The leader's admission loop (docs/architecture.md §4): whenever the ledger changed
//! (or a timer for time-based reasons passed), run one scheduler cycle on
//! the applied state and propose its decisions as one `AdmitBatch`. The
//! ledger re-validates every decision at apply, so this loop may be stale
//! or run twice without harm; it waits for each batch to apply before the
//! next cycle so that it does not propose the same decisions twice.
//!
//! Admission on submit is the ledger's plan (`Ledger::plan_on_submit`),
//! which the node hands to the proposer when [`LeaderPolicies`] have it
//! on; the proposer calls it on the leader as it writes a submission and
//! itself knows nothing of admission.
//!
//! [`LeaderPolicies`]: crate::leader::LeaderPolicies

use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{
    AdmitBatch, Command, CycleId, Ledger, Outcome, RunningWorkload, WorkloadState,
};
use fleetq_model::Timestamp;
use fleetq_scheduler::{schedule, Decisions};
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::leader::task::{LeaderTask, Office, Wakes};
use crate::metrics::ServerMetrics;
use crate::raft::proposer::Proposer;

/// Statistics of the last cycles, for status and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub cycles: u64,
    pub batches: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub last_cycle_micros: u64,
    pub total_cycle_micros: u64,
}

/// How often the loop looks again without a change (budgets refill and
/// backoffs pass with time).
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The admission loop ([`crate::leader::task`]): on a change to the
/// ledger, on any Raft change and at least every second (budgets refill
/// and backoffs pass with time), one cycle.
pub struct AdmissionLoop {
    pub handle: LedgerHandle,
    pub proposer: Arc<Proposer>,
    pub clock: SharedClock,
    pub stats: watch::Sender<AdmissionStats>,
    pub metrics: ServerMetrics,
    /// The last cycle's sequence number (per term, see [`CycleId`]).
    seq: u64,
    refusals: Refusals,
}

impl AdmissionLoop {
    pub fn new(
        handle: LedgerHandle,
        proposer: Arc<Proposer>,
        clock: SharedClock,
        stats: watch::Sender<AdmissionStats>,
        metrics: ServerMetrics,
    ) -> AdmissionLoop {
        AdmissionLoop {
            handle,
            proposer,
            clock,
            stats,
            metrics,
            seq: 0,
            refusals: Refusals::default(),
        }
    }

    /// Wait-for-ready: evicts admissions not reported running in time
    /// (first, so the quota they free is there for the cycle).
    async fn evict_not_ready(&self, now: Timestamp) {
        let not_ready = {
            let sm = self.handle.read();
            not_ready(&sm.ledger, now)
        };
        if not_ready.is_empty() {
            return;
        }
        if let Err(e) = self
            .proposer
            .write_local(Command::EvictNotReady {
                workloads: not_ready,
            })
            .await
            .written()
        {
            tracing::debug!(error = %e, "wait-for-ready eviction not applied");
        }
    }

    /// Proposes `batch` and learns from its outcome; whether it admitted.
    async fn propose(&mut self, batch: AdmitBatch) -> bool {
        let preemptions = batch.preemptions.clone();
        let written = self
            .proposer
            .write_local(Command::AdmitBatch(batch))
            .await
            .written();
        let w = match written {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(error = %e, "admission batch not applied");
                return false;
            }
        };
        let Outcome::Admitted(o) = w.response.outcome else {
            return false;
        };
        if !o.stale_batch {
            log_preemptions(&self.handle, &preemptions, &o.rejected);
            self.refusals.note(o.changes, &o.rejected);
        }
        self.stats.send_modify(|s| {
            s.batches += 1;
            s.admitted += u64::from(o.admitted);
            s.rejected += o.rejected.len() as u64;
        });
        if !o.rejected.is_empty() {
            tracing::debug!(
                rejected = o.rejected.len(),
                "admission decisions rejected at apply"
            );
        }
        o.admitted > 0
    }
}

impl LeaderTask for AdmissionLoop {
    fn wakes(&self) -> Wakes {
        Wakes {
            every: IDLE_TICK,
            on_raft_change: true,
            on_ledger_change: Some(self.handle.changed()),
        }
    }

    async fn pass(&mut self, office: &Office) {
        let now = self.clock.now();
        self.evict_not_ready(now).await;
        let started = std::time::Instant::now();
        let batch = {
            let sm = self.handle.read();
            // Stay ahead of any batch already accepted in this term (also
            // one forged through a debug endpoint).
            let last = sm.ledger.state().last_cycle;
            if last.term == office.term {
                self.seq = self.seq.max(last.seq);
            }
            self.seq += 1;
            let cycle = CycleId {
                term: office.term,
                seq: self.seq,
            };
            next_batch(&sm.ledger, now, cycle).and_then(|b| self.refusals.withhold(&sm.ledger, b))
        };
        // An admission attempt (Kueue's metric) is a cycle that decided
        // something or found new reasons; the loop also wakes on every
        // Raft metrics change, and a cycle that only confirms what the
        // ledger already says is not counted.
        let took = started.elapsed();
        let elapsed = took.as_micros() as u64;
        self.stats.send_modify(|s| {
            s.cycles += 1;
            s.last_cycle_micros = elapsed;
            s.total_cycle_micros += elapsed;
        });
        if let Some(batch) = batch {
            let admitted = self.propose(batch).await;
            self.metrics.admission_attempt(admitted, took);
        }
    }
}

/// Decisions apply() refused to this leader, by workload, remembered
/// until the ledger changes (`Counters::changes`). The scheduler and
/// apply() share their rules, so a refusal means the state moved between
/// planning and apply; if it did not move since, proposing the same
/// decision again would be refused again, every cycle (issue 33's loop,
/// 500 refused decisions a second). The workload gets a reason instead.
#[derive(Debug, Default)]
pub struct Refusals {
    /// `Counters::changes` when the refusals were noted.
    at: u64,
    why: std::collections::BTreeMap<fleetq_scheduler::WorkloadId, String>,
}

impl Refusals {
    /// Remembers the refused decisions of a batch that left the ledger at
    /// `changes`.
    pub fn note(&mut self, changes: u64, rejected: &[(fleetq_scheduler::WorkloadId, String)]) {
        if changes != self.at {
            self.why.clear();
            self.at = changes;
        }
        for (id, why) in rejected {
            self.why.insert(*id, why.clone());
        }
    }

    /// Drops from `batch` the decisions apply() refused while nothing has
    /// changed since, giving their workloads a reason that says so;
    /// `None` if nothing is left worth proposing.
    pub fn withhold(&mut self, ledger: &Ledger, mut batch: AdmitBatch) -> Option<AdmitBatch> {
        if ledger.counters().changes != self.at {
            self.why.clear();
        }
        if self.why.is_empty() {
            return Some(batch);
        }
        let refused = |id: &fleetq_scheduler::WorkloadId| self.why.get(id);
        let mut withheld = Vec::new();
        batch.admissions.retain(|a| match refused(&a.workload) {
            Some(why) => {
                withheld.push((a.workload, why.clone()));
                false
            }
            None => true,
        });
        batch
            .preemptions
            .retain(|p| match refused(&p.victim).or(refused(&p.preemptor)) {
                Some(why) => {
                    withheld.push((p.preemptor, why.clone()));
                    false
                }
                None => true,
            });
        for (id, why) in withheld {
            let reason = fleetq_scheduler::PendingReason::new(
                fleetq_scheduler::ReasonKind::NotYetConsidered,
                format!(
                    "the leader's last decision for it was refused at apply ({why}); it is tried again once something changes"
                ),
            );
            let changed = ledger
                .workload(id)
                .is_some_and(|r| r.reason.as_deref() != Some(&reason));
            batch.reasons.retain(|(w, _)| *w != id);
            if changed {
                batch.reasons.push((id, reason));
            }
        }
        let worth =
            batch.has_decisions() || !batch.reasons.is_empty() || !batch.queue_reasons.is_empty();
        worth.then_some(batch)
    }
}

/// Logs every preemption apply() accepted, naming both workloads: an
/// operator sees churn in the log, not only in a counter.
fn log_preemptions(
    handle: &LedgerHandle,
    preemptions: &[fleetq_scheduler::Preemption],
    rejected: &[(fleetq_scheduler::WorkloadId, String)],
) {
    if preemptions.is_empty() {
        return;
    }
    let sm = handle.read();
    let name = |id| {
        sm.ledger
            .workload(id)
            .map_or_else(|| format!("#{id}"), |r| r.key())
    };
    for p in preemptions {
        if rejected.iter().any(|(id, _)| *id == p.victim) {
            continue;
        }
        tracing::info!(
            victim = %name(p.victim),
            preemptor = %name(p.preemptor),
            reason = ?p.reason,
            "preempted {} to admit {}",
            name(p.victim),
            name(p.preemptor)
        );
    }
}

/// Admissions past the wait-for-ready timeout that their executor never
/// reported running (the ledger checks again at apply).
pub fn not_ready(ledger: &Ledger, now: Timestamp) -> Vec<RunningWorkload> {
    let Some(policy) = ledger.config().wait_for_ready else {
        return Vec::new();
    };
    let now = now.max(ledger.state().now);
    ledger
        .snapshot()
        .admitted()
        .filter(|a| !a.evicting && a.admitted_at.saturating_add(policy.timeout) <= now)
        .filter_map(|a| ledger.workload(a.pending.id))
        .filter(|r| r.state == WorkloadState::Admitted)
        .filter_map(|r| {
            r.reservation.as_ref().map(|res| RunningWorkload {
                workload: r.id,
                epoch: res.epoch,
            })
        })
        .collect()
}

/// One cycle: the decisions plus changed reasons, or `None` when the cycle
/// would change nothing.
pub fn next_batch(ledger: &Ledger, now: Timestamp, cycle: CycleId) -> Option<AdmitBatch> {
    let now = now.max(ledger.state().now);
    let decisions = schedule(ledger.snapshot(), now, ledger.scheduler_config());
    batch_of(ledger, decisions, cycle)
}

fn batch_of(ledger: &Ledger, decisions: Decisions, cycle: CycleId) -> Option<AdmitBatch> {
    let reasons: Vec<_> = decisions
        .pending
        .into_iter()
        .filter(|(id, reason)| {
            ledger
                .workload(*id)
                .is_some_and(|r| r.reason.as_deref() != Some(reason))
        })
        .collect();
    let queue_reasons: Vec<_> = decisions
        .queue_reasons
        .into_iter()
        .filter(|(cq, reason)| ledger.state().queue_reasons.get(cq) != Some(reason))
        .collect();
    let batch = AdmitBatch {
        cycle,
        admissions: decisions.admissions,
        preemptions: decisions.preemptions,
        reasons,
        queue_reasons,
    };
    if batch.has_decisions() || !batch.reasons.is_empty() || !batch.queue_reasons.is_empty() {
        Some(batch)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use fleetq_ledger::{LeasePolicy, Request, Submission};
    use fleetq_model::workload::{PodSet, WorkloadSpec};
    use fleetq_model::{Cluster, ClusterState, Quantity, Workload};
    use fleetq_scheduler::{Preemption, PreemptionReason};

    use super::*;

    const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team}
spec: {clusterQueue: team}
"#;

    fn apply(ledger: &mut Ledger, at: u64, command: Command) -> fleetq_ledger::Response {
        ledger.apply(&Request {
            at: Timestamp(at),
            command,
        })
    }

    fn workload(name: &str) -> Submission {
        Submission {
            request_id: None,
            workload: Arc::new(Workload {
                namespace: "default".into(),
                name: name.into(),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: "team".into(),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: BTreeMap::from([(
                            "nvidia.com/gpu".to_string(),
                            Quantity::units(4),
                        )]),
                        topology_request: None,
                    }],
                    ..WorkloadSpec::default()
                },
            }),
        }
    }

    /// A decision apply() refuses is not proposed again while the ledger
    /// has not changed: the workload gets a reason instead, once; after a
    /// change the decision may be tried again.
    #[test]
    fn a_refused_decision_waits_for_a_change() {
        let mut ledger = Ledger::default();
        let objects = fleetq_model::kueue::import_manifests(CONFIG)
            .expect("config imports")
            .into_iter()
            .map(|d| d.object)
            .collect();
        assert!(apply(&mut ledger, 1, Command::ApplyObjects { objects }).is_ok());
        let cluster = Cluster {
            nodes: Vec::new(),
            name: "east".into(),
            labels: BTreeMap::new(),
            capacity: BTreeMap::from([(
                "h100".to_string(),
                BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity::units(8))]),
            )]),
            state: ClusterState::Ready,
        };
        let register = Command::RegisterCluster {
            cluster,
            lease_policy: LeasePolicy::Fence,
        };
        assert!(apply(&mut ledger, 2, register).is_ok());
        let submit = |names: &[&str]| Command::SubmitWorkloads {
            submissions: names.iter().map(|n| workload(n)).collect(),
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        };
        assert!(apply(&mut ledger, 3, submit(&["a", "b"])).is_ok());
        let (a, b) = (1, 2);
        // A forged decision apply() refuses: b preempting a (equal
        // priority, which LowerPriority forbids).
        let forged = AdmitBatch {
            cycle: CycleId { term: 1, seq: 1 },
            preemptions: vec![Preemption {
                victim: a,
                preemptor: b,
                reason: PreemptionReason::InClusterQueue,
                grace_period: None,
                cluster: None,
            }],
            ..AdmitBatch::default()
        };
        let response = apply(&mut ledger, 4, Command::AdmitBatch(forged.clone()));
        let Outcome::Admitted(outcome) = response.outcome else {
            panic!("{response:?}");
        };
        assert_eq!(outcome.rejected.len(), 1);
        assert_eq!(outcome.changes, ledger.counters().changes);
        let mut refusals = Refusals::default();
        refusals.note(outcome.changes, &outcome.rejected);
        // Proposed again unchanged: withheld, with a reason for b.
        let again = AdmitBatch {
            cycle: CycleId { term: 1, seq: 2 },
            ..forged.clone()
        };
        let withheld = refusals
            .withhold(&ledger, again.clone())
            .expect("the reason is worth proposing");
        assert!(!withheld.has_decisions());
        assert_eq!(withheld.reasons.len(), 1);
        assert_eq!(withheld.reasons[0].0, b);
        assert!(apply(&mut ledger, 5, Command::AdmitBatch(withheld)).is_ok());
        // Its reason is now on record: nothing left to propose.
        assert!(refusals.withhold(&ledger, again.clone()).is_none());
        // Something changes (a new submission): it may be tried again.
        assert!(apply(&mut ledger, 6, submit(&["c"])).is_ok());
        let tried = refusals
            .withhold(&ledger, again.clone())
            .expect("tried again");
        assert_eq!(tried.preemptions.len(), 1);
        // Refused again, but a change applied before the leader read the
        // outcome (a cluster coming back): the refusal is remembered
        // against the batch's own apply, so that change lets it through.
        let third = AdmitBatch {
            cycle: CycleId { term: 1, seq: 4 },
            ..forged
        };
        let response = apply(&mut ledger, 7, Command::AdmitBatch(third.clone()));
        let Outcome::Admitted(outcome) = response.outcome else {
            panic!("{response:?}");
        };
        assert!(apply(&mut ledger, 8, submit(&["d"])).is_ok());
        refusals.note(outcome.changes, &outcome.rejected);
        let tried = refusals.withhold(&ledger, third).expect("tried again");
        assert_eq!(tried.preemptions.len(), 1);
    }
}
