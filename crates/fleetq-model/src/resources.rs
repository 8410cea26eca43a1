//! Resource names, resource lists and the (flavor, resource) pairs that
//! quota is counted in.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Quantity;

/// Whole GPUs (`nvidia.com/gpu`), counted in devices.
pub const GPU: &str = "nvidia.com/gpu";
/// Prefix of MIG slice resources: `nvidia.com/mig-1g.10gb`.
pub const MIG_PREFIX: &str = "nvidia.com/mig-";
/// GPU memory in GiB, a counter across devices.
pub const GPU_MEMORY: &str = "gpu.memory";

/// A resource name such as `cpu`, `memory`, `nvidia.com/gpu`.
pub type ResourceName = String;
/// A ResourceFlavor name such as `h100-80gb`.
pub type FlavorName = String;

/// Amounts per resource, ordered by name so hashing and printing are stable.
pub type ResourceList = BTreeMap<ResourceName, Quantity>;

/// Whether `name` is a MIG slice resource.
pub fn is_mig(name: &str) -> bool {
    name.starts_with(MIG_PREFIX)
}

/// Whether `name` is a Kubernetes extended resource: a name with a domain
/// prefix (`nvidia.com/gpu`, `amd.com/gpu`, `nvidia.com/mig-1g.10gb`)
/// outside `kubernetes.io`, as Kubernetes' `IsExtendedResourceName` says.
/// `cpu`, `memory`, `ephemeral-storage`, `hugepages-*` (no prefix) and
/// `*kubernetes.io/*` are native; `requests.*` names quota, not a resource.
pub fn is_extended_resource(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Why `amount` of `name` is refused, if it is: an extended resource is a
/// count of devices, whole in Kubernetes (a pod cannot hold 1.5 GPUs), so
/// requests and quotas of one must be whole numbers too.
pub fn whole_device_problem(name: &str, amount: Quantity) -> Option<String> {
    (is_extended_resource(name) && amount.milli() % 1000 != 0).then(|| {
        format!(
            "{name}: {amount} is not a whole number; extended resources are counted in whole units, as in Kubernetes"
        )
    })
}

/// One cell of a quota table: a resource in a flavor.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FlavorResource {
    pub flavor: FlavorName,
    pub resource: ResourceName,
}

impl FlavorResource {
    pub fn new(flavor: impl Into<String>, resource: impl Into<String>) -> Self {
        FlavorResource {
            flavor: flavor.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for FlavorResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in flavor {}", self.resource, self.flavor)
    }
}

/// Usage or quota per (flavor, resource).
pub type FlavorUsage = BTreeMap<FlavorResource, Quantity>;

/// Multiplies every amount of `per_pod` by `count`; `None` on overflow.
pub fn scale(per_pod: &ResourceList, count: u64) -> Option<ResourceList> {
    per_pod
        .iter()
        .map(|(name, q)| q.checked_mul(count).map(|q| (name.clone(), q)))
        .collect()
}

/// Serialises a [`FlavorUsage`] as a list of `{flavor, resource, quantity}`
/// entries: JSON object keys must be strings, and a (flavor, resource)
/// pair is not one. Use with `#[serde(with = "flavor_usage_serde")]`.
pub mod flavor_usage_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{FlavorName, FlavorUsage, ResourceName};
    use crate::Quantity;

    #[derive(Serialize, Deserialize)]
    struct Entry {
        flavor: FlavorName,
        resource: ResourceName,
        quantity: Quantity,
    }

    pub fn serialize<S: Serializer>(usage: &FlavorUsage, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(usage.iter().map(|(fr, q)| Entry {
            flavor: fr.flavor.clone(),
            resource: fr.resource.clone(),
            quantity: *q,
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FlavorUsage, D::Error> {
        let entries = Vec::<Entry>::deserialize(d)?;
        let mut usage = FlavorUsage::new();
        for e in entries {
            let key = super::FlavorResource {
                flavor: e.flavor,
                resource: e.resource,
            };
            if usage.insert(key, e.quantity).is_some() {
                return Err(serde::de::Error::custom(
                    "a flavor/resource pair is listed twice",
                ));
            }
        }
        Ok(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_resources_are_the_prefixed_ones_outside_kubernetes_io() {
        for extended in [
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.10gb",
            "amd.com/gpu",
            "example.com/foo",
        ] {
            assert!(is_extended_resource(extended), "{extended}");
        }
        for native in [
            "cpu",
            "memory",
            "ephemeral-storage",
            "hugepages-2Mi",
            "pods",
            GPU_MEMORY,
            "kubernetes.io/batch-cpu",
            "requests.nvidia.com/gpu",
        ] {
            assert!(!is_extended_resource(native), "{native}");
        }
    }

    #[test]
    fn fractions_of_devices_are_refused_and_of_cpu_are_not() {
        let q = |s: &str| s.parse::<Quantity>().unwrap();
        assert_eq!(
            whole_device_problem("nvidia.com/gpu", q("1.5")).as_deref(),
            Some("nvidia.com/gpu: 1500m is not a whole number; extended resources are counted in whole units, as in Kubernetes")
        );
        assert!(whole_device_problem("nvidia.com/mig-1g.10gb", q("500m")).is_some());
        assert_eq!(whole_device_problem("nvidia.com/gpu", q("2")), None);
        assert_eq!(whole_device_problem("nvidia.com/gpu", q("2000m")), None);
        assert_eq!(whole_device_problem("nvidia.com/gpu", Quantity::ZERO), None);
        assert_eq!(whole_device_problem("cpu", q("1.5")), None);
        assert_eq!(whole_device_problem("memory", q("1.5Gi")), None);
    }
}
