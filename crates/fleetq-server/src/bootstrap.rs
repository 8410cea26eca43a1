//! Running a node for real: TCP listener (TLS unless `--insecure`), TCP or
//! TLS connector, sled storage.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use fleetq_proto::tls::{self, Tls};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;

use crate::clock::SystemClock;
use crate::guard::limits::Limits;
use crate::node::{Node, NodeConfig};
use crate::transport::{SharedConnector, TcpConnector, Timeouts};

/// Binds `listen`, opens the sled database in `data_dir` and starts the
/// node under `limits`; connections to peers go out from `source` where
/// one is given. With `tls`, every connection in and out is mutual TLS
/// with those certificates (reloaded when they change) and `config.auth`
/// should be [`crate::guard::auth::Authorizer::secure`]; without, plaintext.
pub async fn start_node(
    config: NodeConfig,
    limits: Limits,
    listen: SocketAddr,
    data_dir: &Path,
    source: Option<IpAddr>,
    tls: Option<Tls>,
) -> Result<Node, String> {
    std::fs::create_dir_all(data_dir).map_err(|e| {
        format!(
            "cannot create the data directory {}: {e}",
            data_dir.display()
        )
    })?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let (log, sm) = fleetq_ledger::store::open_sled(data_dir, config.ledger.clone())?;
    // Without TCP_NODELAY small gRPC replies wait out Nagle's algorithm and
    // the peer's delayed ACK (about 40 ms each).
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
        })
    });
    let clock = Arc::new(SystemClock);
    match tls {
        None => {
            let connector: SharedConnector =
                Arc::new(TcpConnector::new(Timeouts::default()).with_source(source));
            Node::start_with_limits(config, limits, log, sm, incoming, connector, clock).await
        }
        Some(tls) => {
            let auth = config.auth.clone();
            let incoming = tls::accept(
                incoming,
                tls.clone(),
                Arc::new(move |refused| auth.handshake_refused(refused)),
            )?;
            let connector: SharedConnector =
                Arc::new(tls::TlsConnector::new(tls, Timeouts::default(), source));
            Node::start_with_limits(config, limits, log, sm, incoming, connector, clock).await
        }
    }
}
