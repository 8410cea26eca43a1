//! Read models: the ledger's records as the API's messages.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use fleetq_ledger::{Ledger, WorkloadRecord, WorkloadState};
use fleetq_model::{FieldError, Quantity};
use fleetq_proto::v1 as pb;
use fleetq_scheduler::WorkloadId;

pub fn field_error(e: &FieldError) -> pb::FieldError {
    pb::FieldError {
        document: e.document.unwrap_or(0) as u32,
        object: e.object.clone(),
        path: e.path.clone(),
        message: e.message.clone(),
    }
}

pub fn field_errors(errors: &[FieldError]) -> Vec<pb::FieldError> {
    errors.iter().map(field_error).collect()
}

/// One line per error, as the CLI prints them.
pub fn describe_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

fn requests_summary(record: &WorkloadRecord) -> String {
    record
        .workload
        .spec
        .pod_sets
        .iter()
        .map(|ps| {
            let reqs: Vec<String> = ps
                .requests
                .iter()
                .map(|(r, q)| format!("{r}: {q}"))
                .collect();
            if reqs.is_empty() {
                // A pod set without requests (a JobSet's driver): said, not
                // an empty field before the count.
                format!("no requests x {}", ps.count)
            } else {
                format!("{} x {}", reqs.join(", "), ps.count)
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The whole workload as JSON, for a caller that asked `with_spec`. A
/// model value always serialises; were it not to, the field stays empty
/// and the CLI says it got no spec.
pub fn workload_json(record: &WorkloadRecord) -> String {
    serde_json::to_string(record.workload.as_ref()).unwrap_or_default()
}

pub fn workload_status(ledger: &Ledger, record: &WorkloadRecord) -> pb::WorkloadStatus {
    let w = &record.workload;
    let (cluster_queue, priority) = binding_of(ledger, record);
    let cluster_queue = cluster_queue.into_owned();
    let reason = ledger.reason_of(record);
    let (cluster, flavors, epoch, admitted_at) = match &record.reservation {
        Some(r) => (
            r.assignment.cluster.clone(),
            r.assignment
                .pod_sets
                .iter()
                .map(|ps| pb::PodSetFlavors {
                    name: ps.name.clone(),
                    count: ps.count,
                    flavors: ps.flavors.clone().into_iter().collect(),
                    nodes: ps
                        .nodes
                        .iter()
                        .map(|p| format!("{}={}", p.node, p.count))
                        .collect(),
                })
                .collect(),
            r.epoch,
            r.admitted_at.millis(),
        ),
        None => (String::new(), Vec::new(), 0, 0),
    };
    let mut reason_text = reason
        .map(|r| with_names(ledger, &r.message).into_owned())
        .unwrap_or_default();
    if let Some(stop) = record
        .reservation
        .as_ref()
        .and_then(|r| r.stopping.as_ref())
    {
        reason_text = format!("stopping: {}", with_names(ledger, stop));
    }
    pb::WorkloadStatus {
        id: record.id,
        namespace: w.namespace.clone(),
        name: w.name.clone(),
        queue: w.spec.queue_name.clone(),
        cluster_queue,
        priority,
        priority_class: w.spec.priority_class_name.clone().unwrap_or_default(),
        priority_source: priority_source(ledger, w),
        submitted_by: w
            .labels
            .get(fleetq_model::workload::SUBMITTED_BY_LABEL)
            .cloned()
            .unwrap_or_default(),
        state: record.state.as_str().to_string(),
        cluster,
        flavors,
        reason_kind: reason.map(|r| format!("{:?}", r.kind)).unwrap_or_default(),
        reason: reason_text,
        epoch,
        created_at_ms: record.created_at.millis(),
        admitted_at_ms: admitted_at,
        cancel_requested: record.cancel_requested,
        history: record
            .history
            .iter()
            .map(|e| pb::StateEvent {
                at_ms: e.at.millis(),
                state: e.state.as_str().to_string(),
                message: with_names(ledger, &e.message).into_owned(),
            })
            .collect(),
        requests: requests_summary(record),
        position: 0,
        local_queue_position: 0,
        topology_requests: w
            .spec
            .pod_sets
            .iter()
            .filter_map(|ps| {
                let request = ps.topology_request.as_ref()?;
                Some(format!("{}: {request}", ps.name))
            })
            .collect(),
        workload_json: String::new(),
    }
}

/// `message` for people: the ledger names a preemptor by id ("preempted
/// (InClusterQueue) to admit workload 7", in the victim's history, its
/// stopping reason and its requeue reason); this names it by
/// namespace/name, or keeps the id of one already removed.
pub fn with_names<'a>(ledger: &Ledger, message: &'a str) -> Cow<'a, str> {
    const MARK: &str = "to admit workload ";
    if !message.contains(MARK) {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len() + 16);
    let mut rest = message;
    while let Some(i) = rest.find(MARK) {
        let (head, tail) = rest.split_at(i + MARK.len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let (id, after) = tail.split_at(digits);
        match id
            .parse::<WorkloadId>()
            .ok()
            .and_then(|id| ledger.workload(id))
        {
            Some(r) => out.push_str(&r.workload.key()),
            None => out.push_str(id),
        }
        rest = after;
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The ClusterQueue a workload is charged to or queued in, and its
/// priority: its reservation's, else its pending entry's, else what the
/// configuration would bind it to now (empty and 0 when it binds to
/// nothing). Borrowed where the ledger holds it, so filtering a listing by
/// ClusterQueue costs no allocation per workload.
pub fn binding_of<'a>(ledger: &'a Ledger, record: &'a WorkloadRecord) -> (Cow<'a, str>, i32) {
    if let Some(r) = &record.reservation {
        return (Cow::Borrowed(r.cluster_queue.as_str()), r.priority);
    }
    if let Some(p) = ledger.snapshot().get_pending(record.id) {
        return (Cow::Borrowed(p.cluster_queue.as_str()), p.priority);
    }
    match ledger.state().config.bind_workload(&record.workload) {
        Ok(b) => (Cow::Owned(b.cluster_queue), b.priority),
        Err(_) => (Cow::Borrowed(""), 0),
    }
}

/// Where a workload's priority comes from, as `describe` says it: the
/// kind of class it names, or the `globalDefault` PriorityClass.
fn priority_source(ledger: &Ledger, w: &fleetq_model::Workload) -> String {
    if w.spec.priority_class_name.is_some() {
        return w.spec.priority_class_source.kind().to_string();
    }
    ledger
        .state()
        .config
        .default_priority_class()
        .map(|pc| format!("globalDefault PriorityClass {}", pc.name))
        .unwrap_or_default()
}

/// Pending workloads of a ClusterQueue in admission order: priority, then
/// age, then id (admission fair sharing may interleave LocalQueues).
pub fn pending_order(ledger: &Ledger, cluster_queue: &str) -> Vec<WorkloadId> {
    let mut keys: Vec<_> = ledger
        .snapshot()
        .pending()
        .filter(|p| p.cluster_queue == cluster_queue)
        .map(|p| (Reverse(p.priority), p.created_at, p.id))
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|(_, _, id)| id).collect()
}

/// 1-based position of a pending workload in its ClusterQueue, 0 if none.
pub fn position(ledger: &Ledger, id: WorkloadId) -> u64 {
    let Some(p) = ledger.snapshot().get_pending(id) else {
        return 0;
    };
    let key = (Reverse(p.priority), p.created_at, p.id);
    1 + ledger
        .snapshot()
        .pending()
        .filter(|o| o.cluster_queue == p.cluster_queue)
        .filter(|o| (Reverse(o.priority), o.created_at, o.id) < key)
        .count() as u64
}

/// Positions of many pending workloads, each ClusterQueue's order worked
/// out once: [`position`] scans every pending workload per call, so
/// rendering a position for each of N pending workloads (a watch's first
/// look) would cost N x pending while the state machine is held.
pub struct QueuePositions<'a> {
    ledger: &'a Ledger,
    queues: HashMap<String, HashMap<WorkloadId, u64>>,
}

impl<'a> QueuePositions<'a> {
    pub fn new(ledger: &'a Ledger) -> QueuePositions<'a> {
        QueuePositions {
            ledger,
            queues: HashMap::new(),
        }
    }

    /// The same as [`position`].
    pub fn of(&mut self, id: WorkloadId) -> u64 {
        let Some(p) = self.ledger.snapshot().get_pending(id) else {
            return 0;
        };
        if !self.queues.contains_key(&p.cluster_queue) {
            let order = pending_order(self.ledger, &p.cluster_queue);
            self.queues.insert(
                p.cluster_queue.clone(),
                order.into_iter().zip(1..).collect(),
            );
        }
        self.queues
            .get(&p.cluster_queue)
            .and_then(|order| order.get(&id))
            .copied()
            .unwrap_or(0)
    }
}

/// 1-based position of a pending workload among those of its LocalQueue,
/// in its ClusterQueue's admission order; 0 if not pending.
pub fn local_queue_position(ledger: &Ledger, id: WorkloadId) -> u64 {
    let Some(p) = ledger.snapshot().get_pending(id) else {
        return 0;
    };
    let key = (Reverse(p.priority), p.created_at, p.id);
    1 + ledger
        .snapshot()
        .pending()
        .filter(|o| o.cluster_queue == p.cluster_queue && o.local_queue == p.local_queue)
        .filter(|o| (Reverse(o.priority), o.created_at, o.id) < key)
        .count() as u64
}

pub fn matches_state(record: &WorkloadRecord, state: &str) -> bool {
    state.is_empty() || record.state.as_str().eq_ignore_ascii_case(state)
}

/// One (flavor, resource) quota cell of a ClusterQueue, in milli-units.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaCell {
    pub flavor: String,
    pub resource: String,
    pub nominal: u64,
    /// Quota charged to the queue (stopping workloads included).
    pub usage: u64,
    /// Usage beyond the nominal quota: taken from the cohort.
    pub borrowed: u64,
    /// Unused nominal quota its cohort siblings are borrowing (within the
    /// lending limit).
    pub lent: u64,
    /// What a workload of this queue could still get now.
    pub available: u64,
    pub borrowing_limit: Option<u64>,
    pub lending_limit: Option<u64>,
}

/// The quota cells of ClusterQueue `name` (those it has a quota line
/// for), in cell order; `None` if there is no such ClusterQueue.
pub fn quota_cells(ledger: &Ledger, name: &str) -> Option<Vec<QuotaCell>> {
    let snapshot = ledger.snapshot();
    let tree = snapshot.tree();
    let node = tree.cluster_queue(name)?;
    let usage = snapshot.usage();
    // Quota the siblings borrow, which this queue may be lending.
    let siblings: Vec<_> = tree.nodes[node]
        .parent
        .map(|parent| tree.cluster_queues_under(parent))
        .unwrap_or_default();
    let mut cells = Vec::new();
    for (fr_id, fr) in tree.cells.iter().enumerate() {
        let Some(limits) = tree.nodes[node].limits.get(fr_id).and_then(|l| l.as_ref()) else {
            continue;
        };
        let nominal = tree.nominal(node, fr_id);
        let used = usage.get(node, fr_id);
        let borrowed = used.saturating_sub(nominal);
        let others_borrow: u64 = siblings
            .iter()
            .filter(|&&s| s != node)
            .map(|&s| usage.get(s, fr_id).saturating_sub(tree.nominal(s, fr_id)))
            .sum();
        let lending_limit = limits.lending_limit.unwrap_or(nominal);
        let lent = nominal
            .saturating_sub(used)
            .min(lending_limit)
            .min(others_borrow);
        cells.push(QuotaCell {
            flavor: fr.flavor.clone(),
            resource: fr.resource.clone(),
            nominal,
            usage: used,
            borrowed,
            lent,
            available: tree.available(usage, node, fr_id),
            borrowing_limit: limits.borrowing_limit,
            lending_limit: limits.lending_limit,
        });
    }
    Some(cells)
}

pub fn cluster_queue_status(ledger: &Ledger, name: &str) -> Option<pb::ClusterQueueStatus> {
    let cq = ledger.state().config.cluster_queues.get(name)?;
    let snapshot = ledger.snapshot();
    // What pending workloads ask for, per resource (any flavor).
    let mut pending: BTreeMap<String, Quantity> = BTreeMap::new();
    let mut pending_count = 0;
    for p in snapshot.pending().filter(|p| p.cluster_queue == name) {
        pending_count += 1;
        for ps in &p.workload.spec.pod_sets {
            for (r, q) in &ps.requests {
                let e = pending.entry(r.clone()).or_default();
                *e = e.saturating_add(q.saturating_mul(u64::from(ps.count)));
            }
        }
    }
    let q = Quantity::from_milli;
    let resources = quota_cells(ledger, name)?
        .into_iter()
        .map(|c| pb::ResourceUsage {
            pending: pending
                .get(&c.resource)
                .copied()
                .unwrap_or_default()
                .to_string(),
            flavor: c.flavor,
            resource: c.resource,
            nominal: q(c.nominal).to_string(),
            usage: q(c.usage).to_string(),
            borrowed: q(c.borrowed).to_string(),
            lent: q(c.lent).to_string(),
            available: q(c.available).to_string(),
        })
        .collect();
    let admitted = ledger
        .state()
        .workloads
        .values()
        .filter(|w| {
            w.state.is_reserved()
                && w.reservation
                    .as_ref()
                    .is_some_and(|r| r.cluster_queue == name)
        })
        .count() as u64;
    Some(pb::ClusterQueueStatus {
        name: name.to_string(),
        cohort: cq.spec.cohort.clone().unwrap_or_default(),
        resources,
        pending: pending_count,
        admitted,
        spec_json: serde_json::to_string(cq).unwrap_or_default(),
        reason: ledger
            .state()
            .queue_reasons
            .get(name)
            .map(|r| r.message.clone())
            .unwrap_or_default(),
    })
}

pub fn cluster_status(ledger: &Ledger, name: &str) -> Option<pb::ClusterStatus> {
    let record = ledger.state().clusters.get(name)?;
    let snapshot = ledger.snapshot();
    let table = snapshot.cluster_table();
    let index = table.index_of(name);
    let mut capacity = Vec::new();
    for (flavor, resources) in &record.cluster.capacity {
        for (resource, qty) in resources {
            let assigned = match (index, snapshot.tree().cell_of(flavor, resource)) {
                (Some(c), Some(fr)) => snapshot.cluster_usage().get(c, fr),
                _ => 0,
            };
            capacity.push(pb::FlavorCapacity {
                flavor: flavor.clone(),
                resource: resource.clone(),
                capacity: qty.to_string(),
                assigned: Quantity::from_milli(assigned).to_string(),
            });
        }
    }
    let workloads = ledger
        .state()
        .workloads
        .values()
        .filter(|w| {
            w.reservation
                .as_ref()
                .is_some_and(|r| r.assignment.cluster == name)
        })
        .count() as u64;
    Some(pb::ClusterStatus {
        name: name.to_string(),
        state: format!("{:?}", record.cluster.state),
        labels: record.cluster.labels.clone().into_iter().collect(),
        capacity,
        workloads,
        lease_policy: format!("{:?}", record.lease_policy),
        nodes: node_statuses(ledger, name),
    })
}

/// Each node of cluster `name` with what fleetq assigned on it.
fn node_statuses(ledger: &Ledger, name: &str) -> Vec<pb::ClusterNode> {
    let snapshot = ledger.snapshot();
    let table = snapshot.cluster_table();
    let Some(c) = table.index_of(name) else {
        return Vec::new();
    };
    let info = &table.clusters[c];
    let used = snapshot.node_usage().of(c);
    info.cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(n, node)| pb::ClusterNode {
            name: node.name.clone(),
            flavor: node.flavor.clone(),
            labels: node.labels.clone().into_iter().collect(),
            unschedulable: node.unschedulable,
            devices: node
                .allocatable
                .iter()
                .map(|(resource, q)| pb::FlavorCapacity {
                    flavor: node.flavor.clone(),
                    resource: resource.clone(),
                    capacity: q.to_string(),
                    assigned: Quantity::from_milli(
                        used.get(n)
                            .and_then(|u| u.get(resource))
                            .copied()
                            .unwrap_or(0),
                    )
                    .to_string(),
                })
                .collect(),
        })
        .collect()
}

/// A fingerprint of what a watcher sees change.
pub fn fingerprint(record: &WorkloadRecord) -> (WorkloadState, usize, Option<String>) {
    (
        record.state,
        record.history.len(),
        record.reason.as_ref().map(|r| r.message.clone()),
    )
}
