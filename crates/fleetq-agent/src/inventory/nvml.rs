//! Reading the node's GPUs through NVML (nvml-wrapper loads
//! `libnvidia-ml` at run time). Without a driver this fails with one clear
//! error; it never invents devices. What it reads is plain data
//! ([`GpuDevice`]) that [`super::gpu::inventory_from_gpus`] turns into
//! inventory.

use std::collections::BTreeMap;

use nvml_wrapper::enum_wrappers::device::TopologyLevel;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use super::closeness::{closeness, PcieLevel};
use super::gpu::{GpuDevice, MigDevice};

/// `nvmlDeviceGetMigMode`'s value for "enabled".
const MIG_ENABLED: u32 = 1;

fn context(what: &str, e: NvmlError) -> String {
    format!("NVML: {what}: {e}")
}

/// Every GPU of this node with its MIG devices, as NVML reports them.
pub fn read_gpus() -> Result<Vec<GpuDevice>, String> {
    let nvml = Nvml::init().map_err(|e| {
        format!("NVML could not be loaded ({e}); is the NVIDIA driver installed on this node? Use a static inventory for nodes without one")
    })?;
    let count = nvml
        .device_count()
        .map_err(|e| context("device count", e))?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let device = nvml
            .device_by_index(index)
            .map_err(|e| context(&format!("device {index}"), e))?;
        let uuid = device
            .uuid()
            .map_err(|e| context(&format!("device {index} uuid"), e))?;
        let name = device
            .name()
            .map_err(|e| context(&format!("{uuid} name"), e))?;
        let memory_bytes = device
            .memory_info()
            .map_err(|e| context(&format!("{uuid} memory"), e))?
            .total;
        // GPUs without MIG support answer NotSupported: not in MIG mode.
        let mig_enabled = match device.mig_mode() {
            Ok(mode) => mode.current == MIG_ENABLED,
            Err(NvmlError::NotSupported) => false,
            Err(e) => return Err(context(&format!("{uuid} MIG mode"), e)),
        };
        let mut mig_devices = Vec::new();
        if mig_enabled {
            let slots = device
                .mig_device_count()
                .map_err(|e| context(&format!("{uuid} MIG device count"), e))?;
            for slot in 0..slots {
                // Empty slots answer NotFound.
                let mig = match device.mig_device_by_index(slot) {
                    Ok(m) => m,
                    Err(NvmlError::NotFound) => continue,
                    Err(e) => return Err(context(&format!("{uuid} MIG slot {slot}"), e)),
                };
                mig_devices.push(MigDevice {
                    uuid: mig
                        .uuid()
                        .map_err(|e| context(&format!("{uuid} MIG {slot} uuid"), e))?,
                    name: mig
                        .name()
                        .map_err(|e| context(&format!("{uuid} MIG {slot} name"), e))?,
                    memory_bytes: mig
                        .memory_info()
                        .map_err(|e| context(&format!("{uuid} MIG {slot} memory"), e))?
                        .total,
                });
            }
        }
        gpus.push(GpuDevice {
            uuid,
            name,
            memory_bytes,
            mig_enabled,
            mig_devices,
            closeness: BTreeMap::new(),
        });
    }
    read_closeness(&nvml, &mut gpus);
    Ok(gpus)
}

/// `nvmlNvLinkGetRemotePciInfo` is asked of links 0 to this (NVML's
/// `NVML_NVLINK_MAX_LINKS`).
const MAX_NVLINKS: u32 = 18;

/// Each GPU's closeness to every other ([`closeness`]): its NVLinks to
/// each peer (matched by PCI bus id) and their closest common PCIe
/// ancestor. What NVML cannot tell (no NVLink on the product, a
/// platform without topology) is left out, never guessed: allocation then
/// takes devices in the pool's order.
fn read_closeness(nvml: &Nvml, gpus: &mut [GpuDevice]) {
    let count = gpus.len() as u32;
    let bus: Vec<Option<String>> = (0..count)
        .map(|i| {
            let device = nvml.device_by_index(i).ok()?;
            Some(device.pci_info().ok()?.bus_id.to_ascii_lowercase())
        })
        .collect();
    for i in 0..count {
        let Ok(device) = nvml.device_by_index(i) else {
            continue;
        };
        let mut links: BTreeMap<usize, u32> = BTreeMap::new();
        for link in 0..MAX_NVLINKS {
            let wrapper = device.link_wrapper_for(link);
            match wrapper.is_active() {
                Ok(true) => {}
                Ok(false) => continue,
                // NotSupported (no NVLink) or past the last link.
                Err(_) => break,
            }
            let Ok(remote) = wrapper.remote_pci_info() else {
                continue;
            };
            let remote = remote.bus_id.to_ascii_lowercase();
            if let Some(peer) = bus
                .iter()
                .position(|b| b.as_deref() == Some(remote.as_str()))
            {
                *links.entry(peer).or_default() += 1;
            }
        }
        for j in 0..count {
            if i == j {
                continue;
            }
            let level = nvml
                .device_by_index(j)
                .ok()
                .and_then(|other| device.topology_common_ancestor(other).ok())
                .map(pcie_level);
            let nvlinks = links.get(&(j as usize)).copied().unwrap_or(0);
            if nvlinks == 0 && level.is_none() {
                continue;
            }
            let peer = gpus[j as usize].uuid.clone();
            gpus[i as usize]
                .closeness
                .insert(peer, closeness(nvlinks, level));
        }
    }
}

fn pcie_level(level: TopologyLevel) -> PcieLevel {
    match level {
        TopologyLevel::Internal => PcieLevel::Internal,
        TopologyLevel::Single => PcieLevel::Single,
        TopologyLevel::Multiple => PcieLevel::Multiple,
        TopologyLevel::HostBridge => PcieLevel::HostBridge,
        TopologyLevel::Node => PcieLevel::Numa,
        TopologyLevel::System => PcieLevel::System,
    }
}
