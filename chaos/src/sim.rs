//! One simulated run of a [`Plan`]: three (or five) real control-plane
//! nodes (`n1`..) on turmoil's network and clock, two real agents, one
//! client driving the public API, and the plan's faults
//! ([`crate::inject`]); then the checks from outside.

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
use fleetq_ledger::LedgerConfig;
use fleetq_server::clock::TokioClock;
use fleetq_server::leader::LeaderPolicies;
use fleetq_server::transport::Timeouts;
use fleetq_server::{Node, NodeConfig, RaftTiming};
use openraft::ServerState;

use crate::agents;
use crate::client::{self, ClientSummary};
use crate::inject::{AgentInjector, Injector, Links, World, FAIR_LATENCY};
use crate::net::{self, SimConnector};
use crate::oracle::{self, Oracle};
use crate::plan::{Fault, Plan, Weather};

/// The port every node serves on.
pub const PORT: u16 = 7000;
/// Agents' lease: short, so lease faults play out within a run.
const LEASE_TTL: Duration = Duration::from_secs(3);
/// Simulated wall-clock time at the start of a run (fixed, so runs do not
/// depend on the real date).
const ORIGIN_MS: u64 = 1_700_000_000_000;
/// A run that has not finished after this much simulated time fails.
const SIM_LIMIT: Duration = Duration::from_secs(400);
/// Simulated fsync latency of every node's disk.
const FSYNC: Duration = Duration::from_millis(1);

/// Wait-for-ready (where the plan has it) with a timeout a leader
/// partition can outlast: admissions whose Running report is held up by a
/// fault get evicted and requeued, which must neither strand nor
/// double-charge quota. Retention of finished workloads as the plan says.
fn node_policies(plan: &Plan) -> (LedgerConfig, LeaderPolicies) {
    let ledger = LedgerConfig {
        wait_for_ready: plan.wait_for_ready.then_some(fleetq_ledger::WaitForReady {
            timeout: Duration::from_secs(2),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(4),
            backoff_limit_count: None,
        }),
        ..LedgerConfig::default()
    };
    let leader = LeaderPolicies {
        finished_retention: plan.finished_retention,
        ..LeaderPolicies::default()
    };
    (ledger, leader)
}

/// The address peers and clients reach node `id` at.
pub fn node_addr(id: NodeId) -> String {
    format!("{}:{PORT}", host_name(id))
}

pub fn host_name(id: NodeId) -> String {
    format!("n{id}")
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
    pub plan: Plan,
    /// What the fault injectors actually did (the leader they cut off,
    /// the node they crashed), one line per fault that struck.
    pub injected: Vec<String>,
    /// Each planned fault's kind, and whether it struck.
    pub coverage: Vec<(&'static str, bool)>,
    /// Entries the oracle checked, over all replicas.
    pub oracle_entries: u64,
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
            "seed {}: ok  {} [{}]; {} workloads ({} retried), {} EvictNotReady applied, {} finished removed, converged at index {} hash {}; trace {}; {:.1}s simulated, {:.2}s wall",
            self.plan.seed,
            self.plan.describe(),
            self.injected.join("; "),
            self.client.acknowledged.len(),
            self.client.retried_writes,
            self.client.evict_not_ready,
            self.client.finished_removed,
            self.client.last_applied,
            self.client.state_hash.chars().take(12).collect::<String>(),
            self.trace,
            self.sim_elapsed.as_secs_f64(),
            self.wall.as_secs_f64(),
        )
    }
}

impl RunReport {
    /// One line of what the faults did, for the run's coverage table:
    /// `coverage: kind=1/1 kind=1/0` (planned/struck).
    pub fn coverage_line(&self) -> String {
        let parts: Vec<String> = self
            .coverage
            .iter()
            .map(|(kind, struck)| format!("{kind}=1/{}", u8::from(*struck)))
            .collect();
        format!("coverage: {}", parts.join(" "))
    }
}

/// The command that replays `plan`.
pub fn replay_command(plan: &Plan) -> String {
    let mut command = format!("fleetq-chaos sim --seed {}", plan.seed);
    if plan.nodes != 3 {
        command.push_str(&format!(" --nodes {}", plan.nodes));
    }
    if let Some(scenario) = plan.scenario {
        command.push_str(&format!(" --scenario {scenario}"));
    }
    if plan.basic {
        command.push_str(" --faults basic");
    }
    command
}

