//! Executors run what the ledger admitted to this cluster and say what
//! happened to it. Every event names the workload and the epoch of its
//! admission, so a late event about an old admission is a no-op upstream.

pub mod kubernetes;
pub mod process;
pub mod simulated;

use std::collections::BTreeMap;

use fleetq_model::Workload;
use fleetq_scheduler::Assignment;

use crate::inventory::devices::is_device;

/// What happened to one admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Running,
    Succeeded,
    Failed,
    /// Stopped on request; its processes are gone.
    Stopped,
}

impl Event {
    pub fn phase(self) -> &'static str {
        match self {
            Event::Running => "Running",
            Event::Succeeded => "Succeeded",
            Event::Failed => "Failed",
            Event::Stopped => "Stopped",
        }
    }
}

/// One report from an executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub workload: u64,
    pub epoch: u64,
    pub event: Event,
    pub message: String,
}

/// Devices an admission needs per (flavor, resource): each pod set's
/// per-pod device requests times its admitted pod count, in the flavor the
/// ledger assigned.
pub fn devices_needed(
    workload: &Workload,
    assignment: &Assignment,
) -> BTreeMap<(String, String), u64> {
    let mut needed = BTreeMap::new();
    for ps in &assignment.pod_sets {
        let Some(spec) = workload.spec.pod_sets.iter().find(|p| p.name == ps.name) else {
            continue;
        };
        for (resource, q) in &spec.requests {
            if !is_device(resource) {
                continue;
            }
            let Some(flavor) = ps.flavors.get(resource) else {
                continue;
            };
            *needed
                .entry((flavor.clone(), resource.clone()))
                .or_default() += q.milli() / 1000 * u64::from(ps.count);
        }
    }
    needed
}
