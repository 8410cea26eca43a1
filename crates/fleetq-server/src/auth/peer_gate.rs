//! The Raft service's door: a request to it is refused before its body is
//! read unless the connection's client certificate names a member node.
//! Without this, the service decoded messages of up to 256 MiB (its limit
//! for snapshots and large appends) before the handler could look at who
//! sent them: four 200 MB messages without any client certificate took a
//! node from 0.1 to 1.34 GB. The large limit now applies to members only;
//! everyone else gets a refusal that costs nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fleetq_proto::tls::Identity;
use tonic::codegen::http;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::Status;
use tower::{Layer, Service};

use super::Authorizer;
use crate::limits::reason;

/// The path prefix of the Raft peer service.
const RAFT_PATH: &str = "/fleetq.v1.Raft/";

#[derive(Clone)]
pub struct PeerGateLayer {
    auth: Authorizer,
}

impl PeerGateLayer {
    pub fn new(auth: Authorizer) -> PeerGateLayer {
        PeerGateLayer { auth }
    }
}

impl<S> Layer<S> for PeerGateLayer {
    type Service = PeerGate<S>;

    fn layer(&self, inner: S) -> PeerGate<S> {
        PeerGate {
            inner,
            auth: self.auth.clone(),
        }
    }
}

#[derive(Clone)]
pub struct PeerGate<S> {
    inner: S,
    auth: Authorizer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> PeerGate<S> {
    /// Why a Raft request on this connection is refused, if it is.
    fn refusal<B>(&self, request: &http::Request<B>) -> Option<String> {
        if !self.auth.is_secure() || !request.uri().path().starts_with(RAFT_PATH) {
            return None;
        }
        let certs = request
            .extensions()
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .and_then(|i| i.peer_certs());
        let Some(leaf) = certs.as_ref().and_then(|c| c.first().cloned()) else {
            return Some(
                "no client certificate: only member nodes may use the Raft service".into(),
            );
        };
        match Identity::of_certificate(&leaf) {
            Ok(Identity::Node(id)) if self.auth.is_member(id) => None,
            Ok(Identity::Node(id)) => Some(format!("node {id} is not a member of this group")),
            Ok(other) => Some(format!(
                "{other:?}: only member nodes may use the Raft service"
            )),
            Err(e) => Some(e),
        }
    }
}

impl<S, B, R> Service<http::Request<B>> for PeerGate<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if let Some(why) = self.refusal(&request) {
            let source = request
                .extensions()
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
                .map(|a| a.ip().to_canonical().to_string())
                .unwrap_or_else(|| "unknown".into());
            tracing::warn!(
                rpc = %request.uri().path(),
                client = %source,
                reason = reason::FORBIDDEN,
                "refused before reading the request: {why}"
            );
            self.auth.metrics().refused(reason::FORBIDDEN);
            let response = Status::permission_denied(why).into_http::<R>();
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}
