//! fleetq's annotations on a Kueue Workload: what a fleetq workload holds
//! that Kueue's Workload has no field for.
//!
//! A workload submitted with `fleetq submit --duration 30m`, or made from a
//! `batch/v1` Job, holds more than Kueue's `spec` can say: how long the
//! simulated executor runs it, the Job to create on a Kubernetes cluster,
//! the preemption timings. `get workload -o yaml` writes these as
//! annotations (Kubernetes' place for what the schema does not cover, so
//! the object still applies to a real Kueue) and the importer reads them
//! back, so get → apply maps to the identical spec, which the ledger
//! requires of a second submission under the same name.
//!
//! Reading and writing live here together so that they cannot drift apart.
//! An unknown `fleetq.dev/` annotation is an error, as an unknown `spec`
//! field is: a misspelt `fleetq.dev/duraton` silently dropped would run
//! the workload for another time.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::meta::{annotation_path, Location};
use crate::time::{format_duration, parse_duration};
use crate::workload::WorkloadSpec;
use crate::FieldError;

/// How long the simulated executor runs it (`spec.run.duration`).
pub const DURATION_ANNOTATION: &str = "fleetq.dev/duration";
/// Not chosen as a preemption victim before it has run this long.
pub const MIN_RUNTIME_ANNOTATION: &str = "fleetq.dev/min-runtime-before-preemption";
/// Time between the stop signal and the kill.
pub const GRACE_PERIOD_ANNOTATION: &str = "fleetq.dev/preemption-grace-period";
/// The `batch/v1` Job the Kubernetes executor creates, as compact JSON.
pub const JOB_TEMPLATE_ANNOTATION: &str = "fleetq.dev/job-template";

const PREFIX: &str = "fleetq.dev/";
const KNOWN: [&str; 4] = [
    DURATION_ANNOTATION,
    MIN_RUNTIME_ANNOTATION,
    GRACE_PERIOD_ANNOTATION,
    JOB_TEMPLATE_ANNOTATION,
];

/// What the annotations of one Workload say.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Extensions {
    pub duration: Option<Duration>,
    pub min_runtime_before_preemption: Option<Duration>,
    pub preemption_grace_period: Option<Duration>,
    pub job_template: Option<Value>,
}

