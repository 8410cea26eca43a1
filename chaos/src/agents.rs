//! Agents in the simulation: the real agent code ([`fleetq_agent::Agent`]:
//! session, reconnects, leases, self-fencing, the simulated executor) as
//! turmoil hosts `a1` and `a2`, serving clusters `c1` and `c2`; the
//! agent fault a seed draws (cut an agent off from the control plane, or
//! crash it and restart it); and the checks on what their executors
//! really ran, read from each executor's own journal in simulated time.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fleetq_agent::executor::{JournalEntry, JournalSink};
use fleetq_agent::{Agent, AgentConfig};
use fleetq_server::transport::Timeouts;
use rand::rngs::StdRng;
use rand::Rng;

use crate::net::SimConnector;
use crate::sim::{node_addr, Violation};

/// Agents (and clusters) in a run.
pub const AGENTS: usize = 2;
/// GPUs each agent's cluster has.
pub const AGENT_GPUS: u64 = 6;

pub fn agent_host(n: usize) -> String {
    format!("a{n}")
}

pub fn cluster_name(n: usize) -> String {
    format!("c{n}")
}

/// The agent fault of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentFault {
    None,
    /// Cut agent `agent` off from every node at `at`; heal after
    /// `heal_after` (longer than the lease in about half the draws).
    Partition {
        agent: usize,
        at: Duration,
        heal_after: Duration,
    },
    /// Crash agent `agent` at `at` (its simulated workloads die with it);
    /// restart it after `restart_after`.
    Crash {
        agent: usize,
        at: Duration,
        restart_after: Duration,
    },
    /// Agent `agent`'s messages to the control plane are lost from `at`
    /// for `heal_after` (it still hears the control plane): it starts
    /// what it is told to, but its reports and heartbeats never arrive.
    Mute {
        agent: usize,
        at: Duration,
        heal_after: Duration,
    },
    /// Agent `agent` is gone for good at `at`: crashed and never
    /// restarted, or (`cut`) cut off from the control plane for the rest
    /// of the run. Its cluster's quota must come back.
    Lost {
        agent: usize,
        at: Duration,
        cut: bool,
    },
}

impl AgentFault {
    /// Drawn after everything else a seed decides, so adding it changed
    /// none of the earlier draws.
    pub fn draw(rng: &mut StdRng) -> AgentFault {
        let agent = rng.gen_range(1..=AGENTS);
        let at = Duration::from_millis(rng.gen_range(1_500..8_000));
        let length = Duration::from_millis(rng.gen_range(500..8_000));
        match rng.gen_range(0..3) {
            0 => AgentFault::Partition {
                agent,
                at,
                heal_after: length,
            },
            1 => AgentFault::Crash {
                agent,
                at,
                restart_after: length,
            },
            _ => AgentFault::None,
        }
    }
}

impl fmt::Display for AgentFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentFault::None => write!(f, "no agent fault"),
            AgentFault::Partition {
                agent,
                at,
                heal_after,
            } => write!(
                f,
                "cut a{agent} off at {:.1}s for {:.1}s",
                at.as_secs_f64(),
                heal_after.as_secs_f64()
            ),
            AgentFault::Crash {
                agent,
                at,
                restart_after,
            } => write!(
                f,
                "crash a{agent} at {:.1}s, restart after {:.1}s",
                at.as_secs_f64(),
                restart_after.as_secs_f64()
            ),
            AgentFault::Mute {
                agent,
                at,
                heal_after,
            } => write!(
                f,
                "mute a{agent} at {:.1}s for {:.1}s",
                at.as_secs_f64(),
                heal_after.as_secs_f64()
            ),
            AgentFault::Lost { agent, at, cut } => write!(
                f,
                "{} a{agent} for good at {:.1}s",
                if *cut { "cut off" } else { "crash" },
                at.as_secs_f64()
            ),
        }
    }
}

/// Agent `n`'s configuration: static inventory, simulated executor,
/// fence policy, every node as a server.
pub fn agent_config(n: usize, nodes: u64) -> Result<AgentConfig, String> {
    let servers: Vec<String> = (1..=nodes)
        .map(|id| format!("\"{}\"", node_addr(id)))
        .collect();
    let text = format!(
        "cluster = \"{}\"\nservers = [{}]\nheartbeat_ms = 200\nlease_policy = \"fence\"\nexecutor = \"simulated\"\nsimulated_stop_ms = 300\n[[inventory]]\nflavor = \"h100-80gb\"\nresources = {{ \"nvidia.com/gpu\" = \"{AGENT_GPUS}\" }}\n",
        cluster_name(n),
        servers.join(", ")
    );
    let config: AgentConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
    config.check()?;
    Ok(config)
}

