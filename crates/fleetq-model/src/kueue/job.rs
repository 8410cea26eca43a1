//! `batch/v1` Job -> fleetq Workload, the way Kueue's job integration builds
//! a Workload for a Job: one pod set named `main`, the queue and priority
//! class from labels, partial admission from an annotation.
//!
//! Only the fields fleetq interprets are checked (their types and values);
//! the rest of the Job, a full PodSpec with hundreds of fields, passes through
//! verbatim in `spec.run.jobTemplate` for the Kubernetes executor, whose API
//! server validates it when the Job is created there.

use std::time::Duration;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::meta::{annotation_path, decode, label_path, Location, ObjectMeta};
use super::pod::{PodSpec, PodTemplate};
use super::topology::{job_request, job_rewrites as topology_rewrites};
use super::workload::{pod_requests, workload_name, NamedWorkload};
use super::{
    Converted, DEFAULT_NAMESPACE, DEFAULT_POD_SET, MAX_EXEC_TIME_LABEL, MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL,
};
use crate::workload::WorkloadSpec;
use crate::{FieldError, PodSet, PriorityClassSource, ResourceList};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    spec: JobSpec,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// The Job fields fleetq reads; others are allowed and kept verbatim.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobSpec {
    #[serde(default)]
    parallelism: Option<i32>,
    #[serde(default)]
    completions: Option<i32>,
    #[serde(default)]
    active_deadline_seconds: Option<i64>,
    /// `NonIndexed` (Kubernetes' default) or `Indexed`.
    #[serde(default)]
    completion_mode: Option<String>,
    template: PodTemplate,
}

/// Kueue's annotation that keeps a Job's completions equal to its
/// parallelism (elastic Indexed Jobs).
const COMPLETIONS_EQUAL_PARALLELISM: &str = "kueue.x-k8s.io/job-completions-equal-parallelism";

/// Kueue's Job webhook on an elastic Job: no partial admission, and no
/// required or preferred topology.
fn check_elastic(
    annotations: &std::collections::BTreeMap<String, String>,
    template_metadata: &Value,
    at: &Location,
    errors: &mut Vec<FieldError>,
) {
    if !super::annotations::is_elastic(annotations) {
        return;
    }
    if annotations.contains_key(MIN_PARALLELISM_ANNOTATION) {
        errors.push(at.error(
            annotation_path(MIN_PARALLELISM_ANNOTATION),
            "partial admission and an elastic job (kueue.x-k8s.io/elastic-job) cannot be used together",
        ));
    }
    for key in [
        super::topology::REQUIRED_ANNOTATION,
        super::topology::PREFERRED_ANNOTATION,
    ] {
        if template_metadata["annotations"].get(key).is_some() {
            errors.push(at.error(
                format!("spec.template.{}", annotation_path(key)),
                "an elastic job (kueue.x-k8s.io/elastic-job) cannot request a topology",
            ));
        }
    }
}

/// Go's `strconv.ParseBool`, which Kueue's webhook uses.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Kueue's Job webhook on `job-completions-equal-parallelism`: a boolean,
/// and when true an Indexed Job whose completions equal its parallelism.
fn check_completions_equal_parallelism(
    annotations: &std::collections::BTreeMap<String, String>,
    spec: &JobSpec,
    at: &Location,
    errors: &mut Vec<FieldError>,
) {
    let Some(text) = annotations.get(COMPLETIONS_EQUAL_PARALLELISM) else {
        return;
    };
    let path = annotation_path(COMPLETIONS_EQUAL_PARALLELISM);
    match go_bool(text) {
        None => errors.push(at.error(path, format!("{text:?} is not a boolean"))),
        Some(false) => {}
        Some(true) => {
            if spec.completion_mode.as_deref() != Some("Indexed") {
                errors.push(at.error(
                    path,
                    "should not be enabled for NonIndexed jobs (set spec.completionMode: Indexed)",
                ));
            }
            let (parallelism, completions) =
                (spec.parallelism.unwrap_or(1), spec.completions.unwrap_or(1));
            if parallelism != completions {
                errors.push(at.error(
                    "spec.completions",
                    format!("{completions} should be equal to parallelism ({parallelism}) when {COMPLETIONS_EQUAL_PARALLELISM} is true"),
                ));
            }
        }
    }
}

const REQUESTS_PATH: &str = "spec.template.spec.containers[*].resources.requests";

