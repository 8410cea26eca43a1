//! `fleetq describe workload|cq|cluster|topology NAME`: one object in detail.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client::{self, Client};
use super::view;

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// workload (wl), cq (clusterqueue), cluster or topology.
    pub kind: String,
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::object_names))]
    pub name: String,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

pub fn run(server: &str, args: &DescribeArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        describe(&mut c, args).await
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

fn time(ms: u64) -> String {
    if ms == 0 {
        return "-".into();
    }
    let secs = ms / 1000;
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    format!(
        "{h:02}:{m:02}:{s:02}.{:03} UTC ({} ago)",
        ms % 1000,
        view::age(ms)
    )
}

async fn describe(c: &mut Client, args: &DescribeArgs) -> Result<(), String> {
    let status = |s: tonic::Status| client::status_line(&s);
    match args.kind.to_ascii_lowercase().as_str() {
        "workload" | "workloads" | "wl" => {
            let w = c
                .get_workload(pb::WorkloadRef {
                    namespace: args.namespace.clone(),
                    name: args.name.clone(),
                    with_spec: false,
                })
                .await
                .map_err(status)?
                .into_inner();
            println!("Name:          {}/{}", w.namespace, w.name);
            println!("Id:            {}", w.id);
            println!(
                "Queue:         {} -> ClusterQueue {}",
                w.queue, w.cluster_queue
            );
            println!(
                "Priority:      {}{}",
                w.priority,
                match (w.priority_class.is_empty(), w.priority_source.is_empty()) {
                    (false, false) => format!(" ({} {})", w.priority_source, w.priority_class),
                    (false, true) => format!(" ({})", w.priority_class),
                    (true, false) => format!(" ({})", w.priority_source),
                    (true, true) => String::new(),
                }
            );
            if !w.submitted_by.is_empty() {
                println!("Submitted by:  {}", w.submitted_by);
            }
            println!("Requests:      {}", w.requests);
            // Said on every line, so nobody reads a stored request as a
            // placement guarantee.
            for request in &w.topology_requests {
                println!(
                    "Topology:      {request} ({})",
                    fleetq_model::topology::PLACEMENT_NOTE
                );
            }
            println!("State:         {}", w.state);
            if w.state == "Pending" {
                println!(
                    "Position:      {} in ClusterQueue {}",
                    w.position, w.cluster_queue
                );
                println!(
                    "Reason:        {}{}",
                    if w.reason_kind.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", w.reason_kind)
                    },
                    if w.reason.is_empty() {
                        "not yet considered by the scheduler"
                    } else {
                        &w.reason
                    }
                );
            } else if !w.reason.is_empty() {
                println!("Reason:        {}", w.reason);
            }
            if !w.cluster.is_empty() {
                println!("Cluster:       {} (epoch {})", w.cluster, w.epoch);
                for p in &w.flavors {
                    let f: Vec<String> =
                        p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
                    println!("Pod set:       {} x{}: {}", p.name, p.count, f.join(", "));
                    if !p.nodes.is_empty() {
                        println!("  Nodes:       {}", p.nodes.join(", "));
                    }
                }
            }
            println!("Created:       {}", time(w.created_at_ms));
            println!("History:");
            for e in &w.history {
                println!("  {}  {:<10} {}", time(e.at_ms), e.state, e.message);
            }
            Ok(())
        }
        "cq" | "clusterqueue" | "clusterqueues" => {
            let s = c
                .describe_cluster_queue(pb::ClusterQueueRef {
                    name: args.name.clone(),
                })
                .await
                .map_err(status)?
                .into_inner();
            println!("Name:      {}", s.name);
            println!(
                "Cohort:    {}",
                if s.cohort.is_empty() { "-" } else { &s.cohort }
            );
            println!("Pending:   {}", s.pending);
            println!("Admitted:  {}", s.admitted);
            if !s.reason.is_empty() {
                println!("Reason:    {}", s.reason);
            }
            println!();
            let rows: Vec<Vec<String>> = s
                .resources
                .iter()
                .map(|r| {
                    vec![
                        r.flavor.clone(),
                        r.resource.clone(),
                        r.nominal.clone(),
                        r.usage.clone(),
                        r.borrowed.clone(),
                        r.lent.clone(),
                        r.available.clone(),
                        r.pending.clone(),
                    ]
                })
                .collect();
            view::print_table(
                &[
                    "FLAVOR",
                    "RESOURCE",
                    "NOMINAL",
                    "USAGE",
                    "BORROWED",
                    "LENT",
                    "AVAILABLE",
                    "PENDING (ANY FLAVOR)",
                ],
                &rows,
            );
            Ok(())
        }
        "cluster" | "clusters" => {
            let s = c
                .get_cluster(pb::ClusterRef {
                    name: args.name.clone(),
                })
                .await
                .map_err(status)?
                .into_inner();
            println!("Name:          {}", s.name);
            println!("State:         {}", s.state);
            println!("Lease policy:  {}", s.lease_policy);
            println!("Workloads:     {}", s.workloads);
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("Labels:        {}", labels.join(", "));
            println!();
            let rows: Vec<Vec<String>> = s
                .capacity
                .iter()
                .map(|f| {
                    vec![
                        f.flavor.clone(),
                        f.resource.clone(),
                        f.capacity.clone(),
                        f.assigned.clone(),
                    ]
                })
                .collect();
            view::print_table(&["FLAVOR", "RESOURCE", "CAPACITY", "ASSIGNED"], &rows);
            if !s.nodes.is_empty() {
                println!();
                print_nodes(&s.nodes);
            }
            Ok(())
        }
        "topology" | "topologies" | "topo" => describe_topology(c, &args.name).await,
        other => Err(format!(
            "cannot describe {other:?}; use workload, cq, cluster or topology"
        )),
    }
}

