//! End-to-end: real `fleetq server` processes (3 nodes, loopback, sled)
//! driven by the real CLI and gRPC client.

mod common;

use std::time::{Duration, Instant};

use common::{cli_stdin, text, wait_for, workloads, Group, CONFIG};
use serde_json::Value;

fn apply_config(group: &Group, id: usize) {
    let out = cli_stdin(group.addr(id), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
}

fn submit(group: &Group, id: usize, name: &str, gpus: u32) {
    let request = format!("nvidia.com/gpu={gpus}");
    let out = group.cli(
        id,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            name,
            "--request",
            &request,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
}

fn by_state<'a>(list: &'a [Value], state: &str) -> Vec<&'a Value> {
    list.iter().filter(|w| w["state"] == state).collect()
}

#[test]
fn admits_within_quota_survives_leader_kill_and_restarted_node_catches_up() {
    let mut group = Group::start(3, &["--simulate-cluster", "sim-1:h100-80gb=16"]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let follower = if leader == 1 { 2 } else { 1 };
    apply_config(&group, follower);

    // 4 x 4 GPUs against a quota of 8: two run, two wait for quota.
    for i in 1..=4 {
        submit(&group, follower, &format!("w{i}"), 4);
    }
    let list = wait_for(Duration::from_secs(10), || {
        let list = workloads(&group, follower);
        (by_state(&list, "Running").len() == 2 && by_state(&list, "Pending").len() == 2)
            .then_some(list)
    })
    .unwrap_or_else(|| {
        panic!(
            "two running, two pending: {:?}",
            workloads(&group, follower)
        )
    });
    for w in &list {
        for field in [
            "namespace",
            "name",
            "queue",
            "clusterQueue",
            "priority",
            "state",
            "cluster",
            "flavors",
            "reason",
        ] {
            assert!(w.get(field).is_some(), "{field} missing in {w}");
        }
    }
    for w in by_state(&list, "Running") {
        assert_eq!(w["cluster"], "sim-1");
        assert_eq!(w["clusterQueue"], "team-a");
        assert_eq!(w["flavors"]["main"]["nvidia.com/gpu"], "h100-80gb");
    }
    for w in by_state(&list, "Pending") {
        let reason = w["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("quota"),
            "pending reason names the quota: {w}"
        );
        assert!(w["cluster"].as_str().unwrap_or_default().is_empty());
    }

    // kill -9 the leader: a new one within 3 s, nothing acknowledged lost.
    let leader = group.wait_leader(Duration::from_secs(5)).expect("leader");
    group.kill(leader);
    let killed_at = Instant::now();
    let new_leader = group
        .wait_leader(Duration::from_secs(10))
        .expect("a new leader is elected");
    let took = killed_at.elapsed();
    assert_ne!(new_leader, leader);
    assert!(
        took < Duration::from_secs(3),
        "new leader after {took:?}, wanted under 3 s"
    );
    for i in 5..=6 {
        submit(&group, new_leader, &format!("w{i}"), 4);
    }
    let list = workloads(&group, new_leader);
    let names: Vec<&str> = list.iter().filter_map(|w| w["name"].as_str()).collect();
    for i in 1..=6 {
        assert!(
            names.contains(&format!("w{i}").as_str()),
            "w{i} acknowledged but missing: {names:?}"
        );
    }
    assert_eq!(
        by_state(&list, "Running").len(),
        2,
        "still exactly the quota: {list:?}"
    );

    // The killed node restarts from its sled directory and converges.
    group.restart(leader);
    let hash = group
        .wait_converged(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", group.log(leader)));
    assert_eq!(hash.len(), 64);
    let restarted = workloads(&group, leader);
    assert_eq!(restarted.len(), 6);
}

#[test]
fn lagging_node_catches_up_from_a_snapshot() {
    let mut group = Group::start(
        3,
        &[
            "--simulate-cluster",
            "sim-1:h100-80gb=16",
            "--snapshot-every",
            "20",
            "--keep-logs",
            "5",
        ],
    );
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    apply_config(&group, leader);
    let lagging = if leader == 3 { 2 } else { 3 };
    let before = group.status(lagging).expect("status")["lastApplied"]
        .as_u64()
        .unwrap_or(0);
    group.kill(lagging);
    for i in 0..60 {
        submit(&group, leader, &format!("s{i}"), 1);
    }
    let purged = wait_for(Duration::from_secs(15), || {
        let p = group.status(leader)?["purgedIndex"].as_u64()?;
        (p > before + 20).then_some(p)
    })
    .expect("the leader purged the entries the lagging node misses");
    group.restart(lagging);
    group
        .wait_converged(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", group.log(lagging)));
    let s = group.status(lagging).expect("status");
    let snapshot = s["snapshotIndex"].as_u64().unwrap_or(0);
    assert!(
        snapshot >= purged,
        "the lagging node installed a snapshot at {snapshot}, at or past the purge point {purged}"
    );
    assert_eq!(workloads(&group, lagging).len(), 60);
}

#[test]
fn finished_workloads_are_removed_once_their_retention_has_passed() {
    let group = Group::start(
        3,
        &[
            "--simulate-cluster",
            "sim-1:h100-80gb=16",
            "--finished-retention",
            "2s",
        ],
    );
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    apply_config(&group, 1);
    let submit_short = |name: &str| {
        let out = group.cli(
            1,
            &[
                "submit",
                "--queue",
                "team-a",
                "--name",
                name,
                "--request",
                "nvidia.com/gpu=1",
                "--duration",
                "1s",
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
    };
    // Waits until node `id` lists `short` as Succeeded.
    let succeeded_on = |id: usize| {
        wait_for(Duration::from_secs(15), || {
            workloads(&group, id)
                .iter()
                .any(|w| w["name"] == "short" && w["state"] == "Succeeded")
                .then_some(())
        })
        .unwrap_or_else(|| panic!("short succeeds: {:?}", workloads(&group, id)));
    };
    submit_short("short");
    succeeded_on(1);
    // Two seconds after it ended the leader removes it, on every replica.
    wait_for(Duration::from_secs(15), || {
        workloads(&group, 1)
            .iter()
            .all(|w| w["name"] != "short")
            .then_some(())
    })
    .unwrap_or_else(|| panic!("short is removed: {:?}", workloads(&group, 1)));
    let out = group.cli(1, &["describe", "workload", "short"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("finished workloads are removed 2s after they end"),
        "{}",
        text(&out)
    );
    group
        .wait_converged(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("replicas agree after the removal: {e}"));
    // The name is free again: a new submission runs anew.
    submit_short("short");
    succeeded_on(2);
}
