//! `ray.io/v1` RayJob -> fleetq Workload, the way Kueue's RayJob
//! integration builds one: pod set `head` (one pod, the head group's
//! template), a pod set per worker group named by its group name in lower
//! case (`replicas`, default 1, times `numOfHosts`), and, when the job is
//! submitted by a Kubernetes Job (`submissionMode` `K8sJobMode`, KubeRay's
//! default), pod set `submitter` of one pod: the `submitterPodTemplate`,
//! or KubeRay's default submitter (the head's image, requests 500m CPU and
//! 200Mi, limits 1 CPU and 1Gi), which is then written into the kept
//! template so that the pod the ledger charges is the pod that runs.
//!
//! Kueue's RayJob webhook rules are checked at import: the cluster is
//! deleted when the job finishes (`shutdownAfterJobFinishes: true`), no
//! existing cluster (`clusterSelector`), no autoscaling
//! (`enableInTreeAutoscaling`), at most 7 worker groups, none named
//! `head` or `submitter`, no two alike.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};

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

/// Kueue's name of the head's pod set.
pub const HEAD: &str = "head";
/// Kueue's name of the submitter Job's pod set.
pub const SUBMITTER: &str = "submitter";
/// Kueue's limit on worker groups.
const MAX_WORKER_GROUPS: usize = 7;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RayJobManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: RayJobSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// The fields fleetq reads; the rest (entrypoint, runtime env, ...) is
/// allowed and kept verbatim.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RayJobSpec {
    #[serde(default)]
    ray_cluster_spec: Option<RayClusterSpec>,
    #[serde(default)]
    shutdown_after_job_finishes: bool,
    #[serde(default)]
    cluster_selector: BTreeMap<String, String>,
    #[serde(default)]
    submission_mode: Option<String>,
    #[serde(default)]
    submitter_pod_template: Option<PodTemplate>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RayClusterSpec {
    head_group_spec: HeadGroup,
    #[serde(default)]
    worker_group_specs: Vec<WorkerGroup>,
    #[serde(default)]
    enable_in_tree_autoscaling: Option<bool>,
}

