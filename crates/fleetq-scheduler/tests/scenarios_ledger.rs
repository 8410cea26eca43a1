//! Scenario tests for apply()'s re-validation: a duplicated, stale or
//! forged admission is rejected and changes nothing (docs/architecture.md §4).

mod common;

use std::collections::BTreeSet;

use common::{set, Sim};
use fleetq_model::ClusterState;
use fleetq_scheduler::clusters::ClusterUsage;
use fleetq_scheduler::quota::Usage;
use fleetq_scheduler::{ReasonKind, SnapshotError};

/// One 8-GPU queue that preempts lower priority; two 8-GPU clusters.
const ONE_QUEUE: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    preemption: {withinClusterQueue: LowerPriority}
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
- kind: WorkloadPriorityClass
  name: high
  value: 1000
"#;

/// Everything a rejected decision must leave alone.
#[derive(Debug, PartialEq)]
struct State {
    usage: Usage,
    cluster_usage: ClusterUsage,
    pending: BTreeSet<String>,
    running: BTreeSet<String>,
    evicting: BTreeSet<String>,
}

fn state(s: &Sim) -> State {
    State {
        usage: s.snap.usage().clone(),
        cluster_usage: s.snap.cluster_usage().clone(),
        pending: s.pending(),
        running: s.running(),
        evicting: s
            .snap
            .admitted()
            .filter(|a| a.evicting)
            .map(|a| s.name(a.pending.id))
            .collect(),
    }
}

fn sim() -> Sim {
    Sim::new(
        ONE_QUEUE,
        &["east: h100/nvidia.com/gpu=8", "west: h100/nvidia.com/gpu=8"],
    )
}

#[test]
fn a_duplicated_admission_batch_is_rejected_and_changes_nothing() {
    let mut s = sim();
    s.submit("a q=q gpu=4");
    s.submit("b q=q gpu=4");
    let batch = s.decide();
    assert_eq!(batch.admissions.len(), 2);
    assert!(s.apply(&batch).is_empty());
    let before = state(&s);
    assert_eq!(before.running, set(&["a", "b"]));
    // The same batch proposed again (a retried proposal, a stale leader).
    let rejected = s.apply(&batch);
    assert_eq!(rejected.len(), 2);
    for (id, e) in &rejected {
        assert_eq!(*e, SnapshotError::NotPending(*id));
    }
    assert_eq!(state(&s), before);
    assert!(s.snap.violations().is_empty());
}

#[test]
fn a_duplicated_preemption_changes_nothing() {
    let mut s = sim();
    s.submit("a q=q gpu=4");
    s.submit("b q=q gpu=4");
    s.cycle();
    s.submit("hi q=q gpu=4 pc=high");
    let batch = s.decide();
    assert_eq!(batch.preemptions.len(), 1);
    assert!(s.apply(&batch).is_empty());
    let before = state(&s);
    assert_eq!(before.evicting, set(&["b"]));
    // Marking a victim twice is harmless; it still holds its quota.
    assert!(s.apply(&batch).is_empty());
    assert_eq!(state(&s), before);
}

