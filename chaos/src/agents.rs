//! Agents in the simulation: the real agent code ([`fleetq_agent::Agent`]:
//! session, reconnects, leases, self-fencing, the simulated executor) as
//! turmoil hosts `a1` and `a2`, serving clusters `c1` and `c2`; the
//! agent fault a seed draws (cut an agent off from the control plane, or
//! crash it and restart it); and the checks on what their executors
//! really ran, read from each executor's own journal in simulated time.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fleetq_agent::executor::{JournalEntry, JournalSink};
use fleetq_agent::{Agent, AgentConfig};
use fleetq_server::transport::Timeouts;
use rand::rngs::StdRng;
use rand::Rng;

use crate::net::SimConnector;
use crate::sim::node_addr;

/// Agents (and clusters) in a run.
pub const AGENTS: usize = 2;
/// GPUs each agent's cluster has.
pub const AGENT_GPUS: u64 = 6;
/// MIG slices (`nvidia.com/mig-1g.10gb`, flavor h100-80gb as on `fleetq
/// dev`) each agent's cluster has besides its GPUs.
pub const AGENT_MIG_SLICES: u64 = 4;
/// The flavor and resources of the agents' inventory.
pub const FLAVOR: &str = "h100-80gb";
pub const GPU: &str = "nvidia.com/gpu";
pub const MIG: &str = "nvidia.com/mig-1g.10gb";

/// Every agent's devices: cluster -> flavor -> resource -> milli-units.
pub fn devices() -> crate::oracle::journal::Devices {
    (1..=AGENTS)
        .map(|n| {
            (
                cluster_name(n),
                [(
                    FLAVOR.to_string(),
                    [
                        (GPU.to_string(), AGENT_GPUS * 1000),
                        (MIG.to_string(), AGENT_MIG_SLICES * 1000),
                    ]
                    .into(),
                )]
                .into(),
            )
        })
        .collect()
}

/// The nodes the agents report when a plan says so ([`AGENT_NODES`]):
/// cluster -> node -> resource -> milli.
pub fn node_devices(report_nodes: bool) -> crate::oracle::journal::NodeDevices {
    if !report_nodes {
        return Default::default();
    }
    (1..=AGENTS)
        .map(|n| {
            let nodes = AGENT_NODES
                .iter()
                .map(|(name, resource, count)| {
                    (
                        format!("{}-{name}", cluster_name(n)),
                        [(resource.to_string(), count * 1000)].into(),
                    )
                })
                .collect();
            (cluster_name(n), nodes)
        })
        .collect()
}

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
    /// The kind's name (see `plan::FAULT_KINDS`).
    pub fn kind(&self) -> &'static str {
        match self {
            AgentFault::None => "none",
            AgentFault::Partition { .. } => "agent-partition",
            AgentFault::Crash { .. } => "agent-crash",
            AgentFault::Mute { .. } => "agent-mute",
            AgentFault::Lost { .. } => "agent-lost",
        }
    }

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

/// The nodes an agent reports when the plan says so: its GPUs split 4 +
/// 2 over two nodes, its MIG slices on a third, so a pod of 3 or 4 GPUs
/// fits one node only and gangs spread.
pub const AGENT_NODES: [(&str, &str, u64); 3] = [
    ("gpu-a", GPU, 4),
    ("gpu-b", GPU, AGENT_GPUS - 4),
    ("mig", MIG, AGENT_MIG_SLICES),
];

/// How a plan shapes an agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgentShape {
    /// It reports its nodes ([`AGENT_NODES`]).
    pub report_nodes: bool,
    /// Its cluster's lease policy is `keep` (else `fence`).
    pub keep: bool,
    /// Its nodes carry rack labels ([`AGENT_RACKS`]).
    pub racks: bool,
}

/// The rack of each of [`AGENT_NODES`] in a plan with racks: the 4-GPU
/// node alone in one, the 2-GPU node and the MIG node in the other, so a
/// gang that asks for one rack fits one of them only.
pub const AGENT_RACKS: [&str; 3] = ["r1", "r2", "r2"];

/// Agent `n`'s configuration: static inventory (with nodes if the shape
/// says so), simulated executor, the shape's lease policy, every node as
/// a server.
pub fn agent_config(n: usize, nodes: u64, shape: AgentShape) -> Result<AgentConfig, String> {
    let servers: Vec<String> = (1..=nodes)
        .map(|id| format!("\"{}\"", node_addr(id)))
        .collect();
    let mut text = format!(
        "cluster = \"{}\"\nservers = [{}]\nheartbeat_ms = 200\nlease_policy = \"{}\"\nexecutor = \"simulated\"\nsimulated_stop_ms = 300\n[[inventory]]\nflavor = \"{FLAVOR}\"\nresources = {{ \"{GPU}\" = \"{AGENT_GPUS}\", \"{MIG}\" = \"{AGENT_MIG_SLICES}\" }}\n",
        cluster_name(n),
        servers.join(", "),
        if shape.keep { "keep" } else { "fence" },
    );
    if shape.report_nodes {
        for ((name, resource, count), rack) in AGENT_NODES.into_iter().zip(AGENT_RACKS) {
            text.push_str(&format!(
                "[[nodes]]\nname = \"{}-{name}\"\nflavor = \"{FLAVOR}\"\nresources = {{ \"{resource}\" = \"{count}\" }}\n",
                cluster_name(n)
            ));
            if shape.racks {
                text.push_str(&format!(
                    "labels = {{ \"{}\" = \"{}-{rack}\", \"{}\" = \"{FLAVOR}\" }}\n",
                    crate::plan::RACK_LABEL,
                    cluster_name(n),
                    crate::plan::FLAVOR_LABEL,
                ));
            }
        }
    }
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
    shape: AgentShape,
    seed: u64,
    incarnation: u64,
    journal: JournalSink,
    inventory: Option<tokio::sync::watch::Receiver<fleetq_agent::inventory::InventoryReport>>,
) -> turmoil::Result {
    let connector = SimConnector::fresh(Timeouts {
        request: Duration::from_secs(3600 * 24 * 365),
        ..Timeouts::default()
    });
    let mut agent = Agent::new(agent_config(n, nodes, shape)?)
        .await?
        .with_connector(Arc::new(connector))
        .with_seed(seed ^ (n as u64) << 40 ^ incarnation << 48)
        .with_journal(journal);
    if let Some(rx) = inventory {
        agent = agent.with_inventory(fleetq_agent::inventory::InventoryFeed::watching(rx));
    }
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
