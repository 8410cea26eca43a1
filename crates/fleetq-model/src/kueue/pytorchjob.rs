//! `kubeflow.org/v1` PyTorchJob -> fleetq Workload, the way Kueue's
//! Kubeflow integration builds one: a pod set per replica type, `master`
//! then `worker` (Kueue's order for a PyTorchJob), of `replicas` pods
//! (the Training Operator's default 1); the queue and priority class from
//! the PyTorchJob's labels (the priority class else from the first pod
//! template that names one); topology requests from each replica's pod
//! template.
//!
//! Only the fields fleetq interprets are checked, with the Training
//! Operator's own rules for them (replica types `Master` and `Worker`
//! only, one Master at most); the whole PyTorchJob is kept verbatim in
//! `spec.run.jobTemplate` for the Kubernetes executor, which creates it in
//! the assigned cluster, where the Training Operator runs it.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::job::{
    job_spec_problem, max_exec_time_label, priority_of, queue_of, refuse_partial_admission,
};
use super::meta::{annotation_path, decode, Location, ObjectMeta};
use super::pod::{PodSpec, PodTemplate};
use super::topology::{template_request, template_rewrites, ALL_ANNOTATIONS};
use super::workload::{pod_requests, workload_name, NamedWorkload};
use super::{Converted, DEFAULT_NAMESPACE};
use crate::workload::WorkloadSpec;
use crate::{FieldError, PodSet, PriorityClassSource, ResourceList};

/// The replica types a PyTorchJob may have, in Kueue's pod-set order.
pub const REPLICA_TYPES: [&str; 2] = ["Master", "Worker"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PyTorchJobManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: PyTorchJobSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// The fields fleetq reads; the rest (run and elastic policies, nproc per
/// node) is allowed and kept verbatim.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PyTorchJobSpec {
    pytorch_replica_specs: BTreeMap<String, ReplicaSpec>,
}

#[derive(Deserialize)]
struct ReplicaSpec {
    #[serde(default)]
    replicas: Option<i32>,
    template: PodTemplate,
}

/// Where replica type `kind` sits in the manifest.
fn replica_path(kind: &str) -> String {
    format!("spec.pytorchReplicaSpecs.{kind}")
}

pub(super) fn pytorchjob(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let template = value.clone();
    let manifest: PyTorchJobManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &template, at)?;
    let metadata = manifest.metadata;
    let specs = manifest.spec.pytorch_replica_specs;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut errors = Vec::new();

    for kind in specs.keys() {
        if !REPLICA_TYPES.contains(&kind.as_str()) {
            errors.push(at.error(
                replica_path(kind),
                format!(
                    "{kind:?} is not a PyTorchJob replica type; the Training Operator takes {}",
                    REPLICA_TYPES.join(" and ")
                ),
            ));
        }
    }
    if specs.is_empty() {
        errors.push(at.error(
            "spec.pytorchReplicaSpecs",
            "must have a Master or a Worker replica spec",
        ));
    }
    if specs
        .get("Master")
        .is_some_and(|m| m.replicas.unwrap_or(1) != 1)
    {
        errors.push(at.error(
            format!("{}.replicas", replica_path("Master")),
            "must be 1: a PyTorchJob has one Master (the Training Operator refuses more)",
        ));
    }
    // Kueue's order: Master, then Worker.
    let ordered: Vec<(&str, &ReplicaSpec)> = REPLICA_TYPES
        .iter()
        .filter_map(|kind| specs.get(*kind).map(|s| (*kind, s)))
        .collect();

    let queue_name = queue_of(&metadata, "PyTorchJob", at, &mut errors);
    let (priority_class_name, priority_class_source) =
        priority_of(&metadata, ordered.iter().map(|(_, s)| &s.template.spec));
    refuse_partial_admission(&metadata, "PyTorchJob", at, &mut errors);
    for key in ALL_ANNOTATIONS {
        if metadata.annotations.contains_key(key) {
            errors.push(at.error(
                annotation_path(key),
                "Kueue reads pod-set topology annotations from each replica's pod template (spec.pytorchReplicaSpecs.*.template.metadata.annotations), not the PyTorchJob",
            ));
        }
    }
    let maximum_execution_time = max_exec_time_label(&metadata, at, &mut errors);
    let duration = super::annotations::simulated_duration(&metadata.annotations, at, &mut errors);
    super::annotations::check_kueue_keys(&metadata.labels, &metadata.annotations, at, &mut errors);

    let pod_sets: Vec<PodSet> = ordered
        .iter()
        .map(|(kind, spec)| pod_set(kind, spec, at, &mut errors))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }

    let first = ordered.first().map(|(_, s)| &s.template.spec);
    let run = PodSpec::run_of(first, Some(template), duration);
    let kinds: Vec<&str> = ordered.iter().map(|(k, _)| *k).collect();
    let workload = NamedWorkload {
        source_name: format!("PyTorchJob/{namespace}/{name}"),
        namespace,
        name,
        labels: metadata.labels,
        spec: WorkloadSpec {
            queue_name,
            priority_class_name,
            priority_class_source,
            pod_sets,
            run,
            maximum_execution_time,
            ..WorkloadSpec::default()
        },
    };
    Ok(workload.into_converted(generated_name, rewrites(&kinds, priority_class_source)))
}