#[test]
fn an_admission_whose_quota_is_gone_is_rejected() {
    let mut s = sim();
    s.submit("a q=q gpu=8");
    s.submit("b q=q gpu=8");
    // A leader decides on a snapshot where a is still pending ...
    let stale = s.decide();
    assert_eq!(s.id("a"), stale.admissions[0].workload);
    // ... but before its batch applies, the quota shrank to 4.
    s.reconfigure(&ONE_QUEUE.replace("nominalQuota: 8", "nominalQuota: 4"));
    let before = state(&s);
    let rejected = s.apply(&stale);
    assert_eq!(rejected.len(), 1);
    match &rejected[0].1 {
        SnapshotError::NoLongerFits { detail, .. } => {
            assert!(
                detail.contains("needs 8 but ClusterQueue \"team\" has 4 available"),
                "{detail}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(state(&s), before);
}

#[test]
fn an_admission_to_a_cluster_that_went_away_is_rejected() {
    let mut s = sim();
    s.submit("a q=q gpu=8");
    let stale = s.decide();
    let cluster = stale.admissions[0].assignment.cluster.clone();
    s.set_cluster_state(&cluster, ClusterState::Unreachable);
    let before = state(&s);
    let rejected = s.apply(&stale);
    assert_eq!(rejected[0].1, SnapshotError::ClusterUnavailable(cluster));
    assert_eq!(state(&s), before);
    // The next cycle places it elsewhere.
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a"]));
}

#[test]
fn an_admission_into_a_queue_held_since_the_decision_is_rejected() {
    for (from, to, queue) in [
        (
            "nominalQuota: 8}",
            "nominalQuota: 8}\n    stopPolicy: Hold",
            "ClusterQueue \"team\"",
        ),
        (
            "spec: {clusterQueue: team}",
            "spec: {clusterQueue: team, stopPolicy: Hold}",
            "LocalQueue ns/q",
        ),
    ] {
        let mut s = sim();
        s.submit("a q=q gpu=4");
        let stale = s.decide();
        assert_eq!(stale.admissions.len(), 1);
        // The queue is held after the cycle decided, before its batch applies.
        let held = ONE_QUEUE.replace(from, to);
        assert_ne!(held, ONE_QUEUE);
        s.reconfigure(&held);
        let before = state(&s);
        let rejected = s.apply(&stale);
        assert_eq!(
            rejected,
            vec![(
                s.id("a"),
                SnapshotError::QueueStopped {
                    workload: s.id("a"),
                    queue: queue.to_string()
                }
            )]
        );
        assert_eq!(state(&s), before);
        // Released again: the next cycle admits it.
        s.reconfigure(ONE_QUEUE);
        s.cycle();
        assert_eq!(s.admitted_now(), set(&["a"]));
    }
}

#[test]
fn the_last_of_two_batches_sharing_room_is_rejected() {
    // Two leaders (or a leader and its stale former self) each decide to
    // use the same free GPUs for a different workload.
    let mut s = sim();
    s.submit("running q=q gpu=4");
    s.cycle();
    s.submit("a q=q gpu=4");
    let first = s.decide();
    let mut second = first.clone();
    s.submit("b q=q gpu=4");
    second.admissions[0].workload = s.id("b");
    assert!(s.apply(&first).is_empty());
    let before = state(&s);
    let rejected = s.apply(&second);
    assert!(
        matches!(rejected[0].1, SnapshotError::NoLongerFits { .. }),
        "{rejected:?}"
    );
    assert_eq!(state(&s), before);
    s.cycle();
    s.assert_waits("b", ReasonKind::WaitingForQuota, &["4 more needed"]);
}

#[test]
fn a_forged_admission_is_rejected() {
    let mut s = sim();
    s.submit("a q=q gpu=4");
    let honest = s.decide();
    let before = state(&s);
    // Charging less than the pod sets request.
    let mut cheap = honest.clone();
    for q in cheap.admissions[0].assignment.usage.values_mut() {
        *q = fleetq_model::Quantity::units(1);
    }
    assert!(matches!(
        s.apply(&cheap)[0].1,
        SnapshotError::Inconsistent { .. }
    ));
    // Admitting through another ClusterQueue.
    let mut elsewhere = honest.clone();
    elsewhere.admissions[0].cluster_queue = "other".into();
    assert!(matches!(
        s.apply(&elsewhere)[0].1,
        SnapshotError::WrongClusterQueue { .. }
    ));
    // More pods than the workload has.
    let mut more = honest.clone();
    more.admissions[0].assignment.pod_sets[0].count = 2;
    assert!(matches!(
        s.apply(&more)[0].1,
        SnapshotError::Inconsistent { .. }
    ));
    assert_eq!(state(&s), before);
    // The honest one still applies.
    assert!(s.apply(&honest).is_empty());
    assert_eq!(s.running(), set(&["a"]));
}

/// A decision made before a namespaceSelector excluded the workload's
/// namespace is refused at apply (the queue no longer selects it).
#[test]
fn an_admission_from_an_unselected_namespace_is_rejected() {
    let other = "- kind: LocalQueue\n  namespace: other\n  name: q\n  spec: {clusterQueue: team}\n";
    let base = format!("{ONE_QUEUE}{other}");
    let mut s = Sim::new(
        &base,
        &["east: h100/nvidia.com/gpu=8", "west: h100/nvidia.com/gpu=8"],
    );
    s.submit_in("other", "w q=q gpu=2");
    let batch = s.decide();
    assert_eq!(batch.admissions.len(), 1);
    let selecting = base.replace(
        "    preemption: {withinClusterQueue: LowerPriority}",
        "    preemption: {withinClusterQueue: LowerPriority}\n    namespaceSelector: {matchLabels: {team: a}}",
    );
    s.reconfigure(&selecting);
    let before = state(&s);
    let rejected = s.apply(&batch);
    assert!(
        matches!(rejected.as_slice(), [(_, SnapshotError::NamespaceNotSelected { namespace, .. })] if namespace == "other"),
        "{rejected:?}"
    );
    assert_eq!(state(&s), before);
}
