//! The client side: gRPC channels over TLS.

use std::io;
use std::net::IpAddr;

use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tonic::transport::{Channel, Uri};

use super::Tls;
use crate::transport::{endpoint, ChannelCache, Connector, Timeouts};

/// Opens `uri`'s host over TCP (from `source` when given) and runs the TLS
/// handshake with the configuration current at that moment, checking the
/// server's certificate against the host name or IP address dialled.
pub async fn dial(
    uri: Uri,
    tls: Tls,
    source: Option<IpAddr>,
) -> Result<TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>, io::Error> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let host = uri
        .host()
        .ok_or_else(|| invalid(format!("no host in {uri}")))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri
        .port_u16()
        .ok_or_else(|| invalid(format!("no port in {uri}")))?;
    let addr = tokio::net::lookup_host((host.as_str(), port))
        .await?
        .next()
        .ok_or_else(|| invalid(format!("{host} resolves to no address")))?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    if let Some(ip) = source {
        socket.bind((ip, 0).into())?;
    }
    let tcp = socket.connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from(host.clone())
        .map_err(|e| invalid(format!("{host:?} is not a server name: {e}")))?;
    let stream = tokio_rustls::TlsConnector::from(tls.client_config())
        .connect(name, tcp)
        .await?;
    Ok(TokioIo::new(stream))
}

/// A channel to `addr` over TLS, opened lazily (the first call connects).
pub fn tls_channel(
    addr: &str,
    timeouts: &Timeouts,
    tls: &Tls,
    source: Option<IpAddr>,
) -> Result<Channel, String> {
    let tls = tls.clone();
    let connect = tower::service_fn(move |uri: Uri| dial(uri, tls.clone(), source));
    Ok(endpoint(addr, timeouts)?.connect_with_connector_lazy(connect))
}

/// [`crate::transport::TcpConnector`] over TLS: one shared HTTP/2
/// connection per peer address; reconnections use the configuration
/// current at that moment.
#[derive(Debug)]
pub struct TlsConnector {
    pub timeouts: Timeouts,
    pub source: Option<IpAddr>,
    tls: Tls,
    channels: ChannelCache,
}

impl TlsConnector {
    pub fn new(tls: Tls, timeouts: Timeouts, source: Option<IpAddr>) -> TlsConnector {
        TlsConnector {
            timeouts,
            source,
            tls,
            channels: ChannelCache::default(),
        }
    }
}

impl Connector for TlsConnector {
    fn channel(&self, addr: &str) -> Result<Channel, String> {
        self.channels.get_or_open(addr, || {
            tls_channel(addr, &self.timeouts, &self.tls, self.source)
        })
    }
}
