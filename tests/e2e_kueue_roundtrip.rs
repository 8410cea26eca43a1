//! `fleetq get KIND [NAME] -o yaml|json` prints Kueue's objects (issue
//! "CLI with kubectl's habits", item 1): apiVersion, kind, metadata, spec
//! and, for ClusterQueues and LocalQueues, status in Kueue's shape, so
//! that `fleetq get cq team-a -o yaml | fleetq apply -f -` says
//! "unchanged" and changes nothing; a query for all of a kind prints one
//! `v1 List`, which applies back the same way.

mod common;

use std::time::Duration;

use common::{cli_stdin, text, wait_for, Group};
use serde_json::Value;

const SAMPLE: &str = include_str!("../deploy/dev/sample.yaml");

/// The sample has no Topology: one of Kueue's documented shape.
const TOPOLOGY: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
"#;

/// Nor a Kubernetes PriorityClass.
const PRIORITY_CLASS: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: batch-default
value: 100
globalDefault: true
preemptionPolicy: Never
description: what a workload without a class gets
"#;

const KUEUE: &str = "kueue.x-k8s.io/v1beta2";

/// The kinds with an object of the sample (or [`TOPOLOGY`],
/// [`PRIORITY_CLASS`]) each: the
/// name `get` takes, the kind printed, its name and what `apply` calls it.
const OBJECTS: [(&str, &str, &str, &str); 7] = [
    (
        "flavor",
        "ResourceFlavor",
        "h100-80gb",
        "ResourceFlavor/h100-80gb",
    ),
    ("cohort", "Cohort", "research", "Cohort/research"),
    ("cq", "ClusterQueue", "team-a", "ClusterQueue/team-a"),
    ("lq", "LocalQueue", "team-a", "LocalQueue/default/team-a"),
    (
        "wpc",
        "WorkloadPriorityClass",
        "high",
        "WorkloadPriorityClass/high",
    ),
    (
        "pc",
        "PriorityClass",
        "batch-default",
        "PriorityClass/batch-default",
    ),
    ("topology", "Topology", "default", "Topology/default"),
];

/// The apiVersion `get` prints for a kind: Kueue's, but Kubernetes' own
/// for a PriorityClass.
fn api_version(kind: &str) -> &'static str {
    if kind == "PriorityClass" {
        "scheduling.k8s.io/v1"
    } else {
        KUEUE
    }
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One node with a simulated cluster of 16 H100s, the dev sample and a
/// Topology applied, and two workloads admitted in team-a (2 and 4 GPUs,
/// one with a duration, one without): queues with a status to print.
fn started() -> Group {
    let group = Group::start(1, &["--simulate-cluster", "sim-1:h100-80gb=16"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("the node elects itself");
    for manifests in [SAMPLE, TOPOLOGY, PRIORITY_CLASS] {
        let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], manifests);
        assert!(out.status.success(), "{}", text(&out));
    }
    for (name, gpus, duration) in [("train", "2", Some("30m")), ("serve", "4", None)] {
        let request = format!("nvidia.com/gpu={gpus}");
        let mut args = vec![
            "submit",
            "--queue",
            "team-a",
            "--name",
            name,
            "--request",
            &request,
        ];
        if let Some(d) = duration {
            args.extend(["--duration", d]);
        }
        let out = group.cli(1, &args);
        assert!(out.status.success(), "{}", text(&out));
    }
    wait_for(Duration::from_secs(20), || {
        let cq = get(&group, &["cq", "team-a"], "json");
        (cq["status"]["admittedWorkloads"] == 2).then_some(())
    })
    .unwrap_or_else(|| panic!("both workloads admitted:\n{}", group.log(1)));
    group
}

/// `fleetq get ARGS -o OUTPUT`: what it printed, and the parsed object.
fn get_text(group: &Group, args: &[&str], output: &str) -> (String, Value) {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", output]);
    let out = group.cli(1, &all);
    assert!(out.status.success(), "{all:?}: {}", text(&out));
    let printed = stdout(&out);
    let value: Value = match output {
        "json" => serde_json::from_str(&printed)
            .unwrap_or_else(|e| panic!("{all:?}: not JSON ({e}):\n{printed}")),
        _ => serde_norway::from_str(&printed)
            .unwrap_or_else(|e| panic!("{all:?}: not YAML ({e}):\n{printed}")),
    };
    (printed, value)
}

