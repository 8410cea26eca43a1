//! Reading the node's GPUs through NVML (nvml-wrapper loads
//! `libnvidia-ml` at run time). Without a driver this fails with one clear
//! error; it never invents devices. What it reads is plain data
//! ([`GpuDevice`]) that [`super::gpu::inventory_from_gpus`] turns into
//! inventory.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

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
        });
    }
    Ok(gpus)
}
