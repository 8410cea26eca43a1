//! Scenario tests for preemption inside a ClusterQueue (withinClusterQueue,
//! minRuntimeBeforePreemption) and between queues under fair sharing.

mod common;

use common::{set, units, Sim};
use fleetq_model::ClusterState;
use fleetq_scheduler::{FairSharingStrategy, PreemptionReason, ReasonKind, SchedulerConfig};

/// One queue of 8 GPUs, no cohort; `{within}` is its withinClusterQueue.
const ONE_QUEUE: &str = r#"
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
    preemption: {withinClusterQueue: WITHIN}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

fn one_queue(within: &str) -> Sim {
    Sim::new(
        &ONE_QUEUE.replace("WITHIN", within),
        &["east: h100/nvidia.com/gpu=8"],
    )
}

#[test]
fn within_cluster_queue_lower_priority_preempts_only_lower_priority() {
    let mut s = one_queue("LowerPriority");
    s.submit("low0 q=q gpu=4 pc=low");
    s.submit("low1 q=q gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["low0", "low1"]));
    // Same priority: no preemption, however old the newcomer.
    s.submit("peer q=q gpu=4 pc=low");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    s.assert_waits("peer", ReasonKind::WaitingForQuota, &["4 more needed"]);
    // Higher priority: the most recently admitted low one goes (a tie on
    // admission time goes to the later submission), only one.
    s.submit("hi q=q gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["low1"]));
    assert_eq!(
        s.preemption_reasons()["low1"],
        PreemptionReason::InClusterQueue
    );
    s.assert_waits("hi", ReasonKind::Preempting, &["preempting 1 workload"]);
    // peer, behind hi, does not get the room hi is waiting for.
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["hi"]));
    assert_eq!(s.running(), set(&["low0", "hi"]));
    assert_eq!(s.reason_kind("peer"), ReasonKind::WaitingForQuota);
}

#[test]
fn within_cluster_queue_never_means_no_preemption() {
    let mut s = one_queue("Never");
    s.submit("low0 q=q gpu=8 pc=low");
    s.cycle();
    s.submit("hi q=q gpu=4 pc=high");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    s.assert_waits(
        "hi",
        ReasonKind::WaitingForQuota,
        &["4 more needed (requested 4, available 0)"],
    );
}

#[test]
fn within_cluster_queue_lower_or_newer_equal_priority_preempts_newer_peers() {
    let mut s = one_queue("LowerOrNewerEqualPriority");
    s.submit("blocker q=q gpu=4 pc=high");
    s.cycle();
    // `old` (8 GPUs) cannot fit next to the blocker, which outranks it;
    // `new`, submitted later at the same priority, fits and goes ahead.
    s.submit("old q=q gpu=8 pc=low");
    s.submit("new q=q gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["new"]));
    assert!(s.last.preemptions.is_empty());
    s.assert_waits("old", ReasonKind::WaitingForQuota, &["4 more needed"]);
    // Once the blocker ends, `old` preempts its newer equal-priority peer.
    s.finish("blocker");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["new"]));
    assert_eq!(s.reason_kind("old"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["old"]));
    // The other way round it does not: a newer peer waits.
    s.submit("newer q=q gpu=4 pc=low");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.reason_kind("newer"), ReasonKind::WaitingForQuota);
}

#[test]
fn lower_priority_policy_does_not_take_newer_equal_priority_peers() {
    // The same stream as above under LowerPriority: `old` never preempts.
    let mut s = one_queue("LowerPriority");
    s.submit("blocker q=q gpu=4 pc=high");
    s.cycle();
    s.submit("old q=q gpu=8 pc=low");
    s.submit("new q=q gpu=4 pc=low");
    s.cycle();
    s.finish("blocker");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    assert_eq!(s.reason_kind("old"), ReasonKind::WaitingForQuota);
    assert_eq!(s.running(), set(&["new"]));
}

