//! `fleetq agent --config agent.toml`: the per-cluster agent.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fleetq_agent::{Agent, AgentConfig};

use super::server::{init_logging, runtime, termination, LogFormat};

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The agent's TOML configuration (cluster name, control-plane
    /// servers, lease policy, inventory, executor).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

pub fn run(args: &AgentArgs) -> ExitCode {
    let config = match AgentConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        // Read the inventory (and re-adopt running children) before
        // anything else: a node without a driver says so in one line and
        // exits non-zero.
        let agent = match Agent::new(config) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        init_logging(args.log_format, "info,h2=warn,tower=warn,hyper=warn");
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let cluster = agent.cluster().to_string();
        let agent = tokio::spawn(agent.run(stopped));
        println!("fleetq agent: cluster {cluster}");
        termination().await;
        let _ = stop.send(true);
        let _ = agent.await;
        ExitCode::SUCCESS
    })
}
