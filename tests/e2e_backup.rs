//! End-to-end: `fleetq backup` through a follower while submissions go
//! on, `fleetq restore` into the data directories of a new group (other
//! ids, other ports) that starts from the backup with its state hash; a
//! corrupted file refused naming its checksums; and recovery from a lost
//! quorum: the survivor's data directory backed up offline, restored as a
//! single-node group that admits again, and members added back
//! (docs/operating.md).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    cli, cli_stdin, free_port, text, wait_for, workloads, Group, CONFIG, FLEETQ, INSECURE,
};
use serde_json::Value;

/// `fleetq [args]` without a server (backup from a data directory, restore).
fn offline(args: &[&str]) -> Output {
    Command::new(FLEETQ)
        .arg(INSECURE)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("fleetq runs")
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn submit(addr: &str, name: &str) -> Output {
    cli(
        addr,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            name,
            "--request",
            "nvidia.com/gpu=1",
        ],
    )
}

/// A group started from restored data directories: its own ids and ports.
struct Restored {
    dir: PathBuf,
    nodes: Vec<(u64, String)>,
    children: Vec<Child>,
}

impl Restored {
    fn peers(&self) -> String {
        self.nodes
            .iter()
            .map(|(id, a)| format!("{id}={a}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn data_dir(&self, id: u64) -> PathBuf {
        self.dir.join(format!("restored-{id}"))
    }

    fn start(&mut self, ids: &[u64]) {
        for (id, addr) in self.nodes.clone() {
            if !ids.contains(&id) {
                continue;
            }
            let log = std::fs::File::create(self.dir.join(format!("restored-{id}.log")))
                .expect("log file");
            let child = Command::new(FLEETQ)
                .args([
                    "server",
                    INSECURE,
                    "--id",
                    &id.to_string(),
                    "--listen",
                    &addr,
                ])
                .args(["--data-dir", self.data_dir(id).to_str().expect("utf-8")])
                .args(["--peers", &self.peers()])
                .env("RUST_LOG", "info,openraft=warn")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("fleetq server starts");
            self.children.push(child);
        }
    }

    fn status(&self, addr: &str) -> Option<Value> {
        let out = cli(addr, &["status", "-o", "json"]);
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).ok())
            .flatten()
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|(id, _)| {
                let log = std::fs::read_to_string(self.dir.join(format!("restored-{id}.log")))
                    .unwrap_or_default();
                format!("--- node {id}\n{log}")
            })
            .collect()
    }
}

impl Drop for Restored {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn workload_names(list: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|w| w["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[test]
fn backup_during_submissions_restores_into_a_new_group_with_its_state_hash() {
    let mut group = Group::start(3, &["--simulate-cluster", "sim-1:h100-80gb=16"]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(leader), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    for i in 0..6 {
        let out = submit(group.addr(leader), &format!("before-{i}"));
        assert!(out.status.success(), "{}", text(&out));
    }

    // Submissions go on while the backup is taken, through a follower.
    let follower = (1..=3).find(|&id| id != leader).expect("a follower");
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        let addr = group.addr(leader).to_string();
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("during-{i}");
                if submit(&addr, &name).status.success() {
                    acked.lock().unwrap().push(name);
                }
                i += 1;
            }
        })
    };
    wait_for(Duration::from_secs(20), || {
        (acked.lock().unwrap().len() >= 3).then_some(())
    })
    .expect("submissions go through");
    let before_backup: Vec<String> = acked.lock().unwrap().clone();
    let file = group.dir.path().join("ledger.fqb");
    let file_str = file.to_str().expect("utf-8");
    let out = group.cli(follower, &["backup", "--out", file_str, "-o", "json"]);
    let backup = json(&out);
    // And a few more after the backup, which the restore must not have.
    let after = acked.lock().unwrap().len();
    wait_for(Duration::from_secs(20), || {
        (acked.lock().unwrap().len() >= after + 2).then_some(())
    })
    .expect("submissions go on after the backup");
    stop.store(true, Ordering::SeqCst);
    submitter.join().expect("submitter");

    let hash = backup["stateHash"]
        .as_str()
        .expect("a state hash")
        .to_string();
    let index = backup["index"].as_u64().expect("an index");
    let term = backup["term"].as_u64().expect("a term");
    let checksum = backup["checksum"].as_str().expect("a checksum").to_string();
    assert_eq!(hash.len(), 64, "{backup}");
    assert!(checksum.starts_with("sha256:"), "{backup}");
    assert!(index > 0 && term > 0, "{backup}");
    assert_eq!(
        backup["voters"].as_object().map(|v| v.len()),
        Some(3),
        "{backup}"
    );
    assert_eq!(backup["format"], 1, "{backup}");
    assert_eq!(
        std::fs::metadata(&file).expect("the backup file").len(),
        backup["bytes"].as_u64().unwrap()
    );

