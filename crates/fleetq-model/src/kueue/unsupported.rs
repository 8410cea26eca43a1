//! What Kueue's API has and fleetq does not do: such kinds and fields are
//! refused with `not supported by fleetq: <field> (<why>)`, so that a
//! manifest written for Kueue is never half-applied (a ClusterQueue whose
//! admission checks are silently dropped admits without them). "unknown
//! field" stays for names Kueue does not have either: typos.
//!
//! The list comes from comparing fleetq's decoders with Kueue's
//! `apis/kueue/v1beta1` and `v1beta2` `*_types.go` (v0.14 and main);
//! docs/kueue-conformance.md has it as a table. Fields fleetq accepts but
//! does not act on (a flavor's node labels and taints, topology requests)
//! are not here: they are kept and printed, and the table says so.

use serde_json::{Map, Value};

use super::meta::{join, Location};
use crate::FieldError;

/// The message for an unsupported `field` (a path, or `path: value`).
pub(crate) fn message(field: &str, why: &str) -> String {
    format!("not supported by fleetq: {field} ({why})")
}

const NO_ADMISSION_CHECKS: &str = "fleetq has no admission checks: a workload is admitted as soon as its quota is reserved on a cluster";
const NO_MULTIKUEUE: &str = "fleetq is itself the multi-cluster dispatcher: clusters join with `fleetq agent`, and a ClusterQueue's spec.placement chooses among them";
const NO_DRAIN: &str = "fleetq does not evict the running workloads of a stopped queue; use Hold, and cancel the workloads that must stop";

/// Kinds of `kueue.x-k8s.io` that fleetq does not import, and why.
pub(super) const KINDS: &[(&str, &str)] = &[
    ("AdmissionCheck", NO_ADMISSION_CHECKS),
    ("MultiKueueConfig", NO_MULTIKUEUE),
    ("MultiKueueCluster", NO_MULTIKUEUE),
    (
        "ProvisioningRequestConfig",
        "it configures an admission check, and fleetq has none; agents report the capacity their clusters have, fleetq provisions no nodes",
    ),
];

/// The reason a Kueue kind is not imported, if it is one of [`KINDS`].
pub(super) fn kind(kind: &str) -> Option<&'static str> {
    KINDS.iter().find(|(k, _)| *k == kind).map(|(_, why)| *why)
}

/// Fields of a kind that fleetq refuses whenever they are set, as a path
/// from the document's root.
const FIELDS: &[(&str, &[&str], &str)] = &[
    (
        "ClusterQueue",
        &["spec", "admissionChecks"],
        NO_ADMISSION_CHECKS,
    ),
    (
        "ClusterQueue",
        &["spec", "admissionChecksStrategy"],
        NO_ADMISSION_CHECKS,
    ),
    (
        "ClusterQueue",
        &["spec", "concurrentAdmissionPolicy"],
        "a workload is admitted on one flavor and is not migrated to another while it runs",
    ),
    (
        "ClusterQueue",
        &["spec", "flavorFungibility", "preference"],
        "fleetq's flavor search follows whenCanBorrow and whenCanPreempt only",
    ),
];

/// Values of a field that fleetq refuses, though it supports the field.
const VALUES: &[(&str, &[&str], &str, &str)] = &[
    (
        "ClusterQueue",
        &["spec", "stopPolicy"],
        "HoldAndDrain",
        NO_DRAIN,
    ),
    (
        "LocalQueue",
        &["spec", "stopPolicy"],
        "HoldAndDrain",
        NO_DRAIN,
    ),
];

/// Removes from `document` (a `kind` of Kueue's API) every field that
/// fleetq does not support, and returns an error for each: the rest of the
/// document is then decoded as usual, so that its own mistakes are
/// reported too. A field set to null, or to an empty list, is absent in
/// Kubernetes and passes.
pub(super) fn take(document: &mut Value, kind: &str, at: &Location) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (_, path, why) in FIELDS.iter().filter(|(k, _, _)| *k == kind) {
        let Some((parent, field)) = parent_of(document, path) else {
            continue;
        };
        match parent.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.is_empty() => {}
            Some(_) => {
                let path = path_text(path);
                errors.push(at.error(&path, message(&path, why)));
            }
        }
        parent.remove(field);
    }
    for (_, path, refused, why) in VALUES.iter().filter(|(k, _, _, _)| *k == kind) {
        let Some((parent, field)) = parent_of(document, path) else {
            continue;
        };
        if parent.get(field).and_then(Value::as_str) == Some(refused) {
            let path = path_text(path);
            errors.push(at.error(&path, message(&format!("{path}: {refused}"), why)));
            parent.remove(field);
        }
    }
    errors
}

/// The mapping that holds the last segment of `path`, and that segment.
fn parent_of<'v>(
    document: &'v mut Value,
    path: &[&'static str],
) -> Option<(&'v mut Map<String, Value>, &'static str)> {
    let (field, parents) = path.split_last()?;
    let mut node = document;
    for segment in parents {
        node = node.as_object_mut()?.get_mut(*segment)?;
    }
    Some((node.as_object_mut()?, field))
}

fn path_text(path: &[&str]) -> String {
    path.iter()
        .fold(String::new(), |out, segment| join(&out, segment))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Location {
        Location {
            document: 1,
            object: "ClusterQueue/q".into(),
            path_prefix: String::new(),
        }
    }

    #[test]
    fn set_fields_are_named_and_removed() {
        let mut doc = serde_json::json!({
            "spec": {
                "admissionChecks": ["prov"],
                "admissionChecksStrategy": null,
                "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
                "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "preference": "BorrowingOverPreemption"},
                "stopPolicy": "HoldAndDrain",
            }
        });
        let errors = take(&mut doc, "ClusterQueue", &at());
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 4, "{shown:#?}");
        assert!(shown[0].starts_with(
            "document 1: ClusterQueue/q: spec.admissionChecks: not supported by fleetq: spec.admissionChecks (fleetq has no admission checks"
        ));
        assert!(shown[3].starts_with(
            "document 1: ClusterQueue/q: spec.stopPolicy: not supported by fleetq: spec.stopPolicy: HoldAndDrain (fleetq does not evict"
        ));
        assert_eq!(
            doc,
            serde_json::json!({"spec": {"flavorFungibility": {"whenCanBorrow": "MayStopSearch"}}})
        );
    }

    #[test]
    fn absent_empty_and_supported_values_pass() {
        let mut doc = serde_json::json!({"spec": {"admissionChecks": [], "stopPolicy": "Hold"}});
        assert!(take(&mut doc, "ClusterQueue", &at()).is_empty());
        assert_eq!(doc, serde_json::json!({"spec": {"stopPolicy": "Hold"}}));
        let mut not_a_mapping = serde_json::json!({"spec": "x"});
        assert!(take(&mut not_a_mapping, "ClusterQueue", &at()).is_empty());
        assert!(kind("AdmissionCheck").is_some());
        assert!(kind("ClusterQueue").is_none());
    }
}
