//! Scenario tests: one per admission rule, each a configuration, a stream
//! of workloads and the admissions, evictions and reasons expected.

mod common;

use common::{set, Sim};
use fleetq_scheduler::ReasonKind;

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
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["b0", "b1", "b2", "b3"]));
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
    assert_eq!(s.reason_kind("a0"), ReasonKind::Preempting);
    s.evictions_complete();
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["a0", "a1"]));
    assert_eq!(s.running(), set(&["a0", "a1", "b0", "b1"]));
    // a2 would take a above its floor while b sits on its own: it waits.
    assert_eq!(s.reason_kind("a2"), ReasonKind::WaitingForQuota);
    assert!(s.last.preemptions.is_empty());
}
