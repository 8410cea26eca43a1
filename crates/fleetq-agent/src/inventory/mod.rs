//! Inventory: what a cluster can run, per flavor and resource, as the
//! ledger counts it (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`,
//! `gpu.memory` in GiB).

pub mod devices;
pub mod gpu;
pub mod nvml;

use std::collections::BTreeMap;

use fleetq_model::{FlavorName, ResourceList};

/// Capacity per flavor.
pub type Inventory = BTreeMap<FlavorName, ResourceList>;

pub use gpu::{inventory_from_gpus, FlavorMapping, GpuDevice, InventoryError, MigDevice};
