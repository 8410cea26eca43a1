//! Namespaces and ClusterQueue `namespaceSelector`s: which namespaces'
//! LocalQueues a ClusterQueue admits from (Kueue's rule, so a tenant that
//! may write LocalQueues in its own namespace cannot point one at another
//! team's ClusterQueue and spend its quota).
//!
//! A namespace's labels are those of its `v1/Namespace` object, applied
//! by an admin, plus `kubernetes.io/metadata.name: <name>`, which
//! Kubernetes sets on every namespace, so the common selectors work
//! without any Namespace object.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The label Kubernetes puts on every namespace, with its name.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A `v1/Namespace`: its labels are what selectors match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Whether a label selector (Kubernetes' `LabelSelector` as JSON, already
/// validated) matches `labels`: every `matchLabels` entry and every
/// `matchExpressions` requirement holds. `{}` matches everything.
pub fn selector_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let Some(map) = selector.as_object() else {
        return false;
    };
    let match_labels = map
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| {
            v.as_str()
                .is_some_and(|v| labels.get(k).map(String::as_str) == Some(v))
        });
    let expressions = map
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| requirement_holds(e, labels));
    match_labels && expressions
}

fn requirement_holds(expression: &Value, labels: &BTreeMap<String, String>) -> bool {
    let key = expression
        .get("key")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let value = labels.get(key).map(String::as_str);
    match expression.get("operator").and_then(Value::as_str) {
        Some("In") => value.is_some_and(|v| values.contains(&v)),
        Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_match_as_kubernetes_does() {
        let team_a = labels(&[(NAME_LABEL, "team-a"), ("team", "a")]);
        assert!(selector_matches(&json!({}), &team_a));
        assert!(selector_matches(
            &json!({"matchLabels": {"team": "a"}}),
            &team_a
        ));
        assert!(!selector_matches(
            &json!({"matchLabels": {"team": "b"}}),
            &team_a
        ));
        let by_name = json!({"matchExpressions": [
            {"key": NAME_LABEL, "operator": "In", "values": ["team-a", "default"]}
        ]});
        assert!(selector_matches(&by_name, &team_a));
        assert!(!selector_matches(
            &by_name,
            &labels(&[(NAME_LABEL, "team-b")])
        ));
        let not_in =
            json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["b"]}]});
        assert!(selector_matches(&not_in, &team_a));
        assert!(selector_matches(&not_in, &labels(&[])));
        let exists = json!({"matchExpressions": [{"key": "team", "operator": "Exists"}]});
        assert!(selector_matches(&exists, &team_a));
        assert!(!selector_matches(&exists, &labels(&[])));
        let absent = json!({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]});
        assert!(!selector_matches(&absent, &team_a));
        // Both parts must hold.
        let both = json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": NAME_LABEL, "operator": "In", "values": ["elsewhere"]}
        ]});
        assert!(!selector_matches(&both, &team_a));
    }
}
