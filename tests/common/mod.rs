//! A real fleetq control plane for end-to-end tests: `fleetq server`
//! processes on ephemeral loopback ports with their own temp dirs, driven
//! through the real CLI.
//!
//! Mutual TLS is the default on every gRPC link; the group's servers run
//! plaintext (`--insecure`, see [`INSECURE`]) and [`cli`] talks to them
//! likewise. A test that starts `fleetq dev --tls-dir DIR` (mutual TLS with
//! certificates dev makes in DIR) runs the CLI with [`cli_tls`].

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const FLEETQ: &str = env!("CARGO_BIN_EXE_fleetq");

/// The global flag for plaintext gRPC: servers and agents refuse to start
/// without TLS material unless given it, and the CLI needs it to talk to
/// them.
pub const INSECURE: &str = "--insecure";

/// A free loopback port (the listener is closed again at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The first of `count` consecutive free loopback ports, drawn from
/// `from..from + span` and at least 3 away from every port in `avoid`.
/// Each test that starts `fleetq dev` on fixed ports draws from a range of
/// its own below Linux's ephemeral range (32768-60999), so tests running
/// at once, and the client connections they make, cannot take its ports.
pub fn consecutive_free_ports(from: u16, span: u16, count: u16, avoid: &[u16]) -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
        ^ std::process::id().wrapping_mul(2_654_435_761);
    for i in 0..200u32 {
        let base = from + (seed.wrapping_add(i.wrapping_mul(7_919)) % u32::from(span)) as u16;
        if avoid.iter().any(|a| base.abs_diff(*a) < 3) {
            continue;
        }
        if (base..base + count).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!(
        "no {count} consecutive free ports in {from}..{}",
        from + span
    );
}

/// What one plain HTTP/1.1 request got back.
#[derive(Debug)]
pub struct HttpReply {
    pub status: u16,
    /// Status line and headers, lower-cased.
    pub head: String,
    pub body: String,
}

/// One plain HTTP/1.1 request (no body), waiting at most `timeout` for
/// the answer; `None` when nothing (or nothing parseable) came back.
pub fn http(addr: &str, method: &str, path: &str, timeout: Duration) -> Option<HttpReply> {
    http_with(addr, method, path, "", timeout)
}

/// [`http`] with extra header lines (each ending in `\r\n`).
pub fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &str,
    timeout: Duration,
) -> Option<HttpReply> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    HttpReply::parse(&raw)
}

impl HttpReply {
    /// A whole HTTP/1.1 response as read from the socket.
    pub fn parse(raw: &str) -> Option<HttpReply> {
        let (head, body) = raw.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some(HttpReply {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_string(),
        })
    }
}

pub struct Group {
    pub dir: tempfile::TempDir,
    pub addrs: Vec<String>,
    /// How many of `addrs` are initial members (`--peers`).
    pub initial: usize,
    pub extra: Vec<String>,
    pub children: Vec<Option<Child>>,
    /// The fleetq binary each node runs (this build's unless a test
    /// upgrades from another).
    pub binaries: Vec<PathBuf>,
}

impl Group {
    /// Starts `n` nodes with `extra` flags on each.
    pub fn start(n: usize, extra: &[&str]) -> Group {
        Group::start_with(Path::new(FLEETQ), n, extra)
    }

    /// Three nodes with `extra` flags, a leader elected, and [`CONFIG`]
    /// applied: where most end-to-end tests begin.
    pub fn configured(extra: &[&str]) -> Group {
        let group = Group::start(3, extra);
        group
            .wait_leader(Duration::from_secs(15))
            .expect("a leader is elected");
        let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
        assert!(out.status.success(), "{}", text(&out));
        group
    }

    /// Starts `n` nodes of `binary` (another build of fleetq).
    pub fn start_with(binary: &Path, n: usize, extra: &[&str]) -> Group {
        let dir = tempfile::tempdir().expect("temp dir");
        let addrs: Vec<String> = (0..n)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let mut group = Group {
            dir,
            addrs,
            initial: n,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            children: Vec::new(),
            binaries: vec![binary.to_path_buf(); n],
        };
        for i in 0..n {
            let child = group.spawn(i + 1);
            group.children.push(Some(child));
        }
        group
    }