/// A cluster's nodes, one row per node and resource: where fleetq placed
/// pods, and what is left there.
fn print_nodes(nodes: &[pb::ClusterNode]) {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .flat_map(|n| {
            let sorted: std::collections::BTreeMap<_, _> = n.labels.iter().collect();
            let labels: Vec<String> = sorted
                .into_iter()
                .filter(|(k, _)| k.as_str() != fleetq_model::topology::HOSTNAME_LABEL)
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let state = if n.unschedulable {
                "Unschedulable"
            } else {
                "Ready"
            };
            n.devices.iter().map(move |d| {
                vec![
                    n.name.clone(),
                    state.to_string(),
                    n.flavor.clone(),
                    d.resource.clone(),
                    d.capacity.clone(),
                    d.assigned.clone(),
                    labels.join(", "),
                ]
            })
        })
        .collect();
    view::print_table(
        &[
            "NODE",
            "STATE",
            "FLAVOR",
            "RESOURCE",
            "ALLOCATABLE",
            "ASSIGNED",
            "LABELS",
        ],
        &rows,
    );
}

/// A Topology: its levels, broadest first, and the flavors that name it.
async fn describe_topology(c: &mut Client, name: &str) -> Result<(), String> {
    let status = |s: tonic::Status| client::status_line(&s);
    let objects = c
        .get_object(pb::GetObjectRequest {
            kind: "Topology".into(),
            name: name.to_string(),
        })
        .await
        .map_err(status)?
        .into_inner()
        .objects_json;
    let topology = objects
        .first()
        .and_then(|o| serde_json::from_str::<fleetq_model::config::Object>(o).ok());
    let Some(fleetq_model::config::Object::Topology(topology)) = topology else {
        return Err(format!("the server sent no Topology {name:?}"));
    };
    let flavors = c
        .list_objects(pb::ListObjectsRequest {
            kind: "ResourceFlavor".into(),
            namespace: String::new(),
        })
        .await
        .map_err(status)?
        .into_inner()
        .objects_json;
    let users: Vec<String> = flavors
        .iter()
        .filter_map(|o| serde_json::from_str::<fleetq_model::config::Object>(o).ok())
        .filter_map(|o| match o {
            fleetq_model::config::Object::ResourceFlavor(f)
                if f.spec.topology_name.as_deref() == Some(topology.name.as_str()) =>
            {
                Some(f.name)
            }
            _ => None,
        })
        .collect();
    println!("Name:       {}", topology.name);
    println!(
        "Used by:    {}",
        if users.is_empty() {
            "-".to_string()
        } else {
            users
                .iter()
                .map(|u| format!("ResourceFlavor {u}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!("Placement:  {}", fleetq_model::topology::PLACEMENT_NOTE);
    println!();
    let rows: Vec<Vec<String>> = topology
        .labels()
        .enumerate()
        .map(|(i, label)| vec![i.to_string(), label.to_string()])
        .collect();
    view::print_table(&["LEVEL", "NODE LABEL"], &rows);
    Ok(())
}
