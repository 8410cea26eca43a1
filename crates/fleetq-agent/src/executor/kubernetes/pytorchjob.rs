//! PyTorchJobs (`kubeflow.org/v1`, Kubeflow's Training Operator) on the
//! Kubernetes executor: a workload imported from a PyTorchJob (its
//! `run.jobTemplate` is the PyTorchJob) becomes one PyTorchJob in the
//! assigned cluster, unsuspended (`spec.runPolicy.suspend: false`), where
//! the Training Operator makes its pods. The PyTorchJob and each replica
//! type's pod template carry the admission's labels, each pod template is
//! pinned to the GPUs and nodes its own pod set (`master`, `worker`) was
//! charged, and its status maps to workload events by its conditions:
//! Running, Succeeded and Failed.
//!
//! Like the JobSet API, the PyTorchJob API is a custom resource: on a
//! cluster without the Training Operator an admission of one fails,
//! saying so.

use std::time::Duration;

use fleetq_model::assignment::Assignment;
use fleetq_model::Workload;
use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{json, Value};

use super::{object_at, object_at_map, take_metadata};
use crate::executor::Event;
use crate::inventory::FlavorMapping;

pub const API_VERSION: &str = "kubeflow.org/v1";

/// The PyTorchJob resource, for the dynamic API.
pub fn api_resource() -> ApiResource {
    ApiResource {
        group: "kubeflow.org".into(),
        version: "v1".into(),
        api_version: API_VERSION.into(),
        kind: "PyTorchJob".into(),
        plural: "pytorchjobs".into(),
    }
}

/// Whether the workload runs as a PyTorchJob.
pub fn runs_as_pytorchjob(workload: &Workload) -> bool {
    super::template_kind(workload) == Some("PyTorchJob")
}

/// The PyTorchJob for one admission, from the workload's PyTorchJob
/// template: named `<workload>-<id>-<epoch>` (a DNS-1035 label short
/// enough for the pod names the Training Operator derives,
/// `<name>-worker-<index>`), labelled, unsuspended, with the agent's
/// finished TTL, and each replica type's pods pinned.
pub fn pytorchjob_manifest(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
    finished_ttl: Option<Duration>,
) -> Result<DynamicObject, String> {
    let mut job = super::checked_template(workload, "PyTorchJob")?;
    let largest = assignment
        .pod_sets
        .iter()
        .map(|p| p.count)
        .max()
        .unwrap_or(1);
    let room = format!("-worker-{}", largest.saturating_sub(1)).len();
    let name = super::jobset_name(&workload.name, id, epoch, room)
        .ok_or("metadata.name: no room for the PyTorchJob's name")?;
    let ours = super::admission_labels(id, epoch, cluster, workload);
    take_metadata(&mut job, name, workload, &ours);
    job["apiVersion"] = json!(API_VERSION);
    job["kind"] = json!("PyTorchJob");
    let spec = object_at(&mut job, "spec");
    let policy = object_at_map(spec, "runPolicy");
    policy.insert("suspend".into(), json!(false));
    if policy.get("managedBy").and_then(Value::as_str)
        == Some(fleetq_model::workload::MULTIKUEUE_MANAGED_BY)
    {
        policy.remove("managedBy");
    }
    if let Some(ttl) = finished_ttl {
        // As for Jobs: a shorter TTL gives way to the agent's.
        let ours = i64::try_from(ttl.as_secs())
            .unwrap_or(i64::MAX)
            .min(i64::from(i32::MAX));
        let theirs = policy
            .get("ttlSecondsAfterFinished")
            .and_then(Value::as_i64);
        policy.insert(
            "ttlSecondsAfterFinished".into(),
            json!(theirs.map_or(ours, |t| t.max(ours))),
        );
    }
    let Some(replicas) = spec
        .get_mut("pytorchReplicaSpecs")
        .and_then(Value::as_object_mut)
    else {
        return Err("run.jobTemplate.spec.pytorchReplicaSpecs: is required".into());
    };
    for (kind, replica) in replicas.iter_mut() {
        let path = format!("run.jobTemplate.spec.pytorchReplicaSpecs.{kind}.template");
        let pod_set = kind.to_ascii_lowercase();
        let template = &mut replica["template"];
        super::admit_pod_template(template, &pod_set, &path, assignment, &ours, mapping)?;
    }
    serde_json::from_value(job).map_err(|e| format!("run.jobTemplate: not a valid PyTorchJob: {e}"))
}