#[test]
fn a_young_workload_protected_by_min_runtime_is_passed_over_for_an_older_one() {
    let mut s = one_queue("LowerPriority");
    s.submit("older q=q gpu=4 pc=low minrun=5m");
    s.cycle();
    s.advance("10m");
    s.submit("young q=q gpu=4 pc=low minrun=5m");
    s.cycle();
    assert_eq!(s.running(), set(&["older", "young"]));
    // Without protection the most recently admitted (young) would go.
    s.submit("hi q=q gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["older"]));
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["hi"]));
    // Protection is not absolute: when nothing else frees enough, a
    // protected lower-priority workload is taken rather than starving a
    // higher-priority one.
    s.submit("hi2 q=q gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["young"]));
}

#[test]
fn min_runtime_protection_ends_once_the_workload_has_run_long_enough() {
    let mut s = one_queue("LowerPriority");
    s.submit("older q=q gpu=4 pc=low");
    s.cycle();
    s.submit("young q=q gpu=4 pc=low minrun=5m");
    s.cycle();
    s.advance("6m");
    // young has now run 6m > 5m: it is fair game again, and as the most
    // recently admitted it goes first.
    s.submit("hi q=q gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["young"]));
}

/// Three queues of one cohort: a and b (4 GPUs each) that reclaim, and an
/// idle lender, c (8).
const FAIR: &str = r#"
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

const SIXTEEN: &[&str] = &["east: h100/nvidia.com/gpu=16"];

fn fair_sharing() -> SchedulerConfig {
    SchedulerConfig {
        fair_sharing: true,
        ..SchedulerConfig::default()
    }
}

/// a borrows 4, b sits on its floor, 4 GPUs are left; a's next workload is
/// older than b's.
fn contended(cfg: SchedulerConfig) -> Sim {
    let mut s = Sim::new(FAIR, SIXTEEN).with_config(cfg);
    s.submit("a0 q=a gpu=4");
    s.submit("a1 q=a gpu=4");
    s.submit("b0 q=b gpu=4");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "a1", "b0"]));
    s.submit("a2 q=a gpu=4");
    s.submit("b1 q=b gpu=4");
    s.cycle();
    s
}

#[test]
fn without_fair_sharing_the_older_borrower_goes_first() {
    let s = contended(SchedulerConfig::default());
    assert_eq!(s.admitted_now(), set(&["a2"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(12));
}

#[test]
fn fair_sharing_orders_heads_by_dominant_resource_share() {
    // a already borrows 4 of the 16 (share 1/4); b borrows nothing (share
    // 0), so b's head goes first although a's is older.
    let mut s = contended(fair_sharing());
    assert_eq!(s.admitted_now(), set(&["b1"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(8));
    // Equal shares now; neither may take from the other.
    s.cycle();
    assert!(s.last.admissions.is_empty() && s.last.preemptions.is_empty());
    assert_eq!(s.reason_kind("a2"), ReasonKind::WaitingForQuota);
}

#[test]
fn fair_sharing_compares_shares_with_each_head_admitted() {
    // a borrows 1 GPU (share 1/16), b none (share 0), c lends; 4 GPUs
    // are free. Before admission b's head looks fairer; with each head
    // admitted, a would borrow 3 and b 4, so a's goes first, as in Kueue's
    // tournament, and b's no longer fits.
    let mut s = Sim::new(FAIR, SIXTEEN).with_config(fair_sharing());
    s.submit("a0 q=a gpu=4");
    s.submit("a1 q=a gpu=1");
    s.submit("b0 q=b gpu=4");
    s.submit("c0 q=c gpu=3");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "a1", "b0", "c0"]));
    s.submit("a2 q=a gpu=2");
    s.submit("b1 q=b gpu=4");
    s.cycle();
    assert!(s.admitted_now().contains("a2"), "{:?}", s.admitted_now());
    assert!(!s.admitted_now().contains("b1"));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(7));
}

