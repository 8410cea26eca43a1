//! The fleet: the trace's nodes dealt into a few similar clusters, and
//! those clusters as fleetq sees them (with their nodes, or as totals
//! only, the "bag of GPUs").
//!
//! The split rule: nodes are sorted by (model, GPUs, CPU, memory, name)
//! and dealt out like cards, the k-th to cluster k mod n. Every cluster
//! then gets about 1/n of each model and of each node shape, so no cluster
//! is special and fleetq's choice between clusters matters as little as
//! it can.
//!
//! Each node's flavor is its GPU model (lower-cased: flavor names are DNS
//! labels, `V100M16` becomes `v100m16`). Its allocatable resources are
//! `nvidia.com/gpu`, `cpu` and `memory`, and the cluster reports all three
//! per flavor in `Cluster.capacity`: fleetq limits a resource on a node
//! only where the cluster reports it for that flavor, so CPU and memory
//! are placement constraints too.

use std::collections::{BTreeMap, BTreeSet};

use fleetq_model::{Cluster, ClusterState, Node, Quantity, ResourceList};

use crate::parse::NodeRow;

pub const GPU: &str = "nvidia.com/gpu";
pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
const HOSTNAME: &str = "kubernetes.io/hostname";
/// The flavor of [`Fleet::one_flavor`].
pub const ONE_FLAVOR: &str = "any-gpu";

/// One node of the fleet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetNode {
    pub name: String,
    /// Index into [`Fleet::clusters`].
    pub cluster: usize,
    pub model: String,
    pub flavor: String,
    pub room: Room,
}

/// GPUs, CPU and memory: a node's allocatable, a task's request, a total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Room {
    pub gpus: u64,
    pub cpu_milli: u64,
    pub memory_mib: u64,
}

impl Room {
    pub fn holds(&self, need: &Room) -> bool {
        self.gpus >= need.gpus
            && self.cpu_milli >= need.cpu_milli
            && self.memory_mib >= need.memory_mib
    }

    /// `self - need`, or `None` where it does not hold it.
    pub fn minus(&self, need: &Room) -> Option<Room> {
        Some(Room {
            gpus: self.gpus.checked_sub(need.gpus)?,
            cpu_milli: self.cpu_milli.checked_sub(need.cpu_milli)?,
            memory_mib: self.memory_mib.checked_sub(need.memory_mib)?,
        })
    }

    fn plus(&self, other: &Room) -> Option<Room> {
        Some(Room {
            gpus: self.gpus.checked_add(other.gpus)?,
            cpu_milli: self.cpu_milli.checked_add(other.cpu_milli)?,
            memory_mib: self.memory_mib.checked_add(other.memory_mib)?,
        })
    }

    /// `factor` times this room, `None` on overflow.
    pub fn times(&self, factor: u64) -> Option<Room> {
        Some(Room {
            gpus: self.gpus.checked_mul(factor)?,
            cpu_milli: self.cpu_milli.checked_mul(factor)?,
            memory_mib: self.memory_mib.checked_mul(factor)?,
        })
    }

    /// As Kubernetes resources: GPUs, CPU in milli, memory in bytes;
    /// `None` where memory overflows fleetq's quantities.
    pub fn resources(&self) -> Option<ResourceList> {
        let bytes = self.memory_mib.checked_mul(1 << 20)?;
        Some(ResourceList::from([
            (GPU.to_string(), Quantity::checked_units(self.gpus)?),
            (CPU.to_string(), Quantity::from_milli(self.cpu_milli)),
            (MEMORY.to_string(), Quantity::checked_units(bytes)?),
        ]))
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FleetError {
    #[error("node {0:?} is listed twice")]
    Duplicate(String),
    #[error("models {0:?} and {1:?} would share the flavor name {2:?}")]
    FlavorClash(String, String, String),
    #[error("cannot split nodes into 0 clusters")]
    NoClusters,
    #[error("the resources of {0} are too large for fleetq's quantities")]
    TooLarge(String),
}

/// The nodes dealt into clusters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fleet {
    /// Cluster names, `cluster-0`...
    pub clusters: Vec<String>,
    /// In dealing order (model, shape, name).
    pub nodes: Vec<FleetNode>,
    /// Flavor name to the GPU models of its nodes (one, after [`Fleet::split`]).
    pub flavors: BTreeMap<String, BTreeSet<String>>,
}

/// The flavor name of a GPU model: lower case, and `-` for anything a DNS
/// label may not hold.
pub fn flavor_name(model: &str) -> String {
    model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string()
}

impl Fleet {
    /// Deals `rows` into `clusters` clusters (see the module's rule).
    pub fn split(rows: &[NodeRow], clusters: usize) -> Result<Fleet, FleetError> {
        if clusters == 0 {
            return Err(FleetError::NoClusters);
        }
        let mut sorted: Vec<&NodeRow> = rows.iter().collect();
        sorted.sort_by(|a, b| {
            (&a.model, a.gpus, a.cpu_milli, a.memory_mib, &a.sn).cmp(&(
                &b.model,
                b.gpus,
                b.cpu_milli,
                b.memory_mib,
                &b.sn,
            ))
        });
        let mut flavors: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut names = BTreeSet::new();
        let mut nodes = Vec::with_capacity(rows.len());
        for (k, row) in sorted.into_iter().enumerate() {
            if !names.insert(row.sn.as_str()) {
                return Err(FleetError::Duplicate(row.sn.clone()));
            }
            let flavor = flavor_name(&row.model);
            let models = flavors.entry(flavor.clone()).or_default();
            models.insert(row.model.clone());
            if let [first, second, ..] = models.iter().collect::<Vec<_>>()[..] {
                return Err(FleetError::FlavorClash(
                    first.clone(),
                    second.clone(),
                    flavor,
                ));
            }
            nodes.push(FleetNode {
                name: row.sn.clone(),
                cluster: k % clusters,
                model: row.model.clone(),
                flavor,
                room: Room {
                    gpus: u64::from(row.gpus),
                    cpu_milli: row.cpu_milli,
                    memory_mib: row.memory_mib,
                },
            });
        }
        let fleet = Fleet {
            clusters: (0..clusters).map(|c| format!("cluster-{c}")).collect(),
            nodes,
            flavors,
        };
        // Every total fleetq will be given must fit its quantities.
        for flavor in fleet.flavors.keys() {
            let total = fleet.total(None, flavor)?;
            total
                .times(2)
                .and_then(|t| t.resources())
                .ok_or_else(|| FleetError::TooLarge(format!("flavor {flavor}")))?;
        }
        Ok(fleet)
    }

