//! The peer service: openraft's RPCs arriving from other nodes, and
//! commands forwarded by followers.

use std::sync::Arc;

use fleetq_ledger::raft::{Raft, TypeConfig};
use fleetq_ledger::{Command, Outcome, Response as LedgerResponse, Submission};
use fleetq_proto::v1::raft_server;
use fleetq_proto::v1::RaftPayload;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::guard::auth::Authorizer;
use crate::raft::batcher::SubmitBatcher;
use crate::raft::proposer::{ForwardReply, Forwarded, ProposeError, Proposer, Written};

pub struct RaftService {
    pub raft: Raft,
    pub proposer: Arc<Proposer>,
    /// The leader folds forwarded submissions into its own batches.
    pub batcher: SubmitBatcher,
    /// Only member nodes (by certificate) are served.
    pub auth: Authorizer,
}

impl RaftService {
    /// Refuses a request whose caller is not a member node; returns the
    /// caller's node id (None without TLS).
    fn check<T>(&self, request: &Request<T>, rpc: &str) -> Result<Option<u64>, Status> {
        if !self.auth.is_secure() {
            return Ok(None);
        }
        let members: Vec<u64> = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            m.membership_config
                .membership()
                .nodes()
                .map(|(id, _)| *id)
                .collect()
        };
        self.auth.peer(request, rpc, &members)
    }

    /// Refuses a message that claims to come from another node than the
    /// one its certificate names (node 2 once sent a Vote as node 3).
    fn same_sender(&self, caller: Option<u64>, claimed: u64, rpc: &str) -> Result<(), Status> {
        match caller {
            Some(id) if id != claimed => {
                let message = format!("{rpc} from node {id} claims to come from node {claimed}");
                tracing::warn!(
                    rpc,
                    reason = crate::metrics::reason::FORBIDDEN,
                    "refused: {message}"
                );
                self.auth
                    .metrics()
                    .refused(crate::metrics::reason::FORBIDDEN);
                Err(Status::permission_denied(message))
            }
            _ => Ok(()),
        }
    }
}

fn decode<T: DeserializeOwned>(payload: &RaftPayload, rpc: &str) -> Result<T, Status> {
    newer_format(payload.format, rpc).map_err(|e| {
        tracing::error!("refused: {e}");
        Status::failed_precondition(e.to_string())
    })?;
    serde_json::from_slice(&payload.json)
        .map_err(|e| Status::invalid_argument(format!("json: not a valid request: {e}")))
}

/// A peer's format newer than this build reads (0: a build before formats).
pub(crate) fn newer_format(
    format: u32,
    what: &str,
) -> Result<(), fleetq_ledger::format::NewerFormat> {
    if format > fleetq_ledger::format::FORMAT {
        return Err(fleetq_ledger::format::NewerFormat {
            what: what.to_string(),
            format,
        });
    }
    Ok(())
}

fn encode<T: Serialize>(value: &T) -> Result<Response<RaftPayload>, Status> {
    serde_json::to_vec(value)
        .map(|json| Response::new(payload(json)))
        .map_err(|e| Status::internal(e.to_string()))
}

/// A payload of this build's format.
pub(crate) fn payload(json: Vec<u8>) -> RaftPayload {
    RaftPayload {
        json,
        error: String::new(),
        format: fleetq_ledger::format::FORMAT,
    }
}

#[tonic::async_trait]
impl raft_server::Raft for RaftService {
    async fn append_entries(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let caller = self.check(&request, "AppendEntries")?;
        let req: AppendEntriesRequest<TypeConfig> = decode(request.get_ref(), "AppendEntries")?;
        self.same_sender(caller, req.vote.leader_id().node_id, "AppendEntries")?;
        encode(&self.raft.append_entries(req).await)
    }

    async fn vote(&self, request: Request<RaftPayload>) -> Result<Response<RaftPayload>, Status> {
        let caller = self.check(&request, "Vote")?;
        let req: VoteRequest<u64> = decode(request.get_ref(), "Vote")?;
        self.same_sender(caller, req.vote.leader_id().node_id, "Vote")?;
        encode(&self.raft.vote(req).await)
    }

    async fn install_snapshot(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        let caller = self.check(&request, "InstallSnapshot")?;
        let req: InstallSnapshotRequest<TypeConfig> = decode(request.get_ref(), "InstallSnapshot")?;
        self.same_sender(caller, req.vote.leader_id().node_id, "InstallSnapshot")?;
        encode(&self.raft.install_snapshot(req).await)
    }

    async fn forward(
        &self,
        request: Request<RaftPayload>,
    ) -> Result<Response<RaftPayload>, Status> {
        self.check(&request, "Forward")?;
        let req: Forwarded = decode(request.get_ref(), "Forward")?;
        let reply = match req {
            Forwarded::Propose(Command::SubmitWorkloads {
                submissions,
                max_pending_per_local_queue: None,
                ..
            }) if self.proposer.is_leader() => self.submit_forwarded(submissions).await,
            other => self.proposer.serve_forwarded(other).await,
        };
        encode(&reply)
    }
}

impl RaftService {
    /// A follower's batch of submissions joins the leader's own batch, so
    /// that the whole group writes one entry at a time (crate::raft::batcher).
    async fn submit_forwarded(&self, submissions: Vec<Submission>) -> ForwardReply {
        match self.batcher.submit(submissions).await {
            Ok(s) => ForwardReply::Written(Written {
                index: s.index,
                // The leader's own write counted its admissions on submit
                // (Proposer::write_local); a follower does not need them.
                response: LedgerResponse::ok(Outcome::Submitted {
                    results: s.results,
                    admitted_on_submit: 0,
                }),
            }),
            Err(ProposeError::NoLeader(_)) => ForwardReply::NotLeader { leader: None },
            Err(ProposeError::Unknown(e)) => ForwardReply::Unknown(e),
            Err(ProposeError::Raft(e)) => ForwardReply::Failed(e),
        }
    }
}
