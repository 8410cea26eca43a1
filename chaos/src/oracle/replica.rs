//! The checker of one replica's stream of applied commands.
//!
//! After every entry it reads the reservations the replica's records hold,
//! and checks, with its own arithmetic ([`super::quota`]):
//!
//! - every reservation that appeared was admitted by this very entry (an
//!   accepted decision of an `AdmitBatch`, or an admission planned into
//!   the `SubmitWorkloads` that queued it), with the decision's
//!   assignment, in the workload's own ClusterQueue, on a Ready cluster;
//! - every reservation that went away was released by something that may
//!   release it: a stop or end reported for its epoch and cluster, the
//!   fencing of its cluster, or a reconcile that found it gone;
//! - no report for another epoch changed a workload;
//! - what the reservations charge, cell by cell, is what their
//!   assignments and the workloads' requests say;
//! - the charges fit the configuration in force at this index (Kueue's
//!   rules, written again) and every cluster's reported devices, and on
//!   a cluster that reports nodes, every pod set of a node flavor has all
//!   its pods on nodes, and no schedulable node holds more than it has;
//! - the replica's own usage figures, per ClusterQueue and cohort, equal
//!   these books.
//!
//! It also counts, for the progress checks, how often each workload was
//! preempted and how often apply() refused the same decision.

use std::collections::{BTreeMap, BTreeSet};

use fleetq_ledger::command::{Command, Outcome, Phase, Request, Response, SubmitResult};
use fleetq_ledger::{LeasePolicy, Ledger, WorkloadState};
use fleetq_model::{ClusterState, Config, Workload};
use serde_json::Value;

use super::quota::{cohort_key, cq_key, milli, Amounts, Cell, Tree};

/// A reservation as the books keep it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub cluster_queue: String,
    pub cluster: String,
    pub epoch: u64,
    pub cells: Amounts,
    /// What its pods hold on each node of its cluster: node -> resource
    /// -> milli-units (empty on a cluster without nodes).
    pub on_nodes: BTreeMap<String, BTreeMap<String, u64>>,
}

/// A node as its agent registered it.
#[derive(Clone, Debug)]
struct NodeCapacity {
    flavor: String,
    allocatable: BTreeMap<String, u64>,
    unschedulable: bool,
    labels: BTreeMap<String, String>,
}

/// What one replica's stream has shown so far.
#[derive(Default)]
pub struct ReplicaBooks {
    pub node: u64,
    /// Index of the last entry seen.
    pub index: u64,
    held: BTreeMap<u64, Held>,
    states: BTreeMap<u64, WorkloadState>,
    /// Devices per cluster, flavor and resource (milli), as registered.
    capacity: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
    /// Nodes per cluster, as registered.
    nodes: BTreeMap<String, BTreeMap<String, NodeCapacity>>,
    lease: BTreeMap<String, LeasePolicy>,
    /// Every reservation this replica ever granted: (workload, epoch).
    pub granted: BTreeMap<(u64, u64), Held>,
    /// The workloads a node left under in the last entry, with their
    /// cluster's lease policy (what the fault struck, for coverage).
    pub left_under: Vec<(u64, LeasePolicy)>,
}

/// The cells `workload` is charged under `assignment`, by its requests.
fn cells_of(
    workload: &Workload,
    assignment: &fleetq_scheduler::Assignment,
) -> Result<Amounts, String> {
    let mut cells = Amounts::new();
    for ps in &assignment.pod_sets {
        let Some(spec) = workload.spec.pod_sets.iter().find(|p| p.name == ps.name) else {
            return Err(format!(
                "assigns pod set {:?}, which the workload lacks",
                ps.name
            ));
        };
        if ps.count > spec.count || ps.count < spec.min_count.unwrap_or(spec.count) {
            return Err(format!(
                "admits {} pods of pod set {:?}, which asks for {} (at least {})",
                ps.count,
                ps.name,
                spec.count,
                spec.min_count.unwrap_or(spec.count)
            ));
        }
        for (resource, per_pod) in &spec.requests {
            if per_pod.milli() == 0 {
                continue;
            }
            let Some(flavor) = ps.flavors.get(resource) else {
                return Err(format!(
                    "gives {resource} of pod set {:?} no flavor",
                    ps.name
                ));
            };
            *cells.entry((flavor.clone(), resource.clone())).or_default() +=
                per_pod.milli() * u64::from(ps.count);
        }
    }
    if assignment.pod_sets.len() != workload.spec.pod_sets.len() {
        return Err("does not assign every pod set".into());
    }
    let stated: Amounts = assignment
        .usage
        .iter()
        .filter(|(_, q)| q.milli() > 0)
        .map(|(fr, q)| ((fr.flavor.clone(), fr.resource.clone()), q.milli()))
        .collect();
    if stated != cells {
        return Err(format!(
            "states usage {} but its pod sets charge {}",
            show(&stated),
            show(&cells)
        ));
    }
    Ok(cells)
}

