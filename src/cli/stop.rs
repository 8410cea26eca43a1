//! `fleetq stop KIND NAME` and `fleetq resume KIND NAME`, as kueuectl's
//! stop and resume do: hold a ClusterQueue or LocalQueue (Kueue's
//! `spec.stopPolicy: Hold`: nothing new is admitted from it, what runs
//! finishes) and release it; or deactivate a workload (Kueue's
//! `spec.active: false`: it is stopped if it runs, and kept out of its
//! queue) and queue it again. A queue is read, changed in that one field
//! and applied back, so its other fields stay as they are; a workload is
//! changed by one ledger command.

use std::process::ExitCode;

use clap::Args;
use fleetq_model::cluster_queue::StopPolicy;
use fleetq_model::config::Object;
use fleetq_model::kueue::export;
use fleetq_proto::v1 as pb;

use super::client::{self, field_error_line};

#[derive(Debug, Args)]
pub struct StopArgs {
    /// `cq` (ClusterQueue), `lq` (LocalQueue) or `wl` (workload).
    pub kind: String,
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::object_names))]
    pub name: String,
    /// Namespace of a LocalQueue or workload.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

/// Which of the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Stop,
    Resume,
}

pub fn run(server: &str, args: &StopArgs, action: Action) -> ExitCode {
    match client::block_on(change(server, args, action)).and_then(|r| r) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn change(server: &str, args: &StopArgs, action: Action) -> Result<String, String> {
    let kind = match fleetq_server::api::service::canonical_kind(&args.kind) {
        Some(kind @ ("ClusterQueue" | "LocalQueue")) => kind,
        _ if matches!(
            args.kind.to_ascii_lowercase().as_str(),
            "workload" | "workloads" | "wl" | "wls"
        ) =>
        {
            return set_active(server, args, action).await
        }
        _ => {
            return Err(format!(
            "kind: {:?} cannot be stopped; use cq (ClusterQueue), lq (LocalQueue) or wl (workload)",
            args.kind
        ))
        }
    };
    let key = if kind == "LocalQueue" {
        format!("{}/{}", args.namespace, args.name)
    } else {
        args.name.clone()
    };
    let mut c = client::connect(server).await?;
    let found = c
        .get_object(pb::GetObjectRequest {
            kind: kind.into(),
            name: key,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    let json = found
        .objects_json
        .first()
        .ok_or_else(|| format!("not found: {kind} {:?}", args.name))?;
    let mut object: Object = serde_json::from_str(json)
        .map_err(|e| format!("the server sent an object this CLI cannot read: {e}"))?;
    let policy = match action {
        Action::Stop => StopPolicy::Hold,
        Action::Resume => StopPolicy::None,
    };
    let before = match &mut object {
        Object::ClusterQueue(cq) => std::mem::replace(&mut cq.spec.stop_policy, policy),
        Object::LocalQueue(lq) => std::mem::replace(&mut lq.spec.stop_policy, policy),
        _ => return Err(format!("the server sent a {} for a {kind}", object.kind())),
    };
    let name = object.display_name();
    if before == policy {
        return Ok(match action {
            Action::Stop => format!("{name} already stopped (stopPolicy: Hold)"),
            Action::Resume => format!("{name} not stopped; left as it is"),
        });
    }
    let manifest = serde_json::to_string(&export::object(&object))
        .map_err(|e| format!("cannot print {name}: {e}"))?;
    let reply = c
        .apply(pb::ApplyRequest {
            manifests: manifest,
            dry_run: false,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    if let Some(e) = reply.errors.first() {
        return Err(field_error_line(e));
    }
    Ok(match action {
        Action::Stop => format!(
            "{name} stopped: nothing new is admitted from it; what runs finishes (stopPolicy: Hold)"
        ),
        Action::Resume => format!("{name} resumed: it admits again"),
    })
}

/// Kueue's `spec.active` for one workload.
async fn set_active(server: &str, args: &StopArgs, action: Action) -> Result<String, String> {
    let mut c = client::connect(server).await?;
    let reply = c
        .set_workload_active(pb::SetWorkloadActiveRequest {
            namespace: args.namespace.clone(),
            name: args.name.clone(),
            active: action == Action::Resume,
        })
        .await
        .map_err(|s| client::status_line(&s))?
        .into_inner();
    let name = format!("Workload/{}/{}", args.namespace, args.name);
    Ok(match (action, reply.changed, reply.state.as_str()) {
        (Action::Stop, false, _) => format!("{name} already stopped (spec.active: false)"),
        (Action::Resume, false, _) => format!("{name} not stopped; left as it is"),
        (Action::Stop, true, "Pending") => {
            format!("{name} stopped: kept out of its queue until `fleetq resume wl {} -n {}` (spec.active: false)", args.name, args.namespace)
        }
        (Action::Stop, true, state) => format!(
            "{name} stopping: its quota is released once the executor stops it ({state} now); then kept out of its queue (spec.active: false)"
        ),
        (Action::Resume, true, _) => format!("{name} resumed: queued again"),
    })
}
