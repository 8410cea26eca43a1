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

use std::time::Duration;

use common::{kube_agent, text, wait_for, workloads, Group, Process};
use fake_kube::{node, FakeKube};
use serde_json::{json, Value};

const H100: &str = "NVIDIA-H100-80GB-HBM3";

fn start_agent(group: &Group, kube: &FakeKube) -> Process {
    start_agent_for(group, kube, "kube-east", true)
}

/// An agent for `cluster` on `kube`; with `front_door`, it watches the
/// cluster's queue-labelled Jobs (and suspends those created running).
fn start_agent_for(group: &Group, kube: &FakeKube, cluster: &str, front_door: bool) -> Process {
    let kubeconfig = kube.write_kubeconfig(group.dir.path());
    let flavor = format!("{H100}=h100-80gb");
    let extra: &[&str] = match front_door {
        true => &["--watch-queued-jobs", "--suspend-queued-jobs"],
        false => &[],
    };
    kube_agent(group, &kubeconfig, cluster, &[&flavor], extra)
}

fn agent_log(group: &Group) -> String {
    let read = |f: &str| std::fs::read_to_string(group.dir.path().join(f)).unwrap_or_default();
    format!(
        "{}\n--- kube-west:\n{}",
        read("agent.log"),
        read("agent-kube-west.log")
    )
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

/// Waits for an Event of `reason` about Job `name` whose note holds
/// `says` (what `kubectl events --for job/NAME` lists).
fn wait_event(kube: &FakeKube, group: &Group, name: &str, reason: &str, says: &str) -> Value {
    wait_for(Duration::from_secs(30), || {
        kube.events().into_iter().find(|e| {
            e["regarding"]["name"] == name
                && e["regarding"]["kind"] == "Job"
                && e["reason"] == reason
                && e["reportingController"] == "fleetq.dev/front-door"
                && e["note"].as_str().is_some_and(|n| n.contains(says))
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no {reason} Event on Job {name} saying {says:?}: {:#?}\nagent log:\n{}",
            kube.events(),
            agent_log(group)
        )
    })
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
    let group = Group::configured(&["--lease-ttl", "5s"]);
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
    wait_event(&kube, &group, "train", "CreatedWorkload", &train_wl);
    wait_event(
        &kube,
        &group,
        "train",
        "Started",
        "on this cluster (kube-east)",
    );
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
    let pending = wait_event(&kube, &group, "huge", "Pending", "");
    assert_eq!(pending["type"], "Normal");
    assert_eq!(pending["regarding"]["uid"], huge["metadata"]["uid"]);

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

    // Created unsuspended (no webhook here): the front door suspends it
    // before the Job controller starts anything, then queues and admits
    // it like the others.
    let mut spec = queued_job("eager", 2);
    spec["spec"]["suspend"] = json!(false);
    let eager = kube.kubectl_create_job(spec);
    let eager_wl = workload_of(&eager);
    wait_state(&group, &eager_wl, &["Admitted", "Running"]);
    wait_job(&kube, &group, "eager", "adopted", |j| {
        j["spec"]["suspend"] == false && j["metadata"]["labels"]["fleetq.dev/adopted"] == "true"
    });
    assert!(
        kube.patches().iter().any(|(ns, name, body)| ns == "default"
            && name == "eager"
            && body["spec"]["suspend"] == true),
        "never suspended: {:#?}",
        kube.patches()
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

/// The copy of a JobSet, PyTorchJob or RayJob (`kind`) the executor made
/// for the `admitted` workload, once it is there.
fn wait_custom_copy(kube: &FakeKube, group: &Group, kind: &str, admitted: &Value) -> Value {
    let id = admitted["id"].as_u64().expect("id").to_string();
    wait_for(Duration::from_secs(30), || {
        kube.custom_objects(kind)
            .into_iter()
            .find(|j| j["metadata"]["labels"]["fleetq.dev/workload-id"] == id.as_str())
    })
    .unwrap_or_else(|| {
        panic!(
            "no copy: {:#?}\nagent log:\n{}",
            kube.custom_objects(kind),
            agent_log(group)
        )
    })
}

/// The workload's copy on a cluster: the Job its executor made for it.
fn copy_of(kube: &FakeKube, workload_id: &Value) -> Option<Value> {
    let id = workload_id.as_u64().map(|i| i.to_string())?;
    kube.jobs()
        .into_iter()
        .find(|j| j["metadata"]["labels"]["fleetq.dev/workload-id"] == id.as_str())
}

/// MultiKueue's model: a Job created in kube-east that only kube-west can
/// run stays suspended in kube-east while a copy runs in kube-west; the
/// copy's status comes back (into the Job's status when the Job is
/// MultiKueue's by `spec.managedBy`, else into an annotation, since the
/// status of such a Job is Kubernetes' Job controller's); the front door
/// restarting in the middle changes nothing; deleting the original
/// deletes the copy.
#[test]
fn a_job_admitted_to_another_cluster_runs_there_and_its_status_comes_back() {
    let (east, west) = (FakeKube::start(), FakeKube::start());
    let h100 = [("nvidia.com/gpu.product", H100)];
    east.put_node(node("gpu-e", &h100, &[("nvidia.com/gpu", "2")]));
    west.put_node(node("gpu-w", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _west_agent = start_agent_for(&group, &west, "kube-west", false);
    let east_agent = start_agent(&group, &east);

    // A plain Job: its copy runs in kube-west, the original waits here.
    let far = east.kubectl_create_job(queued_job("far", 4));
    let far_wl = workload_of(&far);
    let far_state = wait_state(&group, &far_wl, &["Admitted", "Running"]);
    assert_eq!(far_state["cluster"], "kube-west", "{far_state:#}");
    let far_copy = wait_for(Duration::from_secs(30), || copy_of(&west, &far_state["id"]))
        .unwrap_or_else(|| {
            panic!(
                "no copy in kube-west: {:#?}\n{}",
                west.jobs(),
                agent_log(&group)
            )
        });
    let far_copy_name = far_copy["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert_eq!(far_copy["spec"]["suspend"], false);
    wait_job(&east, &group, "far", "told where it runs", |j| {
        j["metadata"]["annotations"]["fleetq.dev/admitted-cluster"] == "kube-west"
    });
    wait_event(
        &east,
        &group,
        "far",
        "Started",
        "runs as a copy on cluster kube-west",
    );
    west.start_job_pods("default", &far_copy_name, "gpu-w");
    west.set_job_status(
        "default",
        &far_copy_name,
        json!({"active": 1, "ready": 1, "startTime": "2025-01-01T00:00:00Z"}),
    );
    wait_job(&east, &group, "far", "given the copy's status", |j| {
        j["metadata"]["annotations"]["fleetq.dev/remote-status"]
            .as_str()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .is_some_and(|s| s["active"] == 1 && s["ready"] == 1)
    });
    let original = job(&east, "far").expect("far");
    assert_eq!(original["spec"]["suspend"], true, "{original:#}");
    assert!(
        east.pods().is_empty(),
        "nothing runs in kube-east: {:#?}",
        east.pods()
    );

    // A Job handed to MultiKueue: the copy (without managedBy) runs in
    // kube-west, and its status is written onto the original's status.
    let mut spec = queued_job("mk", 4);
    spec["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let mk = east.kubectl_create_job(spec);
    let mk_wl = workload_of(&mk);
    let mk_state = wait_state(&group, &mk_wl, &["Admitted", "Running"]);
    let mk_copy = wait_for(Duration::from_secs(30), || copy_of(&west, &mk_state["id"]))
        .unwrap_or_else(|| {
            panic!(
                "no copy in kube-west: {:#?}\n{}",
                west.jobs(),
                agent_log(&group)
            )
        });
    let mk_copy_name = mk_copy["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    assert!(mk_copy["spec"]["managedBy"].is_null(), "{mk_copy:#}");
    west.start_job_pods("default", &mk_copy_name, "gpu-w");
    west.set_job_status(
        "default",
        &mk_copy_name,
        json!({"active": 1, "ready": 0, "startTime": "2025-01-01T00:00:00Z"}),
    );
    wait_job(&east, &group, "mk", "given the copy's status", |j| {
        j["status"]["active"] == 1
    });

    // The front door restarts; the copy finishes meanwhile; the original
    // shows it finished, and the workload Succeeded.
    drop(east_agent);
    west.set_job_status(
        "default",
        &mk_copy_name,
        json!({
            "succeeded": 1,
            "startTime": "2025-01-01T00:00:00Z",
            "completionTime": "2025-01-01T00:10:00Z",
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"},
            ],
        }),
    );
    let east_agent = start_agent(&group, &east);
    wait_state(&group, &mk_wl, &["Succeeded"]);
    wait_job(&east, &group, "mk", "shown finished", |j| {
        j["status"]["succeeded"] == 1
            && j["status"]["active"].is_null()
            && j["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Complete" && c["status"] == "True")
            })
    });
    assert_eq!(job(&east, "mk").expect("mk")["spec"]["suspend"], true);
    wait_event(&east, &group, "mk", "Finished", "Succeeded");

    // kubectl delete of the original: the workload is cancelled and the
    // copy in kube-west goes with its pods.
    east.kubectl_delete_job("default", "far");
    wait_state(&group, &far_wl, &["Cancelled"]);
    wait_for(Duration::from_secs(30), || {
        copy_of(&west, &far_state["id"]).is_none().then_some(())
    })
    .unwrap_or_else(|| panic!("the copy outlived its original: {:#?}", west.jobs()));
    drop(east_agent);
}

/// A JobSet as a Kueue user writes it, suspended: two Jobs of one 2-GPU
/// worker each.
fn queued_jobset(name: &str) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "suspend": true,
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 2,
                "template": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "trainer",
                        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                        "resources": {
                            "requests": {"nvidia.com/gpu": "2"},
                            "limits": {"nvidia.com/gpu": "2"},
                        },
                    }],
                }}}},
            }],
        },
    })
}