pub fn show(cells: &Amounts) -> String {
    let parts: Vec<String> = cells
        .iter()
        .map(|((f, r), v)| format!("{f}/{r}={}", milli(*v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// The ClusterQueue a workload binds to under `config`, by its LocalQueue.
fn bound_queue(config: &Config, workload: &Workload) -> Option<String> {
    let key = format!("{}/{}", workload.namespace, workload.spec.queue_name);
    config
        .local_queues
        .get(&key)
        .map(|lq| lq.spec.cluster_queue.clone())
}

impl ReplicaBooks {
    pub fn new(node: u64) -> ReplicaBooks {
        ReplicaBooks {
            node,
            ..ReplicaBooks::default()
        }
    }

    /// The reservations `ledger` holds, charged by the books' arithmetic.
    fn read(ledger: &Ledger) -> (BTreeMap<u64, Held>, Vec<String>) {
        let mut held = BTreeMap::new();
        let mut problems = Vec::new();
        for (id, record) in &ledger.state().workloads {
            let Some(r) = &record.reservation else {
                continue;
            };
            let cells = match cells_of(&record.workload, &r.assignment) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(format!("workload {id}'s reservation {e}"));
                    Amounts::new()
                }
            };
            let registered = ledger
                .state()
                .clusters
                .get(&r.assignment.cluster)
                .map(|c| nodes_of(&c.cluster));
            let on_nodes = match on_nodes_of(&record.workload, &r.assignment, registered.as_ref()) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(format!("workload {id}'s reservation {e}"));
                    BTreeMap::new()
                }
            };
            held.insert(
                *id,
                Held {
                    cluster_queue: r.cluster_queue.clone(),
                    cluster: r.assignment.cluster.clone(),
                    epoch: r.epoch,
                    cells,
                    on_nodes,
                },
            );
        }
        (held, problems)
    }

    /// The state was replaced whole (opened or installed from a
    /// snapshot): take it as the new starting point, and check it.
    pub fn reset(&mut self, index: u64, ledger: &Ledger) -> Vec<String> {
        let (held, mut problems) = Self::read(ledger);
        self.held = held;
        self.states = ledger
            .state()
            .workloads
            .iter()
            .map(|(id, r)| (*id, r.state))
            .collect();
        self.capacity.clear();
        self.nodes.clear();
        self.lease.clear();
        for (name, c) in &ledger.state().clusters {
            self.capacity.insert(name.clone(), capacity_of(&c.cluster));
            self.nodes.insert(name.clone(), nodes_of(&c.cluster));
            self.lease.insert(name.clone(), c.lease_policy);
        }
        for (id, h) in &self.held {
            self.granted.insert((*id, h.epoch), h.clone());
        }
        self.index = index;
        problems.extend(self.check_books(ledger));
        problems
    }

    /// Checks one applied entry; returns what is wrong with it.
    pub fn entry(
        &mut self,
        index: u64,
        request: &Request,
        response: &Response,
        ledger: &Ledger,
    ) -> Vec<String> {
        self.index = index;
        let (after, mut problems) = Self::read(ledger);
        let config = &ledger.state().config;
        let mut left_under = Vec::new();
        if let (
            Command::RegisterCluster {
                cluster,
                lease_policy,
            },
            true,
        ) = (&request.command, response.is_ok())
        {
            left_under = self.register(cluster);
            self.lease.insert(cluster.name.clone(), *lease_policy);
        }
        let admitted = admitted_by(&request.command, response);
        for (id, h) in &after {
            if self.held.get(id).map(|b| b.epoch) == Some(h.epoch) {
                if self.held.get(id) != Some(h) {
                    problems.push(format!("workload {id}'s reservation changed in place"));
                }
                continue;
            }
            if self.held.contains_key(id) {
                problems.push(format!(
                    "workload {id} changed epoch {} -> {} without a release",
                    self.held[id].epoch, h.epoch
                ));
            }
            problems.extend(self.check_new(*id, h, &admitted, ledger, config));
            self.granted.insert((*id, h.epoch), h.clone());
        }
        for (id, b) in &self.held {
            if after.get(id).map(|h| h.epoch) == Some(b.epoch) {
                continue;
            }
            if let Err(e) = self.may_release(*id, b, &request.command) {
                problems.push(format!(
                    "workload {id} (epoch {} on {}) released by {}: {e}",
                    b.epoch,
                    b.cluster,
                    request.command.name()
                ));
            }
        }
        problems.extend(self.check_reports(&request.command, ledger));
        problems.extend(self.check_left_under(&left_under, &after, ledger));
        self.left_under = left_under
            .iter()
            .filter(|(id, _)| self.held.contains_key(id))
            .filter_map(|(id, _)| {
                let cluster = &self.held.get(id)?.cluster;
                Some((*id, *self.lease.get(cluster)?))
            })
            .collect();
        self.held = after;
        self.states = ledger
            .state()
            .workloads
            .iter()
            .map(|(id, r)| (*id, r.state))
            .collect();
        problems.extend(self.check_books(ledger));
        problems
    }

    /// A reservation that appeared: admitted by this entry, as decided.
    fn check_new(
        &self,
        id: u64,
        h: &Held,
        admitted: &BTreeMap<u64, fleetq_scheduler::Assignment>,
        ledger: &Ledger,
        config: &Config,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(assignment) = admitted.get(&id) else {
            problems.push(format!(
                "workload {id} holds a reservation (epoch {} on {}) no accepted admission of this entry made",
                h.epoch, h.cluster
            ));
            return problems;
        };
        if assignment.cluster != h.cluster {
            problems.push(format!(
                "workload {id} was admitted to {} but holds {}",
                assignment.cluster, h.cluster
            ));
        }
        if let Some(record) = ledger.state().workloads.get(&id) {
            if let Ok(decided) = cells_of(&record.workload, assignment) {
                if decided != h.cells {
                    problems.push(format!(
                        "workload {id} was admitted with {} but charged {}",
                        show(&decided),
                        show(&h.cells)
                    ));
                }
            }
            match bound_queue(config, &record.workload) {
                Some(cq) if cq == h.cluster_queue => {}
                other => problems.push(format!(
                    "workload {id} is charged to ClusterQueue {} but its LocalQueue points at {other:?}",
                    h.cluster_queue
                )),
            }
        }
        match ledger.state().clusters.get(&h.cluster) {
            Some(c) if c.cluster.state == ClusterState::Ready => {}
            Some(c) => problems.push(format!(
                "workload {id} was admitted to cluster {}, which is {:?}",
                h.cluster, c.cluster.state
            )),
            None => problems.push(format!(
                "workload {id} was admitted to cluster {}, which is not registered",
                h.cluster
            )),
        }
        let nodes = self.nodes.get(&h.cluster);
        if let Some(record) = ledger.state().workloads.get(&id) {
            problems.extend(check_topology(id, &record.workload, assignment, nodes));
        }
        for node in h.on_nodes.keys() {
            if nodes
                .and_then(|n| n.get(node))
                .is_some_and(|n| n.unschedulable)
            {
                problems.push(format!(
                    "over-admission of devices: workload {id} was placed on node {node} of cluster {}, which is unschedulable (cordoned, NotReady or gone)",
                    h.cluster
                ));
            }
        }
        problems
    }

    /// Whether `command` may release `held` of workload `id`.
    fn may_release(&self, id: u64, held: &Held, command: &Command) -> Result<(), String> {
        match command {
            Command::ReportStatus { reports } => {
                let matching = reports.iter().any(|r| {
                    r.workload == id
                        && r.epoch == held.epoch
                        && r.cluster == held.cluster
                        && matches!(r.phase, Phase::Stopped | Phase::Succeeded | Phase::Failed)
                });
                if matching {
                    Ok(())
                } else {
                    Err("no report of its stop or end for that epoch and cluster".into())
                }
            }
            Command::ExpireCluster { cluster } if *cluster == held.cluster => {
                match self.lease.get(cluster) {
                    Some(LeasePolicy::Fence) => Ok(()),
                    other => Err(format!(
                        "its cluster's lease policy is {other:?}, not Fence"
                    )),
                }
            }
            Command::ReconcileCluster { cluster, running } if *cluster == held.cluster => {
                let still = running
                    .iter()
                    .any(|r| r.workload == id && r.epoch == held.epoch);
                let was_running = self.states.get(&id) == Some(&WorkloadState::Running);
                match (still, was_running) {
                    (false, true) => Ok(()),
                    (true, _) => Err("the agent reported it still running".into()),
                    (false, false) => Err("it had never been reported running".into()),
                }
            }
            _ => Err("that command releases nothing".into()),
        }
    }

    /// A report for another epoch (or cluster) must change nothing.
    fn check_reports(&self, command: &Command, ledger: &Ledger) -> Vec<String> {
        let Command::ReportStatus { reports } = command else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        for r in reports {
            let current = self
                .held
                .get(&r.workload)
                .is_some_and(|h| h.epoch == r.epoch && h.cluster == r.cluster);
            if current {
                continue;
            }
            let before = self.states.get(&r.workload);
            let after = ledger.state().workloads.get(&r.workload).map(|w| w.state);
            // Another report in the same entry may have moved it.
            let explained = reports.iter().any(|o| {
                o.workload == r.workload
                    && self
                        .held
                        .get(&o.workload)
                        .is_some_and(|h| h.epoch == o.epoch && h.cluster == o.cluster)
            });
            if before.copied() != after && !explained {
                problems.push(format!(
                    "a {:?} report for workload {} epoch {} from {} (not its reservation) moved it from {before:?} to {after:?}",
                    r.phase, r.workload, r.epoch, r.cluster
                ));
            }
        }
        problems
    }

    /// The books: the reservations' charges against the configuration in
    /// force and the clusters' devices, and the replica's own figures
    /// against them.
    fn check_books(&self, ledger: &Ledger) -> Vec<String> {
        let mut problems = Vec::new();
        let config = &ledger.state().config;
        let tree = Tree::from_config(config);
        let mut cq_usage: BTreeMap<String, Amounts> = BTreeMap::new();
        let mut on_cluster: BTreeMap<String, Amounts> = BTreeMap::new();
        for h in self.held.values() {
            for (cell, v) in &h.cells {
                *cq_usage
                    .entry(cq_key(&h.cluster_queue))
                    .or_default()
                    .entry(cell.clone())
                    .or_default() += v;
                *on_cluster
                    .entry(h.cluster.clone())
                    .or_default()
                    .entry(cell.clone())
                    .or_default() += v;
            }
        }
        problems.extend(
            tree.violations(&cq_usage)
                .into_iter()
                .map(|v| format!("over-admission: {v}")),
        );
        problems.extend(self.check_devices(&on_cluster));
        problems.extend(self.check_nodes());
        problems.extend(compare_with_replica(&tree, &cq_usage, config, ledger));
        problems
    }

    /// Devices: a flavor some cluster reports lives only on clusters
    /// reporting it, within what they report; a resource a cluster does
    /// not report for a flavor it has is not limited there; a flavor no
    /// cluster reports is quota only.
    fn check_devices(&self, on_cluster: &BTreeMap<String, Amounts>) -> Vec<String> {
        let mut problems = Vec::new();
        let tracked: BTreeSet<&String> = self.capacity.values().flat_map(|f| f.keys()).collect();
        for (cluster, cells) in on_cluster {
            let capacity = self.capacity.get(cluster);
            for ((flavor, resource), used) in cells {
                if !tracked.contains(flavor) {
                    continue;
                }
                let Some(resources) = capacity.and_then(|c| c.get(flavor)) else {
                    problems.push(format!(
                        "cluster {cluster} holds {} of {flavor}/{resource} but reports no {flavor}",
                        milli(*used)
                    ));
                    continue;
                };
                if let Some(&has) = resources.get(resource) {
                    if *used > has {
                        problems.push(format!(
                            "over-admission of devices: cluster {cluster} holds {} of {flavor}/{resource}, has {}",
                            milli(*used),
                            milli(has)
                        ));
                    }
                }
            }
        }
        problems
    }
}

