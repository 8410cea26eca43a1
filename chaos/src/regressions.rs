//! Regression scenarios: the real quota bugs of this class in Kueue,
//! each replayed against fleetq as a simulation plan built around its
//! mechanism (the seed only jitters the timing). Each is named after the
//! mechanism, not the issue number, and runs through the same checker as
//! the random runs, plus the final "nothing stranded" check every run
//! ends with.
//!
//! ```text
//! fleetq-chaos sim --scenario regressions --seeds 20      # all, 20 seeds each
//! fleetq-chaos sim --scenario gang-finishes-piecemeal --seed 3
//! ```

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::agents::AgentFault;
use crate::plan::{
    base_config, config_with_quota, Action, Fault, MidBatch, Plan, PlannedPodSet, PlannedWorkload,
    SplitKind, Weather,
};

/// One regression scenario.
pub struct Regression {
    /// The mechanism, as `--scenario` takes it.
    pub name: &'static str,
    /// The Kueue issue(s) it comes from.
    pub kueue: &'static str,
    /// What went wrong there, and what fleetq must do instead.
    pub mechanism: &'static str,
    build: fn(&mut StdRng, Plan) -> Plan,
}

pub const REGRESSIONS: &[Regression] = &[
    Regression {
        name: "preempted-before-durable",
        kueue: "kueue#11480",
        mechanism: "an admission recorded before it is durable is preempted meanwhile; here the leader crashes or is cut off with an AdmitBatch (admissions and preemptions) appended but not applied",
        build: preempted_before_durable,
    },
    Regression {
        name: "evicted-reservation-kept",
        kueue: "kueue#14811",
        mechanism: "an eviction leaves the reservation held with no pods; here wait-for-ready evicts admissions whose agent's reports are lost, and the quota must come back once the stop is confirmed",
        build: evicted_reservation_kept,
    },
    Regression {
        name: "stale-usage-after-restart",
        kueue: "kueue#14609",
        mechanism: "a reclaimable count that is stale after a restart over-admits; here the whole control plane loses power twice while a cohort borrows and reclaims, and usage is rebuilt from the log",
        build: stale_usage_after_restart,
    },
    Regression {
        name: "lost-cluster-holds-quota",
        kueue: "kueue#14736, kueue#11346",
        mechanism: "a lost remote copy holds quota forever; here an agent crashes or is cut off for good, and its lease must release the quota to run the work elsewhere",
        build: lost_cluster_holds_quota,
    },
    Regression {
        name: "stale-cache-after-failover",
        kueue: "kueue#10495",
        mechanism: "a new leader schedules from a stale cache; here two failovers land while the quota keeps changing, and every decision is re-validated against the applied state",
        build: stale_cache_after_failover,
    },
    Regression {
        name: "slice-charged-twice",
        kueue: "kueue#9322",
        mechanism: "one slice is charged twice; here multi-pod-set workloads are submitted and admitted over lossy links (retried submissions, re-proposed batches) and each must be charged exactly once",
        build: slice_charged_twice,
    },
    Regression {
        name: "rejected-start-keeps-quota",
        kueue: "kueue#6035",
        mechanism: "a rejected admission check never releases quota; here half the admissions fail at start on the cluster, and their quota must come back for the rest",
        build: rejected_start_keeps_quota,
    },
    Regression {
        name: "concurrent-cohort-reclaim",
        kueue: "kueue#804",
        mechanism: "concurrent reclaims in one cohort over-admit; here two ClusterQueues reclaim from a borrower at once while the leader is cut off mid-batch",
        build: concurrent_cohort_reclaim,
    },
    Regression {
        name: "gang-finishes-piecemeal",
        kueue: "(gang scheduling)",
        mechanism: "a gang whose pods finish one by one returns quota early; here the quota must stay charged until its last pod ends, also across an agent crash",
        build: gang_finishes_piecemeal,
    },
    Regression {
        name: "reports-lost-in-flight",
        kueue: "(agents)",
        mechanism: "a status that never reaches the control plane leaves an admission looking unstarted for good; here an agent's messages are lost for under a lease while its workloads start and end, without wait-for-ready to evict them, and the lost reports must be sent again",
        build: reports_lost_in_flight,
    },
];

/// The regression named `name`.
pub fn find(name: &str) -> Option<&'static Regression> {
    REGRESSIONS.iter().find(|r| r.name == name)
}

impl Regression {
    /// This scenario's plan for `seed` on `nodes` control-plane nodes.
    pub fn plan(&self, seed: u64, nodes: u64) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x005e_ed0f_4e67);
        let mut plan = (self.build)(&mut rng, Plan::empty(seed, nodes, base_config()));
        plan.scenario = Some(self.name);
        plan
    }
}

fn ms(rng: &mut StdRng, range: std::ops::Range<u64>) -> Duration {
    Duration::from_millis(rng.gen_range(range))
}

fn workload(name: String, gpus: u32, duration_s: u64, delay_ms: u64) -> PlannedWorkload {
    PlannedWorkload::simple(name, gpus, duration_s, delay_ms)
}

