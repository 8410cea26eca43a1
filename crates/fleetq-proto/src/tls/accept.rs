//! The server side: TLS handshakes on accepted TCP connections.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_stream::{Stream, StreamExt};

use super::Tls;

/// How long a connection may take to finish its handshake; a client that
/// opens a socket and says nothing must not hold a task forever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection whose TLS handshake failed (no trusted certificate, a
/// certificate from another CA, plaintext, a stalled client).
#[derive(Debug)]
pub struct HandshakeRefused {
    pub peer: Option<SocketAddr>,
    pub error: String,
}

/// Wraps a listener's connections in TLS with the current server
/// configuration of `tls` (so a reload applies to the next connection).
/// Handshakes run concurrently, each bounded; failures go to `refused`
/// and never reach the gRPC server.
pub fn accept<S, E>(
    incoming: S,
    tls: Tls,
    refused: Arc<dyn Fn(HandshakeRefused) + Send + Sync>,
) -> Result<impl Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>>, String>
where
    S: Stream<Item = Result<TcpStream, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    if tls.server_config().is_none() {
        return Err("a server needs its own certificate and key".to_string());
    }
    let (tx, rx) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        loop {
            let conn = tokio::select! {
                c = incoming.next() => c,
                // The server stopped: stop accepting.
                _ = tx.closed() => return,
            };
            let tcp = match conn {
                None => return,
                Some(Ok(tcp)) => tcp,
                Some(Err(e)) => {
                    // Out of file descriptors and the like: retrying at
                    // once would spin a core while the cause lasts.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(config) = tls.server_config() else {
                return;
            };
            let tx = tx.clone();
            let refused = Arc::clone(&refused);
            tokio::spawn(async move {
                let peer = tcp.peer_addr().ok();
                let acceptor = tokio_rustls::TlsAcceptor::from(config);
                let error =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send(Ok(stream)).await;
                            return;
                        }
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"),
                    };
                refused(HandshakeRefused { peer, error });
            });
        }
    });
    Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
}