fn get(group: &Group, args: &[&str], output: &str) -> Value {
    get_text(group, args, output).1
}

/// The ledger's state hash, which any change moves.
fn state_hash(group: &Group) -> String {
    let status = group.status(1).expect("the node answers");
    status["stateHash"]
        .as_str()
        .expect("a stateHash")
        .to_string()
}

/// `fleetq apply -f -` of `printed`: it succeeds, reports each of
/// `objects` unchanged and nothing else, and leaves the ledger's state as
/// it was.
fn applies_unchanged(group: &Group, printed: &str, objects: &[&str], what: &str) {
    let before = state_hash(group);
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], printed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}\n{printed}",
        text(&out)
    );
    let expected: String = objects.iter().map(|o| format!("{o} unchanged\n")).collect();
    assert_eq!(stdout(&out), expected, "{what}: {}", text(&out));
    assert_eq!(state_hash(group), before, "{what}: the state changed");
}

#[test]
fn every_kind_prints_as_kueue_and_applies_back_unchanged() {
    let group = started();
    for (kind, printed_kind, name, applied) in OBJECTS {
        let yaml = get_text(&group, &[kind, name], "yaml");
        let json = get_text(&group, &[kind, name], "json");
        for (output, (printed, object)) in [("yaml", &yaml), ("json", &json)] {
            let what = format!("get {kind} {name} -o {output}");
            assert_eq!(
                object["apiVersion"],
                api_version(printed_kind),
                "{what}:\n{printed}"
            );
            assert_eq!(object["kind"], printed_kind, "{what}:\n{printed}");
            assert_eq!(object["metadata"]["name"], name, "{what}:\n{printed}");
            if printed_kind == "LocalQueue" {
                assert_eq!(
                    object["metadata"]["namespace"], "default",
                    "{what}:\n{printed}"
                );
            }
            // Kueue's shape, not fleetq's own (`name` at the top level).
            assert!(object.get("name").is_none(), "{what}:\n{printed}");
            applies_unchanged(&group, printed, &[applied], &what);
            // And it prints the same afterwards.
            assert_eq!(&get(&group, &[kind, name], output), object, "{what}");
        }
        assert_eq!(yaml.1, json.1, "{kind} {name}: YAML and JSON differ");
    }
}

