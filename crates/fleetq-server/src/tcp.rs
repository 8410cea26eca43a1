//! Running a node for real: TCP listener, TCP connector, sled storage.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::StreamExt;

use crate::clock::SystemClock;
use crate::limits::Limits;
use crate::node::{Node, NodeConfig};
use crate::transport::{TcpConnector, Timeouts};

/// Binds `listen`, opens the sled database in `data_dir` and starts the
/// node under `limits`; connections to peers go out from `source` where
/// one is given.
pub async fn start_node(
    config: NodeConfig,
    limits: Limits,
    listen: SocketAddr,
    data_dir: &Path,
    source: Option<IpAddr>,
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
    let (log, sm) = fleetq_ledger::store::open_sled(data_dir, config.scheduler.clone())?;
    // Without TCP_NODELAY small gRPC replies wait out Nagle's algorithm and
    // the peer's delayed ACK (about 40 ms each).
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
        })
    });
    let connector = Arc::new(TcpConnector::new(Timeouts::default()).with_source(source));
    Node::start_with_limits(
        config,
        limits,
        log,
        sm,
        incoming,
        connector,
        Arc::new(SystemClock),
    )
    .await
}
