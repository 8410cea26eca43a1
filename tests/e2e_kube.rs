//! End-to-end: a real `fleetq agent --inventory kubernetes --executor
//! kubernetes` against a Kubernetes API server the test serves on loopback
//! (`common/fake_kube.rs`; no real API server can be installed on these
//! machines), with a real 3-node control plane. Node capacity and labels
//! become the cluster's inventory and follow node changes; an admitted
//! Kueue Job becomes a labelled `batch/v1` Job in its namespace; Job
//! status maps to workload states; cancel deletes the Job (foreground) and
//! releases the quota only once it is gone.

mod common;
#[path = "common/fake_kube.rs"]
mod fake_kube;

use std::process::Command;
use std::time::Duration;

use common::{
    cli_stdin, kube_agent, text, wait_for, workloads, Group, Process, CONFIG, FLEETQ, INSECURE,
};
use fake_kube::{node, pod, FakeKube};
use serde_json::{json, Value};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

/// The agent process, killed when the test ends (a failed assertion
/// included), so no agent outlives its test.
fn start_agent(group: &Group, kube: &FakeKube) -> Process {
    start_agent_with(group, kube, &[])
}

/// [`start_agent`] with `extra` agent flags.
fn start_agent_with(group: &Group, kube: &FakeKube, extra: &[&str]) -> Process {
    let kubeconfig = kube.write_kubeconfig(group.dir.path());
    let h100 = format!("{H100}=h100-80gb");
    let flavors = [h100.as_str(), "NVIDIA-A100-SXM4-40GB=a100-40gb"];
    kube_agent(group, &kubeconfig, "kube-east", &flavors, extra)
}

fn agent_log(group: &Group) -> String {
    std::fs::read_to_string(group.dir.path().join("agent.log")).unwrap_or_default()
}

/// `flavor/resource` -> capacity of cluster kube-east.
fn capacity(group: &Group) -> Vec<(String, u64)> {
    let out = group.cli(1, &["get", "clusters", "-o", "json"]);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let Some(c) = list.iter().find(|c| c["name"] == "kube-east") else {
        return Vec::new();
    };
    c["capacity"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            (
                format!(
                    "{}/{}",
                    f["flavor"].as_str().unwrap_or_default(),
                    f["resource"].as_str().unwrap_or_default()
                ),
                f["capacity"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .or_else(|| f["capacity"].as_u64())
                    .unwrap_or(u64::MAX),
            )
        })
        .collect()
}

fn gpu_capacity(group: &Group) -> Option<u64> {
    capacity(group)
        .into_iter()
        .find(|(k, _)| k == "h100-80gb/nvidia.com/gpu")
        .map(|(_, v)| v)
}

fn state(group: &Group, name: &str) -> Option<Value> {
    workloads(group, 1).into_iter().find(|w| w["name"] == name)
}

fn wait_state(group: &Group, name: &str, want: &str) -> Value {
    wait_for(Duration::from_secs(20), || {
        state(group, name).filter(|w| w["state"] == want)
    })
    .unwrap_or_else(|| {
        panic!(
            "{name} never {want}: {:?}\nagent log:\n{}",
            state(group, name),
            agent_log(group)
        )
    })
}

/// A Kueue-managed Job asking for 4 GPUs.
fn kueue_job(name: &str) -> String {
    kueue_job_gpus(name, 4)
}

/// A Kueue-managed Job whose one pod asks for `gpus` GPUs.
fn kueue_job_gpus(name: &str, gpus: u32) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: team-a
spec:
  suspend: true
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        command: ["python", "train.py"]
        resources:
          requests:
            nvidia.com/gpu: {gpus}
          limits:
            nvidia.com/gpu: {gpus}
"#
    )
}

fn job_of(kube: &FakeKube, workload: &str) -> Option<Value> {
    kube.jobs()
        .into_iter()
        .find(|j| j["metadata"]["labels"]["fleetq.dev/workload"] == workload)
}