#[derive(Deserialize)]
struct HeadGroup {
    template: PodTemplate,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkerGroup {
    group_name: String,
    #[serde(default)]
    replicas: Option<i32>,
    #[serde(default)]
    num_of_hosts: Option<i32>,
    template: PodTemplate,
}

const CLUSTER: &str = "spec.rayClusterSpec";

fn worker_path(i: usize) -> String {
    format!("{CLUSTER}.workerGroupSpecs[{i}]")
}

/// Whether the job is submitted by a Kubernetes Job (KubeRay's default).
fn has_submitter(mode: Option<&str>) -> bool {
    matches!(mode, None | Some("K8sJobMode"))
}

/// KubeRay's default submitter pod, for a cluster whose head runs
/// `image`.
fn default_submitter(image: Option<String>) -> Value {
    json!({"spec": {
        "restartPolicy": "Never",
        "containers": [{
            "name": "ray-job-submitter",
            "image": image.unwrap_or_default(),
            "resources": {
                "requests": {"cpu": "500m", "memory": "200Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        }],
    }})
}

pub(super) fn rayjob(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let mut template = value.clone();
    let manifest: RayJobManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &template, at)?;
    let metadata = manifest.metadata;
    let spec = manifest.spec;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut errors = Vec::new();

    if !spec.shutdown_after_job_finishes {
        errors.push(at.error(
            "spec.shutdownAfterJobFinishes",
            "must be true: Kueue (and fleetq) admit a RayJob whose cluster is deleted when the job finishes, so its quota is freed",
        ));
    }
    if !spec.cluster_selector.is_empty() {
        errors.push(at.error(
            "spec.clusterSelector",
            "a queued RayJob makes its own cluster; one that runs on an existing cluster is not admitted",
        ));
    }
    let Some(cluster) = spec.ray_cluster_spec else {
        errors.push(at.error(CLUSTER, "is required"));
        return Err(errors);
    };
    if cluster.enable_in_tree_autoscaling == Some(true) {
        errors.push(at.error(
            format!("{CLUSTER}.enableInTreeAutoscaling"),
            "a queued RayJob cannot autoscale: its pods are admitted as counted",
        ));
    }
    let workers = &cluster.worker_group_specs;
    if workers.len() > MAX_WORKER_GROUPS {
        errors.push(at.error(
            format!("{CLUSTER}.workerGroupSpecs"),
            format!(
                "has {} worker groups; Kueue allows at most {MAX_WORKER_GROUPS}",
                workers.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, group) in workers.iter().enumerate() {
        let lower = group.group_name.to_ascii_lowercase();
        if lower == HEAD || lower == SUBMITTER {
            errors.push(at.error(
                format!("{}.groupName", worker_path(i)),
                format!(
                    "{:?} is the name of Kueue's {lower} pod set",
                    group.group_name
                ),
            ));
        } else if !seen.insert(lower) {
            errors.push(at.error(
                format!("{}.groupName", worker_path(i)),
                format!(
                    "{:?}: another worker group has this name (pod set names ignore case)",
                    group.group_name
                ),
            ));
        }
    }
    let queue_name = queue_of(&metadata, "RayJob", at, &mut errors);
    let head_spec = &cluster.head_group_spec.template.spec;
    let (priority_class_name, priority_class_source) = priority_of(
        &metadata,
        std::iter::once(head_spec).chain(workers.iter().map(|w| &w.template.spec)),
    );
    refuse_partial_admission(&metadata, "RayJob", at, &mut errors);
    for key in ALL_ANNOTATIONS {
        if metadata.annotations.contains_key(key) {
            errors.push(at.error(
                annotation_path(key),
                "Kueue reads pod-set topology annotations from the head's and each worker group's pod template, not the RayJob",
            ));
        }
    }
    let maximum_execution_time = max_exec_time_label(&metadata, at, &mut errors);
    let duration = super::annotations::simulated_duration(&metadata.annotations, at, &mut errors);
    super::annotations::check_kueue_keys(&metadata.labels, &metadata.annotations, at, &mut errors);

    let head_path = format!("{CLUSTER}.headGroupSpec");
    let mut pod_sets = vec![pod_set(
        HEAD,
        1,
        &cluster.head_group_spec.template,
        &head_path,
        at,
        &mut errors,
    )];
    for (i, group) in workers.iter().enumerate() {
        let path = worker_path(i);
        let replicas = i64::from(group.replicas.unwrap_or(1));
        let hosts = i64::from(group.num_of_hosts.unwrap_or(1).max(1));
        let count = u32::try_from(replicas * hosts).unwrap_or_else(|_| {
            errors.push(at.error(
                format!("{path}.replicas"),
                format!(
                    "replicas x numOfHosts must be a count of pods from 0 to {}, got {}",
                    u32::MAX,
                    replicas * hosts
                ),
            ));
            0
        });
        let name = group.group_name.to_ascii_lowercase();
        pod_sets.push(pod_set(
            &name,
            count,
            &group.template,
            &path,
            at,
            &mut errors,
        ));
    }
    let mut sources = vec![head_path];
    sources.extend((0..workers.len()).map(worker_path));
    if has_submitter(spec.submission_mode.as_deref()) {
        let submitter = match &spec.submitter_pod_template {
            Some(t) => pod_set(
                SUBMITTER,
                1,
                t,
                "spec.submitterPodTemplate",
                at,
                &mut errors,
            ),
            None => {
                // Written into the kept template: the pod the ledger
                // charges is the pod KubeRay runs.
                let default = default_submitter(head_spec.first_image());
                template["spec"]["submitterPodTemplate"] = default.clone();
                let typed: PodTemplate = serde_json::from_value(default).unwrap_or_default();
                pod_set(
                    SUBMITTER,
                    1,
                    &typed,
                    "spec.submitterPodTemplate",
                    at,
                    &mut errors,
                )
            }
        };
        pod_sets.push(submitter);
        sources.push("spec.submitterPodTemplate".into());
    }
    if pod_sets.len() > crate::config::MAX_POD_SETS {
        errors.push(at.error(
            format!("{CLUSTER}.workerGroupSpecs"),
            format!(
                "makes {} pod sets with the head and submitter; Kueue allows at most {}",
                pod_sets.len(),
                crate::config::MAX_POD_SETS
            ),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let run = PodSpec::run_of(Some(head_spec), Some(template), duration);
    let workload = NamedWorkload {
        source_name: format!("RayJob/{namespace}/{name}"),
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
    Ok(workload.into_converted(generated_name, rewrites(&sources, priority_class_source)))
}

/// One pod set from a pod template at `path` (its `template` field, or
/// the template itself for the submitter).
fn pod_set(
    name: &str,
    count: u32,
    template: &PodTemplate,
    path: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> PodSet {
    let template_path = match path {
        "spec.submitterPodTemplate" => path.to_string(),
        _ => format!("{path}.template"),
    };
    let topology_request = template_request(&template.metadata, &template_path, at, errors);
    let requests = pod_requests(&template.spec, &format!("{template_path}.spec"), at)
        .unwrap_or_else(|mut more| {
            errors.append(&mut more);
            ResourceList::new()
        });
    PodSet {
        name: name.to_string(),
        count,
        min_count: None,
        requests,
        topology_request,
    }
}

/// Where a RayJob's Workload fields come from, most specific first.
fn rewrites(sources: &[String], class: PriorityClassSource) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, path) in sources.iter().enumerate() {
        let template = match path.as_str() {
            "spec.submitterPodTemplate" => path.clone(),
            _ => format!("{path}.template"),
        };
        out.extend(template_rewrites(i, &template));
        out.push((
            format!("spec.podSets[{i}].requests"),
            format!("{template}.spec.containers[*].resources.requests"),
        ));
        out.push((
            format!("spec.podSets[{i}].count"),
            format!("{path}.replicas"),
        ));
        out.push((format!("spec.podSets[{i}]"), path.clone()));
    }
    out.extend(super::job::object_rewrites(
        class,
        &format!("{CLUSTER}.headGroupSpec.template.spec.priorityClassName"),
        CLUSTER,
    ));
    out
}

/// The pod templates of a RayJob template with the pod set each is
/// charged as: (pod set name, path within the template, template, pods).
fn pod_templates(template: &Value) -> Vec<(String, String, Value, u64)> {
    let cluster = &template["spec"]["rayClusterSpec"];
    let mut out = vec![(
        HEAD.to_string(),
        ".spec.rayClusterSpec.headGroupSpec".to_string(),
        cluster["headGroupSpec"]["template"].clone(),
        1,
    )];
    for (i, group) in cluster["workerGroupSpecs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let replicas = group["replicas"].as_u64().unwrap_or(1);
        let hosts = group["numOfHosts"].as_u64().unwrap_or(1).max(1);
        out.push((
            group["groupName"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase(),
            format!(".spec.rayClusterSpec.workerGroupSpecs[{i}]"),
            group["template"].clone(),
            replicas.saturating_mul(hosts),
        ));
    }
    if !template["spec"]["submitterPodTemplate"].is_null() {
        out.push((
            SUBMITTER.to_string(),
            ".spec.submitterPodTemplate".to_string(),
            template["spec"]["submitterPodTemplate"].clone(),
            1,
        ));
    }
    out
}

/// [`super::job_template_problem`] for a RayJob template: a pod template
/// per pod set, in order and by name, each asking for what its pod set is
/// charged and no more. The path is within the template.
pub(super) fn template_problem(spec: &WorkloadSpec, template: &Value) -> Option<(String, String)> {
    let templates = pod_templates(template);
    if templates.len() != spec.pod_sets.len() {
        return Some((
            ".spec.rayClusterSpec".into(),
            format!(
                "a RayJob has a pod set for its head, each worker group and its submitter, but it has {} and the workload {} pod sets",
                templates.len(),
                spec.pod_sets.len()
            ),
        ));
    }
    for ((name, path, pod, pods), pod_set) in templates.into_iter().zip(&spec.pod_sets) {
        if name != pod_set.name {
            return Some((
                path,
                format!("must be pod set {:?}, found {name:?}", pod_set.name),
            ));
        }
        // A pod template is a Job spec's template run once, `pods` times.
        let as_job = json!({ "template": pod });
        let problem = job_spec_problem(Some(&as_job), &path, pod_set, pods).map(|(p, m)| {
            let fixed = p.replacen(
                ".spec.submitterPodTemplate.template",
                ".spec.submitterPodTemplate",
                1,
            );
            (fixed, m)
        });
        if problem.is_some() {
            return problem;
        }
    }
    None
}
