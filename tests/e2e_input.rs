//! End-to-end: bad input gets one clear error naming the field and leaves
//! the ledger's state hash unchanged; replayed or stale admission batches
//! change nothing and are counted as rejected.

mod common;

use std::time::Duration;

use common::{cli_stdin, text, wait_for, workloads, Group, CONFIG};
use fleetq_ledger::{AdmitBatch, Command, CycleId};
use fleetq_proto::v1 as pb;
use fleetq_scheduler::{Admission, Assignment, PodSetAssignment};

fn hash(group: &Group) -> String {
    group.status(1).expect("status")["stateHash"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn counters(group: &Group) -> serde_json::Value {
    group.status(1).expect("status")["counters"].clone()
}

fn single_node(extra: &[&str]) -> Group {
    let mut args = vec!["--simulate-cluster", "sim-1:h100-80gb=16"];
    args.extend_from_slice(extra);
    let group = Group::start(1, &args);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("the node elects itself");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    group
}

/// Applies `yaml`, expects failure whose stderr contains every `needle`,
/// and an unchanged state hash.
fn refused_apply(group: &Group, yaml: &str, needles: &[&str]) {
    let before = hash(group);
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], yaml);
    assert!(
        !out.status.success(),
        "accepted bad input:\n{yaml}\n{}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for n in needles {
        assert!(
            stderr.contains(n),
            "error does not name {n:?}:\n{}",
            text(&out)
        );
    }
    assert_eq!(hash(group), before, "refused input changed the ledger");
}

#[test]
fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let group = single_node(&[]);
    refused_apply(&group, "kind: [unclosed\n", &["document 1"]);
    refused_apply(
        &group,
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Gadget\nmetadata:\n  name: g\n",
        &["Gadget"],
    );
    refused_apply(
        &group,
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: neg
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: -4
"#,
        &["nominalQuota"],
    );
    refused_apply(
        &group,
        r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: orphan
spec:
  clusterQueue: does-not-exist
"#,
        &["spec.clusterQueue", "does-not-exist"],
    );

    // Workloads: an unknown resource, an unknown priority class, a
    // missing LocalQueue, a malformed quantity.
    let before = hash(&group);
    for (args, needle) in [
        (
            vec![
                "--queue",
                "team-a",
                "--name",
                "x1",
                "--request",
                "example.com/fpga=1",
            ],
            "example.com/fpga",
        ),
        (
            vec![
                "--queue",
                "team-a",
                "--name",
                "x2",
                "--request",
                "nvidia.com/gpu=1",
                "--priority-class",
                "urgent",
            ],
            "spec.priorityClassName",
        ),
        (
            vec![
                "--queue",
                "nope",
                "--name",
                "x3",
                "--request",
                "nvidia.com/gpu=1",
            ],
            "spec.queueName",
        ),
        (
            vec![
                "--queue",
                "team-a",
                "--name",
                "x4",
                "--request",
                "nvidia.com/gpu=lots",
            ],
            "--request",
        ),
    ] {
        let mut full = vec!["submit"];
        full.extend(args);
        let out = group.cli(1, &full);
        assert!(!out.status.success(), "accepted: {full:?}\n{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "error does not name {needle:?}: {}",
            text(&out)
        );
    }
    assert_eq!(
        hash(&group),
        before,
        "refused submissions changed the ledger"
    );

    // --dry-run shows a diff and changes nothing.
    let changed = CONFIG.replace("nominalQuota: 8", "nominalQuota: 12");
    let out = cli_stdin(group.addr(1), &["apply", "--dry-run", "-f", "-"], &changed);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ClusterQueue/team-a configured (dry run)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+") && stdout.contains("12"),
        "diff shows the new quota: {stdout}"
    );
    assert_eq!(hash(&group), before, "a dry run changed the ledger");

    // Garbage on the wire: the peer and debug services name the field.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = format!("http://{}", group.addr(1));
        let mut raft = pb::raft_client::RaftClient::connect(url.clone())
            .await
            .expect("connect");
        let err = raft
            .append_entries(pb::RaftPayload {
                json: b"\x00\xffnot json".to_vec(),
                error: String::new(),
                format: 0,
            })
            .await
            .expect_err("garbage is refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("json"), "{}", err.message());
        let mut api = pb::fleet_q_client::FleetQClient::connect(url)
            .await
            .expect("connect");
        let err = api
            .submit(pb::SubmitRequest {
                request_id: String::new(),
                workload_json: r#"{"namespace":"default","name":"w","spec":{"queueName":5}}"#
                    .into(),
                workloads_json: Vec::new(),
            })
            .await
            .expect_err("a mistyped workload is refused");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message().contains("spec.queueName"),
            "{}",
            err.message()
        );
    });
    assert_eq!(hash(&group), before, "garbage changed the ledger");
}

