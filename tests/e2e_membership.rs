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

/// A follower's answers name the leader (`fleetq-leader`), reads and
/// forwarded writes alike; the leader's name nobody. `fleetq bench`'s
/// clients follow the name to send their writes to the leader directly.
#[test]
fn a_follower_names_the_leader_on_its_answers() {
    use fleetq_proto::v1 as pb;
    use fleetq_server::api::leader_hint::LEADER_HEADER;

    let group = Group::configured(&[]);
    let leader = group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let follower = (1..=3).find(|&id| id != leader).expect("a follower");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let hint = |id: usize, write: bool| {
        runtime.block_on(async {
            let url = format!("http://{}", group.addr(id));
            let mut api = pb::fleet_q_client::FleetQClient::connect(url)
                .await
                .expect("connect");
            let metadata = if write {
                let workload = r#"{"namespace":"default","name":"hinted","spec":{"queueName":"team-a","podSets":[{"name":"main","count":1,"requests":{"nvidia.com/gpu":"1"}}]}}"#;
                api.submit(pb::SubmitRequest {
                    request_id: format!("hint-{id}"),
                    workload_json: workload.into(),
                    workloads_json: Vec::new(),
                })
                .await
                .expect("submit")
                .metadata()
                .clone()
            } else {
                api.node_status(pb::NodeStatusRequest {
                    skip_state_hash: true,
                })
                .await
                .expect("status")
                .metadata()
                .clone()
            };
            metadata
                .get(LEADER_HEADER)
                .map(|v| v.to_str().expect("ascii").to_string())
        })
    };
    let leader_addr = group.addr(leader).to_string();
    assert_eq!(hint(follower, false), Some(leader_addr.clone()), "a read");
    assert_eq!(hint(follower, true), Some(leader_addr), "a forwarded write");
    assert_eq!(hint(leader, false), None, "the leader names nobody");
    assert_eq!(hint(leader, true), None);
}
