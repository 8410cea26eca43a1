//! Progress, not only safety (docs/architecture.md, invariant 7): a burst
//! of mixed work on `fleetq dev`'s sample configuration, driven through the
//! real scheduler and the real apply() with executors that start and stop
//! at once, settles. Every workload ends, and preemption churn stays
//! proportional to the workloads.
//!
//! This once looped forever: a workload reclaimed from a borrower was
//! re-admitted into the quota its preemptor was waiting for, preempted
//! again, and so on (11,073 evictions within a minute on `fleetq dev`).

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

const SAMPLE: &str = include_str!("../../../deploy/dev/sample.yaml");
const GPU: &str = "nvidia.com/gpu";
const MIG: &str = "nvidia.com/mig-1g.10gb";

/// `fleetq dev`'s clusters: 8 H100s and 7 MIG slices each.
fn dev_cluster(name: &str) -> Cluster {
    Cluster {
        nodes: Vec::new(),
        name: name.into(),
        labels: BTreeMap::new(),
        capacity: BTreeMap::from([(
            "h100-80gb".to_string(),
            BTreeMap::from([
                (GPU.to_string(), Quantity::units(8)),
                (MIG.to_string(), Quantity::units(7)),
            ]),
        )]),
        state: ClusterState::Ready,
    }
}

/// A small deterministic generator (no dependency for one test).
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
    name: String,
    duration_ms: u64,
}

/// The burst of issue 24: both teams, 1, 2 or 4 GPUs or 1-2 MIG slices,
/// mostly `low` with some `high`, 20-50 s each.
fn burst(seed: u64, n: usize) -> Vec<(Submission, Job)> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|i| {
            let team = if rng.next(2) == 0 { "team-a" } else { "team-b" };
            let (resource, count) = match rng.next(5) {
                0 => (GPU, 1),
                1 => (GPU, 2),
                2 => (GPU, 4),
                3 => (MIG, 1),
                _ => (MIG, 2),
            };
            let class = if rng.next(5) == 0 { "high" } else { "low" };
            let name = format!("w{i}-{team}");
            let workload = fleetq_model::Workload {
                namespace: "default".into(),
                name: name.clone(),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: team.into(),
                    priority_class_name: Some(class.into()),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: BTreeMap::from([(resource.to_string(), Quantity::units(count))]),
                        topology_request: None,
                    }],
                    ..WorkloadSpec::default()
                },
            };
            let job = Job {
                name,
                duration_ms: 20_000 + rng.next(30_001),
            };
            (
                Submission {
                    request_id: None,
                    workload: Arc::new(workload),
                },
                job,
            )
        })
        .collect()
}

struct Driver {
    ledger: Ledger,
    now: u64,
    seq: u64,
}

impl Driver {
    fn new() -> Driver {
        let mut ledger = Ledger::default();
        ledger.set_invariant_checks(true);
        let mut d = Driver {
            ledger,
            now: 1_000_000,
            seq: 0,
        };
        d.apply_manifests(SAMPLE);
        for name in ["dev-east", "dev-west"] {
            d.apply(Command::RegisterCluster {
                cluster: dev_cluster(name),
                lease_policy: LeasePolicy::Fence,
            });
        }
        d
    }

    /// Queues one workload (no admission planned on submit).
    fn submit(&mut self, s: Submission) {
        self.apply(Command::SubmitWorkloads {
            submissions: vec![s],
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        });
    }

    /// Applies Kueue manifests (they must import).
    fn apply_manifests(&mut self, yaml: &str) {
        let objects: Vec<Object> = import_manifests(yaml)
            .expect("manifests import")
            .into_iter()
            .map(|doc| doc.object)
            .collect();
        self.apply(Command::ApplyObjects { objects });
    }

    fn apply(&mut self, command: Command) {
        let response = self.ledger.apply(&Request {
            at: Timestamp(self.now),
            command,
        });
        assert!(response.is_ok(), "{response:?}");
        let violations = self.ledger.violations();
        assert!(violations.is_empty(), "{violations:?}");
    }

