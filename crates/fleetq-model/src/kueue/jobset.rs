//! `jobset.x-k8s.io/v1alpha2` JobSet -> fleetq Workload, the way Kueue's
//! JobSet integration builds one: a pod set per replicated Job, named after
//! it, of `replicas` times `min(parallelism, completions)` pods; the queue
//! and priority class from the JobSet's labels (the priority class else
//! from the first pod template that names one); topology requests from
//! each replicated Job's pod template.
//!
//! As with a Job, only the fields fleetq interprets are checked; the whole
//! JobSet is kept verbatim in `spec.run.jobTemplate` for the Kubernetes
//! executor, which creates it in the assigned cluster, where the JobSet
//! controller runs it.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::job::{
    job_spec_problem, max_exec_time_label, priority_of, queue_of, refuse_partial_admission,
};
use super::meta::{annotation_path, decode, Location, ObjectMeta};
use super::pod::{PodSpec, PodTemplate};
use super::topology::{job_request, pod_set_rewrites, ALL_ANNOTATIONS};
use super::workload::{pod_requests, workload_name, NamedWorkload};
use super::{Converted, DEFAULT_NAMESPACE};
use crate::config::MAX_POD_SETS;
use crate::workload::WorkloadSpec;
use crate::{FieldError, PodSet, PriorityClassSource, ResourceList};

/// The label the JobSet controller puts on each of its Jobs' pods: the
/// index of the Job within its replicated Job (Kueue's sub-group index).
const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSetManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: JobSetSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// The JobSet fields fleetq reads; others (network, success and failure
/// policies, ...) are allowed and kept verbatim.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobSetSpec {
    replicated_jobs: Vec<ReplicatedJob>,
}

#[derive(Deserialize)]
struct ReplicatedJob {
    name: String,
    /// The JobSet API's default.
    #[serde(default = "one")]
    replicas: i32,
    template: JobTemplate,
}

fn one() -> i32 {
    1
}

#[derive(Deserialize)]
struct JobTemplate {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: ReplicatedJobSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplicatedJobSpec {
    #[serde(default)]
    parallelism: Option<i32>,
    #[serde(default)]
    completions: Option<i32>,
    #[serde(default)]
    completion_mode: Option<String>,
    template: PodTemplate,
}

/// Where replicated Job `i` sits in the manifest.
fn replicated_job_path(i: usize) -> String {
    format!("spec.replicatedJobs[{i}]")
}

pub(super) fn jobset(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let template = value.clone();
    let manifest: JobSetManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &template, at)?;
    let metadata = manifest.metadata;
    let replicated = manifest.spec.replicated_jobs;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut errors = Vec::new();

    let queue_name = queue_of(&metadata, "JobSet", at, &mut errors);
    let (priority_class_name, priority_class_source) = priority_of(
        &metadata,
        replicated.iter().map(|r| &r.template.spec.template.spec),
    );
    if replicated.is_empty() {
        errors.push(at.error(
            "spec.replicatedJobs",
            "must have at least one replicated Job",
        ));
    }
    if replicated.len() > MAX_POD_SETS {
        errors.push(at.error(
            "spec.replicatedJobs",
            format!(
                "has {} replicated Jobs; each is a pod set, and Kueue allows at most {MAX_POD_SETS}",
                replicated.len()
            ),
        ));
    }
    refuse_partial_admission(&metadata, "JobSet", at, &mut errors);
    for key in ALL_ANNOTATIONS {
        if metadata.annotations.contains_key(key) {
            errors.push(at.error(
                annotation_path(key),
                "Kueue reads pod-set topology annotations from each replicated Job's pod template (spec.replicatedJobs[*].template.spec.template.metadata.annotations), not the JobSet",
            ));
        }
    }
    let maximum_execution_time = max_exec_time_label(&metadata, at, &mut errors);
    let duration = super::annotations::simulated_duration(&metadata.annotations, at, &mut errors);
    super::annotations::check_kueue_keys(&metadata.labels, &metadata.annotations, at, &mut errors);

    let pod_sets: Vec<PodSet> = replicated
        .iter()
        .enumerate()
        .map(|(i, job)| pod_set(i, job, at, &mut errors))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }

    let first = replicated.first().map(|r| &r.template.spec.template.spec);
    let run = PodSpec::run_of(first, Some(template), duration);
    let workload = NamedWorkload {
        source_name: format!("JobSet/{namespace}/{name}"),
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
    Ok(workload.into_converted(
        generated_name,
        rewrites(replicated.len(), priority_class_source),
    ))
}

