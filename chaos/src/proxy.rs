//! A TCP fault proxy for live chaos and end-to-end tests: real processes
//! talk through it to real sockets, and the test cuts or heals the link.
//!
//! A partition is a black hole, not a refusal: the proxy keeps accepting
//! connections and reading bytes but forwards nothing, in either
//! direction, the way a dropped route or a dead switch behaves. Peers find
//! out only through their own timeouts (HTTP/2 keep-alive, leases), which
//! is what the protocol has to survive. A connection that was open when
//! the partition began stays dead after the heal (its byte stream lost
//! data, so no protocol could resume it); connections opened after the
//! heal work normally.
//!
//! ```no_run
//! let proxy = fleetq_chaos::proxy::FaultProxy::start("127.0.0.1:7400").unwrap();
//! // point a client at proxy.addr() ...
//! proxy.partition();
//! proxy.heal();
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// What every pump consults before it forwards a chunk.
#[derive(Default)]
struct Link {
    partitioned: AtomicBool,
    /// Bumped by every partition: connections of older generations stay
    /// black-holed forever.
    generation: AtomicU64,
    stopped: AtomicBool,
}

impl Link {
    fn forwards(&self, born: u64) -> bool {
        !self.partitioned.load(Ordering::SeqCst) && self.generation.load(Ordering::SeqCst) == born
    }
}

/// A proxy from a loopback port to one target address.
pub struct FaultProxy {
    addr: SocketAddr,
    link: Arc<Link>,
}

impl FaultProxy {
    /// Listens on an ephemeral loopback port and forwards to `target`.
    pub fn start(target: &str) -> std::io::Result<FaultProxy> {
        let target: SocketAddr = target.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("target {target:?}: {e}"),
            )
        })?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let link = Arc::new(Link::default());
        let accept_link = link.clone();
        thread::spawn(move || accept_loop(listener, target, accept_link));
        Ok(FaultProxy { addr, link })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Black-holes the link: open connections stop carrying bytes for
    /// good; new ones are accepted and carry nothing until the heal.
    pub fn partition(&self) {
        self.link.generation.fetch_add(1, Ordering::SeqCst);
        self.link.partitioned.store(true, Ordering::SeqCst);
    }

    /// Lets connections opened from now on through.
    pub fn heal(&self) {
        self.link.generation.fetch_add(1, Ordering::SeqCst);
        self.link.partitioned.store(false, Ordering::SeqCst);
    }

    pub fn is_partitioned(&self) -> bool {
        self.link.partitioned.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.link.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees `stopped`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(100));
    }
}

fn accept_loop(listener: TcpListener, target: SocketAddr, link: Arc<Link>) {
    for client in listener.incoming() {
        if link.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let link = link.clone();
        thread::spawn(move || connect(client, target, link));
    }
}

/// One proxied connection. While partitioned, the upstream connection is
/// not even opened: the server sees nothing of it.
fn connect(client: TcpStream, target: SocketAddr, link: Arc<Link>) {
    let _ = client.set_nodelay(true);
    let born = link.generation.load(Ordering::SeqCst);
    while !link.forwards(born) {
        // Swallow what the client sends until it gives up, or until the
        // proxy is dropped.
        if link.generation.load(Ordering::SeqCst) != born || link.stopped.load(Ordering::SeqCst) {
            return drain(client, &link);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else {
        return;
    };
    let _ = server.set_nodelay(true);
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up_link = link.clone();
    thread::spawn(move || pump(client, server, up_link, born));
    pump(server2, client2, link, born);
}

/// Reads and discards until the peer closes.
fn drain(mut from: TcpStream, link: &Link) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {
                if link.stopped.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Copies `from` to `to` while the link forwards for this connection's
/// generation; afterwards everything read is dropped on the floor.
fn pump(mut from: TcpStream, mut to: TcpStream, link: Arc<Link>, born: u64) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if link.forwards(born) && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if is_timeout(&e) => {
                if link.stopped.load(Ordering::SeqCst) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    // Only a working link passes the close on; a black hole says nothing.
    if link.forwards(born) {
        let _ = to.shutdown(Shutdown::Write);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for s in listener.incoming().flatten() {
                thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let mut w = s;
                    let _ = std::io::copy(&mut r, &mut w);
                });
            }
        });
        addr
    }

    fn round_trip(addr: SocketAddr) -> Option<Vec<u8>> {
        let mut s = TcpStream::connect(addr).ok()?;
        s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
        s.write_all(b"ping").ok()?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).ok()?;
        Some(buf.to_vec())
    }

    #[test]
    fn forwards_black_holes_and_heals() {
        let proxy = FaultProxy::start(&echo_server().to_string()).unwrap();
        assert_eq!(round_trip(proxy.addr()).as_deref(), Some(&b"ping"[..]));

        // An open connection dies with the partition and stays dead.
        let mut open = TcpStream::connect(proxy.addr()).unwrap();
        open.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        open.write_all(b"a").unwrap();
        let mut one = [0u8; 1];
        open.read_exact(&mut one).unwrap();
        proxy.partition();
        assert_eq!(round_trip(proxy.addr()), None, "partitioned");
        proxy.heal();
        open.write_all(b"b").unwrap();
        assert!(open.read_exact(&mut one).is_err(), "old connection is dead");
        assert_eq!(round_trip(proxy.addr()).as_deref(), Some(&b"ping"[..]));
    }
}