    /// One admission cycle, as the leader's loop runs it.
    fn cycle(&mut self) -> bool {
        let decisions = schedule(
            self.ledger.snapshot(),
            Timestamp(self.now),
            self.ledger.scheduler_config(),
        );
        if decisions.admissions.is_empty() && decisions.preemptions.is_empty() {
            return false;
        }
        self.seq += 1;
        self.apply(Command::AdmitBatch(AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: self.seq,
            },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        }));
        true
    }

    /// Executors that answer at once: admitted starts, stopping stops,
    /// running ends after its duration (counted from its last start).
    fn executors(&mut self, durations: &BTreeMap<String, u64>) -> bool {
        let mut reports = Vec::new();
        for (id, record) in &self.ledger.state().workloads {
            let Some(r) = &record.reservation else {
                continue;
            };
            let phase = if r.stopping.is_some() {
                Phase::Stopped
            } else if record.state == WorkloadState::Admitted {
                Phase::Running
            } else {
                let started = r.started_at.map_or(self.now, |t| t.0);
                // Without a duration it runs until stopped.
                let Some(&wanted) = durations.get(&record.workload.name) else {
                    continue;
                };
                if self.now < started + wanted {
                    continue;
                }
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
        if reports.is_empty() {
            return false;
        }
        self.apply(Command::ReportStatus { reports });
        true
    }
}

/// Runs the burst to the end; returns (preemptions, the most any one
/// workload suffered, the most one preemptor preempted one victim, time
/// to drain in ms).
fn run_burst(seed: u64, n: usize) -> (u64, usize, usize, u64) {
    let mut d = Driver::new();
    let jobs = burst(seed, n);
    let durations: BTreeMap<String, u64> = jobs
        .iter()
        .map(|(_, j)| (j.name.clone(), j.duration_ms))
        .collect();
    let total_ms: u64 = jobs.iter().map(|(_, j)| j.duration_ms).sum();
    d.apply(Command::SubmitWorkloads {
        submissions: jobs.into_iter().map(|(s, _)| s).collect(),
        max_pending_per_local_queue: None,
        admit: Vec::new(),
    });
    let start = d.now;
    // Everything serialised on one GPU would take `total_ms`; the fleet
    // runs much in parallel, so this bound is generous and still finite.
    let deadline = start + total_ms + 60_000;
    loop {
        let decided = d.cycle();
        let reported = d.executors(&durations);
        let open = d
            .ledger
            .state()
            .workloads
            .values()
            .filter(|r| !r.state.is_terminal())
            .count();
        if open == 0 {
            break;
        }
        assert!(
            d.now < deadline,
            "seed {seed}: {open} workloads still open after {} s; {} preemptions",
            (d.now - start) / 1000,
            d.ledger.counters().preemptions
        );
        // A quiet step waits for the next completion (within a second).
        d.now += if decided || reported { 5 } else { 1000 };
    }
    // Per workload, and per (victim, preemptor) pair, from the records'
    // history ("preempted (Reason) to admit workload N").
    let mut most = 0;
    let mut pairs: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in d.ledger.state().workloads.values() {
        let preemptions: Vec<&str> = r
            .history
            .iter()
            .filter(|e| e.message.starts_with("preempted"))
            .filter_map(|e| e.message.rsplit(' ').next())
            .collect();
        most = most.max(preemptions.len());
        for preemptor in preemptions {
            *pairs
                .entry((r.workload.name.clone(), preemptor.to_string()))
                .or_default() += 1;
        }
    }
    let repeated = pairs.values().copied().max().unwrap_or(0);
    if std::env::var_os("TRACE").is_some() {
        for r in d.ledger.state().workloads.values() {
            for e in &r.history {
                if e.message.starts_with("preempted") {
                    eprintln!("{} {} {}", e.at.0, r.workload.name, e.message);
                }
            }
        }
    }
    (
        d.ledger.counters().preemptions,
        most,
        repeated,
        d.now - start,
    )
}

#[test]
fn a_burst_on_the_dev_sample_settles_with_bounded_churn() {
    for seed in 1..=20 {
        let n = 50;
        let (evictions, most, repeated, took) = run_burst(seed, n);
        // Each high-priority workload may displace a few low ones, and each
        // reclaim a borrower or two; never more than one per workload on
        // average. The livelock made thousands.
        assert!(
            evictions <= n as u64,
            "seed {seed}: {evictions} preemptions for {n} workloads in {} s",
            took / 1000
        );
        // A borrower is reclaimed by each owner that needs its quota back,
        // so one workload may be preempted a few times, by different
        // preemptors; the same preemptor taking the same victim again and
        // again is the livelock (issue 24).
        assert!(
            most <= 8,
            "seed {seed}: one workload was preempted {most} times"
        );
        assert!(
            repeated <= 2,
            "seed {seed}: one preemptor preempted the same victim {repeated} times"
        );
    }
}

/// One 6-GPU queue that preempts lower or newer equal priority.
const NEWER_EQUAL: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-80gb}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 6}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team}
spec: {clusterQueue: team}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: p1}
value: 1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: p2}
value: 2
"#;

