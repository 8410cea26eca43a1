//! Cluster: a place that runs workloads, as its agent reports it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{FlavorName, ResourceList};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Physical capacity per flavor, as the agent measured it.
    pub capacity: BTreeMap<FlavorName, ResourceList>,
    #[serde(default)]
    pub state: ClusterState,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterState {
    /// Heartbeats arrive; new workloads may be placed.
    #[default]
    Ready,
    /// Heartbeats stopped, lease not yet expired: nothing new is placed.
    Unreachable,
    /// Lease expired; its workloads were evicted.
    Lost,
    /// Operator asked to empty it: nothing new is placed.
    Draining,
}

impl ClusterState {
    pub fn accepts_new_work(self) -> bool {
        self == ClusterState::Ready
    }
}
