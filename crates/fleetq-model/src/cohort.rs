//! Cohort: a node of the cohort tree. ClusterQueues are its leaves; a cohort
//! may have a parent and may hold quota of its own that its subtree shares.

use serde::{Deserialize, Serialize};

use crate::cluster_queue::{FairSharing, ResourceGroup};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CohortSpec {
    /// Parent cohort (Kueue v1beta2 `parentName`, v1alpha1/v1beta1 `parent`).
    #[serde(
        default,
        rename = "parentName",
        alias = "parent",
        skip_serializing_if = "Option::is_none"
    )]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_groups: Vec<ResourceGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cohort {
    pub name: String,
    #[serde(default)]
    pub spec: CohortSpec,
}