/// A journal whose clock is the simulation's.
pub fn sim_journal() -> JournalSink {
    JournalSink::new(|| {
        turmoil::sim_elapsed()
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    })
}

/// One agent's software as turmoil (re)starts it.
pub async fn agent_host_main(
    n: usize,
    nodes: u64,
    seed: u64,
    incarnation: u64,
    journal: JournalSink,
) -> turmoil::Result {
    let connector = SimConnector::fresh(Timeouts {
        request: Duration::from_secs(3600 * 24 * 365),
        ..Timeouts::default()
    });
    let agent = Agent::new(agent_config(n, nodes)?)
        .await?
        .with_connector(Arc::new(connector))
        .with_seed(seed ^ (n as u64) << 40 ^ incarnation << 48)
        .with_journal(journal);
    let (_keep, shutdown) = tokio::sync::watch::channel(false);
    agent.run(shutdown).await;
    Ok(())
}

/// Closes every run still open in `journal` at `at_ms`: the agent
/// crashed, and its simulated workloads died with it.
pub fn close_open_runs(journal: &JournalSink, at_ms: u64) -> usize {
    let entries = journal.entries();
    let open: Vec<(u64, u64)> = runs(&entries)
        .into_iter()
        .filter(|r| r.end.is_none())
        .map(|r| (r.workload, r.epoch))
        .collect();
    for (w, e) in &open {
        journal.record_at(at_ms, *w, *e, "stopped", "agent crashed");
    }
    open.len()
}

/// One run of one admission on one cluster, from the executor's journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub workload: u64,
    pub epoch: u64,
    pub start: u64,
    pub end: Option<u64>,
    pub exited_ok: bool,
}

/// An executor's journal as runs: each start paired with the end that
/// follows it (an open run has none).
pub fn runs(entries: &[JournalEntry]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for e in entries {
        if e.event == "started" {
            out.push(Run {
                workload: e.workload,
                epoch: e.epoch,
                start: e.at_ms,
                end: None,
                exited_ok: false,
            });
        } else if e.event != "exited" && e.event != "stopped" {
            // A gang's pod ending (`pod-exited`) does not end the run.
            continue;
        } else if let Some(r) = out
            .iter_mut()
            .rev()
            .find(|r| r.workload == e.workload && r.epoch == e.epoch && r.end.is_none())
        {
            r.end = Some(e.at_ms);
            r.exited_ok = e.event == "exited" && e.detail == "exit 0";
        }
    }
    out
}

