//! Cluster: a place that runs workloads, as its agent reports it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{FlavorName, ResourceList};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Physical capacity per flavor, as the agent measured it.
    pub capacity: BTreeMap<FlavorName, ResourceList>,
    #[serde(default)]
    pub state: ClusterState,
    /// Its nodes, when its agent reports them (the Kubernetes inventory,
    /// a simulated cluster with nodes); empty for a cluster reported as
    /// totals. Absent from the stored JSON (and the hash) while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<Node>,
}

/// One node of a cluster, as its agent reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// Its labels, among them its values of the flavor's Topology levels
    /// (`kubernetes.io/hostname`, a rack, a block).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The flavor its devices are counted in.
    pub flavor: FlavorName,
    /// Allocatable devices, less what pods fleetq did not start hold.
    pub allocatable: ResourceList,
    /// Cordoned or not Ready: nothing new is placed there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unschedulable: bool,
}

impl Cluster {
    /// Why its nodes disagree with its totals, if they do: a node named
    /// twice, a node of a flavor the cluster does not report, or
    /// schedulable nodes holding more of a resource than the cluster
    /// reports. Empty when it reports no nodes.
    pub fn node_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        let mut sums: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for node in &self.nodes {
            if !names.insert(node.name.as_str()) {
                out.push(format!("node {:?} is reported twice", node.name));
            }
            if !self.capacity.contains_key(&node.flavor) {
                out.push(format!(
                    "node {:?} has flavor {:?}, which the cluster does not report",
                    node.name, node.flavor
                ));
            }
            if node.unschedulable {
                continue;
            }
            for (resource, q) in &node.allocatable {
                *sums.entry((&node.flavor, resource)).or_default() += q.milli();
            }
        }
        for ((flavor, resource), sum) in sums {
            let total = self
                .capacity
                .get(flavor)
                .and_then(|r| r.get(resource))
                .map_or(0, |q| q.milli());
            if sum > total {
                out.push(format!(
                    "its schedulable nodes hold {} of {resource} in flavor {flavor}, more than the cluster's {}",
                    crate::Quantity::from_milli(sum),
                    crate::Quantity::from_milli(total)
                ));
            }
        }
        out
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterState {
    /// Heartbeats arrive; new workloads may be placed.
    #[default]
    Ready,
    /// Heartbeats stopped, lease not yet expired: nothing new is placed.
    Unreachable,
    /// Lease expired; its workloads were evicted.
    Lost,
    /// Operator asked to empty it: nothing new is placed.
    Draining,
}

impl ClusterState {
    pub fn accepts_new_work(self) -> bool {
        self == ClusterState::Ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quantity;

    fn gpus(n: u64) -> ResourceList {
        BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity::units(n))])
    }

    fn node(name: &str, flavor: &str, n: u64) -> Node {
        Node {
            name: name.into(),
            labels: BTreeMap::new(),
            flavor: flavor.into(),
            allocatable: gpus(n),
            unschedulable: false,
        }
    }

    #[test]
    fn nodes_add_up_to_the_cluster() {
        let mut c = Cluster {
            name: "east".into(),
            labels: BTreeMap::new(),
            capacity: BTreeMap::from([("h100".to_string(), gpus(16))]),
            state: ClusterState::Ready,
            nodes: vec![node("a", "h100", 8), node("b", "h100", 8)],
        };
        assert!(c.node_problems().is_empty());
        // A cordoned node does not count.
        c.nodes.push(Node {
            unschedulable: true,
            ..node("c", "h100", 8)
        });
        assert!(c.node_problems().is_empty());
        c.nodes.push(node("a", "h100", 1));
        c.nodes.push(node("d", "a100", 1));
        let problems = c.node_problems().join("; ");
        assert!(
            problems.contains("node \"a\" is reported twice"),
            "{problems}"
        );
        assert!(problems.contains("flavor \"a100\""), "{problems}");
        assert!(
            problems.contains("more than the cluster's 16"),
            "{problems}"
        );
        // Without nodes there is nothing to check; absent from the JSON.
        c.nodes.clear();
        assert!(c.node_problems().is_empty());
        assert!(!serde_json::to_string(&c).unwrap().contains("nodes"));
    }
}
