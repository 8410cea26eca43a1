//! `fleetq get pending`: the pending workloads of a ClusterQueue
//! (`--cluster-queue`) or of a LocalQueue (`-n NS --local-queue`) in the
//! order the ClusterQueue would admit them, with their positions and why
//! they wait (gRPC `PendingWorkloads`; the same list as the HTTP
//! visibility API).
//!
//! Positions here are 1-based (the HTTP API, like Kueue's, counts from
//! 0): POSITION is the place in the ClusterQueue, LQ-POSITION (`-o wide`,
//! `localQueuePosition` in JSON/YAML) the place among the workloads of
//! the same LocalQueue. `--offset` and `--limit` page over the selected
//! workloads; `total` counts them all.

use clap::Args;
use fleetq_proto::v1 as pb;
use serde::Serialize;

use super::client::{self, Client};
use super::get::GetArgs;
use super::view::{self, Output};

/// `get pending`'s own flags (flattened into `get`).
#[derive(Debug, Default, Args)]
#[command(next_help_heading = "Pending workloads (get pending)")]
pub struct PendingArgs {
    /// List the pending workloads of this ClusterQueue (every namespace).
    #[arg(long, value_name = "NAME", conflicts_with = "local_queue")]
    pub cluster_queue: Option<String>,
    /// List the pending workloads of this LocalQueue (in -n NAMESPACE).
    #[arg(long, value_name = "NAME")]
    pub local_queue: Option<String>,
    /// Show at most N of them [default: all].
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Skip the first M of them.
    #[arg(long, value_name = "M", allow_hyphen_values = true)]
    pub offset: Option<u32>,
}

/// The kinds `get` reads as "pending workloads".
pub fn is_pending(kind: &str) -> bool {
    matches!(
        kind.to_ascii_lowercase().as_str(),
        "pending" | "pendingworkloads" | "pendingworkload"
    )
}

