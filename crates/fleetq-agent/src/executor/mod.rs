//! Executors run what the ledger admitted to this cluster and say what
//! happened to it. Every event names the workload and the epoch of its
//! admission, so a late event about an old admission is a no-op upstream.

pub mod simulated;

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
