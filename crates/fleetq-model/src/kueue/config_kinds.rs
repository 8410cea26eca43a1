//! The configuration kinds: ResourceFlavor, Cohort, ClusterQueue,
//! LocalQueue and WorkloadPriorityClass. Their `spec` types are fleetq's
//! model types, which are Kueue's spec shapes (v1beta1 and v1beta2
//! spellings both accepted) plus fleetq's extension fields.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;

use super::meta::{decode, Location, ObjectMeta};
use super::{Converted, DEFAULT_NAMESPACE};
use crate::cluster_queue::ClusterQueueSpec;
use crate::cohort::CohortSpec;
use crate::config::Object;
use crate::flavor::ResourceFlavorSpec;
use crate::local_queue::LocalQueueSpec;
use crate::{ClusterQueue, Cohort, FieldError, LocalQueue, ResourceFlavor, WorkloadPriorityClass};

/// A Kueue object with a `spec` of type `S`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest<S> {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default = "Option::default")]
    spec: Option<S>,
    /// Written by the controller, never by the user.
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

/// WorkloadPriorityClass has no `spec`: `value` and `description` sit at
/// the top level.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriorityClassManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    value: i32,
    #[serde(default)]
    description: String,
}

fn manifest<S: DeserializeOwned>(
    value: Value,
    at: &Location,
) -> Result<(String, ObjectMeta, Option<S>), Vec<FieldError>> {
    let manifest: Manifest<S> = decode(value, at).map_err(|e| vec![e])?;
    let name = fixed_name(&manifest.metadata, at)?;
    Ok((name, manifest.metadata, manifest.spec))
}

/// Configuration objects are referred to by name, so they need a fixed one.
fn fixed_name(metadata: &ObjectMeta, at: &Location) -> Result<String, Vec<FieldError>> {
    match (&metadata.name, &metadata.generate_name) {
        (Some(name), _) => Ok(name.clone()),
        (None, Some(_)) => Err(vec![at.error(
            "metadata.name",
            "is required: generateName is only for Jobs and Workloads, because queues and flavors are referred to by name",
        )]),
        (None, None) => Err(vec![at.error("metadata.name", "is required")]),
    }
}

pub(super) fn resource_flavor(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, _, spec) = manifest::<ResourceFlavorSpec>(value, at)?;
    Ok(Converted::plain(Object::ResourceFlavor(ResourceFlavor {
        name,
        spec: spec.unwrap_or_default(),
    })))
}

pub(super) fn cohort(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, _, spec) = manifest::<CohortSpec>(value, at)?;
    Ok(Converted::plain(Object::Cohort(Cohort {
        name,
        spec: spec.unwrap_or_default(),
    })))
}

pub(super) fn cluster_queue(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, _, spec) = manifest::<ClusterQueueSpec>(value, at)?;
    Ok(Converted::plain(Object::ClusterQueue(ClusterQueue {
        name,
        spec: spec.unwrap_or_default(),
    })))
}

pub(super) fn local_queue(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, metadata, spec) = manifest::<LocalQueueSpec>(value, at)?;
    let Some(spec) = spec else {
        return Err(vec![at.error(
            "spec.clusterQueue",
            "is required: a LocalQueue must point at a ClusterQueue",
        )]);
    };
    Ok(Converted::plain(Object::LocalQueue(LocalQueue {
        namespace: metadata
            .namespace
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
        name,
        spec,
    })))
}

pub(super) fn priority_class(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let manifest: PriorityClassManifest = decode(value, at).map_err(|e| vec![e])?;
    let name = fixed_name(&manifest.metadata, at)?;
    Ok(Converted::plain(Object::WorkloadPriorityClass(
        WorkloadPriorityClass {
            name,
            value: manifest.value,
            description: manifest.description,
        },
    )))
}