pub(super) fn job(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let job_template = value.clone();
    let manifest: JobManifest = decode(value, at).map_err(|e| vec![e])?;
    let (name, generated_name) = workload_name(&manifest.metadata, &job_template, at)?;
    let metadata = manifest.metadata;
    let spec = manifest.spec;
    let namespace = metadata
        .namespace
        .clone()
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let mut errors = Vec::new();

    let queue_name = queue_of(&metadata, "Job", at, &mut errors);
    let (priority_class_name, priority_class_source) =
        priority_of(&metadata, [&spec.template.spec]);

    // Kueue counts min(parallelism, completions) pods; Kubernetes defaults
    // parallelism to 1.
    let parallelism = spec.parallelism.unwrap_or(1);
    let pods = spec.completions.map_or(parallelism, |c| c.min(parallelism));
    let count = u32::try_from(pods).unwrap_or_else(|_| {
        let field = if parallelism < 0 {
            "spec.parallelism"
        } else {
            "spec.completions"
        };
        errors.push(at.error(field, format!("must be >= 0, got {pods}")));
        0
    });
    let min_count = metadata
        .annotations
        .get(MIN_PARALLELISM_ANNOTATION)
        .and_then(|text| match text.trim().parse::<u32>() {
            Ok(min) if min >= 1 && min < count => Some(min),
            Ok(min) => {
                errors.push(at.error(
                    annotation_path(MIN_PARALLELISM_ANNOTATION),
                    format!(
                        "{min} must be between 1 and {} (one less than the pod count {count})",
                        count.saturating_sub(1)
                    ),
                ));
                None
            }
            Err(_) => {
                errors.push(at.error(
                    annotation_path(MIN_PARALLELISM_ANNOTATION),
                    format!("{text:?} is not a whole number of pods"),
                ));
                None
            }
        });
    let maximum_execution_time = maximum_execution_time(&metadata, &spec, at, &mut errors);
    let duration = super::annotations::simulated_duration(&metadata.annotations, at, &mut errors);
    super::annotations::check_kueue_keys(&metadata.labels, &metadata.annotations, at, &mut errors);
    check_completions_equal_parallelism(&metadata.annotations, &spec, at, &mut errors);
    check_elastic(
        &metadata.annotations,
        &spec.template.metadata,
        at,
        &mut errors,
    );
    let topology_request = job_request(
        &metadata.annotations,
        &spec.template.metadata,
        at,
        &mut errors,
    );
    let requests =
        pod_requests(&spec.template.spec, "spec.template.spec", at).unwrap_or_else(|mut more| {
            errors.append(&mut more);
            ResourceList::new()
        });
    if !errors.is_empty() {
        return Err(errors);
    }

    let run = PodSpec::run_of(Some(&spec.template.spec), Some(job_template), duration);
    let workload = NamedWorkload {
        source_name: format!("Job/{namespace}/{name}"),
        namespace,
        name,
        labels: metadata.labels,
        spec: WorkloadSpec {
            queue_name,
            priority_class_name,
            priority_class_source,
            pod_sets: vec![PodSet {
                name: DEFAULT_POD_SET.to_string(),
                count,
                min_count,
                requests,
                topology_request,
            }],
            run,
            maximum_execution_time,
            ..WorkloadSpec::default()
        },
    };
    // The topology rewrites are the more specific ones, so they go first.
    let mut rewrites = topology_rewrites();
    rewrites.extend(job_rewrites(priority_class_source));
    Ok(workload.into_converted(generated_name, rewrites))
}

/// The LocalQueue a Job or JobSet names in its `kueue.x-k8s.io/queue-name`
/// label (`kind` is for the message).
pub(super) fn queue_of(
    metadata: &ObjectMeta,
    kind: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> String {
    match metadata.labels.get(QUEUE_NAME_LABEL) {
        Some(queue) if !queue.is_empty() => queue.clone(),
        _ => {
            let hint = if metadata.annotations.contains_key(QUEUE_NAME_LABEL) {
                " (it is set as an annotation; Kueue and fleetq read the label)"
            } else {
                ""
            };
            errors.push(at.error(
                label_path(QUEUE_NAME_LABEL),
                format!("is required: it names the LocalQueue the {kind} is submitted to{hint}"),
            ));
            String::new()
        }
    }
}

/// Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label (a Job also has
/// `activeDeadlineSeconds`).
pub(super) fn max_exec_time_label(
    metadata: &ObjectMeta,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let text = metadata.labels.get(MAX_EXEC_TIME_LABEL)?;
    match text.trim().parse::<u32>() {
        Ok(seconds) if seconds > 0 => Some(Duration::from_secs(seconds.into())),
        _ => {
            errors.push(at.error(
                label_path(MAX_EXEC_TIME_LABEL),
                format!("{text:?} must be a whole number of seconds > 0"),
            ));
            None
        }
    }
}

/// Kueue's partial admission is the Job integration's alone: a `whole`
/// (JobSet, pod group) carrying its annotation is refused.
pub(super) fn refuse_partial_admission(
    metadata: &ObjectMeta,
    whole: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) {
    if metadata
        .annotations
        .contains_key(MIN_PARALLELISM_ANNOTATION)
    {
        let path = annotation_path(MIN_PARALLELISM_ANNOTATION);
        errors.push(at.error(
            &path,
            super::unsupported::message(
                &path,
                &format!("Kueue admits a {whole} whole; partial admission is for batch/v1 Jobs"),
            ),
        ));
    }
}

/// Kueue's order: the WorkloadPriorityClass label, else the first pod
/// template that names a PriorityClass (else the global default, at
/// binding).
pub(super) fn priority_of<'a>(
    metadata: &ObjectMeta,
    pods: impl IntoIterator<Item = &'a PodSpec>,
) -> (Option<String>, PriorityClassSource) {
    if let Some(class) = metadata.labels.get(PRIORITY_CLASS_LABEL) {
        return (
            Some(class.clone()),
            PriorityClassSource::WorkloadPriorityClass,
        );
    }
    pods.into_iter()
        .find_map(|pod| pod.priority_class_name.clone().filter(|n| !n.is_empty()))
        .map_or((None, PriorityClassSource::default()), |name| {
            (Some(name), PriorityClassSource::PriorityClass)
        })
}

