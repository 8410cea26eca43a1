//! `EvictNotReady` (wait-for-ready): re-checked against the stamp at apply,
//! quota released exactly once, requeue with backoff, deactivation past the
//! limit, and nothing at all when the feature is off.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetq_ledger::{
    AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Outcome, Phase, Request, RunningWorkload,
    StatusReport, Submission, WorkloadState,
};
use fleetq_ledger::{LedgerConfig, WaitForReady};
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Timestamp, Workload};
use fleetq_scheduler::schedule;

fn config() -> String {
    fleetq_testkit::kueue::one_queue("h100-80gb", "team-a", "team-a", 8)
}

struct Harness {
    ledger: Ledger,
    now: u64,
    seq: u64,
}

impl Harness {
    fn new(wait: Option<WaitForReady>) -> Harness {
        let mut h = Harness {
            ledger: Ledger::new(LedgerConfig {
                wait_for_ready: wait,
                ..LedgerConfig::default()
            }),
            now: 1_000,
            seq: 0,
        };
        let objects = import_manifests(&config())
            .expect("config")
            .into_iter()
            .map(|d| d.object)
            .collect();
        assert!(h.apply(Command::ApplyObjects { objects }).errors.is_empty());
        let capacity = BTreeMap::from([(
            "h100-80gb".to_string(),
            BTreeMap::from([("nvidia.com/gpu".to_string(), "8".parse().expect("qty"))]),
        )]);
        h.apply(Command::RegisterCluster {
            cluster: Cluster {
                nodes: Vec::new(),
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity,
                state: ClusterState::Ready,
            },
            lease_policy: LeasePolicy::Fence,
        });
        h
    }

    fn apply(&mut self, command: Command) -> fleetq_ledger::Response {
        let r = self.ledger.apply(&Request {
            at: Timestamp(self.now),
            command,
        });
        assert!(
            self.ledger.violations().is_empty(),
            "{:?}",
            self.ledger.violations()
        );
        r
    }

    fn at(&mut self, ms: u64) {
        self.now = ms;
    }

    fn submit(&mut self, name: &str, gpus: u64) -> u64 {
        let workload = Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: "team-a".into(),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests: BTreeMap::from([(
                        "nvidia.com/gpu".to_string(),
                        fleetq_model::Quantity::from_milli(gpus * 1000),
                    )]),
                    topology_request: None,
                }],
                ..WorkloadSpec::default()
            },
        };
        self.apply(Command::SubmitWorkloads {
            submissions: vec![Submission {
                request_id: None,
                workload: workload.into(),
            }],
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        });
        self.ledger
            .workload_by_name("default", name)
            .expect("submitted")
            .id
    }

    fn cycle(&mut self) -> u32 {
        let decisions = schedule(
            self.ledger.snapshot(),
            Timestamp(self.now),
            self.ledger.scheduler_config(),
        );
        self.seq += 1;
        let r = self.apply(Command::AdmitBatch(AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: self.seq,
            },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            ..AdmitBatch::default()
        }));
        match r.outcome {
            Outcome::Admitted(o) => o.admitted,
            _ => 0,
        }
    }

    fn epoch(&self, id: u64) -> u64 {
        self.ledger
            .workload(id)
            .and_then(|r| r.reservation.as_ref())
            .map(|r| r.epoch)
            .expect("reserved")
    }

    fn evict(&mut self, id: u64, epoch: u64) -> Outcome {
        self.apply(Command::EvictNotReady {
            workloads: vec![RunningWorkload {
                workload: id,
                epoch,
            }],
        })
        .outcome
    }

    fn used(&self) -> u64 {
        self.ledger.snapshot().admitted().count() as u64
    }
}

fn policy(limit: Option<u32>) -> Option<WaitForReady> {
    Some(WaitForReady {
        timeout: Duration::from_secs(10),
        backoff_base: Duration::from_secs(5),
        backoff_max: Duration::from_secs(60),
        backoff_limit_count: limit,
    })
}

#[test]
fn not_due_running_or_other_epoch_is_skipped_and_changes_nothing() {
    let mut h = Harness::new(policy(None));
    let a = h.submit("a", 4);
    assert_eq!(h.cycle(), 1);
    let epoch = h.epoch(a);
    let before = h.ledger.state_hash();
    // Too early (admitted at 1 s, timeout 10 s).
    h.at(5_000);
    assert!(
        matches!(h.evict(a, epoch), Outcome::NotReadyEvicted { skipped, .. } if skipped == vec![a])
    );
    // Another epoch.
    h.at(20_000);
    assert!(
        matches!(h.evict(a, epoch + 7), Outcome::NotReadyEvicted { skipped, .. } if skipped == vec![a])
    );
    assert_eq!(h.ledger.state_hash(), before);
    // Reported running in time: never evicted.
    h.apply(Command::ReportStatus {
        reports: vec![StatusReport {
            cluster: "east".into(),
            workload: a,
            epoch,
            phase: Phase::Running,
            message: String::new(),
        }],
    });
    let running = h.ledger.state_hash();
    assert!(
        matches!(h.evict(a, epoch), Outcome::NotReadyEvicted { skipped, .. } if skipped == vec![a])
    );
    assert_eq!(h.ledger.state_hash(), running);
}

