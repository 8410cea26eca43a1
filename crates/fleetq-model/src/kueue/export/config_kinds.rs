//! The configuration kinds as Kueue writes them. Their `spec` types are
//! the very types the importer decodes (`super::super::config_kinds`), so
//! serialising them gives what decoding reads back; only fleetq's own
//! defaults are left out where Kueue has no such field.

use serde_json::{Map, Value};

use super::status::QueueStatus;
use super::{fields, manifest, value, Metadata, CONFIG_API_VERSION, KUEUE_API_VERSION};
use crate::cluster_queue::Placement;
use crate::namespace::Namespace;
use crate::settings::SchedulingSettings;
use crate::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology, WorkloadPriorityClass};

fn named(name: &str) -> Metadata<'_> {
    Metadata {
        name,
        ..Metadata::default()
    }
}

pub(super) fn resource_flavor(rf: &ResourceFlavor) -> Value {
    let spec = fields([("spec", Some(value(&rf.spec)))]);
    manifest(KUEUE_API_VERSION, "ResourceFlavor", named(&rf.name), spec)
}

pub(super) fn topology(topology: &Topology) -> Value {
    let spec = fields([("spec", Some(value(&topology.spec)))]);
    manifest(KUEUE_API_VERSION, "Topology", named(&topology.name), spec)
}

pub(super) fn cohort(cohort: &Cohort) -> Value {
    let spec = fields([("spec", Some(value(&cohort.spec)))]);
    manifest(KUEUE_API_VERSION, "Cohort", named(&cohort.name), spec)
}

pub(super) fn cluster_queue(cq: &ClusterQueue, status: Option<&QueueStatus>) -> Value {
    let mut spec = value(&cq.spec);
    // `placement` is fleetq's extension; its default (every cluster,
    // BinPack) is what an absent one imports as, so a queue that never
    // set it prints as plain Kueue and applies to a real Kueue unchanged.
    if cq.spec.placement == Placement::default() {
        if let Value::Object(map) = &mut spec {
            map.remove("placement");
        }
    }
    // In Kueue's terms: no selector (fleetq's shorthand) admits every
    // namespace, `{}`; the stored nothing-selector is Kueue's nil.
    if let Value::Object(map) = &mut spec {
        match &cq.spec.namespace_selector {
            None => {
                map.insert(
                    "namespaceSelector".into(),
                    Value::Object(Default::default()),
                );
            }
            Some(s) if *s == crate::cluster_queue::nothing_selector() => {
                map.remove("namespaceSelector");
            }
            Some(_) => {}
        }
    }
    let top = fields([
        ("spec", Some(spec)),
        ("status", status.map(QueueStatus::cluster_queue_value)),
    ]);
    manifest(KUEUE_API_VERSION, "ClusterQueue", named(&cq.name), top)
}

pub(super) fn local_queue(lq: &LocalQueue, status: Option<&QueueStatus>) -> Value {
    let metadata = Metadata {
        name: &lq.name,
        namespace: Some(&lq.namespace),
        ..Metadata::default()
    };
    let top = fields([
        ("spec", Some(value(&lq.spec))),
        ("status", status.map(QueueStatus::local_queue_value)),
    ]);
    manifest(KUEUE_API_VERSION, "LocalQueue", metadata, top)
}

/// WorkloadPriorityClass has no `spec`: `value` and `description` sit at
/// the top level.
pub(super) fn priority_class(pc: &WorkloadPriorityClass) -> Value {
    let description = (!pc.description.is_empty()).then(|| Value::from(pc.description.as_str()));
    let top = fields([
        ("value", Some(Value::from(pc.value))),
        ("description", description),
    ]);
    manifest(
        KUEUE_API_VERSION,
        "WorkloadPriorityClass",
        named(&pc.name),
        top,
    )
}

/// A Kubernetes `scheduling.k8s.io/v1` PriorityClass.
pub(super) fn pod_priority_class(pc: &crate::PriorityClass) -> Value {
    let description = (!pc.description.is_empty()).then(|| Value::from(pc.description.as_str()));
    let top = fields([
        ("value", Some(Value::from(pc.value))),
        (
            "globalDefault",
            pc.global_default.then_some(Value::Bool(true)),
        ),
        ("description", description),
        (
            "preemptionPolicy",
            pc.preemption_policy.as_deref().map(Value::from),
        ),
    ]);
    manifest(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        named(&pc.name),
        top,
    )
}

/// A `v1/Namespace`: fleetq keeps only its name and labels.
pub(super) fn namespace(ns: &Namespace) -> Value {
    let metadata = Metadata {
        name: &ns.name,
        labels: Some(&ns.labels),
        ..Metadata::default()
    };
    manifest("v1", "Namespace", metadata, Map::new())
}

/// Kueue's Configuration is a file, not an API object: no `metadata`, and
/// its settings at the top level.
pub(super) fn configuration(settings: &SchedulingSettings) -> Value {
    let mut map = Map::new();
    map.insert("apiVersion".into(), CONFIG_API_VERSION.into());
    map.insert("kind".into(), "Configuration".into());
    if let Value::Object(settings) = value(settings) {
        map.extend(settings);
    }
    Value::Object(map)
}
