//! `fleetq-chaos failover`: how long the group is without admissions when
//! its leader dies. Each round kills the leader with SIGKILL, then
//! clients submit a one-GPU workload to the survivors every
//! [`PACE`] until one is accepted; the round's figure is the first
//! admission time the ledger records after the kill (stamped by the new
//! leader's clock, this machine's) minus the moment the kill returned.
//! The killed node restarts from its sled directory and catches up before
//! the next round.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleetq_server::clock::{Clock, SystemClock};

use super::system::System;

/// How often a client tries to submit while the group has no leader.
pub const PACE: Duration = Duration::from_millis(25);

/// Submissions in flight at once (each is a CLI process).
const IN_FLIGHT: usize = 16;

pub struct FailoverOptions {
    pub fleetq: PathBuf,
    pub kills: usize,
    pub keep: bool,
    /// `fleetq server --election-timeout` (None: the server's default).
    pub election_timeout: Option<String>,
}

/// One round.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// Kill -> a survivor answers as Leader (as the harness saw it).
    pub leader_ms: u64,
    /// Kill -> the first admission the ledger stamped.
    pub admission_ms: u64,
}

/// The `q`-quantile (0..=1) of `v`, nearest rank.
pub fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

pub fn run(options: &FailoverOptions) -> Result<Vec<Round>, String> {
    if !options.fleetq.is_file() {
        return Err(format!(
            "--fleetq: {} does not exist (build it with `cargo build --release --bin fleetq`)",
            options.fleetq.display()
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("fleetq-chaos-failover-")
        .tempdir()
        .map_err(|e| format!("cannot create a run directory: {e}"))?;
    eprintln!(
        "failover: starting 3 servers and 2 agents in {}",
        dir.path().display()
    );
    let server_args = match &options.election_timeout {
        Some(t) => vec!["--election-timeout".to_string(), t.clone()],
        None => Vec::new(),
    };
    let mut system = System::start_with(&options.fleetq, dir.path(), server_args)?;
    let mut rounds = Vec::new();
    for k in 0..options.kills {
        let round = match one_round(&mut system, k) {
            Ok(r) => r,
            Err(e) => {
                let why = explain(&system);
                system.shutdown();
                let kept = dir.keep();
                return Err(format!(
                    "{e}; {why}; logs and data kept in {}",
                    kept.display()
                ));
            }
        };
        eprintln!(
            "failover: kill {}/{}: leader after {} ms, first admission after {} ms",
            k + 1,
            options.kills,
            round.leader_ms,
            round.admission_ms
        );
        rounds.push(round);
    }
    system.shutdown();
    if options.keep {
        let kept = dir.keep();
        eprintln!("failover: kept {}", kept.display());
    }
    Ok(rounds)
}

fn one_round(system: &mut System, k: usize) -> Result<Round, String> {
    let old = system
        .wait_leader(Duration::from_secs(20))
        .ok_or("no leader before the kill")?;
    // Let the heartbeats settle after the previous restart.
    std::thread::sleep(Duration::from_millis(500));
    system.kill_server(old);
    let killed_at = Instant::now();
    // The clock the servers stamp admissions with.
    let t0 = SystemClock.now().0;
    let survivors: Vec<usize> = (0..system.servers.len()).filter(|i| *i != old).collect();

    let clients = system.clients();
    let accepted = Arc::new(AtomicBool::new(false));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut n = 0usize;
    let mut leader_ms = None;
    let deadline = killed_at + Duration::from_secs(30);
    while !accepted.load(Ordering::SeqCst) {
        if Instant::now() > deadline {
            return Err(format!(
                "kill {}: no submission accepted within 30 s",
                k + 1
            ));
        }
        if leader_ms.is_none() {
            if let Some(i) = survivors
                .iter()
                .find(|i| system.status(**i).is_some_and(|s| s["state"] == "Leader"))
            {
                let _ = i;
                leader_ms = Some(killed_at.elapsed().as_millis() as u64);
            }
        }
        if in_flight.load(Ordering::SeqCst) < IN_FLIGHT {
            let name = format!("failover-{k}-{n}");
            let server = survivors[n % survivors.len()];
            n += 1;
            let (clients, accepted, in_flight) =
                (clients.clone(), accepted.clone(), in_flight.clone());
            in_flight.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let args = [
                    "submit",
                    "--queue",
                    "chaos",
                    "--name",
                    &name,
                    "--request",
                    "nvidia.com/gpu=1",
                    // The process executor runs this; it holds its GPU
                    // until the round cancels it.
                    "--",
                    "sleep",
                    "600",
                ];
                if let Ok(out) = clients.cli_at(server, &args, Duration::from_secs(5)) {
                    if out.status.success() {
                        accepted.store(true, Ordering::SeqCst);
                    }
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        }
        std::thread::sleep(PACE);
    }
    // The first admission after the kill, from the ledger's own stamps.
    let prefix = format!("failover-{k}-");
    let admission_ms = loop {
        let list = system.cli_json(&["get", "workloads", "-o", "fleetq-json"])?;
        let first = list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| w["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
            .filter_map(|w| w["admittedAtMs"].as_u64())
            .filter(|at| *at >= t0)
            .min();
        if let Some(at) = first {
            break at - t0;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "kill {}: nothing admitted within 30 s of {t0}",
                k + 1
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    while in_flight.load(Ordering::SeqCst) > 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Free the quota for the next round.
    for i in 0..n {
        let _ = system.cli(&["cancel", &format!("{prefix}{i}")]);
    }
    system.start_server(old)?;
    catch_up(system, old)?;
    Ok(Round {
        leader_ms: leader_ms.unwrap_or(admission_ms),
        admission_ms,
    })
}

/// The clusters' states and the pending workloads' reasons, for an error.
fn explain(system: &System) -> String {
    let clusters = system
        .cli_json(&["get", "clusters", "-o", "json"])
        .map(|v| v.to_string())
        .unwrap_or_else(|e| e);
    let pending = system
        .cli_json(&[
            "get",
            "workloads",
            "--state",
            "Pending",
            "-o",
            "fleetq-json",
        ])
        .map(|v| {
            v.as_array()
                .into_iter()
                .flatten()
                .map(|w| format!("{}: {}", w["name"], w["reason"]))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|e| e);
    let all = system
        .cli_json(&["get", "workloads", "-o", "fleetq-json"])
        .map(|v| {
            v.as_array()
                .into_iter()
                .flatten()
                .rev()
                .take(5)
                .map(|w| {
                    format!(
                        "{} {} created {} admitted {}",
                        w["name"], w["state"], w["createdAtMs"], w["admittedAtMs"]
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|e| e);
    format!("clusters {clusters}; pending {pending}; last workloads {all}")
}

/// Waits until the restarted node has applied what the leader has.
fn catch_up(system: &System, node: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let leader = system.wait_leader(Duration::from_secs(10));
        let applied = |i: usize| system.status(i).and_then(|s| s["lastApplied"].as_u64());
        if let (Some(l), Some(mine)) = (leader.and_then(applied), applied(node)) {
            if mine >= l {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("server {} did not catch up within 60 s", node + 1))
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<u64> = (1..=20).collect();
        assert_eq!(quantile(&v, 0.5), 10);
        assert_eq!(quantile(&v, 0.99), 20);
        assert_eq!(quantile(&[7], 0.99), 7);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
