//! The simulated executor: "runs" a workload for its declared duration
//! (`run.duration`; without one, until stopped). For `fleetq dev`, tests,
//! benchmarks and simulation.
//!
//! A workload of several pods (a gang) has its pods finish one by one,
//! evenly spread over the duration, as a real gang's workers do; only the
//! last one ends the run. `run.env.FLEETQ_SIM_EXIT` sets the exit status
//! of the run (non-zero: reported Failed), so tests can make a start fail.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fleetq_model::Workload;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Event, JournalSink, Report};

/// The `run.env` key whose value is the simulated run's exit status.
pub const SIM_EXIT_ENV: &str = "FLEETQ_SIM_EXIT";

pub struct SimulatedExecutor {
    // Ordered, so stopping everything reports in the same order every run.
    running: BTreeMap<(u64, u64), JoinHandle<()>>,
    events: mpsc::UnboundedSender<Report>,
    journal: Option<JournalSink>,
    /// How long a stop takes: the "process" runs on meanwhile.
    stop_delay: Duration,
    /// Admissions asked to stop that have not stopped yet: they still
    /// run, so a reconcile must report them (their quota stays held).
    stopping: Arc<Mutex<BTreeSet<(u64, u64)>>>,
}

impl SimulatedExecutor {
    pub fn new(events: mpsc::UnboundedSender<Report>) -> SimulatedExecutor {
        SimulatedExecutor {
            running: BTreeMap::new(),
            events,
            journal: None,
            stop_delay: Duration::ZERO,
            stopping: Arc::default(),
        }
    }

    pub fn with_stop_delay(mut self, delay: Duration) -> SimulatedExecutor {
        self.stop_delay = delay;
        self
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
        let pods: u32 = spec
            .spec
            .pod_sets
            .iter()
            .map(|p| p.count)
            .fold(0u32, u32::saturating_add)
            .max(1);
        let exit: i32 = spec
            .spec
            .run
            .env
            .get(SIM_EXIT_ENV)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let journal = self.journal.clone();
        let handle = tokio::spawn(async move {
            let Some(d) = duration else {
                return std::future::pending().await;
            };
            // A gang's pods end one by one; the run (and its quota) ends
            // only with the last.
            let mut elapsed = Duration::ZERO;
            for pod in 1..pods {
                let at = d * pod / pods;
                tokio::time::sleep(at.saturating_sub(elapsed)).await;
                elapsed = at;
                if let Some(j) = &journal {
                    j.record(
                        workload,
                        epoch,
                        "pod-exited",
                        &format!("pod {pod} of {pods}"),
                    );
                }
            }
            tokio::time::sleep(d.saturating_sub(elapsed)).await;
            if let Some(j) = &journal {
                j.record(workload, epoch, "exited", &format!("exit {exit}"));
            }
            let (event, message) = if exit == 0 {
                (Event::Succeeded, "simulated run completed".to_string())
            } else {
                (Event::Failed, format!("simulated run exited {exit}"))
            };
            let _ = events.send(Report {
                workload,
                epoch,
                event,
                message,
            });
        });
        self.running.insert((workload, epoch), handle);
    }

    /// Stops an admission; reports Stopped once it is gone (also when it
    /// was not running here: then there is nothing left to stop).
    pub fn stop(&mut self, workload: u64, epoch: u64) {
        let handle = self.running.remove(&(workload, epoch));
        self.finish_stop(workload, epoch, handle, "");
    }

    /// Stops everything (self-fencing when the lease is about to run out).
    pub fn stop_all(&mut self) -> usize {
        self.running.retain(|_, h| !h.is_finished());
        let stopped = std::mem::take(&mut self.running);
        let n = stopped.len();
        for ((workload, epoch), h) in stopped {
            self.finish_stop(workload, epoch, Some(h), "fenced: lease about to expire");
        }
        n
    }

    /// Ends the run after the stop delay, journals it, reports Stopped.
    fn finish_stop(&self, workload: u64, epoch: u64, run: Option<JoinHandle<()>>, why: &str) {
        let (events, journal) = (self.events.clone(), self.journal.clone());
        let why = why.to_string();
        if self.stop_delay.is_zero() {
            return end_run(&events, journal.as_ref(), workload, epoch, run, why);
        }
        let delay = self.stop_delay;
        let stopping = self.stopping.clone();
        lock(&stopping).insert((workload, epoch));
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            lock(&stopping).remove(&(workload, epoch));
            end_run(&events, journal.as_ref(), workload, epoch, run, why);
        });
    }

    /// What really runs here, including what is still stopping.
    pub fn running(&mut self) -> Vec<(u64, u64)> {
        self.running.retain(|_, h| !h.is_finished());
        let mut all: BTreeSet<(u64, u64)> = self.running.keys().copied().collect();
        all.extend(lock(&self.stopping).iter().copied());
        all.into_iter().collect()
    }
}

/// Ends a run (if it still runs), journals that, and reports Stopped.
fn end_run(
    events: &mpsc::UnboundedSender<Report>,
    journal: Option<&JournalSink>,
    workload: u64,
    epoch: u64,
    run: Option<JoinHandle<()>>,
    why: String,
) {
    if let Some(h) = run {
        if !h.is_finished() {
            h.abort();
            if let Some(j) = journal {
                j.record(workload, epoch, "stopped", &why);
            }
        }
    }
    let _ = events.send(Report {
        workload,
        epoch,
        event: Event::Stopped,
        message: why,
    });
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
