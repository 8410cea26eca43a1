//! `fleetq members`: change the Raft group's membership.
//!
//! ```text
//! fleetq members add-learner --id 4 --addr 10.0.0.4:7400   # replicate to a new node
//! fleetq members set-voters 1,2,3,4                         # promote it
//! fleetq members set-voters 1,2,4                           # remove node 3
//! ```

use std::process::ExitCode;

use clap::{Args, Subcommand};
use fleetq_proto::v1 as pb;

use super::client;

#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(subcommand)]
    pub action: MembersAction,
}

#[derive(Debug, Subcommand)]
pub enum MembersAction {
    /// Add a node as a learner: it receives the log (or a snapshot) but
    /// does not vote. Returns once it has caught up.
    AddLearner {
        /// The new node's id (its `fleetq server --id`).
        #[arg(long)]
        id: u64,
        /// The address the new node serves on.
        #[arg(long)]
        addr: String,
    },
    /// Make exactly these node ids the voters: promotes learners in the
    /// list, removes voters not in it.
    SetVoters {
        /// Comma-separated node ids, e.g. 1,2,4.
        #[arg(value_delimiter = ',', required = true)]
        voters: Vec<u64>,
    },
}

pub fn run(server: &str, args: &MembersArgs) -> ExitCode {
    let result = client::block_on(async {
        let mut c = client::connect(server).await?;
        let status = match &args.action {
            MembersAction::AddLearner { id, addr } => {
                c.add_learner(pb::AddLearnerRequest {
                    node_id: *id,
                    addr: addr.clone(),
                })
                .await
            }
            MembersAction::SetVoters { voters } => {
                c.change_membership(pb::ChangeMembershipRequest {
                    voters: voters.clone(),
                })
                .await
            }
        };
        status
            .map(|r| r.into_inner())
            .map_err(|s| client::status_line(&s))
    })
    .and_then(|r| r);
    match result {
        Ok(s) => {
            let mut voters: Vec<_> = s.voters.keys().collect();
            voters.sort();
            let mut learners: Vec<_> = s.learners.keys().collect();
            learners.sort();
            println!("voters {voters:?}, learners {learners:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
