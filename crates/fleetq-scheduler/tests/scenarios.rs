//! Scenario tests: one per admission rule, each a configuration, a stream
//! of workloads and the admissions, evictions and reasons expected.
//!
//! This file: sharing quota in a cohort (borrowing, reclaiming, lending and
//! borrowing limits, hierarchical cohorts). The other `scenarios_*.rs`
//! files cover preemption policies, queueing, placement and the ledger's
//! re-validation.

mod common;

use common::{set, units, Sim};
use fleetq_scheduler::{PreemptionReason, ReasonKind};

/// Two teams of 8 GPUs each in one cohort; team-a may reclaim.
const TWO_TEAMS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - name: nvidia.com/gpu
          nominalQuota: 8
    preemption:
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - name: nvidia.com/gpu
          nominalQuota: 8
    preemption:
      reclaimWithinCohort: Any
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

const ONE_CLUSTER_16: &[&str] = &["east: h100/nvidia.com/gpu=16"];

#[test]
fn a_queue_borrows_idle_cohort_gpus() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    for i in 0..4 {
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.submit("b4 q=b gpu=4");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0", "b1", "b2", "b3"]));
    // b's 8 plus all of idle a's 8; the cohort is full now.
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(16));
    assert_eq!(s.used("pool", "h100/nvidia.com/gpu"), units(16));
    s.assert_waits(
        "b4",
        ReasonKind::WaitingForQuota,
        &["4 more needed (requested 4, available 0)"],
    );
}

#[test]
fn owner_reclaims_exactly_its_floor_by_preempting_borrowers() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    for i in 0..4 {
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.cycle();
    s.submit("a0 q=a gpu=4");
    s.submit("a1 q=a gpu=4");
    s.submit("a2 q=a gpu=4");
    s.cycle();
    // The two most recently admitted borrowed workloads go; b keeps its floor.
    assert_eq!(s.preempted_now(), set(&["b2", "b3"]));
    assert!(s
        .preemption_reasons()
        .values()
        .all(|r| *r == PreemptionReason::InCohortReclamation));
    assert_eq!(s.reason_kind("a0"), ReasonKind::Preempting);
    assert_eq!(s.reason_kind("a1"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "a1"]));
    assert_eq!(s.running(), set(&["a0", "a1", "b0", "b1"]));
    // a2 would take a above its floor while b sits on its own: it waits.
    assert_eq!(s.reason_kind("a2"), ReasonKind::WaitingForQuota);
    assert!(s.last.preemptions.is_empty());
}

/// Three teams whose floors (4 + 4 + 8) add up to the 16 GPUs there are.
const THREE_TEAMS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
    preemption: {reclaimWithinCohort: Any}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
    preemption: {reclaimWithinCohort: Any}
- kind: ClusterQueue
  name: team-c
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    preemption: {reclaimWithinCohort: Any}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
- kind: LocalQueue
  namespace: ns
  name: c
  spec: {clusterQueue: team-c}
"#;

#[test]
fn under_contention_each_queue_sits_on_its_floor_and_the_surplus_waits() {
    let mut s = Sim::new(THREE_TEAMS, ONE_CLUSTER_16);
    // a and b arrive first and spread over c's idle floor; a wants more.
    for i in 0..4 {
        s.submit(&format!("a{i} q=a gpu=2"));
        s.submit(&format!("b{i} q=b gpu=2"));
    }
    s.submit("a4 q=a gpu=2");
    s.cycle();
    assert_eq!(s.admitted_now().len(), 8);
    assert_eq!(s.reason_kind("a4"), ReasonKind::WaitingForQuota);
    // c arrives wanting more than its floor of 8.
    for i in 0..6 {
        s.submit(&format!("c{i} q=c gpu=2"));
    }
    s.cycle();
    // c takes back exactly what a and b borrowed, newest first.
    assert_eq!(s.preempted_now(), set(&["a2", "a3", "b2", "b3"]));
    s.evictions_complete();
    s.cycle();
    // The freed room goes to c, whose workloads fit its floor, before a4,
    // which is older but would borrow.
    assert_eq!(s.admitted_now(), set(&["c0", "c1", "c2", "c3"]));
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(4));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(4));
    assert_eq!(s.used("team-c", "h100/nvidia.com/gpu"), units(8));
    // Quiet from now on: the surplus of a and c waits for quota.
    for _ in 0..3 {
        s.cycle();
        assert!(s.last.admissions.is_empty() && s.last.preemptions.is_empty());
    }
    assert_eq!(s.pending(), set(&["a4", "c4", "c5"]));
    for name in ["a4", "c4", "c5"] {
        s.assert_waits(
            name,
            ReasonKind::WaitingForQuota,
            &["2 more needed (requested 2, available 0)"],
        );
    }
}

