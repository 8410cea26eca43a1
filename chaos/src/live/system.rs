//! The system under test, for real: three `fleetq server` processes with
//! sled directories and two `fleetq agent` processes (static inventory,
//! process executor) on loopback. Every connection to a server goes
//! through that server's [`FaultProxy`]; each process sends from its own
//! loopback address (`127.0.0.1N` for server N, `127.0.0.2N` for agent N),
//! so a proxy can cut one sender off and leave the others alone.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proxy::FaultProxy;

/// The lease the servers grant (short, so lease faults play out quickly).
pub const LEASE_TTL: Duration = Duration::from_secs(3);

/// Every process here runs plaintext gRPC: mutual TLS is fleetq's default,
/// and servers and agents refuse to start without certificates unless
/// told `--insecure`; the CLI then needs it too. The faults are injected
/// below TLS (TCP proxies), so it would change nothing they exercise.
pub const INSECURE: &str = "--insecure";

/// GPUs each agent's cluster has.
pub const AGENT_GPUS: u64 = 8;

/// The Kueue configuration the harness applies: one ClusterQueue with 16
/// H100s, the two agents' clusters together.
pub fn config() -> String {
    fleetq_testkit::kueue::one_queue("h100-80gb", "chaos", "chaos", 2 * AGENT_GPUS)
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub struct Server {
    pub id: usize,
    pub listen: String,
    pub proxy: FaultProxy,
    pub source: IpAddr,
    pub child: Option<Child>,
    pub paused: bool,
}

pub struct AgentProc {
    pub cluster: String,
    pub source: IpAddr,
    pub state_dir: PathBuf,
    pub config: PathBuf,
    pub child: Option<Child>,
}

/// The CLI pointed at the servers' proxies; cheap to clone into client
/// threads, which must not wait on the harness while a call hangs.
#[derive(Clone, Debug)]
pub struct Clients {
    pub fleetq: PathBuf,
    pub addrs: Vec<String>,
}

impl Clients {
    /// `fleetq --server <server i> args...`, killed after `timeout`.
    pub fn cli_at(&self, i: usize, args: &[&str], timeout: Duration) -> Result<Output, String> {
        let child = Command::new(&self.fleetq)
            .args(["--server", &self.addrs[i % self.addrs.len()], INSECURE])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.fleetq.display()))?;
        // Collect the output on another thread: polling try_wait() here
        // would deadlock on an answer bigger than the pipe's buffer.
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(timeout) {
            Ok(out) => out.map_err(|e| e.to_string()),
            Err(_) => {
                // SAFETY: kill(2) with plain integers; the child is not
                // reaped until the waiting thread does it, so the pid is ours.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
                Err(format!("fleetq {args:?}: no answer within {timeout:?}"))
            }
        }
    }
}

pub struct System {
    pub fleetq: PathBuf,
    pub dir: PathBuf,
    /// Extra flags for every `fleetq server` (e.g. `--election-timeout`).
    pub server_args: Vec<String>,
    pub servers: Vec<Server>,
    pub agents: Vec<AgentProc>,
}

impl System {
    /// Starts everything and waits for a leader and both clusters.
    pub fn start(fleetq: &Path, dir: &Path) -> Result<System, String> {
        System::start_with(fleetq, dir, Vec::new())
    }