#[test]
fn kubernetes_agent_turns_nodes_into_inventory_and_admissions_into_jobs() {
    let kube = FakeKube::start();
    let h100 = [
        ("nvidia.com/gpu.product", H100),
        ("nvidia.com/gpu.memory", "81559"),
    ];
    kube.put_node(node(
        "gpu-a",
        &h100,
        &[("nvidia.com/gpu", "8"), ("cpu", "96")],
    ));
    let mut cordoned = node("gpu-b", &h100, &[("nvidia.com/gpu", "8")]);
    cordoned["spec"]["unschedulable"] = json!(true);
    kube.put_node(cordoned);
    let mut sick = node("gpu-c", &h100, &[("nvidia.com/gpu", "8")]);
    sick["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    kube.put_node(sick);
    kube.put_node(node(
        "mig-a",
        &[("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB")],
        &[
            ("nvidia.com/mig-3g.20gb", "2"),
            ("nvidia.com/mig-2g.10gb", "3"),
        ],
    ));
    kube.put_node(node("cpu-only", &[], &[("cpu", "64")]));

    let group = Group::configured(&["--lease-ttl", "5s"]);
    let agent = start_agent(&group, &kube);

    // Only the Ready, schedulable node's GPUs count; MIG slices by profile.
    wait_for(Duration::from_secs(20), || {
        (gpu_capacity(&group) == Some(8)).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "inventory: {:?}\nagent log:\n{}",
            capacity(&group),
            agent_log(&group)
        )
    });
    let inventory = capacity(&group);
    assert!(
        inventory.contains(&("h100-80gb/gpu.memory".into(), 632)),
        "{inventory:?}"
    );
    assert!(
        inventory.contains(&("a100-40gb/nvidia.com/mig-3g.20gb".into(), 2)),
        "{inventory:?}"
    );
    assert!(
        inventory.contains(&("a100-40gb/nvidia.com/mig-2g.10gb".into(), 3)),
        "{inventory:?}"
    );
    // Node by node too (issue 26): the GPU nodes, each with what is free
    // on it; the cordoned and NotReady ones Unschedulable (so a node that
    // leaves under pods is seen), the CPU-only one absent.
    let described = group.cli(1, &["describe", "cluster", "kube-east"]);
    assert!(described.status.success(), "{}", text(&described));
    let described = String::from_utf8_lossy(&described.stdout).into_owned();
    let node_rows: Vec<&str> = described
        .lines()
        .skip_while(|l| !l.starts_with("NODE"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let names: std::collections::BTreeSet<&str> = node_rows
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["gpu-a", "gpu-b", "gpu-c", "mig-a"].into_iter().collect(),
        "{described}"
    );
    for away in ["gpu-b", "gpu-c"] {
        assert!(
            node_rows
                .iter()
                .any(|l| l.starts_with(away) && l.contains("Unschedulable")),
            "{described}"
        );
    }
    assert!(
        node_rows
            .iter()
            .any(|l| l.starts_with("gpu-a") && l.contains("nvidia.com/gpu") && l.contains(" 8 ")),
        "{described}"
    );

    // Uncordoning a node flows up through the watch, even one that missed
    // it: with the history compacted while the agent's watches were away
    // (an API server restart), their reconnects get 410 Gone and kube's
    // watcher re-lists.
    kube.pause_watches();
    kube.put_node(node("gpu-b", &h100, &[("nvidia.com/gpu", "8")]));
    kube.compact();
    kube.resume_watches();
    wait_for(Duration::from_secs(20), || {
        (gpu_capacity(&group) == Some(16)).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "after uncordon: {:?}\n{}",
            capacity(&group),
            agent_log(&group)
        )
    });
    let log = agent_log(&group);
    assert!(
        log.contains("node watch interrupted") && log.contains("too old resource version"),
        "the node watch got 410 and re-listed:\n{log}"
    );

    // An admitted Kueue Job becomes a Job in its namespace, labelled with
    // the admission, asking for its GPUs on the flavor's product.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &kueue_job("train"));
    assert!(out.status.success(), "{}", text(&out));
    let w = wait_state(&group, "train", "Admitted");
    let job = wait_for(Duration::from_secs(20), || job_of(&kube, "train"))
        .unwrap_or_else(|| panic!("no Job created\nagent log:\n{}", agent_log(&group)));
    let meta = &job["metadata"];
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["labels"]["fleetq.dev/cluster"], "kube-east");
    assert_eq!(
        meta["labels"]["fleetq.dev/workload-id"],
        w["id"].to_string()
    );
    assert_eq!(meta["labels"]["fleetq.dev/epoch"], w["epoch"].to_string());
    assert!(meta["labels"].get("kueue.x-k8s.io/queue-name").is_none());
    assert_eq!(job["spec"]["suspend"], false);
    assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 3600);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "4"
    );
    let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(terms[0]["matchExpressions"][0]["values"], json!([H100]));
    // Pinned to the node the ledger placed it on (issue 26, item 5), in a
    // form the API server takes (one name per field requirement).
    let field = &terms[0]["matchFields"][0];
    assert_eq!(field["key"], "metadata.name", "{terms}");
    assert!(
        [json!(["gpu-a"]), json!(["gpu-b"])].contains(&field["values"]),
        "one GPU node: {terms}"
    );
    let name = meta["name"].as_str().expect("job name").to_string();

    // Status: pods Ready -> Running; condition Complete -> Succeeded.
    kube.set_job_status("default", &name, json!({"active": 1, "ready": 1}));
    wait_state(&group, "train", "Running");
    kube.set_job_status(
        "default",
        &name,
        json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
    );
    wait_state(&group, "train", "Succeeded");

    // Failed condition -> Failed, with the Job's reason.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &kueue_job("flaky"));
    assert!(out.status.success(), "{}", text(&out));
    let job = wait_for(Duration::from_secs(20), || job_of(&kube, "flaky")).expect("flaky's Job");
    let flaky = job["metadata"]["name"].as_str().expect("name").to_string();
    kube.set_job_status(
        "default",
        &flaky,
        json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}),
    );
    wait_state(&group, "flaky", "Failed");

    // Cancel (after an agent restart): the Job is deleted in the foreground; the workload is
    // Cancelled (its quota free) only once the Job is gone.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &kueue_job("doomed"));
    assert!(out.status.success(), "{}", text(&out));
    let job = wait_for(Duration::from_secs(20), || job_of(&kube, "doomed")).expect("doomed's Job");
    let doomed = job["metadata"]["name"].as_str().expect("name").to_string();
    kube.set_job_status("default", &doomed, json!({"active": 1, "ready": 1}));
    let running = wait_state(&group, "doomed", "Running");

    // kill -9 the agent and start it again: it finds its Job by label and
    // reports it running; no second Job, no new admission.
    drop(agent);
    let agent = start_agent(&group, &kube);
    std::thread::sleep(Duration::from_secs(2));
    let w = wait_state(&group, "doomed", "Running");
    assert_eq!(w["epoch"], running["epoch"], "the same admission: {w}");
    let copies = kube
        .jobs()
        .iter()
        .filter(|j| j["metadata"]["labels"]["fleetq.dev/workload"] == "doomed")
        .count();
    assert_eq!(copies, 1);

    let out = group.cli(1, &["cancel", "doomed"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "doomed", "Cancelled");
    let deletes = kube.deletes();
    let (_, _, options) = deletes
        .iter()
        .find(|(ns, n, _)| ns == "default" && *n == doomed)
        .unwrap_or_else(|| panic!("no delete of {doomed}: {deletes:?}"));
    assert_eq!(options["propagationPolicy"], "Foreground", "{options}");
    assert!(job_of(&kube, "doomed").is_none(), "the Job is gone");
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    drop(agent);
}