#[test]
fn a_small_owner_workload_reclaims_even_behind_a_head_that_cannot() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    s.submit("a0 q=a gpu=4");
    for i in 0..3 {
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.cycle();
    // b borrows 4 of a's floor. a's head wants 8 more, which would have a
    // borrow: it may not preempt for that. The 4-GPU workload behind it
    // fits a's floor and reclaims it (BestEffortFIFO skips the head).
    s.submit("a-big q=a gpu=8");
    s.submit("a-small q=a gpu=4");
    s.cycle();
    assert_eq!(s.reason_kind("a-big"), ReasonKind::WaitingForQuota);
    assert_eq!(s.preempted_now(), set(&["b2"]));
    assert_eq!(s.reason_kind("a-small"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a-small"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
}

#[test]
fn floors_hold_once_reached_and_nobody_preempts_to_borrow() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    for i in 0..4 {
        s.submit(&format!("a{i} q=a gpu=4"));
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "b0", "a1", "b1"]));
    for _ in 0..3 {
        s.cycle();
        assert!(s.last.admissions.is_empty() && s.last.preemptions.is_empty());
        for name in ["a2", "a3", "b2", "b3"] {
            assert_eq!(s.reason_kind(name), ReasonKind::WaitingForQuota, "{name}");
        }
    }
    s.assert_waits(
        "a2",
        ReasonKind::WaitingForQuota,
        &["4 more needed (requested 4, available 0)"],
    );
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(8));
}

/// b may displace lower-priority borrowed work (borrowWithinCohort), and
/// reclaims whatever it lent; a sits within its own nominal at low priority.
const OWNER_AND_BORROWER: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    preemption:
      reclaimWithinCohort: Any
      borrowWithinCohort: {policy: LowerPriority}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

#[test]
fn borrowers_never_displace_the_owner_within_its_nominal() {
    let mut s = Sim::new(OWNER_AND_BORROWER, ONE_CLUSTER_16);
    // a borrows 4 of b's idle quota, all of it at low priority.
    for i in 0..3 {
        s.submit(&format!("a{i} q=a gpu=4 pc=low"));
    }
    s.submit("b0 q=b gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "a1", "a2", "b0"]));
    s.submit("b1 q=b gpu=4 pc=high");
    s.submit("b2 q=b gpu=4 pc=high");
    s.cycle();
    // b1 fits b's nominal: b takes back what it lent (the newest of a's).
    assert_eq!(s.preempted_now(), set(&["a2"]));
    assert_eq!(
        s.preemption_reasons()["a2"],
        PreemptionReason::InCohortReclamation
    );
    assert_eq!(s.reason_kind("b1"), ReasonKind::Preempting);
    // b2 would have b borrow; a then runs exactly its nominal, so even at
    // higher priority b2 may not take from it.
    assert_eq!(s.reason_kind("b2"), ReasonKind::WaitingForQuota);
    s.evictions_complete();
    for _ in 0..3 {
        s.cycle();
        assert!(s.last.preemptions.is_empty());
    }
    assert_eq!(s.running(), set(&["a0", "a1", "b0", "b1"]));
    assert_eq!(s.reason_kind("b2"), ReasonKind::WaitingForQuota);
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
}

/// a keeps its whole floor private (lendingLimit 0); b lends all of its.
const PRIVATE_FLOOR: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 0}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
"#;

#[test]
fn lending_limit_zero_keeps_a_floor_private_even_when_idle() {
    let mut s = Sim::new(PRIVATE_FLOOR, ONE_CLUSTER_16);
    s.submit("b-huge q=b gpu=4 n=3");
    for i in 0..3 {
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.cycle();
    // a is idle, yet b gets only its own 8.
    assert_eq!(s.admitted_now(), set(&["b0", "b1"]));
    s.assert_waits("b2", ReasonKind::WaitingForQuota, &["4 more needed"]);
    s.assert_waits(
        "b-huge",
        ReasonKind::ExceedsMaxQuota,
        &["can get at most 8"],
    );
    // a still has all of its floor, without preempting anyone.
    s.submit("a0 q=a gpu=8");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0"]));
    assert!(s.last.preemptions.is_empty());
    // a may still borrow what b does not use (b2 gets b's own first).
    s.finish("b0");
    s.finish("b1");
    s.submit("a1 q=a gpu=4");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b2", "a1"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(12));
}

/// b may preempt borrowed work of a when b itself borrows, but only
/// workloads at or below priority 100.
const THRESHOLD: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    preemption:
      reclaimWithinCohort: Any
      borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
- kind: ClusterQueue
  name: team-c
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: top
  value: 500
- kind: WorkloadPriorityClass
  name: mid
  value: 100
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

/// a borrows all of idle team-c's 8 GPUs with `a_workloads`; b sits on
/// its floor; then b submits an 8-GPU high-priority workload, which needs
/// b to borrow.
fn borrow_within_cohort(a_workloads: &[&str]) -> Sim {
    let mut s = Sim::new(THRESHOLD, &["east: h100/nvidia.com/gpu=24"]);
    for w in a_workloads {
        s.submit(&format!("{w} q=a"));
    }
    s.submit("b0 q=b gpu=8 pc=low");
    s.cycle();
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(16));
    s.submit("b-hi q=b gpu=8 pc=high");
    s.cycle();
    s
}

