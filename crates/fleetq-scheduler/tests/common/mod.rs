//! A small harness for scenario tests: a configuration in YAML, clusters,
//! workloads written as one line each, and cycles applied the way the
//! ledger applies them (re-validated, invariants checked after each).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetq_model::config::Object;
use fleetq_model::time::parse_duration;
use fleetq_model::topology::{PodSetTopologyRequest, TopologyPlacement, TopologySlice};
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{
    Cluster, ClusterState, Config, FieldError, FlavorResource, Node, Quantity, Timestamp, Workload,
};
use fleetq_scheduler::{
    schedule, Decisions, PendingReason, PendingWorkload, PreemptionReason, ReasonKind,
    SchedulerConfig, Snapshot, SnapshotError,
};

pub struct Sim {
    pub snap: Snapshot,
    pub now: Timestamp,
    pub cfg: SchedulerConfig,
    ids: BTreeMap<String, u64>,
    names: BTreeMap<u64, String>,
    next_id: u64,
    pub last: Decisions,
    clusters: Vec<Cluster>,
}

/// Parses `[{kind: ..., name: ..., spec: ...}, ...]` into a validated Config.
pub fn config(yaml: &str) -> Config {
    let objects: Vec<Object> = serde_norway::from_str(yaml).expect("scenario YAML parses");
    let mut config = Config::default();
    for o in objects {
        config.upsert(o).expect("configuration objects only");
    }
    let errors = config.validate();
    assert!(errors.is_empty(), "scenario config invalid: {errors:?}");
    config
}

/// `east: h100-80gb/nvidia.com/gpu=8, mig/nvidia.com/mig-1g.10gb=7`
pub fn cluster(line: &str) -> Cluster {
    let (name, rest) = line.split_once(':').expect("name: cells");
    let mut capacity: BTreeMap<String, BTreeMap<String, Quantity>> = BTreeMap::new();
    for cell in rest.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let (fr, q) = cell.split_once('=').expect("flavor/resource=qty");
        let (flavor, resource) = fr.split_once('/').expect("flavor/resource");
        capacity
            .entry(flavor.to_string())
            .or_default()
            .insert(resource.to_string(), q.parse().expect("quantity"));
    }
    Cluster {
        nodes: Vec::new(),
        name: name.trim().to_string(),
        labels: BTreeMap::new(),
        capacity,
        state: ClusterState::Ready,
    }
}

/// `a:rack=r1:h100/nvidia.com/gpu=4`: node `a`, its labels (the hostname
/// label added), its flavor and allocatable devices.
pub fn node(line: &str) -> Node {
    let mut parts = line.split(':');
    let name = parts.next().expect("node name").to_string();
    let mut labels: BTreeMap<String, String> = parts
        .next()
        .expect("labels")
        .split(',')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').expect("label=value");
            (k.to_string(), v.to_string())
        })
        .collect();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    let mut flavor = String::new();
    let mut allocatable = BTreeMap::new();
    for cell in parts.next().expect("devices").split(',') {
        let (fr, q) = cell.split_once('=').expect("flavor/resource=qty");
        let (f, r) = fr.split_once('/').expect("flavor/resource");
        flavor = f.to_string();
        allocatable.insert(r.to_string(), q.parse().expect("quantity"));
    }
    Node {
        name,
        labels,
        flavor,
        allocatable,
        unschedulable: false,
    }
}