fn failure(plan: &Plan, check: &str, detail: impl fmt::Display) -> String {
    format!(
        "seed {}: check failed: {check}: {detail} (replay: {})",
        plan.seed,
        replay_command(plan)
    )
}

/// What the harness keeps of a running node, to find the leader and to
/// re-check the ledgers from outside.
#[derive(Clone)]
pub struct Replica {
    pub raft: Raft,
    pub handle: LedgerHandle,
}

pub type Registry = Rc<RefCell<BTreeMap<NodeId, Replica>>>;

thread_local! {
    /// Panics on this thread (turmoil runs every host on the thread that
    /// runs the simulation); a panic in a node's spawned task would
    /// otherwise vanish into a JoinError.
    static PANICS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The plan this process is running, when a panic should end the process
/// with that plan's verdict (see [`exit_on_panic`]).
static VERDICT_ON_PANIC: std::sync::Mutex<Option<Plan>> = std::sync::Mutex::new(None);

/// Makes the first panic while running `plan` print its FAIL line and end
/// the process with status 1. For a process that runs one seed: a panic
/// inside a simulated host (an invariant assertion in apply(), say)
/// unwinds through tokio's scheduler, which then aborts on a second
/// panic before any verdict could be printed.
pub fn exit_on_panic(plan: &Plan) {
    *VERDICT_ON_PANIC.lock().unwrap_or_else(|p| p.into_inner()) = Some(plan.clone());
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
            let plan = VERDICT_ON_PANIC.try_lock().ok().and_then(|p| p.clone());
            if let Some(plan) = plan {
                use std::io::Write;
                println!("FAIL {}", failure(&plan, panic_check(&message), &message));
                let _ = std::io::stdout().flush();
                std::process::exit(1);
            }
            let _ = PANICS.try_with(|p| p.borrow_mut().push(message));
            previous(info);
        }));
    });
}

/// The ledger's own invariant check (after every command) panics; any
/// other panic is a crash.
pub const CHECK_LEDGER: &str = "ledger: invariants after every command (1, 2)";
pub const CHECK_PANIC: &str = "no panics";

fn panic_check(message: &str) -> &'static str {
    if message.starts_with("ledger invariant broken") {
        CHECK_LEDGER
    } else {
        CHECK_PANIC
    }
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

/// What every start of one node's host is given.
#[derive(Clone)]
struct NodeSetup {
    id: NodeId,
    nodes: u64,
    seed: u64,
    ledger: LedgerConfig,
    leader: LeaderPolicies,
    /// Outlives the node: a crashed node restarts from it.
    disk: MemDisk,
    registry: Registry,
    oracle: Oracle,
}