impl ReplicaBooks {
    /// Nodes: no schedulable node holds more of a resource its cluster
    /// reports for the node's flavor than the node has.
    fn check_nodes(&self) -> Vec<String> {
        let mut used: BTreeMap<(&str, &str), BTreeMap<&str, u64>> = BTreeMap::new();
        for h in self.held.values() {
            for (node, resources) in &h.on_nodes {
                let slot = used.entry((h.cluster.as_str(), node.as_str())).or_default();
                for (resource, v) in resources {
                    *slot.entry(resource.as_str()).or_default() += v;
                }
            }
        }
        let mut problems = Vec::new();
        for ((cluster, node), resources) in used {
            let Some(cap) = self.nodes.get(cluster).and_then(|n| n.get(node)) else {
                continue;
            };
            let reported = self.capacity.get(cluster).and_then(|c| c.get(&cap.flavor));
            for (resource, held) in resources {
                let limited = reported.is_some_and(|r| r.contains_key(resource));
                let has = cap.allocatable.get(resource).copied().unwrap_or(0);
                if limited && !cap.unschedulable && held > has {
                    problems.push(format!(
                        "over-admission of devices on node {node} of cluster {cluster}: it holds {} of {resource}, has {}",
                        milli(held),
                        milli(has)
                    ));
                }
            }
        }
        problems
    }
}