/// `--finished-job-ttl` takes a duration or `never`, and names itself
/// when it gets something else.
#[test]
fn finished_job_ttl_is_checked_before_the_agent_starts() {
    let out = Command::new(FLEETQ)
        .args([
            INSECURE,
            "--server",
            "127.0.0.1:1",
            "agent",
            "--cluster",
            "c",
            "--inventory",
            "static",
            "--static-inventory",
            "h100-80gb=8",
            "--executor",
            "kubernetes",
            "--finished-job-ttl",
            "soon",
        ])
        .output()
        .expect("fleetq runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("finished_job_ttl: \"soon\""), "{stderr}");
}

/// A ClusterQueue that also counts fleetq's `gpu.memory`, and its
/// LocalQueue.
const SIZED_QUEUE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: sized
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "gpu.memory"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
      - name: gpu.memory
        nominalQuota: 640
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: sized
spec:
  clusterQueue: sized
"#;

/// A Kueue Workload (no Job template: the executor builds the Job from
/// its image and requests) asking for 2 GPUs and 150 GiB of GPU memory.
const SIZED_WORKLOAD: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: sized-train, namespace: default}
spec:
  queueName: sized
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: main
          image: nvcr.io/nvidia/pytorch:24.08-py3
          command: [python, train.py]
          env: [{name: EPOCHS, value: "3"}]
          resources:
            requests: {nvidia.com/gpu: "2", gpu.memory: "150"}
