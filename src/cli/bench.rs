//! `fleetq bench`: the admission load generator. By default it starts its
//! own 3-node group in this process (loopback TCP, sled with fsync on, a
//! simulated cluster with room for every workload), configures N
//! ClusterQueues with free quota, then submits workloads from concurrent
//! clients spread over all nodes (followers forward to the leader) and
//! reports submission and admission rates and submit-to-admitted latency.
//!
//! Latency is measured per workload from the client's send time to the
//! leader's stamp on the executor's "Running" report, which the simulated
//! executor proposes as soon as the admission is applied: submit ->
//! admitted, committed, and seen by the executor.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Args;
use fleetq_model::workload::{PodSet, RunSpec, WorkloadSpec};
use fleetq_model::Workload;
use fleetq_proto::v1 as pb;
use fleetq_server::simulated::SimulatedCluster;
use fleetq_server::{Node, NodeConfig, RaftTiming};
use serde::Serialize;

use super::client;
use super::view::{self, Output};

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
    /// How long each workload "runs" on the simulated executor.
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
    /// Output format of the report.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    workloads: u64,
    mode: String,
    clients: u64,
    batch: u64,
    cluster_queues: u64,
    submit_seconds: f64,
    submissions_per_second: f64,
    admit_seconds: f64,
    admissions_per_second: f64,
    latency_ms_p50: u64,
    latency_ms_p90: u64,
    latency_ms_p99: u64,
    latency_ms_p999: u64,
    latency_ms_max: u64,
    /// Submit call until the leader stamped the submission.
    stage_submit_ms: String,
    /// Submission until the leader stamped the admission.
    stage_schedule_ms: String,
    /// Admission until the executor's Running report was stamped.
    stage_executor_ms: String,
    scheduler_cycles: u64,
    scheduler_cycle_us_mean: u64,
    admit_batches: u64,
    decisions_per_batch: f64,
    cpu_seconds: f64,
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

fn config_yaml(queues: u64) -> String {
    let mut y = String::from(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: h100-80gb\n",
    );
    for q in 0..queues {
        y.push_str(&format!(
            "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: bench-{q}\nspec:\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100-80gb\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: 1000000\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: bench\n  name: q-{q}\nspec:\n  clusterQueue: bench-{q}\n"
        ));
    }
    y
}

fn cpu_seconds() -> f64 {
    // utime + stime of this process, from /proc (Linux); 0 elsewhere.
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields
        .get(11)
        .and_then(|u| u.parse::<f64>().ok())
        .unwrap_or(0.0)
        + fields
            .get(12)
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
    ticks / 100.0
}