/// ClusterQueues `queues` (name, nominal GPUs) in one cohort `pool` (when
/// more than one), each with a LocalQueue of the same name; preemption of
/// lower priority within a queue and reclaim of anything lent; priority
/// classes `low` (10) and `high` (1000).
fn config(queues: &[(&str, u32)]) -> String {
    let mut yaml = String::from(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100-80gb}\n",
    );
    for (name, gpus) in queues {
        let cohort = if queues.len() > 1 {
            "  cohortName: pool\n"
        } else {
            ""
        };
        yaml.push_str(&format!(
            "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{cohort}  namespaceSelector: {{}}\n  preemption:\n    withinClusterQueue: LowerPriority\n    reclaimWithinCohort: Any\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100-80gb\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: {gpus}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{namespace: default, name: {name}}}\nspec: {{clusterQueue: {name}}}\n"
        ));
    }
    for (class, value) in [("low", 10), ("high", 1000)] {
        yaml.push_str(&format!(
            "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: {class}}}\nvalue: {value}\n"
        ));
    }
    yaml
}

fn preempted_before_durable(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.config = config(&[("team-a", 8)]);
    plan.may_preempt = true;
    for i in 0..6 {
        let mut w = workload(format!("low-{i}"), 2, 4, 50);
        w.priority_class = Some("low".into());
        plan.workloads.push(w);
    }
    for i in 0..4 {
        let delay = if i == 0 {
            rng.gen_range(400..1_200)
        } else {
            80
        };
        let mut w = workload(format!("high-{i}"), 2, 2, delay);
        w.priority_class = Some("high".into());
        plan.workloads.push(w);
    }
    plan.faults = vec![
        Fault::LeaderMidBatch {
            at: ms(rng, 300..1_500),
            strike: MidBatch::Crash(ms(rng, 800..3_000)),
        },
        Fault::LeaderMidBatch {
            at: ms(rng, 4_000..6_000),
            strike: MidBatch::Isolate(ms(rng, 1_000..3_000)),
        },
    ];
    plan
}

fn evicted_reservation_kept(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..16)
        .map(|i| workload(format!("w-{i:02}"), 2, 2, rng.gen_range(50..300)))
        .collect();
    // The agents hear their assignments and start them, but their
    // Running reports are lost for longer than wait-for-ready's 2 s:
    // the admissions are evicted while their processes run, and the
    // quota may come back only once the agent confirms they stopped.
    plan.agent_faults = vec![
        AgentFault::Mute {
            agent: 1,
            at: ms(rng, 800..2_000),
            heal_after: ms(rng, 2_200..2_800),
        },
        AgentFault::Mute {
            agent: 2,
            at: ms(rng, 4_500..6_000),
            heal_after: ms(rng, 2_200..2_800),
        },
    ];
    plan
}

fn reports_lost_in_flight(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.wait_for_ready = false;
    plan.workloads = (0..16)
        .map(|i| workload(format!("w-{i:02}"), 2, 1, rng.gen_range(50..300)))
        .collect();
    // Shorter than the fence (3/4 of the 3 s lease): the agents keep
    // their lease and their sessions' fate is the network's, but the
    // Running and Succeeded reports sent meanwhile are lost. Found live
    // (lossy-network): one admission stayed Admitted, 2 GPUs charged.
    plan.agent_faults = vec![
        AgentFault::Mute {
            agent: 1,
            at: ms(rng, 800..2_000),
            heal_after: ms(rng, 600..1_500),
        },
        AgentFault::Mute {
            agent: 2,
            at: ms(rng, 3_000..5_000),
            heal_after: ms(rng, 600..1_500),
        },
    ];
    plan
}

fn stale_usage_after_restart(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.config = config(&[("team-a", 4), ("team-b", 4)]);
    plan.may_preempt = true;
    for i in 0..10 {
        let mut w = workload(format!("a-{i}"), 2, 3, rng.gen_range(20..150));
        w.queue = "team-a".into();
        plan.workloads.push(w);
    }
    for i in 0..6 {
        let mut w = workload(format!("b-{i}"), 2, 2, rng.gen_range(20..300));
        w.queue = "team-b".into();
        plan.workloads.push(w);
    }
    plan.faults = vec![
        Fault::CrashAll {
            at: ms(rng, 1_200..3_000),
            restart_after: ms(rng, 500..2_000),
        },
        Fault::CrashAll {
            at: ms(rng, 5_000..7_000),
            restart_after: ms(rng, 500..2_000),
        },
    ];
    plan
}

fn lost_cluster_holds_quota(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..16)
        .map(|i| {
            let gpus = rng.gen_range(1..=3);
            let duration = rng.gen_range(2..=3);
            workload(format!("w-{i:02}"), gpus, duration, rng.gen_range(50..250))
        })
        .collect();
    plan.agent_faults = vec![AgentFault::Lost {
        agent: rng.gen_range(1..=2),
        at: ms(rng, 1_500..3_000),
        cut: rng.gen_bool(0.5),
    }];
    plan
}

