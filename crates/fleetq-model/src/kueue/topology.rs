//! Kueue's Topology-Aware Scheduling on import: the `Topology` kind, a
//! Workload pod set's `topologyRequest`, and the pod-template annotations
//! from which Kueue's Job integration builds that request.
//!
//! What the model type cannot hold (two placements, half a slice) and what
//! Kueue's Job webhook refuses are refused here, naming the field or the
//! annotation. The rules on values (level syntax, slice size against the
//! count) and the check against the Topology of the pod set's flavors run
//! where the workload is bound to its queue (`Config::bind_workload`), so
//! they hold for every way a workload arrives; a Job's rewrites point
//! those errors back at its annotations.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::config_kinds::manifest;
use super::meta::{annotation_path, join, Location};
use super::unsupported;
use super::Converted;
use crate::config::Object;
use crate::topology::{
    placement_of, slice_of, PodSetTopologyRequest, TopologyPlacement, TopologySlice, TopologySpec,
};
use crate::{FieldError, Topology};

pub const REQUIRED_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
pub const PREFERRED_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";
pub const UNCONSTRAINED_ANNOTATION: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
pub const SLICE_REQUIRED_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-required-topology";
pub const SLICE_SIZE_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-size";
/// Pairs pod sets of multi-pod-set jobs (JobSet, LeaderWorkerSet) in one
/// domain; fleetq places each pod set on its own.
const GROUP_NAME_ANNOTATION: &str = "kueue.x-k8s.io/podset-group-name";
/// Kueue's multi-layer slices, behind its TASMultiLayerTopology gate.
const SLICE_CONSTRAINTS_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
/// What Kueue's Job integration puts in `podIndexLabel`.
pub const JOB_COMPLETION_INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";

pub(super) const ALL_ANNOTATIONS: [&str; 7] = [
    REQUIRED_ANNOTATION,
    PREFERRED_ANNOTATION,
    UNCONSTRAINED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    GROUP_NAME_ANNOTATION,
    SLICE_CONSTRAINTS_ANNOTATION,
];

/// Where a Job's pod template keeps its annotations.
const TEMPLATE_ANNOTATIONS: &str = "spec.template.metadata.annotations";

pub(super) fn topology(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, _, spec) = manifest::<TopologySpec>(value, at)?;
    Ok(Converted::plain(Object::Topology(Topology {
        name,
        spec: spec.unwrap_or_default(),
    })))
}

/// Kueue's `PodSetTopologyRequest` as a Workload manifest writes it
/// (v1beta1 and v1beta2 have the same fields).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct KueueTopologyRequest {
    #[serde(default)]
    required: Option<String>,
    #[serde(default)]
    preferred: Option<String>,
    #[serde(default)]
    unconstrained: Option<bool>,
    #[serde(default)]
    pod_index_label: Option<String>,
    #[serde(default)]
    sub_group_index_label: Option<String>,
    #[serde(default)]
    sub_group_count: Option<i32>,
    #[serde(default)]
    pod_set_slice_required_topology: Option<String>,
    #[serde(default)]
    pod_set_slice_size: Option<i32>,
    // Read only to refuse them by name rather than as unknown fields.
    #[serde(default)]
    pod_set_group_name: Option<Value>,
    #[serde(default)]
    podset_slice_required_topology_constraints: Option<Value>,
}

/// Kueue's maxLength of `podIndexLabel` and `subGroupIndexLabel` (a
/// label key with a 253-character prefix, `/` and a 63-character name).
const MAX_INDEX_LABEL: usize = 317;

