//! One simulated run: three real control-plane nodes (`n1`..`n3`) on
//! turmoil's network and clock, one client driving the public API, and at
//! most one fault drawn from the seed: a leader partition, or a node crash
//! (power cut: unsynced writes lost) and restart from the same disk.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant, UNIX_EPOCH};

use fleetq_ledger::raft::{seed_election_rng, NodeId, Raft};
use fleetq_ledger::store::mem::{MemDisk, MemLogStore, MemSnapshotStore};
use fleetq_ledger::store::{LedgerHandle, StateMachineStore};
use fleetq_scheduler::SchedulerConfig;
use fleetq_server::clock::TokioClock;
use fleetq_server::transport::Timeouts;
use fleetq_server::{Node, NodeConfig, RaftTiming};
use openraft::ServerState;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::agents::{self, AgentFault};
use crate::client::{self, ClientSummary};
use crate::net::{self, SimConnector};

/// Control-plane nodes in a run.
pub const NODES: u64 = 3;
/// The port every node serves on.
pub const PORT: u16 = 7000;
/// The ClusterQueue's quota (client::CONFIG): the most GPUs that may
/// really run at once, whatever the clusters have.
pub const QUOTA_GPUS: u64 = 8;
/// Agents' lease: short, so lease faults play out within a run.
const LEASE_TTL: Duration = Duration::from_secs(3);
/// Workloads the client submits.
pub const WORKLOADS: usize = 30;
/// Simulated wall-clock time at the start of a run (fixed, so runs do not
/// depend on the real date).
const ORIGIN_MS: u64 = 1_700_000_000_000;
/// A run that has not finished after this much simulated time fails.
const SIM_LIMIT: Duration = Duration::from_secs(400);
/// Simulated fsync latency of every node's disk.
const FSYNC: Duration = Duration::from_millis(1);

/// Wait-for-ready is on, with a timeout a leader partition can outlast:
/// admissions whose Running report is held up by a fault get evicted and
/// requeued, which must neither strand nor double-charge quota.
fn scheduler_config() -> SchedulerConfig {
    SchedulerConfig {
        wait_for_ready: Some(fleetq_scheduler::WaitForReady {
            timeout: Duration::from_secs(2),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(4),
            backoff_limit_count: None,
        }),
        ..SchedulerConfig::default()
    }
}

/// The address peers and clients reach node `id` at.
pub fn node_addr(id: NodeId) -> String {
    format!("{}:{PORT}", host_name(id))
}

fn host_name(id: NodeId) -> String {
    format!("n{id}")
}

/// The one fault a run injects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Cut the leader (whoever leads at `at`) off from the other nodes,
    /// heal after `heal_after`. The client can still reach every node.
    PartitionLeader {
        at: Duration,
        heal_after: Duration,
    },
    /// Crash `target` (chosen among the nodes as they stand at `at`): its
    /// software stops and its disk loses every write not yet synced; after
    /// `restart_after` it starts again from that disk.
    CrashNode {
        at: Duration,
        target: CrashTarget,
        restart_after: Duration,
    },
}

/// Which node a [`Fault::CrashNode`] takes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashTarget {
    /// Whoever leads at the time.
    Leader,
    /// The `n`th (0 or 1) of the other two nodes, by id.
    Follower(usize),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::None => write!(f, "no fault"),
            Fault::PartitionLeader { at, heal_after } => write!(
                f,
                "partition the leader at {:.1}s for {:.1}s",
                at.as_secs_f64(),
                heal_after.as_secs_f64()
            ),
            Fault::CrashNode {
                at,
                target,
                restart_after,
            } => write!(
                f,
                "crash {} at {:.1}s, restart after {:.1}s",
                match target {
                    CrashTarget::Leader => "the leader",
                    CrashTarget::Follower(_) => "a follower",
                },
                at.as_secs_f64(),
                restart_after.as_secs_f64()
            ),
        }
    }
}

/// One workload the client submits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedWorkload {
    pub name: String,
    pub gpus: u32,
    pub duration_s: u64,
    /// Pause before submitting it.
    pub delay_ms: u64,
}

/// Everything a seed decides up front.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub seed: u64,
    pub workloads: Vec<PlannedWorkload>,
    pub fault: Fault,
    pub agent_fault: AgentFault,
    /// Workloads the client cancels (by index), each right after it
    /// submitted the one three places later (or at the end).
    pub cancels: Vec<usize>,
}

