//! `fleetq logs NAME`: what a workload printed (kubectl's `logs`), read by
//! its cluster's agent for its latest admission there (the process
//! executor's log file, or the pods' logs from the Kubernetes API server)
//! and relayed by the leader. The process executor keeps one log per
//! admission, so a finished workload's output stays readable until the
//! agent's state directory is cleaned.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client;

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Workload name.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::workloads))]
    pub name: String,
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// At most this many bytes, from the end (the agent sends at most
    /// 1 MiB).
    #[arg(long, default_value_t = 64 * 1024, value_name = "BYTES")]
    pub tail_bytes: u64,
}

pub fn run(server: &str, args: &LogsArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        c.workload_logs(pb::WorkloadLogsRequest {
            namespace: args.namespace.clone(),
            name: args.name.clone(),
            tail_bytes: args.tail_bytes,
        })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(logs) => {
            if logs.truncated {
                eprintln!(
                    "(the last {} bytes of the log of admission {} on cluster {}; --tail-bytes shows more)",
                    args.tail_bytes, logs.epoch, logs.cluster
                );
            }
            // A closed pipe (`| head`) ends quietly, as for every command.
            let _ = std::io::stdout().write_all(logs.text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