#[test]
fn replayed_and_stale_admit_batches_change_nothing_and_are_counted() {
    let group = single_node(&["--debug-endpoints"]);
    let out = group.cli(
        1,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "w1",
            "--request",
            "nvidia.com/gpu=4",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let w = wait_for(Duration::from_secs(10), || {
        workloads(&group, 1)
            .into_iter()
            .find(|w| w["name"] == "w1" && w["state"] == "Running")
    })
    .expect("w1 runs");
    // Let the simulated executor's reports settle.
    std::thread::sleep(Duration::from_millis(500));
    let before = hash(&group);
    let status = group.status(1).expect("status");
    let term = status["term"].as_u64().expect("term");
    let c0 = counters(&group);

    // The decision that admitted w1, proposed again.
    let admission = Admission {
        workload: w["id"].as_u64().expect("id"),
        cluster_queue: "team-a".into(),
        assignment: Assignment {
            cluster: "sim-1".into(),
            pod_sets: vec![PodSetAssignment {
                name: "main".into(),
                count: 1,
                flavors: [("nvidia.com/gpu".to_string(), "h100-80gb".to_string())].into(),
                nodes: Vec::new(),
            }],
            usage: [(
                fleetq_model::FlavorResource {
                    flavor: "h100-80gb".into(),
                    resource: "nvidia.com/gpu".into(),
                },
                "4".parse().expect("quantity"),
            )]
            .into(),
        },
        budget_charge: 0,
        afs_penalty: 0,
    };
    let propose = |cycle: CycleId| {
        let command = Command::AdmitBatch(AdmitBatch {
            cycle,
            admissions: vec![admission.clone()],
            ..AdmitBatch::default()
        });
        let json = serde_json::to_string(&command).expect("json");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let mut api =
                pb::fleet_q_client::FleetQClient::connect(format!("http://{}", group.addr(1)))
                    .await
                    .expect("connect");
            let r = api
                .debug_propose(pb::DebugProposeRequest { command_json: json })
                .await
                .expect("debug propose")
                .into_inner();
            serde_json::from_str::<serde_json::Value>(&r.response_json).expect("response json")
        })
    };

    // A duplicate in a fresh cycle of this term: rejected decision by decision.
    let r = propose(CycleId { term, seq: 1 << 40 });
    assert_eq!(r["outcome"]["Admitted"]["admitted"], 0, "{r}");
    assert_eq!(
        r["outcome"]["Admitted"]["rejected"]
            .as_array()
            .map(|a| a.len()),
        Some(1),
        "{r}"
    );
    assert_eq!(
        hash(&group),
        before,
        "a duplicate admission changed the ledger"
    );
    // A batch of an older term (a deposed leader's): stale as a whole.
    let r = propose(CycleId {
        term: term.saturating_sub(1),
        seq: 1,
    });
    assert_eq!(r["outcome"]["Admitted"]["stale_batch"], true, "{r}");
    assert_eq!(hash(&group), before, "a stale batch changed the ledger");

    let c1 = counters(&group);
    let n = |c: &serde_json::Value, k: &str| c[k].as_u64().unwrap_or(0);
    assert_eq!(
        n(&c1, "admissions_rejected"),
        n(&c0, "admissions_rejected") + 2
    );
    assert_eq!(n(&c1, "stale_batches"), n(&c0, "stale_batches") + 1);

    // Admission goes on as before.
    let out = group.cli(
        1,
        &[
            "submit",
            "--queue",
            "team-a",
            "--name",
            "w2",
            "--request",
            "nvidia.com/gpu=4",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(10), || {
        workloads(&group, 1)
            .into_iter()
            .find(|w| w["name"] == "w2" && w["state"] == "Running")
    })
    .expect("w2 runs after the replays");
}

