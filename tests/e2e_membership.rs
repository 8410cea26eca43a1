//! End-to-end: grow a 3-node group with a learner started from a TOML
//! file, promote it, remove a node, and see every member converge.

mod common;

use std::time::Duration;

use common::{cli_stdin, text, wait_for, workloads, Group, CONFIG};

#[test]
fn add_learner_promote_and_remove_a_node() {
    let mut group = Group::start(3, &["--simulate-cluster", "sim-1:h100-80gb=16"]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(leader), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    for i in 0..5 {
        let name = format!("m{i}");
        let out = group.cli(
            leader,
            &[
                "submit",
                "--queue",
                "team-a",
                "--name",
                &name,
                "--request",
                "nvidia.com/gpu=1",
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
    }

    let new = group.add_node_from_toml();
    let addr = group.addr(new).to_string();
    let out = group.cli(
        leader,
        &[
            "members",
            "add-learner",
            "--id",
            &new.to_string(),
            "--addr",
            &addr,
        ],
    );
    assert!(out.status.success(), "{}\n{}", text(&out), group.log(new));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("learners [4]"),
        "{}",
        text(&out)
    );

    // Promote 4, then remove a follower that is not the leader.
    let out = group.cli(leader, &["members", "set-voters", "1,2,3,4"]);
    assert!(out.status.success(), "{}", text(&out));
    let removed = (1..=3).find(|&id| id != leader).expect("a follower");
    let voters: Vec<String> = (1..=4)
        .filter(|&id| id != removed)
        .map(|id| id.to_string())
        .collect();
    let out = group.cli(leader, &["members", "set-voters", &voters.join(",")]);
    assert!(out.status.success(), "{}", text(&out));
    // The new node learns the new configuration with the next append.
    let s = wait_for(Duration::from_secs(10), || {
        let s = group.status(new)?;
        (s["voters"].as_object().map(|v| v.len()) == Some(3)).then_some(s)
    })
    .unwrap_or_else(|| panic!("node {new} never saw 3 voters: {:?}", group.status(new)));
    assert!(s["voters"].get(removed.to_string()).is_none(), "{s}");
    assert!(s["voters"].get(new.to_string()).is_some(), "{s}");
    group.kill(removed);

    // The new voter has everything, and the group still admits.
    group
        .wait_converged(Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}\n{}", group.log(new)));
    assert_eq!(workloads(&group, new).len(), 5);
    let out = group.cli(
        new,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "after",
            "--request",
            "nvidia.com/gpu=1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(workloads(&group, leader).len(), 6);
}
