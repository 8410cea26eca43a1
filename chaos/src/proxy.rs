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
//! heal work normally. `block(ip)` cuts off one source address (give each
//! process its own loopback address, `127.0.0.N`, to partition peers
//! selectively); `set_delay` slows every chunk down; `set_drop` loses
//! chunks at random, and since TCP cannot skip lost bytes, a connection
//! that lost one is a black hole from then on (loss as RPCs see it).
//!
//! ```no_run
//! let proxy = fleetq_chaos::proxy::FaultProxy::start("127.0.0.1:7400").unwrap();
//! // point a client at proxy.addr() ...
//! proxy.partition();
//! proxy.heal();
//! ```

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::Duration;

/// One proxied connection: where it came from, and whether a fault killed
/// it (a killed connection never carries another byte).
struct Conn {
    source: IpAddr,
    dead: AtomicBool,
}

/// The rules every pump consults before it forwards a chunk.
#[derive(Default)]
struct Link {
    partitioned: AtomicBool,
    /// Sources cut off from the target (the proxy tells peers apart by
    /// their source address: give each process its own loopback IP).
    blocked: Mutex<HashSet<IpAddr>>,
    /// Added to every forwarded chunk.
    delay_ms: AtomicU64,
    /// Chance, per mille, that a chunk is lost (killing its connection).
    drop_per_mille: AtomicU64,
    /// State of the xorshift generator the drops draw from.
    dice: AtomicU64,
    conns: Mutex<Vec<Weak<Conn>>>,
    stopped: AtomicBool,
}

impl Link {
    fn forwards(&self, conn: &Conn) -> bool {
        !conn.dead.load(Ordering::SeqCst)
            && !self.partitioned.load(Ordering::SeqCst)
            && !self.lock_blocked().contains(&conn.source)
    }

    fn lock_blocked(&self) -> std::sync::MutexGuard<'_, HashSet<IpAddr>> {
        self.blocked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the next chunk is lost.
    fn drops(&self) -> bool {
        let p = self.drop_per_mille.load(Ordering::SeqCst);
        if p == 0 {
            return false;
        }
        let mut x = self.dice.load(Ordering::SeqCst) | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.dice.store(x, Ordering::SeqCst);
        x % 1000 < p
    }

    /// Kills the open connections `which` selects.
    fn kill(&self, which: impl Fn(&Conn) -> bool) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|w| w.strong_count() > 0);
        for conn in conns.iter().filter_map(Weak::upgrade) {
            if which(&conn) {
                conn.dead.store(true, Ordering::SeqCst);
            }
        }
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
        FaultProxy::start_on("127.0.0.1:0", target)
    }

    /// Listens on `listen` and forwards to `target`.
    pub fn start_on(listen: &str, target: &str) -> std::io::Result<FaultProxy> {
        let target: SocketAddr = target.parse().map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("target {target:?}: {e}"),
            )
        })?;
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let link = Arc::new(Link {
            dice: AtomicU64::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(addr.port())),
            ..Link::default()
        });
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
        self.link.partitioned.store(true, Ordering::SeqCst);
        self.link.kill(|_| true);
    }

    /// Black-holes everything from `source` (open connections for good).
    pub fn block(&self, source: IpAddr) {
        self.link.lock_blocked().insert(source);
        self.link.kill(|c| c.source == source);
    }

    /// Delays every chunk by `delay` from now on.
    pub fn set_delay(&self, delay: Duration) {
        self.link
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Loses each chunk from now on with probability `per_mille`/1000;
    /// the connection that lost it carries nothing more.
    pub fn set_drop(&self, per_mille: u64) {
        self.link
            .drop_per_mille
            .store(per_mille.min(1000), Ordering::SeqCst);
    }

    /// Lifts every fault: new connections get through (connections a
    /// fault killed stay dead), no delay, no loss.
    pub fn heal(&self) {
        self.link.partitioned.store(false, Ordering::SeqCst);
        self.link.lock_blocked().clear();
        self.link.delay_ms.store(0, Ordering::SeqCst);
        self.link.drop_per_mille.store(0, Ordering::SeqCst);
    }

    pub fn is_partitioned(&self) -> bool {
        self.link.partitioned.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.link.stopped.store(true, Ordering::SeqCst);
        self.link.kill(|_| true);
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

/// One proxied connection. Until the link forwards for it, the upstream
/// connection is not even opened (the server sees nothing) and the
/// client's bytes wait unread.
fn connect(client: TcpStream, target: SocketAddr, link: Arc<Link>) {
    let Ok(peer) = client.peer_addr() else { return };
    let conn = Arc::new(Conn {
        source: peer.ip(),
        dead: AtomicBool::new(false),
    });
    link.conns
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::downgrade(&conn));
    let _ = client.set_nodelay(true);
    while !link.forwards(&conn) {
        if conn.dead.load(Ordering::SeqCst) || link.stopped.load(Ordering::SeqCst) {
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
    let (up_link, up_conn) = (link.clone(), conn.clone());
    thread::spawn(move || pump(client, server, up_link, up_conn));
    pump(server2, client2, link, conn);
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

/// Copies `from` to `to` while the link forwards for this connection;
/// a connection that cannot forward a chunk is dead from then on and
/// everything it reads is dropped on the floor.
fn pump(mut from: TcpStream, mut to: TcpStream, link: Arc<Link>, conn: Arc<Conn>) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if !link.forwards(&conn) || link.drops() {
                    conn.dead.store(true, Ordering::SeqCst);
                    continue;
                }
                let delay = link.delay_ms.load(Ordering::SeqCst);
                if delay > 0 {
                    thread::sleep(Duration::from_millis(delay));
                }
                if to.write_all(&buf[..n]).is_err() {
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
    if link.forwards(&conn) {
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

    #[test]
    fn dropping_every_chunk_kills_connections_until_the_heal() {
        let proxy = FaultProxy::start(&echo_server().to_string()).unwrap();
        proxy.set_drop(1000);
        assert_eq!(round_trip(proxy.addr()), None, "every chunk is lost");
        proxy.heal();
        assert_eq!(round_trip(proxy.addr()).as_deref(), Some(&b"ping"[..]));
    }

    #[test]
    fn blocking_a_source_cuts_it_off_until_the_heal() {
        let proxy = FaultProxy::start(&echo_server().to_string()).unwrap();
        proxy.block("127.0.0.2".parse().unwrap());
        assert_eq!(round_trip(proxy.addr()).as_deref(), Some(&b"ping"[..]));
        proxy.block("127.0.0.1".parse().unwrap());
        assert_eq!(round_trip(proxy.addr()), None, "127.0.0.1 is cut off");
        proxy.heal();
        assert_eq!(round_trip(proxy.addr()).as_deref(), Some(&b"ping"[..]));
    }
}
