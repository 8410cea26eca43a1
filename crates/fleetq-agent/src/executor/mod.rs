//! Executors run what the ledger admitted to this cluster and say what
//! happened to it. Every event names the workload and the epoch of its
//! admission, so a late event about an old admission is a no-op upstream.

pub mod job_status;
pub mod kubernetes;
pub mod logs;
pub mod pod_logs;
pub mod pod_waits;
pub mod process;
pub mod run_as;
pub mod simulated;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use fleetq_model::assignment::Assignment;
use fleetq_model::Workload;

use crate::inventory::devices::is_device;

/// What happened to one admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Running,
    Succeeded,
    Failed,
    /// Stopped on request; its processes are gone.
    Stopped,
    /// Not started: its pods cannot be placed where they were admitted
    /// (the message says why). Changes nothing in the ledger but its
    /// history.
    Waiting,
}

impl Event {
    pub fn phase(self) -> &'static str {
        match self {
            Event::Running => "Running",
            Event::Succeeded => "Succeeded",
            Event::Failed => "Failed",
            Event::Stopped => "Stopped",
            Event::Waiting => "Waiting",
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

/// One fact of an executor's own account of what it ran: the process
/// executor's `journal.jsonl` lines, the simulated executor's
/// [`JournalSink`] entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// Milliseconds on the executor's clock (Unix time for real
    /// processes, simulated time in the simulator).
    pub at_ms: u64,
    pub workload: u64,
    pub epoch: u64,
    /// `started`, `exited` or `stopped`.
    pub event: String,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// An in-memory journal with its own clock, for executors that run no
/// processes (the simulator reads it to check that no workload ever ran
/// twice at once).
#[derive(Clone)]
pub struct JournalSink {
    entries: Arc<Mutex<Vec<JournalEntry>>>,
    clock: Arc<dyn Fn() -> u64 + Send + Sync>,
}

impl JournalSink {
    pub fn new(clock: impl Fn() -> u64 + Send + Sync + 'static) -> JournalSink {
        JournalSink {
            entries: Arc::default(),
            clock: Arc::new(clock),
        }
    }

    pub fn record(&self, workload: u64, epoch: u64, event: &str, detail: &str) {
        self.record_at((self.clock)(), workload, epoch, event, detail);
    }

    /// An entry at a time the caller read (a harness closing the runs of
    /// an executor that crashed).
    pub fn record_at(&self, at_ms: u64, workload: u64, epoch: u64, event: &str, detail: &str) {
        let entry = JournalEntry {
            at_ms,
            workload,
            epoch,
            event: event.to_string(),
            pid: 0,
            detail: detail.to_string(),
        };
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry);
    }

    pub fn entries(&self) -> Vec<JournalEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
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