fn a_holds_everything(cfg: SchedulerConfig) -> Sim {
    let mut s = Sim::new(FAIR, SIXTEEN).with_config(cfg);
    for i in 0..4 {
        s.submit(&format!("a{i} q=a gpu=4"));
    }
    s.cycle();
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(16));
    for i in 0..3 {
        s.submit(&format!("b{i} q=b gpu=4"));
    }
    s.cycle();
    s
}

#[test]
fn fair_sharing_preempts_until_shares_are_equal() {
    let only_final = SchedulerConfig {
        fair_sharing_strategies: vec![FairSharingStrategy::LessThanOrEqualToFinalShare],
        ..fair_sharing()
    };
    let mut s = a_holds_everything(only_final);
    // b0 reclaims b's floor; b1 then borrows too: b's share with b1 (4 of
    // 16 borrowed) is no higher than a's after losing a2 (4 of 16). b2
    // would leave b above a (8/16 vs 0): not allowed.
    assert_eq!(s.preempted_now(), set(&["a3", "a2"]));
    // b0 stays within b's nominal quota: it reclaims without asking the
    // strategies (Kueue's FairSharingPreemptWithinNominal).
    let reasons = s.preemption_reasons();
    assert_eq!(reasons["a3"], PreemptionReason::InCohortReclamation);
    assert_eq!(reasons["a2"], PreemptionReason::InCohortFairSharing);
    assert_eq!(s.reason_kind("b0"), ReasonKind::Preempting);
    assert_eq!(s.reason_kind("b1"), ReasonKind::Preempting);
    assert_eq!(s.reason_kind("b2"), ReasonKind::WaitingForQuota);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0", "b1"]));
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(8));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(8));
    // Stable: no more preemption either way.
    s.cycle();
    assert!(s.last.preemptions.is_empty());
}

#[test]
fn without_fair_sharing_the_owner_reclaims_only_its_floor() {
    let mut s = a_holds_everything(SchedulerConfig::default());
    assert_eq!(s.preempted_now(), set(&["a3"]));
    assert_eq!(
        s.preemption_reasons()["a3"],
        PreemptionReason::InCohortReclamation
    );
    assert_eq!(s.reason_kind("b1"), ReasonKind::WaitingForQuota);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.used("team-a", "h100/nvidia.com/gpu"), units(12));
    assert_eq!(s.used("team-b", "h100/nvidia.com/gpu"), units(4));
}

/// A pending reason says when preemption was considered and why it could
/// not help (issue 33), not only that quota is short.
#[test]
fn a_reason_says_why_preemption_could_not_help() {
    let mut s = one_queue("LowerPriority");
    s.submit("hi0 q=q gpu=4 pc=high");
    s.submit("hi1 q=q gpu=4 pc=high");
    s.cycle();
    s.submit("peer q=q gpu=4 pc=high");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    let reason = s.reason("peer");
    assert_eq!(reason.kind, ReasonKind::WaitingForQuota);
    assert!(
        reason.message.contains("preemption was considered")
            && reason
                .message
                .contains("2 workload(s) of ClusterQueue \"team\"")
            && reason.message.contains("withinClusterQueue: LowerPriority"),
        "{}",
        reason.message
    );
    // A queue that may not preempt at all says nothing of it.
    let mut s = one_queue("Never");
    s.submit("a q=q gpu=8 pc=high");
    s.cycle();
    s.submit("b q=q gpu=4 pc=high");
    s.cycle();
    assert!(
        !s.reason("b").message.contains("preemption"),
        "{}",
        s.reason("b").message
    );
}

