//! `fleetq submit`: queue a workload from flags or YAML, optionally
//! waiting until it is admitted.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fleetq_model::config::Object;
use fleetq_model::workload::{PodSet, RunSpec, WorkloadSpec};
use fleetq_model::{Quantity, Workload};
use fleetq_proto::v1 as pb;

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
    #[arg(long, required_unless_present = "files")]
    pub queue: Option<String>,
    /// Workload name (unique in the namespace).
    #[arg(long, required_unless_present = "files")]
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
    #[arg(long)]
    pub priority_class: Option<String>,
    /// Wait, showing position and state, until it is admitted (or ends).
    #[arg(long)]
    pub wait: bool,
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
                Ok(q) => {
                    requests.insert(res.to_string(), q);
                }
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
        submit(&mut c, workloads, args.wait).await
    })
    .and_then(|r| r);
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn submit(c: &mut Client, workloads: Vec<Workload>, wait: bool) -> Result<bool, String> {
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
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            }
            Err(s) => return Err(client::status_line(&s)),
        }
    };
    let mut ok = true;
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
            ok = false;
            for e in &r.errors {
                eprintln!("error: {}", field_error_line(e));
            }
        }
    }
    if wait {
        for (namespace, name) in accepted {
            wait_admitted(c, &namespace, &name).await?;
        }
    }
    Ok(ok)
}

/// Follows one workload's state until it holds quota or ends.
async fn wait_admitted(c: &mut Client, namespace: &str, name: &str) -> Result<(), String> {
    let mut last = String::new();
    loop {
        let w = c
            .get_workload(pb::WorkloadRef {
                namespace: namespace.into(),
                name: name.into(),
            })
            .await
            .map_err(|s| client::status_line(&s))?
            .into_inner();
        let line = if w.state == "Pending" {
            format!(
                "{namespace}/{name}: Pending, position {} in ClusterQueue {}{}",
                w.position,
                w.cluster_queue,
                if w.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", w.reason)
                }
            )
        } else {
            format!(
                "{namespace}/{name}: {}{}",
                w.state,
                if w.cluster.is_empty() {
                    String::new()
                } else {
                    format!(" on cluster {}", w.cluster)
                }
            )
        };
        if line != last {
            println!("{line}");
            last = line;
        }
        if w.state != "Pending" {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
