//! End-to-end: the front door for kubectl users. A real `fleetq agent
//! --executor kubernetes --watch-queued-jobs` against the test's
//! Kubernetes API server (`common/fake_kube.rs`) and a real 3-node control
//! plane: a suspended Job labelled `kueue.x-k8s.io/queue-name`, created as
//! kubectl creates it, becomes a Workload; once admitted the user's Job is
//! unsuspended in place with the flavor's node selector (no second Job); a
//! Job too big stays suspended and says why in an annotation; deleting a
//! Job cancels its workload; an agent restart submits nothing twice.

mod common;
#[path = "common/fake_kube.rs"]
mod fake_kube;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{cli_stdin, text, wait_for, workloads, Group, CONFIG, FLEETQ, INSECURE};
use fake_kube::{node, FakeKube};
use serde_json::{json, Value};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

struct AgentProcess(Child);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(group: &Group, kube: &FakeKube) -> AgentProcess {
    let kubeconfig = kube.write_kubeconfig(group.dir.path());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(group.dir.path().join("agent.log"))
        .expect("log");
    Command::new(FLEETQ)
        .args([
            INSECURE,
            "--server",
            &group.addrs.join(","),
            "agent",
            "--cluster",
            "kube-east",
            "--inventory",
            "kubernetes",
            "--executor",
            "kubernetes",
            "--watch-queued-jobs",
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8"),
            "--flavor",
            &format!("{H100}=h100-80gb"),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .map(AgentProcess)
        .expect("fleetq agent starts")
}

fn agent_log(group: &Group) -> String {
    std::fs::read_to_string(group.dir.path().join("agent.log")).unwrap_or_default()
}

/// A Job as a Kueue user writes it (Kueue's webhook would set
/// `suspend: true`; here the user did).
fn queued_job(name: &str, gpus: u32) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "suspend": true,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                    "command": ["python", "train.py"],
                    "resources": {
                        "requests": {"nvidia.com/gpu": gpus.to_string()},
                        "limits": {"nvidia.com/gpu": gpus.to_string()},
                    },
                }],
            }},
        },
    })
}

/// The workload's name for a created Job: `job-<name>-<uid prefix>`.
fn workload_of(job: &Value) -> String {
    let uid: String = job["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    format!(
        "job-{}-{}",
        job["metadata"]["name"].as_str().unwrap_or_default(),
        uid.to_ascii_lowercase()
    )
}

fn job(kube: &FakeKube, name: &str) -> Option<Value> {
    kube.jobs()
        .into_iter()
        .find(|j| j["metadata"]["name"] == name)
}

fn state(group: &Group, name: &str) -> Option<Value> {
    workloads(group, 1).into_iter().find(|w| w["name"] == name)
}

fn wait_state(group: &Group, name: &str, want: &[&str]) -> Value {
    wait_for(Duration::from_secs(30), || {
        state(group, name).filter(|w| want.iter().any(|s| w["state"] == *s))
    })
    .unwrap_or_else(|| {
        panic!(
            "{name} never {want:?}: {:?}\n{}\nagent log:\n{}",
            state(group, name),
            text(&group.cli(1, &["describe", "workload", name])),
            agent_log(group)
        )
    })
}

fn wait_job(kube: &FakeKube, group: &Group, name: &str, what: &str, ok: impl Fn(&Value) -> bool) {
    wait_for(Duration::from_secs(30), || job(kube, name).filter(&ok)).unwrap_or_else(|| {
        panic!(
            "Job {name} never {what}: {:?}\nagent log:\n{}",
            job(kube, name),
            agent_log(group)
        )
    });
}

#[test]
fn kubectl_created_jobs_are_queued_admitted_in_place_and_cancelled_on_delete() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::start(3, &["--lease-ttl", "5s"]);
    group
        .wait_leader(Duration::from_secs(15))
        .expect("a leader is elected");
    let out = cli_stdin(group.addr(1), &["apply", "-f", "-"], CONFIG);
    assert!(out.status.success(), "{}", text(&out));
    let agent = start_agent(&group, &kube);

    // kubectl create: a Workload appears, is admitted, and the user's own
    // Job is unsuspended in place with the flavor's node selector.
    let train = kube.kubectl_create_job(queued_job("train", 4));
    let train_wl = workload_of(&train);
    wait_state(&group, &train_wl, &["Admitted", "Running"]);
    wait_job(&kube, &group, "train", "unsuspended", |j| {
        j["spec"]["suspend"] == false
    });
    let running = job(&kube, "train").expect("the Job");
    assert_eq!(
        running["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu.product"], H100,
        "{running:#}"
    );
    assert_eq!(running["metadata"]["uid"], train["metadata"]["uid"]);
    assert_eq!(running["metadata"]["labels"]["fleetq.dev/adopted"], "true");
    wait_job(&kube, &group, "train", "marked", |j| {
        j["metadata"]["annotations"]["fleetq.dev/workload"] == format!("default/{train_wl}")
    });
    assert_eq!(kube.jobs().len(), 1, "no second Job: {:#?}", kube.jobs());
    // Its pods run: the workload is Running.
    kube.start_job_pods("default", "train", "gpu-a");
    kube.set_job_status(
        "default",
        "train",
        json!({"active": 1, "ready": 1, "startTime": "2025-01-01T00:00:00Z"}),
    );
    wait_state(&group, &train_wl, &["Running"]);

    // Too big for the queue: stays suspended, and says why.
    let huge = kube.kubectl_create_job(queued_job("huge", 16));
    let huge_wl = workload_of(&huge);
    wait_state(&group, &huge_wl, &["Pending"]);
    wait_job(&kube, &group, "huge", "annotated pending", |j| {
        j["metadata"]["annotations"]["fleetq.dev/pending-reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    });
    assert_eq!(job(&kube, "huge").expect("huge")["spec"]["suspend"], true);

    // The agent restarts; a Job created meanwhile is queued once, and
    // nothing is submitted twice.
    drop(agent);
    let late = kube.kubectl_create_job(queued_job("late", 2));
    let late_wl = workload_of(&late);
    let agent = start_agent(&group, &kube);
    wait_state(&group, &late_wl, &["Admitted", "Running"]);
    wait_job(&kube, &group, "late", "unsuspended", |j| {
        j["spec"]["suspend"] == false
    });
    std::thread::sleep(Duration::from_secs(2));
    let mut names: Vec<String> = workloads(&group, 1)
        .iter()
        .filter_map(|w| w["name"].as_str().map(String::from))
        .collect();
    names.sort();
    let mut want = vec![train_wl.clone(), huge_wl.clone(), late_wl.clone()];
    want.sort();
    assert_eq!(names, want);
    assert_eq!(kube.jobs().len(), 3, "{:#?}", kube.jobs());
    assert_eq!(
        state(&group, &train_wl).expect("train")["state"],
        "Running",
        "the restart left the running Job alone"
    );

    // kubectl delete: the workloads are cancelled, the running one's
    // quota freed once its pods are gone.
    kube.kubectl_delete_job("default", "train");
    wait_state(&group, &train_wl, &["Cancelled"]);
    assert!(kube
        .pods()
        .iter()
        .all(
            |p| p["metadata"]["labels"]["fleetq.dev/workload-id"].is_null()
                || p["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| !n.starts_with("train"))
        ));
    kube.kubectl_delete_job("default", "huge");
    wait_state(&group, &huge_wl, &["Cancelled"]);
    drop(agent);
}