pub fn run(args: &BenchArgs) -> ExitCode {
    match super::server::runtime().and_then(|rt| rt.block_on(bench(args))) {
        Ok(report) => {
            if args.output.is_table() {
                print_report(&report);
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

fn print_report(r: &Report) {
    println!(
        "{} workloads, {}, {} per call, {} ClusterQueues, 3 nodes, sled fsync on",
        r.workloads, r.mode, r.batch, r.cluster_queues
    );
    println!(
        "submissions/s            {:>10.0}   ({:.2} s)",
        r.submissions_per_second, r.submit_seconds
    );
    println!(
        "admissions/s             {:>10.0}   ({:.2} s from first submit to last admission)",
        r.admissions_per_second, r.admit_seconds
    );
    println!(
        "submit->admitted ms      p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        r.latency_ms_p50, r.latency_ms_p90, r.latency_ms_p99, r.latency_ms_p999, r.latency_ms_max
    );
    println!(
        "  stages ms              send->submitted {}; ->admitted {}; ->running {}",
        r.stage_submit_ms, r.stage_schedule_ms, r.stage_executor_ms
    );
    if r.scheduler_cycles > 0 {
        println!(
            "scheduler                {} cycles, mean {} us; {} AdmitBatch entries, {:.1} decisions per entry",
            r.scheduler_cycles, r.scheduler_cycle_us_mean, r.admit_batches, r.decisions_per_batch
        );
    }
    if r.cpu_seconds > 0.0 {
        println!(
            "CPU                      {:.1} s (this process)",
            r.cpu_seconds
        );
    }
}

async fn start_group() -> Result<(Vec<Node>, Vec<String>, tempfile::TempDir), String> {
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
    let cluster = SimulatedCluster::parse("bench-1:h100-80gb=100000000")?;
    let mut nodes = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let id = i as u64 + 1;
        let config = NodeConfig {
            id,
            advertise: addr.to_string(),
            initial_members: members.clone(),
            timing: RaftTiming::default(),
            scheduler: fleetq_scheduler::SchedulerConfig::default(),
            simulated_clusters: vec![cluster.clone()],
            debug_endpoints: false,
            lease: fleetq_server::leases::LeaseConfig::default(),
            // In-process loopback group: plaintext (TLS costs the
            // handshake once per connection, not per admission).
            auth: fleetq_server::auth::Authorizer::insecure(),
        };
        nodes.push(
            fleetq_server::tcp::start_node(
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

/// The workloads `w-{start}`..`w-{end}` as JSON documents.
fn batch_docs(start: u64, end: u64, queues: u64, runtime: Duration) -> Result<Vec<String>, String> {
    (start..end)
        .map(|i| {
            let w = Workload {
                namespace: "bench".into(),
                name: format!("w-{i}"),
                labels: Default::default(),
                spec: WorkloadSpec {
                    queue_name: format!("q-{}", i % queues),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: [(
                            "nvidia.com/gpu".to_string(),
                            fleetq_model::Quantity::from_milli(1000),
                        )]
                        .into(),
                    }],
                    run: RunSpec {
                        duration: Some(runtime),
                        ..RunSpec::default()
                    },
                    ..WorkloadSpec::default()
                },
            };
            serde_json::to_string(&w).map_err(|e| e.to_string())
        })
        .collect()
}

async fn send(client: &mut client::Client, start: u64, docs: Vec<String>) -> Result<(), String> {
    let reply = client
        .submit(pb::SubmitRequest {
            request_id: format!("bench-{start}"),
            workload_json: String::new(),
            workloads_json: docs,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    match reply.results.iter().find(|r| !r.errors.is_empty()) {
        Some(r) => Err(format!("submission refused: {:?}", r.errors)),
        None => Ok(()),
    }
}

async fn bench(args: &BenchArgs) -> Result<Report, String> {
    if args.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return Err("--rate: must be a positive number of workloads per second".into());
    }
    if args.workloads == 0 || args.clients == 0 || args.batch == 0 || args.cluster_queues == 0 {
        return Err(
            "--workloads, --clients, --batch and --cluster-queues must be at least 1".into(),
        );
    }
    let runtime = fleetq_model::time::parse_duration(&args.runtime)
        .map_err(|e| format!("--runtime {:?}: {e}", args.runtime))?;
    let (nodes, addrs, _dir) = if args.target.is_empty() {
        let (n, a, d) = start_group().await?;
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
    let applied = admin
        .apply(pb::ApplyRequest {
            manifests: config_yaml(args.cluster_queues),
            dry_run: false,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    if !applied.errors.is_empty() {
        return Err(format!("bench configuration refused: {:?}", applied.errors));
    }
    // Let the simulated cluster register.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut clients = Vec::new();
    for addr in &addrs {
        clients.push(connect(addr.clone()).await?);
    }
    let cpu_before = cpu_seconds();
    let next = Arc::new(AtomicU64::new(0));
    let sent_at: Arc<Vec<AtomicU64>> =
        Arc::new((0..args.workloads).map(|_| AtomicU64::new(0)).collect());
    let started = Instant::now();
    let first_send = now_ms();
    let mut tasks = Vec::new();
    let (total, batch, queues) = (args.workloads, args.batch, args.cluster_queues);
    if let Some(rate) = args.rate {
        // Open loop: a batch leaves every batch/rate seconds whether or not
        // earlier ones were answered; latency counts from the scheduled
        // send time, so a stalled server cannot hide its queue.
        let interval = Duration::from_secs_f64(batch as f64 / rate);
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut k = 0u64;
        while k * batch < total {
            ticker.tick().await;
            let start = k * batch;
            let end = (start + batch).min(total);
            let scheduled = first_send + (interval.as_secs_f64() * 1000.0 * k as f64) as u64;
            for i in start..end {
                sent_at[i as usize].store(scheduled, Ordering::Relaxed);
            }
            let mut client = clients[(k as usize) % clients.len()].clone();
            tasks.push(tokio::spawn(async move {
                let docs = batch_docs(start, end, queues, runtime)?;
                send(&mut client, start, docs).await
            }));
            k += 1;
        }
    } else {
        for c in 0..args.clients {
            let mut client = clients[(c as usize) % clients.len()].clone();
            let next = Arc::clone(&next);
            let sent_at = Arc::clone(&sent_at);
            tasks.push(tokio::spawn(async move {
                loop {
                    let start = next.fetch_add(batch, Ordering::Relaxed);
                    if start >= total {
                        return Ok::<(), String>(());
                    }
                    let end = (start + batch).min(total);
                    let docs = batch_docs(start, end, queues, runtime)?;
                    let t = now_ms();
                    for i in start..end {
                        sent_at[i as usize].store(t, Ordering::Relaxed);
                    }
                    send(&mut client, start, docs).await?;
                }
            }));
        }
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let submit_seconds = started.elapsed().as_secs_f64();

    // Wait until every workload was admitted (Running or done). Poll with
    // cheap counting queries: listing every workload while admissions are
    // still running would hold the state machine and skew the latencies.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut waiting = 0;
        for state in ["Pending", "Admitted"] {
            waiting += admin
                .list_workloads(pb::ListWorkloadsRequest {
                    namespace: "bench".into(),
                    all_namespaces: false,
                    cluster_queue: String::new(),
                    state: state.into(),
                    limit: 1,
                })
                .await
                .map_err(|s| client::status_line(&s))?
                .into_inner()
                .total;
        }
        if waiting == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{waiting} workloads not admitted after 120 s"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu = cpu_seconds() - cpu_before;
    let list = admin
        .list_workloads(pb::ListWorkloadsRequest {
            namespace: "bench".into(),
            all_namespaces: false,
            cluster_queue: String::new(),
            state: String::new(),
            limit: 0,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner()
        .workloads;
    if list.len() as u64 != args.workloads {
        return Err(format!(
            "{} of {} workloads found",
            list.len(),
            args.workloads
        ));
    }
    let mut latencies = Vec::with_capacity(list.len());
    // Where the time goes: send -> submission stamped, -> admission
    // stamped, -> executor's Running stamped.
    let mut stages: [Vec<u64>; 3] = Default::default();
    let mut last_admitted = 0;
    for w in &list {
        let index: usize = w
            .name
            .trim_start_matches("w-")
            .parse()
            .map_err(|_| format!("unexpected workload {}", w.name))?;
        let running_at = w
            .history
            .iter()
            .find(|e| e.state == "Running")
            .map(|e| e.at_ms)
            .ok_or_else(|| format!("workload {} never reported Running", w.name))?;
        last_admitted = last_admitted.max(running_at);
        let sent = sent_at[index].load(Ordering::Relaxed);
        latencies.push(running_at.saturating_sub(sent));
        let admitted_at = w
            .history
            .iter()
            .find(|e| e.state == "Admitted")
            .map_or(running_at, |e| e.at_ms);
        stages[0].push(w.created_at_ms.saturating_sub(sent));
        stages[1].push(admitted_at.saturating_sub(w.created_at_ms));
        stages[2].push(running_at.saturating_sub(admitted_at));
    }
    latencies.sort_unstable();
    let stage_text: Vec<String> = stages
        .iter_mut()
        .map(|v| {
            v.sort_unstable();
            let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
            format!(
                "p50 {} p99 {} max {}",
                at(0.5),
                at(0.99),
                v.last().copied().unwrap_or(0)
            )
        })
        .collect();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    let admit_seconds = (last_admitted.saturating_sub(first_send)) as f64 / 1000.0;
    let (mut cycles, mut cycle_us, mut batches, mut admitted) = (0, 0, 0, 0);
    for n in &nodes {
        let s = n.admission_stats.borrow().clone();
        cycles += s.cycles;
        cycle_us += s.total_cycle_micros;
        batches += s.batches;
        admitted += s.admitted;
    }
    let report = Report {
        workloads: args.workloads,
        mode: match args.rate {
            Some(r) => format!("open loop at {r} workloads/s"),
            None => format!("closed loop, {} clients", args.clients),
        },
        clients: args.clients,
        batch: args.batch,
        cluster_queues: args.cluster_queues,
        submit_seconds,
        submissions_per_second: args.workloads as f64 / submit_seconds,
        admit_seconds,
        admissions_per_second: args.workloads as f64 / admit_seconds.max(0.001),
        latency_ms_p50: pct(0.5),
        latency_ms_p90: pct(0.9),
        latency_ms_p99: pct(0.99),
        latency_ms_p999: pct(0.999),
        latency_ms_max: *latencies.last().unwrap_or(&0),
        stage_submit_ms: stage_text[0].clone(),
        stage_schedule_ms: stage_text[1].clone(),
        stage_executor_ms: stage_text[2].clone(),
        scheduler_cycles: cycles,
        scheduler_cycle_us_mean: cycle_us.checked_div(cycles).unwrap_or(0),
        admit_batches: batches,
        decisions_per_batch: if batches > 0 {
            admitted as f64 / batches as f64
        } else {
            0.0
        },
        cpu_seconds: cpu,
    };
    for n in nodes {
        let _ = tokio::time::timeout(Duration::from_secs(5), n.shutdown()).await;
    }
    Ok(report)
}
