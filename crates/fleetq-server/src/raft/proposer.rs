//! The write path: every ledger command enters the Raft log here, on the
//! leader, stamped with the leader's clock. A follower forwards the command
//! to the leader it knows; while there is no leader it waits and retries
//! until the deadline. Also the read barrier for linearizable reads.

use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::raft::{NodeId, Raft};
use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{AdmissionOnSubmit, Command, Ledger, Outcome, Request, Response, Submission};
use fleetq_model::Timestamp;
use fleetq_proto::v1::raft_client::RaftClient;
use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use serde::{Deserialize, Serialize};

use crate::clock::SharedClock;
use crate::metrics::ServerMetrics;
use crate::transport::SharedConnector;

/// A command as applied: its log index and the ledger's response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Written {
    pub index: u64,
    pub response: Response,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// No leader could be reached before the deadline; the command was
    /// not applied.
    #[error("no Raft leader reachable: {0}")]
    NoLeader(String),
    /// The command may or may not have been applied (the connection to
    /// the leader broke after sending it). Retrying is safe for commands
    /// that are idempotent (submissions carry a request id).
    #[error("outcome unknown: {0}")]
    Unknown(String),
    #[error("raft error: {0}")]
    Raft(String),
}

impl From<ProposeError> for tonic::Status {
    /// An unknown outcome stays `UNKNOWN` for the caller (who must not
    /// assume the command absent); everything else is `UNAVAILABLE`,
    /// which a client may retry.
    fn from(e: ProposeError) -> tonic::Status {
        match e {
            ProposeError::Unknown(m) => tonic::Status::unknown(m),
            other => tonic::Status::unavailable(other.to_string()),
        }
    }
}

/// What a follower sends to the leader.
#[derive(Debug, Serialize, Deserialize)]
pub enum Forwarded {
    Propose(Command),
    ReadIndex,
}

/// The leader's answer to a [`Forwarded`] request.
#[derive(Debug, Serialize, Deserialize)]
pub enum ForwardReply {
    Written(Written),
    ReadIndex(u64),
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    Failed(String),
    /// The leader could not tell whether the command was applied.
    Unknown(String),
}

enum Local<T> {
    Done(T),
    NotLeader(Option<(NodeId, String)>),
    Failed(String),
}

pub struct Proposer {
    raft: Raft,
    clock: SharedClock,
    connector: SharedConnector,
    handle: LedgerHandle,
    /// How long a command waits for a leader before giving up.
    pub deadline: Duration,
    metrics: Option<ServerMetrics>,
    /// Stamped into every submission this node proposes as leader.
    pending_limit: Option<u64>,
    /// Plans admissions for the workloads a submission is about to queue,
    /// written in the same entry (`Ledger::plan_on_submit`, handed over by
    /// the node when the leader's policies have admission on submit on).
    /// None: never.
    submit_planner: Option<SubmitPlanner>,
}

/// How a leader plans admissions on submit: from the ledger as it stands
/// and the submissions, at the entry's time.
pub type SubmitPlanner = fn(&Ledger, &[Submission], Timestamp) -> Vec<AdmissionOnSubmit>;

impl Proposer {
    pub fn new(
        raft: Raft,
        clock: SharedClock,
        connector: SharedConnector,
        handle: LedgerHandle,
    ) -> Proposer {
        Proposer {
            raft,
            clock,
            connector,
            handle,
            deadline: Duration::from_secs(10),
            metrics: None,
            pending_limit: None,
            submit_planner: None,
        }
    }

    /// Plans admissions for each submission this node writes as leader,
    /// with `planner`.
    pub fn with_submit_planner(mut self, planner: SubmitPlanner) -> Proposer {
        self.submit_planner = Some(planner);
        self
    }

    /// Whether this node plans admissions on submit when it leads.
    pub fn plans_on_submit(&self) -> bool {
        self.submit_planner.is_some()
    }

    /// The most pending workloads per LocalQueue, which this node stamps
    /// into the submissions it writes as leader (as it stamps its clock):
    /// apply() enforces the limit carried in the log entry, so every
    /// replica, and a replay, decides alike. None: no limit.
    pub fn with_pending_limit(mut self, limit: Option<u64>) -> Proposer {
        self.pending_limit = limit;
        self
    }

