//! Fault injection in the simulation: each planned fault is an
//! [`Injector`] (control plane) or an [`AgentInjector`] that strikes when
//! its time comes and undoes itself later. Faults may overlap, so link
//! cuts are counted per direction ([`Links`]) and crashes go through the
//! set of nodes that are down: one fault's heal never undoes another's
//! cut, and a node already down is not crashed twice.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fleetq_agent::executor::JournalSink;
use fleetq_ledger::command::Command;
use fleetq_ledger::raft::NodeId;
use fleetq_ledger::store::mem::MemDisk;
use openraft::EntryPayload;

use crate::agents::{self, AgentFault};
use crate::plan::{CrashTarget, Fault, MidBatch, OneWayDirection, SplitKind, Weather};
use crate::sim::{current_leader, host_name, Registry};

/// The simulated network's message latency when the weather is fair.
pub const FAIR_LATENCY: Duration = Duration::from_millis(20);

/// One-way link cuts, counted: a direction is cut while any fault cuts it.
#[derive(Debug, Default)]
pub struct Links {
    cuts: BTreeMap<(String, String), u32>,
}

impl Links {
    pub fn cut(&mut self, sim: &turmoil::Sim<'_>, from: &str, to: &str) {
        let count = self.cuts.entry((from.into(), to.into())).or_default();
        *count += 1;
        if *count == 1 {
            sim.partition_oneway(from, to);
        }
    }

    pub fn mend(&mut self, sim: &turmoil::Sim<'_>, from: &str, to: &str) {
        let key = (from.to_string(), to.to_string());
        if let Some(count) = self.cuts.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.cuts.remove(&key);
                sim.repair_oneway(from, to);
            }
        }
    }

    fn apply(&mut self, sim: &turmoil::Sim<'_>, cuts: &[(String, String)], cut: bool) {
        for (from, to) in cuts {
            if cut {
                self.cut(sim, from, to);
            } else {
                self.mend(sim, from, to);
            }
        }
    }
}

/// What the injectors act on besides the simulation itself.
pub struct World {
    pub nodes: u64,
    pub registry: Registry,
    pub disks: BTreeMap<NodeId, MemDisk>,
    pub links: Links,
    /// Nodes crashed and not restarted yet.
    pub down: BTreeSet<NodeId>,
}

impl World {
    /// Stops `node`'s software, then cuts its power: the disk keeps only
    /// what was synced. Returns what was lost, for the report.
    fn crash(&mut self, sim: &mut turmoil::Sim<'_>, node: NodeId) -> String {
        sim.crash(host_name(node));
        let disk = &self.disks[&node];
        let lost = disk.unsynced_writes();
        disk.crash();
        self.registry.borrow_mut().remove(&node);
        self.down.insert(node);
        format!(
            "n{node} lost {lost} unsynced writes, durable log to {}",
            disk.durable_last_index()
                .map_or_else(|| "-".to_string(), |i| i.to_string())
        )
    }

    fn restart(&mut self, sim: &mut turmoil::Sim<'_>, node: NodeId) {
        if self.down.remove(&node) {
            sim.bounce(host_name(node));
        }
    }

    fn others(&self, node: NodeId) -> Vec<NodeId> {
        (1..=self.nodes).filter(|&o| o != node).collect()
    }
}

/// Both directions between every node of `a` and every node of `b`.
fn cuts_between(a: &[NodeId], b: &[NodeId]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for &x in a {
        for &y in b {
            out.push((host_name(x), host_name(y)));
            out.push((host_name(y), host_name(x)));
        }
    }
    out
}

/// What a struck fault must undo when its time is up.
enum Undo {
    Cuts(Vec<(String, String)>),
    Restart(Vec<NodeId>),
    Weather,
}

enum Phase {
    Waiting,
    Active { until: Duration, undo: Undo },
    Over,
}

/// Injects one planned control-plane fault as simulated time passes.
pub struct Injector {
    fault: Fault,
    phase: Phase,
    /// What it did, once it struck.
    pub done: Option<String>,
}

impl Injector {
    pub fn new(fault: Fault) -> Injector {
        Injector {
            fault,
            phase: Phase::Waiting,
            done: None,
        }
    }