impl ReplicaBooks {
    /// Takes a cluster's new report: its nodes and totals as the ledger
    /// must keep them, re-derived here. A node it no longer reports, or
    /// reports unschedulable, while reservations place pods on it stays
    /// (unschedulable), and its devices count in the totals, while they
    /// do: its pods may still hold them. Returns the workloads a node
    /// left under in this report (it was schedulable before).
    fn register(&mut self, cluster: &fleetq_model::Cluster) -> Vec<(u64, String)> {
        let before = self.nodes.remove(&cluster.name).unwrap_or_default();
        let mut nodes = nodes_of(cluster);
        let mut capacity = capacity_of(cluster);
        let mut pods_on: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for (id, h) in self.held.iter().filter(|(_, h)| h.cluster == cluster.name) {
            for node in h.on_nodes.keys() {
                pods_on.entry(node.as_str()).or_default().push(*id);
            }
        }
        let mut left = Vec::new();
        for (name, ids) in &pods_on {
            let was = before.get(*name);
            let now = nodes.get(*name);
            let gone = now.is_none();
            let away = now.is_none_or(|n| n.unschedulable);
            if gone {
                if let Some(was) = was {
                    let mut ghost = was.clone();
                    ghost.unschedulable = true;
                    nodes.insert(name.to_string(), ghost);
                }
            }
            if away && was.is_some_and(|w| !w.unschedulable) {
                left.extend(ids.iter().map(|id| (*id, name.to_string())));
            }
            if let Some(node) = nodes.get(*name).filter(|n| n.unschedulable) {
                let totals = capacity.entry(node.flavor.clone()).or_default();
                for (resource, q) in &node.allocatable {
                    *totals.entry(resource.clone()).or_default() += q;
                }
            }
        }
        self.nodes.insert(cluster.name.clone(), nodes);
        self.capacity.insert(cluster.name.clone(), capacity);
        left
    }

