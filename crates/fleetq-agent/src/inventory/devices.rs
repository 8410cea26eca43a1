//! The devices a cluster's executor hands out: one slot per whole GPU or
//! MIG device, each with the UUID that goes into `CUDA_VISIBLE_DEVICES`.

use std::collections::{BTreeMap, HashSet};

use fleetq_model::resources::{GPU, MIG_PREFIX};

use super::closeness::closest_set;
use super::gpu::{FlavorMapping, GpuDevice};
use super::Inventory;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSlot {
    pub flavor: String,
    pub resource: String,
    pub uuid: String,
}

/// Whether a resource is counted in devices (vs. memory, cpu, ...).
pub fn is_device(resource: &str) -> bool {
    resource == GPU || resource.starts_with(MIG_PREFIX)
}

#[derive(Clone, Debug, Default)]
pub struct DevicePool {
    slots: Vec<DeviceSlot>,
    used: HashSet<String>,
    /// Closeness of whole GPUs by (UUID, UUID), from NVML's topology:
    /// several GPUs for one workload are taken close together.
    closeness: BTreeMap<(String, String), u32>,
}

impl DevicePool {
    /// Slots for a static inventory, with made-up stable ids
    /// (`static-<flavor>-<resource>-<n>`): there is no driver to ask.
    pub fn from_static(inventory: &Inventory) -> DevicePool {
        let mut slots = Vec::new();
        for (flavor, resources) in inventory {
            for (resource, q) in resources {
                if !is_device(resource) {
                    continue;
                }
                let short = resource.trim_start_matches("nvidia.com/");
                for n in 0..q.milli() / 1000 {
                    slots.push(DeviceSlot {
                        flavor: flavor.clone(),
                        resource: resource.clone(),
                        uuid: format!("static-{flavor}-{short}-{n}"),
                    });
                }
            }
        }
        DevicePool {
            slots,
            used: HashSet::new(),
            closeness: BTreeMap::new(),
        }
    }

    /// Slots for the GPUs NVML reported: whole GPUs by GPU UUID, MIG
    /// devices by MIG UUID.
    pub fn from_gpus(gpus: &[GpuDevice], mapping: &FlavorMapping) -> DevicePool {
        let mut slots = Vec::new();
        for gpu in gpus {
            let Some(flavor) = mapping.flavor_of(&gpu.name) else {
                continue;
            };
            if !gpu.mig_enabled {
                slots.push(DeviceSlot {
                    flavor: flavor.to_string(),
                    resource: GPU.to_string(),
                    uuid: gpu.uuid.clone(),
                });
                continue;
            }
            for mig in &gpu.mig_devices {
                if let Some(profile) = mig.profile() {
                    slots.push(DeviceSlot {
                        flavor: flavor.to_string(),
                        resource: format!("{MIG_PREFIX}{profile}"),
                        uuid: mig.uuid.clone(),
                    });
                }
            }
        }
        let closeness = gpus
            .iter()
            .flat_map(|g| {
                g.closeness
                    .iter()
                    .map(|(peer, c)| ((g.uuid.clone(), peer.clone()), *c))
            })
            .collect();
        DevicePool {
            slots,
            used: HashSet::new(),
            closeness,
        }
    }

    /// Takes `count` free slots per (flavor, resource), all or nothing;
    /// several GPUs are taken as close together as the host's topology
    /// allows ([`closest_set`]), in pool order where it says nothing.
    pub fn allocate(
        &mut self,
        needed: &BTreeMap<(String, String), u64>,
    ) -> Result<Vec<DeviceSlot>, String> {
        let mut taken = Vec::new();
        for ((flavor, resource), count) in needed {
            let free: Vec<&DeviceSlot> = self
                .slots
                .iter()
                .filter(|s| &s.flavor == flavor && &s.resource == resource)
                .filter(|s| !self.used.contains(&s.uuid))
                .filter(|s| !taken.iter().any(|t: &DeviceSlot| t.uuid == s.uuid))
                .collect();
            let ids: Vec<&str> = free.iter().map(|s| s.uuid.as_str()).collect();
            let count_usize = usize::try_from(*count).unwrap_or(usize::MAX);
            let Some(chosen) = closest_set(&ids, count_usize, &self.closeness) else {
                return Err(format!(
                    "needs {count} {resource} of flavor {flavor} but only {} are free on this cluster",
                    free.len()
                ));
            };
            taken.extend(chosen.into_iter().map(|i| free[i].clone()));
        }
        for s in &taken {
            self.used.insert(s.uuid.clone());
        }
        Ok(taken)
    }