/// The reason names the cohort rule that kept another queue's borrowers
/// out of reach (seen on `fleetq dev`: the message blamed a policy of
/// `Any` for forbidding what it allows).
#[test]
fn a_reason_names_the_reclaim_policy_that_forbade_it() {
    let config = format!(
        "{}{}",
        FAIR.replace(
            "{reclaimWithinCohort: Any}",
            "{reclaimWithinCohort: LowerPriority}"
        ),
        "- kind: WorkloadPriorityClass\n  name: high\n  value: 1000\n\
         - kind: WorkloadPriorityClass\n  name: low\n  value: 10\n"
    );
    let mut s = Sim::new(&config, SIXTEEN);
    for i in 0..4 {
        s.submit(&format!("a{i} q=a gpu=4 pc=high"));
    }
    s.cycle();
    assert_eq!(s.running().len(), 4, "a borrows all 12 of b and c");
    s.submit("b0 q=b gpu=4 pc=low");
    s.cycle();
    assert!(s.last.preemptions.is_empty());
    let message = s.reason("b0").message;
    assert!(
        message.contains("4 workload(s) of other ClusterQueues hold it, which reclaimWithinCohort: LowerPriority does not let it preempt"),
        "{message}"
    );
}

/// Two queues of one cohort: team (withinClusterQueue LowerPriority, no
/// borrowing) and other.
const TWO_OWNERS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 0}
    preemption: {withinClusterQueue: LowerPriority}
- kind: ClusterQueue
  name: other
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
- kind: LocalQueue
  namespace: ns
  name: t
  spec: {clusterQueue: team}
- kind: LocalQueue
  namespace: ns
  name: o
  spec: {clusterQueue: other}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

/// A preemptor counts another queue's evicting workload for room on the
/// cluster, but that workload frees its queue no quota: the preemptor's
/// quota reservation must not count it, or a lower workload of its own
/// queue is admitted into the room it waits for and preempted again (the
/// soak, seed 107281: eight rounds).
#[test]
fn a_victim_of_another_queue_frees_the_preemptor_no_quota() {
    let mut s = Sim::new(
        TWO_OWNERS,
        &["east: h100/nvidia.com/gpu=4", "west: h100/nvidia.com/gpu=2"],
    );
    s.set_cluster_state("west", ClusterState::Unreachable);
    s.submit("other0 q=o gpu=2 pc=low");
    s.submit("low0 q=t gpu=2 pc=low");
    s.cycle();
    assert_eq!(s.running(), set(&["other0", "low0"]));
    // other0 is on its way out for a reason of its own (its queue's
    // preemptor went elsewhere, its cluster drains...).
    let other0 = s.id("other0");
    s.snap.mark_evicting(other0).unwrap();
    s.set_cluster_state("west", ClusterState::Ready);
    s.submit("hi q=t gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["low0"]));
    // As the ledger does once the preemption is applied.
    let hi = s.id("hi");
    assert!(s.snap.set_nominated(hi, true));
    // team's 2 free GPUs are hi's: low1 fits west, but not the quota.
    s.submit("low1 q=t gpu=2 pc=low");
    s.cycle();
    assert!(s.admitted_now().is_empty(), "{:?}", s.admitted_now());
    assert!(s.last.preemptions.is_empty());
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["hi"]));
    assert_eq!(s.cluster_of("hi"), "east");
}

/// Two queues of their own, 8 GPUs of quota each.
const TWO_QUEUES: &str = r#"
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
    preemption: {withinClusterQueue: LowerPriority}
- kind: ClusterQueue
  name: other
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
    preemption: {withinClusterQueue: LowerPriority}
- kind: LocalQueue
  namespace: ns
  name: t
  spec: {clusterQueue: team}
- kind: LocalQueue
  namespace: ns
  name: o
  spec: {clusterQueue: other}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;