    /// The lease policy for workloads a node left under: `Fence` has them
    /// stopping (or released) after the entry; `Keep` leaves them held.
    fn check_left_under(
        &self,
        left: &[(u64, String)],
        after: &BTreeMap<u64, Held>,
        ledger: &Ledger,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        for (id, node) in left {
            let Some(before) = self.held.get(id) else {
                continue;
            };
            let still = after.get(id).filter(|h| h.epoch == before.epoch);
            let stopping = ledger
                .state()
                .workloads
                .get(id)
                .and_then(|r| r.reservation.as_ref())
                .is_some_and(|r| r.stopping.is_some());
            match self.lease.get(&before.cluster) {
                Some(LeasePolicy::Fence) if still.is_some() && !stopping => {
                    problems.push(format!(
                        "node left: node {node} of cluster {} left under workload {id} (lease policy Fence), which is neither stopping nor released",
                        before.cluster
                    ));
                }
                Some(LeasePolicy::Keep) if still.is_none() => {
                    problems.push(format!(
                        "node left: node {node} of cluster {} left under workload {id} (lease policy Keep), which was released",
                        before.cluster
                    ));
                }
                _ => {}
            }
        }
        problems
    }
}

/// Each pod set's topology request, read from the workload as Kueue
/// spells it and checked against the nodes' labels: a required level
/// holds all its pods in one domain (one value of that label), and a
/// slice level holds whole slices in each domain.
fn check_topology(
    id: u64,
    workload: &Workload,
    assignment: &fleetq_scheduler::Assignment,
    nodes: Option<&BTreeMap<String, NodeCapacity>>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for ps in &assignment.pod_sets {
        let Some(spec) = workload.spec.pod_sets.iter().find(|p| p.name == ps.name) else {
            continue;
        };
        if ps.nodes.is_empty() {
            continue;
        }
        let Ok(Value::Object(request)) = serde_json::to_value(&spec.topology_request) else {
            continue;
        };
        // Pods per domain of `level`; a node without the label is a
        // domain of its own, named so.
        let per_domain = |level: &str| {
            let mut out: BTreeMap<String, u64> = BTreeMap::new();
            for p in &ps.nodes {
                let domain = nodes
                    .and_then(|n| n.get(&p.node))
                    .and_then(|n| n.labels.get(level))
                    .cloned()
                    .unwrap_or_else(|| format!("(node {} without {level})", p.node));
                *out.entry(domain).or_default() += u64::from(p.count);
            }
            out
        };
        if let Some(Value::String(level)) = request.get("required") {
            let domains = per_domain(level);
            if domains.len() > 1 {
                problems.push(format!(
                    "topology broken: workload {id} pod set {:?} must stay within one {level} but was placed over {domains:?}",
                    ps.name
                ));
            }
        }
        if let (Some(Value::String(level)), Some(size)) = (
            request.get("podSetSliceRequiredTopology"),
            request.get("podSetSliceSize").and_then(Value::as_u64),
        ) {
            let domains = per_domain(level);
            if size == 0 || domains.values().any(|&pods| pods % size != 0) {
                problems.push(format!(
                    "topology broken: workload {id} pod set {:?} must be placed in whole slices of {size} per {level} but was placed as {domains:?}",
                    ps.name
                ));
            }
        }
    }
    problems
}

