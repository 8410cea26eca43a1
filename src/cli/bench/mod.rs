//! `fleetq bench`: the admission load generator. By default it starts its
//! own 3-node group in this process (loopback TCP, sled with fsync on, a
//! simulated cluster with room for every workload), configures N
//! ClusterQueues with free quota, then submits workloads from concurrent
//! clients spread over all nodes and reports submission, admission and
//! completion rates and latencies. A client that a follower answers moves
//! to the leader the answer names (the `fleetq-leader` header), as a
//! client library that keeps its connection would; `--any-node` keeps
//! them where they started, every write forwarded by a follower.
//!
//! Two latencies per workload, both from the client's send time (in open
//! loop, the scheduled send time): to *admitted*, the moment a node first
//! applied the workload's admission (committed, visible to readers;
//! [`observe`]), and to *running*, the leader's stamp on the simulated
//! executor's Running report, which it sends as soon as it sees the
//! admission. Against a `--target` group the commit of an admission cannot
//! be observed, and both are timed by the Running report.
//!
//! `--deep-queue` measures draining instead (Slurm's "jobs started with a
//! deep queue"): everything is submitted while the measured ClusterQueues
//! are held, then one apply releases them and both latencies count from
//! that release; `--gpus` makes the simulated cluster small enough that
//! the drain waits for quota to turn over.

mod config;
mod observe;
mod report;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use fleetq_model::workload::{PodSet, RunSpec, WorkloadSpec};
use fleetq_model::Workload;
use fleetq_proto::v1 as pb;
use fleetq_server::agents::simulated::SimulatedCluster;
use fleetq_server::{Node, NodeConfig, RaftTiming};

use super::client;
use super::view::{self, Output};
use config::{Mix, NAMESPACE, PARKED_NAMESPACE, PARKED_QUEUE};
use observe::AdmissionObserver;
use report::{Percentiles, Report, TimedFrom};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workloads to submit.
    #[arg(long, default_value_t = 20_000)]
    pub workloads: u64,
    /// Concurrent clients (closed loop: each waits for its reply).
    #[arg(long, default_value_t = 32)]
    pub clients: u64,
    /// Workloads per Submit call (1 = one RPC per workload).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// ClusterQueues the workloads spread over (one LocalQueue each).
    #[arg(long, default_value_t = 10)]
    pub cluster_queues: u64,
    /// Cohorts the ClusterQueues are spread over (0: none).
    #[arg(long, default_value_t = 0)]
    pub cohorts: u64,
    /// GPU flavors per ClusterQueue, tried in order: all but the last have
    /// 16 GPUs of quota per queue, so the scheduler fills them and falls
    /// through to the last, which has room for everything.
    #[arg(long, default_value_t = 1)]
    pub flavors: u64,
    /// WorkloadPriorityClasses the workloads cycle through (1: none).
    #[arg(long, default_value_t = 1)]
    pub priorities: u64,
    /// Before the measured run, park this many workloads pending in a
    /// ClusterQueue with no quota (a deep queue the scheduler must pass
    /// over), and report the memory they take.
    #[arg(long, default_value_t = 0)]
    pub pending: u64,
    /// Slurm's "jobs started with a deep queue": submit every workload
    /// first while the measured ClusterQueues are held (`stopPolicy:
    /// Hold`), then release them all with one apply and time the drain.
    /// Rates, latencies and CPU then count from the release.
    #[arg(long)]
    pub deep_queue: bool,
    /// GPUs of the simulated cluster (default: room for every workload at
    /// once). With fewer, admissions wait for running workloads to finish
    /// (see --runtime), as jobs wait for nodes.
    #[arg(long)]
    pub gpus: Option<u64>,
    /// Nodes the simulated cluster reports per flavor, its capacity split
    /// evenly among them, so every admission places its pods on nodes
    /// (as a cluster that reports its nodes does). 0: totals only.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub nodes: u64,
    /// How long each workload "runs" on the simulated executor. Up to 60 s
    /// the bench waits for every workload to finish and reports the
    /// completion rate; longer runtimes are not waited for.
    #[arg(long, default_value = "2s")]
    pub runtime: String,
    /// Open loop: offer this many workloads per second (in batches of
    /// --batch) regardless of replies, instead of --clients closed-loop
    /// clients. Latency then counts from each batch's scheduled send time.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// Use a running group at these addresses (comma-separated) instead of
    /// starting one; it must run a simulated cluster with room.
    #[arg(long, value_delimiter = ',', value_name = "ADDR")]
    pub target: Vec<String>,
    /// Keep each client on the node it started on: writes sent to a
    /// follower are forwarded to the leader (one more hop each). By
    /// default a client moves to the leader a follower's answer names.
    #[arg(long)]
    pub any_node: bool,
    /// Start the group with the leader's admission on submit off (as
    /// `fleetq server --no-admit-on-submit`): every admission then waits
    /// for a cycle after its submission commits, one more commit. For
    /// side-by-side comparisons.
    #[arg(long)]
    pub no_admit_on_submit: bool,
    /// Start the group with this retention of finished workloads (as
    /// `fleetq server --finished-retention`), or `never` [default: the
    /// server's, 24h]. A short one shows what removing finished work
    /// saves over a long run.
    #[arg(long, value_name = "DURATION|never")]
    pub finished_retention: Option<String>,
    /// Output format of the report.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