/// Room freed for a nominated preemptor on the cluster its decision named
/// is claimed for it: another nominee does not take it. Soak seed 121199:
/// an older nominated preemptor (its own victim still stopping elsewhere)
/// took that room, the other preemptor preempted its victims again, and
/// so three rounds.
#[test]
fn a_nominated_preemptor_takes_no_other_preemptors_room() {
    let mut s = Sim::new(
        TWO_QUEUES,
        &["east: h100/nvidia.com/gpu=4", "west: h100/nvidia.com/gpu=4"],
    );
    s.submit("vt q=t gpu=4 pc=low");
    s.submit("vo q=o gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.running(), set(&["vt", "vo"]));
    let (here, there) = (s.cluster_of("vt"), s.cluster_of("vo"));
    assert_ne!(here, there);
    // p1 (older) preempted vt, which is still stopping; p2 preempted vo,
    // which has stopped: p2's room on `there` is free.
    s.submit("p1 q=t gpu=4 pc=high");
    s.submit("p2 q=o gpu=4 pc=high");
    let (vt, p1, p2) = (s.id("vt"), s.id("p1"), s.id("p2"));
    s.snap.mark_evicting(vt).unwrap();
    s.finish("vo");
    for (p, on) in [(p1, &here), (p2, &there)] {
        assert!(s.snap.set_nominated(p, true));
        s.snap.set_nominated_on(p, Some(on.clone()));
    }
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["p2"]), "p1 took p2's room");
    assert_eq!(s.cluster_of("p2"), there);
    // Once vt has stopped, p1 has its own room.
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["p1"]));
    assert_eq!(s.cluster_of("p1"), here);
}

/// Kueue takes one head per ClusterQueue per cycle: while a workload
/// preempts within its queue, the workloads it outranks there are not
/// admitted into the room its victims free. Soak seed 142349: a victim,
/// requeued while the other victim could not stop, was re-admitted (by
/// borrowing) and preempted again, four rounds.
#[test]
fn a_queue_admits_nothing_its_preemptor_outranks_while_it_waits() {
    const CONFIG: &str = r#"
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
    preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}
- kind: ClusterQueue
  name: team-c
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 2}
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
    let mut s = Sim::new(CONFIG, &["east: h100/nvidia.com/gpu=4"]);
    s.submit("lo q=a gpu=2 pc=low");
    s.submit("stuck q=a gpu=2 pc=low");
    s.cycle();
    assert_eq!(s.running(), set(&["lo", "stuck"]));
    s.submit("hi q=a gpu=4 pc=high");
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["lo", "stuck"]));
    // lo stops and comes back; stuck cannot stop (its agent is cut off).
    s.finish("lo");
    s.submit("lo-again q=a gpu=2 pc=low");
    s.cycle();
    // It waits behind hi, which would preempt it again. (Here hi's room
    // on east keeps it out too; where the victim ran on another cluster
    // than the preemptor's room nothing did: seed 142349, which .ci/run
    // replays.)
    assert!(s.admitted_now().is_empty(), "{:?}", s.admitted_now());
    assert_eq!(s.reason_kind("hi"), ReasonKind::Preempting);
    s.assert_waits(
        "lo-again",
        ReasonKind::WaitingForQuota,
        &["is preempting for nvidia.com/gpu"],
    );
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["hi"]));
}

/// The same under `LowerOrNewerEqualPriority`: the preemptor may take a
/// newer workload of its own priority, so such a workload waits behind it
/// too. Soak seed 153216: an older workload, requeued after a fence,
/// preempted newer equals on another cluster than its room; one of them,
/// requeued while the preemptor waited, was re-admitted by borrowing and
/// preempted again, three rounds.
#[test]
fn a_queue_admits_no_newer_equal_its_preemptor_may_take_while_it_waits() {
    const CONFIG: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 4}
    preemption: {withinClusterQueue: LowerOrNewerEqualPriority}
- kind: ClusterQueue
  name: lender
  spec:
    cohort: pool
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 1}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
- kind: WorkloadPriorityClass
  name: low
  value: 10
