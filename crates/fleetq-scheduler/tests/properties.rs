//! Property tests over random cohort trees, quotas, clusters and workload
//! streams. After every cycle, applied the way the ledger applies it:
//! - the ledger's re-validation rejects none of the decisions;
//! - no ClusterQueue, cohort node or cluster is above its limit and usage
//!   equals the sum over reservations (invariants 1 and 2);
//! - the same input gives the same decisions;
//! - every workload left pending has a reason.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fleetq_model::cluster_queue::{
    BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueueSpec, FlavorQuotas, PreemptionPolicy,
    QueueingStrategy, ReclaimWithinCohort, ResourceGroup, ResourceQuota, WithinClusterQueue,
};
use fleetq_model::cohort::CohortSpec;
use fleetq_model::flavor::ResourceFlavorSpec;
use fleetq_model::local_queue::{GpuBudget, LocalQueueSpec};
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{
    Cluster, ClusterQueue, ClusterState, Cohort, Config, LocalQueue, Quantity, ResourceFlavor,
    Timestamp, Workload, WorkloadPriorityClass,
};
use fleetq_scheduler::{schedule, PendingWorkload, SchedulerConfig, Snapshot};
use proptest::prelude::*;

const FLAVORS: [&str; 2] = ["gpu-a", "gpu-b"];
const GPU: &str = "nvidia.com/gpu";

#[derive(Clone, Debug)]
struct QueueGen {
    cohort: Option<usize>,
    quotas: [(u64, Option<u64>, Option<u64>); 2],
    strict: bool,
    within: u8,
    reclaim: u8,
    borrow_within: Option<Option<i32>>,
    budget: bool,
}

#[derive(Clone, Debug)]
struct CohortGen {
    parent: Option<usize>,
    quota: Option<u64>,
}

#[derive(Clone, Debug)]
enum Step {
    Submit {
        queue: usize,
        gpus: u64,
        count: u32,
        min: Option<u32>,
        priority: usize,
        minrun: bool,
    },
    Cycle,
    Finish(usize),
    EvictionsDone,
    Advance(u64),
    ClusterDown(usize),
}

fn quota() -> impl Strategy<Value = (u64, Option<u64>, Option<u64>)> {
    (
        0u64..12,
        proptest::option::of(0u64..8),
        proptest::option::of(0u64..12),
    )
        .prop_map(|(n, b, l)| (n, b, l.map(|l| l.min(n))))
}

fn queue(cohorts: usize) -> impl Strategy<Value = QueueGen> {
    (
        proptest::option::of(0..cohorts.max(1)),
        [quota(), quota()],
        any::<bool>(),
        0u8..3,
        0u8..3,
        proptest::option::of(proptest::option::of(0i32..300)),
        proptest::bool::weighted(0.2),
    )
        .prop_map(
            move |(cohort, quotas, strict, within, reclaim, borrow_within, budget)| QueueGen {
                cohort: if cohorts == 0 { None } else { cohort },
                quotas,
                strict,
                within,
                reclaim,
                borrow_within,
                budget,
            },
        )
}

fn step(queues: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..queues, 1u64..6, 1u32..4, proptest::option::of(1u32..4), 0usize..3, proptest::bool::weighted(0.3))
            .prop_map(|(queue, gpus, count, min, priority, minrun)| Step::Submit {
                queue, gpus, count, min: min.map(|m| m.min(count)), priority, minrun
            }),
        3 => Just(Step::Cycle),
        2 => (0usize..1000).prop_map(Step::Finish),
        1 => Just(Step::EvictionsDone),
        1 => (1u64..3_600).prop_map(Step::Advance),
        1 => (0usize..3).prop_map(Step::ClusterDown),
    ]
}

#[derive(Clone, Debug)]
struct World {
    cohorts: Vec<CohortGen>,
    queues: Vec<QueueGen>,
    clusters: Vec<[u64; 2]>,
    steps: Vec<Step>,
    fair_sharing: bool,
}

