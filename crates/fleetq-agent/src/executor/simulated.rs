//! The simulated executor: "runs" a workload for its declared duration
//! (`run.duration`; without one, until stopped). For `fleetq dev`, tests,
//! benchmarks and simulation.

use std::collections::BTreeMap;

use fleetq_model::Workload;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Event, JournalSink, Report};

pub struct SimulatedExecutor {
    // Ordered, so stopping everything reports in the same order every run.
    running: BTreeMap<(u64, u64), JoinHandle<()>>,
    events: mpsc::UnboundedSender<Report>,
    journal: Option<JournalSink>,
}

impl SimulatedExecutor {
    pub fn new(events: mpsc::UnboundedSender<Report>) -> SimulatedExecutor {
        SimulatedExecutor {
            running: BTreeMap::new(),
            events,
            journal: None,
        }
    }

    /// Keeps an account of every start and end in `journal`.
    pub fn set_journal(&mut self, journal: JournalSink) {
        self.journal = Some(journal);
    }

    fn note(&self, workload: u64, epoch: u64, event: &str, detail: &str) {
        if let Some(j) = &self.journal {
            j.record(workload, epoch, event, detail);
        }
    }

    /// Starts an admission (a repeat of a running one is ignored).
    pub fn start(&mut self, workload: u64, epoch: u64, spec: &Workload) {
        self.running.retain(|_, h| !h.is_finished());
        if self.running.contains_key(&(workload, epoch)) {
            return;
        }
        let events = self.events.clone();
        self.note(workload, epoch, "started", "");
        let _ = events.send(Report {
            workload,
            epoch,
            event: Event::Running,
            message: String::new(),
        });
        let duration = spec.spec.run.duration;
        let journal = self.journal.clone();
        let handle = tokio::spawn(async move {
            let Some(d) = duration else {
                return std::future::pending().await;
            };
            tokio::time::sleep(d).await;
            if let Some(j) = &journal {
                j.record(workload, epoch, "exited", "exit 0");
            }
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
            if !h.is_finished() {
                h.abort();
                self.note(workload, epoch, "stopped", "");
            }
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
        self.running.retain(|_, h| !h.is_finished());
        let n = self.running.len();
        let stopped = std::mem::take(&mut self.running);
        for ((workload, epoch), h) in stopped {
            h.abort();
            self.note(workload, epoch, "stopped", "fenced");
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