    pub fn release(&mut self, uuids: &[String]) {
        for u in uuids {
            self.used.remove(u);
        }
    }

    /// Marks devices as in use (re-adopted children).
    pub fn claim(&mut self, uuids: &[String]) {
        self.used.extend(uuids.iter().cloned());
    }

    pub fn free(&self) -> usize {
        self.slots.len() - self.used.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_all_or_nothing_and_released() {
        let inv: Inventory = [(
            "h100".to_string(),
            [
                ("nvidia.com/gpu".to_string(), "2".parse().unwrap()),
                ("gpu.memory".to_string(), "160".parse().unwrap()),
            ]
            .into(),
        )]
        .into();
        let mut pool = DevicePool::from_static(&inv);
        assert_eq!(pool.free(), 2);
        let need = |n| BTreeMap::from([(("h100".to_string(), "nvidia.com/gpu".to_string()), n)]);
        let a = pool.allocate(&need(1)).unwrap();
        assert_eq!(a[0].uuid, "static-h100-gpu-0");
        assert!(pool
            .allocate(&need(2))
            .unwrap_err()
            .contains("only 1 are free"));
        assert_eq!(pool.free(), 1);
        pool.release(&[a[0].uuid.clone()]);
        assert_eq!(pool.allocate(&need(2)).unwrap().len(), 2);
    }

    /// An NVML host of eight H100s in two NVLink islands (as an HGX
    /// board with two NVSwitch domains would report them): four GPUs for
    /// one workload come from one island, not the first four free.
    #[test]
    fn nvml_gpus_are_taken_close_together() {
        use super::super::closeness::{closeness, PcieLevel};
        let uuid = |i: usize| format!("GPU-{i}");
        let gpus: Vec<GpuDevice> = (0..8)
            .map(|i| GpuDevice {
                uuid: uuid(i),
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_bytes: 85_520_809_984,
                mig_enabled: false,
                mig_devices: Vec::new(),
                closeness: (0..8)
                    .filter(|&j| j != i)
                    .map(|j| {
                        let c = match i / 4 == j / 4 {
                            true => closeness(4, Some(PcieLevel::Numa)),
                            false => closeness(0, Some(PcieLevel::System)),
                        };
                        (uuid(j), c)
                    })
                    .collect(),
            })
            .collect();
        let mapping = FlavorMapping {
            products: BTreeMap::from([("NVIDIA H100 80GB HBM3".into(), "h100".into())]),
        };
        let mut pool = DevicePool::from_gpus(&gpus, &mapping);
        let need = |n| BTreeMap::from([(("h100".to_string(), "nvidia.com/gpu".to_string()), n)]);
        let first = pool.allocate(&need(1)).unwrap();
        assert_eq!(first[0].uuid, "GPU-0");
        let four: Vec<String> = pool
            .allocate(&need(4))
            .unwrap()
            .into_iter()
            .map(|s| s.uuid)
            .collect();
        assert_eq!(four, ["GPU-4", "GPU-5", "GPU-6", "GPU-7"]);
        let rest: Vec<String> = pool
            .allocate(&need(3))
            .unwrap()
            .into_iter()
            .map(|s| s.uuid)
            .collect();
        assert_eq!(rest, ["GPU-1", "GPU-2", "GPU-3"]);
    }
}
