//! The configuration a bench group is given: N ClusterQueues with free
//! quota (optionally in cohorts, over several flavors, with priority
//! classes), a LocalQueue each, and, for `--pending`, a parked queue with
//! no quota that holds a deep backlog.

use std::fmt::Write;

use fleetq_server::agents::simulated::SimulatedCluster;

/// Namespace of the measured workloads.
pub const NAMESPACE: &str = "bench";
/// Namespace of the `--pending` backlog (never admitted: its queue has no
/// quota), so the measured workloads can be counted apart.
pub const PARKED_NAMESPACE: &str = "bench-parked";
/// The LocalQueue of the backlog.
pub const PARKED_QUEUE: &str = "parked";
/// The flavor that holds the free quota; with `--flavors F` the first
/// F-1 flavors are small, so the scheduler fills them and falls through
/// to this one (Kueue's flavor fungibility).
const BIG_FLAVOR: &str = "h100-80gb";
/// GPUs of each small flavor per ClusterQueue.
const SMALL_FLAVOR_QUOTA: u64 = 16;
/// GPUs of the big flavor per ClusterQueue: never the limit.
const BIG_FLAVOR_QUOTA: u64 = 1_000_000;

/// What the measured workloads are spread over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    pub cluster_queues: u64,
    /// 0: no cohorts; otherwise ClusterQueue q joins cohort q % cohorts.
    pub cohorts: u64,
    pub flavors: u64,
    /// 1: no priority class; otherwise workload i names class i % priorities.
    pub priorities: u64,
    /// GPUs of the big flavor in the simulated cluster; `None`: room for
    /// every workload at once.
    pub gpus: Option<u64>,
    /// Nodes per flavor the simulated cluster reports (0: none).
    pub nodes: u64,
}

