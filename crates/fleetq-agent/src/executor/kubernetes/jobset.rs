//! JobSets (`jobset.x-k8s.io/v1alpha2`) on the Kubernetes executor: a
//! workload imported from a JobSet (its `run.jobTemplate` is the JobSet)
//! becomes one JobSet in the assigned cluster, where the JobSet
//! controller makes its Jobs and the Job controller their pods. The JobSet
//! and every replicated Job's pod template carry the admission's labels,
//! each pod template is pinned to the GPUs and nodes its own pod set was
//! charged, and the JobSet's status maps to workload events as Kueue reads
//! it: Running once every Job is ready or done, Succeeded and Failed by
//! the `Completed` and `Failed` conditions.
//!
//! The JobSet API is a custom resource: a cluster without the JobSet
//! controller has none, and an admission of a JobSet there fails, saying
//! so (the executor looks for the API when it starts).

use fleetq_model::assignment::Assignment;
use fleetq_model::Workload;
use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{json, Value};
use std::time::Duration;

use super::{
    admission_labels, label_pods, object_at, object_at_map, pin_pods, run_now, take_metadata,
};
use crate::executor::Event;
use crate::inventory::FlavorMapping;

pub const API_VERSION: &str = "jobset.x-k8s.io/v1alpha2";

/// The JobSet resource, for the dynamic API.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: "jobset.x-k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: API_VERSION.into(),
        kind: "JobSet".into(),
        plural: "jobsets".into(),
    }
}

/// Whether the workload runs as a JobSet.
pub fn runs_as_jobset(workload: &Workload) -> bool {
    super::template_kind(workload) == Some("JobSet")
}

/// The longest a DNS-1035 label may be.
const MAX_NAME: usize = 63;

/// How many characters the JobSet controller appends to the JobSet's
/// name for its longest Job name (`<jobset>-<replicated job>-<index>`)
/// and, for an Indexed Job, its longest pod name (`...-<pod index>-`
/// and the 5-character random suffix). The JobSet webhook refuses a
/// JobSet whose names would not be DNS-1035 labels.
fn room_for_children(template: &Value) -> usize {
    let replicated = template
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array);
    replicated
        .into_iter()
        .flatten()
        .map(|job| {
            let name = job["name"].as_str().unwrap_or_default();
            let replicas = job["replicas"].as_u64().unwrap_or(1);
            let job_suffix = format!("-{name}-{}", replicas.saturating_sub(1)).len();
            let spec = &job["template"]["spec"];
            let indexed = spec["completionMode"] == "Indexed";
            match spec["completions"].as_u64() {
                Some(completions) if indexed => {
                    let pod_index = completions.saturating_sub(1).to_string().len();
                    job_suffix + 1 + pod_index + "-abcde".len()
                }
                _ => job_suffix,
            }
        })
        .max()
        .unwrap_or(0)
}

/// A JobSet name for one admission: `<workload>-<id>-<epoch>`, a DNS-1035
/// label (starting with a letter) short enough that every name the JobSet
/// controller derives from it is one too; `None` if the replicated Jobs'
/// names leave no room.
pub fn jobset_name(workload: &str, id: u64, epoch: u64, room: usize) -> Option<String> {
    let suffix = format!("-{id}-{epoch}");
    let budget = MAX_NAME.checked_sub(room)?.checked_sub(suffix.len())?;
    let cleaned: String = workload
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cleaned = cleaned.trim_matches('-');
    let prefix = if cleaned.starts_with(|c: char| c.is_ascii_lowercase()) {
        cleaned.to_string()
    } else {
        format!("js-{cleaned}")
    };
    let prefix: String = prefix.chars().take(budget).collect();
    let prefix = prefix.trim_end_matches('-');
    (!prefix.is_empty()).then(|| format!("{prefix}{suffix}"))
}

