//! openraft's network over gRPC: each RPC's request and response are
//! openraft's own types as JSON inside a `RaftPayload`.

use std::time::Duration;

use fleetq_ledger::raft::{NodeId, TypeConfig};
use fleetq_proto::v1::raft_client::RaftClient;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::Channel;

use crate::transport::SharedConnector;

/// Creates one [`PeerClient`] per target node.
#[derive(Clone)]
pub struct PeerNetwork {
    connector: SharedConnector,
}

impl PeerNetwork {
    pub fn new(connector: SharedConnector) -> PeerNetwork {
        PeerNetwork { connector }
    }
}

impl RaftNetworkFactory<TypeConfig> for PeerNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient {
            target,
            addr: node.addr.clone(),
            client: self
                .connector
                .channel(&node.addr)
                .map(RaftClient::new)
                .map_err(|e| e.to_string()),
        }
    }
}

pub struct PeerClient {
    target: NodeId,
    addr: String,
    client: Result<RaftClient<Channel>, String>,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Message(String);

impl PeerClient {
    async fn call<Req, Resp, E>(
        &mut self,
        rpc: &'static str,
        request: &Req,
        ttl: Duration,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let client = match &mut self.client {
            Ok(c) => c,
            Err(e) => {
                return Err(RPCError::Unreachable(Unreachable::new(&Message(format!(
                    "peer {} at {}: {e}",
                    self.target, self.addr
                )))))
            }
        };
        let json =
            serde_json::to_vec(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let mut req = tonic::Request::new(crate::raft::service::payload(json));
        req.set_timeout(ttl);
        let call = async {
            match rpc {
                "append" => client.append_entries(req).await,
                "vote" => client.vote(req).await,
                _ => client.install_snapshot(req).await,
            }
        };
        let reply = match tokio::time::timeout(ttl, call).await {
            Err(_) => {
                return Err(RPCError::Unreachable(Unreachable::new(&Message(format!(
                    "{rpc} to node {} timed out after {ttl:?}",
                    self.target
                )))))
            }
            Ok(Err(status)) => {
                return Err(RPCError::Unreachable(Unreachable::new(&Message(format!(
                    "{rpc} to node {} at {}: {}",
                    self.target,
                    self.addr,
                    status.message()
                )))))
            }
            Ok(Ok(reply)) => reply.into_inner(),
        };
        if !reply.error.is_empty() {
            return Err(RPCError::Network(NetworkError::new(&Message(reply.error))));
        }
        if let Err(e) = crate::raft::service::newer_format(
            reply.format,
            &format!("{rpc} reply from node {}", self.target),
        ) {
            return Err(RPCError::Network(NetworkError::new(&Message(
                e.to_string(),
            ))));
        }
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&reply.json)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call("append", &rpc, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call("snapshot", &rpc, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call("vote", &rpc, option.hard_ttl()).await
    }
}