fn gpu_workload(name: &str, class: &str, gpus: u64) -> Submission {
    queue_workload(name, "team", class, gpus)
}

fn queue_workload(name: &str, queue: &str, class: &str, gpus: u64) -> Submission {
    Submission {
        request_id: None,
        workload: Arc::new(fleetq_model::Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: queue.into(),
                priority_class_name: Some(class.into()),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests: BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
                    topology_request: None,
                }],
                ..WorkloadSpec::default()
            },
        }),
    }
}

/// Issue 33's second livelock: the scheduler chose a newer victim of equal
/// priority that apply() refused, every cycle. Now both read one policy.
#[test]
fn lower_or_newer_equal_priority_preempts_the_newer_workload_once() {
    let mut d = Driver::new();
    d.apply_manifests(NEWER_EQUAL);
    let submit = |d: &mut Driver, s: Submission| {
        d.submit(s);
        d.now += 10;
        d.cycle();
        d.executors(&BTreeMap::new());
    };
    submit(&mut d, gpu_workload("filler", "p2", 4));
    submit(&mut d, gpu_workload("older", "p1", 5));
    submit(&mut d, gpu_workload("newer", "p1", 2));
    let state =
        |d: &Driver, name: &str| d.ledger.workload_by_name("default", name).map(|r| r.state);
    assert_eq!(state(&d, "filler"), Some(WorkloadState::Running));
    assert_eq!(state(&d, "older"), Some(WorkloadState::Pending));
    assert_eq!(state(&d, "newer"), Some(WorkloadState::Running));
    d.apply(Command::CancelWorkload {
        namespace: "default".into(),
        name: "filler".into(),
    });
    for _ in 0..20 {
        d.now += 10;
        d.cycle();
        d.executors(&BTreeMap::new());
    }
    assert_eq!(state(&d, "older"), Some(WorkloadState::Running));
    assert_eq!(state(&d, "newer"), Some(WorkloadState::Pending));
    let counters = d.ledger.counters();
    assert_eq!(counters.preemptions, 1);
    assert_eq!(
        counters.preemptions_rejected, 0,
        "{:?}",
        counters.rejected_decisions
    );
}

/// Soak seed 173396's configuration: cohort `pool` over `left` (cq-1, 2
/// GPUs, fair-sharing weight 0) and `right` (1 GPU of its own; cq-2, none,
/// weight 2, preempting lower priority in its queue), fair sharing with
/// `LessThanInitialShare` only.
const THREE_STEP: &str = r#"
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: true
  preemptionStrategies: [LessThanInitialShare]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: left}