fn user_jobset(kube: &FakeKube, name: &str) -> Option<Value> {
    kube.jobsets()
        .into_iter()
        .find(|j| j["metadata"]["name"] == name)
}

/// A JobSet created with kubectl, suspended and queue-labelled: queued
/// (`jobset-<name>-<uid prefix>`), run as a pinned copy on the cluster it
/// is admitted to (this one: its pods cannot be pinned in place), the
/// copy's status shown on it; deleting it cancels the workload and
/// deletes the copy.
#[test]
fn a_kubectl_created_jobset_is_queued_run_as_a_copy_and_cancelled_on_delete() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let agent = start_agent(&group, &kube);

    let created = kube.kubectl_create_jobset(queued_jobset("llama"));
    let workload = workload_of(&created).replacen("job-", "jobset-", 1);
    let admitted = wait_state(&group, &workload, &["Admitted", "Running"]);
    assert_eq!(admitted["cluster"], "kube-east", "{admitted:#}");
    let copy = wait_custom_copy(&kube, &group, "JobSet", &admitted);
    let id = admitted["id"].as_u64().expect("id").to_string();
    let copy_name = copy["metadata"]["name"].as_str().expect("name").to_string();
    assert_ne!(copy_name, "llama");
    assert_eq!(copy["spec"]["suspend"], false);
    let pods = &copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
    assert!(
        pods["spec"]["affinity"].to_string().contains(H100),
        "the copy's pods are pinned: {pods}"
    );
    // The front door annotates the user's JobSet on its own time.
    let original = wait_for(Duration::from_secs(30), || {
        user_jobset(&kube, "llama").filter(|j| {
            j["metadata"]["annotations"]["fleetq.dev/workload"] == format!("default/{workload}")
        })
    })
    .unwrap_or_else(|| panic!("never annotated: {:#?}", user_jobset(&kube, "llama")));
    assert_eq!(original["spec"]["suspend"], true, "the original waits");

    // The copy's status comes back onto the user's JobSet.
    kube.start_jobset_pods("default", &copy_name, "gpu-a");
    kube.set_jobset_status(
        "default",
        &copy_name,
        json!({"replicatedJobsStatus": [{"name": "workers", "ready": 2, "active": 2}]}),
    );
    wait_state(&group, &workload, &["Running"]);
    wait_for(Duration::from_secs(30), || {
        user_jobset(&kube, "llama").filter(|j| {
            j["metadata"]["annotations"]["fleetq.dev/remote-status"]
                .as_str()
                .is_some_and(|s| s.contains("\"ready\":2"))
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "the copy's status never came back: {:#?}\nagent log:\n{}",
            user_jobset(&kube, "llama"),
            agent_log(&group)
        )
    });
    assert!(
        kube.events()
            .iter()
            .any(|e| e["regarding"]["kind"] == "JobSet" && e["reason"] == "CreatedWorkload"),
        "Events are told on the JobSet: {:#?}",
        kube.events()
    );

    // The agent restarts: the running copy is left alone, nothing is
    // submitted or copied twice, and a JobSet created meanwhile is
    // queued once.
    let before = state(&group, &workload).expect("running");
    drop(agent);
    let late = kube.kubectl_create_jobset(queued_jobset("late"));
    let late_wl = workload_of(&late).replacen("job-", "jobset-", 1);
    let agent = start_agent(&group, &kube);
    wait_state(&group, &late_wl, &["Admitted", "Running"]);
    std::thread::sleep(Duration::from_secs(2));
    let after = wait_state(&group, &workload, &["Running"]);
    assert_eq!(
        after["epoch"], before["epoch"],
        "the same admission: {after}"
    );
    let mut names: Vec<String> = workloads(&group, 1)
        .iter()
        .filter_map(|w| w["name"].as_str().map(String::from))
        .collect();
    names.sort();
    let mut want = vec![workload.clone(), late_wl.clone()];
    want.sort();
    assert_eq!(names, want);
    let copies_of = |id: &str| {
        kube.jobsets()
            .iter()
            .filter(|j| j["metadata"]["labels"]["fleetq.dev/workload-id"] == id)
            .count()
    };
    assert_eq!(copies_of(&id), 1, "one copy: {:#?}", kube.jobsets());
    let late_id = state(&group, &late_wl).expect("late")["id"]
        .as_u64()
        .expect("id")
        .to_string();
    wait_for(Duration::from_secs(30), || {
        (copies_of(&late_id) == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("late's copy: {:#?}", kube.jobsets()));

    // kubectl delete: the workload is cancelled and the copy deleted.
    kube.kubectl_delete_jobset("default", "llama");
    wait_state(&group, &workload, &["Cancelled"]);
    wait_for(Duration::from_secs(30), || {
        (!kube
            .jobsets()
            .iter()
            .any(|j| j["metadata"]["name"] == copy_name.as_str()))
        .then_some(())
    })
    .unwrap_or_else(|| panic!("the copy was not deleted: {:#?}", kube.jobsets()));
    assert!(kube.refusals().is_empty(), "{:#?}", kube.refusals());
    drop(agent);
}

/// A Pod as a Kueue user creates it: queue-labelled, 2 GPUs, with Kueue's
/// admission scheduling gate (what Kueue's pod webhook adds) unless
/// `gated` is false; in a group when `group` names one and its size.
fn queued_pod(name: &str, gpus: u32, gated: bool, group: Option<(&str, u32)>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}},
            }],
        },
    });
    if gated {
        pod["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    }
    if let Some((group, total)) = group {
        pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = json!(group);
        pod["metadata"]["annotations"] =
            json!({"kueue.x-k8s.io/pod-group-total-count": total.to_string()});
    }
    pod
}

/// The workload's name for a pod (or a group, by its first pod):
/// `pod-<name>-<uid prefix>`.
fn pod_workload(name: &str, first_pod: &Value) -> String {
    let uid: String = first_pod["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    format!("pod-{name}-{}", uid.to_ascii_lowercase())
}

/// Waits until pod `name` is admitted in place: ungated, labelled as the
/// executor's, pinned to one node by name and to the flavor's GPUs;
/// returns that node.
fn wait_pod_admitted(kube: &FakeKube, group: &Group, name: &str) -> String {
    let pod = wait_for(Duration::from_secs(30), || {
        kube.pod("default", name).filter(|p| {
            p["spec"]["schedulingGates"].is_null()
                && p["metadata"]["labels"]["fleetq.dev/adopted"] == "true"
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "pod {name} never admitted in place: {:#?}\nagent log:\n{}",
            kube.pod("default", name),
            agent_log(group)
        )
    });
    assert_eq!(
        pod["spec"]["nodeSelector"]["nvidia.com/gpu.product"], H100,
        "{pod:#}"
    );
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    let node = terms[0]["matchFields"][0]["values"][0]
        .as_str()
        .unwrap_or_else(|| panic!("pod {name} not pinned to a node: {pod:#}"))
        .to_string();
    assert_eq!(terms.as_array().map(Vec::len), Some(1), "{pod:#}");
    node
}

/// Kueue's plain pods without its webhook: a Pod created with kubectl
/// carrying Kueue's admission gate is queued; once admitted its gate is
/// removed and it is pinned to the node the ledger charged (the test's
/// scheduler binds it there and nowhere else); a pod group is one
/// workload once all its pods exist; a pod created without the gate is
/// told it is not queued; one too big stays gated and says why; an agent
/// restart submits nothing twice; deleting a pod cancels its workload,
/// and the rest of its group goes.
#[test]
fn kubectl_created_gated_pods_are_queued_and_admitted_in_place() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "4")]));
    kube.put_node(node("gpu-b", &h100, &[("nvidia.com/gpu", "4")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let agent = start_agent(&group, &kube);

    // One pod of 4 GPUs: admitted in place, pinned to one node.
    let solo = kube.kubectl_create_pod(queued_pod("solo", 4, true, None));
    let solo_wl = pod_workload("solo", &solo);
    wait_state(&group, &solo_wl, &["Admitted", "Running"]);
    let solo_node = wait_pod_admitted(&kube, &group, "solo");
    let other = if solo_node == "gpu-a" {
        "gpu-b"
    } else {
        "gpu-a"
    };
    assert!(kube.bind_pod("default", "solo", other).is_err());
    kube.bind_pod("default", "solo", &solo_node)
        .expect("binds where the ledger charged it");
    wait_state(&group, &solo_wl, &["Running"]);
    let solo_pod = kube.pod("default", "solo").expect("solo");
    assert_eq!(
        solo_pod["metadata"]["uid"], solo["metadata"]["uid"],
        "no second pod"
    );
    assert_eq!(
        solo_pod["metadata"]["annotations"]["fleetq.dev/workload"],
        format!("default/{solo_wl}")
    );

    // A group of two 2-GPU pods: nothing until both exist, then one
    // workload, each pod pinned to the node left.
    let first = kube.kubectl_create_pod(queued_pod("ray-0", 2, true, Some(("ray", 2))));
    let ray_wl = pod_workload("ray", &first);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        state(&group, &ray_wl).is_none(),
        "queued before the group was complete"
    );
    kube.kubectl_create_pod(queued_pod("ray-1", 2, true, Some(("ray", 2))));
    wait_state(&group, &ray_wl, &["Admitted", "Running"]);
    for pod in ["ray-0", "ray-1"] {
        let node = wait_pod_admitted(&kube, &group, pod);
        assert_eq!(node, other, "the only node with room");
        kube.bind_pod("default", pod, &node).expect("binds");
    }
    wait_state(&group, &ray_wl, &["Running"]);

    // No gate: runs outside any quota, and is told so.
    kube.kubectl_create_pod(queued_pod("eager", 1, false, None));
    wait_for(Duration::from_secs(30), || {
        kube.events().into_iter().find(|e| {
            e["regarding"]["name"] == "eager"
                && e["regarding"]["kind"] == "Pod"
                && e["reason"] == "NotQueued"
                && e["type"] == "Warning"
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no NotQueued Event: {:#?}\n{}",
            kube.events(),
            agent_log(&group)
        )
    });

    // A group whose count is no number: refused, naming the annotation.
    let mut odd = queued_pod("odd-0", 1, true, Some(("odd", 1)));
    odd["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = json!("many");
    kube.kubectl_create_pod(odd);
    wait_for(Duration::from_secs(30), || {
        kube.pod("default", "odd-0").filter(|p| {
            p["metadata"]["annotations"]["fleetq.dev/pending-reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("Refused") && r.contains("pod-group-total-count"))
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "odd-0 never refused: {:#?}\n{}",
            kube.pod("default", "odd-0"),
            agent_log(&group)
        )
    });

    // Too big: stays gated and says why.
    let huge = kube.kubectl_create_pod(queued_pod("huge", 16, true, None));
    let huge_wl = pod_workload("huge", &huge);
    wait_state(&group, &huge_wl, &["Pending"]);
    wait_for(Duration::from_secs(30), || {
        kube.pod("default", "huge").filter(|p| {
            p["metadata"]["annotations"]["fleetq.dev/pending-reason"]
                .as_str()
                .is_some_and(|r| !r.is_empty())
        })
    })
    .unwrap_or_else(|| panic!("huge never told why: {:#?}", kube.pod("default", "huge")));
    assert!(!kube.pod("default", "huge").expect("huge")["spec"]["schedulingGates"].is_null());

    // The agent restarts: nothing is submitted twice, nothing running is
    // touched.
    drop(agent);
    let agent = start_agent(&group, &kube);
    std::thread::sleep(Duration::from_secs(3));
    let mut names: Vec<String> = workloads(&group, 1)
        .iter()
        .filter_map(|w| w["name"].as_str().map(String::from))
        .collect();
    names.sort();
    let mut want = vec![solo_wl.clone(), ray_wl.clone(), huge_wl.clone()];
    want.sort();
    assert_eq!(names, want);
    assert_eq!(state(&group, &ray_wl).expect("ray")["state"], "Running");

    // kubectl delete pod: its workload is cancelled; for a group, the
    // other pod goes too before the quota is freed.
    kube.delete_pod("default", "solo");
    wait_state(&group, &solo_wl, &["Cancelled"]);
    kube.delete_pod("default", "ray-0");
    wait_state(&group, &ray_wl, &["Cancelled"]);
    assert!(kube.pod("default", "ray-1").is_none(), "{:#?}", kube.pods());
    drop(agent);
}

/// A gated pod only another cluster can run: it stays gated here while
/// a copy runs there, the copy's status comes back into an annotation,
/// and deleting the original deletes the copy.
#[test]
fn a_gated_pod_admitted_to_another_cluster_runs_there_as_a_copy() {
    let (east, west) = (FakeKube::start(), FakeKube::start());
    let h100 = [("nvidia.com/gpu.product", H100)];
    east.put_node(node("gpu-e", &h100, &[("nvidia.com/gpu", "2")]));
    west.put_node(node("gpu-w", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _west_agent = start_agent_for(&group, &west, "kube-west", false);
    let _east_agent = start_agent(&group, &east);

    let far = east.kubectl_create_pod(queued_pod("far", 4, true, None));
    let far_wl = pod_workload("far", &far);
    let admitted = wait_state(&group, &far_wl, &["Admitted", "Running"]);
    assert_eq!(admitted["cluster"], "kube-west", "{admitted:#}");
    let id = admitted["id"].as_u64().expect("id").to_string();
    let copy = wait_for(Duration::from_secs(30), || {
        west.pods()
            .into_iter()
            .find(|p| p["metadata"]["labels"]["fleetq.dev/workload-id"] == id.as_str())
    })
    .unwrap_or_else(|| {
        panic!(
            "no copy in kube-west: {:#?}\n{}",
            west.pods(),
            agent_log(&group)
        )
    });
    let copy_name = copy["metadata"]["name"].as_str().expect("name").to_string();
    assert!(copy["spec"]["schedulingGates"].is_null(), "{copy:#}");
    west.bind_pod("default", &copy_name, "gpu-w")
        .expect("the copy binds");
    wait_state(&group, &far_wl, &["Running"]);
    wait_for(Duration::from_secs(30), || {
        east.pod("default", "far").filter(|p| {
            p["metadata"]["annotations"]["fleetq.dev/remote-status"]
                .as_str()
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .is_some_and(|s| s["phase"] == "Running")
                && p["metadata"]["annotations"]["fleetq.dev/admitted-cluster"] == "kube-west"
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no remote status: {:#?}\n{}",
            east.pod("default", "far"),
            agent_log(&group)
        )
    });
    let original = east.pod("default", "far").expect("far");
    assert!(
        !original["spec"]["schedulingGates"].is_null(),
        "still gated here: {original:#}"
    );
    assert!(original["spec"]["nodeName"].is_null());

    east.delete_pod("default", "far");
    wait_state(&group, &far_wl, &["Cancelled"]);
    assert!(
        west.pod("default", &copy_name).is_none(),
        "{:#?}",
        west.pods()
    );
}

/// The user suspends their running Job: its workload is stopped, its
/// quota freed only once the Job's pods are gone, and it is not queued
/// again; unsuspended, the front door suspends it again (it would run
/// outside any quota) and queues it, and it is admitted in place afresh.
#[test]
fn a_job_its_user_suspends_is_stopped_and_unsuspending_queues_it_again() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _agent = start_agent(&group, &kube);

    let train = kube.kubectl_create_job(queued_job("train", 4));
    let train_wl = workload_of(&train);
    wait_job(&kube, &group, "train", "adopted", |j| {
        j["spec"]["suspend"] == false
            && !j["metadata"]["labels"]["fleetq.dev/workload-id"].is_null()
    });
    let first_epoch =
        job(&kube, "train").expect("train")["metadata"]["labels"]["fleetq.dev/epoch"].clone();
    let pods = kube.start_job_pods("default", "train", "gpu-a");
    kube.set_job_status(
        "default",
        "train",
        json!({"active": 1, "ready": 1, "startTime": "2025-01-01T00:00:00Z"}),
    );
    wait_state(&group, &train_wl, &["Running"]);

    // kubectl patch: suspend. The quota stays held while its pods run.
    kube.kubectl_patch_job("default", "train", json!({"spec": {"suspend": true}}));
    std::thread::sleep(Duration::from_secs(3));
    let holding = state(&group, &train_wl).expect("train");
    assert_ne!(
        holding["state"], "Pending",
        "freed before its pods went: {holding:#}"
    );
    // The Job controller deletes the pods of a suspended Job and resets
    // its start time.
    for pod in &pods {
        kube.delete_pod("default", pod);
    }
    kube.set_job_status("default", "train", json!({}));
    let stopped = wait_for(Duration::from_secs(30), || {
        state(&group, &train_wl)
            .filter(|w| w["state"] == "Pending" && w["reason"].to_string().contains("resume"))
    })
    .unwrap_or_else(|| {
        panic!(
            "never stopped: {:?}\n{}",
            state(&group, &train_wl),
            agent_log(&group)
        )
    });
    assert_eq!(stopped["state"], "Pending");
    // Its quota is free: a Job of all 8 GPUs is admitted.
    let big = kube.kubectl_create_job(queued_job("big", 8));
    let big_wl = workload_of(&big);
    wait_state(&group, &big_wl, &["Admitted", "Running"]);
    assert_eq!(job(&kube, "train").expect("train")["spec"]["suspend"], true);
    kube.kubectl_delete_job("default", "big");
    wait_state(&group, &big_wl, &["Cancelled"]);

    // kubectl patch: unsuspend. Suspended again at once, queued, and
    // admitted in place as a new admission.
    kube.kubectl_patch_job("default", "train", json!({"spec": {"suspend": false}}));
    wait_job(&kube, &group, "train", "admitted again", |j| {
        j["spec"]["suspend"] == false
            && !j["metadata"]["labels"]["fleetq.dev/epoch"].is_null()
            && j["metadata"]["labels"]["fleetq.dev/epoch"] != first_epoch
    });
    assert!(
        kube.patches()
            .iter()
            .filter(|(_, name, body)| name == "train" && body["spec"]["suspend"] == true)
            .count()
            >= 2,
        "suspended again by the front door (and by the executor's stop): {:#?}",
        kube.patches()
    );
    wait_state(&group, &train_wl, &["Admitted", "Running"]);
}

/// A PyTorchJob as a Kueue user writes it, suspended: a Master and two
/// Workers of `gpus` GPUs each.
fn queued_pytorchjob(name: &str, gpus: u32) -> Value {
    let replica = |n: u32| {
        json!({"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [{
            "name": "pytorch",
            "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}},
        }]}}})
    };
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "runPolicy": {"suspend": true},
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)},
        },
    })
}

