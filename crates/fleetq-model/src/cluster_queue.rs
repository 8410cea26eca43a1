//! ClusterQueue: quota per flavor and resource, queueing and preemption
//! policy, plus fleetq's placement extension (which clusters, how).

use serde::{Deserialize, Serialize};

use crate::fair_weight::FairWeight;
use crate::{FlavorName, Quantity, ResourceName};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterQueueSpec {
    /// Cohort this queue lends to and borrows from (v1beta2 `cohortName`,
    /// v1beta1 `cohort`).
    #[serde(
        default,
        rename = "cohortName",
        alias = "cohort",
        skip_serializing_if = "Option::is_none"
    )]
    pub cohort: Option<String>,
    #[serde(default)]
    pub resource_groups: Vec<ResourceGroup>,
    #[serde(default)]
    pub queueing_strategy: QueueingStrategy,
    /// Which namespaces' LocalQueues it admits from (a Kubernetes label
    /// selector over namespace labels, crate::namespace). `{}` admits
    /// every namespace. A Kueue manifest without one admits none, as in
    /// Kueue: the importer stores [`nothing_selector`] for it. Absent here
    /// (fleetq's own shorthand, and objects applied before that) admits
    /// every namespace, so a ledger replays as it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<serde_json::Value>,
    #[serde(default)]
    pub flavor_fungibility: FlavorFungibility,
    #[serde(default)]
    pub preemption: PreemptionPolicy,
    /// Kept for round-trips; fleetq has no admission checks yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<serde_json::Value>,
    #[serde(default)]
    pub stop_policy: StopPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
    /// fleetq extension: where this queue's workloads may run.
    #[serde(default)]
    pub placement: Placement,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterQueue {
    pub name: String,
    #[serde(default)]
    pub spec: ClusterQueueSpec,
}

impl ClusterQueue {
    /// The resource group that covers `resource`, with its index.
    pub fn group_for(&self, resource: &str) -> Option<(usize, &ResourceGroup)> {
        self.spec
            .resource_groups
            .iter()
            .enumerate()
            .find(|(_, g)| g.covered_resources.iter().any(|r| r == resource))
    }

    /// Whether workloads of this queue use admission fair sharing.
    pub fn uses_admission_fair_sharing(&self) -> bool {
        matches!(
            self.spec.admission_scope,
            Some(AdmissionScope {
                admission_mode: AdmissionMode::UsageBasedAdmissionFairSharing
            })
        )
    }

    /// Fair-sharing weight; Kueue's default is 1.
    pub fn fair_sharing_weight(&self) -> FairWeight {
        self.spec
            .fair_sharing
            .as_ref()
            .and_then(|f| f.weight)
            .unwrap_or(FairWeight::ONE)
    }
}

/// Resources that are always assigned flavors together, in flavor order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceGroup {
    pub covered_resources: Vec<ResourceName>,
    pub flavors: Vec<FlavorQuotas>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlavorQuotas {
    pub name: FlavorName,
    pub resources: Vec<ResourceQuota>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceQuota {
    pub name: ResourceName,
    pub nominal_quota: Quantity,
    /// How much more than nominal this queue may borrow; `None` = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// How much of nominal others may borrow; `None` = all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueingStrategy {
    /// The head blocks everything behind it until it is admitted.
    StrictFIFO,
    /// An inadmissible head is skipped; later workloads may go first.
    #[default]
    BestEffortFIFO,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FlavorFungibility {
    #[serde(default = "default_when_can_borrow")]
    pub when_can_borrow: FungibilityPolicy,
    #[serde(default = "default_when_can_preempt")]
    pub when_can_preempt: FungibilityPolicy,
}

fn default_when_can_borrow() -> FungibilityPolicy {
    FungibilityPolicy::MayStopSearch
}

fn default_when_can_preempt() -> FungibilityPolicy {
    FungibilityPolicy::TryNextFlavor
}

/// Kueue v1beta2 spelling; v1beta1's `Borrow` and `Preempt` mean `MayStopSearch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FungibilityPolicy {
    #[serde(alias = "Borrow", alias = "Preempt")]
    MayStopSearch,
    #[default]
    TryNextFlavor,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreemptionPolicy {
    #[serde(default)]
    pub reclaim_within_cohort: ReclaimWithinCohort,
    #[serde(default)]
    pub borrow_within_cohort: BorrowWithinCohort,
    #[serde(default)]
    pub within_cluster_queue: WithinClusterQueue,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReclaimWithinCohort {
    #[default]
    Never,
    LowerPriority,
    Any,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BorrowWithinCohort {
    #[serde(default)]
    pub policy: BorrowWithinCohortPolicy,
    /// Only workloads at or below this priority may be preempted by a
    /// borrowing workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BorrowWithinCohortPolicy {
    #[default]
    Never,
    LowerPriority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WithinClusterQueue {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopPolicy {
    /// Admits normally.
    #[default]
    None,
    /// Admits nothing new; running workloads continue.
    Hold,
    /// Admits nothing new and evicts what runs.
    HoldAndDrain,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairSharing {
    /// Relative weight in fair sharing; 0 means "borrow only what nobody
    /// else wants".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<FairWeight>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionScope {
    pub admission_mode: AdmissionMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdmissionMode {
    UsageBasedAdmissionFairSharing,
    NoAdmissionFairSharing,
}

/// fleetq extension: the clusters a queue may place on and how it chooses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    /// Allowed cluster names; empty means every Ready cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// Cluster labels that must all match; empty matches every cluster.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cluster_selector: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub strategy: PlacementStrategy,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlacementStrategy {
    /// Fill the fullest cluster that fits, keeping big holes free elsewhere.
    #[default]
    BinPack,
    /// Use the emptiest cluster that fits, spreading load and blast radius.
    Spread,
}

/// Kueue's nil `namespaceSelector`, which selects no namespace, as a real
/// label selector: every namespace carries `kubernetes.io/metadata.name`
/// (crate::namespace), so none lacks it. Stored explicitly, not as an
/// absent field, so that what a ledger already holds keeps its meaning.
pub fn nothing_selector() -> serde_json::Value {
    serde_json::json!({
        "matchExpressions": [
            {"key": crate::namespace::NAME_LABEL, "operator": "DoesNotExist"}
        ]
    })
}
