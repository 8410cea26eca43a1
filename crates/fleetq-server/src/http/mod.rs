//! The node's small HTTP server (docs/metrics.md): `/metrics` (Prometheus),
//! `/healthz` and `/readyz`, on its own listen address (`--http-listen`).
//!
//! - `/metrics`: Prometheus text format 0.0.4, or OpenMetrics when the
//!   scraper asks for it (`Accept: application/openmetrics-text`); see
//!   [`crate::metrics`] for the series.
//! - `/healthz`: 200 while the node's Raft core runs (the process is worth
//!   keeping), 503 once it has stopped on a fatal error.
//! - `/readyz`: 200 once the node can serve reads and forward writes: Raft
//!   runs, a leader is known, this node is a member of the group and has
//!   applied the log (a new leader: an entry of its own term); 503 with
//!   the reason otherwise.
//! - `/apis/visibility.kueue.x-k8s.io/...`: pending workloads of a
//!   ClusterQueue or LocalQueue, as Kueue's visibility API (JSON, reads
//!   pass the read barrier); see [`crate::api::visibility`].
//! - `/ui`: the web dashboard, fed by `/api/v1/overview` (JSON); see
//!   [`crate::http::ui`].
//!
//! Only GET and HEAD are served; the body is plain text (but for the
//! dashboard's page and JSON).
//!
//! Who sees what (crate::guard::auth::Viewer): `/healthz`, `/readyz`, `/metrics`
//! and the cluster-wide figures of the overview are everyone's; pending
//! workloads and events are shown per namespace, to a tenant with a
//! bearer token (`Authorization: Bearer TOKEN`) or, over HTTPS
//! (`--http-tls`), a tenant's client certificate, as the API would; all
//! to an admin; the visibility API needs one of them. Without TLS, or on
//! `fleetq dev`'s loopback listener, everyone sees everything. Plain HTTP
//! carries a bearer token in the clear: with tokens, use `--http-tls`.

pub mod scrape;
pub mod ui;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fleetq_ledger::raft::Raft;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use openraft::ServerState;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use fleetq_proto::tls::{HandshakeRefused, Tls, HANDSHAKE_TIMEOUT};
use tonic::transport::CertificateDer;

use crate::metrics::MetricsConfig;
use crate::node::Node;
use scrape::NodeCollector;

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running HTTP server; it stops when its node shuts down.
pub struct HttpServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// The address it listens on (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits until it has stopped.
    pub async fn join(self) {
        let _ = self.task.await;
    }
}

/// Binds the HTTP listen address.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

struct State {
    /// Who may see what (workloads per namespace; `/healthz` and
    /// `/readyz` are everyone's).
    auth: crate::guard::auth::Authorizer,
    /// Bound to loopback: callers are this host's (the local dashboard)
    /// and see everything.
    loopback: bool,
    registry: Registry,
    raft: Raft,
    node_id: u64,
    visibility: crate::api::visibility::Visibility,
    ui: ui::Dashboard,
}

/// Serves `/metrics`, `/healthz` and `/readyz` of `node` on `listener`
/// until the node shuts down.
///
/// `trust_loopback`: a listener bound to loopback shows everything to
/// anyone (`fleetq dev`'s local dashboard); otherwise, with TLS on, a
/// caller without a bearer token sees cluster-wide figures only and a
/// tenant its own namespaces' workloads.
///
/// `tls`: serve HTTPS with the node's certificate (`--http-tls`); a
/// client certificate names the caller as a bearer token would.
pub fn serve(
    listener: TcpListener,
    node: &Node,
    config: MetricsConfig,
    trust_loopback: bool,
    tls: Option<Tls>,
) -> Result<HttpServer, String> {
    if tls.as_ref().is_some_and(|t| t.server_config().is_none()) {
        return Err("HTTPS needs the node's own certificate and key".into());
    }
    let local_addr = listener
        .local_addr()
        .map_err(|e| format!("HTTP listener has no address: {e}"))?;
    let collector = NodeCollector {
        raft: node.raft.clone(),
        handle: node.handle.clone(),
        leases: node.leases.clone(),
        clock: Arc::clone(&node.clock),
        config,
    };
    let state = Arc::new(State {
        auth: node.auth.clone(),
        loopback: trust_loopback && local_addr.ip().is_loopback(),
        registry: scrape::registry(collector, &node.metrics),
        raft: node.raft.clone(),
        node_id: node.id,
        visibility: crate::api::visibility::Visibility::new(
            Arc::clone(&node.proposer),
            node.handle.clone(),
        ),
        ui: ui::Dashboard::new(node),
    });
    let task = tokio::spawn(accept_loop(listener, state, node.stopping(), tls));
    Ok(HttpServer { local_addr, task })
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
    tls: Option<Tls>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off.
                    tracing::debug!(error = %e, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return,
        };
        let state = Arc::clone(&state);
        let stop = stop.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, None, state, stop).await,
                Some(tls) => {
                    if let Some((stream, cert)) = handshake(stream, peer, &tls, &state.auth).await {
                        serve_connection(stream, cert, state, stop).await;
                    }
                }
            }
        });
    }
}

