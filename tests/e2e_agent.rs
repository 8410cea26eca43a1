//! End-to-end: a real `fleetq agent` (static inventory, simulated
//! executor) with a 3-node control plane: registration, assignments pushed
//! down, status reported up, lease expiry fencing a killed agent's work and
//! requeueing it, reconcile after the agent restarts, cancel confirmed by
//! the executor.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{cli_stdin, text, wait_for, workloads, Group, CONFIG, FLEETQ, INSECURE};
use fleetq_agent::executor::process::{read_journal, JournalEntry};
use fleetq_chaos::proxy::FaultProxy;
use serde_json::Value;

/// Starts `fleetq --insecure [args...]` (the group's servers are
/// plaintext) with its output appended to the group's `agent.log`
/// (printed when a test fails).
fn spawn_agent(group: &Group, args: &[&str]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(group.dir.path().join("agent.log"))
        .expect("log");
    Command::new(FLEETQ)
        .arg(INSECURE)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq agent starts")
}

/// An agent for `cluster` (8 H100s, static inventory) talking to
/// `servers`, configured by a TOML file with `extra` lines appended.
fn start_cluster_agent(group: &Group, cluster: &str, servers: &[String], extra: &str) -> Child {
    let servers: Vec<String> = servers.iter().map(|a| format!("\"{a}\"")).collect();
    let config = format!(
        "cluster = \"{cluster}\"\nservers = [{}]\nheartbeat_ms = 200\n{extra}[[inventory]]\nflavor = \"h100-80gb\"\nresources = {{ \"nvidia.com/gpu\" = \"8\" }}\n",
        servers.join(", ")
    );
    let path = common::write_file(group.dir.path(), &format!("agent-{cluster}.toml"), &config);
    spawn_agent(group, &["agent", "--config", path.to_str().expect("utf-8")])
}

/// The agent of cluster `east`, straight to the servers.
fn start_agent_from_toml(group: &Group, extra: &str) -> Child {
    start_cluster_agent(group, "east", &group.addrs, extra)
}

fn start_agent(group: &Group) -> Child {
    start_agent_from_toml(group, "[labels]\nregion = \"test\"\n")
}

fn workload(group: &Group, name: &str) -> Option<Value> {
    workloads(group, 1).into_iter().find(|w| w["name"] == name)
}

fn wait_state(group: &Group, name: &str, state: &str, secs: u64) -> Value {
    wait_for(Duration::from_secs(secs), || {
        workload(group, name).filter(|w| w["state"] == state)
    })
    .unwrap_or_else(|| {
        panic!(
            "{name} never {state}: {:?}\nagent log:\n{}",
            workload(group, name),
            std::fs::read_to_string(group.dir.path().join("agent.log")).unwrap_or_default()
        )
    })
}

fn cluster_state(group: &Group) -> String {
    state_of_cluster(group, "east")
}

fn state_of_cluster(group: &Group, cluster: &str) -> String {
    let out = group.cli(1, &["get", "clusters", "-o", "json"]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    list.iter()
        .find(|c| c["name"] == cluster)
        .and_then(|c| c["state"].as_str())
        .unwrap_or("absent")
        .to_string()
}

#[test]
fn agent_runs_admitted_work_and_its_lease_fences_it() {
    let group = Group::configured(&["--lease-ttl", "2s"]);
    let mut agent = start_agent(&group);
    wait_for(Duration::from_secs(15), || {
        (cluster_state(&group) == "Ready").then_some(())
    })
    .expect("the agent registers its cluster");

    let submit = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "submit",
            "--queue",
            "team-a",
            "--name",
            name,
            "--request",
            "nvidia.com/gpu=4",
        ];
        args.extend_from_slice(extra);
        let out = group.cli(1, &args);
        assert!(out.status.success(), "{}", text(&out));
    };
    // A workload that runs 1 s finishes; its quota comes back.
    submit("short", &["--duration", "1s"]);
    let w = wait_state(&group, "short", "Succeeded", 20);
    let history: Vec<&str> = w["reason"].as_str().into_iter().collect();
    assert!(history.is_empty() || !history[0].contains("stopping"));

    // One that runs until stopped.
    submit("long", &[]);
    let w = wait_state(&group, "long", "Running", 20);
    assert_eq!(w["cluster"], "east");
    let first_epoch = w["epoch"].as_u64().expect("epoch");

    // kill -9 the agent: after the lease (2 s) the cluster is lost and the
    // workload is requeued with the eviction as its reason.
    agent.kill().expect("kill agent");
    let _ = agent.wait();
    wait_state(&group, "long", "Pending", 20);
    assert_eq!(cluster_state(&group), "Lost");
    // Its history says why (the current reason is the next cycle's: no
    // Ready cluster).
    let out = group.cli(1, &["describe", "workload", "long"]);
    let described = String::from_utf8_lossy(&out.stdout);
    assert!(described.contains("lost its lease"), "{described}");

    // The agent comes back: reconcile, Ready again, the workload runs again
    // under a new epoch.
    let mut agent = start_agent(&group);
    let w = wait_state(&group, "long", "Running", 20);
    assert!(w["epoch"].as_u64().expect("epoch") > first_epoch, "{w}");
    assert_eq!(cluster_state(&group), "Ready");

    // Cancel: the executor stops it, then the quota is released.
    let out = group.cli(1, &["cancel", "long"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "long", "Cancelled", 20);

    agent.kill().expect("kill agent");
    let _ = agent.wait();
}

