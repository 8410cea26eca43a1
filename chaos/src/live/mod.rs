//! `fleetq-chaos live`: the real binaries on loopback under named faults.
//!
//! - [`system`]: three `fleetq server` processes (sled) and two
//!   `fleetq agent` processes (process executor), every link to a server
//!   through a [`crate::proxy::FaultProxy`].
//! - [`load`]: clients submitting and cancelling throughout.
//! - [`scenario`]: the named faults (`leader-partition`, `leader-kill`,
//!   `agent-partition`, `agent-kill`, `follower-pause`, `slow-network`,
//!   `lossy-network`, `split-brain`).
//! - [`failover`]: leader kill -9 to the first admission by the new
//!   leader, over many kills (`fleetq-chaos failover`).
//! - [`check`]: the checker, from the outside (API, state hashes,
//!   executor journals).
//!
//! A run: start, then for each scenario a slice of `--duration` under
//! load with the fault in its middle; then stop the load, heal, quiesce
//! until every workload has finished, and check.

pub mod check;
pub mod failover;
pub mod load;
pub mod scenario;
pub mod system;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use load::{lock, Outcomes};
use scenario::Scenario;
use system::System;

pub struct LiveOptions {
    /// The `fleetq` binary to run.
    pub fleetq: PathBuf,
    pub scenarios: Vec<Scenario>,
    pub duration: Duration,
    pub seed: u64,
    /// Keep the run's directory (logs, sled data, journals) afterwards.
    pub keep: bool,
}

#[derive(Debug, Default)]
pub struct LiveReport {
    pub scenarios: usize,
    pub faults: usize,
    pub violations: Vec<String>,
    pub acked: usize,
    pub unknown: usize,
    pub cancels: usize,
    pub workloads: usize,
    /// Over-capacity samples taken, and how many got no answer.
    pub samples: (u64, u64),
    /// Where the logs are (kept when a violation was found or `keep`).
    pub dir: Option<PathBuf>,
}

/// How long the system gets to finish everything after the last fault.
const QUIESCE: Duration = Duration::from_secs(120);

pub fn run(options: &LiveOptions) -> Result<LiveReport, String> {
    if !options.fleetq.is_file() {
        return Err(format!(
            "--fleetq: {} does not exist (build it with `cargo build --bin fleetq`)",
            options.fleetq.display()
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("fleetq-chaos-live-")
        .tempdir()
        .map_err(|e| format!("cannot create a run directory: {e}"))?;
    eprintln!(
        "live: starting 3 servers and 2 agents in {}",
        dir.path().display()
    );
    let mut system = System::start(&options.fleetq, dir.path())?;
    let clients = system.clients();
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampled = Arc::new(Mutex::new(check::Samples::default()));

    let load = {
        let (clients, outcomes, stop, seed) = (
            clients.clone(),
            outcomes.clone(),
            stop.clone(),
            options.seed,
        );
        std::thread::spawn(move || load::run(&clients, &outcomes, &stop, seed))
    };
    let sampler = {
        let (clients, stop, sampled) = (clients.clone(), stop.clone(), sampled.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let sample = check::over_capacity(&clients);
                lock(&sampled).add(sample);
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };

    let mut report = LiveReport::default();
    let slice = options.duration / options.scenarios.len().max(1) as u32;
    let mut failure = None;
    for (round, scenario) in options.scenarios.iter().enumerate() {
        let started = Instant::now();
        std::thread::sleep(slice / 4);
        eprintln!(
            "live: [{}/{}] {}",
            round + 1,
            options.scenarios.len(),
            scenario.name()
        );
        match scenario.run(&mut system, round) {
            Ok(n) => report.faults += n,
            Err(e) => {
                failure = Some(format!("{}: {e}", scenario.name()));
                break;
            }
        }
        report.scenarios += 1;
        if let Some(rest) = slice.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = load.join();
    let _ = sampler.join();
    system.heal();
    if let Some(f) = failure {
        report.violations.push(format!("harness: {f}"));
    }

    eprintln!("live: healed; waiting for every workload to finish");
    quiesce(&system);
    {
        let samples = lock(&sampled);
        eprintln!(
            "live: {} over-capacity samples, {} unanswered",
            samples.taken, samples.unanswered
        );
        report.samples = (samples.taken, samples.unanswered);
        report.violations.extend(samples.violations());
    }
    let o = lock(&outcomes).clone();
    report.violations.extend(check::final_checks(&system, &o));
    report.acked = o.acked.len();
    report.unknown = o.unknown.len();
    report.cancels = o.cancels;
    report.workloads = system
        .cli_json(&["get", "workloads", "-A", "-o", "fleetq-json"])
        .ok()
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(0);
    system.shutdown();
    if options.keep || !report.violations.is_empty() {
        report.dir = Some(dir.keep());
    }
    Ok(report)
}

/// Waits until no workload is pending, admitted or running (or QUIESCE).
fn quiesce(system: &System) {
    let deadline = Instant::now() + QUIESCE;
    let mut last_report = Instant::now();
    while Instant::now() < deadline {
        let open = system
            .cli_json(&["get", "workloads", "-A", "-o", "fleetq-json"])
            .map(|v| {
                v.as_array()
                    .into_iter()
                    .flatten()
                    .filter(|w| {
                        !matches!(
                            w["state"].as_str(),
                            Some("Succeeded" | "Cancelled" | "Failed")
                        )
                    })
                    .count()
            });
        if open == Ok(0) {
            return;
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            match open {
                Ok(n) => eprintln!("live: {n} workloads still open"),
                Err(e) => eprintln!("live: cannot list the workloads yet: {e}"),
            }
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