/// Reads fleetq's annotations; every problem is pushed onto `errors` with
/// the annotation's path. Annotations outside `fleetq.dev/` are the user's
/// and are left alone.
pub(crate) fn read(
    annotations: &BTreeMap<String, String>,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Extensions {
    let mut out = Extensions::default();
    for (key, text) in annotations {
        if !key.starts_with(PREFIX) {
            continue;
        }
        let path = annotation_path(key);
        match key.as_str() {
            DURATION_ANNOTATION => out.duration = duration(text, &path, at, errors),
            MIN_RUNTIME_ANNOTATION => {
                out.min_runtime_before_preemption = duration(text, &path, at, errors)
            }
            GRACE_PERIOD_ANNOTATION => {
                out.preemption_grace_period = duration(text, &path, at, errors)
            }
            JOB_TEMPLATE_ANNOTATION => match serde_json::from_str::<Value>(text) {
                Ok(template @ Value::Object(_)) => out.job_template = Some(template),
                Ok(_) => errors.push(at.error(&path, "must be a batch/v1 Job as a JSON object")),
                Err(e) => errors.push(at.error(&path, format!("is not JSON: {e}"))),
            },
            _ => errors.push(at.error(
                &path,
                format!(
                    "is not an annotation fleetq knows; fleetq.dev/ annotations on a Workload are {}",
                    KNOWN.join(", ")
                ),
            )),
        }
    }
    out
}

/// `fleetq.dev/duration` on a Job or JobSet: how long the simulated
/// executor (`fleetq dev`) runs it; without it, until it is stopped. The
/// object's other `fleetq.dev/` annotations are left alone (the front
/// door writes its own onto the Jobs it queues).
pub(crate) fn simulated_duration(
    annotations: &BTreeMap<String, String>,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    let text = annotations.get(DURATION_ANNOTATION)?;
    duration(text, &annotation_path(DURATION_ANNOTATION), at, errors)
}

fn duration(
    text: &str,
    path: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<Duration> {
    parse_duration(text)
        .map_err(|e| errors.push(at.error(path, e.to_string())))
        .ok()
}

/// The annotations that carry `spec`'s fields Kueue has no place for;
/// empty for a workload Kueue's fields describe whole.
pub(crate) fn write(spec: &WorkloadSpec) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let durations = [
        (DURATION_ANNOTATION, spec.run.duration),
        (MIN_RUNTIME_ANNOTATION, spec.min_runtime_before_preemption),
        (GRACE_PERIOD_ANNOTATION, spec.preemption_grace_period),
    ];
    for (key, duration) in durations {
        if let Some(d) = duration {
            out.insert(key.to_string(), format_duration(d));
        }
    }
    if let Some(template) = &spec.run.job_template {
        // Compact JSON: a Value always serialises, and the importer reads
        // it back to the equal Value.
        out.insert(JOB_TEMPLATE_ANNOTATION.to_string(), template.to_string());
    }
    out
}

/// Kueue's `admission-gated-by` annotation: gates that hold a workload's
/// admission, each a domain-prefixed path.
pub const ADMISSION_GATED_BY: &str = "kueue.x-k8s.io/admission-gated-by";
/// Kueue's prebuilt Workload of a Job, by label or annotation.
pub const PREBUILT_WORKLOAD_NAME: &str = "kueue.x-k8s.io/prebuilt-workload-name";
/// Kueue's elastic job (ElasticJobsViaWorkloadSlices, on by default):
/// fleetq does not resize a running workload, but refuses what Kueue
/// refuses beside it.
pub const ELASTIC_JOB: &str = "kueue.x-k8s.io/elastic-job";

/// Whether `annotations` mark an elastic job.
pub(crate) fn is_elastic(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(ELASTIC_JOB).is_some_and(|v| v == "true")
}

/// Kueue's limit on one admission gate's name.
const MAX_GATE_LENGTH: usize = 63;

/// The rules Kueue's webhooks apply to its own labels and annotations on
/// a Workload or a Job (`pkg/util/webhook/validation_admissiongatedby.go`,
/// `jobframework/validation.go`), each error at the label or annotation.
pub(crate) fn check_kueue_keys(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    at: &Location,
    errors: &mut Vec<FieldError>,
) {
    if let Some(gates) = annotations.get(ADMISSION_GATED_BY) {
        if let Some(problem) = admission_gates_problem(gates) {
            errors.push(at.error(annotation_path(ADMISSION_GATED_BY), problem));
        }
    }
    let prebuilt = [
        (
            labels.get(PREBUILT_WORKLOAD_NAME),
            super::meta::label_path(PREBUILT_WORKLOAD_NAME),
        ),
        (
            annotations.get(PREBUILT_WORKLOAD_NAME),
            annotation_path(PREBUILT_WORKLOAD_NAME),
        ),
    ];
    for (name, path) in prebuilt {
        if let Some(name) = name {
            if !super::syntax::is_dns_subdomain(name) {
                errors.push(at.error(
                    path,
                    format!("{name:?} is not a valid Workload name (a DNS-1123 subdomain)"),
                ));
            }
        }
    }
}

/// Why a comma-separated list of admission gates is refused: an empty
/// entry, a duplicate, one longer than 63 characters, or one that is not
/// a domain-prefixed path (`example.com/controller`).
fn admission_gates_problem(gates: &str) -> Option<String> {
    // An empty annotation holds nothing (Kueue's UT-JOB:596).
    if gates.trim().is_empty() {
        return None;
    }
    let mut seen = std::collections::BTreeSet::new();
    for gate in gates.split(',').map(str::trim) {
        if gate.is_empty() {
            return Some("has an empty gate; gates are separated by single commas".into());
        }
        if gate.len() > MAX_GATE_LENGTH {
            return Some(format!(
                "gate {gate:?} is {} characters long; at most {MAX_GATE_LENGTH}",
                gate.len()
            ));
        }
        let valid = gate.split_once('/').is_some_and(|(domain, path)| {
            super::syntax::is_dns_subdomain(domain)
                && !path.is_empty()
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c))
        });
        if !valid {
            return Some(format!(
                "gate {gate:?} is not a domain-prefixed path such as example.com/controller"
            ));
        }
        if !seen.insert(gate) {
            return Some(format!("gate {gate:?} is listed twice"));
        }
    }
    None
}