impl Plan {
    pub fn from_seed(seed: u64) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed);
        let workloads = (0..WORKLOADS)
            .map(|i| PlannedWorkload {
                name: format!("w-{i:02}"),
                gpus: rng.gen_range(1..=3),
                duration_s: rng.gen_range(1..=4),
                delay_ms: rng.gen_range(0..300),
            })
            .collect();
        // The partition draw comes first, so seeds that drew a partition
        // before the crash fault existed still draw the same one.
        let fault = if rng.gen_bool(0.5) {
            Fault::PartitionLeader {
                at: Duration::from_millis(rng.gen_range(1_500..6_000)),
                heal_after: Duration::from_millis(rng.gen_range(1_000..8_000)),
            }
        } else if rng.gen_bool(0.5) {
            Fault::CrashNode {
                at: Duration::from_millis(rng.gen_range(1_500..6_000)),
                target: if rng.gen_bool(0.5) {
                    CrashTarget::Leader
                } else {
                    CrashTarget::Follower(rng.gen_range(0..2))
                },
                restart_after: Duration::from_millis(rng.gen_range(500..6_000)),
            }
        } else {
            Fault::None
        };
        let agent_fault = AgentFault::draw(&mut rng);
        let cancels = (0..WORKLOADS).filter(|_| rng.gen_ratio(1, 8)).collect();
        Plan {
            seed,
            workloads,
            fault,
            agent_fault,
            cancels,
        }
    }
}

/// A check that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub check: &'static str,
    pub detail: String,
}

/// What a passing run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub seed: u64,
    pub fault: Fault,
    /// What the fault injector actually did (the leader it cut off, the
    /// node it crashed).
    pub injected: Option<String>,
    pub agent_fault: AgentFault,
    /// What the agent fault did.
    pub agent_injected: Option<String>,
    pub sim_elapsed: Duration,
    pub wall: Duration,
    pub client: ClientSummary,
    /// A digest of what happened, to the simulated nanosecond: when the
    /// client finished, what it saw acknowledged, what the fault did, and
    /// every replica's final term, log and state. Two runs of one seed
    /// give the same trace exactly when they took the same course.
    pub trace: String,
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: ok  {}{}; {}{}; {} workloads ({} retried), {} EvictNotReady applied, converged at index {} hash {}; trace {}; {:.1}s simulated, {:.2}s wall",
            self.seed,
            self.fault,
            self.injected
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default(),
            self.agent_fault,
            self.agent_injected
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default(),
            self.client.acknowledged.len(),
            self.client.retried_writes,
            self.client.evict_not_ready,
            self.client.last_applied,
            self.client.state_hash.chars().take(12).collect::<String>(),
            self.trace,
            self.sim_elapsed.as_secs_f64(),
            self.wall.as_secs_f64(),
        )
    }
}

/// The replay command for a seed.
pub fn replay_command(seed: u64) -> String {
    format!("fleetq-chaos sim --seed {seed}")
}

fn failure(seed: u64, check: &str, detail: impl fmt::Display) -> String {
    format!(
        "seed {seed}: check failed: {check}: {detail} (replay: {})",
        replay_command(seed)
    )
}

/// What the harness keeps of a running node, to find the leader and to
/// re-check the ledgers from outside.
#[derive(Clone)]
struct Replica {
    raft: Raft,
    handle: LedgerHandle,
}

type Registry = Rc<RefCell<BTreeMap<NodeId, Replica>>>;

thread_local! {
    /// Panics on this thread (turmoil runs every host on the thread that
    /// runs the simulation); a panic in a node's spawned task would
    /// otherwise vanish into a JoinError.
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The seed this process is running, when a panic should end the process
/// with that seed's verdict (see [`exit_on_panic`]).
static VERDICT_ON_PANIC: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// Makes the first panic during `seed` print the seed's FAIL line and end
/// the process with status 1. For a process that runs one seed: a panic
/// inside a simulated host (an invariant assertion in apply(), say)
/// unwinds through tokio's scheduler, which then aborts on a second
/// panic before any verdict could be printed.
pub fn exit_on_panic(seed: u64) {
    VERDICT_ON_PANIC.store(seed, std::sync::atomic::Ordering::SeqCst);
}

fn install_panic_recorder() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = match info.location() {
                Some(l) => format!(
                    "{} at {}:{}",
                    payload_text(info.payload()),
                    l.file(),
                    l.line()
                ),
                None => payload_text(info.payload()),
            };
            let seed = VERDICT_ON_PANIC.load(std::sync::atomic::Ordering::SeqCst);
            if seed != u64::MAX {
                use std::io::Write;
                println!("FAIL {}", failure(seed, "no panics", &message));
                let _ = std::io::stdout().flush();
                std::process::exit(1);
            }
            let _ = PANICS.try_with(|p| p.borrow_mut().push(message));
            previous(info);
        }));
    });
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