/// The shorter of `spec.activeDeadlineSeconds` (Kubernetes kills the Job
/// then) and Kueue's `kueue.x-k8s.io/max-exec-time-seconds` label (Kueue
/// evicts it then): the Job cannot run longer than either.
fn maximum_execution_time(
    metadata: &ObjectMeta,
    spec: &JobSpec,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let deadline = match spec.active_deadline_seconds {
        None => None,
        Some(seconds) if seconds > 0 => {
            let deadline = crate::time::duration_from_secs(seconds.unsigned_abs());
            if deadline.is_none() {
                errors.push(at.error(
                    "spec.activeDeadlineSeconds",
                    format!(
                        "must be at most {}, got {seconds}",
                        crate::time::MAX_DURATION_SECS
                    ),
                ));
            }
            deadline
        }
        Some(seconds) => {
            errors.push(at.error(
                "spec.activeDeadlineSeconds",
                format!("must be > 0, got {seconds}"),
            ));
            None
        }
    };
    let label = max_exec_time_label(metadata, at, errors);
    match (deadline, label) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Where a Job's Workload fields come from, so that errors about the
/// Workload point at what the user wrote.
fn job_rewrites(class: PriorityClassSource) -> Vec<(String, String)> {
    let class_path = match class {
        PriorityClassSource::WorkloadPriorityClass => label_path(PRIORITY_CLASS_LABEL),
        PriorityClassSource::PriorityClass => "spec.template.spec.priorityClassName".to_string(),
    };
    [
        ("spec.queueName", label_path(QUEUE_NAME_LABEL)),
        ("spec.priorityClassName", class_path),
        ("spec.podSets[0].count", "spec.parallelism".to_string()),
        (
            "spec.podSets[0].minCount",
            annotation_path(MIN_PARALLELISM_ANNOTATION),
        ),
        ("spec.podSets[0].requests", REQUESTS_PATH.to_string()),
        ("spec.podSets", "spec.template".to_string()),
        (
            "spec.maximumExecutionTime",
            "spec.activeDeadlineSeconds".to_string(),
        ),
    ]
    .into_iter()
    .map(|(ours, theirs)| (ours.to_string(), theirs))
    .collect()
}

/// Where the Workload fields of an object with several pod templates (a
/// JobSet, PyTorchJob, RayJob) come from, besides its pod sets: the queue
/// and execution-time labels, the priority class (its label, else
/// `template_class_path`, where a pod template names a PriorityClass), and
/// the pod sets as a whole (`pod_sets_path`).
pub(super) fn object_rewrites(
    class: PriorityClassSource,
    template_class_path: &str,
    pod_sets_path: &str,
) -> [(String, String); 4] {
    let class_path = match class {
        PriorityClassSource::WorkloadPriorityClass => label_path(PRIORITY_CLASS_LABEL),
        PriorityClassSource::PriorityClass => template_class_path.to_string(),
    };
    [
        ("spec.queueName".to_string(), label_path(QUEUE_NAME_LABEL)),
        ("spec.priorityClassName".to_string(), class_path),
        ("spec.podSets".to_string(), pod_sets_path.to_string()),
        (
            "spec.maximumExecutionTime".to_string(),
            label_path(MAX_EXEC_TIME_LABEL),
        ),
    ]
}

/// The largest `run.jobTemplate` fleetq takes, as compact JSON: a Job
/// with a long pod template is a few KiB; the template is replicated
/// state, held as long as the workload.
pub const MAX_JOB_TEMPLATE_BYTES: usize = 128 * 1024;

/// Whether a workload's `run.jobTemplate` asks Kubernetes for what its
/// pod set is charged, and no more: one pod set, each pod's effective
/// requests (containers, init containers, overhead, by Kubernetes' rules)
/// exactly the pod set's, and `parallelism` at most its count. A Job made
/// by the importer always passes; a template written by hand (a
/// `fleetq.dev/job-template` annotation, a JSON submission) that asked for
/// 8 GPUs while its pod set is charged 1 would take devices nobody paid
/// for. Checked at the API before proposing and by the Kubernetes executor
/// before it creates the Job; not in apply(), so that entries accepted
/// before the check existed replay the same. The error is
/// (field path, message).
pub fn job_template_problem(spec: &WorkloadSpec) -> Option<(String, String)> {
    let template = spec.run.job_template.as_ref()?;
    let problem = |path: &str, message: String| Some((format!("run.jobTemplate{path}"), message));
    let size = template.to_string().len();
    if size > MAX_JOB_TEMPLATE_BYTES {
        return problem(
            "",
            format!("is {size} bytes as JSON; at most {MAX_JOB_TEMPLATE_BYTES}"),
        );
    }
    if template.get("kind").and_then(Value::as_str) == Some("JobSet") {
        return super::jobset::template_problem(spec, template)
            .map(|(path, message)| (format!("run.jobTemplate{path}"), message));
    }
    if template.get("kind").and_then(Value::as_str) == Some("RayJob") {
        return super::rayjob::template_problem(spec, template)
            .map(|(path, message)| (format!("run.jobTemplate{path}"), message));
    }
    if template.get("kind").and_then(Value::as_str) == Some("PyTorchJob") {
        return super::pytorchjob::template_problem(spec, template)
            .map(|(path, message)| (format!("run.jobTemplate{path}"), message));
    }
    if matches!(
        template.get("kind").and_then(Value::as_str),
        Some("Pod" | "List")
    ) {
        return super::pod_group::template_problem(spec, template)
            .map(|(path, message)| (format!("run.jobTemplate{path}"), message));
    }
    let [pod_set] = spec.pod_sets.as_slice() else {
        return problem(
            "",
            format!(
                "a Job has one pod template, but the workload has {} pod sets",
                spec.pod_sets.len()
            ),
        );
    };
    job_spec_problem(template.get("spec"), ".spec", pod_set, 1)
        .map(|(path, message)| (format!("run.jobTemplate{path}"), message))
}

/// Whether a Job spec (`job`, at `path` in the template), run `replicas`
/// times, asks for what `pod_set` is charged and no more: each pod's
/// effective requests exactly the pod set's, and `replicas` times the
/// pods it runs at once at most the pod set's count.
pub(super) fn job_spec_problem(
    job: Option<&Value>,
    path: &str,
    pod_set: &PodSet,
    replicas: u64,
) -> Option<(String, String)> {
    let problem = |at: &str, message: String| Some((format!("{path}{at}"), message));
    let pod: PodTemplate = match job.and_then(|j| j.get("template")) {
        Some(t) => match serde_json::from_value(t.clone()) {
            Ok(pod) => pod,
            Err(e) => return problem(".template", format!("is not a pod template: {e}")),
        },
        None => return problem(".template", "is required".into()),
    };
    let Some(requests) = pod.spec.effective_requests() else {
        return problem(
            ".template.spec",
            "the containers' requests add up past the largest quantity fleetq can count".into(),
        );
    };
    if requests != pod_set.requests {
        let show = |r: &ResourceList| {
            r.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        return problem(
            ".template.spec",
            format!(
                "each pod requests {{{}}}, but pod set {:?} is charged {{{}}} per pod; they must be equal",
                show(&requests),
                pod_set.name,
                show(&pod_set.requests)
            ),
        );
    }
    // Kubernetes runs min(parallelism, completions) pods at once.
    let count_at = |field: &str| -> Result<Option<u64>, String> {
        match job.and_then(|j| j.get(field)) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("{v} is not a count of pods")),
        }
    };
    let (parallelism, completions) = match (count_at("parallelism"), count_at("completions")) {
        (Ok(p), Ok(c)) => (p.unwrap_or(1), c),
        (Err(e), _) => return problem(".parallelism", e),
        (_, Err(e)) => return problem(".completions", e),
    };
    let at_once = completions
        .map_or(parallelism, |c| parallelism.min(c))
        .saturating_mul(replicas);
    if at_once > u64::from(pod_set.count) {
        return problem(
            ".parallelism",
            format!(
                "runs {at_once} pods at once, but pod set {:?} is charged for {}",
                pod_set.name, pod_set.count
            ),
        );
    }
    None
}
