//! Kueue's rules that differ between its two API versions. fleetq reads
//! v1beta1 and v1beta2 into one model, so a rule of one version only is
//! checked here, on the manifest as written, before conversion.

use serde_json::Value;

use super::meta::Location;
use crate::FieldError;

const V1BETA2: &str = "kueue.x-k8s.io/v1beta2";
const V1BETA1: &str = "kueue.x-k8s.io/v1beta1";

/// v1beta2's values of `flavorFungibility.whenCanBorrow` and
/// `whenCanPreempt`; v1beta1 also has the deprecated `Borrow` and
/// `Preempt`.
const FUNGIBILITY_V1BETA2: [&str; 2] = ["MayStopSearch", "TryNextFlavor"];

/// v1beta2's `maxLength` of a level in a Workload's `topologyRequest`.
const MAX_REQUESTED_LEVEL_V1BETA2: usize = 63;

/// v1beta2's `maxLength` of a WorkloadPriorityClass's `description`
/// (v1beta1 has none).
pub const MAX_PRIORITY_CLASS_DESCRIPTION: usize = 2048;

/// The errors of the rules of `api_version` alone for a `kind` manifest.
pub(super) fn check(
    kind: &str,
    api_version: &str,
    value: &Value,
    at: &Location,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if api_version != V1BETA2 {
        return errors;
    }
    match kind {
        "ClusterQueue" => {
            for field in ["whenCanBorrow", "whenCanPreempt"] {
                let Some(given) = value["spec"]["flavorFungibility"][field].as_str() else {
                    continue;
                };
                if !FUNGIBILITY_V1BETA2.contains(&given) {
                    errors.push(at.error(
                        format!("spec.flavorFungibility.{field}"),
                        format!(
                            "{given:?} is not supported in {V1BETA2}; supported values: {FUNGIBILITY_V1BETA2:?}"
                        ),
                    ));
                }
            }
        }
        "Workload" => {
            let pod_sets = value["spec"]["podSets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for (i, pod_set) in pod_sets.iter().enumerate() {
                for field in ["required", "preferred", "podSetSliceRequiredTopology"] {
                    let Some(level) = pod_set["topologyRequest"][field].as_str() else {
                        continue;
                    };
                    if level.len() > MAX_REQUESTED_LEVEL_V1BETA2 {
                        errors.push(at.error(
                            format!("spec.podSets[{i}].topologyRequest.{field}"),
                            format!(
                                "is {} characters long; {V1BETA2} allows at most {MAX_REQUESTED_LEVEL_V1BETA2}",
                                level.len()
                            ),
                        ));
                    }
                }
            }
        }
        "WorkloadPriorityClass" => {
            if let Some(text) = value["description"].as_str() {
                let length = text.chars().count();
                if length > MAX_PRIORITY_CLASS_DESCRIPTION {
                    errors.push(at.error(
                        "description",
                        format!(
                            "has {length} characters; {V1BETA2} allows at most {MAX_PRIORITY_CLASS_DESCRIPTION}"
                        ),
                    ));
                }
            }
        }
        _ => {}
    }
    errors
}

/// Where fields of the model come from in `api_version`'s manifest, so
/// that an error names the field as the user wrote it.
pub(super) fn rewrites(kind: &str, api_version: &str) -> Vec<(String, String)> {
    match (kind, api_version) {
        ("ClusterQueue", V1BETA1) => vec![("spec.cohortName".into(), "spec.cohort".into())],
        _ => Vec::new(),
    }
}
