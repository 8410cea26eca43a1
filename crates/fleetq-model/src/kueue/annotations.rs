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
