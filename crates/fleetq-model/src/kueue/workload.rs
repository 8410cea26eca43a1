//! Kueue's own `Workload` kind, and what every workload import shares with
//! Jobs: names (including `generateName`) and per-pod requests.

use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::annotations;
use super::meta::{decode, Location, ObjectMeta};
use super::pod::{PodSpec, PodTemplate};
use super::topology::{workload_request, KueueTopologyRequest};
use super::unsupported;
use super::{Converted, DEFAULT_NAMESPACE, DEFAULT_POD_SET, KUEUE_GROUP};
use crate::config::Object;
use crate::workload::WorkloadSpec;
use crate::{FieldError, PodSet, PriorityClassSource, ResourceList, Workload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: KueueWorkloadSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// Kueue's WorkloadSpec, v1beta1 and v1beta2 fields together.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KueueWorkloadSpec {
    pod_sets: Vec<KueuePodSet>,
    #[serde(default)]
    queue_name: Option<String>,
    /// v1beta1.
    #[serde(default)]
    priority_class_name: Option<String>,
    /// v1beta1: `kueue.x-k8s.io/workloadpriorityclass` or
    /// `scheduling.k8s.io/priorityclass`.
    #[serde(default)]
    priority_class_source: Option<String>,
    /// v1beta2.
    #[serde(default)]
    priority_class_ref: Option<PriorityClassRef>,
    /// Kueue copies the class's value here; fleetq reads the class itself,
    /// so a stale copy cannot disagree with it. Kueue's CEL requires it
    /// beside a class, and so does fleetq.
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    active: Option<bool>,
    #[serde(default)]
    maximum_execution_time_seconds: Option<i32>,
    #[serde(default)]
    preemption_gates: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PriorityClassRef {
    group: String,
    kind: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KueuePodSet {
    #[serde(default = "default_pod_set_name")]
    name: String,
    #[serde(default = "one")]
    count: i32,
    #[serde(default)]
    min_count: Option<i32>,
    template: PodTemplate,
    #[serde(default)]
    topology_request: Option<KueueTopologyRequest>,
}

fn default_pod_set_name() -> String {
    DEFAULT_POD_SET.to_string()
}

fn one() -> i32 {
    1
}

const WORKLOAD_PRIORITY_SOURCE: &str = "kueue.x-k8s.io/workloadpriorityclass";
pub(super) const POD_PRIORITY_SOURCE: &str = "scheduling.k8s.io/priorityclass";
/// The API group of Kubernetes' PriorityClass.
pub(super) const SCHEDULING_GROUP: &str = "scheduling.k8s.io";

pub(super) fn kueue_workload(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let seed = value.clone();
    let manifest: WorkloadManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &seed, at)?;
    let namespace = manifest
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let spec = manifest.spec;
    let mut errors = Vec::new();
    let mut rewrites = Vec::new();

    let queue_name = match spec.queue_name {
        Some(queue) if !queue.is_empty() => queue,
        _ => {
            errors.push(at.error(
                "spec.queueName",
                "is required: fleetq admits workloads through a LocalQueue",
            ));
            String::new()
        }
    };
    let names_class = spec.priority_class_ref.is_some()
        || spec
            .priority_class_name
            .as_deref()
            .is_some_and(|n| !n.is_empty());
    if names_class && spec.priority.is_none() {
        errors.push(at.error(
            "spec.priority",
            "is required beside a priority class, as Kueue requires it (fleetq reads the class's value; this copy is not used)",
        ));
    }
    let (priority_class_name, priority_class_source) = match priority_class(
        spec.priority_class_name,
        spec.priority_class_source,
        spec.priority_class_ref,
        at,
    ) {
        Ok(class) => {
            if class.from_ref {
                rewrites.push((
                    "spec.priorityClassName".to_string(),
                    "spec.priorityClassRef.name".to_string(),
                ));
            }
            (class.name, class.source)
        }
        Err(error) => {
            errors.push(error);
            (None, PriorityClassSource::default())
        }
    };
    if !spec.preemption_gates.is_empty() {
        errors.push(at.error(
            "spec.preemptionGates",
            unsupported::message(
                "spec.preemptionGates",
                "fleetq has no preemption gates: a queued workload may preempt at once; remove the gates",
            ),
        ));
    }
    let maximum_execution_time = match spec.maximum_execution_time_seconds {
        None => None,
        Some(seconds) if seconds >= 1 => Some(Duration::from_secs(seconds.unsigned_abs().into())),
        Some(seconds) => {
            errors.push(at.error(
                "spec.maximumExecutionTimeSeconds",
                format!("must be at least 1, got {seconds}"),
            ));
            None
        }
    };
    rewrites.push((
        "spec.maximumExecutionTime".to_string(),
        "spec.maximumExecutionTimeSeconds".to_string(),
    ));

    // fleetq's own fields, which Kueue's Workload has no place for.
    let extensions = annotations::read(&manifest.metadata.annotations, at, &mut errors);
    annotations::check_kueue_keys(
        &manifest.metadata.labels,
        &manifest.metadata.annotations,
        at,
        &mut errors,
    );

    let elastic = annotations::is_elastic(&manifest.metadata.annotations);
    if elastic && spec.pod_sets.iter().any(|ps| ps.min_count.is_some()) {
        errors.push(at.error(
            "spec.podSets",
            "partial admission (minCount) and an elastic job (kueue.x-k8s.io/elastic-job) cannot be used together",
        ));
    }
    let mut pod_sets = Vec::new();
    let mut first_pod = None;
    for (i, pod_set) in spec.pod_sets.into_iter().enumerate() {
        let path = format!("spec.podSets[{i}]");
        let count = non_negative(pod_set.count, &format!("{path}.count"), at, &mut errors);
        let min_count = pod_set
            .min_count
            .map(|min| non_negative(min, &format!("{path}.minCount"), at, &mut errors));
        template_metadata(
            &pod_set.template.metadata,
            &format!("{path}.template.metadata"),
            at,
            &mut errors,
        );
        let requests = pod_requests(&pod_set.template.spec, &format!("{path}.template.spec"), at)
            .unwrap_or_else(|mut more| {
                errors.append(&mut more);
                ResourceList::new()
            });
        rewrites.push((
            format!("{path}.requests"),
            format!("{path}.template.spec.containers[*].resources.requests"),
        ));
        let topology_request = pod_set.topology_request.and_then(|request| {
            workload_request(request, &format!("{path}.topologyRequest"), at, &mut errors)
        });
        pod_sets.push(PodSet {
            name: pod_set.name,
            count,
            min_count,
            requests,
            topology_request,
        });
        first_pod.get_or_insert(pod_set.template.spec);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let run = PodSpec::run_of(
        first_pod.as_ref(),
        extensions.job_template,
        extensions.duration,
    );
    let workload = NamedWorkload {
        source_name: format!("Workload/{namespace}/{name}"),
        namespace,
        name,
        labels: manifest.metadata.labels,
        spec: WorkloadSpec {
            queue_name,
            priority_class_name,
            priority_class_source,
            pod_sets,
            run,
            maximum_execution_time,
            min_runtime_before_preemption: extensions.min_runtime_before_preemption,
            preemption_grace_period: extensions.preemption_grace_period,
            inactive: spec.active == Some(false),
        },
    };
    Ok(workload.into_converted(generated_name, rewrites))
}

/// The class a Kueue Workload names.
struct NamedClass {
    name: Option<String>,
    source: PriorityClassSource,
    /// Named through v1beta2's `priorityClassRef`.
    from_ref: bool,
}

/// The priority class a Kueue Workload names: a WorkloadPriorityClass or
/// a Kubernetes PriorityClass, by v1beta1's `priorityClassName` and
/// `priorityClassSource` or v1beta2's `priorityClassRef`.
fn priority_class(
    name: Option<String>,
    source: Option<String>,
    reference: Option<PriorityClassRef>,
    at: &Location,
) -> Result<NamedClass, FieldError> {
    let named = |name, source, from_ref| NamedClass {
        name: Some(name),
        source,
        from_ref,
    };
    match (name.filter(|n| !n.is_empty()), reference) {
        (Some(_), Some(_)) => Err(at.error(
            "spec.priorityClassRef",
            "set either priorityClassRef (v1beta2) or priorityClassName (v1beta1), not both",
        )),
        (None, Some(reference)) => match (reference.group.as_str(), reference.kind.as_str()) {
            (KUEUE_GROUP, "WorkloadPriorityClass") => Ok(named(
                reference.name,
                PriorityClassSource::WorkloadPriorityClass,
                true,
            )),
            (SCHEDULING_GROUP, "PriorityClass") => {
                Ok(named(reference.name, PriorityClassSource::PriorityClass, true))
            }
            (group, kind) => Err(at.error(
                "spec.priorityClassRef",
                format!(
                    "{group}/{kind} is not a priority class; use group {KUEUE_GROUP} kind WorkloadPriorityClass or group {SCHEDULING_GROUP} kind PriorityClass"
                ),
            )),
        },
        (Some(name), None) => match source.as_deref() {
            None | Some("") | Some(WORKLOAD_PRIORITY_SOURCE) => Ok(named(
                name,
                PriorityClassSource::WorkloadPriorityClass,
                false,
            )),
            Some(POD_PRIORITY_SOURCE) => {
                Ok(named(name, PriorityClassSource::PriorityClass, false))
            }
            Some(other) => Err(at.error(
                "spec.priorityClassSource",
                format!(
                    "{other:?} is not a priority class source; use {WORKLOAD_PRIORITY_SOURCE} or {POD_PRIORITY_SOURCE}"
                ),
            )),
        },
        (None, None) => match source.as_deref() {
            None | Some("") | Some(WORKLOAD_PRIORITY_SOURCE) | Some(POD_PRIORITY_SOURCE) => {
                Ok(NamedClass {
                    name: None,
                    source: PriorityClassSource::default(),
                    from_ref: false,
                })
            }
            Some(other) => Err(at.error(
                "spec.priorityClassSource",
                format!(
                    "{other:?} is not a priority class source; use {WORKLOAD_PRIORITY_SOURCE} or {POD_PRIORITY_SOURCE}"
                ),
            )),
        },
    }
}

/// Kueue's webhook on a pod set's template metadata: label keys and
/// annotation keys are qualified names, label values label values (the
/// error at the map, as Kueue reports it, naming the key).
fn template_metadata(metadata: &Value, path: &str, at: &Location, errors: &mut Vec<FieldError>) {
    use super::syntax::{label_value_error, qualified_name_error};
    let entries = |field: &str| -> Vec<(String, Value)> {
        metadata[field]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    for (key, value) in entries("labels") {
        let problem = qualified_name_error(&key)
            .map(|p| format!("label key {key:?} {p}"))
            .or_else(|| {
                let text = value.as_str().unwrap_or_default();
                label_value_error(text).map(|p| format!("label {key:?}: {p}"))
            });
        if let Some(problem) = problem {
            errors.push(at.error(format!("{path}.labels"), problem));
        }
    }
    for (key, _) in entries("annotations") {
        if let Some(problem) = qualified_name_error(&key) {
            errors.push(at.error(
                format!("{path}.annotations"),
                format!("annotation key {key:?} {problem}"),
            ));
        }
    }
}

fn non_negative(value: i32, path: &str, at: &Location, errors: &mut Vec<FieldError>) -> u32 {
    u32::try_from(value).unwrap_or_else(|_| {
        errors.push(at.error(path, format!("must be >= 0, got {value}")));
        0
    })
}

/// Per-pod requests of a pod spec at `path`. Extended resources (GPUs,
/// MIG slices) must be whole in every container, as Kubernetes requires.
pub(super) fn pod_requests(
    spec: &PodSpec,
    path: &str,
    at: &Location,
) -> Result<ResourceList, Vec<FieldError>> {
    if spec.containers.is_empty() {
        return Err(vec![at.error(
            format!("{path}.containers"),
            "must have at least one container",
        )]);
    }
    // Kueue's webhook: `pods` is reserved wherever it is written.
    let reserved: Vec<FieldError> = spec
        .reserved_pods_fields()
        .into_iter()
        .map(|field| {
            at.error(
                format!("{path}.{field}"),
                "the resource name \"pods\" is reserved: Kueue counts a workload's pods itself",
            )
        })
        .collect();
    if !reserved.is_empty() {
        return Err(reserved);
    }
    let fractions: Vec<FieldError> = spec
        .whole_device_problems()
        .into_iter()
        .map(|(field, message)| at.error(format!("{path}.{field}"), message))
        .collect();
    if !fractions.is_empty() {
        return Err(fractions);
    }
    spec.effective_requests().ok_or_else(|| {
        vec![at.error(
            path,
            "the containers' resource requests add up past the largest quantity fleetq can count",
        )]
    })
}

/// A workload's name: `metadata.name`, or one made from `generateName` the
/// way the API server does (prefix plus five characters). The suffix is a
/// hash of the document rather than random, so the same file always yields
/// the same name and two files rarely collide.
pub(super) fn workload_name(
    metadata: &ObjectMeta,
    document: &Value,
    at: &Location,
) -> Result<(String, bool), Vec<FieldError>> {
    match (&metadata.name, &metadata.generate_name) {
        (Some(name), _) => Ok((name.clone(), false)),
        (None, Some(prefix)) => Ok((generated_name(prefix, document, at.document), true)),
        (None, None) => {
            Err(vec![at.error(
                "metadata.name",
                "is required (or metadata.generateName)",
            )])
        }
    }
}

fn generated_name(prefix: &str, document: &Value, number: usize) -> String {
    // Kubernetes' alphabet for generated names: no vowels, no look-alikes.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // FNV-1a: tiny, stable across Rust versions and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let text = format!("{number}\n{document}");
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mut suffix = String::with_capacity(5);
    for _ in 0..5 {
        let index = usize::try_from(hash % ALPHABET.len() as u64).unwrap_or(0);
        suffix.push(char::from(ALPHABET[index]));
        hash /= ALPHABET.len() as u64;
    }
    // The API server keeps at most 58 characters of the prefix.
    let prefix: String = prefix.chars().take(58).collect();
    format!("{prefix}{suffix}")
}

/// A fleetq Workload together with the name of the manifest it came from.
pub(super) struct NamedWorkload {
    pub source_name: String,
    pub namespace: String,
    pub name: String,
    pub labels: std::collections::BTreeMap<String, String>,
    pub spec: WorkloadSpec,
}

impl NamedWorkload {
    pub fn into_converted(
        self,
        generated_name: bool,
        rewrites: Vec<(String, String)>,
    ) -> Converted {
        Converted {
            object: Object::Workload(Workload {
                namespace: self.namespace,
                name: self.name,
                labels: self.labels,
                spec: self.spec,
            }),
            source_name: self.source_name,
            generated_name,
            rewrites,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_stable_and_valid() {
        let doc = serde_json::json!({"a": 1});
        let a = generated_name("sample-job-", &doc, 1);
        assert_eq!(a, generated_name("sample-job-", &doc, 1));
        assert_ne!(a, generated_name("sample-job-", &doc, 2));
        assert!(a.starts_with("sample-job-") && a.len() == "sample-job-".len() + 5);
        assert!(crate::kueue::syntax::dns_label_error(&a).is_none(), "{a}");
        let long = generated_name(&"x".repeat(80), &doc, 1);
        assert_eq!(long.len(), 63);
    }
}
