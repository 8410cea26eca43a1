//! `fleetq get KIND [NAME]`: list objects, workloads and clusters.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;
use serde_json::Value;

use super::client::{self, Client};
use super::view::{self, Output, WorkloadView};

#[derive(Debug, Args)]
pub struct GetArgs {
    /// What to list: cq (clusterqueues), cohort, flavor (resourceflavors),
    /// lq (localqueues), pc (workloadpriorityclasses), workloads (wl),
    /// clusters.
    pub kind: String,
    /// One object by name (LocalQueues and workloads: in the namespace).
    pub name: Option<String>,
    /// Namespace of LocalQueues and workloads.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// All namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Workloads only: just those in this state (Pending, Admitted, ...).
    #[arg(long)]
    pub state: Option<String>,
}

pub fn run(server: &str, args: &GetArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        get(&mut c, args).await
    })
    .and_then(|r| r);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn get(c: &mut Client, args: &GetArgs) -> Result<(), String> {
    let status = |s: tonic::Status| client::status_line(&s);
    match args.kind.to_ascii_lowercase().as_str() {
        "workloads" | "workload" | "wl" | "wls" => {
            let list = if let Some(name) = &args.name {
                let w = c
                    .get_workload(pb::WorkloadRef {
                        namespace: args.namespace.clone(),
                        name: name.clone(),
                    })
                    .await
                    .map_err(status)?
                    .into_inner();
                vec![w]
            } else {
                c.list_workloads(pb::ListWorkloadsRequest {
                    namespace: args.namespace.clone(),
                    all_namespaces: args.all_namespaces,
                    cluster_queue: String::new(),
                    state: args.state.clone().unwrap_or_default(),
                    limit: 0,
                })
                .await
                .map_err(status)?
                .into_inner()
                .workloads
            };
            print_workloads(&list, args.output, args.name.is_some())
        }
        "clusters" | "cluster" => {
            let list = c
                .list_clusters(pb::ListClustersRequest {})
                .await
                .map_err(status)?
                .into_inner()
                .clusters;
            let list: Vec<_> = list
                .into_iter()
                .filter(|cl| args.name.as_ref().is_none_or(|n| &cl.name == n))
                .collect();
            if let Some(n) = &args.name {
                if list.is_empty() {
                    return Err(format!("not found: cluster {n:?} is not registered"));
                }
            }
            print_clusters(&list, args.output)
        }
        kind => {
            let kind = fleetq_server::api_service::canonical_kind(kind).ok_or_else(|| {
                format!(
                    "unknown kind {:?}; use cq, cohort, flavor, lq, pc, workloads or clusters",
                    args.kind
                )
            })?;
            let objects = match &args.name {
                Some(name) => {
                    let key = if kind == "LocalQueue" {
                        format!("{}/{name}", args.namespace)
                    } else {
                        name.clone()
                    };
                    c.get_object(pb::GetObjectRequest {
                        kind: kind.into(),
                        name: key,
                    })
                    .await
                    .map_err(status)?
                    .into_inner()
                    .objects_json
                }
                None => {
                    c.list_objects(pb::ListObjectsRequest {
                        kind: kind.into(),
                        namespace: if args.all_namespaces {
                            String::new()
                        } else {
                            args.namespace.clone()
                        },
                    })
                    .await
                    .map_err(status)?
                    .into_inner()
                    .objects_json
                }
            };
            let values: Vec<Value> = objects
                .iter()
                .filter_map(|o| serde_json::from_str(o).ok())
                .collect();
            print_objects(c, kind, &values, args.output, args.name.is_some()).await
        }
    }
}

fn print_workloads(
    list: &[pb::WorkloadStatus],
    output: Output,
    single: bool,
) -> Result<(), String> {
    match output {
        Output::Table => {
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|w| {
                    vec![
                        w.namespace.clone(),
                        w.name.clone(),
                        w.queue.clone(),
                        w.cluster_queue.clone(),
                        w.priority.to_string(),
                        w.state.clone(),
                        if w.cluster.is_empty() {
                            "-".into()
                        } else {
                            w.cluster.clone()
                        },
                        view::age(w.created_at_ms),
                        view::truncate(&w.reason, 90),
                    ]
                })
                .collect();
            view::print_table(
                &[
                    "NAMESPACE",
                    "NAME",
                    "QUEUE",
                    "CLUSTERQUEUE",
                    "PRIORITY",
                    "STATE",
                    "CLUSTER",
                    "AGE",
                    "REASON",
                ],
                &rows,
            );
            Ok(())
        }
        _ => {
            let views: Vec<WorkloadView> = list.iter().map(WorkloadView::from).collect();
            if single {
                view::print_structured(&views[0], output)
            } else {
                view::print_structured(&views, output)
            }
        }
    }
}

