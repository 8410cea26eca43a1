//! Scenario tests for clusters that report their nodes (issue 26): each
//! pod on one node, the whole gang or nothing, a required topology level
//! kept, and apply() refusing a placement its nodes cannot hold.

mod common;

use std::collections::BTreeMap;

use common::{cluster, set, Sim};
use fleetq_model::assignment::NodePods;
use fleetq_scheduler::{ReasonKind, SnapshotError};

/// One queue with 16 GPUs of quota; flavor `h100` on Topology `racks`.
const RACKS: &str = r#"
- kind: Topology
  name: racks
  spec:
    levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
- kind: ResourceFlavor
  name: h100
  spec: {topologyName: racks, nodeLabels: {gpu: h100}}
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 16}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

/// east: rack r1 with nodes a and b, rack r2 with node c; 4 GPUs each.
fn east() -> Sim {
    Sim::new(RACKS, &["east: h100/nvidia.com/gpu=12"]).with_nodes(
        "east",
        &[
            "a:rack=r1:h100/nvidia.com/gpu=4",
            "b:rack=r1:h100/nvidia.com/gpu=4",
            "c:rack=r2:h100/nvidia.com/gpu=4",
        ],
    )
}

#[test]
fn a_pod_larger_than_every_node_waits_though_the_totals_have_room() {
    let mut sim = east();
    sim.submit("big q=q gpu=8");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    let reason = sim.reason("big");
    assert_eq!(reason.kind, ReasonKind::NoClusterCapacity, "{reason:?}");
    assert!(
        reason.message.contains("no pod placement fits")
            && reason
                .message
                .contains("no node of cluster \"east\" has room for a pod of 8 nvidia.com/gpu"),
        "{}",
        reason.message
    );
    // The same request as a gang of 4-GPU pods spreads over two nodes.
    sim.submit("gang q=q gpu=4 n=2");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["gang"]));
    assert_eq!(sim.nodes_of("gang").len(), 2, "{:?}", sim.nodes_of("gang"));
}

#[test]
fn without_nodes_the_same_pod_is_admitted_by_totals() {
    // The contrast: a bag of GPUs admits what no node can run.
    let mut sim = Sim::new(RACKS, &["east: h100/nvidia.com/gpu=12"]);
    sim.submit("big q=q gpu=8");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["big"]));
    assert!(sim.nodes_of("big").is_empty());
}

#[test]
fn an_inventory_below_what_is_assigned_is_refused_and_never_swapped_in() {
    let mut sim = Sim::new(RACKS, &["east: h100/nvidia.com/gpu=12"]);
    sim.submit("a q=q gpu=8");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["a"]));
    let refused = sim
        .snap
        .try_set_clusters(&[cluster("east: h100/nvidia.com/gpu=4")]);
    let excesses = refused.expect_err("8 GPUs are assigned on east");
    assert!(excesses.iter().any(|e| e.contains("east")), "{excesses:?}");
    // East still has its 12: 8 assigned, room for 4 more.
    assert_eq!(sim.on_cluster("east", "h100/nvidia.com/gpu").milli(), 8_000);
    sim.submit("b q=q gpu=4");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["b"]));
    assert!(
        sim.snap.violations().is_empty(),
        "{:?}",
        sim.snap.violations()
    );
    // An inventory that holds what is assigned is swapped in.
    let exact = [cluster("east: h100/nvidia.com/gpu=12")];
    assert_eq!(sim.snap.try_set_clusters(&exact), Ok(()));
    assert_eq!(
        sim.on_cluster("east", "h100/nvidia.com/gpu").milli(),
        12_000
    );
}

#[test]
fn a_required_rack_keeps_the_gang_in_one_rack() {
    let mut sim = east();
    sim.submit("first q=q gpu=2 n=3 req=rack");
    sim.cycle();
    // Rack r1 (two nodes of two such pods) is the smallest that holds 3.
    assert_eq!(sim.nodes_of("first"), ["a=2", "b=1"]);
    // 6 GPUs are free, but no rack holds three more pods: r1 one, r2 two.
    sim.submit("second q=q gpu=2 n=3 req=rack");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    let reason = sim.reason("second");
    assert!(
        reason
            .message
            .contains("no rack in cluster \"east\" has room for 3 pods")
            && reason.message.contains("the best holds 2")
            && !reason.message.contains("even with every node free"),
        "{}",
        reason.message
    );
    // Unconstrained, two pods go to c, the node that holds them best.
    sim.submit("third q=q gpu=2 n=2");
    sim.cycle();
    assert_eq!(sim.nodes_of("third"), ["c=2"]);
}

