//! `fleetq cancel NAME`: cancel a workload. A running workload keeps its
//! quota until its executor confirms it stopped.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client;

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Workload name.
    pub name: String,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
}

pub fn run(server: &str, args: &CancelArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        c.cancel(pb::CancelRequest {
            namespace: args.namespace.clone(),
            name: args.name.clone(),
        })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(r) if r.state == "Cancelled" => {
            println!("workload {}/{} cancelled", args.namespace, args.name);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            println!(
                "workload {}/{} is stopping (still {}); its quota is released once its processes are gone",
                args.namespace, args.name, r.state
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
