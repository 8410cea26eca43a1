//! Inventory: what a cluster can run, per flavor and resource, as the
//! ledger counts it (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`,
//! `gpu.memory` in GiB).

pub mod closeness;
pub mod devices;
pub mod gpu;
pub mod kubernetes;
pub mod nvml;

use std::collections::BTreeMap;

use fleetq_model::{FlavorName, Node, ResourceList};

/// Capacity per flavor.
pub type Inventory = BTreeMap<FlavorName, ResourceList>;

/// What an agent registers: its totals and, where its source knows them
/// (the Kubernetes inventory), its nodes, which then add up to the
/// totals over the schedulable ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InventoryReport {
    pub totals: Inventory,
    pub nodes: Vec<Node>,
}

pub use gpu::{inventory_from_gpus, FlavorMapping, GpuDevice, InventoryError, MigDevice};

/// An NVML host as nodes: the host is one node (one per flavor where its
/// GPUs map to several, `HOST-FLAVOR`), holding all its devices, so a
/// pod set is placed on it whole or not at all.
pub fn host_nodes(host: &str, inventory: &Inventory) -> Vec<Node> {
    let several = inventory.len() > 1;
    inventory
        .iter()
        .map(|(flavor, resources)| {
            let name = if several {
                format!("{host}-{flavor}")
            } else {
                host.to_string()
            };
            Node {
                labels: BTreeMap::from([(
                    fleetq_model::topology::HOSTNAME_LABEL.to_string(),
                    name.clone(),
                )]),
                name,
                flavor: flavor.clone(),
                allocatable: resources.clone(),
                unschedulable: false,
            }
        })
        .collect()
}

/// This machine's host name, or `fallback` where it has none to give.
pub fn host_name(fallback: &str) -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if rc == 0 && !name.is_empty() => name.to_string(),
        _ => fallback.to_string(),
    }
}

/// An inventory and its later changes.
pub struct InventoryFeed {
    rx: tokio::sync::watch::Receiver<InventoryReport>,
    /// Keeps a fixed inventory's channel open, so `changed()` waits
    /// forever instead of failing.
    _fixed: Option<tokio::sync::watch::Sender<InventoryReport>>,
}

impl InventoryFeed {
    /// An inventory that never changes.
    pub fn fixed(inventory: Inventory) -> InventoryFeed {
        InventoryFeed::fixed_report(InventoryReport {
            totals: inventory,
            nodes: Vec::new(),
        })
    }

    /// An inventory with nodes that never changes.
    pub fn fixed_report(report: InventoryReport) -> InventoryFeed {
        let (tx, rx) = tokio::sync::watch::channel(report);
        InventoryFeed {
            rx,
            _fixed: Some(tx),
        }
    }

    /// An inventory kept current by whoever holds the sender.
    pub fn watching(rx: tokio::sync::watch::Receiver<InventoryReport>) -> InventoryFeed {
        InventoryFeed { rx, _fixed: None }
    }

    /// The inventory now, marked as seen.
    pub fn current(&mut self) -> InventoryReport {
        self.rx.borrow_and_update().clone()
    }

    /// Waits for a change; never returns once the source has stopped.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::Quantity;

    /// An NVML host is one node with all its devices; a host whose GPUs
    /// map to two flavors is one node per flavor. Either way the nodes
    /// add up to the totals, as the ledger requires.
    #[test]
    fn an_nvml_host_is_one_node_per_flavor() {
        let gpus = |n: u64| -> ResourceList {
            BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity::units(n))])
        };
        let one = Inventory::from([("h100-80gb".to_string(), gpus(8))]);
        let nodes = host_nodes("gpu-7", &one);
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name, "gpu-7");
        assert_eq!(nodes[0].labels["kubernetes.io/hostname"], "gpu-7");
        assert_eq!(nodes[0].allocatable, gpus(8));
        let two = Inventory::from([
            ("a100-40gb".to_string(), gpus(2)),
            ("h100-80gb".to_string(), gpus(6)),
        ]);
        let names: Vec<String> = host_nodes("gpu-7", &two)
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["gpu-7-a100-40gb", "gpu-7-h100-80gb"]);
        let cluster = fleetq_model::Cluster {
            name: "gpu-7".into(),
            labels: BTreeMap::new(),
            capacity: two.clone(),
            state: fleetq_model::ClusterState::Ready,
            nodes: host_nodes("gpu-7", &two),
        };
        assert!(cluster.node_problems().is_empty());
        assert!(!host_name("fallback").is_empty());
    }
}