/// A cluster's registered nodes by name.
fn nodes_of(cluster: &fleetq_model::Cluster) -> BTreeMap<String, NodeCapacity> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                NodeCapacity {
                    flavor: n.flavor.clone(),
                    allocatable: n
                        .allocatable
                        .iter()
                        .map(|(r, q)| (r.clone(), q.milli()))
                        .collect(),
                    unschedulable: n.unschedulable,
                    labels: n.labels.clone(),
                },
            )
        })
        .collect()
}

/// What `assignment`'s pods hold on each node, by the workload's requests
/// and the nodes' flavors; and that every pod set of a flavor the nodes
/// carry has exactly its pods on nodes (and other pod sets none).
fn on_nodes_of(
    workload: &Workload,
    assignment: &fleetq_scheduler::Assignment,
    nodes: Option<&BTreeMap<String, NodeCapacity>>,
) -> Result<BTreeMap<String, BTreeMap<String, u64>>, String> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let empty = BTreeMap::new();
    let nodes = nodes.unwrap_or(&empty);
    let node_flavors: BTreeSet<&String> = nodes.values().map(|n| &n.flavor).collect();
    for ps in &assignment.pod_sets {
        let Some(spec) = workload.spec.pod_sets.iter().find(|p| p.name == ps.name) else {
            continue;
        };
        let on_nodes = ps.flavors.values().any(|f| node_flavors.contains(f));
        let placed: u64 = ps.nodes.iter().map(|p| u64::from(p.count)).sum();
        if on_nodes && placed != u64::from(ps.count) {
            return Err(format!(
                "places {placed} pods of pod set {:?} on nodes, not its {}",
                ps.name, ps.count
            ));
        }
        if !on_nodes && placed > 0 {
            return Err(format!(
                "places pod set {:?} on nodes of a flavor no node has",
                ps.name
            ));
        }
        for p in &ps.nodes {
            let Some(node) = nodes.get(&p.node) else {
                return Err(format!(
                    "places pods on node {:?}, which its cluster does not report",
                    p.node
                ));
            };

            for (resource, per_pod) in &spec.requests {
                if per_pod.milli() == 0 || ps.flavors.get(resource) != Some(&node.flavor) {
                    continue;
                }
                *out.entry(p.node.clone())
                    .or_default()
                    .entry(resource.clone())
                    .or_default() += per_pod.milli() * u64::from(p.count);
            }
        }
    }
    Ok(out)
}

fn capacity_of(cluster: &fleetq_model::Cluster) -> BTreeMap<String, BTreeMap<String, u64>> {
    cluster
        .capacity
        .iter()
        .map(|(flavor, resources)| {
            (
                flavor.clone(),
                resources
                    .iter()
                    .map(|(r, q)| (r.clone(), q.milli()))
                    .collect(),
            )
        })
        .collect()
}

/// Workload -> assignment of every admission `command` made, by its
/// outcome.
fn admitted_by(
    command: &Command,
    response: &Response,
) -> BTreeMap<u64, fleetq_scheduler::Assignment> {
    let mut out = BTreeMap::new();
    match (command, &response.outcome) {
        (Command::AdmitBatch(batch), Outcome::Admitted(outcome)) if !outcome.stale_batch => {
            let refused: BTreeSet<u64> = outcome.rejected.iter().map(|(id, _)| *id).collect();
            for a in &batch.admissions {
                if !refused.contains(&a.workload) {
                    out.insert(a.workload, a.assignment.clone());
                }
            }
        }
        (Command::SubmitWorkloads { admit, .. }, Outcome::Submitted { results, .. }) => {
            for plan in admit {
                if let Some(SubmitResult::Created { id }) = results.get(plan.submission as usize) {
                    out.insert(*id, plan.assignment.clone());
                }
            }
        }
        _ => {}
    }
    out
}