    /// The same nodes and clusters with every model in one flavor: node
    /// placement alone then decides where a task goes, with no flavor
    /// chosen before it. Only tasks that accept every model can use it.
    pub fn one_flavor(&self) -> Fleet {
        let models: BTreeSet<String> = self.flavors.values().flatten().cloned().collect();
        let mut merged = self.clone();
        for node in &mut merged.nodes {
            node.flavor = ONE_FLAVOR.to_string();
        }
        merged.flavors = BTreeMap::from([(ONE_FLAVOR.to_string(), models)]);
        merged
    }

    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.room.gpus).sum()
    }

    /// What the nodes of `flavor` hold, in `cluster` or (`None`) fleet-wide.
    pub fn total(&self, cluster: Option<usize>, flavor: &str) -> Result<Room, FleetError> {
        self.nodes
            .iter()
            .filter(|n| n.flavor == flavor && cluster.is_none_or(|c| n.cluster == c))
            .try_fold(Room::default(), |sum, n| sum.plus(&n.room))
            .ok_or_else(|| FleetError::TooLarge(format!("flavor {flavor}")))
    }

    /// The clusters as fleetq's agents would report them: capacity per
    /// flavor (GPUs, CPU, memory), and with `with_nodes` every node; without
    /// it, totals only (a bag of GPUs).
    pub fn to_fleetq(&self, with_nodes: bool) -> Result<Vec<Cluster>, FleetError> {
        (0..self.clusters.len())
            .map(|c| self.cluster(c, with_nodes))
            .collect()
    }

    fn cluster(&self, c: usize, with_nodes: bool) -> Result<Cluster, FleetError> {
        let mut capacity = BTreeMap::new();
        for flavor in self.flavors.keys() {
            let hosted = self
                .nodes
                .iter()
                .any(|n| n.cluster == c && &n.flavor == flavor);
            if hosted {
                let total = self.total(Some(c), flavor)?;
                capacity.insert(flavor.clone(), resources(&total, flavor)?);
            }
        }
        let nodes = if with_nodes {
            self.nodes
                .iter()
                .filter(|n| n.cluster == c)
                .map(fleetq_node)
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        Ok(Cluster {
            name: self.clusters[c].clone(),
            labels: BTreeMap::new(),
            capacity,
            state: ClusterState::Ready,
            nodes,
        })
    }
}

fn resources(room: &Room, what: &str) -> Result<ResourceList, FleetError> {
    room.resources()
        .ok_or_else(|| FleetError::TooLarge(what.to_string()))
}

fn fleetq_node(n: &FleetNode) -> Result<Node, FleetError> {
    Ok(Node {
        name: n.name.clone(),
        labels: BTreeMap::from([(HOSTNAME.to_string(), n.name.clone())]),
        flavor: n.flavor.clone(),
        allocatable: resources(&n.room, &format!("node {}", n.name))?,
        unschedulable: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sn: &str, gpus: u32, model: &str) -> NodeRow {
        NodeRow {
            sn: sn.into(),
            cpu_milli: 64_000,
            memory_mib: 262_144,
            gpus,
            model: model.into(),
        }
    }

    #[test]
    fn nodes_are_dealt_by_model_so_clusters_look_alike() {
        let rows: Vec<NodeRow> = (0..8)
            .map(|i| row(&format!("n{i}"), 8, if i % 2 == 0 { "G2" } else { "T4" }))
            .collect();
        let fleet = Fleet::split(&rows, 2).unwrap();
        for c in 0..2 {
            for flavor in ["g2", "t4"] {
                assert_eq!(
                    fleet.total(Some(c), flavor).unwrap().gpus,
                    16,
                    "{c} {flavor}"
                );
            }
        }
        let clusters = fleet.to_fleetq(true).unwrap();
        for c in &clusters {
            assert!(c.node_problems().is_empty(), "{:?}", c.node_problems());
            assert_eq!(c.nodes.len(), 4);
        }
        assert!(fleet.to_fleetq(false).unwrap()[0].nodes.is_empty());
    }

    #[test]
    fn flavor_names_are_dns_labels() {
        assert_eq!(flavor_name("V100M16"), "v100m16");
        assert_eq!(flavor_name("A100 80GB"), "a100-80gb");
    }
}