fn print_clusters(list: &[pb::ClusterStatus], output: Output) -> Result<(), String> {
    match output {
        Output::Table => {
            let rows: Vec<Vec<String>> = list
                .iter()
                .map(|c| {
                    let capacity: Vec<String> = c
                        .capacity
                        .iter()
                        .map(|f| {
                            format!("{}/{}: {}/{}", f.flavor, f.resource, f.assigned, f.capacity)
                        })
                        .collect();
                    vec![
                        c.name.clone(),
                        c.state.clone(),
                        c.workloads.to_string(),
                        capacity.join(", "),
                    ]
                })
                .collect();
            view::print_table(&["NAME", "STATE", "WORKLOADS", "ASSIGNED/CAPACITY"], &rows);
            Ok(())
        }
        _ => {
            let values: Vec<Value> = list
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "name": c.name,
                        "state": c.state,
                        "labels": c.labels,
                        "leasePolicy": c.lease_policy,
                        "workloads": c.workloads,
                        "capacity": c.capacity.iter().map(|f| serde_json::json!({
                            "flavor": f.flavor, "resource": f.resource,
                            "capacity": f.capacity, "assigned": f.assigned,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            view::print_structured(&values, output)
        }
    }
}

fn text(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "-".into(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

async fn print_objects(
    c: &mut Client,
    kind: &str,
    values: &[Value],
    output: Output,
    single: bool,
) -> Result<(), String> {
    if output != Output::Table {
        return if single && values.len() == 1 {
            view::print_structured(&values[0], output)
        } else {
            view::print_structured(&values, output)
        };
    }
    let (header, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        "ClusterQueue" => {
            let mut rows = Vec::new();
            for v in values {
                let name = text(v, &["name"]);
                let status = c
                    .describe_cluster_queue(pb::ClusterQueueRef { name: name.clone() })
                    .await
                    .map(|r| r.into_inner())
                    .ok();
                rows.push(vec![
                    name,
                    text(v, &["spec", "cohortName"]),
                    text(v, &["spec", "queueingStrategy"]),
                    status
                        .as_ref()
                        .map(|s| s.pending.to_string())
                        .unwrap_or_default(),
                    status
                        .as_ref()
                        .map(|s| s.admitted.to_string())
                        .unwrap_or_default(),
                ]);
            }
            (
                vec!["NAME", "COHORT", "STRATEGY", "PENDING", "ADMITTED"],
                rows,
            )
        }
        "Cohort" => (
            vec!["NAME", "PARENT"],
            values
                .iter()
                .map(|v| vec![text(v, &["name"]), text(v, &["spec", "parentName"])])
                .collect(),
        ),
        "ResourceFlavor" => (
            vec!["NAME", "NODE LABELS"],
            values
                .iter()
                .map(|v| vec![text(v, &["name"]), text(v, &["spec", "nodeLabels"])])
                .collect(),
        ),
        "LocalQueue" => (
            vec!["NAMESPACE", "NAME", "CLUSTERQUEUE"],
            values
                .iter()
                .map(|v| {
                    vec![
                        text(v, &["namespace"]),
                        text(v, &["name"]),
                        text(v, &["spec", "clusterQueue"]),
                    ]
                })
                .collect(),
        ),
        _ => (
            vec!["NAME", "VALUE", "DESCRIPTION"],
            values
                .iter()
                .map(|v| {
                    vec![
                        text(v, &["name"]),
                        text(v, &["value"]),
                        text(v, &["description"]),
                    ]
                })
                .collect(),
        ),
    };
    if rows.is_empty() {
        println!("No {kind} objects.");
        return Ok(());
    }
    view::print_table(&header, &rows);
    Ok(())
}
