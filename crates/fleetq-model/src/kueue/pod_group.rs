//! `v1` Pod -> fleetq Workload, the way Kueue's pod integration builds
//! one (KEP-976, "plain pods"):
//!
//! - a Pod labelled `kueue.x-k8s.io/queue-name` alone is a Workload of one
//!   pod set `main` of one pod;
//! - Pods that also carry `kueue.x-k8s.io/pod-group-name` and the
//!   annotation `kueue.x-k8s.io/pod-group-total-count` are one Workload,
//!   named after the group, once all of them are there: the pods are
//!   bucketed by their *role*, a hash of the fields that matter to
//!   admission and scheduling (labels other than Kueue's; each
//!   container's image, requests and ports; node selector, affinity,
//!   tolerations, runtime class, priority, preemption policy, spread
//!   constraints, overhead, resource claims), and each role is a pod set
//!   named by its hash, counting its pods.
//!
//! Kueue waits for the group to be complete; `fleetq apply` reads a
//! manifest at once, so a group with fewer (or more) pods than its total
//! count is refused, naming the count. The pods are kept verbatim in
//! `spec.run.jobTemplate` (the Pod, or a `v1 List` of the group's pods)
//! for the Kubernetes executor, which creates them in the assigned cluster.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::job::{max_exec_time_label, priority_of, queue_of, refuse_partial_admission};
use super::meta::{annotation_path, decode, label_path, Location, ObjectMeta};
use super::pod::PodSpec;
use super::topology::ALL_ANNOTATIONS;
use super::workload::{pod_requests, workload_name, NamedWorkload};
use super::{
    Converted, ImportedDocument, Source, DEFAULT_NAMESPACE, DEFAULT_POD_SET, MAX_EXEC_TIME_LABEL,
    PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
};
use crate::config::{Object, MAX_POD_SETS};
use crate::workload::WorkloadSpec;
use crate::{FieldError, PodSet, PriorityClassSource, ResourceList};

/// Kueue's label naming a Pod's group (the group's Workload name).
pub const POD_GROUP_NAME_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
/// Kueue's annotation: how many pods the group has.
pub const POD_GROUP_TOTAL_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-total-count";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PodManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: PodSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// One Pod, read and checked on its own; a group is checked once all of
/// its pods are read ([`PodGroups::finish`]).
pub(super) struct Member {
    document: usize,
    at: Location,
    path_prefix: String,
    name: String,
    generated_name: bool,
    namespace: String,
    labels: BTreeMap<String, String>,
    queue: String,
    priority: (Option<String>, PriorityClassSource),
    role: String,
    requests: ResourceList,
    duration: Option<std::time::Duration>,
    maximum_execution_time: Option<std::time::Duration>,
    /// (group name, total count), for a pod of a group.
    group: Option<(String, u32)>,
    pod: Value,
}

/// What a Pod document becomes: its own Workload, or a member of a group.
pub(super) enum Read {
    Single(Box<Converted>),
    Grouped(Box<Member>),
}

pub(super) fn pod(value: Value, at: &Location) -> Result<Read, Vec<FieldError>> {
    let pod = value.clone();
    let shape = role_shape(&value);
    let manifest: PodManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &pod, at)?;
    let metadata = manifest.metadata;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut errors = Vec::new();
    let queue = queue_of(&metadata, "Pod", at, &mut errors);
    let priority = priority_of(&metadata, [&manifest.spec]);
    let group = group_of(&metadata, at, &mut errors);
    refuse_job_only_keys(&metadata, at, &mut errors);
    let maximum_execution_time = max_exec_time_label(&metadata, at, &mut errors);
    let duration = super::annotations::simulated_duration(&metadata.annotations, at, &mut errors);
    super::annotations::check_kueue_keys(&metadata.labels, &metadata.annotations, at, &mut errors);
    let requests = pod_requests(&manifest.spec, "spec", at).unwrap_or_else(|mut more| {
        errors.append(&mut more);
        ResourceList::new()
    });
    if !errors.is_empty() {
        return Err(errors);
    }
    let member = Member {
        document: at.document,
        at: at.clone(),
        path_prefix: at.path_prefix.clone(),
        name,
        generated_name,
        namespace,
        labels: metadata.labels,
        queue,
        priority,
        role: role_hash(&shape),
        requests,
        duration,
        maximum_execution_time,
        group,
        pod,
    };
    Ok(match member.group {
        None => Read::Single(Box::new(single(member, &manifest.spec))),
        Some(_) => Read::Grouped(Box::new(member)),
    })
}