#[test]
fn borrow_within_cohort_takes_victims_at_or_below_the_threshold() {
    let s = borrow_within_cohort(&[
        "a-top gpu=8 pc=top",
        "a-mid gpu=4 pc=mid",
        "a-low gpu=4 pc=low",
    ]);
    // 100 is at the threshold, 10 below it: both go; 500 stays.
    assert_eq!(s.preempted_now(), set(&["a-mid", "a-low"]));
    assert!(s
        .preemption_reasons()
        .values()
        .all(|r| *r == PreemptionReason::InCohortReclaimWhileBorrowing));
    assert_eq!(s.reason_kind("b-hi"), ReasonKind::Preempting);
}

#[test]
fn borrow_within_cohort_never_takes_victims_above_the_threshold() {
    // Taking a-top (500) would do, and b-hi (1000) outranks it, but 500 is
    // above maxPriorityThreshold; a-mid alone does not free enough.
    let mut s = borrow_within_cohort(&[
        "a-top gpu=4 pc=top",
        "a-top2 gpu=8 pc=top",
        "a-mid gpu=4 pc=mid",
    ]);
    assert!(s.last.preemptions.is_empty(), "{:?}", s.preempted_now());
    s.assert_waits("b-hi", ReasonKind::WaitingForQuota, &["8 more needed"]);
    s.cycle();
    assert!(s.last.preemptions.is_empty());
}

/// a may borrow at most 2 GPUs beyond its 8.
const BORROWING_LIMIT: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 2}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
"#;

#[test]
fn more_than_nominal_plus_borrowing_limit_exceeds_max_quota() {
    let mut s = Sim::new(BORROWING_LIMIT, ONE_CLUSTER_16);
    s.submit("too-big q=a gpu=4 n=3");
    s.submit("max q=a gpu=5 n=2");
    s.submit("one-more q=a gpu=1");
    s.cycle();
    s.assert_waits(
        "too-big",
        ReasonKind::ExceedsMaxQuota,
        &[
            "requests 12 of nvidia.com/gpu in flavor h100",
            "can get at most 10",
        ],
    );
    // Exactly nominal + borrowingLimit is fine; one more GPU waits for
    // quota (it could fit once `max` ends), it does not exceed it.
    assert_eq!(s.admitted_now(), set(&["max"]));
    assert_eq!(s.reason_kind("one-more"), ReasonKind::WaitingForQuota);
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(10));
}

/// A request larger than every cluster says so, even while quota is also
/// short: quota frees up, a bigger cluster does not appear by waiting.
#[test]
fn a_request_no_cluster_can_hold_names_the_clusters_not_the_quota() {
    let mut s = Sim::new(
        TWO_TEAMS,
        &["east: h100/nvidia.com/gpu=8", "west: h100/nvidia.com/gpu=8"],
    );
    s.submit("b1 q=b gpu=6");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b1"]));
    // 12 is above team-a's nominal 8 and the cohort has 10 left, so quota
    // alone says WaitingForQuota; but no cluster has 12 GPUs at all.
    s.submit("a-big q=a gpu=12");
    s.submit("a-fits q=a gpu=6");
    s.cycle();
    s.assert_waits(
        "a-big",
        ReasonKind::NoClusterCapacity,
        &["no eligible cluster is large enough"],
    );
    assert!(s.admitted_now().contains("a-fits"));
}

/// org (8 GPUs of its own) has two child cohorts: research (r1, r2, 4
/// each) and prod (4 of its own, kept private with lendingLimit 0, plus
/// p1's 4).
const TREE: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: Cohort
  name: org
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: Cohort
  name: research
  spec: {parentName: org}