    /// The planned fault's kind, and whether it struck; a mid-batch fault
    /// that struck a submission entry carrying admissions counts as
    /// `mid-batch-on-submission` too.
    pub fn coverage(&self) -> Vec<(&'static str, bool)> {
        let mut out = vec![(self.fault.kind(), self.done.is_some())];
        if self
            .done
            .as_deref()
            .is_some_and(|d| d.contains("SubmitWorkloads #"))
        {
            out.push(("mid-batch-on-submission", true));
        }
        out
    }

    pub fn step(&mut self, sim: &mut turmoil::Sim<'_>, world: &mut World) {
        let now = sim.elapsed();
        match &self.phase {
            Phase::Waiting => {
                if let Some((lasting, undo, what)) = self.strike(sim, world, now) {
                    self.done = Some(format!(
                        "{what} at {:.1}s until {:.1}s",
                        now.as_secs_f64(),
                        (now + lasting).as_secs_f64()
                    ));
                    self.phase = Phase::Active {
                        until: now + lasting,
                        undo,
                    };
                }
            }
            Phase::Active { until, .. } if now >= *until => {
                let Phase::Active { undo, .. } = std::mem::replace(&mut self.phase, Phase::Over)
                else {
                    return;
                };
                match undo {
                    Undo::Cuts(cuts) => world.links.apply(sim, &cuts, false),
                    Undo::Restart(nodes) => {
                        for node in nodes {
                            world.restart(sim, node);
                        }
                    }
                    Undo::Weather => {
                        sim.set_fail_rate(0.0);
                        sim.set_max_message_latency(FAIR_LATENCY);
                    }
                }
                if let (Some(done), Some(leader)) =
                    (&mut self.done, current_leader(&world.registry))
                {
                    done.push_str(&format!(", n{leader} leading then"));
                }
            }
            Phase::Active { .. } | Phase::Over => {}
        }
    }

    /// Strikes if the time (and, for some faults, the moment) has come:
    /// how long the fault lasts, how to undo it, and what it did.
    fn strike(
        &self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut World,
        now: Duration,
    ) -> Option<(Duration, Undo, String)> {
        let at = match &self.fault {
            Fault::None => return None,
            Fault::PartitionLeader { at, .. }
            | Fault::CrashNode { at, .. }
            | Fault::Split { at, .. }
            | Fault::OneWay { at, .. }
            | Fault::CrashAll { at, .. }
            | Fault::LeaderMidBatch { at, .. }
            | Fault::Network { at, .. } => *at,
        };
        if now < at {
            return None;
        }
        match self.fault.clone() {
            Fault::None => None,
            Fault::Network {
                lasting, weather, ..
            } => {
                let what = match weather {
                    Weather::Loss { fail, .. } => {
                        sim.set_fail_rate(f64::from(fail) / crate::plan::PER_MILLE);
                        "lossy links"
                    }
                    Weather::Slow { max_latency } => {
                        sim.set_max_message_latency(max_latency);
                        "slow links"
                    }
                };
                Some((lasting, Undo::Weather, what.to_string()))
            }
            Fault::CrashAll { restart_after, .. } => {
                let up: Vec<NodeId> = (1..=world.nodes)
                    .filter(|n| !world.down.contains(n))
                    .collect();
                let lost: Vec<String> = up.iter().map(|&n| world.crash(sim, n)).collect();
                Some((
                    restart_after,
                    Undo::Restart(up),
                    format!("crashed every node ({})", lost.join("; ")),
                ))
            }
            fault => {
                let leader = current_leader(&world.registry)?;
                self.strike_around(sim, world, leader, fault)
            }
        }
    }

