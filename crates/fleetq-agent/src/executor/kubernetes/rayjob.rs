//! RayJobs (`ray.io/v1`, KubeRay) on the Kubernetes executor: a workload
//! imported from a RayJob (its `run.jobTemplate` is the RayJob) becomes
//! one RayJob in the assigned cluster, unsuspended, where KubeRay makes
//! its Ray cluster and submitter. The RayJob and every pod template (the
//! head's, each worker group's, the submitter's) carry the admission's
//! labels, each pinned to the GPUs and nodes of its own pod set (`head`,
//! the group's name, `submitter`), and its status maps to workload events
//! as Kueue reads it: Running while its deployment runs, Succeeded once
//! it is complete with the job SUCCEEDED, Failed otherwise.
//!
//! The RayJob API is a custom resource: on a cluster without KubeRay an
//! admission of one fails, saying so.

use std::time::Duration;

use fleetq_model::assignment::Assignment;
use fleetq_model::Workload;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use super::{object_at, take_metadata};
use crate::executor::Event;
use crate::inventory::FlavorMapping;

pub const API_VERSION: &str = "ray.io/v1";

/// KubeRay's longest RayJob name: it names the Ray cluster and its pods
/// after the job.
const MAX_NAME: usize = 47;

/// The RayJob resource, for the dynamic API.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: "ray.io".into(),
        version: "v1".into(),
        api_version: API_VERSION.into(),
        kind: "RayJob".into(),
        plural: "rayjobs".into(),
    }
}

/// Whether the workload runs as a RayJob.
pub fn runs_as_rayjob(workload: &Workload) -> bool {
    super::template_kind(workload) == Some("RayJob")
}