/// Replica type `kind` as a pod set, named as Kueue names it (lower
/// case); errors at the manifest's paths.
fn pod_set(kind: &str, spec: &ReplicaSpec, at: &Location, errors: &mut Vec<FieldError>) -> PodSet {
    let path = replica_path(kind);
    let replicas = spec.replicas.unwrap_or(1);
    let count = u32::try_from(replicas).unwrap_or_else(|_| {
        errors.push(at.error(
            format!("{path}.replicas"),
            format!(
                "must be a count of pods from 0 to {}, got {replicas}",
                u32::MAX
            ),
        ));
        0
    });
    let topology_request = template_request(
        &spec.template.metadata,
        &format!("{path}.template"),
        at,
        errors,
    );
    let requests = pod_requests(&spec.template.spec, &format!("{path}.template.spec"), at)
        .unwrap_or_else(|mut more| {
            errors.append(&mut more);
            ResourceList::new()
        });
    PodSet {
        name: kind.to_ascii_lowercase(),
        count,
        min_count: None,
        requests,
        topology_request,
    }
}

/// Where a PyTorchJob's Workload fields come from, most specific first.
fn rewrites(kinds: &[&str], class: PriorityClassSource) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let path = replica_path(kind);
        out.extend(template_rewrites(i, &format!("{path}.template")));
        out.push((
            format!("spec.podSets[{i}].requests"),
            format!("{path}.template.spec.containers[*].resources.requests"),
        ));
        out.push((
            format!("spec.podSets[{i}].count"),
            format!("{path}.replicas"),
        ));
        out.push((format!("spec.podSets[{i}]"), path));
    }
    out.extend(super::job::object_rewrites(
        class,
        "spec.pytorchReplicaSpecs.*.template.spec.priorityClassName",
        "spec.pytorchReplicaSpecs",
    ));
    out
}

/// [`super::job_template_problem`] for a PyTorchJob template: one replica
/// spec per pod set, `master` then `worker`, each asking for what its
/// pod set is charged and no more. The path is within the template.
pub(super) fn template_problem(spec: &WorkloadSpec, template: &Value) -> Option<(String, String)> {
    let Some(specs) = template
        .pointer("/spec/pytorchReplicaSpecs")
        .and_then(Value::as_object)
    else {
        return Some((".spec.pytorchReplicaSpecs".into(), "is required".into()));
    };
    if specs.len() != spec.pod_sets.len() {
        return Some((
            ".spec.pytorchReplicaSpecs".into(),
            format!(
                "a PyTorchJob has a pod set per replica type, but it has {} replica types and the workload {} pod sets",
                specs.len(),
                spec.pod_sets.len()
            ),
        ));
    }
    for pod_set in &spec.pod_sets {
        let Some(kind) = REPLICA_TYPES
            .iter()
            .find(|k| k.to_ascii_lowercase() == pod_set.name)
        else {
            return Some((
                ".spec.pytorchReplicaSpecs".into(),
                format!("pod set {:?} is no PyTorchJob replica type", pod_set.name),
            ));
        };
        let path = format!(".spec.pytorchReplicaSpecs.{kind}");
        let Some(replica) = specs.get(*kind) else {
            return Some((path, format!("is required for pod set {:?}", pod_set.name)));
        };
        let replicas = match replica.get("replicas") {
            None | Some(Value::Null) => 1,
            Some(v) => match v.as_u64() {
                Some(n) => n,
                None => {
                    return Some((
                        format!("{path}.replicas"),
                        format!("{v} is not a count of pods"),
                    ))
                }
            },
        };
        let problem = job_spec_problem(Some(replica), &path, pod_set, replicas);
        if problem.is_some() {
            return problem;
        }
    }
    None
}