/// A Workload pod set's request; `path` is `spec.podSets[i].topologyRequest`.
pub(super) fn workload_request(
    request: KueueTopologyRequest,
    path: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<PodSetTopologyRequest> {
    let field = |name: &str| format!("{path}.{name}");
    let before = errors.len();
    if request.pod_set_group_name.is_some() {
        let path = field("podSetGroupName");
        errors.push(at.error(
            &path,
            unsupported::message(
                &path,
                "it pairs pod sets of one workload in one topology domain, and fleetq places each pod set on its own",
            ),
        ));
    }
    if request.podset_slice_required_topology_constraints.is_some() {
        let path = field("podsetSliceRequiredTopologyConstraints");
        errors.push(at.error(
            &path,
            unsupported::message(
                &path,
                "Kueue's TASMultiLayerTopology feature; use podSetSliceRequiredTopology and podSetSliceSize",
            ),
        ));
    }
    // v1beta2's maxLength on the index labels (the label key of a pod's
    // index and of its sub-group's).
    let labels = [
        ("podIndexLabel", &request.pod_index_label),
        ("subGroupIndexLabel", &request.sub_group_index_label),
    ];
    for (name, label) in labels {
        if let Some(label) = label {
            if label.len() > MAX_INDEX_LABEL {
                errors.push(at.error(
                    field(name),
                    format!(
                        "is {} characters long; Kueue allows at most {MAX_INDEX_LABEL}",
                        label.len()
                    ),
                ));
            }
        }
    }
    // Kueue's CRD leaves this to its scheduler, which silently prefers
    // required over preferred; refusing says which one counts.
    let placement = match placement_of(
        request.required.clone(),
        request.preferred.clone(),
        request.unconstrained,
    ) {
        Ok(placement) => placement,
        Err(message) => {
            let second = if request.required.is_some() && request.preferred.is_some() {
                "preferred"
            } else {
                "unconstrained"
            };
            errors.push(at.error(field(second), message));
            None
        }
    };
    let size = match request.pod_set_slice_size {
        Some(size) if size < 1 => {
            errors.push(at.error(
                field("podSetSliceSize"),
                format!("must be greater than 0, got {size}"),
            ));
            None
        }
        size => size.map(i32::unsigned_abs),
    };
    let slice = slice_of(request.pod_set_slice_required_topology, size).unwrap_or_else(|message| {
        // A size refused above is not also reported missing.
        if request.pod_set_slice_size.is_none_or(|s| s >= 1) {
            errors.push(at.error(field("podSetSliceSize"), message));
        }
        None
    });
    let sub_group_count = request.sub_group_count.and_then(|count| {
        u32::try_from(count).ok().or_else(|| {
            errors.push(at.error(field("subGroupCount"), format!("must be >= 0, got {count}")));
            None
        })
    });
    (errors.len() == before).then_some(PodSetTopologyRequest {
        placement,
        slice,
        pod_index_label: request.pod_index_label,
        sub_group_index_label: request.sub_group_index_label,
        sub_group_count,
    })
}

/// [`job_request`] for a pod template that sits at `template_at` in its
/// object (a PyTorchJob replica's `template`, a RayJob's
/// `submitterPodTemplate`), not at a Job's `spec.template`: the errors
/// name the template where it is.
pub(super) fn template_request(
    template_metadata: &Value,
    template_at: &str,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<PodSetTopologyRequest> {
    let inner = Location {
        document: at.document,
        object: at.object.clone(),
        path_prefix: format!("{}{template_at}.", at.path_prefix),
    };
    let before = errors.len();
    let request = job_request(&BTreeMap::new(), template_metadata, &inner, errors);
    let (wrong, right) = (
        format!("{template_at}.spec.template."),
        format!("{template_at}."),
    );
    for e in &mut errors[before..] {
        e.path = e.path.replacen(&wrong, &right, 1);
    }
    request
}

/// [`pod_set_rewrites`] for a pod template at `template_at` (as
/// [`template_request`]).
pub(super) fn template_rewrites(index: usize, template_at: &str) -> Vec<(String, String)> {
    let (wrong, right) = (
        format!("{template_at}.spec.template."),
        format!("{template_at}."),
    );
    pod_set_rewrites(index, &format!("{template_at}."))
        .into_iter()
        .map(|(field, path)| (field, path.replacen(&wrong, &right, 1)))
        .collect()
}

/// The request Kueue's Job integration builds from a Job's pod-template
/// annotations (`spec.template.metadata`), with the Job webhook's checks;
/// `None` when the Job asks for no topology. Kueue gives every Job's pod
/// set a request carrying the completion-index label; fleetq does so only
/// when the Job asks for a topology, so that Jobs stored before requests
/// existed compare equal to the same Job submitted again.
pub(super) fn job_request(
    job_annotations: &BTreeMap<String, String>,
    template_metadata: &Value,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> Option<PodSetTopologyRequest> {
    let before = errors.len();
    // On the Job itself Kueue ignores them; a request the user believes
    // is in force is worse than a refusal.
    for key in ALL_ANNOTATIONS {
        if job_annotations.contains_key(key) {
            errors.push(at.error(
                annotation_path(key),
                format!("Kueue reads pod-set topology annotations from the pod template, not the Job: move it to {TEMPLATE_ANNOTATIONS}"),
            ));
        }
    }
    let annotations = template_annotations(template_metadata, at, errors);
    let get = |key: &str| annotations.get(key).copied();
    let path = |key: &str| join(TEMPLATE_ANNOTATIONS, key);

    for key in [GROUP_NAME_ANNOTATION, SLICE_CONSTRAINTS_ANNOTATION] {
        if get(key).is_some() {
            let why = if key == GROUP_NAME_ANNOTATION {
                "it pairs pod sets of one workload in one topology domain, and fleetq places each pod set on its own"
            } else {
                "Kueue's TASMultiLayerTopology feature; use the podset-slice-required-topology and podset-slice-size annotations"
            };
            errors.push(at.error(path(key), unsupported::message(&path(key), why)));
        }
    }
    let required = get(REQUIRED_ANNOTATION);
    let preferred = get(PREFERRED_ANNOTATION);
    let unconstrained = get(UNCONSTRAINED_ANNOTATION);
    let placements = [required, preferred, unconstrained]
        .iter()
        .filter(|a| a.is_some())
        .count();
    if placements > 1 {
        errors.push(at.error(
            TEMPLATE_ANNOTATIONS,
            format!("must not contain more than one topology annotation: [{REQUIRED_ANNOTATION:?}, {PREFERRED_ANNOTATION:?}, {UNCONSTRAINED_ANNOTATION:?}]"),
        ));
    }
    let unconstrained = unconstrained.and_then(|text| {
        parse_bool(text).or_else(|| {
            errors.push(at.error(
                path(UNCONSTRAINED_ANNOTATION),
                format!("{text:?} must be a boolean value (\"true\" or \"false\")"),
            ));
            None
        })
    });
    let slice_level = get(SLICE_REQUIRED_ANNOTATION);
    let slice_size = get(SLICE_SIZE_ANNOTATION).and_then(|text| match text.parse::<i32>() {
        Ok(size) if size >= 1 => Some(size.unsigned_abs()),
        Ok(_) => {
            errors.push(at.error(
                path(SLICE_SIZE_ANNOTATION),
                format!("{text:?} must be greater than or equal to 1"),
            ));
            None
        }
        Err(_) => {
            errors.push(at.error(
                path(SLICE_SIZE_ANNOTATION),
                format!("{text:?} must be a numeric value"),
            ));
            None
        }
    });
    match (slice_level, get(SLICE_SIZE_ANNOTATION)) {
        (Some(_), None) => errors.push(at.error(
            path(SLICE_SIZE_ANNOTATION),
            format!("must be set when {SLICE_REQUIRED_ANNOTATION:?} is specified"),
        )),
        (None, Some(_)) => errors.push(at.error(
            path(SLICE_SIZE_ANNOTATION),
            format!("may not be set when {SLICE_REQUIRED_ANNOTATION:?} is not specified"),
        )),
        _ => {}
    }
    if errors.len() != before {
        return None;
    }
    let placement = match (required, preferred, unconstrained) {
        (Some(level), _, _) => Some(TopologyPlacement::Required(level.to_string())),
        (_, Some(level), _) => Some(TopologyPlacement::Preferred(level.to_string())),
        (_, _, Some(true)) => Some(TopologyPlacement::Unconstrained),
        _ => None,
    };
    let slice = match (slice_level, slice_size) {
        (Some(level), Some(size)) => Some(TopologySlice {
            level: level.to_string(),
            size,
        }),
        _ => None,
    };
    (placement.is_some() || slice.is_some()).then(|| PodSetTopologyRequest {
        placement,
        slice,
        pod_index_label: Some(JOB_COMPLETION_INDEX_LABEL.to_string()),
        sub_group_index_label: None,
        sub_group_count: None,
    })
}

/// The pod template's string annotations. The template's metadata is
/// otherwise the executor's business (kept verbatim in the Job), so only
/// the topology annotations must be strings; others are left alone.
fn template_annotations<'a>(
    metadata: &'a Value,
    at: &Location,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<&'static str, &'a str> {
    let mut out = BTreeMap::new();
    let Some(annotations) = metadata.get("annotations").and_then(Value::as_object) else {
        return out;
    };
    for key in ALL_ANNOTATIONS {
        match annotations.get(key) {
            None => {}
            Some(Value::String(text)) => {
                out.insert(key, text.as_str());
            }
            Some(other) => errors.push(at.error(
                join(TEMPLATE_ANNOTATIONS, key),
                format!(
                    "must be a string (quote it: \"{}\")",
                    other.to_string().trim_matches('"')
                ),
            )),
        }
    }
    out
}

/// Go's `strconv.ParseBool`, which Kueue uses for the unconstrained
/// annotation.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Where a Job's pod-set request fields come from: more specific than the
/// Job's other rewrites, so they go first.
pub(super) fn job_rewrites() -> Vec<(String, String)> {
    pod_set_rewrites(0, "")
}

/// The same for pod set `index` whose Job template sits at `prefix`
/// (`spec.replicatedJobs[1].template.` in a JobSet, empty in a Job).
pub(super) fn pod_set_rewrites(index: usize, prefix: &str) -> Vec<(String, String)> {
    let field = |name: &str| format!("spec.podSets[{index}].topologyRequest.{name}");
    let annotations = format!("{prefix}{TEMPLATE_ANNOTATIONS}");
    let annotation = |key: &str| join(&annotations, key);
    vec![
        (field("required"), annotation(REQUIRED_ANNOTATION)),
        (field("preferred"), annotation(PREFERRED_ANNOTATION)),
        (field("unconstrained"), annotation(UNCONSTRAINED_ANNOTATION)),
        (
            field("podSetSliceRequiredTopology"),
            annotation(SLICE_REQUIRED_ANNOTATION),
        ),
        (field("podSetSliceSize"), annotation(SLICE_SIZE_ANNOTATION)),
        (
            format!("spec.podSets[{index}].topologyRequest"),
            annotations.clone(),
        ),
    ]
}
