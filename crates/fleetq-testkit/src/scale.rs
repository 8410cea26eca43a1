//! The workloads and clusters the scale benches fill their fleet with
//! (fleetq-ledger's `scale`, fleetq-server's `stalls`, the scheduler's
//! `cycle`), on the ClusterQueues of [`crate::kueue::scale`].

use std::collections::BTreeMap;

use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Workload};

pub const GPU: &str = "nvidia.com/gpu";

/// Workload `job-<i>` in namespace `team-<i % queues>`, LocalQueue
/// `default`: one pod asking for one GPU and 8 CPUs.
pub fn workload(i: usize, queues: usize) -> Workload {
    Workload {
        namespace: format!("team-{}", i % queues.max(1)),
        name: format!("job-{i}"),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: "default".into(),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                min_count: None,
                requests: BTreeMap::from([
                    (GPU.to_string(), Quantity::units(1)),
                    ("cpu".to_string(), Quantity::units(8)),
                ]),
                topology_request: None,
            }],
            ..WorkloadSpec::default()
        },
    }
}

/// Cluster `name`, Ready, without nodes: `gpus` GPUs and 16 CPUs per GPU
/// of `flavor`.
pub fn cluster(name: &str, flavor: &str, gpus: u64) -> Cluster {
    Cluster {
        nodes: Vec::new(),
        name: name.to_string(),
        labels: BTreeMap::new(),
        capacity: BTreeMap::from([(
            flavor.to_string(),
            BTreeMap::from([
                (GPU.to_string(), Quantity::units(gpus)),
                ("cpu".to_string(), Quantity::units(gpus * 16)),
            ]),
        )]),
        state: ClusterState::Ready,
    }
}
