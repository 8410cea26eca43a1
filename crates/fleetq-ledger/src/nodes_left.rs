//! Nodes that leave under running pods (issue 26, item 4): a node that an
//! agent stops reporting, or reports cordoned or NotReady
//! (`unschedulable`), while admitted workloads have pods on it.
//!
//! Such a node is handled like a lost cluster for those workloads, by the
//! cluster's lease policy, never silently: `Fence` evicts them (they are
//! requeued once their executor confirms the stop, so quota still follows
//! what really runs), `Keep` leaves them running and says so in their
//! history. Either way the node stays in the ledger's copy of the cluster,
//! unschedulable, with its devices counted in the cluster's totals, for as
//! long as a reservation holds pods on it (a "ghost"): its pods may still
//! hold devices, so their charges must stay on the books, and an agent's
//! new report must not be refused as "capacity below what is assigned"
//! for room that left with the node.
//!
//! Pure functions of the previous and the reported cluster, so every
//! replica decides alike.

use std::collections::BTreeMap;

use fleetq_model::{Cluster, Node};

use fleetq_scheduler::WorkloadId;

/// A workload with pods on a node that left, and how the node left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeftUnder {
    pub workload: WorkloadId,
    pub node: String,
    pub how: &'static str,
}

/// `reported` as the ledger keeps it: with a ghost for every node that
/// `previous` had, `reported` lacks and a reservation still holds pods on
/// (`holding`: node name to workloads), and the devices of every
/// unschedulable node that holds pods added to the totals. With it, the
/// workloads that a node left under in this report (it was schedulable in
/// `previous`).
pub(crate) fn merge(
    previous: Option<&Cluster>,
    reported: &Cluster,
    holding: &BTreeMap<String, Vec<WorkloadId>>,
) -> (Cluster, Vec<LeftUnder>) {
    let mut merged = reported.clone();
    let mut left = Vec::new();
    let before = |name: &str| previous.and_then(|p| p.nodes.iter().find(|n| n.name == name));
    let was_schedulable = |name: &str| before(name).is_some_and(|n| !n.unschedulable);
    for node in previous.map_or(&[][..], |p| &p.nodes) {
        let Some(held_by) = holding.get(&node.name) else {
            continue;
        };
        if reported.nodes.iter().any(|n| n.name == node.name) {
            continue;
        }
        merged.nodes.push(Node {
            unschedulable: true,
            ..node.clone()
        });
        if !node.unschedulable {
            left.extend(held_by.iter().map(|&w| LeftUnder {
                workload: w,
                node: node.name.clone(),
                how: "is no longer reported",
            }));
        }
    }
    for node in &reported.nodes {
        let Some(held_by) = holding.get(&node.name) else {
            continue;
        };
        if node.unschedulable && was_schedulable(&node.name) {
            left.extend(held_by.iter().map(|&w| LeftUnder {
                workload: w,
                node: node.name.clone(),
                how: "was cordoned or went NotReady",
            }));
        }
    }
    // Unschedulable nodes are outside the reported totals (the agents'
    // contract: capacity is at least what the schedulable nodes hold);
    // those holding pods count again while they do.
    for node in merged.nodes.iter().filter(|n| n.unschedulable) {
        if !holding.contains_key(&node.name) {
            continue;
        }
        let totals = merged.capacity.entry(node.flavor.clone()).or_default();
        for (resource, q) in &node.allocatable {
            let slot = totals.entry(resource.clone()).or_default();
            *slot = slot.saturating_add(*q);
        }
    }
    (merged, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::{ClusterState, Quantity};

    fn node(name: &str, gpus: u64, unschedulable: bool) -> Node {
        Node {
            name: name.into(),
            labels: BTreeMap::new(),
            flavor: "h100".into(),
            allocatable: BTreeMap::from([("nvidia.com/gpu".into(), Quantity::units(gpus))]),
            unschedulable,
        }
    }

    fn cluster(nodes: Vec<Node>) -> Cluster {
        let total: u64 = nodes
            .iter()
            .filter(|n| !n.unschedulable)
            .map(|n| n.allocatable["nvidia.com/gpu"].milli())
            .sum();
        Cluster {
            name: "east".into(),
            labels: BTreeMap::new(),
            capacity: BTreeMap::from([(
                "h100".into(),
                BTreeMap::from([("nvidia.com/gpu".into(), Quantity::from_milli(total))]),
            )]),
            state: ClusterState::Ready,
            nodes,
        }
    }

    fn gpus(c: &Cluster) -> u64 {
        c.capacity["h100"]["nvidia.com/gpu"].milli() / 1000
    }

    #[test]
    fn a_node_gone_under_pods_stays_as_a_ghost_until_they_end() {
        let before = cluster(vec![node("a", 4, false), node("b", 4, false)]);
        let now = cluster(vec![node("b", 4, false)]);
        let holding = BTreeMap::from([("a".to_string(), vec![7])]);
        let (merged, left) = merge(Some(&before), &now, &holding);
        assert_eq!(
            left,
            vec![LeftUnder {
                workload: 7,
                node: "a".into(),
                how: "is no longer reported"
            }]
        );
        assert_eq!(merged.nodes.len(), 2);
        assert!(merged
            .nodes
            .iter()
            .any(|n| n.name == "a" && n.unschedulable));
        assert_eq!(gpus(&merged), 8);
        assert!(
            merged.node_problems().is_empty(),
            "{:?}",
            merged.node_problems()
        );
        // Reported again later: the ghost stays, and is not news.
        let (again, left) = merge(Some(&merged), &now, &holding);
        assert!(left.is_empty());
        assert_eq!((again.nodes.len(), gpus(&again)), (2, 8));
        // Once nothing holds pods there, it is gone.
        let (gone, left) = merge(Some(&again), &now, &BTreeMap::new());
        assert!(left.is_empty());
        assert_eq!((gone.nodes.len(), gpus(&gone)), (1, 4));
    }

    #[test]
    fn a_cordoned_node_under_pods_counts_while_they_hold_it() {
        let before = cluster(vec![node("a", 4, false), node("b", 4, false)]);
        let now = cluster(vec![node("a", 4, true), node("b", 4, false)]);
        let holding = BTreeMap::from([("a".to_string(), vec![3, 5])]);
        let (merged, left) = merge(Some(&before), &now, &holding);
        assert_eq!(left.len(), 2);
        assert!(left
            .iter()
            .all(|l| l.how == "was cordoned or went NotReady"));
        assert_eq!(gpus(&merged), 8);
        // A node cordoned with nothing on it is no news and adds nothing.
        let (merged, left) = merge(Some(&before), &now, &BTreeMap::new());
        assert!(left.is_empty());
        assert_eq!(gpus(&merged), 4);
        // Nor is a node that was already cordoned.
        let (_, left) = merge(Some(&now), &now, &holding);
        assert!(left.is_empty());
    }
}
