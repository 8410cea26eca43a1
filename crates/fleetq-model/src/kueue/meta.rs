//! What every Kubernetes object shares: `metadata`, and decoding a document
//! into a typed manifest with errors that carry the exact field path.

use std::collections::BTreeMap;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_path_to_error::Segment;

use crate::FieldError;

/// The `metadata` fleetq reads. Fields that the API server fills in are
/// accepted and dropped, so `kubectl get -o yaml` output imports; anything
/// else is an error, because a misspelt `lables` would silently lose a
/// Job's queue.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ObjectMeta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub generate_name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, rename = "uid")]
    _uid: IgnoredAny,
    #[serde(default, rename = "resourceVersion")]
    _resource_version: IgnoredAny,
    #[serde(default, rename = "generation")]
    _generation: IgnoredAny,
    #[serde(default, rename = "creationTimestamp")]
    _creation_timestamp: IgnoredAny,
    #[serde(default, rename = "deletionTimestamp")]
    _deletion_timestamp: IgnoredAny,
    #[serde(default, rename = "deletionGracePeriodSeconds")]
    _deletion_grace_period_seconds: IgnoredAny,
    #[serde(default, rename = "managedFields")]
    _managed_fields: IgnoredAny,
    #[serde(default, rename = "finalizers")]
    _finalizers: IgnoredAny,
    #[serde(default, rename = "ownerReferences")]
    _owner_references: IgnoredAny,
    #[serde(default, rename = "selfLink")]
    _self_link: IgnoredAny,
}

/// Where a document sits, so that every error names it the same way:
/// document number, object, and field path (inside a `v1 List`, prefixed
/// with `items[i].`).
#[derive(Clone, Debug)]
pub(crate) struct Location {
    pub document: usize,
    /// `Kind/name` or `Kind/namespace/name`, as written in the manifest.
    pub object: String,
    /// `items[i].` inside a `v1 List`, empty otherwise.
    pub path_prefix: String,
}

impl Location {
    pub fn error(&self, path: impl AsRef<str>, message: impl Into<String>) -> FieldError {
        let path = path.as_ref();
        let full_path = if self.path_prefix.is_empty() {
            path.to_string()
        } else if path.is_empty() {
            self.path_prefix.trim_end_matches('.').to_string()
        } else {
            format!("{}{path}", self.path_prefix)
        };
        FieldError::new(&self.object, full_path, message).in_document(self.document)
    }
}

/// Decodes `value` into `T`; a type error, a missing field or an unknown
/// field becomes one [`FieldError`] at the exact path.
pub(crate) fn decode<T: DeserializeOwned>(
    value: serde_json::Value,
    at: &Location,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut path = format_path(error.path());
        let mut message = error.into_inner().to_string();
        // serde reports an unknown field from inside the map, before the key
        // is on the path; append it so the path points at the bad key.
        if let Some(field) = unknown_field_name(&message) {
            if !path.ends_with(&path_segment(field)) {
                path = join(&path, field);
            }
        }
        // A missing field is named by its path, as Kubernetes' `Required`.
        if let Some(field) = missing_field_name(&message) {
            path = join(&path, field);
            message = "is required".to_string();
        }
        at.error(path, message)
    })
}

fn missing_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

fn unknown_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

/// `spec.resourceGroups[0].flavors[1]`, with keys that are not plain
/// identifiers quoted: `requests["nvidia.com/gpu"]`.
pub(crate) fn format_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => out = join(&out, key),
            Segment::Enum { .. } => {}
            Segment::Unknown => out = join(&out, "?"),
        }
    }
    out
}

/// Appends one key to a path: `.key`, or `["key"]` when the key has
/// characters a reader would mistake for path syntax.
pub(crate) fn join(path: &str, key: &str) -> String {
    let segment = path_segment(key);
    if path.is_empty() {
        segment.trim_start_matches('.').to_string()
    } else {
        format!("{path}{segment}")
    }
}

fn path_segment(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        format!(".{key}")
    } else {
        format!("[{key:?}]")
    }
}

/// Path of a label: `metadata.labels["kueue.x-k8s.io/queue-name"]`.
pub(crate) fn label_path(key: &str) -> String {
    join("metadata.labels", key)
}

/// Path of an annotation.
pub(crate) fn annotation_path(key: &str) -> String {
    join("metadata.annotations", key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
        #[serde(default)]
        requests: BTreeMap<String, crate::Quantity>,
    }

    fn location() -> Location {
        Location {
            document: 2,
            object: "Thing/x".into(),
            path_prefix: String::new(),
        }
    }

    #[test]
    fn unknown_field_path_ends_at_the_bad_key() {
        let value = serde_json::json!({"items": [{"count": 1}, {"count": 1, "cuont": 2}]});
        let error = decode::<Outer>(value, &location()).unwrap_err();
        assert_eq!(error.path, "items[1].cuont");
        assert_eq!(error.document, Some(2));
        assert!(error.message.contains("unknown field `cuont`"), "{error}");
    }

    #[test]
    fn type_errors_name_quoted_map_keys() {
        let value =
            serde_json::json!({"items": [{"count": 1, "requests": {"nvidia.com/gpu": "-1"}}]});
        let error = decode::<Outer>(value, &location()).unwrap_err();
        assert_eq!(error.path, r#"items[0].requests["nvidia.com/gpu"]"#);
        assert!(error.message.contains("negative"), "{error}");
    }

    #[test]
    fn list_items_are_prefixed() {
        let at = Location {
            path_prefix: "items[3].".into(),
            ..location()
        };
        let error = decode::<Outer>(serde_json::json!({"items": "no"}), &at).unwrap_err();
        assert_eq!(error.path, "items[3].items");
        assert_eq!(at.error("", "x").path, "items[3]");
    }

    #[test]
    fn paths_of_labels() {
        assert_eq!(
            label_path("kueue.x-k8s.io/queue-name"),
            r#"metadata.labels["kueue.x-k8s.io/queue-name"]"#
        );
        assert_eq!(join("", "spec"), "spec");
    }
}
