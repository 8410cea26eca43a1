//! How a node reaches its peers, and the limits every RPC runs under.
//!
//! A node never opens sockets by itself: it takes its incoming connections
//! and a [`Connector`] from its caller, so the same code runs over real TCP
//! and over the simulator's network. Every channel has connect and request
//! timeouts and HTTP/2 keep-alive: a peer that vanished behind a partition
//! otherwise leaves an open connection hanging forever (../shared/STACK.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

/// Timeouts and keep-alive settings for gRPC channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// Default per-request limit (Raft RPCs use their own shorter ones).
    pub request: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(1),
            request: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(2),
        }
    }
}

/// An endpoint for `addr` (`host:port` or a URL) with the timeouts set.
pub fn endpoint(addr: &str, timeouts: &Timeouts) -> Result<Endpoint, String> {
    let url = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    let endpoint = Endpoint::from_shared(url)
        .map_err(|e| format!("invalid address {addr:?}: {e}"))?
        .connect_timeout(timeouts.connect)
        .timeout(timeouts.request)
        .http2_keep_alive_interval(timeouts.keepalive_interval)
        .keep_alive_timeout(timeouts.keepalive_timeout)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true);
    Ok(endpoint)
}

/// Opens (lazily) a channel to a peer by address.
pub trait Connector: Send + Sync + 'static {
    fn channel(&self, addr: &str) -> Result<Channel, String>;
}

pub type SharedConnector = Arc<dyn Connector>;

/// One channel per peer address, opened on first use and shared after
/// (a channel multiplexes requests and reconnects by itself).
#[derive(Debug, Default)]
pub struct ChannelCache(Mutex<HashMap<String, Channel>>);

impl ChannelCache {
    /// The channel to `addr`, opened with `open` if there is none yet.
    pub fn get_or_open(
        &self,
        addr: &str,
        open: impl FnOnce() -> Result<Channel, String>,
    ) -> Result<Channel, String> {
        let mut channels = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = channels.get(addr) {
            return Ok(c.clone());
        }
        let channel = open()?;
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }
}

/// Real TCP. One HTTP/2 connection per peer address, shared by every
/// caller (a channel multiplexes requests and reconnects by itself), so a
/// forwarded request costs a stream, not a TCP and HTTP/2 handshake.
#[derive(Debug, Default)]
pub struct TcpConnector {
    pub timeouts: Timeouts,
    /// The local address outgoing connections bind to (a multi-homed host
    /// picking its interface; the live chaos harness telling peers apart).
    pub source: Option<std::net::IpAddr>,
    channels: ChannelCache,
}

impl TcpConnector {
    pub fn new(timeouts: Timeouts) -> TcpConnector {
        TcpConnector {
            timeouts,
            source: None,
            channels: ChannelCache::default(),
        }
    }

    /// Outgoing connections from `source`.
    pub fn with_source(mut self, source: Option<std::net::IpAddr>) -> TcpConnector {
        self.source = source;
        self
    }
}

impl Connector for TcpConnector {
    fn channel(&self, addr: &str) -> Result<Channel, String> {
        self.channels.get_or_open(addr, || {
            Ok(endpoint(addr, &self.timeouts)?
                .local_address(self.source)
                .connect_lazy())
        })
    }
}