    // A corrupted copy is refused, naming the file and both checksums, and
    // leaves no data directory behind.
    let bad = group.dir.path().join("corrupt.fqb");
    let mut bytes = std::fs::read(&file).expect("read backup");
    let at = bytes.len() - 5;
    bytes[at] ^= 0x01;
    std::fs::write(&bad, &bytes).expect("write corrupt copy");
    let bad_dir = group.dir.path().join("never");
    let out = offline(&[
        "restore",
        "--from",
        bad.to_str().unwrap(),
        "--data-dir",
        bad_dir.to_str().unwrap(),
        "--id",
        "1",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("checksum"), "{err}");
    assert!(err.contains(bad.to_str().unwrap()), "{err}");
    assert!(err.contains(&checksum), "{err}");
    assert!(err.matches("sha256:").count() >= 2, "{err}");
    assert!(
        !bad_dir.exists(),
        "a refused restore wrote {}",
        bad_dir.display()
    );

    // A new group: ids 11-13 on other ports, each seeded from the backup.
    let mut restored = Restored {
        dir: group.dir.path().to_path_buf(),
        nodes: (11..=13)
            .map(|id| (id, format!("127.0.0.1:{}", free_port())))
            .collect(),
        children: Vec::new(),
    };
    for (id, _) in restored.nodes.clone() {
        let data = restored.data_dir(id);
        let out = offline(&[
            "restore",
            "--from",
            file_str,
            "--data-dir",
            data.to_str().unwrap(),
            "--id",
            &id.to_string(),
            "--peers",
            &restored.peers(),
            "-o",
            "json",
        ]);
        let r = json(&out);
        assert_eq!(r["stateHash"], hash.as_str(), "{r}");
        assert_eq!(r["index"], index, "{r}");
    }
    // A second restore into a seeded directory is refused.
    let out = offline(&[
        "restore",
        "--from",
        file_str,
        "--data-dir",
        restored.data_dir(11).to_str().unwrap(),
        "--id",
        "11",
        "--peers",
        &restored.peers(),
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not empty"),
        "{}",
        text(&out)
    );
    for id in 1..=3 {
        group.kill(id);
    }

    // One new node alone (no quorum, so nothing is written): it opens at
    // the backup, with its hash, index, term and the new membership.
    let addrs: Vec<String> = restored.nodes.iter().map(|(_, a)| a.clone()).collect();
    restored.start(&[11]);
    let s = wait_for(Duration::from_secs(15), || restored.status(&addrs[0]))
        .unwrap_or_else(|| panic!("node 11 does not answer\n{}", restored.logs()));
    assert_eq!(s["stateHash"], hash.as_str(), "{s}\n{}", restored.logs());
    assert_eq!(s["lastApplied"], index, "{s}");
    assert_eq!(s["snapshotIndex"], index, "{s}");
    assert_eq!(s["purgedIndex"], index, "{s}");
    let voters: Vec<&String> = s["voters"].as_object().unwrap().keys().collect();
    assert_eq!(voters, ["11", "12", "13"], "{s}");

    // The others join it: a leader in a later term than the backup's, every
    // node at or past the backup.
    restored.start(&[12, 13]);
    let statuses = wait_for(Duration::from_secs(30), || {
        let all: Vec<Value> = addrs.iter().filter_map(|a| restored.status(a)).collect();
        let led = all.iter().any(|s| s["state"] == "Leader");
        let caught_up = all
            .iter()
            .all(|s| s["lastApplied"].as_u64().unwrap_or(0) > index);
        (all.len() == 3 && led && caught_up).then_some(all)
    })
    .unwrap_or_else(|| panic!("the restored group did not start\n{}", restored.logs()));
    for s in &statuses {
        // Only the new leader's blank entry after the backup: same state.
        if s["lastApplied"] == index + 1 {
            assert_eq!(s["stateHash"], hash.as_str(), "{s}\n{}", restored.logs());
        }
        assert!(s["term"].as_u64().unwrap() > term, "{s}");
        let voters: Vec<&String> = s["voters"].as_object().unwrap().keys().collect();
        assert_eq!(voters, ["11", "12", "13"], "{s}");
        assert!(s["snapshotIndex"].as_u64().unwrap() >= index, "{s}");
    }

    // Every submission acknowledged before the backup began is there;
    // nothing acknowledged only after it returned is.
    let list = {
        let out = cli(&addrs[0], &["get", "workloads", "-o", "fleetq-json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("a JSON array")
    };
    let names = workload_names(&list);
    for name in (0..6).map(|i| format!("before-{i}")).chain(before_backup) {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let all_acked = acked.lock().unwrap().clone();
    for name in &all_acked[after..] {
        assert!(
            !names.contains(name),
            "{name} was acknowledged after the backup"
        );
    }
    assert!(
        list.iter()
            .any(|w| w["state"] == "Admitted" || w["state"] == "Running"),
        "{list:?}"
    );

    // The new group takes writes.
    let out = submit(&addrs[1], "after-restore");
    assert!(out.status.success(), "{}\n{}", text(&out), restored.logs());
}

/// A real agent for cluster `east` (8 H100s, simulated executor) that
/// knows every node's address; its output goes to the group's agent.log.
fn start_agent(group: &Group) -> Child {
    let servers: Vec<String> = group.addrs.iter().map(|a| format!("\"{a}\"")).collect();
    let config = format!(
        "cluster = \"east\"\nservers = [{}]\nheartbeat_ms = 200\n[[inventory]]\nflavor = \"h100-80gb\"\nresources = {{ \"nvidia.com/gpu\" = \"8\" }}\n",
        servers.join(", ")
    );
    let path = common::write_file(group.dir.path(), "agent-east.toml", &config);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(group.dir.path().join("agent.log"))
        .expect("log");
    Command::new(FLEETQ)
        .args([INSECURE, "agent", "--config", path.to_str().expect("utf-8")])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("fleetq agent starts")
}

/// Running workloads as node `id` sees them: name -> (cluster, epoch).
fn running(group: &Group, id: usize) -> BTreeMap<String, (String, u64)> {
    workloads(group, id)
        .iter()
        .filter(|w| w["state"] == "Running")
        .map(|w| {
            (
                w["name"].as_str().unwrap_or_default().to_string(),
                (
                    w["cluster"].as_str().unwrap_or_default().to_string(),
                    w["epoch"].as_u64().unwrap_or(0),
                ),
            )
        })
        .collect()
}

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_group_that_lost_its_quorum_restarts_from_the_survivor() {
    let mut group = Group::start(3, &["--snapshot-every", "20"]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(leader), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let _agent = Agent(start_agent(&group));
    for i in 0..12 {
        let out = submit(group.addr(leader), &format!("w{i}"));
        assert!(out.status.success(), "{}", text(&out));
    }
    // 8 GPUs of quota: 8 run on the agent's cluster, 4 wait.
    let before = wait_for(Duration::from_secs(30), || {
        let r = running(&group, leader);
        (r.len() == 8).then_some(r)
    })
    .unwrap_or_else(|| {
        panic!(
            "8 never ran: {:?}\n{}",
            running(&group, leader),
            agent_log(&group)
        )
    });
    let hash = group
        .wait_converged(Duration::from_secs(20))
        .expect("replicas converge");

    // Two nodes are gone for good, data and all; the survivor cannot
    // reach a quorum. Stop it too: its data directory is read offline.
    let survivor = 1;
    for id in [2, 3] {
        group.kill(id);
        std::fs::remove_dir_all(group.data_dir(id)).expect("remove data");
    }
    group.kill(survivor);
    let data = group.data_dir(survivor);
    let file = group.dir.path().join("survivor.fqb");
    let out = offline(&[
        "backup",
        "--from-data-dir",
        data.to_str().unwrap(),
        "--out",
        file.to_str().unwrap(),
        "-o",
        "json",
    ]);
    let backup = json(&out);
    assert_eq!(backup["stateHash"], hash.as_str(), "{backup}");
    assert!(
        backup["source"]
            .as_str()
            .unwrap()
            .starts_with("data directory"),
        "{backup}"
    );

    // The independent checker's books agree with the survivor's ledger.
    let b = fleetq_ledger::backup::Backup::read_file(&file).expect("the backup reads");
    let ledger = b
        .ledger(fleetq_ledger::LedgerConfig::default())
        .expect("the backup imports");
    let problems = fleetq_chaos::oracle::replica::ReplicaBooks::new(survivor as u64)
        .reset(b.header.index, &ledger);
    assert!(problems.is_empty(), "{problems:?}");

    // Move the old directory aside, restore as a one-node group, start it.
    let old = group.dir.path().join("node-1.old");
    std::fs::rename(&data, &old).expect("move aside");
    let one = format!("1={}", group.addr(survivor));
    let out = offline(&[
        "restore",
        "--from",
        file.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--id",
        "1",
        "--peers",
        &one,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    // Every node from now on starts with --peers naming the survivor only:
    // a new, empty node not in its --peers waits to be added.
    group.initial = 1;
    group.restart(survivor);
    assert_eq!(
        group.wait_leader(Duration::from_secs(15)),
        Some(survivor),
        "{}",
        group.log(survivor)
    );
    assert_eq!(workloads(&group, survivor).len(), 12);
    // The agent reconnects to the survivor and reconciles: the same
    // workloads run under the same epochs, none twice, none stopped.
    wait_for(Duration::from_secs(30), || {
        (running(&group, survivor) == before).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "after recovery {:?}, before {before:?}\n{}",
            running(&group, survivor),
            agent_log(&group)
        )
    });
    let out = submit(group.addr(survivor), "after-recovery");
    assert!(out.status.success(), "{}", text(&out));

    // Members come back empty and are added as learners, then voters.
    for id in [2, 3] {
        group.restart(id);
        let out = group.cli(
            survivor,
            &[
                "members",
                "add-learner",
                "--id",
                &id.to_string(),
                "--addr",
                group.addr(id),
            ],
        );
        assert!(out.status.success(), "{}\n{}", text(&out), group.log(id));
    }
    let out = group.cli(survivor, &["members", "set-voters", "1,2,3"]);
    assert!(out.status.success(), "{}", text(&out));
    group
        .wait_converged(Duration::from_secs(30))
        .expect("the grown group converges");
    let s = group.status(3).expect("status");
    assert_eq!(s["voters"].as_object().map(|v| v.len()), Some(3), "{s}");
    assert_eq!(workloads(&group, 3).len(), 13);

    // The grown group's ledger passes the checker too, and no workload
    // holds quota twice: 13 one-GPU workloads against 8 GPUs of quota.
    let file = group.dir.path().join("grown.fqb");
    let backup = json(&group.cli(
        2,
        &["backup", "--out", file.to_str().unwrap(), "-o", "json"],
    ));
    // (The ledger moves on meanwhile: the cycle, the agent's reports.)
    assert_eq!(
        backup["voters"].as_object().map(|v| v.len()),
        Some(3),
        "{backup}"
    );
    let b = fleetq_ledger::backup::Backup::read_file(&file).expect("the backup reads");
    let ledger = b
        .ledger(fleetq_ledger::LedgerConfig::default())
        .expect("the backup imports");
    let problems =
        fleetq_chaos::oracle::replica::ReplicaBooks::new(2).reset(b.header.index, &ledger);
    assert!(problems.is_empty(), "{problems:?}");
    let holding = workloads(&group, 1)
        .iter()
        .filter(|w| w["state"] == "Admitted" || w["state"] == "Running")
        .count();
    assert_eq!(holding, 8);
    assert_eq!(running(&group, 3), before, "{}", agent_log(&group));
}

fn agent_log(group: &Group) -> String {
    std::fs::read_to_string(group.dir.path().join("agent.log")).unwrap_or_default()
}

#[test]
fn scheduled_backups_keep_the_newest_and_report_their_age() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backups = dir.path().join("backups");
    let http = format!("127.0.0.1:{}", free_port());
    let group = Group::start(
        1,
        &[
            "--backup-dir",
            backups.to_str().unwrap(),
            "--backup-interval",
            "1s",
            "--backup-keep",
            "2",
            "--http-listen",
            &http,
        ],
    );
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let files = |dir: &std::path::Path| -> Vec<PathBuf> {
        let mut f: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        f.sort();
        f
    };
    // Four rounds at least: never more than two files, all of them whole.
    wait_for(Duration::from_secs(30), || {
        let f = files(&backups);
        assert!(f.len() <= 2, "{f:?}");
        let newest = f.last()?;
        let b = fleetq_ledger::backup::Backup::read_file(newest).ok()?;
        // One taken after the configuration was applied.
        (b.ledger(fleetq_ledger::LedgerConfig::default())
            .ok()?
            .state()
            .config
            .cluster_queues
            .len()
            == 1
            && f.len() == 2)
            .then_some(())
    })
    .unwrap_or_else(|| panic!("{:?}\n{}", files(&backups), group.log(1)));
    std::thread::sleep(Duration::from_millis(2500));
    let f = files(&backups);
    assert_eq!(f.len(), 2, "{f:?}");
    let status = group.status(1).expect("status");
    let newest = fleetq_ledger::backup::Backup::read_file(&f[1]).expect("a whole backup");
    assert_eq!(
        newest.header.state_hash,
        status["stateHash"].as_str().unwrap()
    );

    let reply = common::http(&http, "GET", "/metrics", Duration::from_secs(5)).expect("metrics");
    let age: f64 = reply
        .body
        .lines()
        .find_map(|l| l.strip_prefix("fleetq_backup_last_success_age_seconds "))
        .unwrap_or_else(|| panic!("no backup age in\n{}", reply.body))
        .trim()
        .parse()
        .expect("a number");
    assert!(age < 3.0, "{age}");
}