    /// Records the latency of every write this node commits as leader.
    pub fn with_metrics(mut self, metrics: ServerMetrics) -> Proposer {
        self.metrics = Some(metrics);
        self
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Whether this node leads now, by its Raft metrics (no round trip).
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == openraft::ServerState::Leader
    }

    /// A channel to a peer by address, with the node's timeouts.
    pub fn channel(&self, addr: &str) -> Result<tonic::transport::Channel, String> {
        self.connector.channel(addr)
    }

    /// Proposes `command` through the current leader and waits until it is
    /// applied (on the leader).
    pub async fn propose(&self, command: Command) -> Result<Written, ProposeError> {
        let started = tokio::time::Instant::now();
        let mut last = String::from("no leader elected yet");
        loop {
            match self.write_local(command.clone()).await.0 {
                Local::Done(w) => return Ok(w),
                Local::Failed(e) => return Err(ProposeError::Raft(e)),
                Local::NotLeader(Some((_, addr))) => {
                    match self
                        .forward(&addr, Forwarded::Propose(command.clone()))
                        .await
                    {
                        Ok(ForwardReply::Written(w)) => return Ok(w),
                        Ok(ForwardReply::Failed(e)) => return Err(ProposeError::Raft(e)),
                        Ok(ForwardReply::Unknown(e)) => return Err(ProposeError::Unknown(e)),
                        Ok(ForwardReply::NotLeader { .. }) => {
                            last = format!("{addr} is not the leader any more")
                        }
                        Ok(ForwardReply::ReadIndex(_)) => {
                            return Err(ProposeError::Raft("leader answered out of turn".into()))
                        }
                        Err(ForwardFailure::NotSent(e)) => last = e,
                        Err(ForwardFailure::Unknown(e)) => return Err(ProposeError::Unknown(e)),
                    }
                }
                Local::NotLeader(None) => {}
            }
            if started.elapsed() >= self.deadline {
                return Err(ProposeError::NoLeader(last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Writes on this node if it is the leader; never forwards.
    pub async fn write_local(&self, mut command: Command) -> LocalWrite {
        let at = self.clock.now();
        let mut planned = None;
        if let Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: limit,
            admit,
        } = &mut command
        {
            if limit.is_none() {
                *limit = self.pending_limit;
            }
            // The leader decides admissions: a plan the command arrived
            // with (a forwarded one, say) is replaced by this node's own.
            let planning = std::time::Instant::now();
            *admit = match self.submit_planner {
                Some(plan) if self.is_leader() => plan(&self.handle.read().ledger, submissions, at),
                _ => Vec::new(),
            };
            if !admit.is_empty() {
                planned = Some(planning.elapsed());
            }
        }
        let request = std::sync::Arc::new(Request { at, command });
        let started = std::time::Instant::now();
        match self.raft.client_write(request).await {
            Ok(resp) => {
                if let Some(m) = &self.metrics {
                    m.appended(started.elapsed());
                    // A plan is an admission attempt as much as a
                    // scheduling cycle is (metrics: kueue_admission_attempts).
                    if let (
                        Some(took),
                        Outcome::Submitted {
                            admitted_on_submit, ..
                        },
                    ) = (planned, &resp.data.outcome)
                    {
                        m.admission_attempt(*admitted_on_submit > 0, took);
                    }
                }
                Local::Done(Written {
                    index: resp.log_id.index,
                    response: resp.data,
                })
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Local::NotLeader(
                f.leader_id
                    .zip(f.leader_node)
                    .map(|(id, node)| (id, node.addr)),
            ),
            Err(e) => Local::Failed(e.to_string()),
        }
        .into()
    }

    /// Waits until this node has applied everything the leader had
    /// committed when the call began: a linearizable read on any node.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        let started = tokio::time::Instant::now();
        let mut last = String::from("no leader elected yet");
        loop {
            let index = match self.read_index_local().await {
                Local::Done(i) => Some(i),
                Local::Failed(e) => return Err(ProposeError::Raft(e)),
                Local::NotLeader(Some((_, addr))) => {
                    match self.forward(&addr, Forwarded::ReadIndex).await {
                        Ok(ForwardReply::ReadIndex(i)) => Some(i),
                        Ok(other) => {
                            last = format!("{addr} answered {other:?}");
                            None
                        }
                        Err(ForwardFailure::NotSent(e) | ForwardFailure::Unknown(e)) => {
                            last = e;
                            None
                        }
                    }
                }
                Local::NotLeader(None) => None,
            };
            if let Some(index) = index {
                let remaining = self.deadline.saturating_sub(started.elapsed());
                return tokio::time::timeout(remaining, self.handle.wait_applied(index))
                    .await
                    .map_err(|_| {
                        ProposeError::NoLeader(format!(
                            "this node did not catch up to index {index} in time"
                        ))
                    });
            }
            if started.elapsed() >= self.deadline {
                return Err(ProposeError::NoLeader(last));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn read_index_local(&self) -> Local<u64> {
        match self.raft.ensure_linearizable().await {
            Ok(log_id) => Local::Done(log_id.map(|l| l.index).unwrap_or(0)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => Local::NotLeader(
                f.leader_id
                    .zip(f.leader_node)
                    .map(|(id, node)| (id, node.addr)),
            ),
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q))) => {
                Local::Failed(format!("leader cannot reach a quorum: {q}"))
            }
            Err(e) => Local::Failed(e.to_string()),
        }
    }

    /// Serves a follower's forwarded request (never forwards again).
    pub async fn serve_forwarded(&self, request: Forwarded) -> ForwardReply {
        match request {
            Forwarded::Propose(command) => match self.write_local(command).await.0 {
                Local::Done(w) => ForwardReply::Written(w),
                Local::NotLeader(leader) => ForwardReply::NotLeader { leader },
                Local::Failed(e) => ForwardReply::Failed(e),
            },
            Forwarded::ReadIndex => match self.read_index_local().await {
                Local::Done(i) => ForwardReply::ReadIndex(i),
                Local::NotLeader(leader) => ForwardReply::NotLeader { leader },
                Local::Failed(e) => ForwardReply::Failed(e),
            },
        }
    }

    async fn forward(
        &self,
        addr: &str,
        request: Forwarded,
    ) -> Result<ForwardReply, ForwardFailure> {
        let channel = self
            .connector
            .channel(addr)
            .map_err(ForwardFailure::NotSent)?;
        let json =
            serde_json::to_vec(&request).map_err(|e| ForwardFailure::NotSent(e.to_string()))?;
        let is_write = matches!(request, Forwarded::Propose(_));
        let mut client = RaftClient::new(channel);
        let mut req = tonic::Request::new(crate::raft::service::payload(json));
        req.set_timeout(self.deadline);
        match tokio::time::timeout(self.deadline, client.forward(req)).await {
            Err(_) => Err(ForwardFailure::Unknown(format!(
                "forwarding to the leader at {addr} timed out"
            ))),
            Ok(Err(status)) => {
                let message = format!("forwarding to the leader at {addr}: {}", status.message());
                // A connection that never opened carried nothing.
                if status.code() == tonic::Code::Unavailable || !is_write {
                    Err(ForwardFailure::NotSent(message))
                } else {
                    Err(ForwardFailure::Unknown(message))
                }
            }
            Ok(Ok(reply)) => {
                let reply = reply.into_inner();
                if !reply.error.is_empty() {
                    return Err(ForwardFailure::NotSent(reply.error));
                }
                serde_json::from_slice(&reply.json).map_err(|e| {
                    ForwardFailure::Unknown(format!("unreadable reply from the leader: {e}"))
                })
            }
        }
    }
}

enum ForwardFailure {
    NotSent(String),
    Unknown(String),
}

/// The result of [`Proposer::write_local`].
pub struct LocalWrite(Local<Written>);

impl From<Local<Written>> for LocalWrite {
    fn from(l: Local<Written>) -> Self {
        LocalWrite(l)
    }
}

impl LocalWrite {
    /// The applied command, or `None` when this node is not the leader or
    /// the write failed.
    pub fn written(self) -> Result<Written, String> {
        match self.0 {
            Local::Done(w) => Ok(w),
            Local::NotLeader(_) => Err("this node is not the leader".into()),
            Local::Failed(e) => Err(e),
        }
    }
}

/// Shared handle.
pub type SharedProposer = Arc<Proposer>;