/// What the executors' journals must show after a passing run: every run
/// ended; no workload ran twice at once (on two clusters, or under two
/// admissions); at no instant did the devices really in use exceed a
/// cluster's capacity or the ClusterQueue's quota; the last run of every
/// workload in `succeeded` exited 0.
pub fn check_runs(
    journals: &BTreeMap<String, Vec<JournalEntry>>,
    gpus: &BTreeMap<u64, u64>,
    succeeded: &std::collections::BTreeSet<u64>,
    quota: u64,
) -> Result<(), Violation> {
    let fail = |check: &'static str, detail: String| Err(Violation { check, detail });
    let mut all: Vec<(String, Run)> = Vec::new();
    for (cluster, entries) in journals {
        for r in runs(entries) {
            if r.end.is_none() {
                return fail(
                    "nothing left running (invariant 3)",
                    format!(
                        "workload {} epoch {} still runs on {cluster} after the run",
                        r.workload, r.epoch
                    ),
                );
            }
            all.push((cluster.clone(), r));
        }
    }
    // No workload runs twice at once. A run is the half-open interval
    // [start, end): one that ends when the next starts does not overlap.
    let mut by_workload: BTreeMap<u64, Vec<&(String, Run)>> = BTreeMap::new();
    for run in &all {
        by_workload.entry(run.1.workload).or_default().push(run);
    }
    for (w, mut list) in by_workload {
        list.sort_by_key(|(_, r)| r.start);
        for pair in list.windows(2) {
            let (ca, a) = pair[0];
            let (cb, b) = pair[1];
            let a_end = a.end.unwrap_or(u64::MAX);
            if b.start < a_end {
                return fail(
                    "no workload runs twice at once (invariant 4)",
                    format!(
                        "workload {w}: epoch {} on {ca} [{}ms, {a_end}ms) and epoch {} on {cb} from {}ms",
                        a.epoch, a.start, b.epoch, b.start
                    ),
                );
            }
        }
    }
    // Devices really in use, swept over time: ends before starts at the
    // same instant. A violation names the runs active at that instant.
    let mut events: Vec<(u64, i8, usize)> = Vec::new();
    for (i, (_, r)) in all.iter().enumerate() {
        // A run that ended as it started (a failed start) held nothing.
        if r.end == Some(r.start) {
            continue;
        }
        events.push((r.start, 1, i));
        events.push((r.end.unwrap_or(u64::MAX), -1, i));
    }
    events.sort_by_key(|&(t, d, i)| (t, d, i));
    let mut active: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    let gpus_of = |i: usize| gpus.get(&all[i].1.workload).copied().unwrap_or(0);
    let describe = |active: &std::collections::BTreeSet<usize>| {
        active
            .iter()
            .map(|&i| {
                let (c, r) = &all[i];
                format!(
                    "w{}/e{} on {c} ({} GPUs, from {}ms)",
                    r.workload,
                    r.epoch,
                    gpus_of(i),
                    r.start
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (t, d, i) in events {
        if d < 0 {
            active.remove(&i);
            continue;
        }
        active.insert(i);
        let cluster = &all[i].0;
        let on_cluster: u64 = active
            .iter()
            .filter(|&&j| all[j].0 == *cluster)
            .map(|&j| gpus_of(j))
            .sum();
        if on_cluster > AGENT_GPUS {
            return fail(
                "no over-admission of devices (invariant 1)",
                format!(
                    "{cluster} ran {on_cluster} GPUs at {t}ms; it has {AGENT_GPUS}: {}",
                    describe(&active)
                ),
            );
        }
        let total: u64 = active.iter().map(|&j| gpus_of(j)).sum();
        if total > quota {
            return fail(
                "no over-admission of quota (invariant 1)",
                format!(
                    "{total} GPUs ran at {t}ms; the ClusterQueue's quota is {quota}: {}",
                    describe(&active)
                ),
            );
        }
    }
    for w in succeeded {
        let last = all
            .iter()
            .filter(|(_, r)| r.workload == *w)
            .max_by_key(|(_, r)| r.start);
        if !last.is_some_and(|(_, r)| r.exited_ok) {
            return fail(
                "the executors agree with the ledger",
                format!(
                    "workload {w} succeeded in the ledger; its last run did not exit 0 ({last:?})"
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(at_ms: u64, workload: u64, epoch: u64, event: &str, detail: &str) -> JournalEntry {
        JournalEntry {
            at_ms,
            workload,
            epoch,
            event: event.into(),
            pid: 0,
            detail: detail.into(),
        }
    }

    fn journals(
        c1: Vec<JournalEntry>,
        c2: Vec<JournalEntry>,
    ) -> BTreeMap<String, Vec<JournalEntry>> {
        [("c1".to_string(), c1), ("c2".to_string(), c2)].into()
    }

    #[test]
    fn a_clean_move_passes() {
        let j = journals(
            vec![e(0, 1, 1, "started", ""), e(100, 1, 1, "stopped", "fenced")],
            vec![
                e(100, 1, 2, "started", ""),
                e(900, 1, 2, "exited", "exit 0"),
            ],
        );
        check_runs(&j, &[(1, 4)].into(), &[1].into(), 8).unwrap();
    }

    #[test]
    fn each_violation_is_caught() {
        let overlap = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "stopped", "")],
            vec![
                e(400, 1, 2, "started", ""),
                e(900, 1, 2, "exited", "exit 0"),
            ],
        );
        let v = check_runs(&overlap, &[(1, 1)].into(), &[1].into(), 8).unwrap_err();
        assert!(v.check.contains("twice"), "{v:?}");

        let open = journals(vec![e(0, 1, 1, "started", "")], vec![]);
        let v = check_runs(&open, &[(1, 1)].into(), &[1].into(), 8).unwrap_err();
        assert!(v.check.contains("left running"), "{v:?}");

        let over_quota = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "exited", "exit 0")],
            vec![
                e(100, 2, 1, "started", ""),
                e(600, 2, 1, "exited", "exit 0"),
            ],
        );
        let v = check_runs(&over_quota, &[(1, 5), (2, 5)].into(), &[].into(), 8).unwrap_err();
        assert!(v.check.contains("quota"), "{v:?}");

        let over_devices = journals(
            vec![
                e(0, 1, 1, "started", ""),
                e(0, 2, 1, "started", ""),
                e(500, 1, 1, "exited", "exit 0"),
                e(500, 2, 1, "exited", "exit 0"),
            ],
            vec![],
        );
        let v = check_runs(&over_devices, &[(1, 4), (2, 4)].into(), &[].into(), 16).unwrap_err();
        assert!(v.check.contains("devices"), "{v:?}");

        let never_ok = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "stopped", "")],
            vec![],
        );
        let v = check_runs(&never_ok, &[(1, 1)].into(), &[1].into(), 8).unwrap_err();
        assert!(v.check.contains("agree"), "{v:?}");
    }
}