spec: {parentName: pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: right}
spec:
  parentName: pool
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-1}
spec:
  cohortName: left
  namespaceSelector: {}
  fairSharing: {weight: "0"}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-2}
spec:
  cohortName: right
  namespaceSelector: {}
  fairSharing: {weight: "2"}
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-1}
spec: {clusterQueue: cq-1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-2}
spec: {clusterQueue: cq-2}
"#;

/// Soak seed 173396: three workloads took turns for ever under fair
/// sharing, each step by Kueue's rules. `big-2` (cq-2, high) preempts its
/// queue's low `small-a` and `small-b` and borrows two GPUs; `big-1`
/// (cq-1) preempts it by fair sharing (left's share after, 1/3, is below
/// right's, 2/3), borrowing right's own GPU; `small-a` takes that back
/// within right's nominal quota; the smalls are admitted, `big-2` preempts
/// them again, and so on: 147 rounds in 180 s. Taken back twice, `big-1`
/// no longer borrows by preemption, and the run settles.
#[test]
fn a_fair_sharing_three_step_cycle_settles() {
    let mut d = Driver::new();
    d.apply_manifests(THREE_STEP);
    let step = |d: &mut Driver, s: Option<Submission>| {
        if let Some(s) = s {
            d.submit(s);
        }
        d.now += 10;
        let decided = d.cycle();
        d.executors(&BTreeMap::new()) || decided
    };
    step(&mut d, Some(queue_workload("small-a", "lq-2", "low", 1)));
    step(&mut d, Some(queue_workload("small-b", "lq-2", "low", 1)));
    step(&mut d, Some(queue_workload("big-2", "lq-2", "high", 3)));
    step(&mut d, Some(queue_workload("big-1", "lq-1", "high", 3)));
    let mut quiet = 0;
    for _ in 0..400 {
        quiet = if step(&mut d, None) { 0 } else { quiet + 1 };
        if quiet == 3 {
            break;
        }
    }
    let preemptions = d.ledger.counters().preemptions;
    assert_eq!(
        quiet, 3,
        "still preempting after 400 steps: {preemptions} preemptions"
    );
    // At most two rounds of four preemptions (two smalls, big-2, big-1).
    // Then both bigs wait: big-1, taken back twice, for free quota; big-2
    // may not borrow while big-1, which took its borrowed quota back, is
    // pending (`Snapshot::borrowing_held_by`); the smalls run.
    assert!(preemptions <= 10, "{preemptions} preemptions");
    let state =
        |d: &Driver, name: &str| d.ledger.workload_by_name("default", name).map(|r| r.state);
    assert_eq!(state(&d, "big-1"), Some(WorkloadState::Pending));
    assert_eq!(state(&d, "big-2"), Some(WorkloadState::Pending));
    assert_eq!(state(&d, "small-a"), Some(WorkloadState::Running));
    assert_eq!(state(&d, "small-b"), Some(WorkloadState::Running));
    assert_eq!(
        d.ledger.counters().preemptions_rejected,
        0,
        "{:?}",
        d.ledger.counters().rejected_decisions
    );
}

/// An owner with room for one workload and a queue with none of its own.
const OWNER_AND_BORROWER: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: owner}
spec:
  cohortName: pool
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: borrower}
spec:
  cohortName: pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-owner}
spec: {clusterQueue: owner}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-borrower}
spec: {clusterQueue: borrower}
"#;