/// A Pod without a group: one pod set `main` of one pod.
fn single(member: Member, spec: &PodSpec) -> Converted {
    let run = PodSpec::run_of(Some(spec), Some(member.pod), member.duration);
    let workload = NamedWorkload {
        source_name: format!("Pod/{}/{}", member.namespace, member.name),
        namespace: member.namespace,
        name: member.name,
        labels: member.labels,
        spec: WorkloadSpec {
            queue_name: member.queue,
            priority_class_name: member.priority.0,
            priority_class_source: member.priority.1,
            pod_sets: vec![PodSet {
                name: DEFAULT_POD_SET.to_string(),
                count: 1,
                min_count: None,
                requests: member.requests,
                topology_request: None,
            }],
            run,
            maximum_execution_time: member.maximum_execution_time,
            ..WorkloadSpec::default()
        },
    };
    workload.into_converted(member.generated_name, rewrites(member.priority.1, None))
}

/// The group label and total-count annotation, checked as Kueue's pod
/// webhook does: both or neither, a group name that can name a Workload,
/// a count of at least one pod.
fn group_of(
    metadata: &ObjectMeta,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<(String, u32)> {
    let name = metadata.labels.get(POD_GROUP_NAME_LABEL);
    let total = metadata.annotations.get(POD_GROUP_TOTAL_COUNT_ANNOTATION);
    let total_path = annotation_path(POD_GROUP_TOTAL_COUNT_ANNOTATION);
    match (name, total) {
        (None, None) => None,
        (None, Some(_)) => {
            errors.push(at.error(
                total_path,
                format!("is set, but the pod has no {POD_GROUP_NAME_LABEL} label: a total count belongs to a pod group"),
            ));
            None
        }
        (Some(_), None) => {
            errors.push(at.error(
                total_path,
                format!("is required on a pod of a group ({POD_GROUP_NAME_LABEL}): it says how many pods the group has"),
            ));
            None
        }
        (Some(name), Some(text)) => {
            let mut ok = true;
            if !super::syntax::is_dns_subdomain(name) {
                errors.push(at.error(
                    label_path(POD_GROUP_NAME_LABEL),
                    format!("{name:?} names the group's Workload, so it must be a DNS-1123 subdomain (lower case letters, digits, '-' and '.')"),
                ));
                ok = false;
            }
            let total = match text.trim().parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    errors.push(at.error(
                        total_path,
                        format!("{text:?} must be a whole number of pods, at least 1"),
                    ));
                    ok = false;
                    0
                }
            };
            ok.then(|| (name.clone(), total))
        }
    }
}

/// Keys Kueue reads on Jobs that mean nothing on a Pod: refused rather
/// than ignored, so nobody believes they are in force.
fn refuse_job_only_keys(metadata: &ObjectMeta, at: &Location, errors: &mut Vec<FieldError>) {
    refuse_partial_admission(metadata, "pod group", at, errors);
    for key in ALL_ANNOTATIONS {
        if metadata.annotations.contains_key(key) {
            errors.push(at.error(
                annotation_path(key),
                super::unsupported::message(
                    &annotation_path(key),
                    "fleetq reads topology requests from Jobs' and JobSets' pod templates; a plain Pod or pod group is placed without one",
                ),
            ));
        }
    }
}