/// Refuses flag combinations that make no sense, before connecting:
/// the pending flags with another kind, and for `get pending` a missing
/// queue, a NAME, `--state`, or `-A` with a LocalQueue.
pub fn check_flags(args: &GetArgs) -> Result<(), String> {
    let p = &args.pending;
    if !is_pending(&args.kind) {
        let used: Vec<&str> = [
            (p.cluster_queue.is_some(), "--cluster-queue"),
            (p.local_queue.is_some(), "--local-queue"),
            (p.limit.is_some(), "--limit"),
            (p.offset.is_some(), "--offset"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        if !used.is_empty() {
            return Err(format!(
                "{}: only `get pending` takes {}",
                used.join(", "),
                if used.len() == 1 { "it" } else { "them" }
            ));
        }
        return Ok(());
    }
    if let Some(name) = &args.name {
        return Err(format!(
            "get pending takes no NAME ({name:?}): use --cluster-queue NAME or --local-queue NAME"
        ));
    }
    if args.state.is_some() {
        return Err("--state: get pending lists pending workloads only".into());
    }
    match (&p.cluster_queue, &p.local_queue) {
        (None, None) => Err(
            "get pending: give --cluster-queue NAME, or --local-queue NAME (in -n NAMESPACE)"
                .into(),
        ),
        (None, Some(_)) if args.all_namespaces => Err(
            "--all-namespaces: a LocalQueue lives in one namespace; use -n NAMESPACE (or --cluster-queue for every namespace)"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// The request `args` make.
pub fn request(args: &GetArgs) -> pb::PendingWorkloadsRequest {
    let p = &args.pending;
    let (cluster_queue, namespace, local_queue) = match (&p.cluster_queue, &p.local_queue) {
        (Some(cq), _) => (cq.clone(), String::new(), String::new()),
        (None, lq) => (
            String::new(),
            args.namespace.clone(),
            lq.clone().unwrap_or_default(),
        ),
    };
    pb::PendingWorkloadsRequest {
        cluster_queue,
        limit: p.limit.unwrap_or(0),
        offset: p.offset.unwrap_or(0),
        namespace,
        local_queue,
    }
}

/// `get pending`.
pub async fn get(c: &mut Client, args: &GetArgs) -> Result<(), String> {
    let req = request(args);
    let list = c
        .pending_workloads(req.clone())
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    print(&req, &list, args.output)
}

/// One pending workload as `-o json|yaml` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    /// 1-based place in the ClusterQueue's admission order.
    pub position: u64,
    /// 1-based place among the workloads of its LocalQueue.
    pub local_queue_position: u64,
    pub namespace: String,
    pub name: String,
    pub local_queue: String,
    pub cluster_queue: String,
    pub priority: i32,
    pub priority_class: String,
    pub reason_kind: String,
    pub reason: String,
    pub requests: String,
    pub created_at_ms: u64,
    pub id: u64,
}

impl From<&pb::WorkloadStatus> for PendingView {
    fn from(w: &pb::WorkloadStatus) -> Self {
        PendingView {
            position: w.position,
            local_queue_position: w.local_queue_position,
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            local_queue: w.queue.clone(),
            cluster_queue: w.cluster_queue.clone(),
            priority: w.priority,
            priority_class: w.priority_class.clone(),
            reason_kind: w.reason_kind.clone(),
            reason: w.reason.clone(),
            requests: w.requests.clone(),
            created_at_ms: w.created_at_ms,
            id: w.id,
        }
    }
}

/// The whole answer as `-o json|yaml` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingListView {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_queue: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub local_queue: String,
    /// The selected pending workloads before paging.
    pub total: u64,
    pub offset: u32,
    pub items: Vec<PendingView>,
}

fn print(
    req: &pb::PendingWorkloadsRequest,
    list: &pb::WorkloadList,
    output: Output,
) -> Result<(), String> {
    if !output.is_table() {
        let view = PendingListView {
            cluster_queue: req.cluster_queue.clone(),
            namespace: req.namespace.clone(),
            local_queue: req.local_queue.clone(),
            total: list.total,
            offset: req.offset,
            items: list.workloads.iter().map(PendingView::from).collect(),
        };
        return view::print_structured(&view, output);
    }
    let queue = if req.cluster_queue.is_empty() {
        format!("LocalQueue {}/{}", req.namespace, req.local_queue)
    } else {
        format!("ClusterQueue {}", req.cluster_queue)
    };
    if list.workloads.is_empty() {
        if list.total == 0 {
            println!("No pending workloads in {queue}.");
        } else {
            println!(
                "No pending workloads at offset {} ({} pending in {queue}).",
                req.offset, list.total
            );
        }
        return Ok(());
    }
    let wide = output == Output::Wide;
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_string()
        }
    };
    let rows: Vec<Vec<String>> = list
        .workloads
        .iter()
        .map(|w| {
            if wide {
                let reason = match (w.reason_kind.as_str(), w.reason.as_str()) {
                    (_, "") => "-".to_string(),
                    ("", r) => r.to_string(),
                    (k, r) => format!("{k}: {r}"),
                };
                vec![
                    w.position.to_string(),
                    w.local_queue_position.to_string(),
                    w.namespace.clone(),
                    w.name.clone(),
                    w.queue.clone(),
                    w.cluster_queue.clone(),
                    w.priority.to_string(),
                    dash(&w.priority_class),
                    dash(&w.requests),
                    view::age(w.created_at_ms),
                    reason,
                ]
            } else {
                vec![
                    w.position.to_string(),
                    w.namespace.clone(),
                    w.name.clone(),
                    w.queue.clone(),
                    w.priority.to_string(),
                    view::age(w.created_at_ms),
                    dash(&w.reason),
                ]
            }
        })
        .collect();
    let header: &[&str] = if wide {
        &[
            "POSITION",
            "LQ-POSITION",
            "NAMESPACE",
            "NAME",
            "LOCALQUEUE",
            "CLUSTERQUEUE",
            "PRIORITY",
            "PRIORITYCLASS",
            "REQUESTS",
            "AGE",
            "REASON",
        ]
    } else {
        &[
            "POSITION",
            "NAMESPACE",
            "NAME",
            "LOCALQUEUE",
            "PRIORITY",
            "AGE",
            "REASON",
        ]
    };
    view::print_table(header, &rows);
    let shown = list.workloads.len() as u64;
    if shown < list.total {
        let first = u64::from(req.offset) + 1;
        println!(
            "Showing {first}-{} of {} pending in {queue} (--offset, --limit page).",
            first + shown - 1,
            list.total
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        get: GetArgs,
    }

    fn parse(args: &[&str]) -> Result<GetArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("get").chain(args.iter().copied())).map(|c| c.get)
    }

    fn parsed(args: &[&str]) -> GetArgs {
        parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn a_cluster_queue_or_a_local_queue_in_a_namespace() {
        let args = parsed(&[
            "pending",
            "--cluster-queue",
            "team-a",
            "--limit",
            "2",
            "--offset",
            "3",
        ]);
        assert_eq!(check_flags(&args), Ok(()));
        let req = request(&args);
        assert_eq!(
            (
                req.cluster_queue.as_str(),
                req.namespace.as_str(),
                req.local_queue.as_str()
            ),
            ("team-a", "", "")
        );
        assert_eq!((req.limit, req.offset), (2, 3));

        let args = parsed(&["pending", "-n", "research", "--local-queue", "beta"]);
        assert_eq!(check_flags(&args), Ok(()));
        let req = request(&args);
        assert_eq!(
            (
                req.cluster_queue.as_str(),
                req.namespace.as_str(),
                req.local_queue.as_str()
            ),
            ("", "research", "beta")
        );
        assert_eq!((req.limit, req.offset), (0, 0));
        // Without -n: the default namespace, as everywhere in the CLI.
        let req = request(&parsed(&["pendingworkloads", "--local-queue", "a"]));
        assert_eq!(req.namespace, "default");
    }

    #[test]
    fn misused_flags_are_refused_naming_them() {
        // Both selectors, and paging values that are not counts (or a
        // limit of 0): clap refuses, naming the flag.
        for (args, flag) in [
            (
                &["pending", "--cluster-queue", "a", "--local-queue", "b"][..],
                "--local-queue",
            ),
            (
                &["pending", "--cluster-queue", "a", "--limit", "0"],
                "--limit",
            ),
            (
                &["pending", "--cluster-queue", "a", "--limit", "-1"],
                "--limit",
            ),
            (
                &["pending", "--cluster-queue", "a", "--offset", "x"],
                "--offset",
            ),
            (
                &["pending", "--cluster-queue", "a", "--offset", "-2"],
                "--offset",
            ),
        ] {
            let text = parse(args).expect_err("refused").to_string();
            assert!(text.contains(flag), "{args:?}: {text}");
        }
        for (args, flag) in [
            (&["pending"][..], "--cluster-queue"),
            (&["pending", "team-a", "--cluster-queue", "a"], "NAME"),
            (
                &["pending", "--cluster-queue", "a", "--state", "Pending"],
                "--state",
            ),
            (&["pending", "-A", "--local-queue", "a"], "--all-namespaces"),
            (&["workloads", "--limit", "3"], "--limit"),
            (
                &["cq", "--cluster-queue", "a", "--offset", "1"],
                "--cluster-queue, --offset",
            ),
        ] {
            let e = check_flags(&parsed(args)).expect_err("refused");
            assert!(e.contains(flag), "{args:?}: {e}");
        }
        // -A with a ClusterQueue is harmless (it spans namespaces anyway).
        assert_eq!(
            check_flags(&parsed(&["pending", "-A", "--cluster-queue", "a"])),
            Ok(())
        );
    }
}
