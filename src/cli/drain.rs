//! `fleetq drain CLUSTER` and `fleetq uncordon CLUSTER`: stop placing new
//! work on a cluster (what runs there finishes), and take that back, as
//! kubectl's drain and uncordon do for a node. Admins only.

use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1 as pb;

use super::client;

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The cluster, as `fleetq get clusters` names it.
    #[arg(add = clap_complete::engine::ArgValueCompleter::new(super::names::clusters))]
    pub cluster: String,
}

/// Which of the two.
#[derive(Clone, Copy, Debug)]
pub enum Action {
    Drain,
    Uncordon,
}

pub fn run(server: &str, args: &ClusterArgs, action: Action) -> ExitCode {
    let request = pb::ClusterRef {
        name: args.cluster.clone(),
    };
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        let reply = match action {
            Action::Drain => c.drain_cluster(request).await,
            Action::Uncordon => c.uncordon_cluster(request).await,
        };
        reply
            .map(|r| r.into_inner())
            .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(status) => {
            let what = match action {
                Action::Drain => "drained: nothing new is placed there; what runs there finishes",
                Action::Uncordon if status.state == "Ready" => "uncordoned: it takes new work",
                Action::Uncordon => "not draining; left as it is",
            };
            println!("cluster {} {what} (state {})", args.cluster, status.state);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
