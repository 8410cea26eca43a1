//! Scenario tests for where a workload lands: flavor fungibility, whole
//! workloads on one cluster, placement strategy and restrictions, cluster
//! state, partial admission and MIG slices.

mod common;

use common::{set, units, Sim};
use fleetq_model::ClusterState;
use fleetq_scheduler::ReasonKind;

/// team-a: 4 reserved GPUs of its own (idle lender has 8 more to lend)
/// and 8 spot GPUs. `FUNGIBILITY` is its flavorFungibility.
const TWO_FLAVORS: &str = r#"
- kind: ResourceFlavor
  name: reserved
- kind: ResourceFlavor
  name: spot
- kind: ClusterQueue
  name: team-a
  spec:
    cohort: pool
    flavorFungibility: FUNGIBILITY
    preemption: {withinClusterQueue: LowerPriority}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: reserved
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
      - name: spot
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: ClusterQueue
  name: lender
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: reserved
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: a
  spec: {clusterQueue: team-a}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

const BOTH_FLAVORS: &[&str] = &["east: reserved/nvidia.com/gpu=16, spot/nvidia.com/gpu=8"];

fn fungibility(policy: &str) -> Sim {
    Sim::new(&TWO_FLAVORS.replace("FUNGIBILITY", policy), BOTH_FLAVORS)
}

#[test]
fn when_can_borrow_may_stop_search_borrows_the_first_flavor() {
    let mut s = fungibility("{whenCanBorrow: MayStopSearch}");
    s.submit("w q=a gpu=8");
    s.cycle();
    assert_eq!(s.flavor_of("w", "nvidia.com/gpu"), "reserved");
    assert_eq!(s.used("team-a", "reserved/nvidia.com/gpu"), units(8));
    assert_eq!(s.used("pool", "reserved/nvidia.com/gpu"), units(8));
}

#[test]
fn when_can_borrow_try_next_flavor_prefers_a_flavor_that_fits_without_borrowing() {
    let mut s = fungibility("{whenCanBorrow: TryNextFlavor}");
    s.submit("w q=a gpu=8");
    s.cycle();
    assert_eq!(s.flavor_of("w", "nvidia.com/gpu"), "spot");
    assert_eq!(s.used("team-a", "reserved/nvidia.com/gpu"), units(0));
    // When no flavor fits without borrowing, the first that borrows wins.
    s.submit("w2 q=a gpu=8");
    s.cycle();
    assert_eq!(s.flavor_of("w2", "nvidia.com/gpu"), "reserved");
}

/// low0 fills team-a's 4 reserved GPUs, and with no cohort there is
/// nothing to borrow; then hi (higher priority) wants 4 more.
fn preempt_or_next(policy: &str) -> Sim {
    let yaml = TWO_FLAVORS
        .replace("FUNGIBILITY", policy)
        .replace("    cohort: pool\n", "");
    let mut s = Sim::new(&yaml, BOTH_FLAVORS);
    s.submit("low0 q=a gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.flavor_of("low0", "nvidia.com/gpu"), "reserved");
    s.submit("hi q=a gpu=4 pc=high");
    s.cycle();
    s
}

#[test]
fn when_can_preempt_try_next_flavor_avoids_preemption() {
    let s = preempt_or_next("{whenCanPreempt: TryNextFlavor}");
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.flavor_of("hi", "nvidia.com/gpu"), "spot");
}

#[test]
fn when_can_preempt_may_stop_search_preempts_in_the_first_flavor() {
    let mut s = preempt_or_next("{whenCanPreempt: MayStopSearch}");
    assert_eq!(s.preempted_now(), set(&["low0"]));
    assert_eq!(s.reason_kind("hi"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.flavor_of("hi", "nvidia.com/gpu"), "reserved");
}

#[test]
fn when_can_preempt_may_stop_search_goes_on_where_nobody_can_be_preempted() {
    // The issue-33 case: hi0 fills the reserved flavor and outranks w, so
    // preemption there has no candidates. Kueue's flavor assigner
    // simulates it, and a flavor without candidates does not stop the
    // search: w takes the idle spot flavor instead of waiting.
    let yaml = TWO_FLAVORS
        .replace("FUNGIBILITY", "{whenCanPreempt: MayStopSearch}")
        .replace("    cohort: pool\n", "");
    let mut s = Sim::new(&yaml, BOTH_FLAVORS);
    s.submit("hi0 q=a gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.flavor_of("hi0", "nvidia.com/gpu"), "reserved");
    s.submit("w q=a gpu=4 pc=low");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.flavor_of("w", "nvidia.com/gpu"), "spot");
}

#[test]
fn when_can_preempt_try_next_flavor_prefers_reclaim_over_preempting_its_own() {
    // team-a's own low work fills its reserved GPUs; the lender borrows all
    // of team-a's spot GPUs. For hi, reserved means preempting in its own
    // queue and spot means reclaiming from the lender: Kueue's flavor
    // assigner simulates both and prefers the reclaim, although reserved
    // comes first.
    let yaml = TWO_FLAVORS
        .replace("FUNGIBILITY", "{whenCanPreempt: TryNextFlavor}")
        .replace(
            "preemption: {withinClusterQueue: LowerPriority}",
            "preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}",
        )
        .replace(
            "        - {name: nvidia.com/gpu, nominalQuota: 8}\n- kind: LocalQueue",
            "        - {name: nvidia.com/gpu, nominalQuota: 8}\n      - name: spot\n        resources:\n        - {name: nvidia.com/gpu, nominalQuota: 0}\n- kind: LocalQueue\n  namespace: ns\n  name: l\n  spec: {clusterQueue: lender}\n- kind: LocalQueue",
        );
    let mut s = Sim::new(&yaml, BOTH_FLAVORS);
    s.submit("own-r q=a gpu=4 pc=low");
    s.submit("l-r q=l gpu=8 pc=low");
    s.cycle();
    s.submit("l-s q=l gpu=8 pc=low");
    s.cycle();
    assert_eq!(s.flavor_of("own-r", "nvidia.com/gpu"), "reserved");
    assert_eq!(s.flavor_of("l-s", "nvidia.com/gpu"), "spot");
    s.submit("hi q=a gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["l-s"]));
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.flavor_of("hi", "nvidia.com/gpu"), "spot");
}

/// One 24-GPU queue; `PLACEMENT` is its placement.
const PLACED: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    placement: PLACEMENT
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 24}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

