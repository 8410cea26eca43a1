//! Inventory: what a cluster can run, per flavor and resource, as the
//! ledger counts it (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`,
//! `gpu.memory` in GiB).

pub mod devices;
pub mod gpu;
pub mod kubernetes;
pub mod nvml;

use std::collections::BTreeMap;

use fleetq_model::{FlavorName, ResourceList};

/// Capacity per flavor.
pub type Inventory = BTreeMap<FlavorName, ResourceList>;

pub use gpu::{inventory_from_gpus, FlavorMapping, GpuDevice, InventoryError, MigDevice};

/// An inventory and its later changes.
pub struct InventoryFeed {
    rx: tokio::sync::watch::Receiver<Inventory>,
    /// Keeps a fixed inventory's channel open, so `changed()` waits
    /// forever instead of failing.
    _fixed: Option<tokio::sync::watch::Sender<Inventory>>,
}

impl InventoryFeed {
    /// An inventory that never changes.
    pub fn fixed(inventory: Inventory) -> InventoryFeed {
        let (tx, rx) = tokio::sync::watch::channel(inventory);
        InventoryFeed {
            rx,
            _fixed: Some(tx),
        }
    }

    /// An inventory kept current by whoever holds the sender.
    pub fn watching(rx: tokio::sync::watch::Receiver<Inventory>) -> InventoryFeed {
        InventoryFeed { rx, _fixed: None }
    }

    /// The inventory now, marked as seen.
    pub fn current(&mut self) -> Inventory {
        self.rx.borrow_and_update().clone()
    }

    /// Waits for a change; never returns once the source has stopped.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