/// The JobSet for one admission, from the workload's JobSet template.
pub fn jobset_manifest(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
    finished_ttl: Option<Duration>,
) -> Result<DynamicObject, String> {
    let mut jobset = super::checked_template(workload, "JobSet")?;
    let name = jobset_name(&workload.name, id, epoch, room_for_children(&jobset)).ok_or(
        "run.jobTemplate.spec.replicatedJobs: the replicated Jobs' names are too long for the \
         names the JobSet controller derives from them (at most 63 characters)",
    )?;
    let ours = admission_labels(id, epoch, cluster, workload);
    take_metadata(&mut jobset, name, workload, &ours);
    jobset["apiVersion"] = json!(API_VERSION);
    jobset["kind"] = json!("JobSet");
    let spec = object_at(&mut jobset, "spec");
    run_now(spec, finished_ttl);
    let Some(replicated) = spec.get_mut("replicatedJobs").and_then(Value::as_array_mut) else {
        return Err("run.jobTemplate.spec.replicatedJobs: is required".into());
    };
    for (i, job) in replicated.iter_mut().enumerate() {
        let name = job["name"].as_str().unwrap_or_default().to_string();
        let pod_set = assignment
            .pod_sets
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                format!(
                    "run.jobTemplate.spec.replicatedJobs[{i}]: no pod set {name:?} in the assignment"
                )
            })?;
        // Through the Job template's own type, as the Job path does: a
        // template the API could not take fails here, and quantities
        // written as numbers go out in their canonical form.
        let typed: JobTemplateSpec = serde_json::from_value(job["template"].take()).map_err(|e| {
            format!("run.jobTemplate.spec.replicatedJobs[{i}].template: not a valid Job template: {e}")
        })?;
        job["template"] = serde_json::to_value(typed).map_err(|e| e.to_string())?;
        let job_spec = object_at_map(object_at(job, "template"), "spec");
        if job_spec.get("manualSelector") != Some(&json!(true)) {
            job_spec.remove("selector");
        }
        let template = object_at_map(job_spec, "template");
        label_pods(template, &ours);
        pin_pods(
            object_at_map(template, "spec"),
            std::slice::from_ref(pod_set),
            mapping,
        )?;
    }
    serde_json::from_value(jobset).map_err(|e| format!("run.jobTemplate: not a valid JobSet: {e}"))
}

