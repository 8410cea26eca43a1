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
    /// lq (localqueues), pc (workloadpriorityclasses), topology
    /// (topologies), workloads (wl),
    /// clusters, pending (pending workloads in admission order: needs
    /// --cluster-queue or --local-queue).
    #[arg(value_parser = kinds(), ignore_case = true, hide_possible_values = true)]
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
    #[command(flatten)]
    pub pending: super::pending::PendingArgs,
}

/// The kinds `get` lists, by their short names (what shell completion
/// offers, with what each is), each also accepted by its Kueue names.
/// Parses to the name as typed, which `get` matches on.
fn kinds() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue as V;
    clap::builder::PossibleValuesParser::new([
        V::new("cq")
            .help("ClusterQueues")
            .aliases(["clusterqueue", "clusterqueues", "cqs"]),
        V::new("cohort").help("Cohorts").alias("cohorts"),
        V::new("flavor").help("ResourceFlavors").aliases([
            "flavors",
            "resourceflavor",
            "resourceflavors",
            "rf",
        ]),
        V::new("lq").help("LocalQueues").aliases([
            "localqueue",
            "localqueues",
            "lqs",
            "queue",
            "queues",
        ]),
        V::new("pc").help("WorkloadPriorityClasses").aliases([
            "workloadpriorityclass",
            "workloadpriorityclasses",
            "priorityclass",
            "wpc",
        ]),
        V::new("topology")
            .help("Topologies (Kueue TAS levels)")
            .aliases(["topologies", "topo"]),
        V::new("workloads")
            .help("Workloads")
            .aliases(["workload", "wl", "wls"]),
        V::new("clusters").help("Clusters").alias("cluster"),
        V::new("pending")
            .help("Pending workloads in admission order")
            .aliases(["pendingworkloads", "pendingworkload"]),
    ])
}

