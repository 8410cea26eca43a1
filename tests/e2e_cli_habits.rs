//! The CLI with kubectl's habits (issue 29): a taken name with another
//! spec is an error naming the field, unknown names are "not found",
//! `delete workload` points to `cancel`; a closed pipe ends the CLI
//! quietly, tables keep a pending reason's numbers, preemption events name
//! the preemptor; help lists the command's own flags before the global
//! ones, with examples, and completion offers `get`'s kinds.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{cli, cli_stdin, text, wait_for, Group, CONFIG, FLEETQ, INSECURE};
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
    let out = group.cli(1, &["get", "workloads", name, "-o", "fleetq-json"]);
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

/// A ClusterQueue whose higher-priority workloads preempt its lower ones.
const PREEMPTING: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: prio
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: prio
spec:
  clusterQueue: prio
"#;

#[test]
fn output_behaves_closed_pipes_whole_reasons_and_names() {
    let group = single_node();

    // A closed pipe (`| head -1` gone): no panic, no message; the CLI
    // ends as kubectl and cat do (SIGPIPE), or with status 0.
    for args in [&["get", "cq", "-o", "json"][..], &["get", "cq"]] {
        let mut child = Command::new(FLEETQ)
            .args(["--server", group.addr(1), INSECURE])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fleetq runs");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("fleetq ends");
        assert!(
            out.status.success() || out.status.signal() == Some(libc_sigpipe()),
            "{args:?}: {}",
            text(&out)
        );
        assert!(stderr(&out).is_empty(), "{args:?}: {}", text(&out));
    }

    // A pending reason longer than the old 90-character cut keeps its
    // numbers in the table.
    let out = submit(&group, "team-a", "big", 8, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = submit(&group, "team-a", "waiting", 4, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let reason = wait_for(Duration::from_secs(20), || {
        let w = workload(&group, "waiting");
        let r = w["reason"].as_str().unwrap_or_default().to_string();
        r.contains("more needed").then_some(r)
    })
    .expect("a WaitingForQuota reason");
    assert!(reason.chars().count() > 90, "too short to test: {reason}");
    let numbers_part = &reason[reason.find("more needed").expect("numbers")..];
    for args in [
        &["get", "workloads"][..],
        &["get", "pending", "--cluster-queue", "team-a"],
    ] {
        let out = group.cli(1, args);
        assert!(out.status.success(), "{}", text(&out));
        let table = stdout(&out);
        let row = table
            .lines()
            .find(|l| l.contains("waiting"))
            .unwrap_or_else(|| panic!("{args:?}: no row:\n{table}"));
        assert!(row.ends_with(numbers_part), "{args:?}: {row}");
    }
    // On a terminal of 140 columns (COLUMNS, as a terminal would give it)
    // every line fits, and the reason is cut before its numbers.
    let out = Command::new(FLEETQ)
        .args([INSECURE, "--server", group.addr(1), "get", "workloads"])
        .env("COLUMNS", "140")
        .output()
        .expect("fleetq runs");
    let table = stdout(&out);
    assert!(
        table.lines().all(|l| l.chars().count() <= 140),
        "a line is wider than 140:\n{table}"
    );
    let row = table
        .lines()
        .find(|l| l.contains("waiting"))
        .unwrap_or_else(|| panic!("no row:\n{table}"));
    assert!(row.ends_with(numbers_part) && row.contains('…'), "{row}");

    // A preemption names the preemptor by namespace/name.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], PREEMPTING);
    assert!(out.status.success(), "{}", text(&out));
    let out = submit(&group, "prio", "low", 8, &[]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (workload(&group, "low")["state"] != "Pending").then_some(())
    })
    .expect("low is admitted");
    let out = submit(&group, "prio", "urgent", 8, &["--priority-class", "high"]);
    assert!(out.status.success(), "{}", text(&out));
    let described = wait_for(Duration::from_secs(20), || {
        let out = group.cli(1, &["describe", "workload", "low"]);
        let s = stdout(&out);
        s.contains("preempted (").then_some(s)
    })
    .expect("low is preempted");
    assert!(
        described.contains("preempted (InClusterQueue) to admit workload default/urgent"),
        "{described}"
    );
}

/// SIGPIPE, without a libc dependency in the tests.
fn libc_sigpipe() -> i32 {
    13
}

#[test]
fn help_puts_own_flags_first_with_examples_and_completion_offers_kinds() {
    let out = Command::new(FLEETQ)
        .args(["submit", "--help"])
        .output()
        .expect("fleetq runs");
    assert!(out.status.success(), "{}", text(&out));
    let help = stdout(&out);
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{help}"))
    };
    // --queue among the command's own flags, the TLS and server flags
    // after them in their own section, then examples.
    assert!(at("--queue") < at("Global options:"), "{help}");
    assert!(at("Global options:") < at("--tls-dir"), "{help}");
    assert!(at("Global options:") < at("--server"), "{help}");
    assert!(at("--tls-dir") < at("Examples:"), "{help}");
    assert!(help.contains("  fleetq submit --queue team-a"), "{help}");

    for command in ["get", "cancel", "apply", "describe", "delete", "status"] {
        let out = Command::new(FLEETQ)
            .args([command, "-h"])
            .output()
            .expect("fleetq runs");
        let help = stdout(&out);
        assert!(help.contains("Examples:\n  # "), "{command}: {help}");
        assert!(help.contains(&format!("  fleetq {command} ")), "{command}");
    }

    // Completion: `fleetq get <TAB>` offers the kinds; --queue no files.
    let out = Command::new(FLEETQ)
        .args(["completion", "bash"])
        .output()
        .expect("fleetq runs");
    let bash = stdout(&out);
    let get = &bash[bash.find("fleetq__subcmd__get)").expect("get's section")..];
    let opts = get.lines().nth(1).expect("opts line");
    for kind in ["cq", "lq", "workloads", "clusters", "pending"] {
        assert!(
            opts.split(['"', ' ']).any(|w| w == kind),
            "no {kind}: {opts}"
        );
    }
    let submit = &bash[bash
        .find("fleetq__subcmd__submit)")
        .expect("submit's section")..];
    let queue = &submit[submit.find("--queue)").expect("--queue")..];
    let queue: String = queue.lines().take(3).collect();
    assert!(!queue.contains("compgen -f"), "{queue}");
    let out = Command::new(FLEETQ)
        .args(["completion", "zsh"])
        .output()
        .expect("fleetq runs");
    assert!(
        stdout(&out).contains("cq\\:\"ClusterQueues\""),
        "zsh offers no kinds"
    );

    // An unknown kind is a usage error naming the kinds (no server asked).
    let out = cli("127.0.0.1:1", &["get", "bogus"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out)
            .contains("cq, cohort, flavor, lq, wpc, pc, topology, workloads, clusters, pending"),
        "{}",
        text(&out)
    );
    // Aliases and other cases still work as kinds.
    for kind in ["ClusterQueues", "wl", "localqueue"] {
        let out = cli("127.0.0.1:1", &["get", kind]);
        assert_eq!(out.status.code(), Some(1), "{kind}: {}", text(&out));
        assert!(
            stderr(&out).contains("cannot reach"),
            "{kind}: {}",
            text(&out)
        );
    }
}