/// What a JobSet's status says of its admission, as Kueue reads it:
/// `None` while its Jobs are not all ready yet, or while it is being
/// deleted.
pub fn phase_of(jobset: &Value) -> Option<(Event, String)> {
    if !jobset["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let status = &jobset["status"];
    match super::true_condition(status, &["Completed", "Failed"]) {
        Some(("Completed", why)) => return Some((Event::Succeeded, why)),
        Some((_, why)) => return Some((Event::Failed, why)),
        None => {}
    }
    let jobs: u64 = jobset["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| j["replicas"].as_u64().unwrap_or(1))
        .sum();
    let ready: u64 = status["replicatedJobsStatus"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["ready"].as_u64().unwrap_or(0) + s["succeeded"].as_u64().unwrap_or(0))
        .sum();
    (jobs > 0 && ready >= jobs).then(|| (Event::Running, String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::assignment::{NodePods, PodSetAssignment};
    use fleetq_model::config::Object;
    use fleetq_model::resources::GPU;

    /// A JobSet as a user writes it for Kueue: a driver without GPUs and
    /// two Jobs of two 2-GPU workers, imported as the API imports it.
    fn imported() -> Workload {
        let yaml = r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: Train LLaMA
  namespace: ml
  uid: old-uid
  labels: {kueue.x-k8s.io/queue-name: team-a, team: nlp}
spec:
  suspend: true
  managedBy: kueue.x-k8s.io/multikueue
  replicatedJobs:
  - name: driver
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers: [{name: d, image: trainer, resources: {requests: {cpu: "1"}}}]
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        completionMode: Indexed
        selector: {matchLabels: {controller-uid: old-uid}}
        template:
          metadata:
            labels: {controller-uid: old-uid, role: worker}
          spec:
            restartPolicy: Never
            containers: [{name: w, image: trainer, resources: {limits: {nvidia.com/gpu: "2"}}}]
"#;
        let mut docs = fleetq_model::kueue::import_manifests(yaml).expect("imports");
        match docs.remove(0).object {
            Object::Workload(w) => w,
            other => panic!("{other:?}"),
        }
    }

    fn assignment() -> Assignment {
        let pod_set = |name: &str, count: u32, nodes: &[(&str, u32)]| PodSetAssignment {
            name: name.into(),
            count,
            flavors: if name == "workers" {
                [(GPU.to_string(), "h100-80gb".to_string())].into()
            } else {
                Default::default()
            },
            nodes: nodes
                .iter()
                .map(|(node, pods)| NodePods {
                    node: node.to_string(),
                    count: *pods,
                })
                .collect(),
        };
        Assignment {
            cluster: "east".into(),
            pod_sets: vec![
                pod_set("driver", 1, &[("cpu-1", 1)]),
                pod_set("workers", 4, &[("gpu-1", 2), ("gpu-2", 2)]),
            ],
            usage: Default::default(),
        }
    }

    fn mapping() -> FlavorMapping {
        FlavorMapping {
            products: [("NVIDIA-H100-80GB-HBM3".to_string(), "h100-80gb".to_string())].into(),
        }
    }

    #[test]
    fn a_kueue_jobset_becomes_a_labelled_runnable_jobset_pinned_per_pod_set() {
        let workload = imported();
        let object = jobset_manifest(7, 2, "east", &workload, &assignment(), &mapping(), None)
            .expect("a JobSet");
        let js = serde_json::to_value(&object).expect("json");
        assert_eq!(js["apiVersion"], API_VERSION);
        assert_eq!(js["kind"], "JobSet");
        assert_eq!(js["metadata"]["name"], "train-llama-7-2");
        assert_eq!(js["metadata"]["namespace"], "ml");
        assert!(js["metadata"]["uid"].is_null(), "{js}");
        let labels = &js["metadata"]["labels"];
        assert_eq!(labels["fleetq.dev/workload-id"], "7");
        assert_eq!(labels["team"], "nlp");
        assert!(labels["kueue.x-k8s.io/queue-name"].is_null(), "{labels}");
        assert_eq!(js["spec"]["suspend"], false);
        assert!(js["spec"]["managedBy"].is_null(), "{js}");
        let workers = &js["spec"]["replicatedJobs"][1]["template"]["spec"];
        assert!(workers["selector"].is_null(), "{workers}");
        let pod_labels = &workers["template"]["metadata"]["labels"];
        assert_eq!(pod_labels["fleetq.dev/epoch"], "2");
        assert_eq!(pod_labels["role"], "worker");
        assert!(pod_labels["controller-uid"].is_null(), "{pod_labels}");
        // Each replicated Job's pods go where its own pod set was placed,
        // on its own flavor's GPUs.
        let terms = |i: usize| {
            js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["affinity"]
                ["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"]
                .clone()
        };
        let worker_terms = terms(1).to_string();
        assert!(
            worker_terms.contains("gpu-1")
                && worker_terms.contains("gpu-2")
                && worker_terms.contains("NVIDIA-H100-80GB-HBM3")
                && !worker_terms.contains("cpu-1"),
            "{worker_terms}"
        );
        let driver_terms = terms(0).to_string();
        assert!(
            driver_terms.contains("cpu-1") && !driver_terms.contains("H100"),
            "{driver_terms}"
        );
    }

    #[test]
    fn a_tampered_jobset_is_not_created() {
        let mut workload = imported();
        let template = workload.spec.run.job_template.as_mut().expect("kept");
        template["spec"]["replicatedJobs"][1]["replicas"] = json!(5);
        let error = jobset_manifest(7, 2, "east", &workload, &assignment(), &mapping(), None)
            .expect_err("refused");
        assert!(error.contains("runs 10 pods at once"), "{error}");
    }

    /// Every Job and (Indexed) pod name the JobSet controller derives from
    /// the name stays a DNS-1035 label of at most 63 characters.
    #[test]
    fn jobset_names_leave_room_for_the_names_derived_from_them() {
        let workload = imported();
        let template = workload.spec.run.job_template.as_ref().expect("kept");
        let room = room_for_children(template);
        // "-workers-1" then "-1-abcde" for the workers' pods.
        assert_eq!(room, "-workers-1-1-abcde".len());
        let long = "x".repeat(100);
        let name = jobset_name(&long, 123, 4, room).expect("a name");
        assert!(name.len() + room <= 63, "{name}");
        assert!(name.ends_with("-123-4"), "{name}");
        // DNS-1035: a letter first.
        assert_eq!(jobset_name("7up", 1, 1, 0).as_deref(), Some("js-7up-1-1"));
        assert_eq!(jobset_name("---", 1, 1, 0).as_deref(), Some("js-1-1"));
        assert_eq!(jobset_name("a", 1, 1, 60), None);
    }

    #[test]
    fn jobset_status_maps_to_events_as_kueue_reads_it() {
        let jobset = |status: Value| {
            json!({
                "spec": {"replicatedJobs": [{"name": "d"}, {"name": "w", "replicas": 2}]},
                "status": status,
            })
        };
        assert_eq!(phase_of(&jobset(json!({}))), None);
        let some_ready = json!({"replicatedJobsStatus": [
            {"name": "d", "ready": 1}, {"name": "w", "ready": 1, "active": 2}
        ]});
        assert_eq!(phase_of(&jobset(some_ready)), None);
        let all_ready = json!({"replicatedJobsStatus": [
            {"name": "d", "succeeded": 1}, {"name": "w", "ready": 2}
        ]});
        assert_eq!(
            phase_of(&jobset(all_ready)),
            Some((Event::Running, String::new()))
        );
        let done = json!({"conditions": [
            {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed successfully"}
        ]});
        assert_eq!(
            phase_of(&jobset(done)),
            Some((
                Event::Succeeded,
                "AllJobsCompleted: jobset completed successfully".into()
            ))
        );
        let failed = json!({"conditions": [
            {"type": "Completed", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "FailedJobs"}
        ]});
        assert_eq!(
            phase_of(&jobset(failed)),
            Some((Event::Failed, "FailedJobs".into()))
        );
        let mut deleting = jobset(json!({"conditions": [{"type": "Completed", "status": "True"}]}));
        deleting["metadata"] = json!({"deletionTimestamp": "2026-12-07T00:00:00Z"});
        assert_eq!(phase_of(&deleting), None);
    }
}
