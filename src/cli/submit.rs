//! `fleetq submit`: queue a workload from flags or YAML, optionally
//! waiting until it is admitted.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use fleetq_model::config::Object;
use fleetq_model::workload::{PodSet, RunSpec, WorkloadSpec};
use fleetq_model::{Quantity, Workload};
use fleetq_proto::v1 as pb;
use indicatif::{ProgressBar, ProgressStyle};

use super::client::{self, field_error_line, Client};
use super::input::read_sources;

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// Workload or batch/v1 Job manifests instead of flags (file, dir or -).
    #[arg(short = 'f', long = "filename", value_name = "FILE", conflicts_with_all = ["name", "queue", "requests"])]
    pub files: Vec<PathBuf>,
    /// Namespace of the workload and its LocalQueue.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// LocalQueue to submit to.
    // ValueHint::Other: shells complete no file names here.
    #[arg(long, required_unless_present = "files", value_hint = clap::ValueHint::Other, add = clap_complete::engine::ArgValueCompleter::new(super::names::local_queues))]
    pub queue: Option<String>,
    /// Workload name (unique in the namespace).
    #[arg(long, required_unless_present = "files", value_hint = clap::ValueHint::Other)]
    pub name: Option<String>,
    /// Per-pod request, RESOURCE=QUANTITY (repeatable), e.g.
    /// `--request nvidia.com/gpu=8 --request cpu=32`.
    #[arg(
        long = "request",
        value_name = "RES=QTY",
        required_unless_present = "files"
    )]
    pub requests: Vec<String>,
    /// Pods in the gang (all land on one cluster or none do).
    #[arg(long, default_value_t = 1)]
    pub count: u32,
    /// How long it runs (the simulated executor honours it), e.g. 30m.
    #[arg(long)]
    pub duration: Option<String>,
    /// WorkloadPriorityClass name.
    #[arg(long, value_hint = clap::ValueHint::Other)]
    pub priority_class: Option<String>,
    /// Wait until it is admitted (or ends), showing its state, place in
    /// the ClusterQueue and pending reason: a spinner on a terminal, a line
    /// on stderr per change otherwise. Exits 0 once it is Admitted, Running
    /// or Succeeded; non-zero with the reason when it fails, is cancelled
    /// or --timeout passes.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (e.g. 30s, 5m, 1h30m); the
    /// workload stays queued.
    #[arg(long, value_name = "DURATION", requires = "wait", value_parser = fleetq_model::time::parse_duration)]
    pub timeout: Option<Duration>,
    /// With --wait: give up when no node of the group has answered for
    /// this long (a leader election takes seconds, a group that is gone
    /// never answers); the workload may still be queued.
    #[arg(long, value_name = "DURATION", default_value = "1m", requires = "wait", value_parser = fleetq_model::time::parse_duration)]
    pub unreachable_timeout: Duration,
    /// The command to run, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

fn workload_from_flags(args: &SubmitArgs) -> Result<Workload, Vec<String>> {
    let mut errors = Vec::new();
    let mut requests = BTreeMap::new();
    for r in &args.requests {
        match r.split_once('=') {
            None => errors.push(format!("--request {r:?}: expected RESOURCE=QUANTITY")),
            Some((res, qty)) => match qty.parse::<Quantity>() {
                Ok(q) => match fleetq_model::resources::whole_device_problem(res, q) {
                    Some(problem) => errors.push(format!("--request {r:?}: {problem}")),
                    None => {
                        requests.insert(res.to_string(), q);
                    }
                },
                Err(e) => errors.push(format!("--request {r:?}: {e}")),
            },
        }
    }
    let duration = match &args.duration {
        None => None,
        Some(d) => match fleetq_model::time::parse_duration(d) {
            Ok(d) => Some(d),
            Err(e) => {
                errors.push(format!("--duration {d:?}: {e}"));
                None
            }
        },
    };
    if args.count == 0 {
        errors.push("--count: must be at least 1".into());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Workload {
        namespace: args.namespace.clone(),
        name: args.name.clone().unwrap_or_default(),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: args.queue.clone().unwrap_or_default(),
            priority_class_name: args.priority_class.clone(),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: args.count,
                min_count: None,
                requests,
                topology_request: None,
            }],
            run: RunSpec {
                command: args.command.clone(),
                duration,
                ..RunSpec::default()
            },
            ..WorkloadSpec::default()
        },
    })
}