fn placed(placement: &str, clusters: &[&str]) -> Sim {
    Sim::new(&PLACED.replace("PLACEMENT", placement), clusters)
}

const EAST_WEST_12: &[&str] = &[
    "east: h100/nvidia.com/gpu=12",
    "west: h100/nvidia.com/gpu=12",
];

#[test]
fn a_whole_workload_lands_on_one_cluster_or_waits() {
    let mut s = placed("{}", EAST_WEST_12);
    s.submit("a1 q=q gpu=8");
    s.submit("a2 q=q gpu=8");
    s.cycle();
    assert_eq!(s.cluster_of("a1"), "east");
    assert_eq!(s.cluster_of("a2"), "west");
    // 8 GPUs free in all (4 + 4), quota for 8 more; 6 wanted as one gang.
    s.submit("gang q=q gpu=2 n=3");
    // Larger than any one cluster, however empty.
    s.submit("huge q=q gpu=1 n=13");
    s.cycle();
    assert!(s.last.admissions.is_empty());
    s.assert_waits(
        "gang",
        ReasonKind::NoClusterCapacity,
        &["no eligible cluster has 6 nvidia.com/gpu free in flavor h100"],
    );
    s.assert_waits(
        "huge",
        ReasonKind::NoClusterCapacity,
        &["no eligible cluster is large enough for 13 nvidia.com/gpu"],
    );
    // Once east frees up, all three pods go there together.
    s.finish("a1");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["gang"]));
    assert_eq!(s.cluster_of("gang"), "east");
    assert_eq!(s.pods_of("gang"), 3);
    assert_eq!(s.on_cluster("east", "h100/nvidia.com/gpu"), units(6));
    assert_eq!(s.on_cluster("west", "h100/nvidia.com/gpu"), units(8));
}

const EAST_WEST_8: &[&str] = &["east: h100/nvidia.com/gpu=8", "west: h100/nvidia.com/gpu=8"];

fn three_small(placement: &str) -> Vec<String> {
    let mut s = placed(placement, EAST_WEST_8);
    for i in 0..3 {
        s.submit(&format!("w{i} q=q gpu=2"));
    }
    s.cycle();
    (0..3).map(|i| s.cluster_of(&format!("w{i}"))).collect()
}

#[test]
fn bin_pack_fills_one_cluster_spread_balances() {
    assert_eq!(three_small("{strategy: BinPack}"), ["east", "east", "east"]);
    assert_eq!(three_small("{strategy: Spread}"), ["east", "west", "east"]);
    // BinPack is the default.
    assert_eq!(three_small("{}"), ["east", "east", "east"]);
}

#[test]
fn placement_clusters_restricts_where_a_queue_places() {
    let mut s = placed("{clusters: [west]}", EAST_WEST_8);
    s.submit("w0 q=q gpu=8");
    s.submit("w1 q=q gpu=2");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["w0"]));
    assert_eq!(s.cluster_of("w0"), "west");
    // east is empty but not this queue's.
    s.assert_waits(
        "w1",
        ReasonKind::NoClusterCapacity,
        &["no eligible cluster has 2 nvidia.com/gpu free"],
    );
    assert_eq!(s.on_cluster("east", "h100/nvidia.com/gpu"), units(0));
}