#[test]
fn watch_streams_every_state_change() {
    let group = single_node(&[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url = format!("http://{}", group.addr(1));
        let mut api = pb::fleet_q_client::FleetQClient::connect(url)
            .await
            .expect("connect");
        let mut stream = api
            .watch_workloads(pb::ListWorkloadsRequest {
                namespace: "default".into(),
                // Filtered by ClusterQueue: the filter must hold the
                // workload in every state (queued, charged, finished).
                cluster_queue: "team-a".into(),
                ..Default::default()
            })
            .await
            .expect("watch")
            .into_inner();
        let workload = serde_json::json!({
            "namespace": "default", "name": "watched",
            "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1,
                "requests": {"nvidia.com/gpu": "2"}}], "run": {"duration": "1s"}}
        });
        api.submit(pb::SubmitRequest {
            request_id: "watch-1".into(),
            workload_json: workload.to_string(),
            workloads_json: Vec::new(),
        })
        .await
        .expect("submit");
        let mut states = Vec::new();
        while !states.iter().any(|s| s == "Succeeded") {
            let next = tokio::time::timeout(Duration::from_secs(10), stream.message())
                .await
                .expect("an event within 10 s")
                .expect("stream ok")
                .expect("stream open");
            assert_eq!(next.name, "watched");
            if states.last() != Some(&next.state) {
                states.push(next.state.clone());
            }
        }
        // Every step of the lifecycle shows up, in order.
        let expected = ["Pending", "Admitted", "Running", "Succeeded"];
        let seen: Vec<&str> = states
            .iter()
            .map(String::as_str)
            .filter(|s| expected.contains(s))
            .collect();
        assert!(
            seen.first() == Some(&"Pending") || seen.first() == Some(&"Admitted"),
            "{states:?}"
        );
        assert_eq!(seen.last(), Some(&"Succeeded"), "{states:?}");
        assert!(seen.contains(&"Running"), "{states:?}");
    });
}

/// An error the server finds in a workload made from a Job or a pod group
/// (a LocalQueue that does not exist) names the manifest as written: its
/// document, the Job or Pod, and the label, not the Workload's
/// `spec.queueName` that nobody wrote.
#[test]
fn apply_errors_name_the_manifest_the_user_wrote() {
    let group = single_node(&[]);
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: jj\n  labels: {kueue.x-k8s.io/queue-name: nope}\nspec:\n  template:\n    spec:\n      containers: [{name: c, image: x}]\n";
    refused_apply(
        &group,
        job,
        &[
            r#"document 1: Job/default/jj: metadata.labels["kueue.x-k8s.io/queue-name"]: LocalQueue "nope" does not exist"#,
        ],
    );
    let pods: Vec<String> = (0..2)
        .map(|i| format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: {{kueue.x-k8s.io/queue-name: nope, kueue.x-k8s.io/pod-group-name: grp}}\n  annotations: {{kueue.x-k8s.io/pod-group-total-count: \"2\"}}\nspec:\n  containers: [{{name: c, image: x}}]\n"))
        .collect();
    refused_apply(
        &group,
        &pods.join("---\n"),
        &[
            r#"document 1: Pod/default/grp: metadata.labels["kueue.x-k8s.io/queue-name"]: LocalQueue "nope" does not exist"#,
        ],
    );
    // The same with --dry-run.
    let out = cli_stdin(group.addr(1), &["apply", "--dry-run", "-f", "-"], job);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(r#"Job/default/jj: metadata.labels["kueue.x-k8s.io/queue-name"]"#),
        "{}",
        text(&out)
    );
}
