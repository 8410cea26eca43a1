//! Checks of the Kubernetes-shaped fields that fleetq's model keeps as raw
//! JSON (taints, tolerations, label selectors, admission check strategies):
//! the rules Kueue's CRD schema and webhooks apply to them. Used by
//! [`Config::validate`](crate::Config::validate).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::meta::join;
use super::syntax::{is_dns_subdomain, label_value_error, qualified_name_error};
use crate::FieldError;

/// Collects errors about one object.
pub(crate) struct Checker<'a> {
    pub object: &'a str,
    pub errors: &'a mut Vec<FieldError>,
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Checker<'_> {
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors
            .push(FieldError::new(self.object, path.into(), message.into()));
    }

    /// Label keys are qualified names; values are label values.
    pub fn labels(&mut self, path: &str, labels: &BTreeMap<String, String>) {
        for (key, value) in labels {
            if let Some(problem) = qualified_name_error(key) {
                self.push(join(path, key), format!("label key {problem}"));
            }
            if let Some(problem) = label_value_error(value) {
                self.push(join(path, key), problem);
            }
        }
    }

    pub fn at_most<T>(&mut self, path: &str, items: &[T], max: usize, what: &str) {
        if items.len() > max {
            self.push(
                path,
                format!("has {} {what}; Kueue allows at most {max}", items.len()),
            );
        }
    }

    /// `value` as a mapping with only `allowed` fields; `None` (after
    /// reporting) when it is not a mapping.
    fn mapping<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Value::Object(map) = value else {
            self.push(path, "must be a mapping");
            return None;
        };
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                self.push(
                    format!("{path}.{key}"),
                    format!("unknown field `{key}`, expected one of {allowed:?}"),
                );
            }
        }
        Some(map)
    }

    /// The string at `map[field]`, if present; reports a non-string.
    fn string<'v>(
        &mut self,
        path: &str,
        map: &'v Map<String, Value>,
        field: &str,
    ) -> Option<&'v str> {
        match map.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(_) => {
                self.push(format!("{path}.{field}"), "must be a string");
                None
            }
        }
    }

    fn strings<'v>(
        &mut self,
        path: &str,
        map: &'v Map<String, Value>,
        field: &str,
    ) -> Vec<&'v str> {
        match map.get(field) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item {
                    Value::String(s) => Some(s.as_str()),
                    _ => {
                        self.push(format!("{path}.{field}[{i}]"), "must be a string");
                        None
                    }
                })
                .collect(),
            Some(_) => {
                self.push(format!("{path}.{field}"), "must be a list of strings");
                Vec::new()
            }
        }
    }

    /// ResourceFlavor `nodeTaints`: key and effect required, unique by
    /// (key, effect).
    pub fn node_taints(&mut self, path: &str, taints: &[Value]) {
        self.at_most(path, taints, 8, "taints");
        let mut seen = BTreeSet::new();
        for (i, taint) in taints.iter().enumerate() {
            let path = format!("{path}[{i}]");
            let Some(map) = self.mapping(&path, taint, &["key", "value", "effect", "timeAdded"])
            else {
                continue;
            };
            let key = self.string(&path, map, "key");
            match key {
                None => self.push(format!("{path}.key"), "is required"),
                Some(key) => {
                    if let Some(problem) = qualified_name_error(key) {
                        self.push(format!("{path}.key"), problem);
                    }
                }
            }
            if let Some(value) = self.string(&path, map, "value") {
                if let Some(problem) = label_value_error(value) {
                    self.push(format!("{path}.value"), problem);
                }
            }
            let effect = self.string(&path, map, "effect");
            match effect {
                None => self.push(format!("{path}.effect"), "is required"),
                Some(effect) if !TAINT_EFFECTS.contains(&effect) => self.push(
                    format!("{path}.effect"),
                    format!("{effect:?} is not one of {TAINT_EFFECTS:?}"),
                ),
                Some(_) => {}
            }
            if let (Some(key), Some(effect)) = (key, effect) {
                if !seen.insert((key, effect)) {
                    self.push(
                        path,
                        format!("duplicate taint {key}:{effect}; taints must be unique by key and effect"),
                    );
                }
            }
        }
    }

    /// ResourceFlavor `tolerations`, with Kueue's CEL rules.
    pub fn tolerations(&mut self, path: &str, tolerations: &[Value]) {
        self.at_most(path, tolerations, 8, "tolerations");
        for (i, toleration) in tolerations.iter().enumerate() {
            let path = format!("{path}[{i}]");
            let allowed = ["key", "operator", "value", "effect", "tolerationSeconds"];
            let Some(map) = self.mapping(&path, toleration, &allowed) else {
                continue;
            };
            let key = self.string(&path, map, "key").filter(|k| !k.is_empty());
            let operator = self.string(&path, map, "operator");
            let value = self.string(&path, map, "value").filter(|v| !v.is_empty());
            let effect = self.string(&path, map, "effect").filter(|e| !e.is_empty());
            if let Some(problem) = key.and_then(qualified_name_error) {
                self.push(format!("{path}.key"), problem);
            }
            match operator {
                None | Some("Equal") | Some("Exists") => {}
                Some(other) => self.push(
                    format!("{path}.operator"),
                    format!("{other:?} is not one of \"Equal\" (the default) or \"Exists\""),
                ),
            }
            if key.is_none() && operator != Some("Exists") {
                self.push(
                    format!("{path}.operator"),
                    "must be Exists when key is empty (which means: match every taint)",
                );
            }
            if operator == Some("Exists") && value.is_some() {
                self.push(
                    format!("{path}.value"),
                    "must be empty when operator is Exists",
                );
            }
            if let Some(problem) = value.and_then(label_value_error) {
                self.push(format!("{path}.value"), problem);
            }
            if let Some(effect) = effect {
                if !TAINT_EFFECTS.contains(&effect) {
                    self.push(
                        format!("{path}.effect"),
                        format!("{effect:?} is not one of {TAINT_EFFECTS:?}"),
                    );
                }
            }
            match map.get("tolerationSeconds") {
                None | Some(Value::Null) => {}
                Some(Value::Number(_)) => {
                    if effect != Some("NoExecute") {
                        self.push(
                            format!("{path}.effect"),
                            "must be NoExecute when tolerationSeconds is set",
                        );
                    }
                }
                Some(_) => self.push(format!("{path}.tolerationSeconds"), "must be a number"),
            }
        }
    }

    /// A Kubernetes LabelSelector (`matchLabels`, `matchExpressions`).
    pub fn label_selector(&mut self, path: &str, selector: &Value) {
        let Some(map) = self.mapping(path, selector, &["matchLabels", "matchExpressions"]) else {
            return;
        };
        match map.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                let mut strings = BTreeMap::new();
                for (key, value) in labels {
                    match value {
                        Value::String(v) => {
                            strings.insert(key.clone(), v.clone());
                        }
                        _ => self.push(
                            join(&format!("{path}.matchLabels"), key),
                            "must be a string",
                        ),
                    }
                }
                self.labels(&format!("{path}.matchLabels"), &strings);
            }
            Some(_) => self.push(format!("{path}.matchLabels"), "must be a mapping"),
        }
        let expressions = match map.get("matchExpressions") {
            None | Some(Value::Null) => return,
            Some(Value::Array(items)) => items,
            Some(_) => return self.push(format!("{path}.matchExpressions"), "must be a list"),
        };
        for (i, expression) in expressions.iter().enumerate() {
            let path = format!("{path}.matchExpressions[{i}]");
            let Some(map) = self.mapping(&path, expression, &["key", "operator", "values"]) else {
                continue;
            };
            match self.string(&path, map, "key") {
                None => self.push(format!("{path}.key"), "is required"),
                Some(key) => {
                    if let Some(problem) = qualified_name_error(key) {
                        self.push(format!("{path}.key"), problem);
                    }
                }
            }
            let values = self.strings(&path, map, "values");
            match self.string(&path, map, "operator") {
                Some("In" | "NotIn") if values.is_empty() => self.push(
                    format!("{path}.values"),
                    "must be non-empty when operator is In or NotIn",
                ),
                Some("Exists" | "DoesNotExist") if !values.is_empty() => self.push(
                    format!("{path}.values"),
                    "must be empty when operator is Exists or DoesNotExist",
                ),
                Some("In" | "NotIn" | "Exists" | "DoesNotExist") => {}
                Some(other) => self.push(
                    format!("{path}.operator"),
                    format!("{other:?} is not one of In, NotIn, Exists, DoesNotExist"),
                ),
                None => self.push(format!("{path}.operator"), "is required"),
            }
        }
    }

    /// ClusterQueue `admissionChecksStrategy`: 1 to 64 checks, each naming a
    /// check and optionally the flavors (of this queue) it applies to.
    pub fn admission_checks_strategy(
        &mut self,
        path: &str,
        strategy: &Value,
        queue_flavors: &BTreeSet<&str>,
    ) {
        let Some(map) = self.mapping(path, strategy, &["admissionChecks"]) else {
            return;
        };
        let checks = match map.get("admissionChecks") {
            Some(Value::Array(items)) => items,
            _ => {
                return self.push(
                    format!("{path}.admissionChecks"),
                    "must be a list of 1 to 64 checks",
                )
            }
        };
        let checks_path = format!("{path}.admissionChecks");
        if checks.is_empty() {
            self.push(&checks_path, "must list at least one check");
        }
        self.at_most(&checks_path, checks, 64, "admission checks");
        for (i, check) in checks.iter().enumerate() {
            let path = format!("{checks_path}[{i}]");
            let Some(map) = self.mapping(&path, check, &["name", "onFlavors"]) else {
                continue;
            };
            match self.string(&path, map, "name") {
                Some(name) if is_dns_subdomain(name) => {}
                Some(name) => self.push(
                    format!("{path}.name"),
                    format!("{name:?} is not a valid name"),
                ),
                None => self.push(format!("{path}.name"), "is required"),
            }
            let on_flavors = self.strings(&path, map, "onFlavors");
            self.at_most(&format!("{path}.onFlavors"), &on_flavors, 64, "flavors");
            for (j, flavor) in on_flavors.iter().enumerate() {
                if !queue_flavors.contains(flavor) {
                    self.push(
                        format!("{path}.onFlavors[{j}]"),
                        format!("flavor {flavor:?} is not one of this ClusterQueue's flavors {queue_flavors:?}"),
                    );
                }
            }
        }
    }
}
