//! tonic over turmoil's simulated TCP: the accepted-connection wrapper the
//! server side needs and a [`Connector`] for the client side (see turmoil's
//! `examples/grpc`).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use fleetq_server::transport::{endpoint, ChannelCache, Connector, Timeouts};
use futures::Stream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::transport::{Channel, Uri};
use turmoil::net::{TcpListener, TcpStream};

/// An accepted simulated TCP connection, as tonic's server wants it.
pub struct Accepted(pub TcpStream);

impl Connected for Accepted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        TcpConnectInfo {
            local_addr: self.0.local_addr().ok(),
            remote_addr: self.0.peer_addr().ok(),
        }
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The stream of connections accepted on `listener`, for
/// `Node::start`'s `incoming`.
pub fn incoming(listener: TcpListener) -> impl Stream<Item = io::Result<Accepted>> + Send {
    futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(s, _)| Accepted(s));
        Some((next, listener))
    })
}

/// Opens lazily connected channels over turmoil's network, one shared
/// HTTP/2 connection per address (like the real `TcpConnector`), with the
/// same timeouts and keep-alive as production. A connector belongs to one
/// simulated host: its channels' background tasks run on that host.
#[derive(Debug, Default)]
pub struct SimConnector {
    timeouts: Timeouts,
    /// One shared connection per address (a server's peers), or a new
    /// connection per call (an agent's sessions, like its real TCP path).
    shared: bool,
    channels: ChannelCache,
}

impl SimConnector {
    pub fn new(timeouts: Timeouts) -> SimConnector {
        SimConnector {
            timeouts,
            shared: true,
            channels: ChannelCache::default(),
        }
    }

    /// A new connection for every channel asked for.
    pub fn fresh(timeouts: Timeouts) -> SimConnector {
        SimConnector {
            shared: false,
            ..SimConnector::new(timeouts)
        }
    }
}

impl Connector for SimConnector {
    fn channel(&self, addr: &str) -> Result<Channel, String> {
        if self.shared {
            self.channels.get_or_open(addr, || self.open(addr))
        } else {
            self.open(addr)
        }
    }
}

impl SimConnector {
    /// A new lazily connected channel to `addr` over turmoil's network.
    fn open(&self, addr: &str) -> Result<Channel, String> {
        let connect = tower::service_fn(|uri: Uri| async move {
            let authority = uri.authority().map(|a| a.to_string()).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("no host:port in {uri}"),
                )
            })?;
            let stream = TcpStream::connect(authority).await?;
            Ok::<_, io::Error>(TokioIo::new(stream))
        });
        Ok(endpoint(addr, &self.timeouts)?.connect_with_connector_lazy(connect))
    }
}