fn world() -> impl Strategy<Value = World> {
    (0usize..4)
        .prop_flat_map(|n_cohorts| {
            let cohorts = (0..n_cohorts)
                .map(|i| {
                    (
                        proptest::option::of(0..i.max(1)),
                        proptest::option::of(0u64..8),
                    )
                        .prop_map(move |(p, quota)| CohortGen {
                            parent: if i == 0 { None } else { p },
                            quota,
                        })
                })
                .collect::<Vec<_>>();
            (cohorts, proptest::collection::vec(queue(n_cohorts), 1..6))
        })
        .prop_flat_map(|(cohorts, queues)| {
            let n = queues.len();
            (
                Just(cohorts),
                Just(queues),
                proptest::collection::vec([0u64..24, 0u64..24], 1..4),
                proptest::collection::vec(step(n), 1..60),
                any::<bool>(),
            )
        })
        .prop_map(|(cohorts, queues, clusters, steps, fair_sharing)| World {
            cohorts,
            queues,
            clusters,
            steps,
            fair_sharing,
        })
}

fn groups(quotas: &[(u64, Option<u64>, Option<u64>); 2], in_cohort: bool) -> Vec<ResourceGroup> {
    vec![ResourceGroup {
        covered_resources: vec![GPU.into()],
        flavors: FLAVORS
            .iter()
            .zip(quotas)
            .map(|(f, &(n, b, l))| FlavorQuotas {
                name: f.to_string(),
                resources: vec![ResourceQuota {
                    name: GPU.into(),
                    nominal_quota: Quantity::units(n),
                    borrowing_limit: b.filter(|_| in_cohort).map(Quantity::units),
                    lending_limit: l.filter(|_| in_cohort).map(Quantity::units),
                }],
            })
            .collect(),
    }]
}

fn build_config(w: &World) -> Config {
    let mut config = Config::default();
    for f in FLAVORS {
        config.flavors.insert(
            f.into(),
            ResourceFlavor {
                name: f.into(),
                spec: ResourceFlavorSpec::default(),
            },
        );
    }
    for (i, c) in w.cohorts.iter().enumerate() {
        let name = format!("cohort-{i}");
        let parent = c.parent.map(|p| format!("cohort-{p}"));
        let resource_groups = c
            .quota
            .map(|q| groups(&[(q, None, None), (0, None, None)], parent.is_some()))
            .unwrap_or_default();
        config.cohorts.insert(
            name.clone(),
            Cohort {
                name,
                spec: CohortSpec {
                    parent,
                    resource_groups,
                    fair_sharing: None,
                },
            },
        );
    }
    for (i, q) in w.queues.iter().enumerate() {
        let name = format!("cq-{i}");
        let cohort = q.cohort.map(|c| format!("cohort-{c}"));
        let mut spec = ClusterQueueSpec {
            resource_groups: groups(&q.quotas, cohort.is_some()),
            cohort,
            queueing_strategy: if q.strict {
                QueueingStrategy::StrictFIFO
            } else {
                QueueingStrategy::BestEffortFIFO
            },
            ..ClusterQueueSpec::default()
        };
        spec.preemption = PreemptionPolicy {
            within_cluster_queue: [
                WithinClusterQueue::Never,
                WithinClusterQueue::LowerPriority,
                WithinClusterQueue::LowerOrNewerEqualPriority,
            ][q.within as usize],
            reclaim_within_cohort: [
                ReclaimWithinCohort::Never,
                ReclaimWithinCohort::LowerPriority,
                ReclaimWithinCohort::Any,
            ][q.reclaim as usize],
            borrow_within_cohort: match (q.borrow_within, q.reclaim) {
                (Some(threshold), r) if r > 0 => BorrowWithinCohort {
                    policy: BorrowWithinCohortPolicy::LowerPriority,
                    max_priority_threshold: threshold,
                },
                _ => BorrowWithinCohort::default(),
            },
        };
        config.cluster_queues.insert(
            name.clone(),
            ClusterQueue {
                name: name.clone(),
                spec,
            },
        );
        let lq = LocalQueue {
            namespace: "ns".into(),
            name: format!("lq-{i}"),
            spec: LocalQueueSpec {
                cluster_queue: name,
                gpu_budget: q.budget.then_some(GpuBudget {
                    gpu_seconds_per_hour: 36_000,
                    burst_gpu_seconds: 20_000,
                }),
                ..LocalQueueSpec::default()
            },
        };
        config.local_queues.insert(lq.key(), lq);
    }
    for (name, value) in [("p-low", 0), ("p-mid", 100), ("p-high", 1000)] {
        config.priority_classes.insert(
            name.into(),
            WorkloadPriorityClass {
                name: name.into(),
                value,
                description: String::new(),
            },
        );
    }
    let errors = config.validate();
    assert!(errors.is_empty(), "generated config invalid: {errors:?}");
    config
}

