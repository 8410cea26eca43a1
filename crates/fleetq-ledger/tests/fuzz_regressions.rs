//! Regressions found by the fuzz targets under fuzz/ (README, "Fuzzing").

use std::collections::BTreeMap;

use fleetq_ledger::{AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Request, Submission};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp, Workload};
use fleetq_scheduler::{schedule, ReasonKind};

const BUDGETED: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-80gb}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: budgeted}
spec:
  clusterQueue: team-a
  gpuBudget: {gpuSecondsPerHour: 3600, burstGpuSeconds: 7200}
"#;

fn apply(ledger: &mut Ledger, at: u64, command: Command) {
    let r = ledger.apply(&Request {
        at: Timestamp(at),
        command,
    });
    assert!(r.is_ok(), "{r:?}");
}

/// command_apply: a follower that installs a snapshot must end up with the
/// state (and hash) of the replicas that applied the log. Re-queueing the
/// pending workloads on import dropped a Misconfigured reason that the
/// scheduler had given (a budgeted GPU workload without a maximum
/// execution time), so the imported ledger's hash differed.
#[test]
fn import_keeps_a_misconfigured_reason_the_scheduler_gave() {
    let mut ledger = Ledger::default();
    let objects: Vec<Object> = import_manifests(BUDGETED)
        .expect("manifests")
        .into_iter()
        .map(|d| d.object)
        .collect();
    apply(&mut ledger, 1_000, Command::ApplyObjects { objects });
    apply(
        &mut ledger,
        2_000,
        Command::RegisterCluster {
            cluster: Cluster {
                nodes: Vec::new(),
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity: BTreeMap::from([(
                    "h100-80gb".to_string(),
                    BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity::units(8))]),
                )]),
                state: ClusterState::Ready,
            },
            lease_policy: LeasePolicy::Fence,
        },
    );
    apply(
        &mut ledger,
        3_000,
        Command::SubmitWorkloads {
            submissions: vec![Submission {
                request_id: None,
                workload: std::sync::Arc::new(Workload {
                    namespace: "default".into(),
                    name: "no-limit".into(),
                    labels: BTreeMap::new(),
                    spec: WorkloadSpec {
                        queue_name: "budgeted".into(),
                        pod_sets: vec![PodSet {
                            name: "main".into(),
                            count: 1,
                            min_count: None,
                            requests: BTreeMap::from([(
                                "nvidia.com/gpu".to_string(),
                                Quantity::units(1),
                            )]),
                            topology_request: None,
                        }],
                        ..WorkloadSpec::default()
                    },
                }),
            }],
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        },
    );
    let decisions = schedule(
        ledger.snapshot(),
        Timestamp(4_000),
        ledger.scheduler_config(),
    );
    assert!(decisions.admissions.is_empty());
    apply(
        &mut ledger,
        4_000,
        Command::AdmitBatch(AdmitBatch {
            cycle: CycleId { term: 1, seq: 1 },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        }),
    );
    let record = ledger
        .workload_by_name("default", "no-limit")
        .expect("submitted");
    let reason = record.reason.clone().expect("the scheduler's reason");
    assert_eq!(reason.kind, ReasonKind::Misconfigured, "{reason:?}");

    let bytes = ledger.export().expect("export");
    let imported = Ledger::import(&bytes, ledger.config().clone()).expect("import");
    assert_eq!(imported.state_hash(), ledger.state_hash());
    let record = imported
        .workload_by_name("default", "no-limit")
        .expect("imported");
    assert_eq!(record.reason.as_ref(), Some(&reason));
}
