//! Where and how an admitted workload runs: what the scheduler decides,
//! the ledger records and an agent executes. Model types, so that an
//! agent needs no scheduler to read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{FlavorName, FlavorUsage, ResourceName};

/// A workload's id in the ledger, assigned at submission.
pub type WorkloadId = u64;

/// Where and how a workload runs: one cluster, a flavor per resource, and
/// the quota it is charged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub cluster: String,
    pub pod_sets: Vec<PodSetAssignment>,
    /// Total charge per (flavor, resource), all pod sets together.
    #[serde(with = "crate::resources::flavor_usage_serde")]
    pub usage: FlavorUsage,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodSetAssignment {
    pub name: String,
    /// Pods admitted; below the requested count under partial admission.
    pub count: u32,
    pub flavors: BTreeMap<ResourceName, FlavorName>,
    /// Where its pods run, on a cluster that reports its nodes: pods per
    /// node, by node name, adding up to `count`. Empty on a cluster
    /// reported as totals (absent from the stored JSON, and the hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodePods>,
}

/// Pods of one pod set placed on one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePods {
    pub node: String,
    pub count: u32,
}