/// The RayJob for one admission, from the workload's RayJob template:
/// named `<workload>-<id>-<epoch>` (a DNS-1035 label within KubeRay's 47
/// characters), labelled, unsuspended, with the agent's finished TTL, and
/// every pod template pinned to its own pod set.
pub fn rayjob_manifest(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
    finished_ttl: Option<Duration>,
) -> Result<DynamicObject, String> {
    let mut job = super::checked_template(workload, "RayJob")?;
    let name = super::jobset_name(&workload.name, id, epoch, 63 - MAX_NAME)
        .ok_or("metadata.name: no room for the RayJob's name")?;
    let ours = super::admission_labels(id, epoch, cluster, workload);
    take_metadata(&mut job, name, workload, &ours);
    job["apiVersion"] = json!(API_VERSION);
    job["kind"] = json!("RayJob");
    let spec = object_at(&mut job, "spec");
    // Unsuspended; not MultiKueue's here; gone after the agent's TTL.
    super::run_now(spec, finished_ttl);
    let pin = |template: &mut Value, pod_set: &str, path: &str| {
        super::admit_pod_template(template, pod_set, path, assignment, &ours, mapping)
    };
    let cluster_spec = &mut spec["rayClusterSpec"];
    pin(
        &mut cluster_spec["headGroupSpec"]["template"],
        "head",
        "run.jobTemplate.spec.rayClusterSpec.headGroupSpec.template",
    )?;
    if let Some(groups) = cluster_spec["workerGroupSpecs"].as_array_mut() {
        for (i, group) in groups.iter_mut().enumerate() {
            let name = group["groupName"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            let path =
                format!("run.jobTemplate.spec.rayClusterSpec.workerGroupSpecs[{i}].template");
            pin(&mut group["template"], &name, &path)?;
        }
    }
    if spec
        .get("submitterPodTemplate")
        .is_some_and(|t| !t.is_null())
    {
        if let Some(template) = spec.get_mut("submitterPodTemplate") {
            pin(
                template,
                "submitter",
                "run.jobTemplate.spec.submitterPodTemplate",
            )?;
        }
    }
    serde_json::from_value(job).map_err(|e| format!("run.jobTemplate: not a valid RayJob: {e}"))
}

/// What a RayJob's status says of its admission, as Kueue reads it:
/// `jobDeploymentStatus` Running is Running; Complete is Succeeded when
/// `jobStatus` is SUCCEEDED and Failed otherwise; Failed is Failed.
/// `None` before it runs, or while it is being deleted.
pub fn phase_of(job: &Value) -> Option<(Event, String)> {
    if !job["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let status = &job["status"];
    let why = || {
        [status["reason"].as_str(), status["message"].as_str()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ")
    };
    match status["jobDeploymentStatus"].as_str() {
        Some("Running") => Some((Event::Running, String::new())),
        Some("Complete") if status["jobStatus"] == "SUCCEEDED" => {
            Some((Event::Succeeded, String::new()))
        }
        Some("Complete") => {
            let job_status = status["jobStatus"].as_str().unwrap_or("unknown");
            let reason = why();
            Some((
                Event::Failed,
                match reason.is_empty() {
                    true => format!("the Ray job ended {job_status}"),
                    false => format!("the Ray job ended {job_status}: {reason}"),
                },
            ))
        }
        Some("Failed") => Some((Event::Failed, why())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::assignment::{NodePods, PodSetAssignment};
    use fleetq_model::config::Object;
    use fleetq_model::resources::GPU;

    fn imported() -> Workload {
        let yaml = r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: Tune
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  suspend: true
  shutdownAfterJobFinishes: true
  entrypoint: python tune.py
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: ray-head, image: rayproject/ray:2.52.0, resources: {limits: {nvidia.com/gpu: "1"}}}]
    workerGroupSpecs:
    - groupName: GPU-Group
      replicas: 2
      template:
        spec:
          containers: [{name: ray-worker, image: rayproject/ray:2.52.0, resources: {limits: {nvidia.com/gpu: "2"}}}]
"#;
        let mut docs = fleetq_model::kueue::import_manifests(yaml).expect("imports");
        match docs.remove(0).object {
            Object::Workload(w) => w,
            other => panic!("{other:?}"),
        }
    }

    fn assignment() -> Assignment {
        let pod_set = |name: &str, count: u32, node: &str, gpu: bool| PodSetAssignment {
            name: name.into(),
            count,
            flavors: if gpu {
                [(GPU.to_string(), "h100-80gb".to_string())].into()
            } else {
                Default::default()
            },
            nodes: vec![NodePods {
                node: node.into(),
                count,
            }],
        };
        Assignment {
            cluster: "east".into(),
            pod_sets: vec![
                pod_set("head", 1, "n1", true),
                pod_set("gpu-group", 2, "n2", true),
                pod_set("submitter", 1, "n3", false),
            ],
            usage: Default::default(),
        }
    }

    /// The copy runs unsuspended under the agent's TTL, its name within
    /// KubeRay's 47 characters, every pod template (the default submitter
    /// included) labelled and pinned to its own pod set's node.
    #[test]
    fn a_kueue_rayjob_becomes_a_labelled_runnable_rayjob_pinned_per_pod_set() {
        let mut long = imported();
        long.name = "x".repeat(60);
        let object = rayjob_manifest(
            4,
            2,
            "east",
            &long,
            &assignment(),
            &FlavorMapping::default(),
            Some(Duration::from_secs(3600)),
        )
        .expect("a RayJob");
        let v = serde_json::to_value(&object).expect("json");
        let name = v["metadata"]["name"].as_str().expect("name");
        assert!(name.len() <= MAX_NAME && name.ends_with("-4-2"), "{name}");
        assert_eq!(v["spec"]["suspend"], false);
        assert_eq!(v["spec"]["ttlSecondsAfterFinished"], 3600);
        assert_eq!(v["spec"]["entrypoint"], "python tune.py");
        let templates = [
            (
                &v["spec"]["rayClusterSpec"]["headGroupSpec"]["template"],
                "n1",
            ),
            (
                &v["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"],
                "n2",
            ),
            (&v["spec"]["submitterPodTemplate"], "n3"),
        ];
        for (template, node) in templates {
            assert_eq!(
                template["metadata"]["labels"]["fleetq.dev/workload-id"],
                "4"
            );
            let terms = &template["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
            assert_eq!(
                terms[0]["matchFields"][0]["values"][0], node,
                "{template:#}"
            );
        }
    }

    #[test]
    fn rayjob_status_maps_to_events_as_kueue_reads_it() {
        let with = |s: Value| json!({ "status": s });
        assert_eq!(
            phase_of(&with(json!({"jobDeploymentStatus": "Initializing"}))),
            None
        );
        assert_eq!(
            phase_of(&with(
                json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
            )),
            Some((Event::Running, String::new()))
        );
        assert_eq!(
            phase_of(&with(
                json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"})
            )),
            Some((Event::Succeeded, String::new()))
        );
        let (event, why) = phase_of(&with(
            json!({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "message": "exit 1"}),
        ))
        .expect("an event");
        assert_eq!(event, Event::Failed);
        assert!(why.contains("FAILED") && why.contains("exit 1"), "{why}");
        assert_eq!(
            phase_of(&with(
                json!({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded"})
            )),
            Some((Event::Failed, "DeadlineExceeded".into()))
        );
    }
}