pub fn run(server: &str, args: &GetArgs) -> ExitCode {
    let result = client::block_on(async {
        super::pending::check_flags(args)?;
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
        kind if super::pending::is_pending(kind) => super::pending::get(c, args).await,
        "workloads" | "workload" | "wl" | "wls" => {
            let mut list = if let Some(name) = &args.name {
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
            if args.output == Output::Wide {
                fill_positions(c, &mut list).await;
            }
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
                    "unknown kind {:?}; use cq, cohort, flavor, lq, pc, topology, workloads, clusters or pending",
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
                        view::shorten_reason(&w.reason, 90),
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
        Output::Wide => {
            print_workloads_wide(list);
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

/// `-o wide`: the table plus priority class, position, epoch, flavors,
/// requests and the whole reason.
fn print_workloads_wide(list: &[pb::WorkloadStatus]) {
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_string()
        }
    };
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|w| {
            let flavors: Vec<String> = w
                .flavors
                .iter()
                .map(|p| {
                    let f: Vec<String> =
                        p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                    format!("{}: {}", p.name, f.join(","))
                })
                .collect();
            let reason = match (w.reason_kind.as_str(), w.reason.as_str()) {
                (_, "") => "-".to_string(),
                ("", r) => r.to_string(),
                (k, r) => format!("{k}: {r}"),
            };
            vec![
                w.namespace.clone(),
                w.name.clone(),
                w.queue.clone(),
                w.cluster_queue.clone(),
                w.priority.to_string(),
                dash(&w.priority_class),
                w.state.clone(),
                if w.position == 0 {
                    "-".into()
                } else {
                    w.position.to_string()
                },
                dash(&w.cluster),
                if w.epoch == 0 {
                    "-".into()
                } else {
                    w.epoch.to_string()
                },
                dash(&flavors.join("; ")),
                dash(&w.requests),
                view::age(w.created_at_ms),
                reason,
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
            "PRIORITYCLASS",
            "STATE",
            "POSITION",
            "CLUSTER",
            "EPOCH",
            "FLAVORS",
            "REQUESTS",
            "AGE",
            "REASON",
        ],
        &rows,
    );
}

/// Listing leaves queue positions out (each costs its ClusterQueue's
/// admission order); `-o wide` asks PendingWorkloads for them, once per
/// ClusterQueue with a pending workload listed.
async fn fill_positions(c: &mut Client, list: &mut [pb::WorkloadStatus]) {
    let queues: std::collections::BTreeSet<String> = list
        .iter()
        .filter(|w| w.state == "Pending" && w.position == 0)
        .map(|w| w.cluster_queue.clone())
        .collect();
    let mut positions = std::collections::HashMap::new();
    for cluster_queue in queues {
        let request = pb::PendingWorkloadsRequest {
            cluster_queue,
            ..Default::default()
        };
        // Without an answer the column just shows "-".
        if let Ok(r) = c.pending_workloads(request).await {
            positions.extend(r.into_inner().workloads.iter().map(|w| (w.id, w.position)));
        }
    }
    for w in list.iter_mut().filter(|w| w.position == 0) {
        if let Some(p) = positions.get(&w.id) {
            w.position = *p;
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
        Output::Wide => {
            print_clusters_wide(list);
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

/// `-o wide`: lease policy, labels and one ASSIGNED/CAPACITY column per
/// flavor and resource.
fn print_clusters_wide(list: &[pb::ClusterStatus]) {
    let columns: std::collections::BTreeSet<(&str, &str)> = list
        .iter()
        .flat_map(|c| c.capacity.iter())
        .map(|f| (f.flavor.as_str(), f.resource.as_str()))
        .collect();
    let mut header: Vec<String> = ["NAME", "STATE", "WORKLOADS", "LEASE-POLICY", "LABELS"]
        .map(String::from)
        .to_vec();
    header.extend(columns.iter().map(|(f, r)| format!("{f}/{r}")));
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|c| {
            let labels: Vec<String> = c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut row = vec![
                c.name.clone(),
                c.state.clone(),
                c.workloads.to_string(),
                c.lease_policy.clone(),
                if labels.is_empty() {
                    "-".into()
                } else {
                    labels.join(",")
                },
            ];
            row.extend(columns.iter().map(|(flavor, resource)| {
                c.capacity
                    .iter()
                    .find(|f| f.flavor == *flavor && f.resource == *resource)
                    .map(|f| format!("{}/{}", f.assigned, f.capacity))
                    .unwrap_or_else(|| "-".into())
            }));
            row
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    view::print_table(&header, &rows);
}

/// `get cq -o wide`: usage/nominal, borrowed and lent per flavor and
/// resource (zero amounts left out).
fn cluster_queue_wide_cells(status: Option<&pb::ClusterQueueStatus>) -> Vec<String> {
    let Some(s) = status else {
        return vec!["-".into(), "-".into(), "-".into()];
    };
    let list = |cell: &dyn Fn(&pb::ResourceUsage) -> Option<String>| {
        let parts: Vec<String> = s
            .resources
            .iter()
            .filter_map(|r| cell(r).map(|v| format!("{}/{}: {v}", r.flavor, r.resource)))
            .collect();
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(", ")
        }
    };
    let nonzero = |q: &str| (!q.is_empty() && q != "0").then(|| q.to_string());
    vec![
        list(&|r| Some(format!("{}/{}", r.usage, r.nominal))),
        list(&|r| nonzero(&r.borrowed)),
        list(&|r| nonzero(&r.lent)),
    ]
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
    if !output.is_table() {
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
                let mut row = vec![
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
                ];
                if output == Output::Wide {
                    row.extend(cluster_queue_wide_cells(status.as_ref()));
                }
                rows.push(row);
            }
            let mut header = vec!["NAME", "COHORT", "STRATEGY", "PENDING", "ADMITTED"];
            if output == Output::Wide {
                header.extend(["USAGE/NOMINAL", "BORROWED", "LENT"]);
            }
            (header, rows)
        }
        "Cohort" => (
            vec!["NAME", "PARENT"],
            values
                .iter()
                .map(|v| vec![text(v, &["name"]), text(v, &["spec", "parentName"])])
                .collect(),
        ),
        "Topology" => (
            vec!["NAME", "LEVELS"],
            values.iter().map(topology_row).collect(),
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

/// A Topology's table row: its name and its levels, broadest first.
fn topology_row(v: &Value) -> Vec<String> {
    let levels: Vec<&str> = v
        .pointer("/spec/levels")
        .and_then(Value::as_array)
        .map(|levels| {
            levels
                .iter()
                .filter_map(|l| l.get("nodeLabel").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    vec![text(v, &["name"]), levels.join(", ")]
}