/// One node's software, as turmoil (re)starts it: storage on the harness's
/// `disk`, served on simulated TCP. `incarnation` counts the starts (0 the
/// first, 1 after a crash).
async fn node_host(
    id: NodeId,
    seed: u64,
    incarnation: u64,
    disk: MemDisk,
    registry: Registry,
) -> turmoil::Result {
    // All hosts share the simulation's thread, so this seeds one stream
    // that every node draws its election timeouts from, in a deterministic
    // order once scheduling is deterministic. A restart reseeds it with
    // a value of its own, not the first start's again.
    seed_election_rng(seed ^ id ^ (incarnation << 32));
    let listener =
        turmoil::net::TcpListener::bind((IpAddr::from(Ipv4Addr::UNSPECIFIED), PORT)).await?;
    let config = NodeConfig {
        id,
        advertise: node_addr(id),
        initial_members: (1..=NODES).map(|i| (i, node_addr(i))).collect(),
        timing: RaftTiming::default(),
        scheduler: scheduler_config(),
        simulated_clusters: Vec::new(),
        debug_endpoints: false,
        lease: fleetq_server::leases::LeaseConfig {
            ttl: LEASE_TTL,
            heartbeat: Duration::from_millis(400),
        },
    };
    let state_machine = StateMachineStore::open(
        MemSnapshotStore::new(disk.clone()),
        config.scheduler.clone(),
    )?;
    let node = Node::start(
        config,
        MemLogStore::new(disk),
        state_machine,
        net::incoming(listener),
        Arc::new(SimConnector::new(Timeouts::default())),
        Arc::new(TokioClock::new(ORIGIN_MS)),
    )
    .await?;
    registry.borrow_mut().insert(
        id,
        Replica {
            raft: node.raft.clone(),
            handle: node.handle.clone(),
        },
    );
    // The node runs in its spawned tasks; keep it alive until the host is
    // crashed or the simulation ends.
    let _node = node;
    std::future::pending::<turmoil::Result>().await
}

fn current_leader(registry: &Registry) -> Option<NodeId> {
    registry
        .borrow()
        .iter()
        .filter_map(|(id, r)| {
            let m = r.raft.metrics().borrow().clone();
            (m.state == ServerState::Leader).then_some((m.current_term, *id))
        })
        .max()
        .map(|(_, id)| id)
}

/// Injects the plan's fault as simulated time passes.
struct Injector {
    fault: Fault,
    /// The node the fault hit (cut off or crashed) and when it ends (heal
    /// or restart).
    victim: Option<(NodeId, Duration)>,
    recovered: bool,
    done: Option<String>,
}

impl Injector {
    fn new(fault: Fault) -> Injector {
        Injector {
            fault,
            victim: None,
            recovered: false,
            done: None,
        }
    }

    fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        registry: &Registry,
        disks: &BTreeMap<NodeId, MemDisk>,
    ) {
        let now = sim.elapsed();
        match (self.fault.clone(), self.victim) {
            (Fault::None, _) => {}
            (Fault::PartitionLeader { at, heal_after }, None) if now >= at => {
                if let Some(leader) = current_leader(registry) {
                    for other in (1..=NODES).filter(|&o| o != leader) {
                        sim.partition(host_name(leader), host_name(other));
                    }
                    self.victim = Some((leader, now + heal_after));
                    self.done = Some(format!(
                        "cut n{leader} off at {:.1}s, healed at {:.1}s",
                        now.as_secs_f64(),
                        (now + heal_after).as_secs_f64()
                    ));
                }
            }
            (Fault::PartitionLeader { .. }, Some((leader, heal_at)))
                if !self.recovered && now >= heal_at =>
            {
                for other in (1..=NODES).filter(|&o| o != leader) {
                    sim.repair(host_name(leader), host_name(other));
                }
                self.recovered = true;
                self.note_leader(registry);
            }
            (
                Fault::CrashNode {
                    at,
                    target,
                    restart_after,
                },
                None,
            ) if now >= at => {
                let Some(leader) = current_leader(registry) else {
                    return;
                };
                let (node, role) = match target {
                    CrashTarget::Leader => (leader, "leader"),
                    CrashTarget::Follower(nth) => {
                        let followers: Vec<NodeId> = (1..=NODES).filter(|&o| o != leader).collect();
                        (followers[nth % followers.len()], "follower")
                    }
                };
                // Stop the software first (its tasks are dropped, so no
                // sync in flight completes), then cut the power: the disk
                // keeps only what was synced.
                sim.crash(host_name(node));
                let disk = &disks[&node];
                let lost = disk.unsynced_writes();
                disk.crash();
                registry.borrow_mut().remove(&node);
                self.victim = Some((node, now + restart_after));
                self.done = Some(format!(
                    "crashed {role} n{node} at {:.1}s ({lost} unsynced writes lost, durable log to {}), restarted at {:.1}s",
                    now.as_secs_f64(),
                    disk.durable_last_index()
                        .map_or_else(|| "-".to_string(), |i| i.to_string()),
                    (now + restart_after).as_secs_f64()
                ));
            }
            (Fault::CrashNode { .. }, Some((node, restart_at)))
                if !self.recovered && now >= restart_at =>
            {
                sim.bounce(host_name(node));
                self.recovered = true;
                self.note_leader(registry);
            }
            _ => {}
        }
    }

    fn note_leader(&mut self, registry: &Registry) {
        if let (Some(done), Some(now_leading)) = (&mut self.done, current_leader(registry)) {
            done.push_str(&format!(", n{now_leading} leading then"));
        }
    }
}

/// Injects the plan's agent fault.
struct AgentInjector {
    fault: AgentFault,
    /// When the fault ends (heal or restart), once it began.
    until: Option<Duration>,
    recovered: bool,
    done: Option<String>,
}

impl AgentInjector {
    fn new(fault: AgentFault) -> AgentInjector {
        AgentInjector {
            fault,
            until: None,
            recovered: false,
            done: None,
        }
    }

    fn step(
        &mut self,
        sim: &mut turmoil::Sim<'_>,
        journals: &BTreeMap<usize, fleetq_agent::executor::JournalSink>,
    ) {
        let now = sim.elapsed();
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
                for id in 1..=NODES {
                    sim.partition(agents::agent_host(*agent), host_name(id));
                }
                self.until = Some(now + *heal_after);
                self.done = Some(format!(
                    "a{agent} cut off from {:.1}s to {:.1}s",
                    now.as_secs_f64(),
                    (now + *heal_after).as_secs_f64()
                ));
            }
            (AgentFault::Partition { agent, .. }, Some(until))
                if !self.recovered && now >= until =>
            {
                for id in 1..=NODES {
                    sim.repair(agents::agent_host(*agent), host_name(id));
                }
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
                self.until = Some(now + *restart_after);
                self.done = Some(format!(
                    "a{agent} crashed at {:.1}s with {killed} workloads running, restarted at {:.1}s",
                    now.as_secs_f64(),
                    (now + *restart_after).as_secs_f64()
                ));
            }
            (AgentFault::Crash { agent, .. }, Some(until)) if !self.recovered && now >= until => {
                sim.bounce(agents::agent_host(*agent));
                self.recovered = true;
            }
            _ => {}
        }
    }
}

/// Runs the simulation for `seed` and checks the invariants. The error
/// names the failed check, the seed and the replay command.
pub fn run_seed(seed: u64) -> Result<RunReport, String> {
    let plan = Plan::from_seed(seed);
    run_plan(seed).map_err(|e| {
        format!(
            "{e} [{}; {}; cancels {:?}]",
            plan.fault, plan.agent_fault, plan.cancels
        )
    })
}