    /// The faults that pick their victims by who leads now.
    fn strike_around(
        &self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut World,
        leader: NodeId,
        fault: Fault,
    ) -> Option<(Duration, Undo, String)> {
        let others = world.others(leader);
        match fault {
            Fault::PartitionLeader { heal_after, .. } => {
                let cuts = cuts_between(&[leader], &others);
                world.links.apply(sim, &cuts, true);
                Some((heal_after, Undo::Cuts(cuts), format!("cut n{leader} off")))
            }
            Fault::CrashNode {
                target,
                restart_after,
                ..
            } => {
                let (node, role) = match target {
                    CrashTarget::Leader => (leader, "leader"),
                    CrashTarget::Follower(nth) => (others[nth % others.len()], "follower"),
                };
                if world.down.contains(&node) {
                    return None;
                }
                let lost = world.crash(sim, node);
                Some((
                    restart_after,
                    Undo::Restart(vec![node]),
                    format!("crashed {role} n{node} ({lost})"),
                ))
            }
            Fault::Split {
                heal_after, kind, ..
            } => {
                let minority = ((world.nodes - 1) / 2) as usize;
                let (a, b): (Vec<NodeId>, Vec<NodeId>) = match kind {
                    SplitKind::LeaderInMinority => {
                        let mut a = vec![leader];
                        a.extend(others.iter().take(minority - 1));
                        let b = others.iter().skip(minority - 1).copied().collect();
                        (a, b)
                    }
                    SplitKind::FollowersInMinority => {
                        let a: Vec<NodeId> = others.iter().rev().take(minority).copied().collect();
                        let b = (1..=world.nodes).filter(|n| !a.contains(n)).collect();
                        (a, b)
                    }
                };
                let cuts = cuts_between(&a, &b);
                world.links.apply(sim, &cuts, true);
                Some((
                    heal_after,
                    Undo::Cuts(cuts),
                    format!("split {a:?} from {b:?} (n{leader} leading)"),
                ))
            }
            Fault::OneWay {
                heal_after,
                direction,
                ..
            } => {
                let cuts: Vec<(String, String)> = others
                    .iter()
                    .map(|&o| match direction {
                        OneWayDirection::LeaderCannotSend => (host_name(leader), host_name(o)),
                        OneWayDirection::LeaderCannotHear => (host_name(o), host_name(leader)),
                    })
                    .collect();
                world.links.apply(sim, &cuts, true);
                Some((
                    heal_after,
                    Undo::Cuts(cuts),
                    format!("one-way cut around n{leader}"),
                ))
            }
            Fault::LeaderMidBatch { strike, .. } => {
                let in_flight = admission_in_flight(world, leader)?;
                match strike {
                    MidBatch::Crash(restart_after) => {
                        let lost = world.crash(sim, leader);
                        Some((
                            restart_after,
                            Undo::Restart(vec![leader]),
                            format!("crashed leader n{leader} with {in_flight} in flight ({lost})"),
                        ))
                    }
                    MidBatch::Isolate(heal_after) => {
                        let cuts = cuts_between(&[leader], &others);
                        world.links.apply(sim, &cuts, true);
                        Some((
                            heal_after,
                            Undo::Cuts(cuts),
                            format!("cut leader n{leader} off with {in_flight} in flight"),
                        ))
                    }
                }
            }
            Fault::None | Fault::Network { .. } | Fault::CrashAll { .. } => None,
        }
    }
}