impl Harness {
    /// The executor on `east` confirms the stop of `id`'s admission.
    fn stopped(&mut self, id: u64, epoch: u64) {
        self.apply(Command::ReportStatus {
            reports: vec![StatusReport {
                cluster: "east".into(),
                workload: id,
                epoch,
                phase: Phase::Stopped,
                message: String::new(),
            }],
        });
    }
}

#[test]
fn eviction_stops_first_then_frees_quota_once_backs_off_and_deactivates() {
    let mut h = Harness::new(policy(Some(1)));
    let a = h.submit("a", 8);
    assert_eq!(h.cycle(), 1);
    let epoch = h.epoch(a);
    h.at(12_000);
    assert!(
        matches!(h.evict(a, epoch), Outcome::NotReadyEvicted { ref requeued, .. } if requeued == &vec![a])
    );
    // Its executor may have started it after all (a lost report): the
    // quota stays charged until the stop is confirmed.
    assert_eq!(h.used(), 1, "still charged while it stops");
    let r = h.ledger.workload(a).expect("a");
    assert!(r
        .reservation
        .as_ref()
        .is_some_and(|res| res.stopping.is_some()));
    // The same eviction again is a no-op.
    let hash = h.ledger.state_hash();
    assert!(
        matches!(h.evict(a, epoch), Outcome::NotReadyEvicted { skipped, .. } if skipped == vec![a])
    );
    assert_eq!(h.ledger.state_hash(), hash);
    // Confirmed: released exactly once, Pending, backing off from the eviction.
    h.stopped(a, epoch);
    assert_eq!(h.used(), 0, "released once stopped");
    let r = h.ledger.workload(a).expect("a");
    assert_eq!(r.state, WorkloadState::Pending);
    assert_eq!(r.not_before, Some(Timestamp(17_000)), "backoff base 5 s");
    let hash = h.ledger.state_hash();
    h.stopped(a, epoch);
    assert_eq!(h.ledger.state_hash(), hash, "a repeated Stopped is a no-op");
    // Backing off: not admitted before 17 s; another workload may use the quota.
    h.at(13_000);
    let b = h.submit("b", 8);
    assert_eq!(h.cycle(), 1);
    assert!(h
        .ledger
        .workload(b)
        .is_some_and(|r| r.state == WorkloadState::Admitted));
    assert_eq!(
        h.ledger.workload(a).map(|r| r.state),
        Some(WorkloadState::Pending)
    );
    h.apply(Command::ReportStatus {
        reports: vec![StatusReport {
            cluster: "east".into(),
            workload: b,
            epoch: h.epoch(b),
            phase: Phase::Succeeded,
            message: String::new(),
        }],
    });
    h.at(18_000);
    assert_eq!(h.cycle(), 1, "a is admitted again after its backoff");
    let epoch2 = h.epoch(a);
    assert!(epoch2 > epoch);
    // Second eviction passes the limit of 1 requeue: deactivated once stopped.
    h.at(40_000);
    assert!(
        matches!(h.evict(a, epoch2), Outcome::NotReadyEvicted { ref deactivated, .. } if deactivated == &vec![a])
    );
    assert_eq!(h.used(), 1);
    h.stopped(a, epoch2);
    let r = h.ledger.workload(a).expect("a");
    assert_eq!(r.state, WorkloadState::Failed);
    assert!(r
        .history
        .last()
        .is_some_and(|e| e.message.contains("deactivated")));
    assert_eq!(h.used(), 0);
    // Two evictions of ClusterQueue team-a with Kueue's reason
    // PodsReadyTimeout; the repeated command counted nothing.
    assert_eq!(
        h.ledger.counters().evictions["team-a"],
        [("PodsReadyTimeout".to_string(), 2)].into()
    );
}

#[test]
fn a_fenced_cluster_settles_an_evicted_admission_as_asked() {
    let mut h = Harness::new(policy(Some(0)));
    let a = h.submit("a", 8);
    assert_eq!(h.cycle(), 1);
    let epoch = h.epoch(a);
    h.at(12_000);
    h.evict(a, epoch);
    assert_eq!(h.used(), 1);
    // The agent never confirms; its lease runs out (policy fence): it has
    // fenced itself, so the eviction completes, deactivated as asked.
    h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    assert_eq!(h.used(), 0);
    assert_eq!(
        h.ledger.workload(a).map(|r| r.state),
        Some(WorkloadState::Failed)
    );
}

#[test]
fn without_wait_for_ready_the_command_is_refused() {
    let mut h = Harness::new(None);
    let a = h.submit("a", 4);
    h.cycle();
    let epoch = h.epoch(a);
    h.at(1_000_000);
    let before = h.ledger.state_hash();
    let r = h.apply(Command::EvictNotReady {
        workloads: vec![RunningWorkload { workload: a, epoch }],
    });
    assert!(!r.errors.is_empty());
    assert_eq!(r.errors[0].path, "waitForReady");
    assert_eq!(h.ledger.state_hash(), before);
}