/// The TLS handshake of an HTTPS connection (`--http-tls`), with the
/// node's current certificate; the client's certificate, if it sent one
/// the CA signed, names the caller as on the API.
async fn handshake(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: &Tls,
    auth: &crate::guard::auth::Authorizer,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Option<CertificateDer<'static>>,
)> {
    let mut config = (*tls.server_config()?).clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let error = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => {
            let cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .cloned();
            return Some((stream, cert));
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"),
    };
    auth.handshake_refused(HandshakeRefused {
        peer: Some(peer),
        error,
    });
    None
}

/// Serves the requests of one connection, plain or TLS.
async fn serve_connection<S>(
    stream: S,
    cert: Option<CertificateDer<'static>>,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let cert = cert.map(Arc::new);
    let service = service_fn(move |req| {
        let state = Arc::clone(&state);
        let cert = cert.clone();
        async move {
            let authorization = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            let viewer =
                match state
                    .auth
                    .http_viewer(authorization, cert.as_deref(), state.loopback)
                {
                    Ok(v) => v,
                    Err(why) => {
                        let mut r = text(StatusCode::UNAUTHORIZED, format!("{why}\n"));
                        r.headers_mut().insert(
                            hyper::header::WWW_AUTHENTICATE,
                            HeaderValue::from_static("Bearer"),
                        );
                        return Ok::<_, Infallible>(r);
                    }
                };
            // /apis/visibility.kueue.x-k8s.io/...: see crate::api::visibility.
            let visibility = crate::api::visibility::respond(
                &state.visibility,
                req.method(),
                req.uri(),
                &viewer,
            );
            if let Some(r) = visibility.await {
                return Ok(r);
            }
            Ok::<_, Infallible>(handle(&state, &req, &viewer))
        }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection");
            }
        }
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}

/// Resolves once the node shuts down.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn handle(
    state: &State,
    req: &Request<Incoming>,
    viewer: &crate::guard::auth::Viewer,
) -> Response<Full<Bytes>> {
    let head = req.method() == Method::HEAD;
    if req.method() != Method::GET && !head {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n",
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let mut response = match req.uri().path() {
        "/metrics" => {
            let openmetrics = req
                .headers()
                .get_all(ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| v.contains("application/openmetrics-text"));
            scrape(&state.registry, openmetrics)
        }
        "/healthz" => match health(&state.raft.metrics().borrow()) {
            Ok(m) => text(StatusCode::OK, m),
            Err(m) => text(StatusCode::SERVICE_UNAVAILABLE, m),
        },
        "/readyz" => match readiness(&state.raft.metrics().borrow(), state.node_id) {
            Ok(m) => text(StatusCode::OK, m),
            Err(m) => text(StatusCode::SERVICE_UNAVAILABLE, m),
        },
        // The dashboard: see crate::http::ui.
        "/ui" | "/ui/" => ui::page(),
        ui::OVERVIEW_PATH => state.ui.overview_response(viewer),
        "/" => text(
            StatusCode::OK,
            "fleetq: /ui (dashboard), /metrics (Prometheus), /healthz, /readyz\n",
        ),
        other => text(
            StatusCode::NOT_FOUND,
            format!("{other}: not found; try /metrics, /healthz or /readyz\n"),
        ),
    };
    if head {
        *response.body_mut() = Full::new(Bytes::new());
    }
    response
}

fn scrape(registry: &Registry, openmetrics: bool) -> Response<Full<Bytes>> {
    let mut body = String::new();
    let (encoded, content_type) = if openmetrics {
        (
            prometheus_client::encoding::text::encode(&mut body, registry),
            OPENMETRICS_TEXT,
        )
    } else {
        (
            prometheus_client::encoding::prometheus_text::encode(&mut body, registry),
            PROMETHEUS_TEXT,
        )
    };
    if encoded.is_err() {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "metrics could not be encoded\n",
        );
    }
    let mut r = text(StatusCode::OK, body);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

type RaftMetrics = openraft::RaftMetrics<u64, openraft::BasicNode>;

/// `/healthz`: the Raft core still runs.
pub fn health(m: &RaftMetrics) -> Result<String, String> {
    match &m.running_state {
        Ok(()) => Ok("ok\n".into()),
        Err(e) => Err(format!("Raft stopped: {e}\n")),
    }
}

/// `/readyz`: whether this node can serve (reads answer from an applied
/// ledger, writes reach a leader).
pub fn readiness(m: &RaftMetrics, id: u64) -> Result<String, String> {
    if let Err(e) = &m.running_state {
        return Err(format!("not ready: Raft stopped: {e}\n"));
    }
    let Some(leader) = m.current_leader else {
        return Err("not ready: no Raft leader known\n".into());
    };
    if m.membership_config.membership().get_node(&id).is_none() {
        return Err(format!(
            "not ready: node {id} is not a member of the Raft group yet\n"
        ));
    }
    let Some(applied) = m.last_applied else {
        return Err("not ready: nothing applied yet\n".into());
    };
    if m.state == ServerState::Leader && applied.leader_id.term != m.current_term {
        return Err(format!(
            "not ready: leader of term {} has not applied an entry of its term yet\n",
            m.current_term
        ));
    }
    Ok(format!(
        "ready: node {id}, leader {leader}, applied index {}\n",
        applied.index
    ))
}