fn workloads_from_files(files: &[PathBuf]) -> Result<Vec<Workload>, Vec<String>> {
    let sources = read_sources(files);
    let mut errors = sources.errors;
    let mut workloads = Vec::new();
    for source in &sources.read {
        match fleetq_model::kueue::import_manifests(&source.text) {
            Err(es) => errors.extend(es.iter().map(|e| format!("{}: {e}", source.name))),
            Ok(docs) => {
                for doc in docs {
                    match doc.object {
                        Object::Workload(w) => workloads.push(w),
                        other => errors.push(format!(
                            "{}: document {}: {} is configuration; use fleetq apply",
                            source.name,
                            doc.document,
                            other.display_name()
                        )),
                    }
                }
            }
        }
    }
    if errors.is_empty() && workloads.is_empty() {
        errors.push("no Workload or Job found in the given files".into());
    }
    if errors.is_empty() {
        Ok(workloads)
    } else {
        Err(errors)
    }
}

pub fn run(server: &str, args: &SubmitArgs) -> ExitCode {
    let workloads = if args.files.is_empty() {
        workload_from_flags(args).map(|w| vec![w])
    } else {
        workloads_from_files(&args.files)
    };
    let workloads = match workloads {
        Ok(w) => w,
        Err(errors) => {
            for e in errors {
                eprintln!("error: {e}");
            }
            return ExitCode::FAILURE;
        }
    };
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        submit(&mut c, workloads, args).await
    })
    .and_then(|r| r);
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Exit status of a `--wait` interrupted by Ctrl-C (128 + SIGINT).
const INTERRUPTED: u8 = 130;

/// Submits, then with `--wait` follows each accepted workload; returns the
/// exit status.
async fn submit(c: &mut Client, workloads: Vec<Workload>, args: &SubmitArgs) -> Result<u8, String> {
    let workloads_json = workloads
        .iter()
        .map(|w| serde_json::to_string(w).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let request_id = client::request_id();
    // A lost reply is retried with the same request id: the ledger
    // answers with the workload it already has.
    let mut attempt = 0;
    let response = loop {
        attempt += 1;
        match c
            .submit(pb::SubmitRequest {
                request_id: request_id.clone(),
                workload_json: String::new(),
                workloads_json: workloads_json.clone(),
            })
            .await
        {
            Ok(r) => break r.into_inner(),
            Err(s)
                if attempt < 3
                    && matches!(s.code(), tonic::Code::Unavailable | tonic::Code::Unknown) =>
            {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(s) => return Err(client::status_line(&s)),
        }
    };
    let mut code = 0;
    let mut accepted = Vec::new();
    for r in &response.results {
        if r.errors.is_empty() {
            let what = if r.existing {
                "already exists"
            } else {
                "submitted"
            };
            println!("workload {}/{} {what} (id {})", r.namespace, r.name, r.id);
            accepted.push((r.namespace.clone(), r.name.clone()));
        } else {
            code = 1;
            for e in &r.errors {
                eprintln!("error: {}", field_error_line(e));
            }
        }
    }
    if args.wait {
        let deadline = args.timeout.map(|t| tokio::time::Instant::now() + t);
        for (namespace, name) in accepted {
            let waited = tokio::select! {
                w = wait_admitted(c, &namespace, &name, deadline, args.timeout, args.unreachable_timeout) => w?,
                _ = tokio::signal::ctrl_c() => Waited::Interrupted,
            };
            match waited {
                Waited::Holds(line) => println!("{line}"),
                Waited::Ended(why) => {
                    eprintln!("error: {why}");
                    code = 1;
                }
                Waited::Interrupted => {
                    eprintln!(
                        "interrupted: {namespace}/{name} stays queued (`fleetq cancel {name} -n {namespace}` withdraws it)"
                    );
                    return Ok(INTERRUPTED);
                }
            }
        }
    }
    Ok(code)
}

/// How a wait ended.
enum Waited {
    /// Admitted, running or succeeded: the line to print.
    Holds(String),
    /// Failed, cancelled or timed out: why.
    Ended(String),
    Interrupted,
}

/// What `--wait` shows while it waits: a spinner on a terminal, else one
/// line on stderr whenever the state, position or reason changes. Clears
/// the spinner when dropped (also when the wait is cut short).
struct Progress {
    spinner: Option<ProgressBar>,
    last: String,
}

impl Progress {
    fn new(first: &str) -> Progress {
        use std::io::IsTerminal;
        let spinner = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            // wide_msg: cut to the terminal's width, so the line never wraps.
            if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}") {
                bar.set_style(style);
            }
            bar.set_message(first.to_string());
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Progress {
            spinner,
            last: String::new(),
        }
    }

    fn show(&mut self, line: String) {
        if line == self.last {
            return;
        }
        match &self.spinner {
            Some(bar) => bar.set_message(line.clone()),
            None => eprintln!("{line}"),
        }
        self.last = line;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
    }
}