fn user_pytorchjob(kube: &FakeKube, name: &str) -> Option<Value> {
    kube.custom_objects("PyTorchJob")
        .into_iter()
        .find(|j| j["metadata"]["name"] == name)
}

/// Kubeflow's PyTorchJob through the front door: queued as Kueue's
/// Kubeflow integration would (a pod set per replica type), run as a
/// copy on its cluster (its pods pinned), the copy's conditions mapped to
/// the workload's state and its status copied back; an agent restart
/// submits nothing twice; deleting the original cancels the workload and
/// removes the copy. Unsuspended by its user, it is suspended again.
#[test]
fn a_kubectl_created_pytorchjob_is_queued_and_run_as_a_copy() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let agent = start_agent(&group, &kube);

    let created = kube.kubectl_create_custom(queued_pytorchjob("mnist", 2));
    let workload = workload_of(&created).replacen("job-", "pytorchjob-", 1);
    let admitted = wait_state(&group, &workload, &["Admitted", "Running"]);
    assert_eq!(admitted["cluster"], "kube-east", "{admitted:#}");
    let described = text(&group.cli(1, &["get", "workload", &workload, "-o", "yaml"]));
    assert!(
        described.contains("name: master") && described.contains("name: worker"),
        "{described}"
    );
    let copy = wait_custom_copy(&kube, &group, "PyTorchJob", &admitted);
    let copy_name = copy["metadata"]["name"].as_str().expect("name").to_string();
    assert_ne!(copy_name, "mnist");
    assert_eq!(copy["spec"]["runPolicy"]["suspend"], false);
    for kind in ["Master", "Worker"] {
        let pods = &copy["spec"]["pytorchReplicaSpecs"][kind]["template"];
        assert!(
            pods["spec"]["affinity"].to_string().contains("gpu-a"),
            "{kind} pinned: {pods}"
        );
    }
    let original = wait_for(Duration::from_secs(30), || {
        user_pytorchjob(&kube, "mnist").filter(|j| {
            j["metadata"]["annotations"]["fleetq.dev/workload"] == format!("default/{workload}")
        })
    })
    .unwrap_or_else(|| panic!("never annotated: {:#?}", user_pytorchjob(&kube, "mnist")));
    assert_eq!(
        original["spec"]["runPolicy"]["suspend"], true,
        "the original waits"
    );

    // The Training Operator says it runs: the workload runs, and the
    // copy's status comes back onto the user's PyTorchJob.
    kube.set_custom_status(
        "PyTorchJob",
        "default",
        &copy_name,
        json!({"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}),
    );
    wait_state(&group, &workload, &["Running"]);
    wait_for(Duration::from_secs(30), || {
        user_pytorchjob(&kube, "mnist").filter(|j| {
            j["metadata"]["annotations"]["fleetq.dev/remote-status"]
                .as_str()
                .is_some_and(|s| s.contains("Running"))
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no remote status: {:#?}\n{}",
            user_pytorchjob(&kube, "mnist"),
            agent_log(&group)
        )
    });

    // Unsuspended by its user while it runs as a copy: suspended again.
    kube.kubectl_patch_custom(
        "PyTorchJob",
        "default",
        "mnist",
        json!({"spec": {"runPolicy": {"suspend": false}}}),
    );
    wait_for(Duration::from_secs(30), || {
        user_pytorchjob(&kube, "mnist").filter(|j| j["spec"]["runPolicy"]["suspend"] == true)
    })
    .unwrap_or_else(|| {
        panic!(
            "never suspended again: {:#?}",
            user_pytorchjob(&kube, "mnist")
        )
    });

    // The agent restarts: nothing is submitted twice.
    drop(agent);
    let agent = start_agent(&group, &kube);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(workloads(&group, 1).len(), 1, "{:#?}", workloads(&group, 1));
    assert_eq!(
        kube.custom_objects("PyTorchJob").len(),
        2,
        "the original and one copy"
    );

    // Deleting the original cancels the workload; the copy goes.
    kube.kubectl_delete_custom("PyTorchJob", "default", "mnist");
    wait_state(&group, &workload, &["Cancelled"]);
    wait_for(Duration::from_secs(30), || {
        kube.custom_objects("PyTorchJob").is_empty().then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "the copy outlived its original: {:#?}",
            kube.custom_objects("PyTorchJob")
        )
    });
    drop(agent);
}

/// KubeRay's RayJob through the front door: queued as Kueue's RayJob
/// integration would (head and a worker group; HTTP submission, so no
/// submitter pod), run as a copy with every pod template pinned, its
/// deployment status mapped to the workload's state and copied back.
#[test]
fn a_kubectl_created_rayjob_is_queued_and_run_as_a_copy() {
    let kube = FakeKube::start();
    let h100 = [("nvidia.com/gpu.product", H100)];
    kube.put_node(node("gpu-a", &h100, &[("nvidia.com/gpu", "8")]));
    let group = Group::configured(&["--lease-ttl", "5s"]);
    let _agent = start_agent(&group, &kube);

    let container = |name: &str, gpus: u32| {
        json!({"spec": {"containers": [{"name": name, "image": "rayproject/ray:2.52.0",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
    };
    let created = kube.kubectl_create_custom(json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "tune", "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {
            "suspend": true,
            "shutdownAfterJobFinishes": true,
            "submissionMode": "HTTPMode",
            "entrypoint": "python tune.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": container("ray-head", 1)},
                "workerGroupSpecs": [{"groupName": "gpus", "replicas": 3, "rayStartParams": {},
                    "template": container("ray-worker", 2)}],
            },
        },
    }));
    let workload = workload_of(&created).replacen("job-", "rayjob-", 1);
    let admitted = wait_state(&group, &workload, &["Admitted", "Running"]);
    let yaml = text(&group.cli(1, &["get", "workload", &workload, "-o", "yaml"]));
    assert!(
        yaml.contains("name: head") && yaml.contains("name: gpus"),
        "{yaml}"
    );
    let copy = wait_custom_copy(&kube, &group, "RayJob", &admitted);
    let copy_name = copy["metadata"]["name"].as_str().expect("name").to_string();
    assert_eq!(copy["spec"]["suspend"], false);
    let worker = &copy["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"];
    assert!(
        worker["spec"]["affinity"].to_string().contains("gpu-a"),
        "pinned: {worker}"
    );

    kube.set_custom_status(
        "RayJob",
        "default",
        &copy_name,
        json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}),
    );
    wait_state(&group, &workload, &["Running"]);
    kube.set_custom_status(
        "RayJob",
        "default",
        &copy_name,
        json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}),
    );
    wait_state(&group, &workload, &["Succeeded"]);
    let original = wait_for(Duration::from_secs(30), || {
        kube.custom_objects("RayJob").into_iter().find(|j| {
            j["metadata"]["name"] == "tune"
                && j["metadata"]["annotations"]["fleetq.dev/remote-status"]
                    .as_str()
                    .is_some_and(|s| s.contains("SUCCEEDED"))
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no remote status: {:#?}\n{}",
            kube.custom_objects("RayJob"),
            agent_log(&group)
        )
    });
    assert_eq!(original["spec"]["suspend"], true, "the original waited");
}