impl BenchArgs {
    fn mix(&self) -> Mix {
        Mix {
            cluster_queues: self.cluster_queues,
            cohorts: self.cohorts,
            flavors: self.flavors,
            priorities: self.priorities,
            gpus: self.gpus,
            nodes: self.nodes,
        }
    }

    /// Flags that cannot go together, named.
    fn check_combinations(&self) -> Result<(), String> {
        if self.deep_queue && self.rate.is_some() {
            return Err("--rate: a --deep-queue run submits everything before it starts timing; drop one of them".into());
        }
        if self.no_admit_on_submit && !self.target.is_empty() {
            return Err("--no-admit-on-submit: configures the group bench starts itself; start a --target group's servers with it instead".into());
        }
        if self.finished_retention.is_some() && !self.target.is_empty() {
            return Err("--finished-retention: configures the group bench starts itself; start a --target group's servers with it instead".into());
        }
        if self.gpus.is_some() && !self.target.is_empty() {
            return Err("--gpus: sizes the simulated cluster of the group bench starts itself, not a --target group".into());
        }
        if self.nodes > 0 && !self.target.is_empty() {
            return Err("--nodes: shapes the simulated cluster of the group bench starts itself, not a --target group".into());
        }
        Ok(())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn free_addr() -> Result<SocketAddr, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// utime + stime of this process, from /proc (Linux); 0 elsewhere.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Resident memory of this process in bytes, from /proc (Linux); 0
/// elsewhere.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

pub fn run(args: &BenchArgs) -> ExitCode {
    match super::server::runtime().and_then(|rt| rt.block_on(bench(args))) {
        Ok(report) => {
            if args.output.is_table() {
                report.print();
            } else if let Err(e) = view::print_structured(&report, args.output) {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn start_group(
    mix: &Mix,
    admit_on_submit: bool,
    finished_retention: Option<std::time::Duration>,
) -> Result<(Vec<Node>, Vec<String>, tempfile::TempDir), String> {
    let dir = tempfile::Builder::new()
        .prefix("fleetq-bench-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect::<Result<_, _>>()?;
    let members: BTreeMap<u64, String> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u64 + 1, a.to_string()))
        .collect();
    let mut cluster = SimulatedCluster::parse(&mix.cluster_spec())?;
    cluster.nodes = mix.nodes_of(&cluster);
    let mut nodes = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let id = i as u64 + 1;
        let config = NodeConfig {
            id,
            advertise: addr.to_string(),
            initial_members: members.clone(),
            timing: RaftTiming::default(),
            ledger: fleetq_ledger::LedgerConfig::default(),
            leader: fleetq_server::leader::LeaderPolicies {
                admit_on_submit,
                finished_retention,
            },
            simulated_clusters: vec![cluster.clone()],
            debug_endpoints: false,
            lease: fleetq_server::agents::leases::LeaseConfig::default(),
            // In-process loopback group: plaintext (TLS costs the
            // handshake once per connection, not per admission).
            auth: fleetq_server::guard::auth::Authorizer::insecure(),
        };
        nodes.push(
            fleetq_server::bootstrap::start_node(
                config,
                // Every workload may wait at once, however many there are.
                fleetq_server::Limits {
                    max_pending_per_local_queue: 0,
                    ..fleetq_server::Limits::default()
                },
                *addr,
                &dir.path().join(format!("node-{id}")),
                None,
                None,
            )
            .await?,
        );
    }
    Ok((nodes, addrs.iter().map(|a| a.to_string()).collect(), dir))
}

/// One bench workload: one pod, one GPU, running for `runtime`.
fn workload(
    namespace: &str,
    name: String,
    queue: String,
    priority: Option<String>,
    runtime: Duration,
) -> Workload {
    Workload {
        namespace: namespace.into(),
        name,
        labels: Default::default(),
        spec: WorkloadSpec {
            queue_name: queue,
            priority_class_name: priority,
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                min_count: None,
                requests: [(
                    "nvidia.com/gpu".to_string(),
                    fleetq_model::Quantity::from_milli(1000),
                )]
                .into(),
                topology_request: None,
            }],
            run: RunSpec {
                duration: Some(runtime),
                ..RunSpec::default()
            },
            ..WorkloadSpec::default()
        },
    }
}

/// The measured workloads `w-{start}`..`w-{end}` as JSON documents.
fn batch_docs(start: u64, end: u64, mix: &Mix, runtime: Duration) -> Result<Vec<String>, String> {
    (start..end)
        .map(|i| {
            let w = workload(
                NAMESPACE,
                workload_name(i),
                format!("q-{}", i % mix.cluster_queues),
                mix.priority_class(i),
                runtime,
            );
            serde_json::to_string(&w).map_err(|e| e.to_string())
        })
        .collect()
}

/// The bench's connections, one per node, and which one a client uses.
struct Route {
    clients: Vec<client::Client>,
    addrs: Vec<String>,
    /// Index of the node named leader by a follower's answer
    /// (`usize::MAX` until one is).
    leader: AtomicUsize,
    follow: bool,
}

impl Route {
    fn new(clients: Vec<client::Client>, addrs: Vec<String>, follow: bool) -> Arc<Route> {
        Arc::new(Route {
            clients,
            addrs,
            leader: AtomicUsize::new(usize::MAX),
            follow,
        })
    }

    /// The connection for client `k`: the leader's once known (unless
    /// --any-node), else spread over the nodes.
    fn pick(&self, k: usize) -> client::Client {
        let leader = self.leader.load(Ordering::Relaxed);
        let i = if self.follow && leader < self.clients.len() {
            leader
        } else {
            k % self.clients.len()
        };
        self.clients[i].clone()
    }

    /// Remembers the leader a follower named, if it is one of ours.
    fn learn(&self, hint: Option<String>) {
        if let Some(i) = hint.and_then(|h| self.addrs.iter().position(|a| *a == h)) {
            self.leader.store(i, Ordering::Relaxed);
        }
    }
}

/// Submits one batch; the leader the answering node names, if it is a
/// follower.
async fn send(
    client: &mut client::Client,
    request_id: String,
    docs: Vec<String>,
) -> Result<Option<String>, String> {
    let reply = client
        .submit(pb::SubmitRequest {
            request_id,
            workload_json: String::new(),
            workloads_json: docs,
        })
        .await
        .map_err(|s| client::status_line(&s))?;
    let hint = reply
        .metadata()
        .get(fleetq_server::api::leader_hint::LEADER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let reply = reply.into_inner();
    match reply.results.iter().find(|r| !r.errors.is_empty()) {
        Some(r) => Err(format!("submission refused: {:?}", r.errors)),
        None => Ok(hint),
    }
}

/// Parks `count` workloads pending in the queue with no quota, in calls
/// of 1,000, printing progress to stderr for large counts.
async fn park_backlog(client: &mut client::Client, count: u64) -> Result<(), String> {
    const PER_CALL: u64 = 1000;
    let mut start = 0;
    while start < count {
        let end = (start + PER_CALL).min(count);
        let docs = (start..end)
            .map(|i| {
                let w = workload(
                    PARKED_NAMESPACE,
                    format!("parked-{i}"),
                    PARKED_QUEUE.into(),
                    None,
                    Duration::from_secs(1),
                );
                serde_json::to_string(&w).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        send(client, format!("bench-parked-{start}"), docs).await?;
        start = end;
        if count >= 100_000 && start % 100_000 == 0 {
            eprintln!("parked {start} of {count} pending workloads");
        }
    }
    Ok(())
}

/// Applies the bench's Kueue objects (`held`: the measured ClusterQueues
/// with `stopPolicy: Hold`); `what` names the step in a refusal.
async fn apply_config(
    client: &mut client::Client,
    mix: &Mix,
    parked: bool,
    held: bool,
    what: &str,
) -> Result<(), String> {
    let applied = client
        .apply(pb::ApplyRequest {
            manifests: mix.yaml(parked, held),
            dry_run: false,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    if !applied.errors.is_empty() {
        return Err(format!("{what} refused: {:?}", applied.errors));
    }
    Ok(())
}

/// Completions are measured (waited for) only when workloads run at most
/// this long.
const MAX_RUNTIME_FOR_COMPLETIONS: Duration = Duration::from_secs(60);

/// Waits until no measured workload is in one of `states`, polling with
/// cheap counting queries: listing every workload while admissions are
/// still running would hold the state machine and skew the latencies.
async fn wait_until_none(
    client: &mut client::Client,
    states: &[&str],
    what: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut waiting = 0;
        for state in states {
            waiting += client
                .list_workloads(pb::ListWorkloadsRequest {
                    namespace: NAMESPACE.into(),
                    all_namespaces: false,
                    cluster_queue: String::new(),
                    state: (*state).into(),
                    limit: 1,
                    with_spec: false,
                    submitted_by: String::new(),
                })
                .await
                .map_err(|s| client::status_line(&s))?
                .into_inner()
                .total;
        }
        if waiting == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{waiting} workloads not {what} after 120 s"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The name of measured workload `i`.
fn workload_name(i: u64) -> String {
    format!("w-{i}")
}

/// The index of a measured workload, from its name.
fn workload_index(name: &str) -> Option<usize> {
    name.strip_prefix("w-")?.parse().ok()
}

/// The stamp of the first history event in `state`.
fn stamp(w: &pb::WorkloadStatus, state: &str) -> Option<u64> {
    w.history.iter().find(|e| e.state == state).map(|e| e.at_ms)
}

async fn bench(args: &BenchArgs) -> Result<Report, String> {
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err("--rate: must be a positive number of workloads per second".into());
    }
    if args.workloads == 0 || args.clients == 0 || args.batch == 0 {
        return Err("--workloads, --clients and --batch must be at least 1".into());
    }
    args.check_combinations()?;
    let mix = args.mix();
    mix.validate()?;
    let retention = match &args.finished_retention {
        Some(v) => super::server::parse_finished_retention(v)?,
        None => fleetq_server::leader::LeaderPolicies::default().finished_retention,
    };
    let runtime = fleetq_model::time::parse_duration(&args.runtime)
        .map_err(|e| format!("--runtime {:?}: {e}", args.runtime))?;
    let (nodes, addrs, _dir) = if args.target.is_empty() {
        let (n, a, d) = start_group(&mix, !args.no_admit_on_submit, retention).await?;
        (n, a, Some(d))
    } else {
        (Vec::new(), args.target.clone(), None)
    };
    // Its own group is plaintext; a --target group takes the CLI's TLS
    // flags.
    let in_process = !nodes.is_empty();
    let connect = |addr: String| async move {
        if in_process {
            client::connect_with(&addr, None, None).await
        } else {
            client::connect(&addr).await
        }
    };
    let mut admin = connect(addrs[0].clone()).await?;
    client::wait_for_leader(&mut admin, Duration::from_secs(10)).await?;
    let parked = args.pending > 0;
    apply_config(
        &mut admin,
        &mix,
        parked,
        args.deep_queue,
        "bench configuration",
    )
    .await?;
    let rss_per_pending = if parked {
        let before = rss_bytes();
        park_backlog(&mut admin, args.pending).await?;
        // Let every replica apply the backlog before reading the memory.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let replicas = nodes.len().max(1) as u64;
        in_process.then(|| rss_bytes().saturating_sub(before) / (args.pending * replicas))
    } else {
        None
    };
    // Let the simulated cluster register.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let handles: Vec<_> = nodes.iter().map(|n| n.handle.clone()).collect();
    let observer = AdmissionObserver::start(&handles, args.workloads);
    let mut clients = Vec::new();
    for addr in &addrs {
        clients.push(connect(addr.clone()).await?);
    }
    let route = Route::new(clients, addrs.clone(), !args.any_node);
    let sent_at: Arc<Vec<AtomicU64>> =
        Arc::new((0..args.workloads).map(|_| AtomicU64::new(0)).collect());
    let mut cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut first_send = now_ms();
    let tasks = match args.rate {
        Some(rate) => open_loop(args, rate, mix, runtime, &route, &sent_at, first_send).await,
        None => closed_loop(args, mix, runtime, &route, &sent_at),
    };
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let submit_seconds = started.elapsed().as_secs_f64();
    if args.deep_queue {
        // Every workload is committed and pending: release the queues
        // (the same objects without the hold) and time everything from
        // just before.
        cpu_before = cpu_seconds();
        first_send = now_ms();
        apply_config(&mut admin, &mix, parked, false, "releasing the held queues").await?;
        for t in sent_at.iter() {
            t.store(first_send, Ordering::Relaxed);
        }
    }
    wait_until_none(&mut admin, &["Pending", "Admitted"], "admitted").await?;
    let cpu = cpu_seconds() - cpu_before;
    // Completions are stamped when the executor reports them, one runtime
    // after the start; with long runtimes they are not waited for.
    let measure_completions = runtime <= MAX_RUNTIME_FOR_COMPLETIONS;
    if measure_completions {
        wait_until_none(&mut admin, &["Running"], "finished").await?;
    }

    let list = admin
        .list_workloads(pb::ListWorkloadsRequest {
            namespace: NAMESPACE.into(),
            all_namespaces: false,
            cluster_queue: String::new(),
            state: String::new(),
            limit: 0,
            with_spec: false,
            submitted_by: String::new(),
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner()
        .workloads;
    // With a short --finished-retention some ended and were removed
    // before this listing: one the change feed saw admitted counts (and
    // its admission is timed); one neither listed nor seen is lost.
    let mut listed = vec![false; args.workloads as usize];
    for w in &list {
        if let Some(seen) = workload_index(&w.name).and_then(|i| listed.get_mut(i)) {
            *seen = true;
        }
    }
    let unaccounted = listed
        .iter()
        .enumerate()
        .filter(|(i, seen)| !**seen && observer.admitted_at(*i).is_none())
        .count();
    if list.len() as u64 != args.workloads && (unaccounted > 0 || !in_process) {
        return Err(format!(
            "{} of {} workloads found; {unaccounted} of the rest were never seen admitted",
            list.len(),
            args.workloads
        ));
    }
    let mut admitted = Vec::with_capacity(list.len());
    let mut running = Vec::with_capacity(list.len());
    let mut fallbacks = 0;
    // Where the time goes: send -> submission stamped, -> admission
    // stamped (proposed), -> executor's Running stamped.
    let mut stages: [Vec<u64>; 3] = Default::default();
    let (mut last_admitted, mut last_running) = (0, 0);
    let (mut first_finished, mut last_finished) = (u64::MAX, 0);
    // Completions are timed over the workloads still listed: under a
    // short retention the earlier ones are gone.
    let mut finished = 0u64;
    for w in &list {
        let index =
            workload_index(&w.name).ok_or_else(|| format!("unexpected workload {}", w.name))?;
        let running_at = stamp(w, "Running")
            .ok_or_else(|| format!("workload {} never reported Running", w.name))?;
        let admitted_at = match observer.admitted_at(index) {
            Some(t) => t,
            None => {
                if in_process {
                    fallbacks += 1;
                }
                running_at
            }
        };
        last_admitted = last_admitted.max(admitted_at);
        last_running = last_running.max(running_at);
        if let Some(done) = stamp(w, "Succeeded") {
            first_finished = first_finished.min(done);
            last_finished = last_finished.max(done);
            finished += 1;
        }
        let sent = sent_at[index].load(Ordering::Relaxed);
        admitted.push(admitted_at.saturating_sub(sent));
        running.push(running_at.saturating_sub(sent));
        let proposed = stamp(w, "Admitted").unwrap_or(running_at);
        stages[0].push(w.created_at_ms.saturating_sub(sent));
        // In a deep-queue run the submission is stamped long before the
        // release, which is where scheduling can begin.
        stages[1].push(proposed.saturating_sub(w.created_at_ms.max(sent)));
        stages[2].push(running_at.saturating_sub(proposed));
    }
    for (index, _) in listed.iter().enumerate().filter(|(_, seen)| !**seen) {
        if let Some(admitted_at) = observer.admitted_at(index) {
            last_admitted = last_admitted.max(admitted_at);
            let sent = sent_at[index].load(Ordering::Relaxed);
            admitted.push(admitted_at.saturating_sub(sent));
        }
    }
    let [submit_stage, schedule_stage, executor_stage] =
        stages.map(|v| Percentiles::from_values(v).short());
    let admit_seconds = (last_admitted.saturating_sub(first_send)) as f64 / 1000.0;
    let start_seconds = (last_running.saturating_sub(first_send)) as f64 / 1000.0;
    let finish_seconds = last_finished.saturating_sub(first_finished) as f64 / 1000.0;
    let (mut cycles, mut cycle_us, mut batches, mut decided) = (0, 0, 0, 0);
    for n in &nodes {
        let s = n.admission_stats.borrow().clone();
        cycles += s.cycles;
        cycle_us += s.total_cycle_micros;
        batches += s.batches;
        decided += s.admitted;
    }
    // Every replica counts the same once it has applied everything.
    let admitted_on_submit = nodes
        .iter()
        .map(|n| n.handle.read().ledger.counters().admissions_on_submit)
        .max()
        .unwrap_or(0);
    let mut report = Report {
        workloads: args.workloads,
        mode: match (args.rate, args.deep_queue) {
            (Some(r), _) => format!("open loop at {r} workloads/s"),
            (None, false) => format!("closed loop, {} clients", args.clients),
            (None, true) => format!(
                "deep queue (submitted by {} clients while held, then released)",
                args.clients
            ),
        } + if args.any_node {
            ", clients on every node"
        } else {
            ", clients follow the leader"
        },
        timed_from: if args.deep_queue {
            TimedFrom::Release
        } else {
            TimedFrom::Submit
        },
        gpus: args.gpus,
        nodes: args.nodes,
        clients: args.clients,
        batch: args.batch,
        cluster_queues: mix.cluster_queues,
        cohorts: mix.cohorts,
        flavors: mix.flavors,
        priorities: mix.priorities,
        pending_backlog: args.pending,
        submit_seconds,
        submissions_per_second: args.workloads as f64 / submit_seconds,
        admit_seconds,
        admissions_per_second: args.workloads as f64 / admit_seconds.max(0.001),
        start_seconds,
        starts_per_second: args.workloads as f64 / start_seconds.max(0.001),
        completions_per_second: measure_completions
            .then(|| finished.saturating_sub(1) as f64 / finish_seconds.max(0.001)),
        latency_ms_p50: 0,
        latency_ms_p90: 0,
        latency_ms_p99: 0,
        latency_ms_p999: 0,
        latency_ms_max: 0,
        admitted_measured_at: if in_process {
            "the first node to apply the admission (committed)".into()
        } else {
            "the executor's Running report (a --target group's commits are not observable)".into()
        },
        admitted_fallbacks: fallbacks,
        running_ms_p50: 0,
        running_ms_p90: 0,
        running_ms_p99: 0,
        running_ms_p999: 0,
        running_ms_max: 0,
        stage_submit_ms: submit_stage,
        stage_schedule_ms: schedule_stage,
        stage_executor_ms: executor_stage,
        scheduler_cycles: cycles,
        scheduler_cycle_us_mean: cycle_us.checked_div(cycles).unwrap_or(0),
        admit_batches: batches,
        admitted_on_submit,
        decisions_per_batch: if batches > 0 {
            decided as f64 / batches as f64
        } else {
            0.0
        },
        cpu_seconds: cpu,
        cpu_seconds_per_1k: cpu * 1000.0 / args.workloads as f64,
        rss_bytes_per_pending: rss_per_pending,
    };
    report.set_latency(Percentiles::from_values(admitted));
    report.set_running(Percentiles::from_values(running));
    drop(observer);
    for n in nodes {
        let _ = tokio::time::timeout(Duration::from_secs(5), n.shutdown()).await;
    }
    Ok(report)
}

type SendTask = tokio::task::JoinHandle<Result<(), String>>;

/// Open loop: a batch leaves every batch/rate seconds whether or not
/// earlier ones were answered; latency counts from the scheduled send
/// time, so a stalled server cannot hide its queue.
async fn open_loop(
    args: &BenchArgs,
    rate: f64,
    mix: Mix,
    runtime: Duration,
    route: &Arc<Route>,
    sent_at: &Arc<Vec<AtomicU64>>,
    first_send: u64,
) -> Vec<SendTask> {
    let (total, batch) = (args.workloads, args.batch);
    let interval = Duration::from_secs_f64(batch as f64 / rate);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    let mut k = 0u64;
    while k * batch < total {
        ticker.tick().await;
        let start = k * batch;
        let end = (start + batch).min(total);
        let scheduled = first_send + (interval.as_secs_f64() * 1000.0 * k as f64) as u64;
        for i in start..end {
            sent_at[i as usize].store(scheduled, Ordering::Relaxed);
        }
        let mut client = route.pick(k as usize);
        let route = Arc::clone(route);
        tasks.push(tokio::spawn(async move {
            let docs = batch_docs(start, end, &mix, runtime)?;
            route.learn(send(&mut client, format!("bench-{start}"), docs).await?);
            Ok(())
        }));
        k += 1;
    }
    tasks
}

/// Closed loop: each client sends its next batch when the last was
/// answered.
fn closed_loop(
    args: &BenchArgs,
    mix: Mix,
    runtime: Duration,
    route: &Arc<Route>,
    sent_at: &Arc<Vec<AtomicU64>>,
) -> Vec<SendTask> {
    let (total, batch) = (args.workloads, args.batch);
    let next = Arc::new(AtomicU64::new(0));
    (0..args.clients)
        .map(|c| {
            let route = Arc::clone(route);
            let next = Arc::clone(&next);
            let sent_at = Arc::clone(sent_at);
            tokio::spawn(async move {
                loop {
                    let start = next.fetch_add(batch, Ordering::Relaxed);
                    if start >= total {
                        return Ok(());
                    }
                    let end = (start + batch).min(total);
                    let docs = batch_docs(start, end, &mix, runtime)?;
                    let t = now_ms();
                    for i in start..end {
                        sent_at[i as usize].store(t, Ordering::Relaxed);
                    }
                    let mut client = route.pick(c as usize);
                    route.learn(send(&mut client, format!("bench-{start}"), docs).await?);
                }
            })
        })
        .collect()
}
