//! Export: fleetq's objects as Kueue writes them, the inverse of
//! [`import_manifests`](super::import_manifests).
//!
//! `fleetq get … -o yaml|json` prints these, so that get → edit → apply
//! round-trips: what is printed imports back to the identical object (the
//! ledger then reports `unchanged`, and a Workload submitted again is the
//! existing one). Each kind's export sits next to what its import reads:
//!
//! - [`config_kinds`]: ResourceFlavor, Cohort, ClusterQueue, LocalQueue,
//!   WorkloadPriorityClass, Namespace and Configuration, whose `spec`
//!   types are already Kueue's shapes (v1beta2 spellings);
//! - [`status`]: a ClusterQueue's and a LocalQueue's `status`;
//! - [`workload`]: a Workload's `spec` and `status`, with what Kueue has
//!   no field for in fleetq's annotations ([`super::annotations`]).
//!
//! Objects print as `kueue.x-k8s.io/v1beta2`, the newest version the
//! importer reads. `status` is what fleetq knows, in Kueue's shape; the
//! importer ignores it, as the API server ignores `status` on the main
//! resource. Pure functions: the caller gathers the status.

mod config_kinds;
pub mod status;
pub mod workload;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::Object;

pub use status::{QueueStatus, UsageCell};
pub use workload::{AssignedPodSet, Phase, WorkloadFacts};

/// The apiVersion of every Kueue kind fleetq prints.
pub const KUEUE_API_VERSION: &str = "kueue.x-k8s.io/v1beta2";
/// The apiVersion of Kueue's Configuration.
pub const CONFIG_API_VERSION: &str = "config.kueue.x-k8s.io/v1beta2";

/// `object` as a Kueue manifest, without `status`.
pub fn object(object: &Object) -> Value {
    match object {
        Object::ResourceFlavor(o) => config_kinds::resource_flavor(o),
        Object::Cohort(o) => config_kinds::cohort(o),
        Object::ClusterQueue(o) => config_kinds::cluster_queue(o, None),
        Object::LocalQueue(o) => config_kinds::local_queue(o, None),
        Object::WorkloadPriorityClass(o) => config_kinds::priority_class(o),
        Object::PriorityClass(o) => config_kinds::pod_priority_class(o),
        Object::Workload(o) => workload::workload(o, None),
        Object::Configuration(o) => config_kinds::configuration(o),
        Object::Namespace(o) => config_kinds::namespace(o),
        Object::Topology(o) => config_kinds::topology(o),
    }
}

/// A ClusterQueue with its `status` (when known).
pub fn cluster_queue(cq: &crate::ClusterQueue, status: Option<&QueueStatus>) -> Value {
    config_kinds::cluster_queue(cq, status)
}

/// A LocalQueue with its `status` (when known).
pub fn local_queue(lq: &crate::LocalQueue, status: Option<&QueueStatus>) -> Value {
    config_kinds::local_queue(lq, status)
}

pub use workload::workload;

/// Several objects as one `v1 List`, as `kubectl get -o yaml` prints them
/// and as the importer reads them.
pub fn list(items: Vec<Value>) -> Value {
    let mut map = Map::new();
    map.insert("apiVersion".into(), "v1".into());
    map.insert("kind".into(), "List".into());
    map.insert("items".into(), Value::Array(items));
    Value::Object(map)
}

/// `metadata`: a name, the namespace of a namespaced kind, and labels and
/// annotations when there are any.
#[derive(Default)]
struct Metadata<'a> {
    name: &'a str,
    namespace: Option<&'a str>,
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: BTreeMap<String, String>,
    creation_timestamp: Option<String>,
}

impl Metadata<'_> {
    fn into_value(self) -> Value {
        let mut map = Map::new();
        map.insert("name".into(), self.name.into());
        if let Some(namespace) = self.namespace {
            map.insert("namespace".into(), namespace.into());
        }
        if let Some(labels) = self.labels.filter(|l| !l.is_empty()) {
            map.insert("labels".into(), value(labels));
        }
        if !self.annotations.is_empty() {
            map.insert("annotations".into(), value(&self.annotations));
        }
        // Server-set, so the importer drops it (`meta::ObjectMeta`).
        if let Some(time) = self.creation_timestamp {
            map.insert("creationTimestamp".into(), time.into());
        }
        Value::Object(map)
    }
}

/// A Kubernetes object: `apiVersion`, `kind`, `metadata` and then the
/// given top-level fields (`spec`, `status`, or a kind's own).
fn manifest(
    api_version: &str,
    kind: &str,
    metadata: Metadata<'_>,
    fields: Map<String, Value>,
) -> Value {
    let mut map = Map::new();
    map.insert("apiVersion".into(), api_version.into());
    map.insert("kind".into(), kind.into());
    map.insert("metadata".into(), metadata.into_value());
    map.extend(fields);
    Value::Object(map)
}

/// `value` as JSON. The model's types have string keys and infallible
/// `Serialize` impls, so this cannot fail; were it to, `null` makes the
/// import refuse the object loudly rather than change it silently.
fn value<T: Serialize + ?Sized>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// `{key: value}` as the top-level fields of [`manifest`].
fn fields<const N: usize>(entries: [(&str, Option<Value>); N]) -> Map<String, Value> {
    entries
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect()
}

#[cfg(test)]
mod tests;