fn run_plan(seed: u64) -> Result<RunReport, String> {
    install_panic_recorder();
    PANICS.with(|p| p.borrow_mut().clear());
    let wall = Instant::now();
    let plan = Plan::from_seed(seed);

    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_millis(ORIGIN_MS))
        .simulation_duration(SIM_LIMIT)
        .max_message_latency(Duration::from_millis(20))
        .tcp_capacity(1 << 16)
        .build();

    let registry: Registry = Rc::new(RefCell::new(BTreeMap::new()));
    // The disks outlive their nodes: a crashed node can restart from one.
    let disks: BTreeMap<NodeId, MemDisk> =
        (1..=NODES).map(|id| (id, MemDisk::new(FSYNC))).collect();
    for (&id, disk) in &disks {
        let disk = disk.clone();
        let registry = Rc::clone(&registry);
        let starts = Rc::new(Cell::new(0u64));
        sim.host(host_name(id), move || {
            let incarnation = starts.replace(starts.get() + 1);
            node_host(id, seed, incarnation, disk.clone(), Rc::clone(&registry))
        });
    }

    // The journals outlive their agents: a crashed agent's runs are
    // closed at the crash, and its restart keeps writing to the same one.
    let journals: BTreeMap<usize, fleetq_agent::executor::JournalSink> = (1..=agents::AGENTS)
        .map(|n| (n, agents::sim_journal()))
        .collect();
    for (&n, journal) in &journals {
        let journal = journal.clone();
        let starts = Rc::new(Cell::new(0u64));
        sim.host(agents::agent_host(n), move || {
            let incarnation = starts.replace(starts.get() + 1);
            agents::agent_host_main(n, seed, incarnation, journal.clone())
        });
    }

    let verdict: Rc<RefCell<Option<Result<ClientSummary, Violation>>>> = Rc::default();
    {
        let verdict = Rc::clone(&verdict);
        let plan = plan.clone();
        sim.client("client", async move {
            let result = client::drive(&plan).await;
            *verdict.borrow_mut() = Some(result);
            Ok(())
        });
    }

    let mut injector = Injector::new(plan.fault.clone());
    let mut agent_injector = AgentInjector::new(plan.agent_fault.clone());
    loop {
        injector.step(&mut sim, &registry, &disks);
        agent_injector.step(&mut sim, &journals);
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                return Err(failure(
                    seed,
                    "simulation",
                    format!("{e} (at {:.1}s simulated)", sim.elapsed().as_secs_f64()),
                ))
            }
        }
    }
    let sim_elapsed = sim.elapsed();

    let panics = PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if !panics.is_empty() {
        return Err(failure(seed, "no panics", panics.join(" | ")));
    }
    let summary = match verdict.borrow_mut().take() {
        Some(Ok(summary)) => summary,
        Some(Err(v)) => return Err(failure(seed, v.check, v.detail)),
        None => return Err(failure(seed, "client", "finished without a verdict")),
    };
    check_replicas(&registry, &summary).map_err(|v| failure(seed, v.check, v.detail))?;
    let entries: BTreeMap<String, Vec<fleetq_agent::executor::JournalEntry>> = journals
        .iter()
        .map(|(n, j)| (agents::cluster_name(*n), j.entries()))
        .collect();
    let gpus: BTreeMap<u64, u64> = plan
        .workloads
        .iter()
        .filter_map(|w| Some((*summary.acknowledged.get(&w.name)?, u64::from(w.gpus))))
        .collect();
    let succeeded: std::collections::BTreeSet<u64> = summary
        .acknowledged
        .iter()
        .filter(|(name, _)| !summary.cancelled.contains(*name))
        .map(|(_, id)| *id)
        .collect();
    if let Err(v) = agents::check_runs(&entries, &gpus, &succeeded, QUOTA_GPUS) {
        if std::env::var_os("FLEETQ_CHAOS_DEBUG").is_some() {
            dump_history(&registry, &entries);
        }
        return Err(failure(seed, v.check, v.detail));
    }
    let trace = trace_digest(
        sim_elapsed,
        &summary,
        injector.done.as_deref(),
        &registry,
        &entries,
    );

    Ok(RunReport {
        seed,
        fault: plan.fault,
        injected: injector.done,
        agent_fault: plan.agent_fault,
        agent_injected: agent_injector.done,
        sim_elapsed,
        wall: wall.elapsed(),
        client: summary,
        trace,
    })
}