/// A gang no rack could hold even with every node free says so: it
/// waits for nodes the cluster does not have, not for others to end.
#[test]
fn a_gang_larger_than_every_rack_says_waiting_will_not_help() {
    let mut sim = east();
    sim.submit("big q=q gpu=4 n=3 req=rack");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    let reason = sim.reason("big");
    assert_eq!(reason.kind, ReasonKind::NoClusterCapacity, "{reason:?}");
    assert!(
        reason.message.contains(
            "the best holds 2; even with every node free the best holds 2, so it waits for nodes this cluster does not have"
        ),
        "{}",
        reason.message
    );
}

#[test]
fn a_preferred_rack_is_tried_first_then_the_pods_spread() {
    let mut sim = east();
    sim.submit("one q=q gpu=2 n=1 pref=rack");
    sim.cycle();
    // Best fit: the smallest domain that holds it is rack r2 (node c).
    assert_eq!(sim.nodes_of("one"), ["c=1"]);
    sim.submit("wide q=q gpu=2 n=5 pref=rack");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["wide"]));
    let pods: u32 = sim
        .nodes_of("wide")
        .iter()
        .map(|p| p.split_once('=').unwrap().1.parse::<u32>().unwrap())
        .sum();
    assert_eq!(pods, 5);
}

#[test]
fn the_cluster_whose_nodes_fit_is_chosen() {
    // west has more free GPUs in total, but on 2-GPU nodes.
    let mut sim = Sim::new(
        RACKS,
        &[
            "east: h100/nvidia.com/gpu=12",
            "west: h100/nvidia.com/gpu=16",
        ],
    )
    .with_nodes(
        "east",
        &[
            "a:rack=r1:h100/nvidia.com/gpu=4",
            "b:rack=r1:h100/nvidia.com/gpu=4",
            "c:rack=r2:h100/nvidia.com/gpu=4",
        ],
    )
    .with_nodes(
        "west",
        &(0..8)
            .map(|i| format!("w{i}:rack=w:h100/nvidia.com/gpu=2"))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    sim.submit("four q=q gpu=4");
    sim.cycle();
    assert_eq!(sim.cluster_of("four"), "east");
}

#[test]
fn apply_refuses_a_placement_the_nodes_cannot_hold() {
    let mut sim = east();
    sim.submit("gang q=q gpu=4 n=2");
    let mut decisions = sim.decide();
    assert_eq!(decisions.admissions.len(), 1);
    let forged = &mut decisions.admissions[0].assignment.pod_sets[0];
    // Both pods on node a (4 GPUs): 8 GPUs on a 4-GPU node.
    forged.nodes = vec![NodePods {
        node: "a".into(),
        count: 2,
    }];
    let refused = sim.apply(&decisions);
    assert_eq!(refused.len(), 1, "{refused:?}");
    match &refused[0].1 {
        SnapshotError::NoLongerFits { detail, .. } => {
            assert!(detail.contains("node \"a\""), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Too few pods placed, or a node of another cluster, are refused too.
    for nodes in [
        vec![NodePods {
            node: "a".into(),
            count: 1,
        }],
        vec![
            NodePods {
                node: "a".into(),
                count: 1,
            },
            NodePods {
                node: "elsewhere".into(),
                count: 1,
            },
        ],
    ] {
        decisions.admissions[0].assignment.pod_sets[0].nodes = nodes;
        assert_eq!(sim.apply(&decisions).len(), 1);
    }
    assert!(sim.admitted_now().is_empty() || sim.running().is_empty());
    // The scheduler's own decision is accepted.
    sim.cycle();
    assert_eq!(sim.running(), set(&["gang"]));
}

/// Two queues without a cohort: team (4 GPUs, preempts lower priority
/// within itself) and other (8 GPUs); flavor `h100` without a Topology.
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
        - {name: nvidia.com/gpu, nominalQuota: 4}
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

/// A preemptor whose victims stop one by one keeps the node room they
/// free: a smaller workload of another queue, with room in the cluster's
/// totals beside the preemptor's, is not placed there. Soak seed 220640:
/// the reservation counted totals only, the freed node was taken, and the
/// preemptor, whose pod no other node could hold, preempted again.
#[test]
fn a_preemptor_keeps_the_node_room_its_victims_free() {
    let mut sim = Sim::new(TWO_QUEUES, &["east: h100/nvidia.com/gpu=8"]).with_nodes(
        "east",
        &[
            "a::h100/nvidia.com/gpu=4",
            "b::h100/nvidia.com/gpu=2",
            "c::h100/nvidia.com/gpu=2",
        ],
    );
    // One GPU used on each small node: best fit fills b and c first.
    for f in ["f1", "f2", "f3", "f4"] {
        sim.submit(&format!("{f} q=o gpu=1 pc=low"));
        sim.cycle();
    }
    let placed: Vec<(&str, Vec<String>)> = ["f1", "f2", "f3", "f4"]
        .into_iter()
        .map(|f| (f, sim.nodes_of(f)))
        .collect();
    for node in ["b", "c"] {
        let on = placed
            .iter()
            .find(|(_, nodes)| *nodes == [format!("{node}=1")])
            .unwrap_or_else(|| panic!("nothing placed on {node}: {placed:?}"));
        sim.finish(on.0);
    }
    for v in ["v1", "v2"] {
        sim.submit(&format!("{v} q=t gpu=2 pc=low"));
        sim.cycle();
    }
    assert_eq!(sim.nodes_of("v1"), ["a=1"]);
    assert_eq!(sim.nodes_of("v2"), ["a=1"]);
    // p needs a whole 4-GPU node: only a, once both victims stop.
    sim.submit("p q=t gpu=4 pc=high");
    sim.cycle();
    assert_eq!(sim.preempted_now(), set(&["v1", "v2"]));
    let p = sim.id("p");
    let on = sim.last.preemptions[0].cluster.clone();
    assert_eq!(on.as_deref(), Some("east"));
    // As the ledger does once the preemption is applied.
    assert!(sim.snap.set_nominated(p, true));
    sim.snap.set_nominated_on(p, on);
    // v1 stops, v2 is still stopping: 2 GPUs free on a, one each on b
    // and c, and room in the totals for 2 more beside p's.
    sim.finish("v1");
    sim.submit("s q=o gpu=2 pc=low");
    sim.cycle();
    assert!(sim.admitted_now().is_empty(), "{:?}", sim.admitted_now());
    assert_eq!(sim.reason_kind("p"), ReasonKind::Preempting);
    let reason = sim.reason("s");
    assert!(
        reason
            .message
            .contains("no node of cluster \"east\" has room for a pod of 2 nvidia.com/gpu"),
        "{}",
        reason.message
    );
    sim.evictions_complete();
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["p"]));
    assert_eq!(sim.nodes_of("p"), ["a=1"]);
    assert!(sim.last.preemptions.is_empty());
}

/// One queue over two flavors, h100 first, 8 GPUs of quota in each.
const TWO_FLAVORS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ResourceFlavor
  name: a100
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
      - name: a100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

/// A flavor whose totals have room but whose nodes cannot take the pod is
/// passed over for the next flavor, as one without room would be. Found
/// by the trace replay (crates/fleetq-trace): an 8-GPU pod sent by totals
/// to a flavor of smaller nodes waited while another model's node was
/// free, and allocation stopped at 72% of the fleet's GPUs.
#[test]
fn a_flavor_whose_nodes_cannot_take_the_pod_is_passed_over() {
    let mut sim = Sim::new(
        TWO_FLAVORS,
        &["east: h100/nvidia.com/gpu=8, a100/nvidia.com/gpu=8"],
    )
    .with_nodes(
        "east",
        &[
            "a::h100/nvidia.com/gpu=4",
            "b::h100/nvidia.com/gpu=4",
            "c::a100/nvidia.com/gpu=8",
        ],
    );
    sim.submit("big q=q gpu=8");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["big"]));
    assert_eq!(sim.flavor_of("big", "nvidia.com/gpu"), "a100");
    assert_eq!(sim.nodes_of("big"), ["c=1"]);
    // Smaller pods still take the first flavor.
    sim.submit("small q=q gpu=4");
    sim.cycle();
    assert_eq!(sim.flavor_of("small", "nvidia.com/gpu"), "h100");
    // h100 has the quota but no node for 8, a100 the node but no quota:
    // the reason says both.
    sim.finish("small");
    sim.submit("huge q=q gpu=8");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    let reason = sim.reason("huge");
    assert!(
        reason.message.contains("in flavor a100")
            && reason.message.contains("passed over")
            && reason
                .message
                .contains("no node of cluster \"east\" has room for a pod of 8 nvidia.com/gpu"),
        "{}",
        reason.message
    );
}