    /// [`System::start`] with extra flags for every server.
    pub fn start_with(
        fleetq: &Path,
        dir: &Path,
        server_args: Vec<String>,
    ) -> Result<System, String> {
        let mut servers = Vec::new();
        for id in 1..=3usize {
            let listen = format!("127.0.0.1:{}", free_port().map_err(|e| e.to_string())?);
            let proxy = FaultProxy::start(&listen).map_err(|e| format!("proxy: {e}"))?;
            servers.push(Server {
                id,
                listen,
                proxy,
                source: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + id as u8)),
                child: None,
                paused: false,
            });
        }
        let mut system = System {
            fleetq: fleetq.to_path_buf(),
            dir: dir.to_path_buf(),
            server_args,
            servers,
            agents: Vec::new(),
        };
        for i in 0..3 {
            system.start_server(i)?;
        }
        system
            .wait_leader(Duration::from_secs(20))
            .ok_or("no leader within 20 s")?;
        let out = system.cli_stdin(&["apply", "-f", "-"], &config())?;
        if !out.status.success() {
            return Err(format!(
                "apply: {}{}",
                String::from_utf8_lossy(&out.stderr),
                system.panics_in_server_logs()
            ));
        }
        for (n, cluster) in ["east", "west"].iter().enumerate() {
            let state_dir = dir.join(format!("agent-{cluster}"));
            let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 21 + n as u8));
            let servers: Vec<String> = system
                .servers
                .iter()
                .map(|s| format!("\"{}\"", s.proxy.addr()))
                .collect();
            let config = dir.join(format!("agent-{cluster}.toml"));
            let text = format!(
                "cluster = \"{cluster}\"\nservers = [{}]\nheartbeat_ms = 200\nexecutor = \"process\"\nrun_as_user = \"nobody\"\nstate_dir = \"{}\"\nsource_address = \"{source}\"\n[[inventory]]\nflavor = \"h100-80gb\"\nresources = {{ \"nvidia.com/gpu\" = \"{AGENT_GPUS}\" }}\n",
                servers.join(", "),
                state_dir.display()
            );
            std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
            system.agents.push(AgentProc {
                cluster: cluster.to_string(),
                source,
                state_dir,
                config,
                child: None,
            });
            system.start_agent(n)?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while system.ready_clusters() < 2 {
            if Instant::now() > deadline {
                return Err("the agents did not register within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(system)
    }

    /// Each server log's panic reports (a line naming the panic and the
    /// line after it), for an error that says a node's Raft core
    /// panicked: the run's directory is gone once the error is printed.
    fn panics_in_server_logs(&self) -> String {
        let mut found = String::new();
        for s in &self.servers {
            let path = self.dir.join(format!("server-{}.log", s.id));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if line.contains("panicked") {
                    found.push_str(&format!("\nserver-{}.log: {line}", s.id));
                    if let Some(next) = lines.get(i + 1) {
                        found.push_str(&format!("\n  {next}"));
                    }
                }
            }
        }
        found
    }

    fn log(&self, name: &str) -> Result<(std::fs::File, std::fs::File), String> {
        let path = self.dir.join(format!("{name}.log"));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let g = f.try_clone().map_err(|e| e.to_string())?;
        Ok((f, g))
    }

    /// Starts (or restarts, from its sled directory) server `i`.
    pub fn start_server(&mut self, i: usize) -> Result<(), String> {
        let peers: Vec<String> = self
            .servers
            .iter()
            .map(|s| format!("{}={}", s.id, s.proxy.addr()))
            .collect();
        let s = &self.servers[i];
        let (out, err) = self.log(&format!("server-{}", s.id))?;
        let child = Command::new(&self.fleetq)
            .args([
                "server",
                INSECURE,
                "--id",
                &s.id.to_string(),
                "--listen",
                &s.listen,
            ])
            .args(["--advertise", &s.proxy.addr().to_string()])
            .args(["--source-address", &s.source.to_string()])
            .args(["--peers", &peers.join(",")])
            .args(["--lease-ttl", &format!("{}s", LEASE_TTL.as_secs())])
            .args(&self.server_args)
            .arg("--data-dir")
            .arg(self.dir.join(format!("node-{}", s.id)))
            // The ledger checks its invariants after every command, whatever
            // the build profile; a broken one panics the server, which the
            // final checks then see as a replica that does not answer.
            .env(fleetq_ledger::INVARIANT_CHECKS_ENV, "on")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.fleetq.display()))?;
        self.servers[i].child = Some(child);
        self.servers[i].paused = false;
        Ok(())
    }

    pub fn start_agent(&mut self, n: usize) -> Result<(), String> {
        let servers: Vec<String> = self
            .servers
            .iter()
            .map(|s| s.proxy.addr().to_string())
            .collect();
        let (out, err) = self.log(&format!("agent-{}", self.agents[n].cluster))?;
        let a = &self.agents[n];
        let child = Command::new(&self.fleetq)
            .args([
                "--server",
                &servers.join(","),
                INSECURE,
                "agent",
                "--config",
            ])
            .arg(&a.config)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the agent: {e}"))?;
        self.agents[n].child = Some(child);
        Ok(())
    }

    /// kill -9.
    pub fn kill_server(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn kill_agent(&mut self, n: usize) {
        if let Some(mut c) = self.agents[n].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP or SIGCONT.
    pub fn pause_server(&mut self, i: usize, pause: bool) {
        if let Some(c) = &self.servers[i].child {
            let signal = if pause { libc::SIGSTOP } else { libc::SIGCONT };
            // SAFETY: kill(2) with plain integers.
            unsafe {
                libc::kill(c.id() as i32, signal);
            }
            self.servers[i].paused = pause;
        }
    }

    /// Cuts server `i` off from the other servers and the agents, both
    /// ways (clients on 127.0.0.1 still reach it, as a client on its side
    /// of a real partition would).
    pub fn isolate_server(&self, i: usize) {
        let me = self.servers[i].source;
        for (j, s) in self.servers.iter().enumerate() {
            if j == i {
                for other in &self.servers {
                    if other.source != me {
                        s.proxy.block(other.source);
                    }
                }
                for a in &self.agents {
                    s.proxy.block(a.source);
                }
            } else {
                s.proxy.block(me);
            }
        }
    }

    /// Cuts agent `n` off from every server.
    pub fn isolate_agent(&self, n: usize) {
        for s in &self.servers {
            s.proxy.block(self.agents[n].source);
        }
    }

    /// Partition sets: servers `a_servers` and agents `a_agents` on one
    /// side, everything else on the other; no message crosses, either way.
    pub fn split(&self, a_servers: &[usize], a_agents: &[usize]) {
        let side_a = |source: IpAddr| {
            a_servers.iter().any(|&i| self.servers[i].source == source)
                || a_agents.iter().any(|&n| self.agents[n].source == source)
        };
        let sources: Vec<IpAddr> = self
            .servers
            .iter()
            .map(|s| s.source)
            .chain(self.agents.iter().map(|a| a.source))
            .collect();
        for (i, s) in self.servers.iter().enumerate() {
            let here = a_servers.contains(&i);
            for &source in &sources {
                if side_a(source) != here {
                    s.proxy.block(source);
                }
            }
        }
    }

    /// Loses each chunk on every server link with probability
    /// `per_mille`/1000 (the connection that lost it is dead).
    pub fn drop_all(&self, per_mille: u64) {
        for s in &self.servers {
            s.proxy.set_drop(per_mille);
        }
    }

    pub fn delay_all(&self, delay: Duration) {
        for s in &self.servers {
            s.proxy.set_delay(delay);
        }
    }

    /// Lifts every network fault and resumes paused servers.
    pub fn heal(&mut self) {
        for s in &self.servers {
            s.proxy.heal();
        }
        for i in 0..self.servers.len() {
            if self.servers[i].paused {
                self.pause_server(i, false);
            }
        }
    }

    /// What a client needs to reach the servers (through their proxies).
    pub fn clients(&self) -> Clients {
        Clients {
            fleetq: self.fleetq.clone(),
            addrs: self
                .servers
                .iter()
                .map(|s| s.proxy.addr().to_string())
                .collect(),
        }
    }

    pub fn cli_at(&self, i: usize, args: &[&str], timeout: Duration) -> Result<Output, String> {
        self.clients().cli_at(i, args, timeout)
    }

    /// The CLI against any server that answers.
    pub fn cli(&self, args: &[&str]) -> Result<Output, String> {
        let mut last = String::new();
        for i in 0..self.servers.len() {
            if self.servers[i].child.is_none() || self.servers[i].paused {
                continue;
            }
            match self.cli_at(i, args, Duration::from_secs(10)) {
                Ok(out) if out.status.success() => return Ok(out),
                Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn cli_json(&self, args: &[&str]) -> Result<Value, String> {
        let out = self.cli(args)?;
        serde_json::from_slice(&out.stdout).map_err(|e| format!("fleetq {args:?}: {e}"))
    }

    fn cli_stdin(&self, args: &[&str], input: &str) -> Result<Output, String> {
        use std::io::Write;
        let addr = self.servers[0].proxy.addr().to_string();
        let mut child = Command::new(&self.fleetq)
            .args(["--server", &addr, INSECURE])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        child.wait_with_output().map_err(|e| e.to_string())
    }

    /// Server `i`'s own status, if it answers.
    pub fn status(&self, i: usize) -> Option<Value> {
        let out = self
            .cli_at(i, &["status", "-o", "json"], Duration::from_secs(3))
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The index of the server that answers as Leader.
    pub fn wait_leader(&self, timeout: Duration) -> Option<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            for i in 0..self.servers.len() {
                if self.servers[i].child.is_none() || self.servers[i].paused {
                    continue;
                }
                if self.status(i).is_some_and(|s| s["state"] == "Leader") {
                    return Some(i);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    fn ready_clusters(&self) -> usize {
        self.cli_json(&["get", "clusters", "-o", "json"])
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter(|c| c["state"] == "Ready")
            .count()
    }

    /// Stops every process (children of the process executor included).
    pub fn shutdown(&mut self) {
        self.heal();
        for n in 0..self.agents.len() {
            self.kill_agent(n);
        }
        for i in 0..self.servers.len() {
            self.kill_server(i);
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.shutdown();
    }
}
