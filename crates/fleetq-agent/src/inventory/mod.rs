//! Inventory: what a cluster can run, per flavor and resource, as the
//! ledger counts it (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`,
//! `gpu.memory` in GiB).

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