#[test]
fn a_cluster_that_is_not_ready_gets_nothing() {
    let mut s = placed("{}", EAST_WEST_8);
    s.set_cluster_state("east", ClusterState::Unreachable);
    for i in 0..3 {
        s.submit(&format!("w{i} q=q gpu=4"));
    }
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["w0", "w1"]));
    assert_eq!(s.cluster_of("w0"), "west");
    assert_eq!(s.cluster_of("w1"), "west");
    assert_eq!(s.reason_kind("w2"), ReasonKind::NoClusterCapacity);
    // Draining accepts nothing new either.
    s.set_cluster_state("east", ClusterState::Draining);
    s.cycle();
    assert!(s.last.admissions.is_empty());
    // With no Ready cluster at all, the reason says so.
    s.set_cluster_state("west", ClusterState::Lost);
    s.cycle();
    s.assert_waits(
        "w2",
        ReasonKind::NoClusterCapacity,
        &["no Ready cluster matches the placement of ClusterQueue \"team\""],
    );
    // Ready again: it is used.
    s.set_cluster_state("east", ClusterState::Ready);
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["w2"]));
    assert_eq!(s.cluster_of("w2"), "east");
}

/// One 8-GPU queue on a 16-GPU cluster.
const PARTIAL: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

#[test]
fn partial_admission_takes_as_many_pods_as_fit_down_to_min_count() {
    let mut s = Sim::new(PARTIAL, &["east: h100/nvidia.com/gpu=16"]);
    s.submit("running q=q gpu=3");
    s.cycle();
    // 5 of 8 quota left: 5 of the 8 pods, not the minimum of 2.
    s.submit("elastic q=q gpu=1 n=8 min=2");
    s.submit("rigid q=q gpu=1 n=4 min=3");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["elastic"]));
    assert_eq!(s.pods_of("elastic"), 5);
    assert_eq!(s.used("team", "h100/nvidia.com/gpu"), units(8));
    // Nothing left, not even its minimum of 3.
    s.assert_waits("rigid", ReasonKind::WaitingForQuota, &["4 more needed"]);
}

#[test]
fn partial_admission_is_limited_by_cluster_devices_too() {
    let mut s = Sim::new(
        &PARTIAL.replace("nominalQuota: 8", "nominalQuota: 16"),
        &["east: h100/nvidia.com/gpu=4", "west: h100/nvidia.com/gpu=6"],
    );
    // 10 GPUs exist, but one cluster holds at most 6 of the pods.
    s.submit("elastic q=q gpu=1 n=8 min=2");
    s.cycle();
    assert_eq!(s.pods_of("elastic"), 6);
    assert_eq!(s.cluster_of("elastic"), "west");
}

#[test]
fn partial_admission_preempts_for_the_most_pods_preemption_can_make_room_for() {
    // Kueue's pod-set reducer: 8 pods never fit beside `keep` (high), but
    // 6 do once `old` (low) is preempted; 2 would fit at once. It preempts
    // for 6, then takes what is free once `old` has stopped.
    let yaml = format!(
        "{PARTIAL}- kind: WorkloadPriorityClass\n  name: high\n  value: 1000\n- kind: WorkloadPriorityClass\n  name: low\n  value: 10\n"
    )
    .replace(
        "    resourceGroups:",
        "    preemption: {withinClusterQueue: LowerPriority}\n    resourceGroups:",
    );
    let mut s = Sim::new(&yaml, &["east: h100/nvidia.com/gpu=16"]);
    s.submit("keep q=q gpu=2 pc=high");
    s.submit("old q=q gpu=4 pc=low");
    s.cycle();
    s.submit("new q=q gpu=1 n=8 min=2 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["old"]));
    assert_eq!(s.reason_kind("new"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["new"]));
    assert_eq!(s.pods_of("new"), 6);
}

/// Whole GPUs and MIG slices, each its own resource (and flavor).
const MIG: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ResourceFlavor
  name: a100-mig
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    - coveredResources: [nvidia.com/mig-1g.10gb]
      flavors:
      - name: a100-mig
        resources:
        - {name: nvidia.com/mig-1g.10gb, nominalQuota: 14}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

#[test]
fn mig_slices_are_a_resource_of_their_own() {
    let mut s = Sim::new(
        MIG,
        &[
            "east: h100/nvidia.com/gpu=8, a100-mig/nvidia.com/mig-1g.10gb=7",
            "west: a100-mig/nvidia.com/mig-1g.10gb=7",
        ],
    );
    s.submit("m1 q=q mig=2 n=3");
    s.submit("m2 q=q mig=1 n=3");
    s.submit("g1 q=q gpu=8");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["m1", "m2", "g1"]));
    assert_eq!(s.cluster_of("m1"), "east");
    // 1 slice left on east: m2's three slices go to west.
    assert_eq!(s.cluster_of("m2"), "west");
    // Whole GPUs only exist on east; slices do not use GPU quota.
    assert_eq!(s.cluster_of("g1"), "east");
    assert_eq!(s.used("team", "a100-mig/nvidia.com/mig-1g.10gb"), units(9));
    assert_eq!(s.used("team", "h100/nvidia.com/gpu"), units(8));
    // 5 slices of quota and 1 + 4 free slices, but not 5 on one cluster.
    s.submit("m3 q=q mig=1 n=5");
    s.cycle();
    s.assert_waits(
        "m3",
        ReasonKind::NoClusterCapacity,
        &["5 nvidia.com/mig-1g.10gb free in flavor a100-mig"],
    );
    assert_eq!(
        s.on_cluster("east", "a100-mig/nvidia.com/mig-1g.10gb"),
        units(6)
    );
}