/// GPUs and CPUs on one flavor, no Topology.
const GPU_AND_CPU: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu, cpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 16}
        - {name: cpu, nominalQuota: 200}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

/// Best-fit by devices (the trace replay): of the nodes that hold a pod,
/// the one left with the fewest free GPUs (then the least CPU), not the
/// one that holds the fewest such pods. Node `a` holds two 1-GPU, 4-CPU
/// pods (CPU-bound, with 4 GPUs free), `b` two as well (2 GPUs free):
/// `b` is chosen, and `a`'s GPUs are not stranded behind its last CPUs.
#[test]
fn a_pod_goes_to_the_node_it_leaves_with_the_fewest_free_devices() {
    let mut sim = Sim::new(GPU_AND_CPU, &["east: h100/nvidia.com/gpu=6, h100/cpu=72"]).with_nodes(
        "east",
        &[
            "a::h100/nvidia.com/gpu=4,h100/cpu=8",
            "b::h100/nvidia.com/gpu=2,h100/cpu=64",
        ],
    );
    sim.submit("one q=q gpu=1 cpu=4");
    sim.cycle();
    assert_eq!(sim.nodes_of("one"), ["b=1"]);
    // `a` still takes a pod of 4 GPUs and 8 CPUs, which `b` never could.
    sim.submit("wide q=q gpu=4 cpu=8");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["wide"]));
    assert_eq!(sim.nodes_of("wide"), ["a=1"]);
}

