//! ResourceFlavor: a class of capacity (`h100-80gb`, `mig-1g.10gb`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A ResourceFlavor as Kueue defines it. fleetq keeps the node-level fields
/// so manifests round-trip; placement uses cluster inventory, not node labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceFlavorSpec {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_taints: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceFlavor {
    pub name: String,
    #[serde(default)]
    pub spec: ResourceFlavorSpec,
}