#[test]
fn an_nvml_agent_without_a_driver_says_so_and_exits() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        eprintln!("this machine has an NVIDIA driver; the no-driver path is not testable here");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = common::write_file(
        dir.path(),
        "agent.toml",
        "cluster = \"gpu-node\"\nservers = [\"127.0.0.1:1\"]\ninventory_source = \"nvml\"\n[flavors]\n\"NVIDIA H100 80GB HBM3\" = \"h100-80gb\"\n",
    );
    // --insecure: without TLS material the agent would stop at its
    // certificates before it looks for the driver.
    let out = Command::new(FLEETQ)
        .args([INSECURE, "agent", "--config", path.to_str().expect("utf-8")])
        .output()
        .expect("fleetq agent runs");
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Besides the warning --insecure always logs, one clear line.
    let lines: Vec<&str> = stderr
        .trim()
        .lines()
        .filter(|l| !l.contains("--insecure: plaintext gRPC"))
        .collect();
    assert_eq!(lines.len(), 1, "one clear line: {stderr}");
    assert!(stderr.contains("NVML"), "{stderr}");
}

fn start_process_agent(group: &Group, state_dir: &std::path::Path) -> Child {
    let extra = format!(
        "executor = \"process\"\nrun_as_user = \"nobody\"\nstate_dir = \"{}\"\n",
        state_dir.display()
    );
    start_agent_from_toml(group, &extra)
}