/// Racks of hosts for slices: block b1 holds racks r1 (hosts a, b) and
/// r2 (host c); block b2 holds rack r3 (hosts d, e). 4 GPUs each.
const BLOCKS: &str = r#"
- kind: Topology
  name: blocks
  spec:
    levels: [{nodeLabel: block}, {nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]
- kind: ResourceFlavor
  name: h100
  spec: {topologyName: blocks, nodeLabels: {gpu: h100}}
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 20}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
"#;

fn blocks() -> Sim {
    Sim::new(BLOCKS, &["east: h100/nvidia.com/gpu=20"]).with_nodes(
        "east",
        &[
            "a:block=b1,rack=r1:h100/nvidia.com/gpu=4",
            "b:block=b1,rack=r1:h100/nvidia.com/gpu=4",
            "c:block=b1,rack=r2:h100/nvidia.com/gpu=4",
            "d:block=b2,rack=r3:h100/nvidia.com/gpu=4",
            "e:block=b2,rack=r3:h100/nvidia.com/gpu=4",
        ],
    )
}

/// The rack of each placed pod group, by node name.
fn racks_of(sim: &Sim, name: &str) -> Vec<(String, u32)> {
    sim.nodes_of(name)
        .iter()
        .map(|p| {
            let (node, pods) = p.split_once('=').unwrap();
            let rack = match node {
                "a" | "b" => "r1",
                "c" => "r2",
                _ => "r3",
            };
            (rack.to_string(), pods.parse().unwrap())
        })
        .collect()
}