/// One workload written as `name key=value ...`:
/// `q=` LocalQueue (namespace `ns`), `gpu=` per pod, `cpu=`, `mig=` (1g.10gb
/// slices), `n=` pods, `min=` minCount, `pc=` priority class, `req=` and
/// `pref=` a topology level, `slice=LEVEL/SIZE` slices of SIZE pods,
/// `maxrun=`, `minrun=` (minRuntimeBeforePreemption), `grace=`.
pub fn workload(line: &str) -> Workload {
    let mut parts = line.split_whitespace();
    let name = parts.next().expect("workload name").to_string();
    let mut spec = WorkloadSpec::default();
    let mut pod = PodSet {
        name: "main".into(),
        count: 1,
        ..PodSet::default()
    };
    for kv in parts {
        let (k, v) = kv.split_once('=').expect("key=value");
        match k {
            "q" => spec.queue_name = v.into(),
            "gpu" => {
                pod.requests
                    .insert("nvidia.com/gpu".into(), v.parse().unwrap());
            }
            "cpu" => {
                pod.requests.insert("cpu".into(), v.parse().unwrap());
            }
            "mig" => {
                pod.requests
                    .insert("nvidia.com/mig-1g.10gb".into(), v.parse().unwrap());
            }
            "n" => pod.count = v.parse().unwrap(),
            "min" => pod.min_count = Some(v.parse().unwrap()),
            "pc" => spec.priority_class_name = Some(v.into()),
            "maxrun" => spec.maximum_execution_time = Some(parse_duration(v).unwrap()),
            "minrun" => spec.min_runtime_before_preemption = Some(parse_duration(v).unwrap()),
            "grace" => spec.preemption_grace_period = Some(parse_duration(v).unwrap()),
            "req" | "pref" => {
                let level = v.to_string();
                pod.topology_request
                    .get_or_insert_with(PodSetTopologyRequest::default)
                    .placement = Some(if k == "req" {
                    TopologyPlacement::Required(level)
                } else {
                    TopologyPlacement::Preferred(level)
                });
            }
            // `slice=LEVEL/SIZE`: slices of SIZE pods, each in one domain.
            "slice" => {
                let (level, size) = v.split_once('/').expect("slice=LEVEL/SIZE");
                pod.topology_request
                    .get_or_insert_with(PodSetTopologyRequest::default)
                    .slice = Some(TopologySlice {
                    level: level.to_string(),
                    size: size.parse().expect("slice size"),
                });
            }
            other => panic!("unknown key {other}"),
        }
    }
    spec.pod_sets.push(pod);
    Workload {
        namespace: "ns".into(),
        name,
        labels: BTreeMap::new(),
        spec,
    }
}

impl Sim {
    pub fn new(yaml: &str, clusters: &[&str]) -> Sim {
        let clusters: Vec<Cluster> = clusters.iter().map(|c| cluster(c)).collect();
        Sim {
            snap: Snapshot::new(config(yaml), &clusters),
            now: Timestamp::from_secs(1_000),
            cfg: SchedulerConfig::default(),
            ids: BTreeMap::new(),
            names: BTreeMap::new(),
            next_id: 1,
            last: Decisions::default(),
            clusters,
        }
    }

    /// Gives cluster `name` these nodes, `node:label=value,...:flavor/resource=qty`
    /// each (labels and resources comma-separated).
    pub fn with_nodes(mut self, name: &str, nodes: &[&str]) -> Sim {
        let cluster = self
            .clusters
            .iter_mut()
            .find(|c| c.name == name)
            .expect("cluster exists");
        cluster.nodes = nodes.iter().map(|line| node(line)).collect();
        assert!(
            cluster.node_problems().is_empty(),
            "{:?}",
            cluster.node_problems()
        );
        let clusters = self.clusters.clone();
        self.snap.set_clusters(&clusters);
        self
    }

    pub fn with_config(mut self, cfg: SchedulerConfig) -> Sim {
        self.cfg = cfg;
        self
    }

    /// Submits one workload written as `name key=value ...` (see
    /// [`workload`] for the keys). Panics if the configuration refuses it.
    pub fn submit(&mut self, line: &str) -> u64 {
        self.try_submit(line)
            .unwrap_or_else(|e| panic!("{line:?} does not bind: {e:?}"))
    }

    /// [`Sim::submit`] in `namespace` instead of `ns`.
    pub fn submit_in(&mut self, namespace: &str, line: &str) -> u64 {
        let mut workload = workload(line);
        workload.namespace = namespace.to_string();
        let binding = self
            .snap
            .config()
            .bind_workload(&workload)
            .unwrap_or_else(|e| panic!("{line:?} does not bind: {e:?}"));
        self.enqueue(
            workload,
            binding.local_queue,
            binding.cluster_queue,
            binding.priority,
        )
    }

    /// Submits one workload as the ledger would: bound to its LocalQueue,
    /// ClusterQueue and priority by [`Config::bind_workload`], which may
    /// refuse it.
    pub fn try_submit(&mut self, line: &str) -> Result<u64, Vec<FieldError>> {
        let workload = workload(line);
        let binding = self.snap.config().bind_workload(&workload)?;
        Ok(self.enqueue(
            workload,
            binding.local_queue,
            binding.cluster_queue,
            binding.priority,
        ))
    }