"#;
    let mut s = Sim::new(
        CONFIG,
        &["east: h100/nvidia.com/gpu=4", "west: h100/nvidia.com/gpu=4"],
    );
    // `old` is the oldest; it runs on east, then is requeued (its cluster
    // was fenced) while two newer equals took the quota on west.
    s.set_cluster_state("west", ClusterState::Unreachable);
    s.submit("old q=q gpu=4 pc=low");
    s.cycle();
    assert_eq!(s.cluster_of("old"), "east");
    let old = s.snap.release(s.id("old"), s.now).unwrap().pending;
    s.set_cluster_state("east", ClusterState::Unreachable);
    s.set_cluster_state("west", ClusterState::Ready);
    s.submit("v1 q=q gpu=2 pc=low");
    s.submit("v2 q=q gpu=2 pc=low");
    s.cycle();
    assert_eq!(s.running(), set(&["v1", "v2"]));
    s.set_cluster_state("east", ClusterState::Ready);
    s.snap.add_pending(old).unwrap();
    // `old` takes its quota back from the newer equals on west; its room
    // is on east.
    s.cycle();
    assert_eq!(s.preempted_now(), set(&["v1", "v2"]));
    // v1 stops and is resubmitted smaller; v2 cannot stop yet. What old
    // still needs beyond v2 is reserved, but v1-again could borrow the
    // lender's unused GPU, as w12 did in the seed.
    s.finish("v1");
    s.submit("v1-again q=q gpu=1 pc=low");
    s.cycle();
    assert!(s.admitted_now().is_empty(), "{:?}", s.admitted_now());
    s.assert_waits(
        "v1-again",
        ReasonKind::WaitingForQuota,
        &["is preempting for nvidia.com/gpu"],
    );
    s.assert_waits(
        "old",
        ReasonKind::Preempting,
        &[
            "1 evicted workload(s) on cluster(s) west",
            "room is on cluster east",
        ],
    );
    s.evictions_complete();
    s.cycle();
    // old has its room; v1-again borrows the lender's GPU beside it.
    assert_eq!(s.admitted_now(), set(&["old", "v1-again"]));
}

/// A preemptor counts only the evicting workloads it needs: one kept
/// without need is taken from the preemptor it was evicted for, which
/// then finds no victims, loses its nomination, and preempts its victim
/// again once that is re-admitted. Soak seed 261636: a nominee whose room
/// was on another cluster took the victim, three rounds.
#[test]
fn a_preemptor_leaves_another_preemptors_victim_alone() {
    // TWO_QUEUES in one cohort, with a middle priority.
    let config = TWO_QUEUES.replace(
        "    resourceGroups:",
        "    cohort: pool\n    resourceGroups:",
    ) + "- kind: WorkloadPriorityClass\n  name: mid\n  value: 100\n";
    let mut s = Sim::new(
        &config,
        &["east: h100/nvidia.com/gpu=4", "west: h100/nvidia.com/gpu=4"],
    );
    s.submit("x q=t gpu=4 pc=low");
    s.cycle();
    s.submit("v q=o gpu=4 pc=low");
    s.cycle();
    assert_eq!(
        (s.cluster_of("x"), s.cluster_of("v")),
        ("east".into(), "west".into())
    );
    // a (team) preempted x on east, b (other) preempted v on west; both
    // still stopping. v, admitted last, is the first evicting candidate
    // a looks at: a frees cohort quota, not room on east.
    s.submit("a q=t gpu=4 pc=high");
    s.submit("b q=o gpu=4 pc=mid");
    let (x, v, a, b) = (s.id("x"), s.id("v"), s.id("a"), s.id("b"));
    for (victim, p, on) in [(x, a, "east"), (v, b, "west")] {
        s.snap.mark_evicting(victim).unwrap();
        assert!(s.snap.set_nominated(p, true));
        s.snap.set_nominated_on(p, Some(on.to_string()));
    }
    s.cycle();
    assert!(s.admitted_now().is_empty(), "{:?}", s.admitted_now());
    assert!(s.last.preemptions.is_empty());
    // Both keep waiting for their own victim (another reason would cost
    // b its nomination in the ledger).
    for p in ["a", "b"] {
        let reason = s.reason(p);
        assert_eq!(reason.kind, ReasonKind::Preempting, "{p}: {reason:?}");
        assert!(
            reason.message.contains("waiting for 1 evicted"),
            "{p}: {}",
            reason.message
        );
    }
    s.finish("v");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b"]));
    assert_eq!(s.cluster_of("b"), "west");
}