/// "position 2 of 5 in ClusterQueue team-a: <reason>", for a pending workload.
fn pending_text(w: &pb::WorkloadStatus, queued: Option<u64>) -> String {
    let position = match (w.position, queued) {
        (0, _) => "not yet in the admission order".to_string(),
        (p, Some(n)) if n >= p => format!("position {p} of {n}"),
        (p, _) => format!("position {p}"),
    };
    let reason = match (w.reason_kind.as_str(), w.reason.as_str()) {
        (_, "") => "waiting for the scheduler".to_string(),
        ("", r) => r.to_string(),
        (k, r) => format!("{k}: {r}"),
    };
    format!("{position} in ClusterQueue {}: {reason}", w.cluster_queue)
}

/// Follows one workload until it holds quota, ends, or `deadline` passes.
async fn wait_admitted(
    c: &mut Client,
    namespace: &str,
    name: &str,
    deadline: Option<tokio::time::Instant>,
    timeout: Option<Duration>,
    unreachable_timeout: Duration,
) -> Result<Waited, String> {
    let mut progress = Progress::new(&format!("{namespace}/{name}: asking for its state"));
    // Since when no node has answered (None while they do).
    let mut unanswered_since: Option<tokio::time::Instant> = None;
    let mut last_pending = String::from("its state is not known yet");
    // A tenant may not see a whole ClusterQueue (other namespaces queue
    // there too): asked once, then the position alone.
    let mut may_count = true;
    let timed_out = |last_pending: &str| {
        Waited::Ended(format!(
            "timed out after {}: {namespace}/{name} is still Pending, {last_pending}",
            timeout.map_or_else(String::new, fleetq_model::time::format_duration)
        ))
    };
    loop {
        let ask = c.get_workload(pb::WorkloadRef {
            namespace: namespace.into(),
            name: name.into(),
            with_spec: false,
        });
        let reply = match deadline {
            None => ask.await,
            Some(d) => match tokio::time::timeout_at(d, ask).await {
                Ok(reply) => reply,
                Err(_) => return Ok(timed_out(&last_pending)),
            },
        };
        if reply.is_ok() {
            unanswered_since = None;
        }
        match reply {
            Ok(w) => {
                let w = w.into_inner();
                let on = if w.cluster.is_empty() {
                    String::new()
                } else {
                    format!(" on cluster {}", w.cluster)
                };
                match w.state.as_str() {
                    "Pending" => {
                        // The queue's length, for "position 2 of 5"; the
                        // workload's own position is enough without it.
                        let mut queued = None;
                        if may_count {
                            let ask = c.pending_workloads(pb::PendingWorkloadsRequest {
                                cluster_queue: w.cluster_queue.clone(),
                                limit: 1,
                                ..Default::default()
                            });
                            match tokio::time::timeout(Duration::from_secs(2), ask).await {
                                Ok(Ok(r)) => queued = Some(r.into_inner().total),
                                Ok(Err(s)) if s.code() == tonic::Code::PermissionDenied => {
                                    may_count = false
                                }
                                _ => {}
                            }
                        }
                        last_pending = pending_text(&w, queued);
                        progress.show(format!("{namespace}/{name}: Pending, {last_pending}"));
                    }
                    "Admitted" | "Running" | "Succeeded" => {
                        let line = format!("{namespace}/{name}: {}{on}", w.state);
                        progress.show(line.clone());
                        return Ok(Waited::Holds(line));
                    }
                    state => {
                        // Failed or Cancelled: the reason, or the last event.
                        let why = if w.reason.is_empty() {
                            w.history
                                .last()
                                .map(|e| e.message.clone())
                                .unwrap_or_default()
                        } else {
                            w.reason.clone()
                        };
                        progress.show(format!("{namespace}/{name}: {state}{on}"));
                        return Ok(Waited::Ended(if why.is_empty() {
                            format!("{namespace}/{name} {state}{on}")
                        } else {
                            format!("{namespace}/{name} {state}{on}: {why}")
                        }));
                    }
                }
            }
            // The group may be electing a leader: keep asking.
            Err(s)
                if matches!(
                    s.code(),
                    tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::DeadlineExceeded
                ) =>
            {
                let since = *unanswered_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= unreachable_timeout {
                    return Ok(Waited::Ended(format!(
                        "no node of the group has answered for {} ({}); {namespace}/{name} may still be queued: `fleetq get workload {name} -n {namespace}` once the group is back",
                        fleetq_model::time::format_duration(unreachable_timeout),
                        client::status_line(&s)
                    )));
                }
                progress.show(format!(
                    "{namespace}/{name}: asking again ({})",
                    client::status_line(&s)
                ));
            }
            Err(s) => return Err(client::status_line(&s)),
        }
        let now = tokio::time::Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(timed_out(&last_pending));
        }
        let pause = Duration::from_millis(250);
        let pause = deadline.map_or(pause, |d| pause.min(d.saturating_duration_since(now)));
        tokio::time::sleep(pause).await;
    }
}