/// The fields of a Pod that make its role (KEP-976): two pods that agree
/// on these are interchangeable for admission and scheduling.
fn role_shape(pod: &Value) -> Value {
    let labels: BTreeMap<&String, &Value> = pod["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !k.starts_with("kueue.x-k8s.io/"))
                .collect()
        })
        .unwrap_or_default();
    let spec = &pod["spec"];
    let containers = |key: &str| -> Vec<Value> {
        spec[key]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|c| {
                        json!({
                            "image": c["image"],
                            "requests": c["resources"]["requests"],
                            "ports": c["ports"],
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    json!({
        "labels": labels,
        "initContainers": containers("initContainers"),
        "containers": containers("containers"),
        "nodeSelector": spec["nodeSelector"],
        "affinity": spec["affinity"],
        "tolerations": spec["tolerations"],
        "runtimeClassName": spec["runtimeClassName"],
        "priority": spec["priority"],
        "preemptionPolicy": spec["preemptionPolicy"],
        "topologySpreadConstraints": spec["topologySpreadConstraints"],
        "overhead": spec["overhead"],
        "resourceClaims": spec["resourceClaims"],
    })
}

/// A Pod's role in its group: the pod set it belongs to (a pod as
/// `fleetq apply` read it, or as kept in `run.jobTemplate`).
pub fn pod_role(pod: &Value) -> String {
    role_hash(&role_shape(pod))
}

/// The first 8 hex digits of the SHA-256 of a role's shape (serde_json
/// writes object keys sorted, so equal shapes hash equal).
fn role_hash(shape: &Value) -> String {
    let digest = Sha256::digest(shape.to_string().as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// Pods of groups, collected over a whole manifest stream.
#[derive(Default)]
pub(super) struct PodGroups {
    groups: BTreeMap<(String, String), Vec<Member>>,
}

impl PodGroups {
    pub fn add(&mut self, member: Member) {
        let Some((group, _)) = &member.group else {
            return;
        };
        self.groups
            .entry((member.namespace.clone(), group.clone()))
            .or_default()
            .push(member);
    }

    /// Each complete, consistent group as one Workload, at its first pod's
    /// document; errors for the others.
    pub fn finish(self, imported: &mut Vec<ImportedDocument>, errors: &mut Vec<FieldError>) {
        for ((namespace, group), members) in self.groups {
            match group_workload(&namespace, &group, members) {
                Ok(document) => imported.push(document),
                Err(mut more) => errors.append(&mut more),
            }
        }
    }
}

/// A group's pods, all of them, as one Workload of a pod set per role.
fn group_workload(
    namespace: &str,
    group: &str,
    members: Vec<Member>,
) -> Result<ImportedDocument, Vec<FieldError>> {
    let first = &members[0];
    let mut errors = Vec::new();
    let total = first.group.as_ref().map_or(0, |(_, total)| *total);
    let mut names = std::collections::BTreeSet::new();
    for member in &members {
        let member_total = member.group.as_ref().map_or(0, |(_, t)| *t);
        if member_total != total {
            errors.push(member.at.error(
                annotation_path(POD_GROUP_TOTAL_COUNT_ANNOTATION),
                format!("pod group {namespace}/{group}: this pod says {member_total} pods, its first pod ({}) says {total}; every pod of a group gives the same total count", first.name),
            ));
        }
        if member.queue != first.queue {
            errors.push(member.at.error(
                label_path(QUEUE_NAME_LABEL),
                format!("pod group {namespace}/{group}: this pod names LocalQueue {:?}, its first pod ({}) {:?}; every pod of a group names the same LocalQueue", member.queue, first.name, first.queue),
            ));
        }
        if !names.insert(member.name.as_str()) {
            errors.push(member.at.error(
                "metadata.name",
                format!(
                    "pod group {namespace}/{group} has two pods named {:?}",
                    member.name
                ),
            ));
        }
    }
    let found = members.len();
    if u32::try_from(found).ok() != Some(total) && total > 0 {
        let last = &members[found - 1];
        let pods = if found == 1 { "pod" } else { "pods" };
        errors.push(last.at.error(
            annotation_path(POD_GROUP_TOTAL_COUNT_ANNOTATION),
            format!("pod group {namespace}/{group} has {found} {pods} in the manifest, but its total count is {total}: fleetq admits a group whole, so apply all of its pods together"),
        ));
    }
    // A pod set per role, in the order roles first appear.
    let mut roles: Vec<(String, u32, ResourceList)> = Vec::new();
    for member in &members {
        match roles.iter_mut().find(|(role, _, _)| *role == member.role) {
            Some((_, count, _)) => *count += 1,
            None => roles.push((member.role.clone(), 1, member.requests.clone())),
        }
    }
    if roles.len() > MAX_POD_SETS {
        errors.push(first.at.error(
            label_path(POD_GROUP_NAME_LABEL),
            format!("pod group {namespace}/{group} has {} roles (pods that differ in image, requests, ports, labels, node selector, affinity, tolerations, ...); each is a pod set, and Kueue allows at most {MAX_POD_SETS}", roles.len()),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let pods: Vec<Value> = members.iter().map(|m| m.pod.clone()).collect();
    let template = json!({"apiVersion": "v1", "kind": "List", "items": pods});
    // Said here, at the group, rather than later as the size of a
    // Workload field the user never wrote.
    let size = template.to_string().len();
    if size > super::MAX_JOB_TEMPLATE_BYTES {
        return Err(vec![first.at.error(
            label_path(POD_GROUP_NAME_LABEL),
            format!(
                "pod group {namespace}/{group}: its {} pods are {size} bytes as JSON, and fleetq keeps at most {} per workload; run this many pods as a Job or JobSet (one pod template per role)",
                members.len(),
                super::MAX_JOB_TEMPLATE_BYTES
            ),
        )]);
    }
    let duration = members.iter().filter_map(|m| m.duration).max();
    let maximum_execution_time = members
        .iter()
        .filter_map(|m| m.maximum_execution_time)
        .min();
    let spec_of_first: Option<PodSpec> = serde_json::from_value(first.pod["spec"].clone()).ok();
    let run = PodSpec::run_of(spec_of_first.as_ref(), Some(template), duration);
    let pod_sets = roles
        .into_iter()
        .map(|(role, count, requests)| PodSet {
            name: role,
            count,
            min_count: None,
            requests,
            topology_request: None,
        })
        .collect();
    let Member {
        document,
        path_prefix,
        labels,
        queue,
        priority,
        ..
    } = members.into_iter().next().expect("a group has a first pod");
    let converted = NamedWorkload {
        source_name: format!("Pod/{namespace}/{group}"),
        namespace: namespace.to_string(),
        name: group.to_string(),
        labels,
        spec: WorkloadSpec {
            queue_name: queue,
            priority_class_name: priority.0,
            priority_class_source: priority.1,
            pod_sets,
            run,
            maximum_execution_time,
            ..WorkloadSpec::default()
        },
    }
    .into_converted(false, rewrites(priority.1, Some(group)));
    let Converted {
        object,
        source_name,
        rewrites,
        ..
    } = converted;
    debug_assert!(matches!(object, Object::Workload(_)));
    Ok(ImportedDocument {
        document,
        object,
        source: Source {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: source_name,
            generated_name: false,
            path_prefix,
            rewrites,
        },
    })
}

/// Where a Pod's (or group's) Workload fields come from.
fn rewrites(class: PriorityClassSource, group: Option<&str>) -> Vec<(String, String)> {
    let class_path = match class {
        PriorityClassSource::WorkloadPriorityClass => label_path(PRIORITY_CLASS_LABEL),
        PriorityClassSource::PriorityClass => "spec.priorityClassName".to_string(),
    };
    let mut out = vec![
        ("spec.queueName".to_string(), label_path(QUEUE_NAME_LABEL)),
        ("spec.priorityClassName".to_string(), class_path),
        (
            "spec.maximumExecutionTime".to_string(),
            label_path(MAX_EXEC_TIME_LABEL),
        ),
    ];
    match group {
        None => out.extend([
            (
                "spec.podSets[0].requests".to_string(),
                "spec.containers[*].resources.requests".to_string(),
            ),
            ("spec.podSets".to_string(), "spec".to_string()),
        ]),
        Some(_) => out.extend([
            (
                "spec.podSets".to_string(),
                annotation_path(POD_GROUP_TOTAL_COUNT_ANNOTATION),
            ),
            (
                "metadata.name".to_string(),
                label_path(POD_GROUP_NAME_LABEL),
            ),
        ]),
    }
    out
}

/// Whether a Pod or a `v1 List` of a group's Pods (`run.jobTemplate`)
/// asks for what the workload is charged, and no more: each pod's
/// effective requests exactly its pod set's (a group's pod finds its
/// pod set by its role), and no pod set runs more pods than it counts.
/// Paths are relative to the template.
pub(super) fn template_problem(spec: &WorkloadSpec, template: &Value) -> Option<(String, String)> {
    let pods: Vec<(&Value, String)> = match template.get("kind").and_then(Value::as_str) {
        Some("List") => match template.get("items").and_then(Value::as_array) {
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, pod)| (pod, format!(".items[{i}]")))
                .collect(),
            None => return Some((".items".into(), "must be a list of Pods".into())),
        },
        _ => vec![(template, String::new())],
    };
    let single = template.get("kind").and_then(Value::as_str) == Some("Pod");
    if single && spec.pod_sets.len() != 1 {
        return Some((
            String::new(),
            format!(
                "a Pod is one pod, but the workload has {} pod sets",
                spec.pod_sets.len()
            ),
        ));
    }
    let mut running: BTreeMap<&str, u32> = BTreeMap::new();
    for (pod, path) in pods {
        if pod.get("kind").and_then(Value::as_str) != Some("Pod") {
            return Some((format!("{path}.kind"), "must be Pod".into()));
        }
        let pod_spec: PodSpec = match serde_json::from_value(pod["spec"].clone()) {
            Ok(s) => s,
            Err(e) => return Some((format!("{path}.spec"), format!("is not a pod spec: {e}"))),
        };
        let role = role_hash(&role_shape(pod));
        let pod_set = if single {
            spec.pod_sets.first()
        } else {
            spec.pod_sets.iter().find(|p| p.name == role)
        };
        let Some(pod_set) = pod_set else {
            return Some((
                path,
                format!("is a pod of role {role}, which is not a pod set of the workload"),
            ));
        };
        if pod_spec.effective_requests().as_ref() != Some(&pod_set.requests) {
            return Some((
                format!("{path}.spec"),
                format!(
                    "the pod's requests differ from what pod set {:?} is charged per pod",
                    pod_set.name
                ),
            ));
        }
        let n = running.entry(pod_set.name.as_str()).or_default();
        *n += 1;
        if *n > pod_set.count {
            return Some((
                path,
                format!(
                    "is pod {n} of pod set {:?}, which is charged for {}",
                    pod_set.name, pod_set.count
                ),
            ));
        }
    }
    None
}