- kind: Cohort
  name: prod
  spec:
    parentName: org
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 0}
- kind: ClusterQueue
  name: r1
  spec:
    cohort: research
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
- kind: ClusterQueue
  name: r2
  spec:
    cohort: research
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
- kind: ClusterQueue
  name: p1
  spec:
    cohort: prod
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4, lendingLimit: 0}
- kind: LocalQueue
  namespace: ns
  name: r1
  spec: {clusterQueue: r1}
- kind: LocalQueue
  namespace: ns
  name: p1
  spec: {clusterQueue: p1}
"#;

#[test]
fn hierarchical_cohorts_lend_through_the_tree() {
    let mut s = Sim::new(TREE, &["east: h100/nvidia.com/gpu=32"]);
    s.submit("r-huge q=r1 gpu=20");
    for i in 0..5 {
        s.submit(&format!("r{i} q=r1 gpu=4"));
    }
    s.cycle();
    // r1: its own 4 + idle r2's 4 (through research) + org's own 8.
    assert_eq!(s.admitted_now(), set(&["r0", "r1", "r2", "r3"]));
    assert_eq!(s.used("r1", "h100/nvidia.com/gpu"), units(16));
    // A cohort's usage is what its children use beyond what they keep
    // private: here all of it, since nothing in research has a lendingLimit.
    assert_eq!(s.used("research", "h100/nvidia.com/gpu"), units(16));
    assert_eq!(s.used("org", "h100/nvidia.com/gpu"), units(16));
    assert_eq!(s.reason_kind("r4"), ReasonKind::WaitingForQuota);
    // prod's 4 and p1's 4 never leave prod, even while idle.
    s.assert_waits(
        "r-huge",
        ReasonKind::ExceedsMaxQuota,
        &["can get at most 16"],
    );
    // p1 gets its own 4 and prod's 4 without preempting anyone ...
    s.submit("p0 q=p1 gpu=8");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["p0"]));
    assert!(s.last.preemptions.is_empty());
    // ... but org's 8 are taken by r1, so p1 can borrow no more.
    s.submit("p-more q=p1 gpu=4");
    s.cycle();
    assert_eq!(s.reason_kind("p-more"), ReasonKind::WaitingForQuota);
    // When r1 lets go of 12, r4 gets 4 and the org quota flows to prod.
    for name in ["r1", "r2", "r3"] {
        s.finish(name);
    }
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["p-more", "r4"]));
    assert_eq!(s.used("r1", "h100/nvidia.com/gpu"), units(8));
    // p1 runs 12: 4 private to p1, 4 of prod's private 4, 4 from org.
    assert_eq!(s.used("p1", "h100/nvidia.com/gpu"), units(12));
    assert_eq!(s.used("prod", "h100/nvidia.com/gpu"), units(8));
    assert_eq!(s.used("org", "h100/nvidia.com/gpu"), units(8 + 4));
}

#[test]
fn the_head_borrowing_from_nearer_goes_first_whatever_its_priority() {
    // Kueue orders heads by borrowing level before priority: r-a borrows
    // idle r2's quota inside research (level 1); p-b borrows from org
    // (level 2). The cluster holds only one of them.
    let yaml = format!(
        "{TREE}- kind: WorkloadPriorityClass\n  name: high\n  value: 1000\n- kind: WorkloadPriorityClass\n  name: low\n  value: 10\n"
    );
    let mut s = Sim::new(&yaml, &["east: h100/nvidia.com/gpu=12"]);
    s.submit("p-b q=p1 gpu=12 pc=high");
    s.submit("r-a q=r1 gpu=8 pc=low");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["r-a"]));
    assert_eq!(s.reason_kind("p-b"), ReasonKind::NoClusterCapacity);
}

/// a lends its 8 GPUs but may reclaim them only from lower priorities; b
/// owns nothing and borrows.
const LENDER_CANNOT_RECLAIM: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    preemption:
      reclaimWithinCohort: LowerPriority
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 0}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: ns
  name: b
  spec: {clusterQueue: team-b}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

