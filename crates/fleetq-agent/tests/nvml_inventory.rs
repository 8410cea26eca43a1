//! The NVML-to-inventory rules on four GPU layouts. The fixtures are
//! written as NVML reports devices (product and MIG device names, memory
//! in bytes as NVIDIA documents for each product and profile); they were
//! not captured from a live driver on this machine, which has no GPU.

use std::collections::BTreeMap;

use fleetq_agent::inventory::{inventory_from_gpus, FlavorMapping, GpuDevice, InventoryError};
use fleetq_model::Quantity;

fn fixture(name: &str) -> Vec<GpuDevice> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("fixture");
    serde_json::from_str(&text).expect("fixture parses")
}

fn mapping() -> FlavorMapping {
    FlavorMapping {
        products: BTreeMap::from([
            ("NVIDIA H100 80GB HBM3".to_string(), "h100-80gb".to_string()),
            ("NVIDIA A100-SXM4-40GB".to_string(), "a100-40gb".to_string()),
            ("NVIDIA H200".to_string(), "h200-141gb".to_string()),
        ]),
    }
}

fn q(units: u64) -> Quantity {
    Quantity::from_milli(units * 1000)
}

fn resources(pairs: &[(&str, u64)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(r, n)| (r.to_string(), q(*n))).collect()
}

#[test]
fn eight_whole_h100s() {
    let inv = inventory_from_gpus(&fixture("8x-h100-80gb.json"), &mapping()).expect("maps");
    assert_eq!(inv.len(), 1);
    // 81,559 MiB each is 79 whole GiB.
    assert_eq!(
        inv["h100-80gb"],
        resources(&[("nvidia.com/gpu", 8), ("gpu.memory", 8 * 79)])
    );
}

#[test]
fn an_h100_split_into_seven_1g_10gb_slices_counts_only_its_slices() {
    let inv = inventory_from_gpus(&fixture("h100-7x-1g.10gb.json"), &mapping()).expect("maps");
    assert_eq!(
        inv["h100-80gb"],
        resources(&[("nvidia.com/mig-1g.10gb", 7), ("gpu.memory", 7 * 9)])
    );
    assert!(!inv["h100-80gb"].contains_key("nvidia.com/gpu"));
}

#[test]
fn an_a100_with_mixed_profiles() {
    let inv = inventory_from_gpus(&fixture("a100-40gb-3g.20gb-2x-2g.10gb.json"), &mapping())
        .expect("maps");
    assert_eq!(
        inv["a100-40gb"],
        resources(&[
            ("nvidia.com/mig-3g.20gb", 1),
            ("nvidia.com/mig-2g.10gb", 2),
            ("gpu.memory", 19 + 9 + 9),
        ])
    );
}

#[test]
fn eight_h200s() {
    let inv = inventory_from_gpus(&fixture("8x-h200-141gb.json"), &mapping()).expect("maps");
    assert_eq!(
        inv["h200-141gb"],
        resources(&[("nvidia.com/gpu", 8), ("gpu.memory", 8 * 140)])
    );
}

#[test]
fn a_product_without_a_flavor_is_an_error_never_a_guess() {
    let gpus = fixture("8x-h200-141gb.json");
    let errors = inventory_from_gpus(&gpus, &FlavorMapping::default()).expect_err("unmapped");
    assert_eq!(errors.len(), 8);
    assert!(
        matches!(&errors[0], InventoryError::UnmappedProduct { product, .. } if product == "NVIDIA H200")
    );
    assert!(errors[0].to_string().contains("NVIDIA H200"));
}

#[test]
fn a_mig_device_without_a_profile_name_is_reported() {
    let mut gpus = fixture("h100-7x-1g.10gb.json");
    gpus[0].mig_devices[3].name = "NVIDIA H100 80GB HBM3".into();
    let errors = inventory_from_gpus(&gpus, &mapping()).expect_err("bad profile");
    assert_eq!(errors.len(), 1);
    assert!(matches!(
        errors[0],
        InventoryError::UnknownMigProfile { .. }
    ));
}

#[test]
fn a_gpu_in_mig_mode_without_instances_is_reported() {
    let mut gpus = fixture("h100-7x-1g.10gb.json");
    gpus[0].mig_devices.clear();
    let errors = inventory_from_gpus(&gpus, &mapping()).expect_err("empty MIG");
    assert!(matches!(errors[0], InventoryError::EmptyMig { .. }));
}