fn stale_cache_after_failover(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..24)
        .map(|i| {
            let gpus = rng.gen_range(1..=3);
            workload(format!("w-{i:02}"), gpus, 2, rng.gen_range(50..250))
        })
        .collect();
    for i in (1..24).step_by(2) {
        let gpus = if (i / 2) % 2 == 0 { 4 } else { 8 };
        plan.after.push((i, Action::Apply(config_with_quota(gpus))));
    }
    plan.at_end.push(Action::Apply(config_with_quota(8)));
    plan.faults = vec![
        Fault::PartitionLeader {
            at: ms(rng, 1_000..2_500),
            heal_after: ms(rng, 1_500..3_000),
        },
        Fault::Split {
            at: ms(rng, 5_000..7_000),
            heal_after: ms(rng, 1_000..3_000),
            kind: SplitKind::LeaderInMinority,
        },
    ];
    plan
}

fn slice_charged_twice(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..14)
        .map(|i| {
            let mut w = workload(format!("w-{i:02}"), 1, 2, rng.gen_range(50..250));
            let workers = if i % 2 == 0 {
                PlannedPodSet::gpu(2, 1)
            } else {
                PlannedPodSet::gpu(1, 2)
            };
            w.pod_sets = vec![PlannedPodSet::gpu(1, 1), workers];
            w
        })
        .collect();
    plan.faults = vec![
        Fault::Network {
            at: ms(rng, 200..800),
            lasting: ms(rng, 4_000..7_000),
            weather: Weather::Loss {
                fail: rng.gen_range(2..=4),
                repair: 100,
            },
        },
        Fault::LeaderMidBatch {
            at: ms(rng, 1_500..3_500),
            strike: MidBatch::Isolate(ms(rng, 1_000..2_000)),
        },
    ];
    plan
}

fn rejected_start_keeps_quota(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..12)
        .map(|i| {
            let mut w = workload(format!("w-{i:02}"), 4, 2, rng.gen_range(30..200));
            if i % 2 == 1 {
                w.exit = 1;
                w.duration_s = 0;
            }
            w
        })
        .collect();
    plan.agent_faults = vec![AgentFault::Crash {
        agent: rng.gen_range(1..=2),
        at: ms(rng, 1_500..4_000),
        restart_after: ms(rng, 500..1_500),
    }];
    plan
}

fn concurrent_cohort_reclaim(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.config = config(&[("team-a", 4), ("team-b", 4), ("team-c", 4)]);
    plan.may_preempt = true;
    for i in 0..6 {
        let mut w = workload(format!("a-{i}"), 2, 5, 20);
        w.queue = "team-a".into();
        plan.workloads.push(w);
    }
    // b and c reclaim together, in bursts with no pause between them.
    for round in 0..3 {
        for (j, queue) in ["team-b", "team-c", "team-b", "team-c"].iter().enumerate() {
            let delay = if j == 0 { rng.gen_range(500..1_500) } else { 0 };
            let mut w = workload(format!("{}-{round}-{j}", &queue[5..]), 2, 2, delay);
            w.queue = (*queue).into();
            plan.workloads.push(w);
        }
    }
    plan.faults = vec![Fault::LeaderMidBatch {
        at: ms(rng, 500..1_500),
        strike: MidBatch::Isolate(ms(rng, 1_000..2_500)),
    }];
    plan
}

fn gang_finishes_piecemeal(rng: &mut StdRng, mut plan: Plan) -> Plan {
    plan.workloads = (0..12)
        .map(|i| {
            let mut w = workload(format!("gang-{i:02}"), 1, 3, rng.gen_range(30..200));
            w.pod_sets = if i % 3 == 2 {
                vec![PlannedPodSet::gpu(2, 2)]
            } else {
                vec![PlannedPodSet::gpu(4, 1)]
            };
            w
        })
        .collect();
    plan.agent_faults = vec![AgentFault::Crash {
        agent: rng.gen_range(1..=2),
        at: ms(rng, 2_000..5_000),
        restart_after: ms(rng, 500..2_000),
    }];
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_plans_follow_the_seed() {
        let mut names: Vec<&str> = REGRESSIONS.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGRESSIONS.len());
        assert_eq!(REGRESSIONS.len(), 10);
        for r in REGRESSIONS {
            assert_eq!(r.plan(3, 3), r.plan(3, 3), "{}", r.name);
            assert_eq!(r.plan(3, 5).nodes, 5);
            assert_eq!(r.plan(3, 3).scenario, Some(r.name));
            assert!(find(r.name).is_some());
            let plan = r.plan(3, 3);
            assert!(
                plan.workloads.iter().all(|w| w.gpus() <= 6),
                "{}: a workload must fit one cluster",
                r.name
            );
        }
        assert!(find("no-such-scenario").is_none());
    }

    #[test]
    fn configs_import() {
        for queues in [vec![("team-a", 8)], vec![("team-a", 4), ("team-b", 4)]] {
            let yaml = config(&queues);
            let docs = fleetq_model::kueue::import_manifests(&yaml).expect("imports");
            assert_eq!(docs.len(), 1 + 2 * queues.len() + 2, "{yaml}");
        }
    }
}
