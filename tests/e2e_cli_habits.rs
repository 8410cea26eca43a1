//! The CLI with kubectl's habits (issue 29): a taken name with another
//! spec is an error naming the field, unknown names are "not found",
//! `delete workload` points to `cancel`.

mod common;

use std::process::Output;
use std::time::Duration;

use common::{cli_stdin, text, Group, CONFIG};
use serde_json::Value;

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One node with a simulated cluster of 16 GPUs and [`CONFIG`] (team-a:
/// 8 GPUs).
fn single_node() -> Group {
    let group = Group::start(1, &["--simulate-cluster", "sim-1:h100-80gb=16"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("the node elects itself");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    group
}

fn submit(group: &Group, queue: &str, name: &str, gpus: u32, extra: &[&str]) -> Output {
    let request = format!("nvidia.com/gpu={gpus}");
    let mut args = vec![
        "submit",
        "--queue",
        queue,
        "--name",
        name,
        "--request",
        &request,
        "--duration",
        "10m",
    ];
    args.extend_from_slice(extra);
    group.cli(1, &args)
}

fn workload(group: &Group, name: &str) -> Value {
    let out = group.cli(1, &["get", "workloads", name, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    match v {
        Value::Array(mut a) => a.remove(0),
        v => v,
    }
}

#[test]
fn a_conflict_is_an_error_and_unknown_names_are_not_found() {
    let group = single_node();
    let out = submit(&group, "team-a", "a", 4, &[]);
    assert!(out.status.success(), "{}", text(&out));

    // The same spec again: idempotent.
    let out = submit(&group, "team-a", "a", 4, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("already exists"), "{}", text(&out));

    // Another spec under the same name: an error naming the field and
    // both values; the workload keeps its spec.
    let out = submit(&group, "team-a", "a", 8, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("Workload/default/a: spec.podSets[0].requests[nvidia.com/gpu]"),
        "{err}"
    );
    assert!(
        err.contains("\"4\" there, \"8\" in this submission"),
        "{err}"
    );
    assert!(stdout(&out).is_empty(), "{}", text(&out));
    let a = workload(&group, "a");
    assert!(
        a["requests"].as_str().unwrap_or_default().contains('4'),
        "{a}"
    );
    // The same through apply.
    let manifest = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: a\n  namespace: default\nspec:\n  queueName: team-a\n  podSets:\n  - name: main\n    count: 2\n    template:\n      spec:\n        containers:\n        - name: c\n          resources:\n            requests:\n              nvidia.com/gpu: 4\n";
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], manifest);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(stderr(&out).contains("already exists"), "{}", text(&out));

    // Unknown names are not found.
    let out = group.cli(1, &["cancel", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = stderr(&out);
    assert!(err.starts_with("error: not found:"), "{err}");
    assert!(err.contains("\"nope\" does not exist"), "{err}");

    // Workloads are cancelled, not deleted.
    let out = group.cli(1, &["delete", "workload", "a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr(&out).contains("use `fleetq cancel a -n default`"),
        "{}",
        text(&out)
    );
    let state = workload(&group, "a")["state"].clone();
    assert!(
        state == "Pending" || state == "Admitted" || state == "Running",
        "{state}"
    );
}