/// One node's software, as turmoil (re)starts it: storage on the harness's
/// `disk`, served on simulated TCP. `incarnation` counts the starts (0 the
/// first, 1 after a crash).
async fn node_host(setup: NodeSetup, incarnation: u64) -> turmoil::Result {
    let NodeSetup {
        id,
        nodes,
        seed,
        ledger,
        leader,
        disk,
        registry,
        oracle,
    } = setup;
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
        initial_members: (1..=nodes).map(|i| (i, node_addr(i))).collect(),
        timing: RaftTiming::default(),
        ledger,
        leader,
        simulated_clusters: Vec::new(),
        debug_endpoints: false,
        lease: fleetq_server::agents::leases::LeaseConfig {
            ttl: LEASE_TTL,
            heartbeat: Duration::from_millis(400),
        },
        // The simulated network carries plaintext; TLS is covered by the
        // end-to-end tests (tests/e2e_security.rs).
        auth: fleetq_server::guard::auth::Authorizer::insecure(),
    };
    let state_machine =
        StateMachineStore::open(MemSnapshotStore::new(disk.clone()), config.ledger.clone())?
            .with_observer(oracle.observer(id));
    let node = Node::start(
        config,
        MemLogStore::new(disk),
        state_machine,
        net::incoming(listener),
        Arc::new(SimConnector::new(Timeouts::default())),
        // Every incarnation reads the same simulated wall clock: a node
        // restarted after a crash must not come back with its clock
        // behind by its downtime (a skew of seconds no deployment has).
        Arc::new(TokioClock::new(
            ORIGIN_MS + turmoil::sim_elapsed().unwrap_or_default().as_millis() as u64,
        )),
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

pub fn current_leader(registry: &Registry) -> Option<NodeId> {
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

/// Runs the random plan of `seed` on three nodes.
pub fn run_seed(seed: u64) -> Result<RunReport, String> {
    run(Plan::from_seed(seed, 3))
}

/// Runs `plan` and checks the invariants. The error names the failed
/// check, the seed, the replay command and the plan.
pub fn run(plan: Plan) -> Result<RunReport, String> {
    let description = plan.describe();
    run_plan(plan).map_err(|e| format!("{e} [{description}]"))
}

fn run_plan(plan: Plan) -> Result<RunReport, String> {
    install_panic_recorder();
    PANICS.with(|p| p.borrow_mut().clear());
    let wall = Instant::now();
    let seed = plan.seed;
    let nodes = plan.nodes;
    let (ledger, leader) = node_policies(&plan);

    // turmoil has no setter for the repair rate once built: the lossy
    // weather's (if any) is fixed here and only matters while loss is on.
    let repair = plan
        .faults
        .iter()
        .find_map(|f| match f {
            Fault::Network {
                weather: Weather::Loss { repair, .. },
                ..
            } => Some(f64::from(*repair) / crate::plan::PER_MILLE),
            _ => None,
        })
        .unwrap_or(1.0);
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .epoch(UNIX_EPOCH + Duration::from_millis(ORIGIN_MS))
        .simulation_duration(SIM_LIMIT)
        .max_message_latency(FAIR_LATENCY)
        .repair_rate(repair)
        .tcp_capacity(1 << 16)
        .build();

    let registry: Registry = Rc::new(RefCell::new(BTreeMap::new()));
    let oracle = Oracle::new(sim_ms);
    // The disks outlive their nodes: a crashed node can restart from one.
    let disks: BTreeMap<NodeId, MemDisk> =
        (1..=nodes).map(|id| (id, MemDisk::new(FSYNC))).collect();
    for (&id, disk) in &disks {
        let setup = NodeSetup {
            id,
            nodes,
            seed,
            ledger: ledger.clone(),
            leader,
            disk: disk.clone(),
            registry: Rc::clone(&registry),
            oracle: oracle.clone(),
        };
        let starts = Rc::new(Cell::new(0u64));
        sim.host(host_name(id), move || {
            let incarnation = starts.replace(starts.get() + 1);
            node_host(setup.clone(), incarnation)
        });
    }

    // The journals outlive their agents: a crashed agent's runs are
    // closed at the crash, and its restart keeps writing to the same one.
    let journals: BTreeMap<usize, fleetq_agent::executor::JournalSink> = (1..=agents::AGENTS)
        .map(|n| (n, agents::sim_journal()))
        .collect();
    let report_nodes = plan.agent_nodes;
    // The agents' inventory outlives them too: a node that left is still
    // gone when its agent restarts.
    let feeds = crate::node_faults::InventoryFeeds::new(nodes, report_nodes, plan.racks)
        .map_err(|e| failure(&plan, "setup", e))?;
    for (&n, journal) in &journals {
        let journal = journal.clone();
        let starts = Rc::new(Cell::new(0u64));
        let feeds = feeds.clone();
        let shape = agents::AgentShape {
            report_nodes,
            keep: plan.keep_agent == Some(n),
            racks: plan.racks,
        };
        sim.host(agents::agent_host(n), move || {
            let incarnation = starts.replace(starts.get() + 1);
            agents::agent_host_main(
                n,
                nodes,
                shape,
                seed,
                incarnation,
                journal.clone(),
                feeds.receiver(n),
            )
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

    let mut world = World {
        nodes,
        registry: Rc::clone(&registry),
        disks,
        links: Links::default(),
        down: Default::default(),
    };
    let mut injectors: Vec<Injector> = plan.faults.iter().cloned().map(Injector::new).collect();
    let mut agent_injectors: Vec<AgentInjector> = plan
        .agent_faults
        .iter()
        .cloned()
        .map(AgentInjector::new)
        .collect();
    let mut node_injectors: Vec<crate::node_faults::NodeInjector> = plan
        .node_faults
        .iter()
        .copied()
        .map(crate::node_faults::NodeInjector::new)
        .collect();
    loop {
        for injector in &mut injectors {
            injector.step(&mut sim, &mut world);
        }
        for injector in &mut node_injectors {
            injector.step(sim.elapsed(), &feeds);
        }
        for injector in &mut agent_injectors {
            injector.step(&mut sim, &mut world, &journals);
        }
        match sim.step() {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                return Err(failure(
                    &plan,
                    "simulation",
                    format!("{e} (at {:.1}s simulated)", sim.elapsed().as_secs_f64()),
                ))
            }
        }
    }
    let sim_elapsed = sim.elapsed();
    let injected: Vec<String> = injectors
        .iter()
        .filter_map(|i| i.done.clone())
        .chain(agent_injectors.iter().filter_map(|i| i.done.clone()))
        .chain(node_injectors.iter().filter_map(|i| i.done.clone()))
        .collect();
    let coverage: Vec<(&'static str, bool)> = injectors
        .iter()
        .flat_map(Injector::coverage)
        .chain(agent_injectors.iter().map(AgentInjector::coverage))
        .chain(
            node_injectors
                .iter()
                .map(crate::node_faults::NodeInjector::coverage),
        )
        .chain(left_under_coverage(&plan, oracle.left_under()))
        .collect();

    let entries: BTreeMap<String, Vec<fleetq_agent::executor::JournalEntry>> = journals
        .iter()
        .map(|(n, j)| (agents::cluster_name(*n), j.entries()))
        .collect();
    // With FLEETQ_CHAOS_DEBUG set, any failure prints both accounts (the
    // ledger's and the executors'), the first node's log, and the faults.
    let fail = |check: &str, detail: String| {
        if std::env::var_os("FLEETQ_CHAOS_DEBUG").is_some() {
            dump_history(&registry, &entries);
            dump_log(&world.disks);
            for line in &injected {
                eprintln!("fault   {line}");
            }
        }
        failure(&plan, check, detail)
    };

    let panics = PANICS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    if !panics.is_empty() {
        return Err(fail(panic_check(&panics[0]), panics.join(" | ")));
    }
    let verdict = verdict.borrow_mut().take();
    let summary = match verdict {
        Some(Ok(summary)) => summary,
        // A run that failed or got stuck because a safety rule broke is
        // reported by that rule: the oracle's finding names the entry
        // that broke it, the client's verdict only the symptom (seen with
        // the stale-epoch-report mutant: a stale stop report released
        // each new admission, and the run timed out).
        _ if !oracle.findings().is_empty() => {
            let findings = oracle.findings();
            return Err(fail(findings[0].check, findings[0].detail.clone()));
        }
        // Likewise a run stuck in preemption churn is reported by the
        // progress bound it broke, which names the workload (seed 173396:
        // a cycle of three preemptions until the deadline).
        other => {
            check_progress(&plan, &oracle, plan.workloads.len())
                .map_err(|v| fail(v.check, v.detail))?;
            return Err(match other {
                Some(Err(v)) => fail(v.check, v.detail),
                _ => fail("client", "finished without a verdict".into()),
            });
        }
    };
    if let Some(finding) = oracle.findings().first() {
        return Err(fail(finding.check, finding.detail.clone()));
    }
    check_replicas(&registry, nodes, &summary).map_err(|v| fail(v.check, v.detail))?;
    check_progress(&plan, &oracle, summary.acknowledged.len())
        .map_err(|v| fail(v.check, v.detail))?;
    let succeeded: std::collections::BTreeSet<u64> = plan
        .workloads
        .iter()
        .filter(|w| w.exit == 0 && !summary.cancelled.contains(&w.name))
        .filter_map(|w| summary.acknowledged.get(&w.name).copied())
        .collect();
    let granted = oracle.granted();
    let timeline = oracle.timeline();
    let devices = agents::devices();
    let node_devices = agents::node_devices(plan.agent_nodes);
    let expected = oracle::journal::Expected {
        granted: &granted,
        timeline: &timeline,
        devices: &devices,
        nodes: &node_devices,
        succeeded: &succeeded,
    };
    if let Err(v) = oracle::journal::check(&entries, &expected) {
        return Err(fail(v.check, v.detail));
    }
    let trace = trace_digest(sim_elapsed, &summary, &injected, &registry, &entries);
    // FLEETQ_CHAOS_DEBUG=always dumps a passing run too: two dumps of one
    // seed, diffed, show where a run stopped being deterministic.
    if std::env::var_os("FLEETQ_CHAOS_DEBUG").is_some_and(|v| v == "always") {
        dump_history(&registry, &entries);
        dump_log(&world.disks);
    }

    Ok(RunReport {
        plan,
        injected,
        coverage,
        oracle_entries: oracle.entries_checked(),
        sim_elapsed,
        wall: wall.elapsed(),
        client: summary,
        trace,
    })
}

/// Whether a node fault struck running pods under each lease policy:
/// planned where the plan has node faults (and, for Keep, a cluster that
/// keeps), struck where the oracle saw a node leave under a workload.
fn left_under_coverage(plan: &Plan, (kept, fenced): (u64, u64)) -> Vec<(&'static str, bool)> {
    if plan.node_faults.is_empty() {
        return Vec::new();
    }
    let mut out = vec![("node-left-under-fence", fenced > 0)];
    if plan.keep_agent.is_some() {
        out.push(("node-left-under-keep", kept > 0));
    }
    out
}

/// Simulated milliseconds since the run began (the oracle's clock).
fn sim_ms() -> u64 {
    turmoil::sim_elapsed().map_or(0, |d| d.as_millis() as u64)
}

/// How often one preemptor may preempt the same victim again without
/// having been admitted in between. Its first preemption frees the room
/// it needs and nominates it; a fault may make it try once more, but a
/// preemptor that keeps re-preempting the same victim is the livelock of
/// docs/testing.md, "Progress": the victim re-admitted into its room.
pub const SAME_PREEMPTION_REPEATS: u32 = 1;
/// The most times one workload may be preempted in a run, by anyone. A
/// borrower is legitimately reclaimed by each owner that needs its quota
/// back and re-admitted into what is free meanwhile; beyond this it
/// churns.
pub const PREEMPTIONS_PER_WORKLOAD: u32 = 12;
/// apply() may refuse a current leader's decision when the state moved
/// on since it was planned; the same decision refused this often means
/// the scheduler and apply() disagree and the leader keeps proposing it.
pub const SAME_REFUSAL: u32 = 8;

/// Progress (invariant 7), besides what the client already requires
/// (every workload admitted and ended within its limits): preemption
/// settles, evictions stay proportional to the workloads, and the leader
/// does not repeat what apply() refuses.
/// `workloads`: how many the run submitted (the churn bound scales with
/// it).
fn check_progress(plan: &Plan, oracle: &Oracle, workloads: usize) -> Result<(), Violation> {
    const CHECK: &str = "progress: preemption settles (invariant 7)";
    let progress = oracle.progress();
    if let Some(((victim, preemptor), n)) = progress
        .repeats
        .iter()
        .find(|(_, &n)| n > SAME_PREEMPTION_REPEATS)
    {
        return Err(Violation {
            check: CHECK,
            detail: format!(
                "workload {preemptor} preempted workload {victim} again {n} times without being admitted in between (bound {SAME_PREEMPTION_REPEATS})"
            ),
        });
    }
    if let Some((id, n)) = progress
        .preempted
        .iter()
        .find(|(_, &n)| n > PREEMPTIONS_PER_WORKLOAD)
    {
        return Err(Violation {
            check: CHECK,
            detail: format!(
                "workload {id} was preempted {n} times (bound {PREEMPTIONS_PER_WORKLOAD})"
            ),
        });
    }
    let workloads = workloads.max(1) as u32;
    if progress.total_preemptions > 2 * workloads {
        return Err(Violation {
            check: CHECK,
            detail: format!(
                "{} preemptions for {workloads} workloads (bound: twice the workloads)",
                progress.total_preemptions
            ),
        });
    }
    if let Some(((id, why), n)) = progress.refused.iter().find(|(_, &n)| n > SAME_REFUSAL) {
        return Err(Violation {
            check: "progress: a refused decision is not proposed again and again",
            detail: format!(
                "apply() refused a decision for workload {id} {n} times: {why} ({})",
                plan.describe()
            ),
        });
    }
    Ok(())
}

/// With `FLEETQ_CHAOS_DEBUG` set, a failed run prints every
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

/// With `FLEETQ_CHAOS_DEBUG` set, a failed run also prints the
/// Raft log of the first node (simulated ms, term, index, command), the
/// cluster commands in full.
fn dump_log(disks: &BTreeMap<NodeId, MemDisk>) {
    let Some(disk) = disks.values().next() else {
        return;
    };
    for entry in disk.entries() {
        if let openraft::EntryPayload::Normal(request) = &entry.payload {
            let ms = request.at.0.saturating_sub(ORIGIN_MS);
            let text = format!("{:?}", request.command);
            let shown = match &request.command {
                // Decisions in full, reasons left out: what a progress
                // finding needs to be read.
                fleetq_ledger::command::Command::AdmitBatch(batch) => {
                    let admitted: Vec<String> = batch
                        .admissions
                        .iter()
                        .map(|a| format!("{}@{}", a.workload, a.assignment.cluster))
                        .collect();
                    let preempted: Vec<String> = batch
                        .preemptions
                        .iter()
                        .map(|p| format!("{}<-{} {:?}", p.victim, p.preemptor, p.reason))
                        .collect();
                    let reasons: Vec<String> = batch
                        .reasons
                        .iter()
                        .map(|(id, r)| format!("{id}: {:?} {}", r.kind, r.message))
                        .collect();
                    format!(
                        "AdmitBatch admit [{}] preempt [{}] reasons [{}]",
                        admitted.join(" "),
                        preempted.join(" "),
                        reasons.join("; ")
                    )
                }
                // FLEETQ_CHAOS_DEBUG=full: configurations and submissions
                // whole too (quotas and requests, to redo the arithmetic).
                fleetq_ledger::command::Command::SubmitWorkloads { .. }
                | fleetq_ledger::command::Command::ApplyObjects { .. }
                    if std::env::var_os("FLEETQ_CHAOS_DEBUG").is_some_and(|v| v == "full") =>
                {
                    text
                }
                fleetq_ledger::command::Command::SubmitWorkloads { .. }
                | fleetq_ledger::command::Command::ApplyObjects { .. } => {
                    text.chars().take(160).collect()
                }
                _ => text,
            };
            eprintln!(
                "log     {ms:>6}ms t{} #{} {shown}",
                entry.log_id.leader_id.term, entry.log_id.index
            );
        }
    }
}

/// The first 16 hex digits of a SHA-256 over the run's observable course.
fn trace_digest(
    elapsed: Duration,
    summary: &ClientSummary,
    injected: &[String],
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
    h.update(if injected.is_empty() {
        "-".to_string()
    } else {
        injected.join("; ")
    });
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
fn check_replicas(
    registry: &Registry,
    nodes: u64,
    summary: &ClientSummary,
) -> Result<(), Violation> {
    let registry = registry.borrow();
    if registry.len() as u64 != nodes {
        return Err(Violation {
            check: "nodes started",
            detail: format!("only {} of {nodes} nodes started", registry.len()),
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
        // Every workload has ended (the client waited for that), so no
        // quota may still be held: nothing stranded (invariant 3).
        let held: Vec<String> = sm
            .ledger
            .snapshot()
            .admitted()
            .map(|a| format!("workload {} on {}", a.pending.id, a.assignment.cluster))
            .collect();
        if !held.is_empty() {
            return Err(Violation {
                check: "no stranded quota (invariant 3)",
                detail: format!(
                    "n{id}: every workload ended, yet quota is held: {}",
                    held.join(", ")
                ),
            });
        }
        // Present, or removed after it finished (retention), which the
        // ledger remembers by id.
        let state = sm.ledger.state();
        for (name, wid) in &summary.acknowledged {
            if !state.workloads.contains_key(wid) && !state.removed.contains(*wid) {
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
    fn failures_name_the_check_seed_and_replay() {
        let plan = Plan::from_seed(42, 3);
        let f = failure(&plan, "convergence (invariant 6)", "hashes differ");
        assert!(f.contains("seed 42"), "{f}");
        assert!(f.contains("convergence (invariant 6)"), "{f}");
        assert!(f.contains("fleetq-chaos sim --seed 42"), "{f}");
    }
}