/// The replica's usage figures for every ClusterQueue and cohort against
/// the books'.
fn compare_with_replica(
    tree: &Tree,
    cq_usage: &BTreeMap<String, Amounts>,
    config: &Config,
    ledger: &Ledger,
) -> Vec<String> {
    let mut problems = Vec::new();
    let books = tree.usage(cq_usage);
    let snapshot = ledger.snapshot();
    let theirs = snapshot.tree();
    let usage = snapshot.usage();
    let mut nodes: Vec<(String, Option<usize>)> = config
        .cluster_queues
        .keys()
        .map(|n| (cq_key(n), theirs.cluster_queue(n)))
        .collect();
    let cohorts: BTreeSet<String> = config
        .cohorts
        .keys()
        .cloned()
        .chain(
            config
                .cluster_queues
                .values()
                .filter_map(|c| c.spec.cohort.clone()),
        )
        .collect();
    nodes.extend(cohorts.iter().map(|n| (cohort_key(n), theirs.cohort(n))));
    for (key, node) in nodes {
        let Some(node) = node else {
            problems.push(format!("the replica's quota tree lacks {key}"));
            continue;
        };
        let mine = books.get(&key).cloned().unwrap_or_default();
        for (i, fr) in theirs.cells.iter().enumerate() {
            let cell: Cell = (fr.flavor.clone(), fr.resource.clone());
            let (a, b) = (usage.get(node, i), mine.get(&cell).copied().unwrap_or(0));
            if a != b {
                problems.push(format!(
                    "books disagree: the replica says {key} uses {} of {}/{}, the reservations charge {}",
                    milli(a),
                    cell.0,
                    cell.1,
                    milli(b)
                ));
            }
        }
        for cell in mine.keys() {
            if theirs.cell_of(&cell.0, &cell.1).is_none() {
                problems.push(format!(
                    "books disagree: {key} is charged {}/{} the replica has no cell for",
                    cell.0, cell.1
                ));
            }
        }
    }
    problems
}

/// What the progress checks count over the log.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Accepted preemptions per victim.
    pub preempted: BTreeMap<u64, u32>,
    /// The longest streak of repeats per (victim, preemptor): the
    /// preemptor preempted the same victim again and again without having
    /// been admitted in between. That is the livelock's signature (the
    /// victim re-admitted into its preemptor's room), whatever else
    /// happens. Streaks apart, each ended by the preemptor's admission,
    /// do not add up: each may have its own cause (soak seed 395997: the
    /// preemptor stopped by its user, then, after it ran, its room lost
    /// with a crashed agent's cluster).
    pub repeats: BTreeMap<(u64, u64), u32>,
    /// The current streak's repeats per (victim, preemptor).
    streak: BTreeMap<(u64, u64), u32>,
    /// Admissions per workload so far.
    admissions: BTreeMap<u64, u32>,
    /// (victim, preemptor) -> the preemptor's admissions when it last
    /// preempted that victim.
    last_pair: BTreeMap<(u64, u64), u32>,
    /// Decisions apply() refused to a current leader (not a stale
    /// batch), by workload and cause.
    pub refused: BTreeMap<(u64, String), u32>,
    pub total_preemptions: u32,
}