/// Kueue's slices (`podSetSliceRequiredTopology`, `podSetSliceSize`):
/// every slice of pods within one domain of the slice level, all slices
/// within the required level, whole slices or nothing. Unconstrained,
/// eight 1-GPU pods in slices of 4 per host would fit the 8 GPUs of
/// rack r1 spread 4 + 4; with slices per host each host takes a whole
/// slice.
#[test]
fn slices_keep_their_pods_in_one_domain_each() {
    let mut sim = blocks();
    // Two slices of 4 pods (1 GPU each), one rack per slice, in one block.
    sim.submit("two q=q gpu=1 n=8 req=block slice=rack/4");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["two"]));
    let mut per_rack: BTreeMap<String, u32> = BTreeMap::new();
    for (rack, pods) in racks_of(&sim, "two") {
        *per_rack.entry(rack).or_default() += pods;
    }
    assert!(
        per_rack.values().all(|pods| pods % 4 == 0),
        "a slice split across racks: {:?}",
        sim.nodes_of("two")
    );
    // Best fit: block b2 (rack r3, two slices) is the smallest that
    // holds both.
    assert!(
        racks_of(&sim, "two").iter().all(|(r, _)| r == "r3"),
        "{:?}",
        sim.nodes_of("two")
    );
    // 12 GPUs left, in b1: r1 8, r2 4. A slice of 3 pods of 2 GPUs needs
    // 6 GPUs in one rack: only r1, though the block has room for more.
    sim.submit("wide q=q gpu=2 n=3 slice=rack/3");
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["wide"]));
    assert!(
        racks_of(&sim, "wide").iter().all(|(r, _)| r == "r1"),
        "{:?}",
        sim.nodes_of("wide")
    );
    // A second such slice finds no rack (r1 2 GPUs, r2 4 left).
    sim.submit("again q=q gpu=2 n=3 slice=rack/3");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    // Pods that do not make whole slices are refused at submission.
    let refused = sim
        .try_submit("odd q=q gpu=1 n=3 slice=rack/2")
        .expect_err("refused");
    assert!(
        refused[0].path.ends_with("podSetSliceSize") && refused[0].message.contains("must divide"),
        "{refused:?}"
    );
}

/// A slice larger than any domain of its level holds waits, and the
/// reason counts the slices the domains can hold.
#[test]
fn slices_that_no_domain_holds_wait_with_the_count() {
    let mut sim = blocks();
    sim.submit("big q=q gpu=4 n=3 slice=rack/3");
    sim.cycle();
    assert!(sim.admitted_now().is_empty());
    let reason = sim.reason("big").message;
    assert!(
        reason.contains("hold 0 slices of 3 pods") && reason.contains("within one rack each"),
        "{reason}"
    );
    // A slice level above the required level is refused at submission,
    // naming the field.
    let refused = sim
        .try_submit("upside q=q gpu=1 n=2 req=rack slice=block/2")
        .expect_err("refused");
    assert!(
        refused[0]
            .path
            .ends_with("topologyRequest.podSetSliceRequiredTopology"),
        "{refused:?}"
    );
}

