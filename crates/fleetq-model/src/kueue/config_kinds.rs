//! The configuration kinds: ResourceFlavor, Cohort, ClusterQueue,
//! LocalQueue and WorkloadPriorityClass. Their `spec` types are fleetq's
//! model types, which are Kueue's spec shapes (v1beta1 and v1beta2
//! spellings both accepted) plus fleetq's extension fields.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::Value;

use super::meta::{decode, Location, ObjectMeta};
use super::{Converted, DEFAULT_NAMESPACE};
use crate::cluster_queue::{ClusterQueueSpec, ResourceGroup};
use crate::cohort::CohortSpec;
use crate::config::Object;
use crate::flavor::ResourceFlavorSpec;
use crate::local_queue::LocalQueueSpec;
use crate::resources::whole_device_problem;
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

pub(super) fn manifest<S: DeserializeOwned>(
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
    let spec = spec.unwrap_or_default();
    whole_devices(&spec.resource_groups, at)?;
    Ok(Converted::plain(Object::Cohort(Cohort { name, spec })))
}

pub(super) fn cluster_queue(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let (name, _, spec) = manifest::<ClusterQueueSpec>(value, at)?;
    let mut spec: ClusterQueueSpec = spec.unwrap_or_default();
    whole_devices(&spec.resource_groups, at)?;
    // Kueue: a nil namespaceSelector admits no namespace; `{}` admits
    // every one, which fleetq stores as none (what its shorthand means),
    // so export and import give back the same object.
    spec.namespace_selector = match spec.namespace_selector.take() {
        None => Some(crate::cluster_queue::nothing_selector()),
        Some(Value::Object(map)) if map.is_empty() => None,
        other => other,
    };
    Ok(Converted::plain(Object::ClusterQueue(ClusterQueue {
        name,
        spec,
    })))
}

/// Quotas of extended resources (GPUs, MIG slices) are whole numbers, as
/// the devices are: `nominalQuota: 1.5` of `nvidia.com/gpu` would let a
/// queue hold half a device. Checked on import, at the API, and not in
/// `Config::validate`, which apply() runs: a ledger that accepted one
/// before the check existed replays the same.
fn whole_devices(groups: &[ResourceGroup], at: &Location) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (f, flavor) in group.flavors.iter().enumerate() {
            for (r, quota) in flavor.resources.iter().enumerate() {
                let path = format!("spec.resourceGroups[{g}].flavors[{f}].resources[{r}]");
                let fields = [
                    ("nominalQuota", Some(quota.nominal_quota)),
                    ("borrowingLimit", quota.borrowing_limit),
                    ("lendingLimit", quota.lending_limit),
                ];
                for (field, amount) in fields {
                    let problem =
                        amount.and_then(|amount| whole_device_problem(&quota.name, amount));
                    if let Some(problem) = problem {
                        errors.push(at.error(format!("{path}.{field}"), problem));
                    }
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
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

/// Kubernetes' `scheduling.k8s.io/v1` PriorityClass.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PodPriorityClassManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    value: i32,
    #[serde(default)]
    global_default: bool,
    #[serde(default)]
    description: String,
    #[serde(default)]
    preemption_policy: Option<String>,
}

pub(super) fn pod_priority_class(
    value: Value,
    at: &Location,
) -> Result<Converted, Vec<FieldError>> {
    let manifest: PodPriorityClassManifest = decode(value, at).map_err(|e| vec![e])?;
    let name = fixed_name(&manifest.metadata, at)?;
    Ok(Converted::plain(Object::PriorityClass(
        crate::PriorityClass {
            name,
            value: manifest.value,
            global_default: manifest.global_default,
            description: manifest.description,
            preemption_policy: manifest.preemption_policy,
        },
    )))
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

/// Kueue's controller Configuration: fleetq reads `fairSharing` and
/// `admissionFairSharing` and
/// accepts (and ignores) the sections that configure Kueue's own
/// controller, so a team's file imports unchanged. Any other field is
/// refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigurationManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    fair_sharing: Option<crate::settings::FairSharingSettings>,
    // Kueue's controller settings, meaningless to fleetq.
    #[serde(default, rename = "namespace")]
    _namespace: IgnoredAny,
    #[serde(default, rename = "manageJobsWithoutQueueName")]
    _manage_jobs_without_queue_name: IgnoredAny,
    #[serde(default, rename = "managedJobsNamespaceSelector")]
    _managed_jobs_namespace_selector: IgnoredAny,
    #[serde(default, rename = "internalCertManagement")]
    _internal_cert_management: IgnoredAny,
    #[serde(default, rename = "controller")]
    _controller: IgnoredAny,
    #[serde(default, rename = "health")]
    _health: IgnoredAny,
    #[serde(default, rename = "metrics")]
    _metrics: IgnoredAny,
    #[serde(default, rename = "webhook")]
    _webhook: IgnoredAny,
    #[serde(default, rename = "leaderElection")]
    _leader_election: IgnoredAny,
    #[serde(default, rename = "clientConnection")]
    _client_connection: IgnoredAny,
    #[serde(default, rename = "integrations")]
    _integrations: IgnoredAny,
    #[serde(default, rename = "queueVisibility")]
    _queue_visibility: IgnoredAny,
    #[serde(default, rename = "multiKueue")]
    _multi_kueue: IgnoredAny,
    #[serde(default, rename = "resources")]
    _resources: IgnoredAny,
    #[serde(default, rename = "featureGates")]
    _feature_gates: IgnoredAny,
    #[serde(default, rename = "waitForPodsReady")]
    _wait_for_pods_ready: IgnoredAny,
    #[serde(default, rename = "objectRetentionPolicies")]
    _object_retention_policies: IgnoredAny,
    #[serde(default)]
    admission_fair_sharing: Option<crate::settings::AdmissionFairSharingSettings>,
    #[serde(default, rename = "pprofBindAddress")]
    _pprof_bind_address: IgnoredAny,
    #[serde(default, rename = "tls")]
    _tls: IgnoredAny,
    #[serde(default, rename = "visibilityServer")]
    _visibility_server: IgnoredAny,
}

pub(super) fn configuration(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let manifest: ConfigurationManifest = decode(value, at).map_err(|e| vec![e])?;
    let settings = crate::settings::SchedulingSettings {
        fair_sharing: manifest.fair_sharing,
        admission_fair_sharing: manifest.admission_fair_sharing,
    };
    let problems: Vec<FieldError> = settings
        .problems()
        .into_iter()
        .chain(settings.precision_problems())
        .map(|(path, message)| at.error(&path, message))
        .collect();
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Converted::plain(Object::Configuration(settings)))
}

/// A `v1/Namespace`: fleetq keeps its name and labels (what namespace
/// selectors match); its spec and status belong to Kubernetes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespaceManifest {
    #[serde(rename = "apiVersion")]
    _api_version: IgnoredAny,
    #[serde(rename = "kind")]
    _kind: IgnoredAny,
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default, rename = "spec")]
    _spec: IgnoredAny,
    #[serde(default, rename = "status")]
    _status: IgnoredAny,
}

pub(super) fn namespace(value: Value, at: &Location) -> Result<Converted, Vec<FieldError>> {
    let manifest: NamespaceManifest = decode(value, at).map_err(|e| vec![e])?;
    let name = fixed_name(&manifest.metadata, at)?;
    Ok(Converted::plain(Object::Namespace(
        crate::namespace::Namespace {
            name,
            labels: manifest.metadata.labels,
        },
    )))
}
