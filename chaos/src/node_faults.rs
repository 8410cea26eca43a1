//! Nodes that leave and return mid-run (issue 26, item 7): in a plan whose
//! agents report nodes, one node of one agent stops being reported, or is
//! reported cordoned, for a while, under whatever runs there.
//!
//! The agents' inventory is a feed the simulation holds
//! ([`InventoryFeeds`]), so a node leaves as it would from the Kubernetes
//! inventory: the agent re-registers its cluster, and the ledger fences or
//! keeps the workloads on it by the lease policy. The oracle re-derives
//! what the ledger must keep of such a node and checks the policy
//! (`oracle::replica`).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use fleetq_agent::inventory::InventoryReport;
use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::watch;

use crate::agents::{self, AGENTS, AGENT_NODES};

/// How a node leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaves {
    /// No longer reported (deleted from the API server).
    Gone,
    /// Reported unschedulable (cordoned, or NotReady).
    Cordoned,
}

/// Node `node` (an index into [`AGENT_NODES`]) of agent `agent` leaves at
/// `at` and returns after `back_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeFault {
    pub agent: usize,
    pub node: usize,
    pub leaves: Leaves,
    pub at: Duration,
    pub back_after: Duration,
}

impl NodeFault {
    /// The kind's name (see `plan::FAULT_KINDS`).
    pub fn kind(&self) -> &'static str {
        match self.leaves {
            Leaves::Gone => "node-gone",
            Leaves::Cordoned => "node-cordoned",
        }
    }

    /// In one plan with nodes in two, from the nodes' own stream.
    pub fn draw(rng: &mut StdRng) -> Option<NodeFault> {
        if !rng.gen_ratio(1, 2) {
            return None;
        }
        Some(NodeFault {
            agent: rng.gen_range(1..=AGENTS),
            // The 4-GPU node most often, where most pods land.
            node: [0, 0, 1, 2][rng.gen_range(0..4)],
            leaves: if rng.gen_ratio(1, 2) {
                Leaves::Gone
            } else {
                Leaves::Cordoned
            },
            at: Duration::from_millis(rng.gen_range(1_500..9_000)),
            back_after: Duration::from_millis(rng.gen_range(1_000..6_000)),
        })
    }

    fn node_name(&self) -> String {
        format!(
            "{}-{}",
            agents::cluster_name(self.agent),
            AGENT_NODES[self.node].0
        )
    }
}

impl fmt::Display for NodeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self.leaves {
            Leaves::Gone => "remove",
            Leaves::Cordoned => "cordon",
        };
        write!(
            f,
            "{how} node {} at {:.1}s for {:.1}s",
            self.node_name(),
            self.at.as_secs_f64(),
            self.back_after.as_secs_f64()
        )
    }
}

/// Each agent's inventory as the simulation sets it; every incarnation
/// of an agent reads it through its own receiver.
#[derive(Clone, Default)]
pub struct InventoryFeeds(BTreeMap<usize, watch::Sender<InventoryReport>>);

impl InventoryFeeds {
    /// The agents' configured inventory, for a plan whose agents report
    /// nodes; empty otherwise (the agents read their configuration).
    pub fn new(nodes: u64, report_nodes: bool, racks: bool) -> Result<InventoryFeeds, String> {
        let mut feeds = BTreeMap::new();
        if report_nodes {
            for n in 1..=AGENTS {
                let shape = agents::AgentShape {
                    report_nodes: true,
                    keep: false,
                    racks,
                };
                let config = agents::agent_config(n, nodes, shape)?;
                let report = InventoryReport {
                    totals: config.static_inventory().map_err(|e| e.join("; "))?,
                    nodes: config.static_nodes().map_err(|e| e.join("; "))?,
                };
                feeds.insert(n, watch::channel(report).0);
            }
        }
        Ok(InventoryFeeds(feeds))
    }

    /// Agent `n`'s feed, if the simulation drives it.
    pub fn receiver(&self, n: usize) -> Option<watch::Receiver<InventoryReport>> {
        self.0.get(&n).map(watch::Sender::subscribe)
    }

    fn update(&self, n: usize, change: impl FnOnce(&mut InventoryReport)) {
        if let Some(tx) = self.0.get(&n) {
            tx.send_modify(change);
        }
    }
}

/// Strikes one [`NodeFault`] and undoes it.
pub struct NodeInjector {
    fault: NodeFault,
    /// The agent's inventory as it was, while the node is away.
    away: Option<InventoryReport>,
    back: bool,
    pub done: Option<String>,
}

impl NodeInjector {
    pub fn new(fault: NodeFault) -> NodeInjector {
        NodeInjector {
            fault,
            away: None,
            back: false,
            done: None,
        }
    }

    /// The planned fault's kind, and whether it struck.
    pub fn coverage(&self) -> (&'static str, bool) {
        (self.fault.kind(), self.done.is_some())
    }

    pub fn step(&mut self, now: Duration, feeds: &InventoryFeeds) {
        let f = self.fault;
        if self.away.is_none() && !self.back && now >= f.at {
            let name = f.node_name();
            let mut before = None;
            feeds.update(f.agent, |report| {
                let Some(i) = report.nodes.iter().position(|n| n.name == name) else {
                    return;
                };
                before = Some(report.clone());
                let node = report.nodes[i].clone();
                // Its devices leave the totals either way: the agents'
                // contract is that totals count schedulable nodes.
                let totals = report.totals.entry(node.flavor.clone()).or_default();
                for (resource, q) in &node.allocatable {
                    if let Some(t) = totals.get_mut(resource) {
                        *t = t.saturating_sub(*q);
                    }
                }
                match f.leaves {
                    Leaves::Gone => {
                        report.nodes.remove(i);
                    }
                    Leaves::Cordoned => report.nodes[i].unschedulable = true,
                }
            });
            if before.is_some() {
                self.done = Some(format!("{f} [at {:.1}s]", now.as_secs_f64()));
            }
            self.back = before.is_none();
            self.away = before;
        } else if now >= f.at + f.back_after {
            if let Some(report) = self.away.take() {
                feeds.update(f.agent, |now| *now = report);
                self.back = true;
            }
        }
    }
}