/// With `FLEETQ_CHAOS_DEBUG` set, a failed journal check prints every
/// workload's ledger history and every journal entry (simulated ms) to
/// stderr: the two accounts side by side.
fn dump_history(
    registry: &Registry,
    journals: &BTreeMap<String, Vec<fleetq_agent::executor::JournalEntry>>,
) {
    if let Some(replica) = registry.borrow().values().next() {
        let sm = replica.handle.read();
        for (id, w) in &sm.ledger.state().workloads {
            for e in &w.history {
                let ms = e.at.0.saturating_sub(ORIGIN_MS);
                eprintln!("ledger  {ms:>6}ms w{id} {:?} {}", e.state, e.message);
            }
        }
    }
    for (cluster, entries) in journals {
        for e in entries {
            eprintln!(
                "journal {:>6}ms w{} e{} {cluster} {} {}",
                e.at_ms, e.workload, e.epoch, e.event, e.detail
            );
        }
    }
}

/// The first 16 hex digits of a SHA-256 over the run's observable course.
fn trace_digest(
    elapsed: Duration,
    summary: &ClientSummary,
    injected: Option<&str>,
    registry: &Registry,
    journals: &BTreeMap<String, Vec<fleetq_agent::executor::JournalEntry>>,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(elapsed.as_nanos().to_le_bytes());
    h.update(format!("{:?}", summary.acknowledged));
    h.update(format!(
        "{} {} {} {}",
        summary.last_applied, summary.state_hash, summary.retried_writes, summary.evict_not_ready
    ));
    h.update(injected.unwrap_or("-"));
    for (id, replica) in registry.borrow().iter() {
        let m = replica.raft.metrics().borrow().clone();
        h.update(format!(
            "n{id} term {} last_log {:?} applied {:?} hash {}",
            m.current_term,
            m.last_log_index,
            m.last_applied,
            replica.handle.read().ledger.state_hash()
        ));
    }
    for (cluster, entries) in journals {
        h.update(format!("{cluster} {entries:?}"));
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Re-checks every replica's ledger from outside: invariants 1 and 2 from
/// scratch, and every acknowledged workload present.
fn check_replicas(registry: &Registry, summary: &ClientSummary) -> Result<(), Violation> {
    let registry = registry.borrow();
    if registry.len() as u64 != NODES {
        return Err(Violation {
            check: "nodes started",
            detail: format!("only {} of {NODES} nodes started", registry.len()),
        });
    }
    for (id, replica) in registry.iter() {
        let sm = replica.handle.read();
        let violations = sm.ledger.violations();
        if !violations.is_empty() {
            return Err(Violation {
                check: "no over-admission, no double charge (invariants 1, 2)",
                detail: format!("n{id}: {}", violations.join("; ")),
            });
        }
        for (name, wid) in &summary.acknowledged {
            if !sm.ledger.state().workloads.contains_key(wid) {
                return Err(Violation {
                    check: "no lost writes (invariant 5)",
                    detail: format!("n{id} has no record of acknowledged workload {name} ({wid})"),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed() {
        assert_eq!(Plan::from_seed(7), Plan::from_seed(7));
        assert_ne!(Plan::from_seed(7), Plan::from_seed(8));
        let plan = Plan::from_seed(7);
        assert_eq!(plan.workloads.len(), WORKLOADS);
        assert!(plan
            .workloads
            .iter()
            .all(|w| (1..=3).contains(&w.gpus) && (1..=4).contains(&w.duration_s)));
    }

    #[test]
    fn seeds_draw_every_fault() {
        let faults: Vec<Fault> = (0..40).map(|s| Plan::from_seed(s).fault).collect();
        assert!(faults.contains(&Fault::None));
        assert!(faults
            .iter()
            .any(|f| matches!(f, Fault::PartitionLeader { .. })));
        for target in [CrashTarget::Leader, CrashTarget::Follower(0)] {
            assert!(
                faults.iter().any(|f| matches!(f,
                    Fault::CrashNode { target: t, .. }
                        if std::mem::discriminant(t) == std::mem::discriminant(&target))),
                "no seed crashes {target:?}"
            );
        }
    }

    #[test]
    fn failures_name_the_check_seed_and_replay() {
        let f = failure(42, "convergence (invariant 6)", "hashes differ");
        assert!(f.contains("seed 42"), "{f}");
        assert!(f.contains("convergence (invariant 6)"), "{f}");
        assert!(f.contains("fleetq-chaos sim --seed 42"), "{f}");
    }
}
