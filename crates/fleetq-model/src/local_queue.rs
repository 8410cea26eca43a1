//! LocalQueue: a tenant's namespaced handle on one ClusterQueue, with
//! fleetq's optional GPU-second budget.

use serde::{Deserialize, Serialize};

use crate::cluster_queue::{FairSharing, StopPolicy};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalQueueSpec {
    pub cluster_queue: String,
    #[serde(default)]
    pub stop_policy: StopPolicy,
    /// Weight for admission fair sharing between LocalQueues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    /// fleetq extension: a token bucket of GPU-seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_budget: Option<GpuBudget>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocalQueue {
    pub namespace: String,
    pub name: String,
    pub spec: LocalQueueSpec,
}

impl LocalQueue {
    /// `namespace/name`, the key workloads use to find their queue.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A token bucket of GPU-seconds: it refills at `gpuSecondsPerHour` up to
/// `burstGpuSeconds`. Admission charges count x GPUs x maximum runtime;
/// completion refunds the unused part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuBudget {
    pub gpu_seconds_per_hour: u64,
    pub burst_gpu_seconds: u64,
}