/// Soak seeds 177246 and 184860, apply()'s side: a victim whose reclaimer
/// is pending may not be admitted by borrowing, whatever the leader
/// proposes; the reclaimer then is.
#[test]
fn apply_refuses_a_victim_borrowing_while_its_reclaimer_waits() {
    let mut d = Driver::new();
    d.apply_manifests(OWNER_AND_BORROWER);
    let submit = |d: &mut Driver, s: Submission| {
        d.submit(s);
        d.now += 10;
    };
    submit(&mut d, queue_workload("victim", "lq-borrower", "low", 4));
    let first = schedule(
        d.ledger.snapshot(),
        Timestamp(d.now),
        d.ledger.scheduler_config(),
    );
    assert_eq!(first.admissions.len(), 1, "{first:?}");
    let borrowed = first.admissions[0].clone();
    assert!(d.cycle());
    d.executors(&BTreeMap::new());
    submit(&mut d, queue_workload("reclaimer", "lq-owner", "low", 4));
    assert!(d.cycle(), "the owner reclaims");
    d.now += 10;
    d.executors(&BTreeMap::new());
    let id = |d: &Driver, name: &str| {
        d.ledger
            .workload_by_name("default", name)
            .map(|r| r.id)
            .expect("exists")
    };
    let (victim, reclaimer) = (id(&d, "victim"), id(&d, "reclaimer"));
    let pending = d.ledger.snapshot().get_pending(victim).expect("requeued");
    assert_eq!(
        d.ledger.snapshot().borrowing_held_by(pending),
        Some(reclaimer)
    );
    // The leader proposes the victim's old borrowing admission again.
    d.seq += 1;
    d.apply(Command::AdmitBatch(AdmitBatch {
        cycle: CycleId {
            term: 1,
            seq: d.seq,
        },
        admissions: vec![borrowed],
        preemptions: Vec::new(),
        reasons: Vec::new(),
        queue_reasons: Vec::new(),
    }));
    assert_eq!(d.ledger.counters().admissions_rejected, 1);
    let state =
        |d: &Driver, name: &str| d.ledger.workload_by_name("default", name).map(|r| r.state);
    assert_eq!(state(&d, "victim"), Some(WorkloadState::Pending));
    assert!(d.cycle());
    assert_eq!(state(&d, "reclaimer"), Some(WorkloadState::Admitted));
    assert_eq!(state(&d, "victim"), Some(WorkloadState::Pending));
}

/// Soak seed 191358: a reclaimer chosen as a victim itself, admitted but
/// evicting, still holds the workload it reclaimed from. It is about to
/// wait again, and the room its victim would borrow is the room it will
/// wait for.
#[test]
fn a_reclaimer_being_evicted_still_holds_its_victim() {
    let mut d = Driver::new();
    d.apply_manifests(&OWNER_AND_BORROWER.replace(
        "preemption: {reclaimWithinCohort: Any}",
        "preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}",
    ));
    let step = |d: &mut Driver, s: Option<Submission>| {
        if let Some(s) = s {
            d.submit(s);
        }
        d.now += 10;
        d.cycle();
    };
    step(
        &mut d,
        Some(queue_workload("victim", "lq-borrower", "low", 4)),
    );
    d.executors(&BTreeMap::new());
    step(
        &mut d,
        Some(queue_workload("reclaimer", "lq-owner", "low", 4)),
    );
    d.executors(&BTreeMap::new());
    step(&mut d, None);
    d.executors(&BTreeMap::new());
    let record = |d: &Driver, name: &str| {
        d.ledger
            .workload_by_name("default", name)
            .map(|r| (r.id, r.state))
            .expect("exists")
    };
    let (reclaimer, state) = record(&d, "reclaimer");
    assert_eq!(state, WorkloadState::Running);
    // A higher-priority workload of the owner's preempts the reclaimer;
    // its executor has not stopped it yet.
    step(
        &mut d,
        Some(queue_workload("urgent", "lq-owner", "high", 4)),
    );
    assert!(d.ledger.snapshot().waits_or_will(reclaimer));
    let (victim, state) = record(&d, "victim");
    assert_eq!(state, WorkloadState::Pending);
    let pending = d.ledger.snapshot().get_pending(victim).expect("queued");
    assert_eq!(
        d.ledger.snapshot().borrowing_held_by(pending),
        Some(reclaimer),
        "the evicting reclaimer holds its victim"
    );
    // It settles: urgent runs, the reclaimer waits for the owner's quota,
    // and the victim does not borrow it in between.
    for _ in 0..20 {
        d.executors(&BTreeMap::new());
        step(&mut d, None);
    }
    assert_eq!(record(&d, "urgent").1, WorkloadState::Running);
    assert_eq!(record(&d, "reclaimer").1, WorkloadState::Pending);
    assert_eq!(record(&d, "victim").1, WorkloadState::Pending);
    assert_eq!(d.ledger.counters().preemptions, 2);
}

