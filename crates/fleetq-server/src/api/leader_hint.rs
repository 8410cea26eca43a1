//! Where the leader is, on every answer a follower gives.
//!
//! A follower serves reads itself but forwards every write to the leader:
//! one more hop, and the request and its reply encoded once more. A
//! follower therefore adds the `fleetq-leader` header (gRPC metadata,
//! `host:port` as the group's membership names the leader) to each
//! response, so a client that keeps a connection can move to the leader
//! and send its writes there directly (`fleetq bench` does; a client
//! that ignores the header loses nothing). The leader adds nothing.
//!
//! It wraps the client API's service alone: a peer's Raft call or an
//! agent's session has no use for it, and AppendEntries is the hottest
//! path a follower answers.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fleetq_ledger::raft::Raft;
use tonic::codegen::http;
use tonic::server::NamedService;
use tower::{Layer, Service};

/// The response header naming the leader's address.
pub const LEADER_HEADER: &str = "fleetq-leader";

/// Adds [`LEADER_HEADER`] to the responses of a node that does not lead.
#[derive(Clone)]
pub struct LeaderHintLayer {
    raft: Raft,
    id: u64,
}

impl LeaderHintLayer {
    pub fn new(raft: Raft, id: u64) -> LeaderHintLayer {
        LeaderHintLayer { raft, id }
    }
}

impl<S> Layer<S> for LeaderHintLayer {
    type Service = LeaderHint<S>;

    fn layer(&self, inner: S) -> LeaderHint<S> {
        LeaderHint {
            inner,
            raft: self.raft.clone(),
            id: self.id,
        }
    }
}

#[derive(Clone)]
pub struct LeaderHint<S> {
    inner: S,
    raft: Raft,
    id: u64,
}

/// Served under the wrapped service's name.
impl<S: NamedService> NamedService for LeaderHint<S> {
    const NAME: &'static str = S::NAME;
}

/// The leader's address, when it is known and not this node.
fn leader_elsewhere(raft: &Raft, id: u64) -> Option<http::HeaderValue> {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    let leader = metrics.current_leader.filter(|l| *l != id)?;
    let node = metrics.membership_config.membership().get_node(&leader)?;
    http::HeaderValue::from_str(&node.addr).ok()
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> Service<http::Request<B>> for LeaderHint<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let future = self.inner.call(request);
        let (raft, id) = (self.raft.clone(), self.id);
        Box::pin(async move {
            let mut response = future.await?;
            // Read when the answer is ready: a write forwarded during an
            // election names the leader that took it.
            if let Some(leader) = leader_elsewhere(&raft, id) {
                response.headers_mut().insert(LEADER_HEADER, leader);
            }
            Ok(response)
        })
    }
}