/// apply() re-checks slices: a placement that splits a slice across two
/// racks is refused, though every node has the room; the scheduler's own
/// placement is taken.
#[test]
fn apply_refuses_a_slice_split_across_domains() {
    let mut sim = blocks();
    sim.submit("s q=q gpu=1 n=4 slice=rack/4");
    let mut decisions = sim.decide();
    assert_eq!(decisions.admissions.len(), 1);
    // Two pods on host b (rack r1), two on c (rack r2).
    decisions.admissions[0].assignment.pod_sets[0].nodes = vec![
        NodePods {
            node: "b".into(),
            count: 2,
        },
        NodePods {
            node: "c".into(),
            count: 2,
        },
    ];
    let refused = sim.apply(&decisions);
    assert_eq!(refused.len(), 1, "{refused:?}");
    match &refused[0].1 {
        SnapshotError::NoLongerFits { detail, .. } => {
            assert!(detail.contains("whole slices per rack"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    sim.cycle();
    assert_eq!(sim.admitted_now(), set(&["s"]));
}

/// A nominated preemptor whose quota is back (one victim stopped, other
/// work finished) but whose node room is still held by a victim stopping
/// there waits for it, and stays a preemptor: the ledger takes the
/// nomination from a workload with any other reason. Soak seed 259299:
/// it waited as "no pod placement fits", lost its nomination, and the
/// requeued victim was re-admitted into the hole and preempted again.
#[test]
fn a_preemptor_waits_for_the_victim_on_its_node_once_its_quota_is_back() {
    let mut sim = Sim::new(TWO_QUEUES, &["east: h100/nvidia.com/gpu=3"]).with_nodes(
        "east",
        &["a::h100/nvidia.com/gpu=2", "c::h100/nvidia.com/gpu=1"],
    );
    sim.submit("w q=t gpu=1 pc=high");
    sim.cycle();
    assert_eq!(sim.nodes_of("w"), ["c=1"]);
    for v in ["v1", "v2"] {
        sim.submit(&format!("{v} q=t gpu=1 pc=low"));
        sim.cycle();
        assert_eq!(sim.nodes_of(v), ["a=1"]);
    }
    // team's quota (4) has 1 left: p needs both victims' quota now.
    sim.submit("p q=t gpu=2 pc=high");
    sim.cycle();
    assert_eq!(sim.preempted_now(), set(&["v1", "v2"]));
    let p = sim.id("p");
    assert!(sim.snap.set_nominated(p, true));
    sim.snap.set_nominated_on(p, Some("east".into()));
    // w finishes and v1 stops: the quota is back, but a has one GPU free
    // until v2 stops, and c one.
    sim.finish("w");
    sim.finish("v1");
    sim.submit("s q=t gpu=1 pc=low");
    sim.cycle();
    let reason = sim.reason("p");
    assert_eq!(reason.kind, ReasonKind::Preempting, "{reason:?}");
    assert!(
        reason.message.contains("waiting for 1 evicted"),
        "{}",
        reason.message
    );
    assert!(!sim.admitted_now().contains("p"));
    sim.evictions_complete();
    sim.cycle();
    assert!(sim.admitted_now().contains("p"), "{:?}", sim.admitted_now());
    assert_eq!(sim.nodes_of("p"), ["a=1"]);
}

/// team's 4 GPUs of nominal quota in a cohort with other's 1; east has
/// node a (4 GPUs) and node b (1).
const BORROWABLE: &str = r#"
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
        - {name: nvidia.com/gpu, nominalQuota: 1}
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

/// As above, where the quota comes back only by borrowing: one victim
/// stopped and the cohort's idle quota frees the rest, but the victim
/// still stopping holds the node room. The preemptor keeps waiting for
/// it as a preemptor. Soak seed 363870: it waited as "no pod placement
/// fits" (its plan borrowed, and only a plan within nominal quota went
/// through the victim search), lost its nomination, and its first
/// victim was re-admitted into the hole and preempted again, twice.
#[test]
fn a_preemptor_waits_for_the_victim_on_its_node_once_its_quota_is_back_by_borrowing() {
    let mut sim = Sim::new(BORROWABLE, &["east: h100/nvidia.com/gpu=5"]).with_nodes(
        "east",
        &["a::h100/nvidia.com/gpu=4", "b::h100/nvidia.com/gpu=1"],
    );
    sim.submit("o1 q=o gpu=1 pc=low");
    sim.cycle();
    assert_eq!(sim.nodes_of("o1"), ["b=1"]);
    sim.submit("h q=t gpu=2 pc=high");
    sim.cycle();
    for v in ["v1", "v2"] {
        sim.submit(&format!("{v} q=t gpu=1 pc=low"));
        sim.cycle();
        assert_eq!(sim.nodes_of(v), ["a=1"]);
    }
    // team is at its nominal 4 and the cohort has nothing to lend.
    sim.submit("p q=t gpu=2 pc=high");
    sim.cycle();
    assert_eq!(sim.preempted_now(), set(&["v1", "v2"]));
    let p = sim.id("p");
    assert!(sim.snap.set_nominated(p, true));
    sim.snap.set_nominated_on(p, Some("east".into()));
    // o1 finishes and v1 stops: p fits its quota by borrowing other's
    // GPU, but a has one GPU free until v2 stops, and b one.
    sim.finish("o1");
    sim.finish("v1");
    sim.submit("s q=t gpu=1 pc=low");
    sim.cycle();
    let reason = sim.reason("p");
    assert_eq!(reason.kind, ReasonKind::Preempting, "{reason:?}");
    assert!(
        reason.message.contains("waiting for 1 evicted"),
        "{}",
        reason.message
    );
    assert!(
        !sim.admitted_now().contains("s"),
        "{:?}",
        sim.admitted_now()
    );
    sim.evictions_complete();
    sim.cycle();
    assert!(sim.admitted_now().contains("p"), "{:?}", sim.admitted_now());
    assert_eq!(sim.nodes_of("p"), ["a=1"]);
}
