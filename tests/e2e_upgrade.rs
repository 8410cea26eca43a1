//! Rolling upgrades (docs/operating.md, "Upgrades").
//!
//! - A three-node group of the previous release is upgraded node by node
//!   to this build under submit load: no acknowledged submission is lost,
//!   no workload runs twice (nothing evicted), the replicas converge. The
//!   previous release's binary comes from `FLEETQ_PREVIOUS`, which
//!   `scripts/upgrade-test` builds from the revision in
//!   `deploy/PREVIOUS_RELEASE` (`.ci/run` runs it); without it that test
//!   says so and checks nothing.
//! - A peer message in a format newer than this build reads is refused
//!   with a message that says so, and the node keeps serving.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{cli, cli_stdin, text, wait_for, Group, CONFIG, FLEETQ};
use fleetq_proto::v1 as pb;
use serde_json::Value;

fn previous_release() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("FLEETQ_PREVIOUS")?);
    assert!(
        path.is_file(),
        "FLEETQ_PREVIOUS={} is not a file",
        path.display()
    );
    Some(path)
}

/// Names of every workload node `id` holds, in all namespaces.
fn names_on(group: &Group, id: usize) -> Option<BTreeSet<String>> {
    let out = group.cli(id, &["get", "workloads", "-A", "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    // Either build's shape: a list of Kueue Workloads (this build) or an
    // array of fleetq's view (builds before Kueue-shaped workloads).
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let names = match v.get("items") {
        Some(items) => items
            .as_array()?
            .iter()
            .filter_map(|w| w["metadata"]["name"].as_str().map(String::from))
            .collect(),
        None => v
            .as_array()?
            .iter()
            .filter_map(|w| w["name"].as_str().map(String::from))
            .collect(),
    };
    Some(names)
}

/// Evictions the ledger counted, over all reasons.
fn evictions(status: &Value) -> u64 {
    match &status["counters"]["evictions"] {
        Value::Number(n) => n.as_u64().unwrap_or(0),
        Value::Object(by_reason) => by_reason
            .values()
            .map(|v| match v {
                Value::Number(n) => n.as_u64().unwrap_or(0),
                Value::Object(m) => m.values().filter_map(Value::as_u64).sum(),
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// Submits a 1-GPU, 1 s workload every 50 ms to whichever node answers,
/// keeping the names that were acknowledged, until `stop`.
fn load(addrs: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let name = format!("w-{i:04}");
            let addr = &addrs[i % addrs.len()];
            let out = cli(
                addr,
                &[
                    "submit",
                    "--queue",
                    "team-a",
                    "--name",
                    &name,
                    "--request",
                    "nvidia.com/gpu=1",
                    "--duration",
                    "1s",
                ],
            );
            if out.status.success() {
                acknowledged.push(name);
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        acknowledged
    })
}

/// Waits until node `id` answers and has applied at least `index`.
fn caught_up(group: &Group, id: usize, index: u64) -> bool {
    wait_for(Duration::from_secs(30), || {
        let s = group.status(id)?;
        (s["lastApplied"].as_u64()? >= index).then_some(())
    })
    .is_some()
}

#[test]
fn a_rolling_upgrade_from_the_previous_release_loses_nothing() {
    let Some(previous) = previous_release() else {
        eprintln!(
            "e2e_upgrade: FLEETQ_PREVIOUS is not set, so the rolling upgrade is not tried here; \
             scripts/upgrade-test builds the previous release and runs it"
        );
        return;
    };
    let mut group = Group::start_with(&previous, 3, &["--simulate-cluster", "sim-1:h100-80gb=8"]);
    group
        .wait_leader(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no leader:\n{}", group.log(1)));
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));

    let stop = Arc::new(AtomicBool::new(false));
    let submitter = load(group.addrs.clone(), Arc::clone(&stop));
    std::thread::sleep(Duration::from_secs(2));

    // Followers first, the leader last, each to this build, waiting for
    // each to catch up before the next goes.
    let leader = group
        .wait_leader(Duration::from_secs(20))
        .expect("a leader");
    let order: Vec<usize> = (1..=3).filter(|&id| id != leader).chain([leader]).collect();
    let mut upgraded = Vec::new();
    for id in order {
        let now = group
            .wait_leader(Duration::from_secs(20))
            .and_then(|l| group.status(l))
            .and_then(|s| s["lastApplied"].as_u64())
            .unwrap_or(0);
        group.kill(id);
        group.restart_with(id, Path::new(FLEETQ));
        assert!(
            caught_up(&group, id, now),
            "node {id} did not catch up after the upgrade:\n{}",
            group.log(id)
        );
        upgraded.push(id);
        std::thread::sleep(Duration::from_secs(1));
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let acknowledged = submitter.join().expect("the load ran");
    assert!(
        acknowledged.len() > 20,
        "only {} submissions were acknowledged",
        acknowledged.len()
    );

    // Every acknowledged submission is on every node; they agree.
    let hash = group
        .wait_converged(Duration::from_secs(60))
        .expect("the replicas converge");
    for id in 1..=3 {
        let names = names_on(&group, id).expect("the node lists its workloads");
        let lost: Vec<&String> = acknowledged
            .iter()
            .filter(|n| !names.contains(*n))
            .collect();
        assert!(
            lost.is_empty(),
            "node {id} lost acknowledged submissions {lost:?}"
        );
    }
    // Nothing ran twice: a workload runs again only after an eviction.
    let status = group.status(1).expect("status");
    assert_eq!(
        evictions(&status),
        0,
        "evictions during the upgrade: {status}"
    );
    assert!(!hash.is_empty());
    eprintln!(
        "e2e_upgrade: {} acknowledged submissions kept through the upgrade of nodes {upgraded:?}",
        acknowledged.len(),
    );
}

/// A peer message in a format newer than this build is refused, saying
/// so, and the node goes on serving.
#[test]
fn a_newer_peer_format_is_refused_by_name() {
    let group = Group::start(1, &[]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let err = runtime
        .block_on(async {
            let mut raft =
                pb::raft_client::RaftClient::connect(format!("http://{}", group.addr(1)))
                    .await
                    .expect("connect");
            raft.append_entries(pb::RaftPayload {
                json: b"{\"whatever\":1}".to_vec(),
                error: String::new(),
                format: fleetq_ledger::format::FORMAT + 1,
            })
            .await
        })
        .expect_err("refused");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains(&format!(
            "AppendEntries is in format {}, written by a newer fleetq",
            fleetq_ledger::format::FORMAT + 1
        )),
        "{}",
        err.message()
    );
    assert!(group.status(1).is_some(), "the node still answers");
}

/// A node whose log holds an entry in a newer format (a newer build ran
/// on its data, then an older one was started there) refuses to go on,
/// naming the entry and what to do, and does not panic.
#[test]
fn a_newer_entry_in_the_log_stops_the_node_with_its_name() {
    let mut group = Group::start(1, &[]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let last = group
        .status(1)
        .and_then(|s| s["lastLogIndex"].as_u64())
        .expect("an index");
    group.kill(1);
    {
        let db = fleetq_ledger::store::open_db(&group.data_dir(1)).expect("the data dir opens");
        let tree = db.open_tree("raft_log").expect("the log");
        let index = last + 1;
        let entry = format!(
            r#"{{"format":{},"log_id":{{"leader_id":{{"term":1,"node_id":1}},"index":{index}}},"payload":"Blank"}}"#,
            fleetq_ledger::format::FORMAT + 1
        );
        tree.insert(index.to_be_bytes(), entry.into_bytes())
            .expect("insert");
        db.flush().expect("flush");
    }
    group.restart(1);
    let said = wait_for(Duration::from_secs(20), || {
        let log = group.log(1);
        log.contains(&format!("log entry {} is in format", last + 1))
            .then_some(log)
    })
    .unwrap_or_else(|| panic!("the node did not name the entry:\n{}", group.log(1)));
    assert!(said.contains("run the newer build on this node"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}