/// What a PyTorchJob's status says of its admission, by its conditions
/// (the Training Operator's `Succeeded`, `Failed` and `Running`): `None`
/// while it is created but not running yet, or being deleted.
pub fn phase_of(job: &Value) -> Option<(Event, String)> {
    if !job["metadata"]["deletionTimestamp"].is_null() {
        return None;
    }
    let status = &job["status"];
    match super::true_condition(status, &["Succeeded", "Failed"]) {
        Some(("Succeeded", why)) => Some((Event::Succeeded, why)),
        Some((_, why)) => Some((Event::Failed, why)),
        None => {
            super::true_condition(status, &["Running"]).map(|_| (Event::Running, String::new()))
        }
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
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: Train
  namespace: ml
  uid: old-uid
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  runPolicy: {suspend: true, ttlSecondsAfterFinished: 10}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: trainer, resources: {limits: {nvidia.com/gpu: "1"}}}]
    Worker:
      replicas: 3
      template:
        metadata: {labels: {role: worker}}
        spec:
          containers: [{name: pytorch, image: trainer, resources: {limits: {nvidia.com/gpu: "2"}}}]
"#;
        let mut docs = fleetq_model::kueue::import_manifests(yaml).expect("imports");
        match docs.remove(0).object {
            Object::Workload(w) => w,
            other => panic!("{other:?}"),
        }
    }

    fn assignment() -> Assignment {
        let pod_set = |name: &str, count: u32, node: &str| PodSetAssignment {
            name: name.into(),
            count,
            flavors: [(GPU.to_string(), "h100-80gb".to_string())].into(),
            nodes: vec![NodePods {
                node: node.into(),
                count,
            }],
        };
        Assignment {
            cluster: "east".into(),
            pod_sets: vec![pod_set("master", 1, "n1"), pod_set("worker", 3, "n2")],
            usage: Default::default(),
        }
    }

    /// The copy runs unsuspended under the agent's TTL, labelled, each
    /// replica type's pods pinned to its own pod set's node.
    #[test]
    fn a_kueue_pytorchjob_becomes_a_labelled_runnable_pytorchjob_pinned_per_replica_type() {
        let object = pytorchjob_manifest(
            4,
            2,
            "east",
            &imported(),
            &assignment(),
            &FlavorMapping::default(),
            Some(Duration::from_secs(3600)),
        )
        .expect("a PyTorchJob");
        let v = serde_json::to_value(&object).expect("json");
        assert_eq!(v["kind"], "PyTorchJob");
        let name = v["metadata"]["name"].as_str().expect("name");
        assert!(
            name.starts_with("train-") && name.ends_with("-4-2"),
            "{name}"
        );
        assert!(v["metadata"]["uid"].is_null());
        assert_eq!(v["metadata"]["labels"]["fleetq.dev/workload-id"], "4");
        assert!(v["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].is_null());
        assert_eq!(v["spec"]["runPolicy"]["suspend"], false);
        assert_eq!(v["spec"]["runPolicy"]["ttlSecondsAfterFinished"], 3600);
        for (kind, node) in [("Master", "n1"), ("Worker", "n2")] {
            let template = &v["spec"]["pytorchReplicaSpecs"][kind]["template"];
            assert_eq!(template["metadata"]["labels"]["fleetq.dev/epoch"], "2");
            let terms = &template["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
            assert_eq!(
                terms[0]["matchFields"][0]["values"][0], node,
                "{kind}: {template:#}"
            );
        }
        assert_eq!(
            v["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["labels"]["role"],
            "worker"
        );
        // A template asking for more than its pod set is not created.
        let mut tampered = imported();
        if let Some(t) = tampered.spec.run.job_template.as_mut() {
            t["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(9);
        }
        let e = pytorchjob_manifest(
            4,
            2,
            "east",
            &tampered,
            &assignment(),
            &FlavorMapping::default(),
            None,
        )
        .expect_err("refused");
        assert!(e.contains("pytorchReplicaSpecs.Worker"), "{e}");
    }

    #[test]
    fn pytorchjob_conditions_map_to_events() {
        let with = |conditions: Value| json!({"status": {"conditions": conditions}});
        assert_eq!(phase_of(&with(json!([]))), None);
        assert_eq!(
            phase_of(&with(
                json!([{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}])
            )),
            Some((Event::Running, String::new()))
        );
        assert_eq!(
            phase_of(&with(
                json!([{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}])
            )),
            Some((Event::Succeeded, "PyTorchJobSucceeded".into()))
        );
        assert_eq!(
            phase_of(&with(
                json!([{"type": "Failed", "status": "True", "message": "OOM"}])
            )),
            Some((Event::Failed, "OOM".into()))
        );
        let mut deleting = with(json!([{"type": "Running", "status": "True"}]));
        deleting["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
        assert_eq!(phase_of(&deleting), None);
    }
}