"#;

/// A workload without a Job template becomes a Job a real API server
/// accepts (the fake validates as one does): fleetq's own `gpu.memory` is
/// not a container resource, and GPUs are requested with an equal limit.
/// The Job is cleaned up `ttlSecondsAfterFinished` after it ends.
#[test]
fn workloads_without_a_template_become_jobs_the_api_server_accepts() {
    let kube = FakeKube::start();
    kube.put_node(node(
        "gpu-a",
        &[
            ("nvidia.com/gpu.product", H100),
            ("nvidia.com/gpu.memory", "81559"),
        ],
        &[("nvidia.com/gpu", "8")],
    ));
    let group = Group::start(3, &["--lease-ttl", "5s"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let config = format!("{CONFIG}---{SIZED_QUEUE}");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &config);
    assert!(out.status.success(), "{}", text(&out));
    // A TTL of its own, which must reach the Job.
    let _agent = start_agent_with(&group, &kube, &["--finished-job-ttl", "2h"]);
    wait_for(Duration::from_secs(20), || {
        (gpu_capacity(&group) == Some(8)).then_some(())
    })
    .unwrap_or_else(|| panic!("inventory: {:?}\n{}", capacity(&group), agent_log(&group)));

    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], SIZED_WORKLOAD);
    assert!(out.status.success(), "{}", text(&out));
    let job =
        wait_for(Duration::from_secs(20), || job_of(&kube, "sized-train")).unwrap_or_else(|| {
            panic!(
                "no Job: {:?}\nrefused: {:#?}\nagent log:\n{}",
                state(&group, "sized-train"),
                kube.refusals(),
                agent_log(&group)
            )
        });
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["resources"],
        json!({"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}),
        "{job}"
    );
    assert_eq!(container["env"], json!([{"name": "EPOCHS", "value": "3"}]));
    assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 7200, "{job}");
    let name = job["metadata"]["name"].as_str().expect("name").to_string();
    kube.set_job_status("default", &name, json!({"active": 1, "ready": 1}));
    wait_state(&group, "sized-train", "Running");
}

