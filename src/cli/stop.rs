//! `fleetq stop KIND NAME` and `fleetq resume KIND NAME`: hold a
//! ClusterQueue or LocalQueue (Kueue's `spec.stopPolicy: Hold`: nothing
//! new is admitted from it, what runs finishes) and release it, as
//! kueuectl's stop and resume do. The object is read, changed in that
//! one field and applied back, so its other fields stay as they are.

use std::process::ExitCode;

use clap::Args;
use fleetq_model::cluster_queue::StopPolicy;
use fleetq_model::config::Object;
use fleetq_model::kueue::export;
use fleetq_proto::v1 as pb;

use super::client::{self, field_error_line};

#[derive(Debug, Args)]
pub struct StopArgs {
    /// `cq` (ClusterQueue) or `lq` (LocalQueue).
    pub kind: String,
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::object_names))]
    pub name: String,
    /// Namespace of a LocalQueue.
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
    let kind = match fleetq_server::api_service::canonical_kind(&args.kind) {
        Some(kind @ ("ClusterQueue" | "LocalQueue")) => kind,
        _ if matches!(args.kind.as_str(), "workload" | "workloads" | "wl") => {
            return Err(format!(
                "a workload is not stopped but cancelled: `fleetq cancel {} -n {}` (fleetq has no inactive workloads)",
                args.name, args.namespace
            ))
        }
        _ => {
            return Err(format!(
                "kind: {:?} cannot be stopped; use cq (ClusterQueue) or lq (LocalQueue)",
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
