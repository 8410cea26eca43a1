//! Fairness, side by side in one run: the same bursty multi-tenant mix on
//! 256 GPUs under strict priority, BestEffortFIFO without fair sharing,
//! and fair sharing (Kueue's Configuration `fairSharing.enable`), driven
//! through the real scheduler and the real apply() with executors that
//! start at once and run each workload for its duration.
//!
//! Four tenants, each a ClusterQueue with no quota of its own under one
//! cohort that holds all 256 GPUs (so what each gets is decided by the
//! policy, not by nominal quotas), with fair-sharing weights 1, 1, 2, 4.
//! Every tenant submits bursts of 1-8-GPU workloads of 5-30 minutes,
//! always more than the fleet can run. Reported per mode: Jain's fairness
//! index of GPU-time per weight over the run, (sum x)^2 / (n * sum x^2)
//! with x = GPU-seconds / weight (1.0 when every tenant got its weighted
//! share), the GPU-time of each tenant, and the mean and p99 wait from
//! submission to first admission.
//!
//! `cargo bench -p fleetq-ledger --bench fairness` (a few seconds).

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetq_ledger::{
    AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Phase, Request, StatusReport, Submission,
    WorkloadState,
};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp};
use fleetq_scheduler::schedule;

const GPU: &str = "nvidia.com/gpu";
const TENANTS: [(&str, u32, &str); 4] = [
    ("t1", 1, "p1"),
    ("t2", 1, "p2"),
    ("t3", 2, "p3"),
    ("t4", 4, "p4"),
];
/// Four clusters of 64 GPUs.
const CLUSTERS: usize = 4;
const GPUS_PER_CLUSTER: u64 = 64;
/// Simulated length of a run, and the step of the simulation.
const HORIZON_MS: u64 = 6 * 3600 * 1000;
const STEP_MS: u64 = 1000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    StrictPriority,
    BestEffortFifo,
    FairSharing,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::StrictPriority => "strict priority",
            Mode::BestEffortFifo => "BestEffortFIFO, no fair sharing",
            Mode::FairSharing => "fair sharing (weights 1, 1, 2, 4)",
        }
    }
}