/// A pod fleetq did not start holds 4 of a node's 8 GPUs: the cluster
/// offers 4, so a workload of 8 stays pending for capacity while one of 4
/// is admitted; the pod of that admitted Job (labelled by the executor) is
/// already charged in the ledger and takes nothing more off; once the
/// other pod finishes, its GPUs are offered again.
#[test]
fn capacity_held_by_pods_fleetq_did_not_start_is_not_offered() {
    let kube = FakeKube::start();
    kube.put_node(node(
        "gpu-a",
        &[
            ("nvidia.com/gpu.product", H100),
            ("nvidia.com/gpu.memory", "81559"),
        ],
        &[("nvidia.com/gpu", "8"), ("cpu", "96")],
    ));
    kube.put_namespace("notebooks");
    kube.put_pod(pod(
        "notebooks",
        "jupyter-0",
        "gpu-a",
        &[("app", "jupyter")],
        &[("nvidia.com/gpu", "4"), ("cpu", "8")],
    ));

    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _agent = start_agent(&group, &kube);
    let offered = |want: u64| {
        wait_for(Duration::from_secs(20), || {
            (gpu_capacity(&group) == Some(want)).then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "wanted {want} GPUs offered: {:?}\nagent log:\n{}",
                capacity(&group),
                agent_log(&group)
            )
        })
    };
    offered(4);
    assert!(
        capacity(&group).contains(&("h100-80gb/gpu.memory".into(), 4 * 79)),
        "{:?}",
        capacity(&group)
    );

    // 8 GPUs: within quota, but no cluster has them free.
    let out = cli_stdin(
        group.addr(1),
        &["apply", "-f", "-"],
        &kueue_job_gpus("big", 8),
    );
    assert!(out.status.success(), "{}", text(&out));
    let pending = wait_for(Duration::from_secs(20), || {
        state(&group, "big").filter(|w| w["state"] == "Pending" && w["reasonKind"] != "")
    })
    .unwrap_or_else(|| panic!("big: {:?}", state(&group, "big")));
    assert_eq!(pending["reasonKind"], "NoClusterCapacity", "{pending}");
    assert!(
        pending["reason"]
            .as_str()
            .is_some_and(|r| r.contains("large enough for 8 nvidia.com/gpu")),
        "{pending}"
    );

    // 4 GPUs fit.
    let out = cli_stdin(
        group.addr(1),
        &["apply", "-f", "-"],
        &kueue_job_gpus("small", 4),
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "small", "Admitted");
    let job = wait_for(Duration::from_secs(20), || job_of(&kube, "small"))
        .unwrap_or_else(|| panic!("no Job for small\n{}", agent_log(&group)));
    let name = job["metadata"]["name"].as_str().expect("name").to_string();
    let pods = kube.start_job_pods("default", &name, "gpu-a");
    assert_eq!(pods.len(), 1);
    kube.set_job_status("default", &name, json!({"active": 1, "ready": 1}));
    wait_state(&group, "small", "Running");
    // `fleetq logs` reads its pod's log through the API server.
    let pod = kube
        .pods()
        .into_iter()
        .find(|p| p["metadata"]["name"] == pods[0].as_str())
        .expect("its pod");
    let container = pod["spec"]["containers"][0]["name"]
        .as_str()
        .expect("a container")
        .to_string();
    kube.set_pod_log("default", &pods[0], &container, "step 1\nstep 2\n");
    let out = group.cli(1, &["logs", "small"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out),
        agent_log(&group)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "step 1\nstep 2\n");
    // Its pod is fleetq's: the offer stays at 4 (not 0), and big waits.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(gpu_capacity(&group), Some(4), "{:?}", capacity(&group));
    assert_eq!(state(&group, "big").expect("big")["state"], "Pending");

    // The notebook ends: its GPUs are offered again.
    kube.set_pod_phase("notebooks", "jupyter-0", "Succeeded");
    offered(8);
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
}

