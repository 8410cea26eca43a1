//! The simulated executor: "runs" a workload for its declared duration
//! (`run.duration`; without one, until stopped). For `fleetq dev`, tests,
//! benchmarks and simulation.

use std::collections::HashMap;

use fleetq_model::Workload;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Event, Report};

pub struct SimulatedExecutor {
    running: HashMap<(u64, u64), JoinHandle<()>>,
    events: mpsc::UnboundedSender<Report>,
}

impl SimulatedExecutor {
    pub fn new(events: mpsc::UnboundedSender<Report>) -> SimulatedExecutor {
        SimulatedExecutor {
            running: HashMap::new(),
            events,
        }
    }

    /// Starts an admission (a repeat of a running one is ignored).
    pub fn start(&mut self, workload: u64, epoch: u64, spec: &Workload) {
        self.running.retain(|_, h| !h.is_finished());
        if self.running.contains_key(&(workload, epoch)) {
            return;
        }
        let events = self.events.clone();
        let _ = events.send(Report {
            workload,
            epoch,
            event: Event::Running,
            message: String::new(),
        });
        let duration = spec.spec.run.duration;
        let handle = tokio::spawn(async move {
            let Some(d) = duration else {
                return std::future::pending().await;
            };
            tokio::time::sleep(d).await;
            let _ = events.send(Report {
                workload,
                epoch,
                event: Event::Succeeded,
                message: "simulated run completed".into(),
            });
        });
        self.running.insert((workload, epoch), handle);
    }

    /// Stops an admission; reports Stopped once it is gone (also when it
    /// was not running here: then there is nothing left to stop).
    pub fn stop(&mut self, workload: u64, epoch: u64) {
        if let Some(h) = self.running.remove(&(workload, epoch)) {
            h.abort();
        }
        let _ = self.events.send(Report {
            workload,
            epoch,
            event: Event::Stopped,
            message: String::new(),
        });
    }

    /// Stops everything (self-fencing when the lease is about to run out).
    pub fn stop_all(&mut self) -> usize {
        let n = self.running.len();
        for ((workload, epoch), h) in self.running.drain() {
            h.abort();
            let _ = self.events.send(Report {
                workload,
                epoch,
                event: Event::Stopped,
                message: "fenced: lease about to expire".into(),
            });
        }
        n
    }

    /// What really runs here.
    pub fn running(&mut self) -> Vec<(u64, u64)> {
        self.running.retain(|_, h| !h.is_finished());
        self.running.keys().copied().collect()
    }
}