fn config(mode: Mode) -> String {
    let mut y = String::from(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: fleet}\nspec:\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100\n      resources:\n      - {name: \"nvidia.com/gpu\", nominalQuota: 256}\n",
    );
    for (i, (name, weight, class)) in TENANTS.iter().enumerate() {
        let preemption = match mode {
            // Higher priority takes what lower priority holds.
            Mode::StrictPriority => "  preemption: {reclaimWithinCohort: LowerPriority, withinClusterQueue: LowerPriority}\n",
            Mode::BestEffortFifo => "",
            Mode::FairSharing => "  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}\n",
        };
        y.push_str(&format!(
            "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n  cohortName: fleet\n  fairSharing: {{weight: {weight}}}\n{preemption}  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100\n      resources:\n      - {{name: \"nvidia.com/gpu\", nominalQuota: 0}}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {{namespace: default, name: {name}}}\nspec: {{clusterQueue: {name}}}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {{name: {class}}}\nvalue: {}\n",
            // Strict priority: t4 over t3 over t2 over t1.
            if mode == Mode::StrictPriority { 10i32.pow(i as u32 + 1) } else { 0 }
        ));
    }
    if mode == Mode::FairSharing {
        y.push_str("---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: true\n");
    }
    y
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

struct Job {
    tenant: usize,
    at_ms: u64,
    gpus: u64,
    duration_ms: u64,
}

/// Bursts from every tenant: every 10-20 minutes, 30-60 workloads of 1,
/// 2, 4 or 8 GPUs for 5-30 minutes: each tenant alone asks for about 200
/// GPUs at a time, so all four together keep the fleet oversubscribed.
fn arrivals(seed: u64) -> Vec<Job> {
    let mut rng = Lcg(seed);
    let mut jobs = Vec::new();
    for tenant in 0..TENANTS.len() {
        let mut t = rng.next(10 * 60_000);
        while t < HORIZON_MS {
            for _ in 0..30 + rng.next(31) {
                jobs.push(Job {
                    tenant,
                    at_ms: t,
                    gpus: [1, 2, 4, 8][rng.next(4) as usize],
                    duration_ms: (5 + rng.next(26)) * 60_000,
                });
            }
            t += (10 + rng.next(11)) * 60_000;
        }
    }
    jobs.sort_by_key(|j| j.at_ms);
    jobs
}

struct Run {
    gpu_ms: [u64; 4],
    waits_ms: Vec<u64>,
    preemptions: u64,
}

fn run(mode: Mode, seed: u64) -> Run {
    let mut ledger = Ledger::default();
    ledger.set_invariant_checks(false);
    let mut now = 1_000_000u64;
    let apply = |ledger: &mut Ledger, now: u64, command: Command| {
        let r = ledger.apply(&Request {
            at: Timestamp(now),
            command,
        });
        assert!(r.is_ok(), "{r:?}");
    };
    let objects: Vec<Object> = import_manifests(&config(mode))
        .expect("the bench configuration imports")
        .into_iter()
        .map(|d| d.object)
        .collect();
    apply(&mut ledger, now, Command::ApplyObjects { objects });
    for c in 0..CLUSTERS {
        let cluster = Cluster {
            nodes: Vec::new(),
            name: format!("c{c}"),
            labels: BTreeMap::new(),
            capacity: BTreeMap::from([(
                "h100".to_string(),
                BTreeMap::from([(GPU.to_string(), Quantity::units(GPUS_PER_CLUSTER))]),
            )]),
            state: ClusterState::Ready,
        };
        apply(
            &mut ledger,
            now,
            Command::RegisterCluster {
                cluster,
                lease_policy: LeasePolicy::Fence,
            },
        );
    }
    let start = now;
    let jobs = arrivals(seed);
    let mut next_job = 0;
    let mut submitted_at: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
    let mut first_admission: BTreeMap<String, u64> = BTreeMap::new();
    let mut running_since: BTreeMap<u64, u64> = BTreeMap::new();
    let mut gpu_ms = [0u64; 4];
    let mut seq = 0;
    while now - start < HORIZON_MS {
        let mut submissions = Vec::new();
        while next_job < jobs.len() && jobs[next_job].at_ms <= now - start {
            let j = &jobs[next_job];
            let name = format!("j{next_job}");
            let (tenant, _, class) = TENANTS[j.tenant];
            submitted_at.insert(name.clone(), (j.tenant, now, j.duration_ms));
            submissions.push(Submission {
                request_id: None,
                workload: Arc::new(fleetq_model::Workload {
                    namespace: "default".into(),
                    name,
                    labels: BTreeMap::new(),
                    spec: WorkloadSpec {
                        queue_name: tenant.into(),
                        priority_class_name: Some(class.into()),
                        pod_sets: vec![PodSet {
                            name: "main".into(),
                            count: 1,
                            min_count: None,
                            requests: BTreeMap::from([(GPU.to_string(), Quantity::units(j.gpus))]),
                            topology_request: None,
                        }],
                        ..WorkloadSpec::default()
                    },
                }),
            });
            next_job += 1;
        }
        if !submissions.is_empty() {
            apply(
                &mut ledger,
                now,
                Command::SubmitWorkloads {
                    submissions,
                    max_pending_per_local_queue: None,
                    admit: Vec::new(),
                },
            );
        }
        let decisions = schedule(ledger.snapshot(), Timestamp(now), ledger.scheduler_config());
        if !decisions.admissions.is_empty() || !decisions.preemptions.is_empty() {
            seq += 1;
            apply(
                &mut ledger,
                now,
                Command::AdmitBatch(AdmitBatch {
                    cycle: CycleId { term: 1, seq },
                    admissions: decisions.admissions,
                    preemptions: decisions.preemptions,
                    reasons: Vec::new(),
                    queue_reasons: Vec::new(),
                }),
            );
        }
        // Executors: start what is admitted, stop what must stop, end what
        // ran its duration; GPU-time accrues per step while running.
        let mut reports = Vec::new();
        for (id, record) in &ledger.state().workloads {
            let Some(r) = &record.reservation else {
                continue;
            };
            let name = &record.workload.name;
            let (tenant, _, duration) = submitted_at[name];
            let gpus = record.workload.spec.total_gpus();
            let phase = if r.stopping.is_some() {
                running_since.remove(id);
                Phase::Stopped
            } else if record.state == WorkloadState::Admitted {
                first_admission.entry(name.clone()).or_insert(now);
                running_since.insert(*id, now);
                Phase::Running
            } else {
                gpu_ms[tenant] += gpus * STEP_MS;
                let since = running_since.get(id).copied().unwrap_or(now);
                if now < since + duration {
                    continue;
                }
                running_since.remove(id);
                Phase::Succeeded
            };
            reports.push(StatusReport {
                cluster: r.assignment.cluster.clone(),
                workload: *id,
                epoch: r.epoch,
                phase,
                message: String::new(),
            });
        }
        if !reports.is_empty() {
            apply(&mut ledger, now, Command::ReportStatus { reports });
        }
        now += STEP_MS;
    }
    let waits_ms = first_admission
        .iter()
        .map(|(name, at)| at - submitted_at[name].1)
        .collect();
    Run {
        gpu_ms,
        waits_ms,
        preemptions: ledger.counters().preemptions,
    }
}

fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

fn main() {
    let seed = 7;
    println!(
        "fairness: 256 GPUs ({CLUSTERS} clusters of {GPUS_PER_CLUSTER}), tenants t1..t4 with weights 1, 1, 2, 4, {} h of bursty arrivals (seed {seed})",
        HORIZON_MS / 3_600_000
    );
    println!(
        "{:<36} {:>6} {:>34} {:>10} {:>10} {:>11}",
        "mode", "Jain", "GPU-hours t1 / t2 / t3 / t4", "mean wait", "p99 wait", "preemptions"
    );
    for mode in [
        Mode::StrictPriority,
        Mode::BestEffortFifo,
        Mode::FairSharing,
    ] {
        let r = run(mode, seed);
        let per_weight: Vec<f64> = r
            .gpu_ms
            .iter()
            .zip(TENANTS)
            .map(|(ms, (_, w, _))| *ms as f64 / f64::from(w))
            .collect();
        let mut waits = r.waits_ms.clone();
        waits.sort_unstable();
        let mean = waits.iter().sum::<u64>() as f64 / waits.len().max(1) as f64;
        let p99 = waits
            .get((waits.len() * 99 / 100).min(waits.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0);
        let hours: Vec<String> = r
            .gpu_ms
            .iter()
            .map(|ms| format!("{:.0}", *ms as f64 / 3_600_000.0))
            .collect();
        println!(
            "{:<36} {:>6.3} {:>34} {:>9.0}s {:>9.0}s {:>11}",
            mode.name(),
            jain(&per_weight),
            hours.join(" / "),
            mean / 1000.0,
            p99 as f64 / 1000.0,
            r.preemptions
        );
    }
}
