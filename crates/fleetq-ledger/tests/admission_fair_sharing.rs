//! Admission fair sharing as Kueue's Configuration sets it
//! (`admissionFairSharing.usageHalfLifeTime`, `resourceWeights`): the
//! replicated settings decide what a finished workload charges its
//! LocalQueue and how fast that usage decays, on every replica alike.

use std::collections::BTreeMap;

use fleetq_ledger::{
    AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Phase, Request, StatusReport, Submission,
};
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp, Workload};
use fleetq_scheduler::{schedule, SchedulerConfig};

const QUEUES: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: shared
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "cpu"]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: cpu, nominalQuota: 64}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: t1}
spec: {clusterQueue: shared}
"#;

const SETTINGS: &str = r#"
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
admissionFairSharing:
  usageHalfLifeTime: 10m
  usageSamplingInterval: 5m
  resourceWeights: {cpu: 0.5}
"#;

struct Harness {
    ledger: Ledger,
    now: u64,
    seq: u64,
}

impl Harness {
    fn new(manifests: &str) -> Harness {
        let mut h = Harness {
            ledger: Ledger::new(SchedulerConfig::default()),
            now: 1_000,
            seq: 0,
        };
        let objects = import_manifests(manifests)
            .expect("manifests")
            .into_iter()
            .map(|d| d.object)
            .collect();
        let r = h.apply(Command::ApplyObjects { objects });
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let cell = |q: &str| q.parse::<Quantity>().expect("qty");
        h.apply(Command::RegisterCluster {
            cluster: Cluster {
                nodes: Vec::new(),
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity: BTreeMap::from([(
                    "h100".to_string(),
                    BTreeMap::from([
                        ("nvidia.com/gpu".to_string(), cell("8")),
                        ("cpu".to_string(), cell("64")),
                    ]),
                )]),
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
        assert!(self.ledger.violations().is_empty());
        r
    }

    /// Submits `name` (2 GPUs and 8 CPUs) and admits it.
    fn admit(&mut self, name: &str) -> u64 {
        let requests = BTreeMap::from([
            ("nvidia.com/gpu".to_string(), Quantity::from_milli(2_000)),
            ("cpu".to_string(), Quantity::from_milli(8_000)),
        ]);
        let workload = Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: "t1".into(),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests,
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
        let decisions = schedule(
            self.ledger.snapshot(),
            Timestamp(self.now),
            self.ledger.scheduler_config(),
        );
        self.seq += 1;
        self.apply(Command::AdmitBatch(AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: self.seq,
            },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            ..AdmitBatch::default()
        }));
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("known");
        assert!(record.reservation.is_some(), "{name} admitted");
        record.id
    }

    fn succeed(&mut self, id: u64) {
        let epoch = self
            .ledger
            .workload(id)
            .and_then(|r| r.reservation.as_ref())
            .map(|r| r.epoch)
            .expect("reserved");
        self.apply(Command::ReportStatus {
            reports: vec![StatusReport {
                cluster: "east".into(),
                workload: id,
                epoch,
                phase: Phase::Succeeded,
                message: String::new(),
            }],
        });
    }

    /// t1's usage (GPU-milliseconds) and pending entry penalty.
    fn usage(&self) -> (u64, u64) {
        let s = self.ledger.snapshot().local_queue_state("default/t1");
        (s.afs.value, s.afs_penalty)
    }
}

#[test]
fn default_usage_counts_gpu_time_only() {
    let mut h = Harness::new(QUEUES);
    let a = h.admit("a");
    // Entry penalty: 2 GPUs x 300 s.
    assert_eq!(h.usage(), (0, 600_000));
    h.now += 10_000;
    h.succeed(a);
    // 2 GPUs x 10 s, plus the penalty folded in.
    assert_eq!(h.usage(), (20_000 + 600_000, 0));
}

#[test]
fn configured_weights_and_half_life_decide_the_usage() {
    let mut h = Harness::new(&format!("{QUEUES}---{SETTINGS}"));
    let a = h.admit("a");
    // Weighted: 2 GPUs x 1 + 8 CPUs x 0.5 = 6 per second, 300 s of
    // penalty.
    assert_eq!(h.usage(), (0, 1_800_000));
    h.now += 10_000;
    h.succeed(a);
    assert_eq!(h.usage(), (60_000 + 1_800_000, 0));
    // One half-life (10m) later, b runs 10 s more: the old usage halves.
    h.now += 600_000;
    let b = h.admit("b");
    h.now += 10_000;
    h.succeed(b);
    let halved = fleetq_scheduler::fair::decay(
        1_860_000,
        std::time::Duration::from_millis(610_000),
        std::time::Duration::from_secs(600),
    );
    assert!(halved < 930_000 && halved > 900_000, "{halved}");
    assert_eq!(h.usage(), (halved + 60_000 + 1_800_000, 0));
}