impl Mix {
    /// Checks the counts, naming the flag at fault.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=10_000).contains(&self.cluster_queues) {
            return Err("--cluster-queues: must be 1 to 10000".into());
        }
        if self.cohorts > self.cluster_queues {
            return Err(format!(
                "--cohorts: {} cohorts for {} ClusterQueues; at most one per ClusterQueue",
                self.cohorts, self.cluster_queues
            ));
        }
        if !(1..=16).contains(&self.flavors) {
            return Err("--flavors: must be 1 to 16".into());
        }
        if !(1..=100).contains(&self.priorities) {
            return Err("--priorities: must be 1 to 100".into());
        }
        if self.gpus == Some(0) {
            return Err("--gpus: must be at least 1".into());
        }
        if self.nodes > 10_000 {
            return Err("--nodes: must be 0 to 10000".into());
        }
        Ok(())
    }

    fn flavor_names(&self) -> Vec<String> {
        let mut names: Vec<String> = (1..self.flavors)
            .map(|k| format!("bench-small-{k}"))
            .collect();
        names.push(BIG_FLAVOR.to_string());
        names
    }

    /// The Kueue objects to apply, as one multi-document YAML; `parked`:
    /// with the `--pending` queue; `held`: the measured ClusterQueues
    /// admit nothing (`stopPolicy: Hold`) until applied again without it.
    pub fn yaml(&self, parked: bool, held: bool) -> String {
        let mut y = String::new();
        let mut doc = |body: String| {
            if !y.is_empty() {
                y.push_str("---\n");
            }
            y.push_str("apiVersion: kueue.x-k8s.io/v1beta2\n");
            y.push_str(&body);
        };
        for flavor in self.flavor_names() {
            doc(format!(
                "kind: ResourceFlavor\nmetadata:\n  name: {flavor}\n"
            ));
        }
        for c in 0..self.cohorts {
            doc(format!(
                "kind: Cohort\nmetadata:\n  name: bench-cohort-{c}\n"
            ));
        }
        if self.priorities > 1 {
            for p in 0..self.priorities {
                doc(format!(
                    "kind: WorkloadPriorityClass\nmetadata:\n  name: bench-p{p}\nvalue: {}\n",
                    p * 10
                ));
            }
        }
        for q in 0..self.cluster_queues {
            let cohort = match self.cohorts {
                0 => String::new(),
                n => format!("  cohortName: bench-cohort-{}\n", q % n),
            };
            let stop = if held { "  stopPolicy: Hold\n" } else { "" };
            doc(format!(
                "kind: ClusterQueue\nmetadata:\n  name: bench-{q}\nspec:\n  namespaceSelector: {{}}\n{cohort}{stop}{}",
                self.resource_groups(false)
            ));
            doc(format!(
                "kind: LocalQueue\nmetadata:\n  namespace: {NAMESPACE}\n  name: q-{q}\nspec:\n  clusterQueue: bench-{q}\n"
            ));
        }
        if parked {
            doc(format!(
                "kind: ClusterQueue\nmetadata:\n  name: bench-parked\nspec:\n  namespaceSelector: {{}}\n{}",
                self.resource_groups(true)
            ));
            doc(format!(
                "kind: LocalQueue\nmetadata:\n  namespace: {PARKED_NAMESPACE}\n  name: {PARKED_QUEUE}\nspec:\n  clusterQueue: bench-parked\n"
            ));
        }
        y
    }

    /// One resource group over every flavor; `empty`: no quota at all.
    fn resource_groups(&self, empty: bool) -> String {
        let mut s = String::from(
            "  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n",
        );
        for flavor in self.flavor_names() {
            let quota = match (empty, flavor == BIG_FLAVOR) {
                (true, _) => 0,
                (false, true) => BIG_FLAVOR_QUOTA,
                (false, false) => SMALL_FLAVOR_QUOTA,
            };
            let _ = write!(
                s,
                "    - name: {flavor}\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: {quota}\n"
            );
        }
        s
    }

    /// The simulated cluster: room for every flavor's quota, or `gpus` of
    /// the big flavor.
    pub fn cluster_spec(&self) -> String {
        let small = SMALL_FLAVOR_QUOTA * self.cluster_queues;
        let items: Vec<String> = self
            .flavor_names()
            .into_iter()
            .map(|f| {
                let n = if f == BIG_FLAVOR {
                    self.gpus.unwrap_or(100_000_000)
                } else {
                    small
                };
                format!("{f}={n}")
            })
            .collect();
        format!("bench-1:{}", items.join(","))
    }

    /// The nodes of the simulated `cluster`: `nodes` per flavor, each with
    /// an even share of the flavor's capacity (the first ones one more
    /// where it does not divide), named `bench-FLAVOR-I`.
    pub fn nodes_of(&self, cluster: &SimulatedCluster) -> Vec<fleetq_model::Node> {
        let mut out = Vec::new();
        for (flavor, resources) in &cluster.capacity {
            for i in 0..self.nodes {
                let name = format!("bench-{flavor}-{i}");
                let allocatable = resources
                    .iter()
                    .map(|(r, q)| {
                        let units = q.milli() / 1000;
                        let share = units / self.nodes + u64::from(i < units % self.nodes);
                        (r.clone(), fleetq_model::Quantity::units(share))
                    })
                    .collect();
                out.push(fleetq_model::Node {
                    labels: std::collections::BTreeMap::from([(
                        fleetq_model::topology::HOSTNAME_LABEL.to_string(),
                        name.clone(),
                    )]),
                    name,
                    flavor: flavor.clone(),
                    allocatable,
                    unschedulable: false,
                });
            }
        }
        out
    }

    /// The priority class workload `i` names, if any.
    pub fn priority_class(&self, i: u64) -> Option<String> {
        (self.priorities > 1).then(|| format!("bench-p{}", i % self.priorities))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(cluster_queues: u64, cohorts: u64, flavors: u64, priorities: u64) -> Mix {
        Mix {
            cluster_queues,
            cohorts,
            flavors,
            priorities,
            gpus: None,
            nodes: 0,
        }
    }

    #[test]
    fn the_generated_objects_are_valid_kueue_objects() {
        for m in [mix(10, 0, 1, 1), mix(12, 3, 3, 4)] {
            for (parked, held) in [(false, false), (true, false), (false, true)] {
                let objects = fleetq_model::kueue::import_manifests(&m.yaml(parked, held))
                    .unwrap_or_else(|e| panic!("{m:?} parked={parked}: {e:?}"));
                let expected = m.flavors
                    + m.cohorts
                    + if m.priorities > 1 { m.priorities } else { 0 }
                    + 2 * m.cluster_queues
                    + if parked { 2 } else { 0 };
                assert_eq!(objects.len() as u64, expected, "{m:?} parked={parked}");
            }
        }
    }

    #[test]
    fn held_queues_admit_nothing_until_released() {
        use fleetq_model::cluster_queue::StopPolicy;
        let m = mix(3, 0, 2, 1);
        for (held, policy) in [(true, StopPolicy::Hold), (false, StopPolicy::None)] {
            let objects = fleetq_model::kueue::import_manifests(&m.yaml(false, held)).unwrap();
            let policies: Vec<StopPolicy> = objects
                .iter()
                .filter_map(|d| match &d.object {
                    fleetq_model::config::Object::ClusterQueue(cq) => Some(cq.spec.stop_policy),
                    _ => None,
                })
                .collect();
            assert_eq!(policies, vec![policy; 3], "held={held}");
        }
    }

    /// `--nodes N`: every flavor's capacity split over N nodes, nothing
    /// lost where it does not divide.
    #[test]
    fn nodes_split_each_flavors_capacity() {
        let m = Mix {
            nodes: 3,
            gpus: Some(10),
            ..mix(1, 0, 2, 1)
        };
        let cluster = SimulatedCluster::parse(&m.cluster_spec()).unwrap();
        let nodes = m.nodes_of(&cluster);
        assert_eq!(nodes.len(), 6);
        for (flavor, resources) in &cluster.capacity {
            let total: u64 = nodes
                .iter()
                .filter(|n| &n.flavor == flavor)
                .map(|n| n.allocatable[fleetq_model::resources::GPU].milli())
                .sum();
            assert_eq!(total, resources[fleetq_model::resources::GPU].milli());
        }
        let big: Vec<u64> = nodes
            .iter()
            .filter(|n| n.flavor == BIG_FLAVOR)
            .map(|n| n.allocatable[fleetq_model::resources::GPU].milli() / 1000)
            .collect();
        assert_eq!(big, [4, 3, 3]);
        assert!(Mix { nodes: 10_001, ..m }
            .validate()
            .unwrap_err()
            .contains("--nodes"));
    }

    #[test]
    fn the_simulated_cluster_offers_every_flavor() {
        let spec = mix(10, 0, 3, 1).cluster_spec();
        let cluster = fleetq_server::agents::simulated::SimulatedCluster::parse(&spec).unwrap();
        assert_eq!(cluster.capacity.len(), 3);
    }

    #[test]
    fn bad_counts_name_their_flag() {
        assert!(mix(0, 0, 1, 1)
            .validate()
            .unwrap_err()
            .contains("--cluster-queues"));
        assert!(mix(2, 3, 1, 1)
            .validate()
            .unwrap_err()
            .contains("--cohorts"));
        assert!(mix(2, 0, 0, 1)
            .validate()
            .unwrap_err()
            .contains("--flavors"));
        assert!(mix(2, 0, 1, 0)
            .validate()
            .unwrap_err()
            .contains("--priorities"));
        assert!(Mix {
            gpus: Some(0),
            ..mix(2, 0, 1, 1)
        }
        .validate()
        .unwrap_err()
        .contains("--gpus"));
        assert!(mix(2, 2, 16, 100).validate().is_ok());
    }
}