/// Two queues that own nothing and borrow a lender's 4 GPUs, under fair
/// sharing with Kueue's default strategies.
const TWO_BORROWERS: &str = r#"
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing: {enable: true}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: lender}
spec:
  cohortName: pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohortName: pool
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohortName: pool
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-a}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq-b}
spec: {clusterQueue: cq-b}
"#;

/// Soak seed 220645 (and 220153, 220728): two borrowers took turns by
/// fair sharing (as the shares moved with other work); each was the last
/// to take the other's borrowed quota back, so each was held while the
/// other waited, neither could borrow, and both stayed pending with the
/// lender's quota idle. A preemptor's hold by the workload it has just
/// preempted ends (`Snapshot::end_hold_by`), as it does when the ledger is
/// rebuilt from the histories.
#[test]
fn two_borrowers_that_took_turns_do_not_hold_each_other() {
    let mut d = Driver::new();
    d.apply_manifests(TWO_BORROWERS);
    let durations = BTreeMap::from([("a".to_string(), 200), ("b".to_string(), 200)]);
    d.submit(queue_workload("a", "lq-a", "low", 4));
    d.now += 10;
    assert!(d.cycle());
    d.executors(&durations);
    d.submit(queue_workload("b", "lq-b", "low", 4));
    let id = |d: &Driver, name: &str| d.ledger.workload_by_name("default", name).map(|r| r.id);
    let (a, b) = (id(&d, "a").expect("a"), id(&d, "b").expect("b"));
    // The turns the shares called for, as a leader proposes them.
    let turn = |d: &mut Driver, victim, preemptor| {
        d.now += 10;
        d.seq += 1;
        d.apply(Command::AdmitBatch(AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: d.seq,
            },
            admissions: Vec::new(),
            preemptions: vec![fleetq_scheduler::Preemption {
                victim,
                preemptor,
                reason: fleetq_scheduler::PreemptionReason::InCohortFairSharing,
                grace_period: None,
                cluster: Some("dev-east".into()),
            }],
            reasons: Vec::new(),
            queue_reasons: Vec::new(),
        }));
        assert_eq!(d.ledger.counters().preemptions_rejected, 0);
        d.executors(&durations);
        d.cycle();
        d.executors(&durations);
    };
    turn(&mut d, a, b);
    let state =
        |d: &Driver, name: &str| d.ledger.workload_by_name("default", name).map(|r| r.state);
    assert_eq!(state(&d, "b"), Some(WorkloadState::Running));
    turn(&mut d, b, a);
    // The holds as the snapshot has them, live and rebuilt from history.
    let holds = |l: &Ledger| {
        [a, b].map(|w| {
            l.snapshot()
                .get_pending(w)
                .and_then(|p| l.snapshot().borrowing_held_by(p))
        })
    };
    for _ in 0..100 {
        let bytes = d.ledger.export().expect("exports");
        let rebuilt = Ledger::import(&bytes, d.ledger.config().clone()).expect("imports");
        assert_eq!(holds(&rebuilt), holds(&d.ledger), "rebuilt from history");
        d.now += 10;
        d.cycle();
        d.executors(&durations);
        if state(&d, "b") == Some(WorkloadState::Succeeded) {
            break;
        }
    }
    assert_eq!(
        (state(&d, "a"), state(&d, "b")),
        (
            Some(WorkloadState::Succeeded),
            Some(WorkloadState::Succeeded)
        ),
        "each holds the other: {:?}",
        holds(&d.ledger)
    );
    assert_eq!(d.ledger.counters().preemptions, 2);
}