/// The last entry `leader` appended and has not applied yet, if it
/// carries admission decisions (an `AdmitBatch`, or a `SubmitWorkloads`
/// with admissions planned on submit): its decisions are in flight.
/// Returns the entry, as "AdmitBatch #12" or "SubmitWorkloads #12".
fn admission_in_flight(world: &World, leader: NodeId) -> Option<String> {
    let registry = world.registry.borrow();
    let metrics = registry.get(&leader)?.raft.metrics().borrow().clone();
    let last = metrics.last_log_index?;
    let applied = metrics.last_applied.map_or(0, |l| l.index);
    if last <= applied {
        return None;
    }
    let entry = world.disks.get(&leader)?.entry(last)?;
    match entry.payload {
        EntryPayload::Normal(request) => match &request.command {
            Command::AdmitBatch(_) => Some(format!("AdmitBatch #{last}")),
            Command::SubmitWorkloads { admit, .. } if !admit.is_empty() => {
                Some(format!("SubmitWorkloads #{last}"))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Injects one planned agent fault.
pub struct AgentInjector {
    fault: AgentFault,
    /// When the fault ends (heal or restart), once it began; `None` in
    /// the pair for a fault that never ends.
    until: Option<Option<Duration>>,
    recovered: bool,
    pub done: Option<String>,
}

impl AgentInjector {
    /// The planned fault's kind, and whether it struck.
    pub fn coverage(&self) -> (&'static str, bool) {
        (self.fault.kind(), self.done.is_some())
    }

    pub fn new(fault: AgentFault) -> AgentInjector {
        AgentInjector {
            fault,
            until: None,
            recovered: false,
            done: None,
        }
    }

    fn cuts(agent: usize, nodes: u64) -> Vec<(String, String)> {
        (1..=nodes)
            .flat_map(|id| {
                [
                    (agents::agent_host(agent), host_name(id)),
                    (host_name(id), agents::agent_host(agent)),
                ]
            })
            .collect()
    }

    /// The agent's direction only.
    fn mute(agent: usize, nodes: u64) -> Vec<(String, String)> {
        (1..=nodes)
            .map(|id| (agents::agent_host(agent), host_name(id)))
            .collect()
    }

    pub fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        world: &mut World,
        journals: &BTreeMap<usize, JournalSink>,
    ) {
        let now = sim.elapsed();
        let nodes = world.nodes;
        match (&self.fault, self.until) {
            (AgentFault::None, _) => {}
            (
                AgentFault::Partition {
                    agent,
                    at,
                    heal_after,
                },
                None,
            ) if now >= *at => {
                world.links.apply(sim, &Self::cuts(*agent, nodes), true);
                self.until = Some(Some(now + *heal_after));
                self.done = Some(format!(
                    "a{agent} cut off from {:.1}s to {:.1}s",
                    now.as_secs_f64(),
                    (now + *heal_after).as_secs_f64()
                ));
            }
            (AgentFault::Partition { agent, .. }, Some(Some(until)))
                if !self.recovered && now >= until =>
            {
                world.links.apply(sim, &Self::cuts(*agent, nodes), false);
                self.recovered = true;
            }
            (
                AgentFault::Crash {
                    agent,
                    at,
                    restart_after,
                },
                None,
            ) if now >= *at => {
                sim.crash(agents::agent_host(*agent));
                let killed = agents::close_open_runs(&journals[agent], now.as_millis() as u64);
                self.until = Some(Some(now + *restart_after));
                self.done = Some(format!(
                    "a{agent} crashed at {:.1}s with {killed} workloads running, restarted at {:.1}s",
                    now.as_secs_f64(),
                    (now + *restart_after).as_secs_f64()
                ));
            }
            (AgentFault::Crash { agent, .. }, Some(Some(until)))
                if !self.recovered && now >= until =>
            {
                sim.bounce(agents::agent_host(*agent));
                self.recovered = true;
            }
            (
                AgentFault::Mute {
                    agent,
                    at,
                    heal_after,
                },
                None,
            ) if now >= *at => {
                world.links.apply(sim, &Self::mute(*agent, nodes), true);
                self.until = Some(Some(now + *heal_after));
                self.done = Some(format!(
                    "a{agent} muted from {:.1}s to {:.1}s",
                    now.as_secs_f64(),
                    (now + *heal_after).as_secs_f64()
                ));
            }
            (AgentFault::Mute { agent, .. }, Some(Some(until)))
                if !self.recovered && now >= until =>
            {
                world.links.apply(sim, &Self::mute(*agent, nodes), false);
                self.recovered = true;
            }
            (AgentFault::Lost { agent, at, cut }, None) if now >= *at => {
                let how = if *cut {
                    world.links.apply(sim, &Self::cuts(*agent, nodes), true);
                    "cut off".to_string()
                } else {
                    sim.crash(agents::agent_host(*agent));
                    let killed = agents::close_open_runs(&journals[agent], now.as_millis() as u64);
                    format!("crashed with {killed} workloads running")
                };
                self.until = Some(None);
                self.done = Some(format!(
                    "a{agent} {how} for good at {:.1}s",
                    now.as_secs_f64()
                ));
            }
            _ => {}
        }
    }
}