    fn enqueue(
        &mut self,
        workload: Workload,
        local_queue: String,
        cluster_queue: String,
        priority: i32,
    ) -> u64 {
        let name = workload.name.clone();
        let id = self.next_id;
        self.next_id += 1;
        self.now = Timestamp(self.now.0 + 1);
        self.snap
            .add_pending(PendingWorkload {
                id,
                workload: Arc::new(workload),
                local_queue,
                cluster_queue,
                priority,
                created_at: self.now,
                not_before: None,
                nominated: false,
                borrow_preemptions: 0,
                reclaimed: 0,
                reclaimed_for: None,
            })
            .unwrap();
        self.ids.insert(name.clone(), id);
        self.names.insert(id, name);
        id
    }

    /// Marks pending `name` as reclaimed by pending `reclaimer` now, as
    /// the ledger reads it from the history (`reclaimed_for`).
    pub fn reclaimed_by(&mut self, name: &str, reclaimer: &str) {
        let (id, by) = (self.id(name), self.id(reclaimer));
        let mut w = self.snap.remove_pending(id).expect("pending");
        w.reclaimed_for = Some(by);
        self.snap.add_pending(w).unwrap();
    }

    /// Takes pending `name` out of its queue (cancelled, say).
    pub fn withdraw(&mut self, name: &str) {
        self.snap.remove_pending(self.id(name)).expect("pending");
    }

    pub fn id(&self, name: &str) -> u64 {
        self.ids[name]
    }

    pub fn name(&self, id: u64) -> String {
        self.names[&id].clone()
    }

    /// Runs one cycle and applies it; every decision must pass re-validation
    /// and the invariants must hold afterwards.
    pub fn cycle(&mut self) -> &Decisions {
        let decisions = self.decide();
        let rejected = self.apply(&decisions);
        assert!(
            rejected.is_empty(),
            "apply rejected decisions: {rejected:?}"
        );
        self.last = decisions;
        &self.last
    }

    /// Runs one cycle without applying it (a leader that has not yet
    /// proposed its batch).
    pub fn decide(&mut self) -> Decisions {
        self.now = Timestamp(self.now.0 + 1);
        let decisions = schedule(&self.snap, self.now, &self.cfg);
        let again = schedule(&self.snap, self.now, &self.cfg);
        assert_eq!(decisions, again, "same input must give the same decisions");
        decisions
    }

    /// Applies decisions as the ledger does at the current time, returning
    /// the ones it rejected; the invariants must hold afterwards either way.
    pub fn apply(&mut self, decisions: &Decisions) -> Vec<(u64, SnapshotError)> {
        let rejected = self.snap.apply(decisions, self.now);
        let violations = self.snap.violations();
        assert!(violations.is_empty(), "invariants broken: {violations:?}");
        rejected
    }

    /// Replaces the configuration (same clusters); returns the pending
    /// workloads whose ClusterQueue vanished.
    pub fn reconfigure(&mut self, yaml: &str) -> BTreeSet<String> {
        let orphans = self.snap.rebuild(config(yaml), &self.clusters);
        let violations = self.snap.violations();
        assert!(violations.is_empty(), "invariants broken: {violations:?}");
        orphans.iter().map(|p| self.name(p.id)).collect()
    }

    pub fn admitted_now(&self) -> BTreeSet<String> {
        self.last
            .admissions
            .iter()
            .map(|a| self.name(a.workload))
            .collect()
    }

    pub fn preempted_now(&self) -> BTreeSet<String> {
        self.last
            .preemptions
            .iter()
            .map(|p| self.name(p.victim))
            .collect()
    }

    /// Every workload holding quota and not being evicted.
    pub fn running(&self) -> BTreeSet<String> {
        self.snap
            .admitted()
            .filter(|a| !a.evicting)
            .map(|a| self.name(a.pending.id))
            .collect()
    }

    pub fn cluster_of(&self, name: &str) -> String {
        self.snap
            .get_admitted(self.id(name))
            .expect("admitted")
            .assignment
            .cluster
            .clone()
    }

    /// Workloads waiting for admission.
    pub fn pending(&self) -> BTreeSet<String> {
        self.snap.pending().map(|p| self.name(p.id)).collect()
    }

    /// The victims of the last cycle with the reason each was chosen.
    pub fn preemption_reasons(&self) -> BTreeMap<String, PreemptionReason> {
        self.last
            .preemptions
            .iter()
            .map(|p| (self.name(p.victim), p.reason))
            .collect()
    }