/// Replicated Job `i` as a pod set; errors at the manifest's paths.
fn pod_set(i: usize, job: &ReplicatedJob, at: &Location, errors: &mut Vec<FieldError>) -> PodSet {
    let path = replicated_job_path(i);
    let spec = &job.template.spec;
    let parallelism = spec.parallelism.unwrap_or(1);
    let per_replica = spec.completions.map_or(parallelism, |c| c.min(parallelism));
    let pods = i64::from(job.replicas) * i64::from(per_replica);
    let count = u32::try_from(pods).unwrap_or_else(|_| {
        let field = if parallelism < 0 {
            "template.spec.parallelism"
        } else if spec.completions.is_some_and(|c| c < 0) {
            "template.spec.completions"
        } else {
            "replicas"
        };
        errors.push(at.error(
            format!("{path}.{field}"),
            format!("replicas x min(parallelism, completions) must be a count of pods from 0 to {}, got {pods}", u32::MAX),
        ));
        0
    });
    check_derived_names(&path, job, at, errors);
    // The replicated Job's template plays the Job's part for the topology
    // annotations: its own metadata must not carry them, its pod
    // template's may.
    let inner = Location {
        document: at.document,
        object: at.object.clone(),
        path_prefix: format!("{}{path}.template.", at.path_prefix),
    };
    let topology_request = job_request(
        &job.template.metadata.annotations,
        &spec.template.metadata,
        &inner,
        errors,
    )
    .map(|mut request| {
        // Kueue: each Job of the replicated Job is a sub-group.
        request.sub_group_index_label = Some(JOB_INDEX_LABEL.to_string());
        request.sub_group_count = u32::try_from(job.replicas).ok();
        request
    });
    let requests = pod_requests(
        &spec.template.spec,
        &format!("{path}.template.spec.template.spec"),
        at,
    )
    .unwrap_or_else(|mut more| {
        errors.append(&mut more);
        ResourceList::new()
    });
    PodSet {
        name: job.name.clone(),
        count,
        min_count: None,
        requests,
        topology_request,
    }
}

/// How much of the 63 characters of a DNS-1035 label fleetq keeps for the
/// JobSet's own name when it creates it (`<workload>-<id>-<epoch>`).
const NAME_ROOM: usize = 24;

/// The JobSet webhook's rule, checked here rather than found out when
/// the executor creates the JobSet: a replicated Job's name is a DNS-1035
/// label, and the names the JobSet controller derives from it (Jobs
/// `<jobset>-<name>-<index>`, an Indexed Job's pods
/// `...-<pod index>-<5 random>`) stay within 63 characters, leaving
/// [`NAME_ROOM`] for the JobSet's own name.
fn check_derived_names(
    path: &str,
    job: &ReplicatedJob,
    at: &Location,
    errors: &mut Vec<FieldError>,
) {
    if !job.name.starts_with(|c: char| c.is_ascii_lowercase()) {
        errors.push(at.error(
            format!("{path}.name"),
            format!("{:?} must start with a lowercase letter: the JobSet API names replicated Jobs with DNS-1035 labels", job.name),
        ));
    }
    let mut longest = format!("-{}-{}", job.name, job.replicas.saturating_sub(1)).len();
    let spec = &job.template.spec;
    if spec.completion_mode.as_deref() == Some("Indexed") {
        if let Some(completions) = spec.completions {
            longest += format!("-{}-abcde", completions.saturating_sub(1)).len();
        }
    }
    if longest + NAME_ROOM > 63 {
        errors.push(at.error(
            format!("{path}.name"),
            format!(
                "{:?} is too long: the JobSet controller names its Jobs and pods after it within 63 characters, and fleetq keeps {NAME_ROOM} of them for the JobSet's name ({} left here)",
                job.name,
                63usize.saturating_sub(longest + NAME_ROOM - job.name.len())
            ),
        ));
    }
}

/// Where a JobSet's Workload fields come from, most specific first.
fn rewrites(replicated_jobs: usize, class: PriorityClassSource) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..replicated_jobs {
        let path = replicated_job_path(i);
        out.extend(pod_set_rewrites(i, &format!("{path}.template.")));
        out.push((
            format!("spec.podSets[{i}].requests"),
            format!("{path}.template.spec.template.spec.containers[*].resources.requests"),
        ));
        out.push((
            format!("spec.podSets[{i}].count"),
            format!("{path}.replicas"),
        ));
        out.push((format!("spec.podSets[{i}]"), path));
    }
    out.extend(super::job::object_rewrites(
        class,
        "spec.replicatedJobs[*].template.spec.template.spec.priorityClassName",
        "spec.replicatedJobs",
    ));
    out
}

/// [`super::job_template_problem`] for a JobSet template: one replicated
/// Job per pod set, in order and by name, each asking for what its pod
/// set is charged and no more. The path is within the template.
pub(super) fn template_problem(spec: &WorkloadSpec, template: &Value) -> Option<(String, String)> {
    let Some(replicated) = template
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
    else {
        return Some((".spec.replicatedJobs".into(), "is required".into()));
    };
    if replicated.len() != spec.pod_sets.len() {
        return Some((
            ".spec.replicatedJobs".into(),
            format!(
                "a JobSet has a pod set per replicated Job, but it has {} replicated Jobs and the workload {} pod sets",
                replicated.len(),
                spec.pod_sets.len()
            ),
        ));
    }
    for (i, (job, pod_set)) in replicated.iter().zip(&spec.pod_sets).enumerate() {
        let path = format!(".spec.replicatedJobs[{i}]");
        if job.get("name").and_then(Value::as_str) != Some(pod_set.name.as_str()) {
            return Some((
                format!("{path}.name"),
                format!("must be {:?}, the name of pod set {i}", pod_set.name),
            ));
        }
        let replicas = match job.get("replicas") {
            None | Some(Value::Null) => 1,
            Some(v) => match v.as_u64() {
                Some(n) => n,
                None => {
                    return Some((
                        format!("{path}.replicas"),
                        format!("{v} is not a count of Jobs"),
                    ))
                }
            },
        };
        let problem = job_spec_problem(
            job.pointer("/template/spec"),
            &format!("{path}.template.spec"),
            pod_set,
            replicas,
        );
        if problem.is_some() {
            return problem;
        }
    }
    None
}
