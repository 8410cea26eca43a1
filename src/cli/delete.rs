//! `fleetq delete KIND NAME`: remove a configuration object.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client;

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// cq, cohort, flavor, lq, pc or topology.
    pub kind: String,
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::object_names))]
    pub name: String,
    /// Namespace of a LocalQueue.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

pub fn run(server: &str, args: &DeleteArgs) -> ExitCode {
    // Workloads are not configuration: they are cancelled (which stops
    // them and releases their quota), and the ledger keeps their history.
    if matches!(
        args.kind.to_ascii_lowercase().as_str(),
        "workload" | "workloads" | "wl" | "wls"
    ) {
        eprintln!(
            "error: workloads are cancelled, not deleted: use `fleetq cancel {} -n {}`",
            args.name, args.namespace
        );
        return ExitCode::FAILURE;
    }
    let kind = fleetq_server::api::service::canonical_kind(&args.kind);
    let name = if kind == Some("LocalQueue") {
        format!("{}/{}", args.namespace, args.name)
    } else {
        args.name.clone()
    };
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        c.delete(pb::DeleteRequest {
            kind: args.kind.clone(),
            name,
        })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(r) => {
            println!("{} deleted", r.object);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