    /// The flavor an admitted workload got for `resource`.
    pub fn flavor_of(&self, name: &str, resource: &str) -> String {
        self.snap
            .get_admitted(self.id(name))
            .unwrap_or_else(|| panic!("{name} is not admitted"))
            .assignment
            .pod_sets[0]
            .flavors[resource]
            .clone()
    }

    /// Pods an admitted workload got (below `n=` under partial admission).
    pub fn pods_of(&self, name: &str) -> u32 {
        self.snap
            .get_admitted(self.id(name))
            .unwrap_or_else(|| panic!("{name} is not admitted"))
            .assignment
            .pod_sets[0]
            .count
    }

    /// Pods per node of an admitted workload's first pod set, `node=n`.
    pub fn nodes_of(&self, name: &str) -> Vec<String> {
        self.snap
            .get_admitted(self.id(name))
            .unwrap_or_else(|| panic!("{name} is not admitted"))
            .assignment
            .pod_sets[0]
            .nodes
            .iter()
            .map(|p| format!("{}={}", p.node, p.count))
            .collect()
    }

    /// Quota a ClusterQueue or Cohort uses in `flavor/resource`, in units
    /// (for a cohort: what its children use beyond their guarantees).
    pub fn used(&self, node: &str, cell: &str) -> Quantity {
        let tree = self.snap.tree();
        let node = tree
            .cluster_queue(node)
            .or_else(|| tree.cohort(node))
            .unwrap_or_else(|| panic!("no ClusterQueue or Cohort {node}"));
        let (flavor, resource) = cell.split_once('/').expect("flavor/resource");
        let fr = tree
            .cell(&FlavorResource::new(flavor, resource))
            .unwrap_or_else(|| panic!("no quota cell {cell}"));
        Quantity::from_milli(self.snap.usage().get(node, fr))
    }

    /// Devices assigned on a cluster in `flavor/resource`.
    pub fn on_cluster(&self, cluster: &str, cell: &str) -> Quantity {
        let tree = self.snap.tree();
        let c = self
            .snap
            .cluster_table()
            .index_of(cluster)
            .unwrap_or_else(|| panic!("no cluster {cluster}"));
        let (flavor, resource) = cell.split_once('/').expect("flavor/resource");
        let fr = tree
            .cell(&FlavorResource::new(flavor, resource))
            .unwrap_or_else(|| panic!("no quota cell {cell}"));
        Quantity::from_milli(self.snap.cluster_usage().get(c, fr))
    }

    pub fn reason(&self, name: &str) -> PendingReason {
        let id = self.id(name);
        let w = self
            .snap
            .get_pending(id)
            .unwrap_or_else(|| panic!("{name} is not pending"));
        self.last
            .reason_for(id, &w.cluster_queue)
            .unwrap_or_else(|| panic!("{name} is pending without a reason"))
            .clone()
    }

    /// Asserts that `name` waits for `kind`, with every one of `numbers`
    /// (fragments such as "4 more needed") in its message.
    pub fn assert_waits(&self, name: &str, kind: ReasonKind, numbers: &[&str]) {
        let reason = self.reason(name);
        assert_eq!(reason.kind, kind, "{name}: {reason}");
        for fragment in numbers {
            assert!(
                reason.message.contains(fragment),
                "{name}: {reason:?} lacks {fragment:?}"
            );
        }
    }

    pub fn reason_kind(&self, name: &str) -> ReasonKind {
        self.reason(name).kind
    }

    /// Victims confirm they stopped: their quota is released.
    pub fn evictions_complete(&mut self) {
        let evicting: Vec<u64> = self
            .snap
            .admitted()
            .filter(|a| a.evicting)
            .map(|a| a.pending.id)
            .collect();
        for id in evicting {
            self.snap.release(id, self.now).unwrap();
        }
    }

    pub fn finish(&mut self, name: &str) {
        self.snap.release(self.id(name), self.now).unwrap();
    }

    pub fn advance(&mut self, d: &str) {
        let d: Duration = parse_duration(d).unwrap();
        self.now = self.now.saturating_add(d);
    }

    pub fn set_cluster_state(&mut self, name: &str, state: ClusterState) {
        for c in &mut self.clusters {
            if c.name == name {
                c.state = state;
            }
        }
        self.snap.set_clusters(&self.clusters);
    }
}

pub fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// `n` whole units, for comparing with [`Sim::used`].
pub fn units(n: u64) -> Quantity {
    Quantity::units(n)
}