    pub fn peers(&self) -> String {
        self.addrs[..self.initial]
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn data_dir(&self, id: usize) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    fn spawn(&self, id: usize) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("node-{id}.log")))
            .expect("log file");
        let log2 = log.try_clone().expect("log file");
        Command::new(&self.binaries[id - 1])
            .arg("server")
            .arg(INSECURE)
            .args(["--id", &id.to_string()])
            .args(["--listen", &self.addrs[id - 1]])
            .args([
                "--data-dir",
                self.data_dir(id).to_str().expect("utf-8 path"),
            ])
            .args(["--peers", &self.peers()])
            .args(&self.extra)
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .expect("fleetq server starts")
    }

    /// Starts one more node outside the initial members, configured by a
    /// TOML file instead of flags; it waits to be added as a learner.
    pub fn add_node_from_toml(&mut self) -> usize {
        let id = self.addrs.len() + 1;
        self.addrs.push(format!("127.0.0.1:{}", free_port()));
        let config = format!(
            "id = {id}\nlisten = \"{}\"\ndata_dir = \"{}\"\npeers = [{}]\nsnapshot_every = 20\nkeep_logs = 5\n",
            self.addrs[id - 1],
            self.data_dir(id).display(),
            self.peers()
                .split(',')
                .map(|p| format!("\"{p}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let path = write_file(self.dir.path(), &format!("node-{id}.toml"), &config);
        self.binaries.push(PathBuf::from(FLEETQ));
        let log =
            std::fs::File::create(self.dir.path().join(format!("node-{id}.log"))).expect("log");
        let log2 = log.try_clone().expect("log");
        let child = Command::new(FLEETQ)
            .args(["server", "--config", path.to_str().expect("utf-8 path")])
            .arg(INSECURE)
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .expect("fleetq server starts");
        self.children.push(Some(child));
        id
    }

    /// kill -9.
    pub fn kill(&mut self, id: usize) {
        if let Some(mut c) = self.children[id - 1].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a killed node again from its data directory.
    pub fn restart(&mut self, id: usize) {
        assert!(
            self.children[id - 1].is_none(),
            "node {id} is still running"
        );
        let child = self.spawn(id);
        self.children[id - 1] = Some(child);
    }

    /// Starts a killed node again from its data directory, running
    /// `binary` from now on (an upgrade or a rollback).
    pub fn restart_with(&mut self, id: usize, binary: &Path) {
        self.binaries[id - 1] = binary.to_path_buf();
        self.restart(id);
    }

    pub fn addr(&self, id: usize) -> &str {
        &self.addrs[id - 1]
    }

    pub fn log(&self, id: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("node-{id}.log"))).unwrap_or_default()
    }

    /// Runs the CLI against node `id`.
    pub fn cli(&self, id: usize, args: &[&str]) -> Output {
        cli(self.addr(id), args)
    }

    /// The node's status, or None if it does not answer.
    pub fn status(&self, id: usize) -> Option<Value> {
        let out = self.cli(id, &["status", "-o", "json"]);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Waits until some running node reports a leader that is itself
    /// running and answers as Leader; returns its id.
    pub fn wait_leader(&self, timeout: Duration) -> Option<usize> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            for id in 1..=self.addrs.len() {
                if self.children[id - 1].is_none() {
                    continue;
                }
                if let Some(s) = self.status(id) {
                    if s["state"] == "Leader" {
                        return Some(id);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Waits until every running node has applied the same index and
    /// reports the same state hash; returns the hash.
    pub fn wait_converged(&self, timeout: Duration) -> Result<String, String> {
        let start = Instant::now();
        let mut last = String::new();
        while start.elapsed() < timeout {
            let statuses: Vec<Value> = (1..=self.addrs.len())
                .filter(|id| self.children[id - 1].is_some())
                .filter_map(|id| self.status(id))
                .collect();
            let running = self.children.iter().filter(|c| c.is_some()).count();
            if statuses.len() == running {
                let applied: Vec<_> = statuses.iter().map(|s| s["lastApplied"].clone()).collect();
                let hashes: Vec<_> = statuses.iter().map(|s| s["stateHash"].clone()).collect();
                if applied.windows(2).all(|w| w[0] == w[1])
                    && hashes.windows(2).all(|w| w[0] == w[1])
                {
                    return Ok(hashes[0].as_str().unwrap_or_default().to_string());
                }
                last = format!("applied {applied:?} hashes {hashes:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("replicas did not converge: {last}"))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The logs live in a temporary directory that goes with the group:
        // a failing test shows their ends, so a failure seen only in CI
        // can be read from CI's output.
        if std::thread::panicking() {
            self.print_log_tails(60);
        }
    }
}

impl Group {
    fn print_log_tails(&self, lines: usize) {
        for id in 1..=self.addrs.len() {
            let log = self.log(id);
            let all: Vec<&str> = log.lines().collect();
            let tail = &all[all.len().saturating_sub(lines)..];
            eprintln!("==== node {id}: last {} lines of its log", tail.len());
            for line in tail {
                eprintln!("{line}");
            }
        }
    }
}

/// Runs the CLI against the plaintext server at `addr` (a [`Group`]
/// node, or `fleetq dev --insecure`).
pub fn cli(addr: &str, args: &[&str]) -> Output {
    Command::new(FLEETQ)
        .args(["--server", addr, INSECURE])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("fleetq CLI runs")
}

/// Runs the CLI against the mutual-TLS server at `addr` with the client
/// certificate in `tls_dir` (`FLEETQ_TLS_DIR`), as `fleetq dev --tls-dir
/// DIR` makes it; never the user's ~/.fleetq/tls.
pub fn cli_tls(addr: &str, tls_dir: &Path, args: &[&str]) -> Output {
    Command::new(FLEETQ)
        .args(["--server", addr])
        .args(args)
        .env("FLEETQ_TLS_DIR", tls_dir)
        .stdin(Stdio::null())
        .output()
        .expect("fleetq CLI runs")
}

/// [`cli`] with `input` on standard input.
pub fn cli_stdin(addr: &str, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(FLEETQ)
        .args(["--server", addr, INSECURE])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fleetq CLI runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("fleetq CLI finishes")
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Polls `check` until it returns Some or the timeout passes.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(v) = check() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write file");
    p
}

/// A ClusterQueue with 8 GPUs of flavor h100-80gb, a LocalQueue
/// default/team-a and a priority class.
pub const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: team-a
spec:
  clusterQueue: team-a
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
"#;

/// Workloads of the default namespace as `get workloads -o json` shows them.
pub fn workloads(group: &Group, id: usize) -> Vec<Value> {
    let out = group.cli(id, &["get", "workloads", "-o", "fleetq-json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("a JSON array")
}

/// A child process killed (and reaped) when it goes out of scope.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child process that writes its log to a file in a temporary
/// directory it keeps (a `fleetq dev` or `fleetq server` of a test):
/// killed and reaped when dropped, as [`Process`].
pub struct Logged {
    pub child: Process,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Logged {
    pub fn new(child: Child, log: PathBuf, dir: tempfile::TempDir) -> Logged {
        Logged {
            child: Process(child),
            log,
            _dir: dir,
        }
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A `fleetq agent` for `cluster` with the Kubernetes inventory and
/// executor, on the API server of `kubeconfig`, every node of `group` as
/// a server, a `--flavor` per entry of `flavors`, and `extra` flags. Its
/// output goes to `agent.log` in the group's directory for `kube-east`,
/// `agent-CLUSTER.log` for another.
pub fn kube_agent(
    group: &Group,
    kubeconfig: &Path,
    cluster: &str,
    flavors: &[&str],
    extra: &[&str],
) -> Process {
    let log_name = match cluster {
        "kube-east" => "agent.log".to_string(),
        other => format!("agent-{other}.log"),
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(group.dir.path().join(log_name))
        .expect("log");
    let mut command = Command::new(FLEETQ);
    command.args([
        INSECURE,
        "--server",
        &group.addrs.join(","),
        "agent",
        "--cluster",
        cluster,
        "--inventory",
        "kubernetes",
        "--executor",
        "kubernetes",
        "--kubeconfig",
        kubeconfig.to_str().expect("utf-8"),
    ]);
    for flavor in flavors {
        command.args(["--flavor", flavor]);
    }
    command
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .map(Process)
        .expect("fleetq agent starts")
}