#[test]
fn a_lender_that_cannot_reclaim_holds_its_quota_from_borrowers() {
    let mut s = Sim::new(LENDER_CANNOT_RECLAIM, ONE_CLUSTER_16);
    s.submit("b0 q=b gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0"]));
    // a-big needs 6 of a's nominal 8, 4 are free, and b0 ranks above it:
    // no victims. It holds what it waits for for the rest of the cycle
    // (Kueue's reserveCapacityForUnreclaimablePreempt), so b1, which would
    // borrow it, does not get it. a's own a-small, behind a-big, still
    // takes what is free: the hold binds the other queues only.
    s.submit("a-big q=a gpu=6 pc=low");
    s.submit("a-small q=a gpu=2 pc=low");
    s.submit("b1 q=b gpu=2 pc=high");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.admitted_now(), set(&["a-small"]));
    assert_eq!(s.reason_kind("a-big"), ReasonKind::WaitingForQuota);
    assert_eq!(s.reason_kind("b1"), ReasonKind::WaitingForQuota);
    // Every cycle, until b0 ends and a-big gets its quota.
    s.cycle();
    assert!(s.last.admissions.is_empty());
    s.finish("b0");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a-big"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
    assert_eq!(s.reason_kind("b1"), ReasonKind::WaitingForQuota);
}

/// Two cohorts whose parent, `org`, has no Cohort object: it exists
/// implicitly, as in Kueue, so each side borrows the other's idle quota.
const IMPLICIT_PARENT: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: Cohort
  name: left
  spec: {parentName: org}
- kind: Cohort
  name: right
  spec: {parentName: org}
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: left
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
- kind: ClusterQueue
  name: team-b
  spec:
    cohort: right
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
"#;

#[test]
fn a_parent_cohort_without_an_object_exists_implicitly() {
    let mut s = Sim::new(IMPLICIT_PARENT, ONE_CLUSTER_16);
    s.submit("a0 q=a gpu=6");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0"]));
    // All of it counts at `org` (no lending limit keeps any private),
    // and 2 of it is right's.
    assert_eq!(s.used("org", "h100/nvidia.com/gpu"), units(6));
    assert_eq!(s.used("left", "h100/nvidia.com/gpu"), units(6));
}

/// Soak seeds 177246 and 184860: an owner reclaimed its quota from a
/// borrower, but before the owner was admitted a higher-priority peer took
/// that quota (or preempted the owner); the borrower, re-admitted by
/// borrowing what was free meanwhile, was reclaimed again, six rounds.
/// While its reclaimer waits, a victim may not borrow; within its own
/// nominal quota it still runs.
#[test]
fn a_victim_does_not_borrow_while_its_reclaimer_waits() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    // The reclaimer waits for ever: more than a can ever get.
    s.submit("a0 q=a gpu=20");
    s.submit("b0 q=b gpu=4");
    s.submit("b1 q=b gpu=4");
    s.submit("b2 q=b gpu=4");
    s.reclaimed_by("b2", "a0");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0", "b1"]));
    s.assert_waits(
        "b2",
        ReasonKind::WaitingForQuota,
        &[&format!("may not borrow while workload {}", s.id("a0"))],
    );
    // Once the reclaimer has left the queue, the hold is over.
    s.withdraw("a0");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b2"]));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(12));
}

#[test]
fn a_held_victim_runs_within_its_nominal_quota() {
    let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
    s.submit("a0 q=a gpu=20");
    s.submit("b0 q=b gpu=4");
    s.reclaimed_by("b0", "a0");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0"]));
}

/// The second form of seed 177246: a held workload of high priority
/// preempted its queue's low workload for room it could only have by
/// borrowing, was held, and the victim came back, five rounds. Held, it
/// preempts only for room within its queue's nominal quota.
#[test]
fn a_held_workload_preempts_only_for_room_within_its_nominal_quota() {
    let run = |held: bool| {
        let mut s = Sim::new(TWO_TEAMS, ONE_CLUSTER_16);
        s.submit("b0 q=b gpu=20");
        s.submit("a-low0 q=a gpu=4 pc=low");
        s.submit("a-low1 q=a gpu=8 pc=low");
        s.cycle();
        assert_eq!(s.admitted_now(), set(&["a-low0", "a-low1"]));
        s.submit("a-high q=a gpu=8 pc=high");
        if held {
            s.reclaimed_by("a-high", "b0");
        }
        s.cycle();
        let preempted = s.preempted_now();
        s.evictions_complete();
        s.cycle();
        assert_eq!(s.admitted_now(), set(&["a-high"]));
        (preempted, s.used("team-a", "h100/nvidia.com/gpu"))
    };
    // Free to borrow, it takes the one victim that makes room (12 + 8 -
    // 8 = 12 of a's 8: borrowing 4).
    assert_eq!(run(false), (set(&["a-low1"]), units(12)));
    // Held, it takes both and stays within a's 8.
    assert_eq!(run(true), (set(&["a-low0", "a-low1"]), units(8)));
}