fn labelled(name: &str, app: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {{name: {name}, namespace: default, labels: {{app: {app}}}}}\nspec:\n  queueName: team-a\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n        - name: main\n          resources: {{requests: {{nvidia.com/gpu: \"1\"}}}}\n"
    )
}

fn state_of(group: &Group, name: &str) -> String {
    let out = group.cli(1, &["get", "workloads", name, "-o", "fleetq-json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["state"].as_str().unwrap_or_default().to_string()
}

/// Issue 29 item 2, in part: `drain` and `uncordon` a cluster, `cancel`
/// by label selector and by LocalQueue, and `get workloads -w`, which
/// prints the list and then each change as a row.
#[test]
fn drain_uncordon_bulk_cancel_and_watch() {
    let group = Group::start(1, &["--simulate-cluster", "sim-1:h100-80gb=8"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));

    // A watch from the start: it must show rows for what follows.
    let mut watch = Command::new(FLEETQ)
        .args([
            INSECURE,
            "--server",
            group.addr(1),
            "get",
            "workloads",
            "-w",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch starts");
    let watch_out = watch.stdout.take().expect("stdout");
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(watch_out)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });

    // Drained: nothing new is placed there.
    let out = group.cli(1, &["drain", "sim-1"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("cluster sim-1 drained"),
        "{}",
        text(&out)
    );
    let out = group.cli(1, &["get", "clusters"]);
    assert!(stdout(&out).contains("Draining"), "{}", text(&out));
    for (name, app) in [("llm-1", "llm"), ("llm-2", "llm"), ("web-1", "web")] {
        let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &labelled(name, app));
        assert!(out.status.success(), "{}", text(&out));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(state_of(&group, "llm-1"), "Pending");
    // Uncordoned: all three are admitted.
    let out = group.cli(1, &["uncordon", "sim-1"]);
    assert!(
        stdout(&out).contains("cluster sim-1 uncordoned"),
        "{}",
        text(&out)
    );
    for name in ["llm-1", "llm-2", "web-1"] {
        wait_for(Duration::from_secs(10), || {
            (state_of(&group, name) != "Pending").then_some(())
        })
        .unwrap_or_else(|| panic!("{name} stayed pending after the uncordon"));
    }

    // Cancel by selector: the two llm workloads, not web-1.
    let out = group.cli(1, &["cancel", "-l", "app=llm"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("2 of 2 workloads"), "{}", text(&out));
    for name in ["llm-1", "llm-2"] {
        wait_for(Duration::from_secs(10), || {
            (state_of(&group, name) == "Cancelled").then_some(())
        })
        .unwrap_or_else(|| panic!("{name} was not cancelled"));
    }
    assert_ne!(state_of(&group, "web-1"), "Cancelled");
    // By LocalQueue: the rest of team-a.
    let out = group.cli(1, &["cancel", "--queue", "team-a"]);
    assert!(stdout(&out).contains("1 of 1 workloads"), "{}", text(&out));
    // A bad selector is a clear error; a name and a selector together a
    // usage error.
    let out = group.cli(1, &["cancel", "-l", "env in (a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("'(' without ')'"), "{}", text(&out));
    let out = group.cli(1, &["cancel", "web-1", "-l", "app=web"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // The watch saw the header, the submissions and the changes.
    std::thread::sleep(Duration::from_millis(500));
    let _ = watch.kill();
    let _ = watch.wait();
    let lines = lines.join().expect("watch output");
    assert!(lines[0].starts_with("NAMESPACE"), "{lines:?}");
    for (name, state) in [
        ("llm-1", "Pending"),
        ("llm-1", "Cancelled"),
        ("web-1", "Cancelled"),
    ] {
        assert!(
            lines.iter().any(|l| l.contains(name) && l.contains(state)),
            "no {name} {state} row in the watch:\n{}",
            lines.join("\n")
        );
    }
    // Other kinds are watched too: a LocalQueue that appears and goes,
    // and the cluster's row as it is drained and uncordoned.
    let (mut lq_watch, lq_lines) = spawn_watch(&group, &["get", "lq", "-w"]);
    let (mut cl_watch, cl_lines) = spawn_watch(&group, &["get", "clusters", "-w"]);
    std::thread::sleep(Duration::from_millis(1500));
    let extra = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: extra, namespace: default}\nspec: {clusterQueue: team-a}\n";
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], extra);
    assert!(out.status.success(), "{}", text(&out));
    assert!(group.cli(1, &["drain", "sim-1"]).status.success());
    std::thread::sleep(Duration::from_millis(2500));
    assert!(group.cli(1, &["uncordon", "sim-1"]).status.success());
    std::thread::sleep(Duration::from_millis(2500));
    assert!(group.cli(1, &["delete", "lq", "extra"]).status.success());
    std::thread::sleep(Duration::from_millis(2500));
    let lines = stop_watch(&mut lq_watch, lq_lines);
    assert!(lines[0].starts_with("NAMESPACE"), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("extra") && l.contains("team-a")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l == "default/extra deleted"),
        "{lines:?}"
    );
    let lines = stop_watch(&mut cl_watch, cl_lines);
    assert!(lines[0].starts_with("NAME"), "{lines:?}");
    let draining = lines
        .iter()
        .position(|l| l.contains("sim-1") && l.contains("Draining"));
    let ready_after = draining.is_some_and(|i| {
        lines[i..]
            .iter()
            .any(|l| l.contains("sim-1") && l.contains("Ready"))
    });
    assert!(ready_after, "{lines:?}");
}

/// `fleetq ARGS` left running, its stdout lines collected by a thread.
fn spawn_watch(
    group: &Group,
    args: &[&str],
) -> (std::process::Child, std::thread::JoinHandle<Vec<String>>) {
    let mut child = Command::new(FLEETQ)
        .args([INSECURE, "--server", group.addr(1)])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch starts");
    let out = child.stdout.take().expect("stdout");
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    (child, lines)
}

fn stop_watch(
    child: &mut std::process::Child,
    lines: std::thread::JoinHandle<Vec<String>>,
) -> Vec<String> {
    let _ = child.kill();
    let _ = child.wait();
    lines.join().expect("watch output")
}

/// Issue 29 item 2, in part: `stop` and `resume` a ClusterQueue and a
/// LocalQueue (Kueue's `stopPolicy: Hold`): nothing new is admitted while
/// either is stopped, the workload says why, and it is admitted once both
/// are resumed; the rest of the queue's spec is kept.
#[test]
fn stop_and_resume_hold_a_queue() {
    let group = single_node();
    let spec_before = group.cli(1, &["get", "cq", "team-a", "-o", "json"]);
    let out = group.cli(1, &["stop", "cq", "team-a"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("ClusterQueue/team-a stopped"),
        "{}",
        text(&out)
    );
    let again = group.cli(1, &["stop", "cq", "team-a"]);
    assert!(
        stdout(&again).contains("already stopped"),
        "{}",
        text(&again)
    );
    let out = group.cli(1, &["stop", "lq", "team-a"]);
    assert!(out.status.success(), "{}", text(&out));

    assert!(submit(&group, "team-a", "held", 1, &[]).status.success());
    std::thread::sleep(Duration::from_secs(2));
    let w = workload(&group, "held");
    assert_eq!(w["state"], "Pending", "{w}");
    assert!(
        w["reason"].as_str().unwrap_or_default().contains("stopped"),
        "{w}"
    );

    // One resumed, the other still holds it.
    assert!(group.cli(1, &["resume", "cq", "team-a"]).status.success());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(workload(&group, "held")["state"], "Pending");
    let out = group.cli(1, &["resume", "lq", "team-a"]);
    assert!(stdout(&out).contains("resumed"), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (workload(&group, "held")["state"] != "Pending").then_some(())
    })
    .unwrap_or_else(|| panic!("admitted once resumed: {}", workload(&group, "held")));

    // Only stopPolicy changed.
    let after = group.cli(1, &["get", "cq", "team-a", "-o", "json"]);
    let strip = |out: &Output| {
        let mut v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["status"] = Value::Null;
        v
    };
    assert_eq!(strip(&spec_before), strip(&after));

    // Dynamic completion offers names from the server (fish's protocol:
    // one candidate per line).
    let complete = |line: &[&str]| {
        let out = Command::new(FLEETQ)
            .env("COMPLETE", "fish")
            .args(["--", "fleetq", INSECURE, "--server", group.addr(1)])
            .args(line)
            .output()
            .expect("fleetq runs");
        stdout(&out)
    };
    let offered = complete(&["get", "cq", "te"]);
    assert!(offered.lines().any(|l| l == "team-a"), "{offered}");
    let offered = complete(&["submit", "--queue", ""]);
    assert!(offered.lines().any(|l| l == "team-a"), "{offered}");
    let offered = complete(&["drain", ""]);
    assert!(offered.lines().any(|l| l == "sim-1"), "{offered}");
    let offered = complete(&["cancel", "he"]);
    assert!(offered.lines().any(|l| l == "held"), "{offered}");

    // Kinds that cannot be stopped are refused by name.
    let out = group.cli(1, &["stop", "cohort", "x"]);
    assert!(
        !out.status.success() && stderr(&out).contains("kind:"),
        "{}",
        text(&out)
    );
}

/// Issue 29 item 2: `stop` and `resume` a workload (Kueue's `spec.active`).
/// A running workload is stopped by its executor, its quota released, and
/// it is kept out of its queue (saying how to resume it) until `resume`
/// queues it again; a workload submitted with `active: false` is kept the
/// same way; unknown names are not found.
#[test]
fn stop_and_resume_a_workload() {
    let group = single_node();
    let out = submit(&group, "team-a", "train", 4, &[]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (state_of(&group, "train") == "Running").then_some(())
    })
    .expect("train runs");

    let out = group.cli(1, &["stop", "wl", "train"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("Workload/default/train stop"),
        "{}",
        text(&out)
    );
    let stopped = wait_for(Duration::from_secs(20), || {
        let w = workload(&group, "train");
        (w["state"] == "Pending"
            && w["reason"]
                .to_string()
                .contains("fleetq resume workload train"))
        .then_some(w)
    });
    assert!(stopped.is_some(), "{}", workload(&group, "train"));
    // Its quota is free: another workload takes all 8 of team-a.
    let out = submit(&group, "team-a", "big", 8, &[]);
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (state_of(&group, "big") == "Running").then_some(())
    })
    .expect("big runs in the freed quota");
    let again = group.cli(1, &["stop", "wl", "train"]);
    assert!(
        stdout(&again).contains("already stopped"),
        "{}",
        text(&again)
    );
    let yaml = group.cli(1, &["get", "wl", "train", "-o", "yaml"]);
    assert!(stdout(&yaml).contains("active: false"), "{}", text(&yaml));

    let out = group.cli(1, &["cancel", "big"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = group.cli(1, &["resume", "wl", "train"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("resumed"), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (state_of(&group, "train") == "Running").then_some(())
    })
    .expect("train runs again");

    // Submitted inactive: kept, not queued.
    let manifest = labelled("parked", "x").replace(
        "  queueName: team-a\n",
        "  queueName: team-a\n  active: false\n",
    );
    let out = cli_stdin(group.addr(1), &["submit", "-f", "-"], &manifest);
    assert!(out.status.success(), "{}", text(&out));
    let w = workload(&group, "parked");
    assert_eq!(w["state"], "Pending", "{w}");
    assert!(
        w["reason"].to_string().contains("spec.active: false"),
        "{w}"
    );

    let out = group.cli(1, &["stop", "wl", "nosuch"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(stderr(&out).contains("not found"), "{}", text(&out));
}