#[test]
fn process_executor_runs_real_children_and_readopts_them() {
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let state = group.dir.path().join("agent-state");
    let mut agent = start_process_agent(&group, &state);
    wait_for(Duration::from_secs(15), || {
        (cluster_state(&group) == "Ready").then_some(())
    })
    .expect("the agent registers its cluster");
    // Exit 0 is Succeeded; the child saw exactly its two devices.
    submit(
        &group,
        "ok",
        "2",
        &["sh", "-c", "echo devices=$CUDA_VISIBLE_DEVICES"],
    );
    wait_state(&group, "ok", "Succeeded", 20);
    // Its log (one file per admission) holds what it printed.
    let seen = std::fs::read_dir(state.join("logs"))
        .expect("logs dir")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .find(|l| l.contains("devices="))
        .unwrap_or_default();
    let devices: Vec<&str> = seen
        .trim()
        .trim_start_matches("devices=")
        .split(',')
        .collect();
    assert_eq!(devices.len(), 2, "{seen}");
    assert!(
        devices
            .iter()
            .all(|d| d.starts_with("static-h100-80gb-gpu-")),
        "{seen}"
    );
    // `fleetq logs` shows the same, asked of any node: a follower relays
    // to the leader, which asks the agent in its session.
    for node in 1..=3 {
        let out = group.cli(node, &["logs", "ok"]);
        assert!(out.status.success(), "node {node}: {}", text(&out));
        let printed = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(printed.trim(), seen.trim(), "node {node}");
    }
    let out = group.cli(1, &["logs", "ok", "--tail-bytes", "3"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).len(),
        3,
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("--tail-bytes shows more"),
        "{}",
        text(&out)
    );
    let out = group.cli(1, &["logs", "nosuch"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("does not exist"), "{}", text(&out));

    // Non-zero exit is Failed.
    submit(&group, "bad", "1", &["sh", "-c", "exit 3"]);
    wait_state(&group, "bad", "Failed", 20);

    // A long child survives an agent kill -9 and is re-adopted; a brief
    // one that ends while the agent is down is reported with the exit code
    // it left behind.
    submit(&group, "long", "1", &["sleep", "300"]);
    submit(&group, "brief", "1", &["sh", "-c", "sleep 2; exit 4"]);
    let w = wait_state(&group, "long", "Running", 20);
    wait_state(&group, "brief", "Running", 20);
    let epoch = w["epoch"].as_u64().expect("epoch");
    agent.kill().expect("kill agent");
    let _ = agent.wait();
    std::thread::sleep(Duration::from_secs(3));
    let mut agent = start_process_agent(&group, &state);
    let gone = wait_state(&group, "brief", "Failed", 20);
    let out = group.cli(1, &["describe", "workload", "brief"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("exit 4"),
        "{gone}"
    );
    let w = wait_state(&group, "long", "Running", 20);
    assert_eq!(
        w["epoch"].as_u64(),
        Some(epoch),
        "re-adopted, not restarted: {w}"
    );
    let record = state
        .join("running")
        .join(format!("{}-{epoch}.json", w["id"]));
    let record: Value =
        serde_json::from_slice(&std::fs::read(&record).expect("run record")).expect("json");
    let pid = record["pid"].as_u64().expect("pid");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());

    // Cancel: the process group gets SIGTERM, the quota comes back once it is gone.
    let out = group.cli(1, &["cancel", "long"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "long", "Cancelled", 20);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state_char = stat
        .rsplit_once(')')
        .map(|(_, r)| r.trim_start().chars().next());
    assert!(
        stat.is_empty() || state_char == Some(Some('Z')),
        "child {pid} still runs: {stat}\nagent log:\n{}",
        std::fs::read_to_string(group.dir.path().join("agent.log")).unwrap_or_default()
    );

    // Nothing is left charged: every admission released its quota once.
    let out = group.cli(1, &["describe", "cq", "team-a"]);
    let described = String::from_utf8_lossy(&out.stdout);
    let row = described
        .lines()
        .find(|l| l.starts_with("h100-80gb") && l.contains("nvidia.com/gpu"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(row.split_whitespace().nth(3), Some("0"), "{described}");

    agent.kill().expect("kill agent");
    let _ = agent.wait();
}

#[test]
fn agents_follow_a_new_leader_without_restarting_work_or_spurious_expiry() {
    // The agent keeps its work through a failover that completes within
    // three quarters of a lease of its last acknowledged heartbeat (its
    // fencing margin). 5 s leaves a loaded CI machine room for the
    // election, the reconnect and the new leader's first ack.
    let mut group = Group::start(3, &["--lease-ttl", "5s"]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    // Configured by flags only this time.
    let servers = group.addrs.join(",");
    let mut agent = spawn_agent(
        &group,
        &[
            "--server",
            &servers,
            "agent",
            "--cluster",
            "east",
            "--inventory",
            "static",
            "--static-inventory",
            "h100-80gb=8",
            "--executor",
            "simulated",
        ],
    );
    wait_for(Duration::from_secs(15), || {
        (cluster_state(&group) == "Ready").then_some(())
    })
    .expect("the agent registers its cluster");
    let out = group.cli(
        1,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "steady",
            "--request",
            "nvidia.com/gpu=4",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let w = wait_state(&group, "steady", "Running", 20);
    let epoch = w["epoch"].as_u64().expect("epoch");

    group.kill(leader);
    let new_leader = group
        .wait_leader(Duration::from_secs(10))
        .expect("a new leader");
    // Two lease lengths pass: the agent moved to the new leader in time.
    std::thread::sleep(Duration::from_secs(10));
    let status = group.status(new_leader).expect("status");
    assert!(
        status["counters"]["by_command"]
            .get("ExpireCluster")
            .is_none(),
        "a cluster was expired: {status}"
    );
    let observer = new_leader;
    let all = workloads(&group, observer);
    let steady = all.iter().find(|w| w["name"] == "steady").expect("steady");
    assert_eq!(steady["state"], "Running", "{steady}");
    assert_eq!(steady["epoch"].as_u64(), Some(epoch), "restarted: {steady}");

    // And new work still reaches the agent through the new leader.
    let out = group.cli(
        observer,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "after",
            "--request",
            "nvidia.com/gpu=2",
            "--duration",
            "1s",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        workloads(&group, observer)
            .into_iter()
            .find(|w| w["name"] == "after" && w["state"] == "Succeeded")
    })
    .expect("new work runs after the failover");
    agent.kill().expect("kill agent");
    let _ = agent.wait();
}

/// Submits `name` to team-a asking for `gpus` GPUs, running `command`.
fn submit(group: &Group, name: &str, gpus: &str, command: &[&str]) {
    let request = format!("nvidia.com/gpu={gpus}");
    let mut args = vec![
        "submit",
        "--queue",
        "team-a",
        "--name",
        name,
        "--request",
        &request,
        "--",
    ];
    args.extend_from_slice(command);
    let out = group.cli(1, &args);
    assert!(out.status.success(), "{}", text(&out));
}

/// Agent TOML lines for the process executor in `dir` under `policy`.
fn process_toml(dir: &std::path::Path, policy: &str) -> String {
    format!(
        "executor = \"process\"\nrun_as_user = \"nobody\"\nstate_dir = \"{}\"\nlease_policy = \"{policy}\"\n",
        dir.display()
    )
}

/// The control plane plus two process-executor agents: `east` reaches the
/// servers only through fault proxies (and so never dials a redirect),
/// `west` directly. Returns the proxies and both agents.
struct TwoClusters {
    group: Group,
    proxies: Vec<FaultProxy>,
    east: Child,
    west: Option<Child>,
    east_state: PathBuf,
    west_state: PathBuf,
}

impl TwoClusters {
    fn start(policy: &str) -> TwoClusters {
        let group = Group::start(3, &["--lease-ttl", "3s"]);
        group
            .wait_leader(Duration::from_secs(15))
            .expect("a leader is elected");
        let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
        assert!(out.status.success(), "{}", text(&out));
        let proxies: Vec<FaultProxy> = group
            .addrs
            .iter()
            .map(|a| FaultProxy::start(a).expect("proxy"))
            .collect();
        let via: Vec<String> = proxies.iter().map(|p| p.addr().to_string()).collect();
        let east_state = group.dir.path().join("east-state");
        let west_state = group.dir.path().join("west-state");
        let east = start_cluster_agent(
            &group,
            "east",
            &via,
            &format!(
                "{}follow_redirects = false\n",
                process_toml(&east_state, policy)
            ),
        );
        wait_for(Duration::from_secs(15), || {
            (state_of_cluster(&group, "east") == "Ready").then_some(())
        })
        .expect("east registers through the proxies");
        TwoClusters {
            group,
            proxies,
            east,
            west: None,
            east_state,
            west_state,
        }
    }

    fn start_west(&mut self, policy: &str) {
        self.west = Some(start_cluster_agent(
            &self.group,
            "west",
            &self.group.addrs,
            &process_toml(&self.west_state, policy),
        ));
        wait_for(Duration::from_secs(15), || {
            (state_of_cluster(&self.group, "west") == "Ready").then_some(())
        })
        .expect("west registers");
    }

    fn partition_east(&self) {
        self.proxies.iter().for_each(FaultProxy::partition);
    }

    fn heal_east(&self) {
        self.proxies.iter().for_each(FaultProxy::heal);
    }

    /// The journal entry `event` of admission (`id`, `epoch`) in `dir`.
    fn journaled(dir: &std::path::Path, id: u64, epoch: u64, event: &str) -> Option<JournalEntry> {
        read_journal(dir)
            .into_iter()
            .find(|e| e.workload == id && e.epoch == epoch && e.event == event)
    }

    /// Cancels `names` and stops both agents (no child outlives the test).
    fn finish(mut self, names: &[&str]) {
        for name in names {
            let out = self.group.cli(1, &["cancel", name]);
            assert!(out.status.success(), "{}", text(&out));
            wait_state(&self.group, name, "Cancelled", 20);
        }
        let _ = self.east.kill();
        let _ = self.east.wait();
        if let Some(mut west) = self.west.take() {
            let _ = west.kill();
            let _ = west.wait();
        }
    }
}

fn id_and_epoch(w: &Value) -> (u64, u64) {
    (
        w["id"].as_u64().expect("id"),
        w["epoch"].as_u64().expect("epoch"),
    )
}

#[test]
fn fence_partition_stops_work_before_expiry_and_it_moves_to_the_other_cluster() {
    let mut c = TwoClusters::start("fence");
    submit(&c.group, "a", "4", &["sleep", "300"]);
    submit(&c.group, "b", "4", &["sleep", "300"]);
    let before: Vec<(u64, u64)> = ["a", "b"]
        .iter()
        .map(|n| {
            let w = wait_state(&c.group, n, "Running", 20);
            assert_eq!(w["cluster"], "east", "{w}");
            id_and_epoch(&w)
        })
        .collect();
    c.start_west("fence");

    // East loses the control plane. It fences (stops both children) a
    // quarter lease before the leader expires it; then both run on west.
    c.partition_east();
    let after: Vec<(u64, u64)> = ["a", "b"]
        .iter()
        .map(|n| {
            let w = wait_for(Duration::from_secs(30), || {
                workload(&c.group, n).filter(|w| w["state"] == "Running" && w["cluster"] == "west")
            })
            .unwrap_or_else(|| panic!("{n} never ran on west: {:?}", workload(&c.group, n)));
            id_and_epoch(&w)
        })
        .collect();
    assert_eq!(state_of_cluster(&c.group, "east"), "Lost");
    for ((id, old_epoch), (same_id, new_epoch)) in before.iter().zip(&after) {
        assert_eq!(id, same_id);
        assert!(new_epoch > old_epoch, "a new admission");
        // The executors' own clocks: east's child was gone before west's
        // started, so the workload never ran on two clusters at once.
        let stopped = TwoClusters::journaled(&c.east_state, *id, *old_epoch, "stopped")
            .unwrap_or_else(|| {
                panic!("east never stopped {id}: {:?}", read_journal(&c.east_state))
            });
        let started = TwoClusters::journaled(&c.west_state, *id, *new_epoch, "started")
            .expect("west started it");
        eprintln!(
            "workload {id}: east stopped it {} ms before west started it",
            started.at_ms as i64 - stopped.at_ms as i64
        );
        assert!(
            stopped.at_ms < started.at_ms,
            "{id} ran on both: east stopped at {} ms, west started at {} ms",
            stopped.at_ms,
            started.at_ms
        );
    }
    let out = c.group.cli(1, &["describe", "workload", "a"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("lost its lease"));

    // The heal: east comes back Ready and runs nothing; the workloads stay
    // on west under the same admission.
    c.heal_east();
    wait_for(Duration::from_secs(20), || {
        (state_of_cluster(&c.group, "east") == "Ready").then_some(())
    })
    .expect("east is Ready after the heal");
    let left = std::fs::read_dir(c.east_state.join("running"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0, "east runs nothing after fencing");
    for (name, (_, epoch)) in ["a", "b"].iter().zip(&after) {
        let w = workload(&c.group, name).expect("workload");
        assert_eq!(w["cluster"], "west", "{w}");
        assert_eq!(w["epoch"].as_u64(), Some(*epoch), "{w}");
    }
    c.finish(&["a", "b"]);
}

#[test]
fn keep_partition_holds_quota_and_work_and_agrees_after_the_heal() {
    let mut c = TwoClusters::start("keep");
    submit(&c.group, "kept", "8", &["sleep", "300"]);
    let w = wait_state(&c.group, "kept", "Running", 20);
    assert_eq!(w["cluster"], "east", "{w}");
    let (id, epoch) = id_and_epoch(&w);
    c.start_west("keep");

    // Past the lease the cluster is Unreachable; the workload keeps
    // running on east and keeps its quota, so nothing moves to west.
    c.partition_east();
    wait_for(Duration::from_secs(15), || {
        (state_of_cluster(&c.group, "east") == "Unreachable").then_some(())
    })
    .expect("east becomes Unreachable");
    std::thread::sleep(Duration::from_secs(2));
    let w = workload(&c.group, "kept").expect("kept");
    assert_eq!(w["state"], "Running", "{w}");
    assert_eq!(w["cluster"], "east", "{w}");
    let out = c.group.cli(1, &["describe", "cq", "team-a"]);
    let described = String::from_utf8_lossy(&out.stdout);
    let gpu_row = described
        .lines()
        .find(|l| l.starts_with("h100-80gb") && l.contains("nvidia.com/gpu"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        gpu_row.split_whitespace().nth(3),
        Some("8"),
        "usage still charged: {described}"
    );
    assert!(TwoClusters::journaled(&c.east_state, id, epoch, "stopped").is_none());
    assert!(read_journal(&c.west_state).is_empty(), "west ran nothing");

    // The heal: the same admission, still running, and both sides agree.
    c.heal_east();
    wait_for(Duration::from_secs(20), || {
        (state_of_cluster(&c.group, "east") == "Ready").then_some(())
    })
    .expect("east is Ready after the heal");
    std::thread::sleep(Duration::from_secs(1));
    let w = workload(&c.group, "kept").expect("kept");
    assert_eq!(w["state"], "Running", "{w}");
    assert_eq!(id_and_epoch(&w), (id, epoch), "same admission: {w}");
    assert!(
        c.east_state
            .join("running")
            .join(format!("{id}-{epoch}.json"))
            .exists(),
        "the child still runs on east"
    );
    assert!(TwoClusters::journaled(&c.east_state, id, epoch, "stopped").is_none());
    c.finish(&["kept"]);
}

#[test]
fn wait_for_ready_evicts_requeues_with_backoff_and_deactivates() {
    let group = Group::start(
        3,
        &[
            "--lease-ttl",
            "60s",
            "--wait-for-ready",
            "1s",
            "--requeue-backoff-base",
            "1s",
            "--requeue-limit",
            "2",
        ],
    );
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    // A cluster whose executor never reports anything running (an
    // executor fault), but confirms every stop it is asked for.
    let _ghost = GhostAgent::start(group.addr(leader));
    wait_for(Duration::from_secs(15), || {
        (state_of_cluster(&group, "ghost") == "Ready").then_some(())
    })
    .expect("the ghost cluster registers");
    let out = group.cli(
        1,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "stuck",
            "--request",
            "nvidia.com/gpu=4",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "stuck", "Admitted", 10);
    // Evicted after the timeout, stopped by its executor, then Pending,
    // backing off, its quota free meanwhile.
    let w = wait_state(&group, "stuck", "Pending", 10);
    assert!(w["cluster"].as_str().unwrap_or_default().is_empty(), "{w}");
    let out = group.cli(1, &["describe", "cq", "team-a"]);
    let described = String::from_utf8_lossy(&out.stdout);
    let row = described
        .lines()
        .find(|l| l.starts_with("h100-80gb"))
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        row.split_whitespace().nth(3),
        Some("0"),
        "quota free while backing off: {described}"
    );
    // Two more tries, then deactivated.
    let w = wait_state(&group, "stuck", "Failed", 30);
    let _ = w;
    let out = group.cli(1, &["describe", "workload", "stuck"]);
    let described = String::from_utf8_lossy(&out.stdout);
    assert!(
        described.contains("not reported running within 1s"),
        "{described}"
    );
    assert!(described.contains("deactivated"), "{described}");
    assert!(
        described.matches("Admitted").count() >= 3,
        "admitted three times: {described}"
    );
}

/// A message of a fake agent for `cluster`.
fn up(
    cluster: &str,
    body: fleetq_proto::v1::agent_message::Body,
) -> fleetq_proto::v1::AgentMessage {
    fleetq_proto::v1::AgentMessage {
        cluster: cluster.into(),
        body: Some(body),
    }
}

/// Opens a fake agent's session for `cluster` (8 H100s, fence): it
/// registers, reconciles with nothing running, then sends `then`. Returns
/// the sender for more messages and the leader's messages.
async fn fake_session(
    url: String,
    cluster: &str,
    then: Vec<fleetq_proto::v1::agent_message::Body>,
) -> (
    tokio::sync::mpsc::Sender<fleetq_proto::v1::AgentMessage>,
    tonic::Streaming<fleetq_proto::v1::ControlMessage>,
) {
    use fleetq_proto::v1 as pb;
    use pb::agent_message::Body as Up;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let register = Up::Inventory(pb::RegisterRequest {
        cluster: cluster.into(),
        labels: Default::default(),
        inventory: vec![pb::FlavorInventory {
            flavor: "h100-80gb".into(),
            resources: vec![pb::Quantity {
                resource: "nvidia.com/gpu".into(),
                value: "8".into(),
            }],
        }],
        lease_policy: "fence".into(),
        nodes: vec![],
    });
    let reconcile = Up::Reconcile(pb::Reconcile { running: vec![] });
    for body in [register, reconcile].into_iter().chain(then) {
        tx.send(up(cluster, body)).await.expect("queue");
    }
    let mut client = pb::agent_client::AgentClient::connect(url)
        .await
        .expect("connect");
    let inbound = client
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("session")
        .into_inner();
    (tx, inbound)
}

/// A fake agent for cluster "ghost" (8 H100s): keeps its session and
/// lease, confirms every Stop, and never reports anything running.
struct GhostAgent {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GhostAgent {
    fn start(server: &str) -> GhostAgent {
        use fleetq_proto::v1 as pb;
        use pb::agent_message::Body as Up;
        use pb::control_message::Body as Down;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let url = format!("http://{server}");
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let up = |body| up("ghost", body);
                let mut url = url;
                // A session ends when the term changes (after a
                // RedirectLeader naming the new leader, when known): the
                // ghost then registers again, as a real agent would, so an
                // election during a test does not leave it silent.
                while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                    let (tx, mut inbound) = fake_session(url.clone(), "ghost", Vec::new()).await;
                    let mut beat = tokio::time::interval(Duration::from_millis(200));
                    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                        tokio::select! {
                            _ = beat.tick() => {
                                let _ = tx.send(up(Up::Heartbeat(pb::Heartbeat { sent_at_ms: 0 }))).await;
                            }
                            m = inbound.message() => match m {
                                Ok(Some(pb::ControlMessage { body: Some(Down::Stop(s)) })) => {
                                    let _ = tx.send(up(Up::Status(pb::StatusReport {
                                        workload_id: s.workload_id,
                                        epoch: s.epoch,
                                        phase: "Stopped".into(),
                                        message: "never started".into(),
                                    }))).await;
                                }
                                Ok(Some(pb::ControlMessage { body: Some(Down::RedirectLeader(to)) })) if !to.is_empty() => {
                                    url = if to.starts_with("http") { to } else { format!("http://{to}") };
                                }
                                Ok(Some(_)) => {}
                                _ => break,
                            },
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            });
        });
        GhostAgent {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for GhostAgent {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An agent that reports running an admission the ledger does not hold
/// (one withdrawn while its assignment was on the way, started from an
/// older session) is told at once to stop it: a withdrawn Stop for that
/// workload and epoch. Found by the simulator (seeds 20551, 21028): such a
/// run overlapped the workload's next admission on the same cluster.
#[test]
fn running_what_the_ledger_does_not_hold_is_stopped() {
    let group = Group::configured(&["--lease-ttl", "60s"]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // A session lives on the leader and ends, after a RedirectLeader, when
    // the term changes: on a loaded machine an election can fall inside
    // the test (the fresh-clone CI run of 1558821 saw the session end
    // without a Stop). Like a real agent, the fake one then reports again
    // to the leader of the new term, which must stop it just the same.
    let mut sessions = Vec::new();
    let stop = loop {
        assert!(
            sessions.len() < 5,
            "no Stop in 5 sessions; how each ended: {sessions:?}"
        );
        let leader = group
            .wait_leader(Duration::from_secs(15))
            .expect("a leader is elected");
        let url = format!("http://{}", group.addr(leader));
        match runtime.block_on(rogue_session(url)) {
            Ok(stop) => break stop,
            Err(ended) => sessions.push(format!("node {leader}: {ended}")),
        }
    };
    assert_eq!((stop.workload_id, stop.epoch), (4242, 7), "{stop:?}");
    assert!(stop.withdrawn, "{stop:?}");
}

/// One session of the fake agent "rogue", which reports running workload
/// 4242 at epoch 7 (never admitted): the Stop it is sent, or how the
/// session ended without one.
async fn rogue_session(url: String) -> Result<fleetq_proto::v1::Stop, String> {
    use fleetq_proto::v1 as pb;
    use pb::agent_message::Body as Up;
    use pb::control_message::Body as Down;
    let running = Up::Status(pb::StatusReport {
        workload_id: 4242,
        epoch: 7,
        phase: "Running".into(),
        message: String::new(),
    });
    let (_tx, mut inbound) = fake_session(url, "rogue", vec![running]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut redirect = None;
    loop {
        let m = tokio::time::timeout_at(deadline, inbound.message())
            .await
            .expect("a Stop, or the session's end, within 10 s");
        match m {
            Ok(Some(pb::ControlMessage {
                body: Some(Down::Stop(s)),
            })) => return Ok(s),
            Ok(Some(pb::ControlMessage {
                body: Some(Down::RedirectLeader(to)),
            })) => redirect = Some(to),
            Ok(Some(_)) => {}
            Ok(None) => return Err(format!("ended; redirected to {redirect:?}")),
            Err(status) => return Err(format!("failed: {status}")),
        }
    }
}

/// Issue 25, item 4: a workload is a tenant's code. It runs as the
/// configured unprivileged user, from an empty environment (not the
/// agent's: no token, no secret), and cannot read the agent's state
/// directory (run records, journal, other logs); its own log is 0600 and
/// the agent's. An agent running as root without run_as_user refuses to
/// start workloads, saying why.
#[test]
fn process_workloads_run_as_nobody_without_the_agents_secrets() {
    use std::os::unix::fs::PermissionsExt;
    let group = Group::start(1, &["--lease-ttl", "5s"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let state = group.dir.path().join("agent-state");
    let config = common::write_file(
        group.dir.path(),
        "agent-east.toml",
        &format!(
            "cluster = \"east\"\nservers = [\"{}\"]\nheartbeat_ms = 200\nexecutor = \"process\"\nrun_as_user = \"nobody\"\nstate_dir = \"{}\"\n[[inventory]]\nflavor = \"h100-80gb\"\nresources = {{ \"nvidia.com/gpu\" = \"8\" }}\n",
            group.addr(1),
            state.display()
        ),
    );
    let log = std::fs::File::create(group.dir.path().join("agent.log")).expect("log");
    let mut agent = Command::new(FLEETQ)
        .args([
            INSECURE,
            "agent",
            "--config",
            config.to_str().expect("utf-8"),
        ])
        .env("FLEETQ_AGENT_SECRET", "hunter2")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq agent starts");
    wait_for(Duration::from_secs(15), || {
        (cluster_state(&group) == "Ready").then_some(())
    })
    .expect("the agent registers its cluster");
    let probe = format!(
        "echo uid=$(id -u); echo secret=${{FLEETQ_AGENT_SECRET:-none}}; cat {0}/journal.jsonl >/dev/null 2>&1 && echo read-journal; ls {0}/running >/dev/null 2>&1 && echo listed-runs; echo done",
        state.display()
    );
    submit(&group, "probe", "1", &["sh", "-c", &probe]);
    wait_state(&group, "probe", "Succeeded", 20);
    let (path, seen) = std::fs::read_dir(state.join("logs"))
        .expect("logs dir")
        .flatten()
        .map(|e| {
            (
                e.path(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .find(|(_, l)| l.contains("done"))
        .expect("the probe's log");
    let nobody = Command::new("id")
        .args(["-u", "nobody"])
        .output()
        .expect("id");
    let nobody = String::from_utf8_lossy(&nobody.stdout).trim().to_string();
    assert!(seen.contains(&format!("uid={nobody}")), "{seen}");
    assert!(seen.contains("secret=none"), "{seen}");
    assert!(
        !seen.contains("read-journal") && !seen.contains("listed-runs"),
        "{seen}"
    );
    let mode = std::fs::metadata(&path).expect("log").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());

    // The workload's environment must not reach the root wrapper: with
    // PATH set on it, root ran the tenant's own `setpriv`.
    let fake = group.dir.path().join("fake-bin");
    std::fs::create_dir_all(&fake).expect("fake dir");
    let marker = group.dir.path().join("ran-as-root");
    let fake_setpriv = fake.join("setpriv");
    std::fs::write(
        &fake_setpriv,
        format!("#!/bin/sh\nid -u > {}\n", marker.display()),
    )
    .expect("fake setpriv");
    std::fs::set_permissions(&fake_setpriv, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let manifest = format!(
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: path-probe, namespace: default}}
spec:
  queueName: team-a
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: main
          command: [sh, -c, "echo uid=$(id -u) path=$PATH; echo path-done"]
          env: [{{name: PATH, value: "{}:/usr/bin:/bin"}}, {{name: CUDA_VISIBLE_DEVICES, value: all}}]
          resources: {{requests: {{nvidia.com/gpu: "1"}}}}
"#,
        fake.display()
    );
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &manifest);
    assert!(out.status.success(), "{}", text(&out));
    let ended = wait_for(Duration::from_secs(20), || {
        workload(&group, "path-probe")
            .filter(|w| w["state"] == "Succeeded" || w["state"] == "Failed")
    })
    .expect("the probe ends");
    assert!(!marker.exists(), "root ran the tenant's setpriv");
    assert_eq!(ended["state"], "Succeeded", "{ended}");
    let seen = std::fs::read_dir(state.join("logs"))
        .expect("logs dir")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .find(|l| l.contains("path-done"))
        .expect("the path probe's log");
    // Its own PATH, as the user it was dropped to.
    assert!(
        seen.contains(&format!("uid={nobody} path={}:", fake.display())),
        "{seen}"
    );
    agent.kill().expect("kill agent");
    let _ = agent.wait();

    // Root without run_as_user: the workload fails with the reason.
    let refusing = start_agent_from_toml(
        &group,
        &format!(
            "executor = \"process\"\nstate_dir = \"{}\"\n",
            state.display()
        ),
    );
    let mut refusing = refusing;
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        submit(&group, "as-root", "1", &["true"]);
        wait_state(&group, "as-root", "Failed", 20);
        let out = group.cli(1, &["describe", "workload", "as-root"]);
        let described = String::from_utf8_lossy(&out.stdout);
        assert!(described.contains("run_as_user"), "{described}");
    }
    refusing.kill().expect("kill agent");
    let _ = refusing.wait();
}
