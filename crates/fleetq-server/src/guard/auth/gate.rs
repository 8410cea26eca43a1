//! Every service's door: a request is refused before its body is read
//! unless the caller is known from what arrives first, its `authorization`
//! header and the connection's client certificate.
//!
//! - Raft: only member nodes. Without this, the service decoded messages
//!   of up to 256 MiB (its limit for snapshots and large appends) before
//!   the handler could look at who sent them: four 200 MB messages without
//!   any client certificate took a node from 0.1 to 1.34 GB.
//! - Agent: only agents.
//! - Client API: anyone the authorization policy knows (a token or a
//!   certificate); what each may do is the handlers' part. Before, an
//!   unknown token could still make a node read a message of up to
//!   `--max-request-bytes` before it was refused.
//!
//! A refusal here costs a header lookup. Without TLS (`--insecure`)
//! everyone is let through, as everywhere else.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fleetq_proto::tls::Identity;
use tonic::codegen::http;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tonic::Status;
use tower::{Layer, Service};

use super::{Authorizer, Caller};
use crate::metrics::reason;

/// The path prefixes of the services.
const RAFT_PATH: &str = "/fleetq.v1.Raft/";
const AGENT_PATH: &str = "/fleetq.v1.Agent/";
const API_PATH: &str = "/fleetq.v1.FleetQ/";

#[derive(Clone)]
pub struct GateLayer {
    auth: Authorizer,
}

impl GateLayer {
    pub fn new(auth: Authorizer) -> GateLayer {
        GateLayer { auth }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            auth: self.auth.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    auth: Authorizer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Gate<S> {
    /// Why a request on this connection is refused, if it is, with the
    /// status to answer and the reason it is counted under.
    fn refusal<B>(&self, request: &http::Request<B>) -> Option<(Status, &'static str)> {
        let path = request.uri().path();
        if !self.auth.is_secure() {
            return None;
        }
        let certs = request
            .extensions()
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .and_then(|i| i.peer_certs());
        if path.starts_with(RAFT_PATH) {
            return Self::raft_refusal(&self.auth, certs.as_ref().and_then(|c| c.first()))
                .map(|why| (Status::permission_denied(why), reason::FORBIDDEN));
        }
        if !path.starts_with(AGENT_PATH) && !path.starts_with(API_PATH) {
            return None;
        }
        let authorization = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        match self
            .auth
            .caller_of(authorization, certs.as_ref().map(|c| c.as_slice()))
        {
            Err(status) => {
                let why = if status.code() == tonic::Code::Unauthenticated {
                    reason::UNAUTHENTICATED
                } else {
                    reason::FORBIDDEN
                };
                Some((status, why))
            }
            Ok(Caller::Agent(_) | Caller::Insecure) => None,
            Ok(other) if path.starts_with(AGENT_PATH) => Some((
                Status::permission_denied(format!(
                    "{other}: only agents may use the Agent service"
                )),
                reason::FORBIDDEN,
            )),
            Ok(_) => None,
        }
    }

    /// Why a Raft request with this client certificate is refused.
    fn raft_refusal(
        auth: &Authorizer,
        leaf: Option<&tonic::transport::CertificateDer<'static>>,
    ) -> Option<String> {
        let Some(leaf) = leaf else {
            return Some(
                "no client certificate: only member nodes may use the Raft service".into(),
            );
        };
        match auth.identity_of(leaf) {
            Ok(Identity::Node(id)) if auth.is_member(id) => None,
            Ok(Identity::Node(id)) => Some(format!("node {id} is not a member of this group")),
            Ok(other) => Some(format!(
                "{other:?}: only member nodes may use the Raft service"
            )),
            Err(e) => Some(e),
        }
    }
}

impl<S, B, R> Service<http::Request<B>> for Gate<S>
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
        if let Some((status, why)) = self.refusal(&request) {
            let source = request
                .extensions()
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
                .map(|a| a.ip().to_canonical().to_string())
                .unwrap_or_else(|| "unknown".into());
            tracing::warn!(
                rpc = %request.uri().path(),
                client = %source,
                reason = why,
                "refused before reading the request: {}",
                status.message()
            );
            self.auth.metrics().refused(why);
            let response = status.into_http::<R>();
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}