#[test]
fn lists_and_queue_status_print_as_kueue_and_apply_back_unchanged() {
    let group = started();

    // `get KIND` (no name): one v1 List of all of them, as kubectl prints
    // it, that applies back unchanged.
    for (kind, printed_kind, _, _) in OBJECTS {
        for output in ["yaml", "json"] {
            let what = format!("get {kind} -o {output}");
            let (printed, list) = get_text(&group, &[kind], output);
            assert_eq!(list["apiVersion"], "v1", "{what}:\n{printed}");
            assert_eq!(list["kind"], "List", "{what}:\n{printed}");
            let items = list["items"].as_array().expect("items");
            assert!(!items.is_empty(), "{what}:\n{printed}");
            let mut applied = Vec::new();
            for item in items {
                assert_eq!(
                    item["apiVersion"],
                    api_version(printed_kind),
                    "{what}:\n{printed}"
                );
                assert_eq!(item["kind"], printed_kind, "{what}:\n{printed}");
                let name = item["metadata"]["name"].as_str().expect("a name");
                applied.push(match item["metadata"]["namespace"].as_str() {
                    Some(ns) => format!("{printed_kind}/{ns}/{name}"),
                    None => format!("{printed_kind}/{name}"),
                });
            }
            let applied: Vec<&str> = applied.iter().map(String::as_str).collect();
            applies_unchanged(&group, &printed, &applied, &what);
        }
    }
    let (_, cqs) = get_text(&group, &["cq"], "yaml");
    let names: Vec<&Value> = cqs["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|cq| &cq["metadata"]["name"])
        .collect();
    assert_eq!(names, ["team-a", "team-b"]);

    // A ClusterQueue's status as Kueue writes it: the workload counts and
    // its quota in use per flavor (2 + 4 GPUs), as `get cq` counts them.
    let cq = get(&group, &["cq", "team-a"], "yaml");
    let status = &cq["status"];
    assert_eq!(status["pendingWorkloads"], 0, "{cq}");
    assert_eq!(status["reservingWorkloads"], 2, "{cq}");
    assert_eq!(status["admittedWorkloads"], 2, "{cq}");
    for field in ["flavorsUsage", "flavorsReservation"] {
        let flavor = &status[field][0];
        assert_eq!(flavor["name"], "h100-80gb", "{field}: {cq}");
        let gpu = flavor["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .find(|r| r["name"] == "nvidia.com/gpu")
            .unwrap_or_else(|| panic!("{field}: no GPU cell: {cq}"));
        assert_eq!(gpu["total"], "6", "{field}: {cq}");
        assert_eq!(gpu["borrowed"], "0", "{field}: {cq}");
    }
    let table = stdout(&group.cli(1, &["get", "cq"]));
    let row = table
        .lines()
        .find(|l| l.starts_with("team-a"))
        .unwrap_or_else(|| panic!("no team-a row:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[3..5], ["0", "2"], "PENDING ADMITTED: {table}");

    // A LocalQueue's, from its namespace's workloads; team-b's is empty.
    let lq = get(&group, &["lq", "team-a"], "json");
    let status = &lq["status"];
    assert_eq!(status["pendingWorkloads"], 0, "{lq}");
    assert_eq!(status["admittedWorkloads"], 2, "{lq}");
    let usage = &status["flavorsUsage"];
    assert_eq!(
        usage,
        &serde_json::json!([{"name": "h100-80gb",
            "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}]),
        "{lq}"
    );
    let lq = get(&group, &["lq", "team-b"], "json");
    assert_eq!(lq["status"]["admittedWorkloads"], 0, "{lq}");
    assert_eq!(lq["status"]["flavorsUsage"], serde_json::json!([]), "{lq}");
}

/// Workloads print as Kueue's Workload: spec (with fleetq's own fields as
/// annotations) and status with Kueue's conditions; applied back, each is
/// the same workload, so nothing changes.
#[test]
fn workloads_print_as_kueue_and_apply_back_as_the_same_workload() {
    let group = started();
    for (name, duration) in [("train", Some("30m")), ("serve", None)] {
        for output in ["yaml", "json"] {
            let what = format!("get workloads {name} -o {output}");
            let (printed, w) = get_text(&group, &["workloads", name], output);
            assert_eq!(w["apiVersion"], KUEUE, "{what}:\n{printed}");
            assert_eq!(w["kind"], "Workload", "{what}:\n{printed}");
            assert_eq!(w["metadata"]["namespace"], "default", "{what}:\n{printed}");
            assert_eq!(w["spec"]["queueName"], "team-a", "{what}:\n{printed}");
            assert_eq!(
                w["metadata"]["annotations"]["fleetq.dev/duration"].as_str(),
                duration,
                "{what}:\n{printed}"
            );
            let conditions = w["status"]["conditions"].as_array().expect("conditions");
            for kind in ["QuotaReserved", "Admitted"] {
                let c = conditions
                    .iter()
                    .find(|c| c["type"] == kind)
                    .unwrap_or_else(|| panic!("{what}: no {kind}:\n{printed}"));
                assert_eq!(c["status"], "True", "{what}:\n{printed}");
                let time = c["lastTransitionTime"].as_str().expect("a time");
                assert!(
                    time.len() == 20 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
                    "{what}: {time} is not RFC 3339 to the second"
                );
            }
            assert_eq!(
                w["status"]["admission"]["clusterQueue"], "team-a",
                "{what}:\n{printed}"
            );
            let before = state_hash(&group);
            let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &printed);
            assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out));
            assert_eq!(state_hash(&group), before, "{what}: the state changed");
        }
    }
    // All of them: a v1 List of Workloads; fleetq's own view on request.
    let list = get(&group, &["workloads"], "json");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{list}");
    let out = group.cli(1, &["get", "workloads", "-o", "fleetq-json"]);
    let own: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        own[0]["state"].is_string() && own[0]["id"].is_u64(),
        "{own}"
    );
}