/// A pod of an admitted Job that kube-scheduler cannot place on its node
/// (PodScheduled False, Unschedulable) is said in the workload's history
/// with the scheduler's message, once; the workload stays Admitted, and
/// runs once the pod does.
#[test]
fn a_pod_that_cannot_start_on_its_node_is_reported() {
    let kube = FakeKube::start();
    kube.put_node(node(
        "gpu-a",
        &[("nvidia.com/gpu.product", H100)],
        &[("nvidia.com/gpu", "8")],
    ));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _agent = start_agent(&group, &kube);
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &kueue_job("stuck"));
    assert!(out.status.success(), "{}", text(&out));
    let job = wait_for(Duration::from_secs(20), || job_of(&kube, "stuck"))
        .unwrap_or_else(|| panic!("no Job\n{}", agent_log(&group)));
    let labels = &job["spec"]["template"]["metadata"]["labels"];
    let label = |k: &str| labels[k].as_str().expect("label").to_string();
    let (id, epoch, cluster) = (
        label("fleetq.dev/workload-id"),
        label("fleetq.dev/epoch"),
        label("fleetq.dev/cluster"),
    );
    let why = "0/1 nodes are available: 1 node(s) had untolerated taint {maintenance: true}.";
    let mut stuck = pod(
        "default",
        "stuck-pod-0",
        "",
        &[
            ("fleetq.dev/workload-id", &id),
            ("fleetq.dev/epoch", &epoch),
            ("fleetq.dev/cluster", &cluster),
        ],
        &[("nvidia.com/gpu", "4")],
    );
    stuck["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("nodeName");
    stuck["status"] = json!({"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}]});
    kube.put_pod(stuck.clone());
    let said = format!("pod stuck-pod-0 cannot be scheduled: {why}");
    let history = || text(&group.cli(1, &["describe", "workload", "stuck"]));
    wait_for(Duration::from_secs(20), || {
        history().contains(&said).then_some(())
    })
    .unwrap_or_else(|| panic!("not said:\n{}\n{}", history(), agent_log(&group)));
    // The same condition again (a kubelet resync) is not said twice.
    stuck["metadata"]["labels"]["resync"] = json!("1");
    kube.put_pod(stuck);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(history().matches(&said).count(), 1, "{}", history());
    assert_eq!(state(&group, "stuck").expect("stuck")["state"], "Admitted");
    let name = job["metadata"]["name"].as_str().expect("name").to_string();
    kube.set_job_status("default", &name, json!({"active": 1, "ready": 1}));
    wait_state(&group, "stuck", "Running");
}

/// A fake cluster with one node of 8 H100s, a three-node group with
/// [`CONFIG`] applied, and an agent whose inventory has come in.
fn one_h100_node_cluster() -> (FakeKube, Group, Process) {
    one_h100_node_cluster_with(fake_kube::Options::default())
}

/// [`one_h100_node_cluster`] with the test API server's `options`.
fn one_h100_node_cluster_with(options: fake_kube::Options) -> (FakeKube, Group, Process) {
    let kube = FakeKube::start_with(options);
    kube.put_node(node(
        "gpu-a",
        &[("nvidia.com/gpu.product", H100)],
        &[("nvidia.com/gpu", "8")],
    ));
    let group = Group::start(3, &["--lease-ttl", "5s"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let agent = start_agent(&group, &kube);
    wait_for(Duration::from_secs(20), || {
        (gpu_capacity(&group) == Some(8)).then_some(())
    })
    .unwrap_or_else(|| panic!("inventory: {:?}\n{}", capacity(&group), agent_log(&group)));
    (kube, group, agent)
}

/// A Kueue JobSet: a driver without devices and two Jobs of one 2-GPU
/// worker each.
const JOBSET: &str = r#"apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: llama
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: team-a
spec:
  suspend: true
  replicatedJobs:
  - name: driver
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: driver
              image: trainer:1
  - name: workers
    replicas: 2
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: worker
              image: trainer:1
              resources:
                limits:
                  nvidia.com/gpu: 2
"#;

fn jobset_of(kube: &FakeKube, workload: &str) -> Option<Value> {
    kube.jobsets()
        .into_iter()
        .find(|j| j["metadata"]["labels"]["fleetq.dev/workload"] == workload)
}

/// `fleetq apply` of a Kueue JobSet: one workload of a pod set per
/// replicated Job (4 GPUs charged), created in the cluster as a JobSet the
/// API server accepts, its workers pinned to the flavor's GPUs; its status
/// maps to Running and Succeeded; the agent restarted finds it again; a
/// cancel deletes it (foreground) and frees the quota once it is gone.
#[test]
fn a_kueue_jobset_runs_as_a_jobset_and_its_status_maps_back() {
    let (kube, group, agent) = one_h100_node_cluster();

    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], JOBSET);
    assert!(out.status.success(), "{}", text(&out));
    let jobset =
        wait_for(Duration::from_secs(20), || jobset_of(&kube, "llama")).unwrap_or_else(|| {
            panic!(
                "no JobSet: {:?}\nrefused: {:#?}\nagent log:\n{}",
                state(&group, "llama"),
                kube.refusals(),
                agent_log(&group)
            )
        });
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    // A pod set per replicated Job: 4 GPUs charged (2 Jobs x 1 pod x 2).
    let w = state(&group, "llama").expect("the workload");
    assert_eq!(
        w["requests"], "no requests x 1; nvidia.com/gpu: 2 x 2",
        "{w}"
    );
    assert_eq!(
        w["flavors"],
        json!({"driver": {}, "workers": {"nvidia.com/gpu": "h100-80gb"}}),
        "{w}"
    );
    let name = jobset["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(name.starts_with("llama-"), "{name}");
    assert_eq!(jobset["spec"]["suspend"], false);
    let workers = &jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"];
    assert_eq!(
        workers["metadata"]["labels"]["fleetq.dev/workload"],
        "llama"
    );
    let affinity = workers["spec"]["affinity"].to_string();
    assert!(affinity.contains(H100), "{affinity}");
    let driver = &jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    assert!(
        !driver["spec"]["affinity"].to_string().contains(H100),
        "the driver has no GPUs to pin: {driver}"
    );
    // Pods ready -> Running; the agent restarted finds its JobSet.
    let pods = kube.start_jobset_pods("default", &name, "gpu-a");
    assert_eq!(pods.len(), 3);
    kube.set_jobset_status(
        "default",
        &name,
        json!({"replicatedJobsStatus": [
            {"name": "driver", "ready": 1, "active": 1},
            {"name": "workers", "ready": 2, "active": 2},
        ]}),
    );
    let running = wait_state(&group, "llama", "Running");
    drop(agent);
    let agent = start_agent(&group, &kube);
    std::thread::sleep(Duration::from_secs(2));
    let w = wait_state(&group, "llama", "Running");
    assert_eq!(w["epoch"], running["epoch"], "the same admission: {w}");
    assert_eq!(kube.jobsets().len(), 1, "no second JobSet");
    kube.set_jobset_status(
        "default",
        &name,
        json!({"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]}),
    );
    wait_state(&group, "llama", "Succeeded");

    // A second one, cancelled while it runs.
    let out = cli_stdin(
        group.addr(1),
        &["apply", "-f", "-"],
        &JOBSET.replace("name: llama", "name: doomed"),
    );
    assert!(out.status.success(), "{}", text(&out));
    let doomed =
        wait_for(Duration::from_secs(20), || jobset_of(&kube, "doomed")).expect("doomed's JobSet");
    let doomed = doomed["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    kube.start_jobset_pods("default", &doomed, "gpu-a");
    let out = group.cli(1, &["cancel", "doomed"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "doomed", "Cancelled");
    let deletes = kube.deletes();
    let (_, _, options) = deletes
        .iter()
        .find(|(ns, n, _)| ns == "default" && *n == doomed)
        .unwrap_or_else(|| panic!("no delete of {doomed}: {deletes:?}"));
    assert_eq!(options["propagationPolicy"], "Foreground", "{options}");
    assert!(jobset_of(&kube, "doomed").is_none(), "the JobSet is gone");
    assert!(
        !kube
            .pods()
            .iter()
            .any(|p| p["metadata"]["labels"]["fleetq.dev/workload"] == "doomed"),
        "and its pods"
    );
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    drop(agent);
}

/// A Kueue pod group (KEP-976): a driver and two GPU workers.
fn pod_group(name: &str) -> String {
    (0..3)
        .map(|i| {
            let (role, gpus) = if i == 0 { ("driver", 0) } else { ("worker", 2) };
            format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}-{i}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: team-a
    kueue.x-k8s.io/pod-group-name: {name}
    role: {role}
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "3"
spec:
  restartPolicy: Never
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}]
  containers:
  - name: main
    image: ray:2
    resources:
      limits:
        nvidia.com/gpu: {gpus}
"#
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

fn pods_of(kube: &FakeKube, workload: &str) -> Vec<Value> {
    kube.pods()
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["fleetq.dev/workload"] == workload)
        .collect()
}

fn pod_names(pods: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// `fleetq apply` of a Kueue pod group: one workload of a pod set per role
/// (4 GPUs charged), created in the cluster as its three pods, which the
/// API server accepts, ungated, the workers pinned to the flavor's GPUs;
/// Running once every pod runs, Succeeded once all have; the agent
/// restarted finds the group again; a pod that fails takes the rest of
/// its group down before the workload fails; a cancel deletes the pods.
#[test]
fn a_kueue_pod_group_runs_as_its_pods_and_their_phases_map_back() {
    let (kube, group, agent) = one_h100_node_cluster();

    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &pod_group("ray"));
    assert!(out.status.success(), "{}", text(&out));
    let pods = wait_for(Duration::from_secs(20), || {
        let pods = pods_of(&kube, "ray");
        (pods.len() == 3).then_some(pods)
    })
    .unwrap_or_else(|| {
        panic!(
            "no pods: {:?}\nrefused: {:#?}\nagent log:\n{}",
            state(&group, "ray"),
            kube.refusals(),
            agent_log(&group)
        )
    });
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    let w = state(&group, "ray").expect("the workload");
    assert_eq!(
        w["requests"]
            .as_str()
            .map(|r| r.contains("nvidia.com/gpu: 2 x 2")),
        Some(true),
        "{w}"
    );
    for pod in &pods {
        assert!(pod["spec"]["schedulingGates"].is_null(), "ungated: {pod}");
        assert!(pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"].is_null());
        let pinned = pod["spec"]["affinity"].to_string().contains(H100);
        let worker = pod["metadata"]["labels"]["role"] == "worker";
        assert_eq!(pinned, worker, "only the workers hold GPUs: {pod}");
    }
    let names = pod_names(&pods);
    for name in &names[..2] {
        kube.set_pod_phase("default", name, "Running");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_ne!(
        state(&group, "ray").map(|w| w["state"].clone()),
        Some(json!("Running")),
        "not before every pod runs"
    );
    kube.set_pod_phase("default", &names[2], "Running");
    let running = wait_state(&group, "ray", "Running");
    drop(agent);
    let agent = start_agent(&group, &kube);
    std::thread::sleep(Duration::from_secs(2));
    let w = wait_state(&group, "ray", "Running");
    assert_eq!(w["epoch"], running["epoch"], "the same admission: {w}");
    assert_eq!(pods_of(&kube, "ray").len(), 3, "no second set of pods");
    for name in &names {
        kube.set_pod_phase("default", name, "Succeeded");
    }
    wait_state(&group, "ray", "Succeeded");

    // One pod fails: the others are deleted, then the workload fails.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &pod_group("flaky"));
    assert!(out.status.success(), "{}", text(&out));
    let flaky = wait_for(Duration::from_secs(20), || {
        let pods = pods_of(&kube, "flaky");
        (pods.len() == 3).then_some(pod_names(&pods))
    })
    .expect("flaky's pods");
    for name in &flaky {
        kube.set_pod_phase("default", name, "Running");
    }
    wait_state(&group, "flaky", "Running");
    kube.set_pod_phase("default", &flaky[1], "Failed");
    wait_state(&group, "flaky", "Failed");
    let described = text(&group.cli(1, &["describe", "workload", "flaky"]));
    assert!(
        described.contains(&format!("pod {} failed", flaky[1])),
        "{described}"
    );
    assert!(
        pods_of(&kube, "flaky").is_empty(),
        "its pods are gone first"
    );

    // The agent stops with a group short of pods (as if it stopped while
    // creating them): once back, it deletes the rest, then Failed.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &pod_group("half"));
    assert!(out.status.success(), "{}", text(&out));
    let half = wait_for(Duration::from_secs(20), || {
        let pods = pods_of(&kube, "half");
        (pods.len() == 3).then_some(pod_names(&pods))
    })
    .expect("half's pods");
    drop(agent);
    kube.delete_pod("default", &half[2]);
    let agent = start_agent(&group, &kube);
    wait_state(&group, "half", "Failed");
    let described = text(&group.cli(1, &["describe", "workload", "half"]));
    assert!(described.contains("2 of 3"), "{described}");
    assert!(pods_of(&kube, "half").is_empty(), "its pods are gone first");

    // A cancel deletes the pods and frees the quota once they are gone.
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], &pod_group("doomed"));
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || {
        (pods_of(&kube, "doomed").len() == 3).then_some(())
    })
    .expect("doomed's pods");
    let out = group.cli(1, &["cancel", "doomed"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "doomed", "Cancelled");
    assert!(pods_of(&kube, "doomed").is_empty(), "the pods are gone");
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    drop(agent);
}

/// A cluster without the JobSet API: a JobSet admitted there fails with
/// the reason, and the agent keeps running Jobs.
#[test]
fn a_jobset_on_a_cluster_without_the_jobset_api_fails_saying_so() {
    let (kube, group, _agent) = one_h100_node_cluster_with(fake_kube::Options {
        jobset_api: false,
        ..fake_kube::Options::default()
    });
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], JOBSET);
    assert!(out.status.success(), "{}", text(&out));
    wait_state(&group, "llama", "Failed");
    let described = text(&group.cli(1, &["describe", "workload", "llama"]));
    assert!(
        described.contains("has no JobSet API"),
        "the reason is shown:\n{described}"
    );
    let out = cli_stdin(
        group.addr(1),
        &["apply", "-f", "-"],
        &kueue_job_gpus("plain", 2),
    );
    assert!(out.status.success(), "{}", text(&out));
    wait_for(Duration::from_secs(20), || job_of(&kube, "plain")).expect("Jobs still run");
}