impl Progress {
    /// Counts one entry.
    pub fn count(&mut self, command: &Command, response: &Response) {
        if let (Command::ApplyObjects { .. }, Outcome::Applied { changes }) =
            (command, &response.outcome)
        {
            // A configuration change (a quota cut, say) may leave a
            // preemptor no room it can use, and the victim is rightly
            // re-admitted; once the quota comes back, preempting it again
            // is the right answer, not the livelock. Pairs count afresh.
            if changes.iter().any(|(_, what)| what != "unchanged") {
                self.last_pair.clear();
            }
        }
        for id in admitted_by(command, response).keys() {
            *self.admissions.entry(*id).or_default() += 1;
        }
        let (Command::AdmitBatch(batch), Outcome::Admitted(outcome)) = (command, &response.outcome)
        else {
            return;
        };
        if outcome.stale_batch {
            return;
        }
        let rejected: BTreeSet<u64> = outcome.rejected.iter().map(|(id, _)| *id).collect();
        for p in &batch.preemptions {
            if rejected.contains(&p.victim) {
                continue;
            }
            self.total_preemptions += 1;
            *self.preempted.entry(p.victim).or_default() += 1;
            let pair = (p.victim, p.preemptor);
            let admitted = self.admissions.get(&p.preemptor).copied().unwrap_or(0);
            let streak = self.streak.entry(pair).or_default();
            if self.last_pair.insert(pair, admitted) == Some(admitted) {
                *streak += 1;
                let longest = self.repeats.entry(pair).or_default();
                *longest = (*longest).max(*streak);
            } else {
                *streak = 0;
            }
        }
        for (id, why) in &outcome.rejected {
            // The reason without its numbers: the same decision refused
            // for the same cause.
            let cause: String = why.chars().filter(|c| !c.is_ascii_digit()).collect();
            *self.refused.entry((*id, cause)).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_ledger::{AdmitBatch, AdmitOutcome, CycleId};
    use fleetq_model::assignment::{NodePods, PodSetAssignment};
    use fleetq_scheduler::{Admission, Preemption, PreemptionReason};

    /// `preemptor` preempting `victim` (admissions empty), or admitting
    /// `preemptor` (victim None), as an accepted batch.
    fn batch(preemptor: u64, victim: Option<u64>) -> (Command, Response) {
        let mut b = AdmitBatch {
            cycle: CycleId { term: 1, seq: 1 },
            admissions: Vec::new(),
            preemptions: Vec::new(),
            reasons: Vec::new(),
            queue_reasons: Vec::new(),
        };
        match victim {
            Some(victim) => b.preemptions.push(Preemption {
                victim,
                preemptor,
                reason: PreemptionReason::InClusterQueue,
                grace_period: None,
                cluster: None,
            }),
            None => b.admissions.push(Admission {
                workload: preemptor,
                cluster_queue: "q".into(),
                assignment: fleetq_scheduler::Assignment {
                    cluster: "east".into(),
                    pod_sets: Vec::new(),
                    usage: BTreeMap::new(),
                },
                budget_charge: 0,
                afs_penalty: 0,
            }),
        }
        let outcome = Outcome::Admitted(AdmitOutcome {
            admitted: u32::from(victim.is_none()),
            preempted: u32::from(victim.is_some()),
            rejected: Vec::new(),
            stale_batch: false,
            changes: 0,
        });
        (Command::AdmitBatch(b), Response::ok(outcome))
    }

    #[test]
    fn repeats_count_per_streak_not_per_run() {
        let mut progress = Progress::default();
        let mut count = |preemptor, victim| {
            let (c, r) = batch(preemptor, victim);
            progress.count(&c, &r);
        };
        // Two streaks of one repeat each, the preemptor admitted between.
        for step in [Some(6), Some(6), None, Some(6), Some(6)] {
            count(20, step);
        }
        assert_eq!(progress.repeats.get(&(6, 20)), Some(&1));
        assert_eq!(progress.preempted.get(&6), Some(&4));
        // One streak of two repeats: the livelock's signature.
        for _ in 0..3 {
            let (c, r) = batch(21, Some(7));
            progress.count(&c, &r);
        }
        assert_eq!(progress.repeats.get(&(7, 21)), Some(&2));
    }

    fn node(rack: &str, host: &str) -> NodeCapacity {
        NodeCapacity {
            flavor: "h100".into(),
            allocatable: BTreeMap::new(),
            unschedulable: false,
            labels: BTreeMap::from([
                ("rack".to_string(), rack.to_string()),
                ("kubernetes.io/hostname".to_string(), host.to_string()),
            ]),
        }
    }

    /// A workload of one pod set of 4 pods with `request` (Kueue's
    /// spelling), placed as `placed` (node, pods).
    fn check(request: Value, placed: &[(&str, u32)]) -> Vec<String> {
        let workload: Workload = serde_json::from_value(serde_json::json!({
            "namespace": "default", "name": "w",
            "spec": {"queueName": "q", "podSets": [{
                "name": "ps0", "count": 4,
                "requests": {"nvidia.com/gpu": "1"},
                "topologyRequest": request,
            }]},
        }))
        .expect("workload");
        let assignment = fleetq_scheduler::Assignment {
            cluster: "east".into(),
            pod_sets: vec![PodSetAssignment {
                name: "ps0".into(),
                count: 4,
                flavors: BTreeMap::from([("nvidia.com/gpu".into(), "h100".into())]),
                nodes: placed
                    .iter()
                    .map(|(n, c)| NodePods {
                        node: n.to_string(),
                        count: *c,
                    })
                    .collect(),
            }],
            usage: BTreeMap::new(),
        };
        let nodes = BTreeMap::from([
            ("a".to_string(), node("r1", "a")),
            ("b".to_string(), node("r1", "b")),
            ("c".to_string(), node("r2", "c")),
        ]);
        check_topology(1, &workload, &assignment, Some(&nodes))
    }

    #[test]
    fn a_required_level_holds_every_pod_in_one_domain() {
        let required = serde_json::json!({"required": "rack"});
        assert!(check(required.clone(), &[("a", 2), ("b", 2)]).is_empty());
        let problems = check(required, &[("a", 2), ("c", 2)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("must stay within one rack"),
            "{problems:?}"
        );
    }

    #[test]
    fn slices_are_whole_in_each_domain() {
        let slices = serde_json::json!({
            "podSetSliceRequiredTopology": "kubernetes.io/hostname",
            "podSetSliceSize": 2,
        });
        assert!(check(slices.clone(), &[("a", 2), ("c", 2)]).is_empty());
        let problems = check(slices, &[("a", 3), ("c", 1)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("whole slices of 2"), "{problems:?}");
    }

    #[test]
    fn a_preferred_level_may_spread() {
        let preferred = serde_json::json!({"preferred": "rack"});
        assert!(check(preferred, &[("a", 2), ("c", 2)]).is_empty());
    }
}
