//! `fleetq get KIND [NAME]`: list objects, workloads and clusters.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use fleetq_model::config::Object;
use fleetq_model::kueue::export::{self, QueueStatus, UsageCell};
use fleetq_model::{LocalQueue, Quantity};
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
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::object_names))]
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
    /// Workloads only: just those this user submitted (a tenant's name,
    /// as the server recorded it; Slurm's `squeue -u`).
    #[arg(short = 'u', long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// After the list, print each change as it happens, a row per object
    /// that changes or appears and a line per one deleted (workloads:
    /// with -o fleetq-json, a JSON line), until interrupted.
    #[arg(short = 'w', long)]
    pub watch: bool,
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
        V::new("wpc")
            .help("WorkloadPriorityClasses")
            .aliases(["workloadpriorityclass", "workloadpriorityclasses"]),
        V::new("pc")
            .help("PriorityClasses (scheduling.k8s.io)")
            .aliases(["priorityclass", "priorityclasses"]),
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
        "workloads" | "workload" | "wl" | "wls" if args.watch => watch_workloads(c, args).await,
        _ if args.watch => watch_table(c, args).await,
        "workloads" | "workload" | "wl" | "wls" => {
            // Kueue's Workload needs the whole spec; other outputs do not.
            let kueue_shaped = matches!(args.output, Output::Json | Output::Yaml);
            let mut list = if let Some(name) = &args.name {
                let w = c
                    .get_workload(pb::WorkloadRef {
                        namespace: args.namespace.clone(),
                        name: name.clone(),
                        with_spec: kueue_shaped,
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
                    with_spec: kueue_shaped,
                    submitted_by: args.user.clone().unwrap_or_default(),
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
            let kind = fleetq_server::api::service::canonical_kind(kind).ok_or_else(|| {
                format!(
                    "unknown kind {:?}; use cq, cohort, flavor, lq, wpc, pc, topology, workloads, clusters or pending",
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
                None => list_kind(c, kind, args).await?,
            };
            let values: Vec<Value> = objects
                .iter()
                .filter_map(|o| serde_json::from_str(o).ok())
                .collect();
            print_objects(c, kind, &values, args.output, args.name.is_some()).await
        }
    }
}

const TABLE_HEADER: [&str; 9] = [
    "NAMESPACE",
    "NAME",
    "QUEUE",
    "CLUSTERQUEUE",
    "PRIORITY",
    "STATE",
    "CLUSTER",
    "AGE",
    "REASON",
];

/// A workload's row of the default table.
fn table_row(w: &pb::WorkloadStatus) -> Vec<String> {
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
        // Whole: the table is fitted to the terminal, if there is one.
        w.reason.clone(),
    ]
}

/// `get workloads -w`: the server's watch, which sends every selected
/// workload first and then each one that changes. Rows keep the
/// header's column widths (each at least as wide as its header, names
/// wider), as kubectl's watch does, so they line up as they come.
async fn watch_workloads(c: &mut Client, args: &GetArgs) -> Result<(), String> {
    let as_json = match args.output {
        Output::Table => false,
        Output::FleetqJson => true,
        other => {
            return Err(format!(
                "--watch prints a table or, with -o fleetq-json, a JSON line per change; not -o {}",
                clap::ValueEnum::to_possible_value(&other)
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default()
            ))
        }
    };
    let mut stream = c
        .watch_workloads(pb::ListWorkloadsRequest {
            namespace: args.namespace.clone(),
            all_namespaces: args.all_namespaces,
            cluster_queue: String::new(),
            state: args.state.clone().unwrap_or_default(),
            limit: 0,
            with_spec: false,
            submitted_by: args.user.clone().unwrap_or_default(),
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    let widths = [12, 24, 12, 14, 8, 10, 12, 6, 0];
    let line = |cells: &[String]| view::format_row(cells, &widths);
    if !as_json {
        let header: Vec<String> = TABLE_HEADER.iter().map(|h| h.to_string()).collect();
        println!("{}", line(&header));
    }
    loop {
        let next = stream
            .message()
            .await
            .map_err(|s| client::status_line(&s))?;
        let Some(w) = next else {
            return Err("the server ended the watch (it may have restarted); run it again".into());
        };
        if args.name.as_ref().is_some_and(|n| *n != w.name) {
            continue;
        }
        let mut row = table_row(&w);
        if let (Some(width), Some(reason)) = (view::output_width(), row.last_mut()) {
            // The reason gets what the fixed columns leave of the line.
            let before: usize = widths.iter().map(|w| w + 3).sum();
            *reason = view::shorten_reason(reason, width.saturating_sub(before).max(24));
        }
        if as_json {
            let view = WorkloadView::from(&w);
            println!(
                "{}",
                serde_json::to_string(&view).map_err(|e| e.to_string())?
            );
        } else {
            println!("{}", line(&row));
        }
    }
}

/// How often `get KIND -w` asks again for kinds the server has no watch
/// stream for (configuration objects, clusters).
const WATCH_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// `get KIND -w` for every kind but workloads: the table once, then a row
/// for each object that changes (or appears) and a line for each that
/// goes, as kubectl's watch prints them, until interrupted.
async fn watch_table(c: &mut Client, args: &GetArgs) -> Result<(), String> {
    if args.output != Output::Table {
        return Err("--watch prints a table for this kind; leave out -o".into());
    }
    let mut last: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut widths: Option<Vec<usize>> = None;
    loop {
        let (header, rows) = watch_rows(c, args).await?;
        let key = |row: &Vec<String>| {
            // LocalQueues are named by namespace and name.
            let n = if header.first() == Some(&"NAMESPACE") {
                2
            } else {
                1
            };
            row.iter().take(n).cloned().collect::<Vec<_>>().join("/")
        };
        match &widths {
            None => {
                let text = view::format_table(&header, &rows);
                print!("{text}");
                widths = Some(view::column_widths(&header, &rows));
            }
            Some(w) => {
                for row in &rows {
                    if last.get(&key(row)) != Some(row) {
                        println!("{}", view::format_row(row, w));
                    }
                }
                let now: std::collections::BTreeSet<String> = rows.iter().map(key).collect();
                for gone in last.keys().filter(|k| !now.contains(*k)) {
                    println!("{gone} deleted");
                }
            }
        }
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        last = rows.iter().map(|r| (key(r), r.clone())).collect();
        tokio::time::sleep(WATCH_POLL).await;
    }
}

/// The current header and rows of `get KIND [NAME]` (not workloads).
async fn watch_rows(
    c: &mut Client,
    args: &GetArgs,
) -> Result<(Vec<&'static str>, Vec<Vec<String>>), String> {
    let status = |s: tonic::Status| client::status_line(&s);
    let kind = args.kind.to_ascii_lowercase();
    if matches!(kind.as_str(), "clusters" | "cluster") {
        let list: Vec<pb::ClusterStatus> = c
            .list_clusters(pb::ListClustersRequest {})
            .await
            .map_err(status)?
            .into_inner()
            .clusters
            .into_iter()
            .filter(|cl| args.name.as_ref().is_none_or(|n| &cl.name == n))
            .collect();
        return Ok((CLUSTER_HEADER.to_vec(), cluster_rows(&list)));
    }
    let kind = fleetq_server::api::service::canonical_kind(&kind).ok_or_else(|| {
        format!(
            "--watch follows workloads, clusters and configuration kinds, not {:?}",
            args.kind
        )
    })?;
    let objects = list_kind(c, kind, args).await?;
    let values: Vec<Value> = objects
        .iter()
        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
        .filter(|v| args.name.as_ref().is_none_or(|n| text(v, &["name"]) == *n))
        .collect();
    Ok(object_table(c, kind, &values, Output::Table).await)
}

/// Every object of `kind` (a Kueue kind) in the namespace `get` was
/// given (all of them with -A), as the server's JSON.
async fn list_kind(c: &mut Client, kind: &str, args: &GetArgs) -> Result<Vec<String>, String> {
    Ok(c.list_objects(pb::ListObjectsRequest {
        kind: kind.into(),
        namespace: if args.all_namespaces {
            String::new()
        } else {
            args.namespace.clone()
        },
    })
    .await
    .map_err(|s| client::status_line(&s))?
    .into_inner()
    .objects_json)
}

fn print_workloads(
    list: &[pb::WorkloadStatus],
    output: Output,
    single: bool,
) -> Result<(), String> {
    match output {
        Output::Table => {
            let rows: Vec<Vec<String>> = list.iter().map(table_row).collect();
            view::print_table(&TABLE_HEADER, &rows);
            Ok(())
        }
        Output::Wide => {
            print_workloads_wide(list);
            Ok(())
        }
        Output::Json | Output::Yaml => view::print_structured(
            &super::kueue_workloads::kueue_workloads(list, single)?,
            output,
        ),
        Output::FleetqJson => {
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
                dash(&w.submitted_by),
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
            "USER",
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

const CLUSTER_HEADER: [&str; 4] = ["NAME", "STATE", "WORKLOADS", "ASSIGNED/CAPACITY"];

/// `get clusters`' rows.
fn cluster_rows(list: &[pb::ClusterStatus]) -> Vec<Vec<String>> {
    list.iter()
        .map(|c| {
            let capacity: Vec<String> = c
                .capacity
                .iter()
                .map(|f| format!("{}/{}: {}/{}", f.flavor, f.resource, f.assigned, f.capacity))
                .collect();
            vec![
                c.name.clone(),
                c.state.clone(),
                c.workloads.to_string(),
                capacity.join(", "),
            ]
        })
        .collect()
}

fn print_clusters(list: &[pb::ClusterStatus], output: Output) -> Result<(), String> {
    match output {
        Output::Table => {
            view::print_table(&CLUSTER_HEADER, &cluster_rows(list));
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
        return print_kueue_objects(c, values, output, single).await;
    }
    let (header, rows) = object_table(c, kind, values, output).await;
    if rows.is_empty() {
        println!("No {kind} objects.");
        return Ok(());
    }
    view::print_table(&header, &rows);
    Ok(())
}

/// The table `get KIND` prints for configuration objects: its header and
/// a row per object.
async fn object_table(
    c: &mut Client,
    kind: &str,
    values: &[Value],
    output: Output,
) -> (Vec<&'static str>, Vec<Vec<String>>) {
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
        "PriorityClass" => (
            vec!["NAME", "VALUE", "GLOBAL-DEFAULT", "DESCRIPTION"],
            values
                .iter()
                .map(|v| {
                    vec![
                        text(v, &["name"]),
                        text(v, &["value"]),
                        v.get("global_default")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                            .to_string(),
                        text(v, &["description"]),
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
    (header, rows)
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

/// `-o json|yaml` of the configuration kinds: each object as Kueue writes
/// it (`fleetq_model::kueue::export`), so that what is printed applies
/// back unchanged; ClusterQueues and LocalQueues with their `status`. One
/// object asked for by name prints alone, anything else as a `v1 List`,
/// as `kubectl get` prints them.
async fn print_kueue_objects(
    c: &mut Client,
    values: &[Value],
    output: Output,
    single: bool,
) -> Result<(), String> {
    let objects = values
        .iter()
        .map(|v| {
            serde_json::from_value::<Object>(v.clone())
                .map_err(|e| format!("the server sent an object this CLI cannot read: {e}"))
        })
        .collect::<Result<Vec<Object>, String>>()?;
    let mut workloads = LocalQueueWorkloads::default();
    let mut items = Vec::with_capacity(objects.len());
    for object in &objects {
        items.push(match object {
            Object::ClusterQueue(cq) => {
                let status = cluster_queue_status(c, &cq.name).await;
                export::cluster_queue(cq, status.as_ref())
            }
            Object::LocalQueue(lq) => {
                let status = workloads.status_of(c, lq).await;
                export::local_queue(lq, status.as_ref())
            }
            other => export::object(other),
        });
    }
    if single && items.len() == 1 {
        view::print_structured(&items[0], output)
    } else {
        view::print_structured(&export::list(items), output)
    }
}

/// A ClusterQueue's `status` from DescribeClusterQueue (what `get cq`
/// shows): its pending and admitted counts and its usage per flavor and
/// resource, in its quota order. `None` when the server does not answer.
async fn cluster_queue_status(c: &mut Client, name: &str) -> Option<QueueStatus> {
    let s = c
        .describe_cluster_queue(pb::ClusterQueueRef {
            name: name.to_string(),
        })
        .await
        .ok()?
        .into_inner();
    let quantity = |q: &str| q.parse::<Quantity>().unwrap_or_default();
    Some(QueueStatus {
        pending_workloads: s.pending,
        // No admission checks: a reservation is an admission.
        reserving_workloads: s.admitted,
        admitted_workloads: s.admitted,
        usage: s
            .resources
            .iter()
            .map(|r| UsageCell {
                flavor: r.flavor.clone(),
                resource: r.resource.clone(),
                total: quantity(&r.usage),
                borrowed: Some(quantity(&r.borrowed)),
            })
            .collect(),
    })
}

/// The workloads of each namespace, listed once for all its LocalQueues.
#[derive(Default)]
struct LocalQueueWorkloads {
    /// Namespace -> its workloads; `None` where listing them failed.
    by_namespace: std::collections::HashMap<String, Option<Vec<pb::WorkloadStatus>>>,
}

impl LocalQueueWorkloads {
    /// `lq`'s `status`: its pending and admitted workloads, and what the
    /// admitted ones use per flavor and resource. `None` when its
    /// namespace's workloads cannot be listed.
    async fn status_of(&mut self, c: &mut Client, lq: &LocalQueue) -> Option<QueueStatus> {
        if !self.by_namespace.contains_key(&lq.namespace) {
            let listed = c
                .list_workloads(pb::ListWorkloadsRequest {
                    namespace: lq.namespace.clone(),
                    ..Default::default()
                })
                .await
                .ok()
                .map(|r| r.into_inner().workloads);
            self.by_namespace.insert(lq.namespace.clone(), listed);
        }
        let workloads = self.by_namespace.get(&lq.namespace)?.as_ref()?;
        Some(local_queue_status(lq, workloads))
    }
}

/// Counts and usage of `lq` from its namespace's workloads, as
/// `QueueStatus::of_local_queue` counts them from the ledger's: pending
/// ones are pending, admitted or running ones with a reservation are
/// reserving and admitted, and each assigned pod set adds a pod's
/// requests times its admitted count to the flavor of each resource.
fn local_queue_status(lq: &LocalQueue, workloads: &[pb::WorkloadStatus]) -> QueueStatus {
    let mut status = QueueStatus::default();
    let mut usage: BTreeMap<(String, String), Quantity> = BTreeMap::new();
    let ours = workloads
        .iter()
        .filter(|w| w.namespace == lq.namespace && w.queue == lq.name);
    for w in ours {
        match w.state.as_str() {
            "Pending" => status.pending_workloads += 1,
            "Admitted" | "Running" if !w.flavors.is_empty() => {
                status.reserving_workloads += 1;
                status.admitted_workloads += 1;
                let requests = pod_requests(&w.requests);
                // Assignments list the pod sets in the spec's order, as
                // the requests summary does.
                for (assigned, per_pod) in w.flavors.iter().zip(&requests) {
                    for (resource, amount) in per_pod {
                        let Some(flavor) = assigned.flavors.get(resource) else {
                            continue;
                        };
                        let total = amount.saturating_mul(u64::from(assigned.count));
                        let cell = usage.entry((flavor.clone(), resource.clone())).or_default();
                        *cell = cell.saturating_add(total);
                    }
                }
            }
            _ => {}
        }
    }
    status.usage = UsageCell::from_totals(usage);
    status
}

/// A pod's requests per pod set from WorkloadStatus's `requests` summary
/// (`"nvidia.com/gpu: 2, cpu: 8 x 4; cpu: 1 x 1"`: per pod set, a pod's
/// requests and the pod count); what does not read as a quantity is
/// left out.
fn pod_requests(summary: &str) -> Vec<Vec<(String, Quantity)>> {
    if summary.is_empty() {
        return Vec::new();
    }
    summary
        .split("; ")
        .map(|pod_set| {
            let requests = pod_set.rsplit_once(" x ").map_or(pod_set, |(r, _)| r);
            requests
                .split(", ")
                .filter_map(|r| {
                    let (name, amount) = r.split_once(": ")?;
                    Some((name.trim().to_string(), amount.trim().parse().ok()?))
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn a_requests_summary_reads_back_per_pod_set() {
        assert_eq!(
            pod_requests("nvidia.com/gpu: 2, cpu: 8 x 4; cpu: 500m x 1; x 3"),
            vec![
                vec![("nvidia.com/gpu".into(), q("2")), ("cpu".into(), q("8"))],
                vec![("cpu".into(), q("500m"))],
                vec![],
            ]
        );
        assert!(pod_requests("").is_empty());
    }

    #[test]
    fn a_local_queue_counts_its_own_workloads() {
        let lq: LocalQueue = serde_json::from_value(serde_json::json!({
            "namespace": "default", "name": "team-a", "spec": {"clusterQueue": "team-a"}
        }))
        .unwrap();
        let w = |name: &str, queue: &str, state: &str, admitted: bool| pb::WorkloadStatus {
            namespace: "default".into(),
            name: name.into(),
            queue: queue.into(),
            state: state.into(),
            requests: "nvidia.com/gpu: 2 x 2; cpu: 1 x 1".into(),
            flavors: if admitted {
                vec![
                    pb::PodSetFlavors {
                        name: "main".into(),
                        count: 2,
                        flavors: [("nvidia.com/gpu".into(), "h100".into())].into(),
                        nodes: Vec::new(),
                    },
                    pb::PodSetFlavors {
                        name: "launcher".into(),
                        count: 1,
                        flavors: [("cpu".into(), "cpu".into())].into(),
                        nodes: Vec::new(),
                    },
                ]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let list = [
            w("a", "team-a", "Running", true),
            w("b", "team-a", "Admitted", true),
            w("c", "team-a", "Pending", false),
            w("d", "team-b", "Running", true),
            w("e", "team-a", "Succeeded", false),
        ];
        let status = local_queue_status(&lq, &list);
        assert_eq!(status.pending_workloads, 1);
        assert_eq!(status.admitted_workloads, 2);
        assert_eq!(status.reserving_workloads, 2);
        let cells: Vec<(&str, &str, String)> = status
            .usage
            .iter()
            .map(|c| (c.flavor.as_str(), c.resource.as_str(), c.total.to_string()))
            .collect();
        assert_eq!(
            cells,
            vec![
                ("cpu", "cpu", "2".to_string()),
                ("h100", "nvidia.com/gpu", "8".to_string())
            ]
        );
    }
}
