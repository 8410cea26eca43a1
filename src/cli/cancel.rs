//! `fleetq cancel NAME`, or every workload of a namespace that a label
//! selector, a LocalQueue or `--all` picks (kubectl's `delete -l`, Slurm's
//! `scancel --partition`). A running workload keeps its quota until its
//! executor confirms it stopped.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use fleetq_model::Workload;
use fleetq_proto::v1 as pb;

use super::client::{self, Client};

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Workload name (or pick several with -l, --queue, --user or --all).
    #[arg(required_unless_present_any = ["selector", "queue", "user", "all"], conflicts_with_all = ["selector", "queue", "user", "all"], add = clap_complete::engine::ArgValueCompleter::new(super::names::workloads))]
    pub name: Option<String>,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Every unfinished workload of the namespace whose labels match
    /// (kubectl syntax: app=llm,tier!=dev,env in (a,b)).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Every unfinished workload of the namespace in this LocalQueue.
    #[arg(long, value_name = "LOCALQUEUE", add = clap_complete::engine::ArgValueCompleter::new(super::names::local_queues))]
    pub queue: Option<String>,
    /// Every unfinished workload of the namespace that this user
    /// submitted (Slurm's `scancel -u`).
    #[arg(short = 'u', long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// Every unfinished workload of the namespace.
    #[arg(long)]
    pub all: bool,
}

pub fn run(server: &str, args: &CancelArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        match &args.name {
            Some(name) => cancel_one(&mut c, &args.namespace, name).await.map(|line| {
                println!("{line}");
                true
            }),
            None => cancel_many(&mut c, args).await,
        }
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

async fn cancel_one(c: &mut Client, namespace: &str, name: &str) -> Result<String, String> {
    let r = c
        .cancel(pb::CancelRequest {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    Ok(if r.state == "Cancelled" {
        format!("workload {namespace}/{name} cancelled")
    } else {
        format!(
            "workload {namespace}/{name} is stopping (still {}); its quota is released once its processes are gone",
            r.state
        )
    })
}

/// Cancels each picked workload; false when any cancel failed.
async fn cancel_many(c: &mut Client, args: &CancelArgs) -> Result<bool, String> {
    let selector = args
        .selector
        .as_deref()
        .map(super::selector::parse)
        .transpose()?;
    let list = c
        .list_workloads(pb::ListWorkloadsRequest {
            namespace: args.namespace.clone(),
            all_namespaces: false,
            cluster_queue: String::new(),
            state: String::new(),
            limit: 0,
            // The labels are in the spec.
            with_spec: selector.is_some(),
            submitted_by: args.user.clone().unwrap_or_default(),
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner()
        .workloads;
    let mut picked = Vec::new();
    for w in &list {
        if matches!(w.state.as_str(), "Succeeded" | "Failed" | "Cancelled") || w.cancel_requested {
            continue;
        }
        if args.queue.as_ref().is_some_and(|q| *q != w.queue) {
            continue;
        }
        if let Some(selector) = &selector {
            let labels = serde_json::from_str::<Workload>(&w.workload_json)
                .map(|w| w.labels)
                .unwrap_or_else(|_| BTreeMap::new());
            if !fleetq_model::namespace::selector_matches(selector, &labels) {
                continue;
            }
        }
        picked.push(w.name.clone());
    }
    if picked.is_empty() {
        println!(
            "no unfinished workload in namespace {} matches",
            args.namespace
        );
        return Ok(true);
    }
    let mut failed = 0;
    for name in &picked {
        match cancel_one(c, &args.namespace, name).await {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("error: {}/{name}: {e}", args.namespace);
                failed += 1;
            }
        }
    }
    println!(
        "{} of {} workloads cancelled or stopping",
        picked.len() - failed,
        picked.len()
    );
    Ok(failed == 0)
}