fn build_clusters(w: &World) -> Vec<Cluster> {
    w.clusters
        .iter()
        .enumerate()
        .map(|(i, caps)| Cluster {
            nodes: Vec::new(),
            name: format!("c{i}"),
            labels: BTreeMap::new(),
            capacity: FLAVORS
                .iter()
                .zip(caps)
                .filter(|(_, &cap)| cap > 0)
                .map(|(f, &cap)| {
                    (
                        f.to_string(),
                        [(GPU.to_string(), Quantity::units(cap))].into(),
                    )
                })
                .collect(),
            state: ClusterState::Ready,
        })
        .collect()
}

fn run(w: &World) -> Result<(), TestCaseError> {
    let config = build_config(w);
    let mut clusters = build_clusters(w);
    let mut snap = Snapshot::new(config.clone(), &clusters);
    let cfg = SchedulerConfig {
        fair_sharing: w.fair_sharing,
        max_inadmissible_per_queue: 4,
        ..SchedulerConfig::default()
    };
    let mut now = Timestamp::from_secs(10);
    let mut next_id = 1;
    for step in &w.steps {
        now = Timestamp(now.0 + 1);
        match step {
            Step::Submit {
                queue,
                gpus,
                count,
                min,
                priority,
                minrun,
            } => {
                let workload = Workload {
                    namespace: "ns".into(),
                    name: format!("w{next_id}"),
                    labels: BTreeMap::new(),
                    spec: WorkloadSpec {
                        queue_name: format!("lq-{queue}"),
                        priority_class_name: Some(["p-low", "p-mid", "p-high"][*priority].into()),
                        pod_sets: vec![PodSet {
                            name: "main".into(),
                            count: *count,
                            min_count: *min,
                            requests: [(GPU.to_string(), Quantity::units(*gpus))].into(),
                            topology_request: None,
                        }],
                        maximum_execution_time: Some(Duration::from_secs(600)),
                        min_runtime_before_preemption: minrun.then_some(Duration::from_secs(300)),
                        ..WorkloadSpec::default()
                    },
                };
                let binding = config
                    .bind_workload(&workload)
                    .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
                snap.add_pending(PendingWorkload {
                    id: next_id,
                    workload: Arc::new(workload),
                    local_queue: binding.local_queue,
                    cluster_queue: binding.cluster_queue,
                    priority: binding.priority,
                    created_at: now,
                    not_before: None,
                    nominated: false,
                    borrow_preemptions: 0,
                    reclaimed: 0,
                    reclaimed_for: None,
                })
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                next_id += 1;
            }
            Step::Cycle => {
                let decisions = schedule(&snap, now, &cfg);
                prop_assert_eq!(&decisions, &schedule(&snap, now, &cfg), "not deterministic");
                for p in snap.pending() {
                    let admitted = decisions.admissions.iter().any(|a| a.workload == p.id);
                    prop_assert!(
                        admitted || decisions.reason_for(p.id, &p.cluster_queue).is_some(),
                        "pending workload {} has no reason",
                        p.id
                    );
                }
                let rejected = snap.apply(&decisions, now);
                prop_assert!(
                    rejected.is_empty(),
                    "ledger re-validation rejected {:?}",
                    rejected
                );
            }
            Step::Finish(k) => {
                let ids: Vec<u64> = snap.admitted().map(|a| a.pending.id).collect();
                if !ids.is_empty() {
                    snap.release(ids[k % ids.len()], now)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Step::EvictionsDone => {
                let ids: Vec<u64> = snap
                    .admitted()
                    .filter(|a| a.evicting)
                    .map(|a| a.pending.id)
                    .collect();
                for id in ids {
                    snap.release(id, now)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                }
            }
            Step::Advance(secs) => now = Timestamp(now.0 + secs * 1000),
            Step::ClusterDown(k) => {
                let n = clusters.len();
                let c = &mut clusters[k % n];
                c.state = if c.state == ClusterState::Ready {
                    ClusterState::Unreachable
                } else {
                    ClusterState::Ready
                };
                snap.set_clusters(&clusters);
            }
        }
        let violations = snap.violations();
        prop_assert!(violations.is_empty(), "after {:?}: {:?}", step, violations);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn decisions_never_exceed_limits_are_deterministic_and_explain_pending(w in world()) {
        run(&w)?;
    }
}
