//! From GPUs as NVML describes them to inventory. Pure: the NVML binding
//! records [`GpuDevice`]s, this module decides what they are worth, so the
//! rules are tested on recorded fixtures without a driver.
//!
//! - A GPU not in MIG mode counts as one `nvidia.com/gpu` of its flavor
//!   and adds its memory to `gpu.memory`.
//! - A GPU in MIG mode counts only through its MIG devices: each adds one
//!   `nvidia.com/mig-<profile>` (profile as NVIDIA names it, e.g.
//!   `1g.10gb`) and its own memory to `gpu.memory`.
//! - The flavor comes from the product name through the operator's
//!   [`FlavorMapping`]; a product the mapping does not name is an error,
//!   never a guess.

use std::collections::BTreeMap;

use fleetq_model::resources::{GPU, GPU_MEMORY, MIG_PREFIX};
use fleetq_model::Quantity;
use serde::{Deserialize, Serialize};

use super::Inventory;

const GIB: u64 = 1 << 30;

/// One physical GPU as recorded from NVML.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuDevice {
    pub uuid: String,
    /// NVML's product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    pub memory_bytes: u64,
    pub mig_enabled: bool,
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
    /// How close each other GPU of the host is (by UUID), as
    /// [`super::closeness::closeness`] scores NVML's NVLink and PCIe
    /// topology: smaller is closer. Empty where NVML does not say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub closeness: BTreeMap<String, u32>,
}

/// One MIG device (a GPU instance with its compute instance).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigDevice {
    pub uuid: String,
    /// NVML's name for it, e.g. `NVIDIA H100 80GB HBM3 MIG 1g.10gb`.
    pub name: String,
    pub memory_bytes: u64,
}

impl MigDevice {
    /// The profile (`1g.10gb`) from the device name's `MIG <profile>` tail.
    pub fn profile(&self) -> Option<&str> {
        let (_, tail) = self.name.rsplit_once("MIG ")?;
        let profile = tail.trim();
        let valid = !profile.is_empty()
            && profile
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '+');
        valid.then_some(profile)
    }
}

/// Product name -> flavor, from the agent's configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorMapping {
    pub products: BTreeMap<String, String>,
}

impl FlavorMapping {
    pub fn flavor_of(&self, product: &str) -> Option<&str> {
        self.products.get(product).map(String::as_str)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    #[error("GPU {uuid} is a {product:?}, which the flavor mapping does not name; add it under products")]
    UnmappedProduct { uuid: String, product: String },
    #[error("MIG device {uuid} on GPU {gpu} has a name without a MIG profile: {name:?}")]
    UnknownMigProfile {
        uuid: String,
        gpu: String,
        name: String,
    },
    #[error("GPU {uuid} is in MIG mode but has no MIG devices configured")]
    EmptyMig { uuid: String },
}

fn add(inventory: &mut Inventory, flavor: &str, resource: &str, amount: Quantity) {
    let list = inventory.entry(flavor.to_string()).or_default();
    let entry = list.entry(resource.to_string()).or_default();
    *entry = entry.saturating_add(amount);
}

/// Whole GiB of device memory (NVML reports a little under the marketing
/// figure; rounding down never promises memory that is not there).
fn gib(bytes: u64) -> Quantity {
    Quantity::from_milli((bytes / GIB).saturating_mul(1000))
}

/// The inventory of a node's GPUs, or every problem found.
pub fn inventory_from_gpus(
    gpus: &[GpuDevice],
    mapping: &FlavorMapping,
) -> Result<Inventory, Vec<InventoryError>> {
    let mut inventory = Inventory::new();
    let mut errors = Vec::new();
    for gpu in gpus {
        let Some(flavor) = mapping.flavor_of(&gpu.name) else {
            errors.push(InventoryError::UnmappedProduct {
                uuid: gpu.uuid.clone(),
                product: gpu.name.clone(),
            });
            continue;
        };
        if !gpu.mig_enabled {
            add(&mut inventory, flavor, GPU, Quantity::from_milli(1000));
            add(&mut inventory, flavor, GPU_MEMORY, gib(gpu.memory_bytes));
            continue;
        }
        if gpu.mig_devices.is_empty() {
            errors.push(InventoryError::EmptyMig {
                uuid: gpu.uuid.clone(),
            });
            continue;
        }
        for mig in &gpu.mig_devices {
            match mig.profile() {
                Some(profile) => {
                    let resource = format!("{MIG_PREFIX}{profile}");
                    add(
                        &mut inventory,
                        flavor,
                        &resource,
                        Quantity::from_milli(1000),
                    );
                    add(&mut inventory, flavor, GPU_MEMORY, gib(mig.memory_bytes));
                }
                None => errors.push(InventoryError::UnknownMigProfile {
                    uuid: mig.uuid.clone(),
                    gpu: gpu.uuid.clone(),
                    name: mig.name.clone(),
                }),
            }
        }
    }
    if errors.is_empty() {
        Ok(inventory)
    } else {
        Err(errors)
    }
}
