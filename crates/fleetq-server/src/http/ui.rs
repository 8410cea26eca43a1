//! The web dashboard (docs/dashboard.md): `/ui`, one self-contained HTML page
//! (inline CSS and vanilla JavaScript, no build step, nothing fetched from
//! elsewhere), and the JSON it polls every second, `/api/v1/overview`.
//!
//! The overview is this node's view: its Raft status and its local replica
//! of the ledger, read without a Raft read barrier. On a follower it can
//! trail the leader by the entries not applied yet, like `fleetq status`
//! against that node; a dashboard that refreshes every second does not
//! need linearizable reads, and any node can serve it while the group has
//! no leader (which is when one wants to look). The Raft section says
//! which node answered and at which applied index.
//!
//! What it shows:
//!
//! - `raft`: node id and role, term, leader, log/commit/applied/snapshot
//!   indexes, members (the leader adds how far each has replicated) and the
//!   state hash (recomputed at most every second and never more than a
//!   twentieth of the time, since hashing a large ledger takes a while;
//!   `stateHashIndex` says which applied index it is of).
//! - `clusters`: state, capacity and assigned per (flavor, resource), MIG
//!   slices marked, and the workloads holding reservations there.
//! - `clusterQueues`: cohort, per (flavor, resource) nominal, usage,
//!   borrowed, lent (as `fleetq describe cq`), pending and admitted counts.
//! - `cohorts`: members, quota of the subtree, what its ClusterQueues use and
//!   what it borrows from its parent.
//! - `pending`: pending workloads with their reasons, in admission order
//!   (priority, then age, then id: the order of
//!   [`status::pending_order`]), the first [`PENDING_LIMIT`].
//! - `events`: the last [`EVENT_LIMIT`] admissions, preemptions, evictions
//!   and ends, from the workloads' histories.
//!
//! Amounts are in Kueue's units (GPUs, cores, bytes) as JSON numbers.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fleetq_ledger::raft::Raft;
use fleetq_ledger::record::Event;
use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{Ledger, WorkloadRecord, WorkloadState};
use fleetq_model::resources::{is_mig, MIG_PREFIX};
use fleetq_model::Timestamp;
use fleetq_scheduler::nodes;
use fleetq_scheduler::quota::NodeKind;
use fleetq_scheduler::WorkloadId;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;

use crate::agents::leases::LeaseTable;
use crate::census::Census;
use crate::clock::SharedClock;
use crate::http::scrape::RaftSample;
use crate::node::Node;
use crate::status;

/// Where the page is served.
pub const PAGE_PATH: &str = "/ui";
/// Where the page's data is served.
pub const OVERVIEW_PATH: &str = "/api/v1/overview";
/// Pending workloads listed (the total is reported too).
pub const PENDING_LIMIT: usize = 200;
/// Recent events listed.
pub const EVENT_LIMIT: usize = 50;
/// Workloads listed per cluster (the total is reported too).
pub const CLUSTER_WORKLOAD_LIMIT: usize = 100;

const PAGE: &str = include_str!("ui/index.html");

/// The page: static, the same on every node.
pub fn page() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(PAGE.as_bytes())));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Everything is inline and only this origin is ever fetched.
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
             frame-ancestors 'none'",
        ),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// What the dashboard reads: one node's Raft, ledger replica, leases and
/// clock.
pub struct Dashboard {
    node_id: u64,
    raft: Raft,
    handle: LedgerHandle,
    leases: LeaseTable,
    clock: SharedClock,
    hash: Mutex<Option<HashCache>>,
}

struct HashCache {
    index: u64,
    hash: String,
    computed: Instant,
    took: Duration,
}

impl HashCache {
    /// Whether to hash again at `index`: it moved, and hashing again now
    /// keeps it under a twentieth of the time (and at most once a second).
    fn stale(&self, index: u64) -> bool {
        self.index != index
            && self.computed.elapsed() >= (self.took * 20).max(Duration::from_secs(1))
    }
}

impl Dashboard {
    pub fn new(node: &Node) -> Dashboard {
        Dashboard {
            node_id: node.id,
            raft: node.raft.clone(),
            handle: node.handle.clone(),
            leases: node.leases.clone(),
            clock: Arc::clone(&node.clock),
            hash: Mutex::new(None),
        }
    }

    /// `/api/v1/overview` as JSON.
    /// The overview as `viewer` may see it: every cluster-wide figure,
    /// and the pending workloads and events of the namespaces it may read.
    pub fn overview_response(&self, viewer: &crate::guard::auth::Viewer) -> Response<Full<Bytes>> {
        let mut overview = self.overview();
        overview
            .pending
            .workloads
            .retain(|w| viewer.sees(&w.namespace));
        overview.events.retain(|e| viewer.sees(&e.namespace));
        // Placed workloads too: the count per cluster stays, the names go.
        for cluster in &mut overview.clusters {
            cluster.workloads.retain(|w| viewer.sees(&w.namespace));
        }
        // The state hash is for those who may check replicas against each
        // other (as the API gives it to admins only).
        if !matches!(viewer, crate::guard::auth::Viewer::All) {
            overview.raft.state_hash.clear();
        }
        let (status, body) = match serde_json::to_vec(&overview) {
            Ok(body) => (StatusCode::OK, body),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{{\"error\":{:?}}}", format!("overview: {e}")).into_bytes(),
            ),
        };
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }

    /// This node's view of the Raft group and the ledger.
    pub fn overview(&self) -> Overview {
        let metrics = self.raft.metrics().borrow().clone();
        let now = self.clock.now();
        let sample = RaftSample::from_metrics(&metrics);
        let read = Dashboard::read_ledger(&self.handle, self.hash_due());
        let (ledger, applied) = (read.overview, read.applied);
        let hash = self.state_hash(read.hash, applied);
        let membership = metrics.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, node)| {
                let matched = metrics
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(id))
                    .map(|l| l.map_or(0, |l| l.index));
                Member {
                    id: *id,
                    addr: node.addr.clone(),
                    voter: voters.contains(id),
                    leader: metrics.current_leader == Some(*id),
                    this_node: *id == self.node_id,
                    matched_index: if *id == self.node_id { None } else { matched },
                }
            })
            .collect();
        let leases: BTreeMap<String, f64> = if sample.is_leader {
            self.leases
                .ages()
                .into_iter()
                .map(|(c, age)| (c, age.as_secs_f64()))
                .collect()
        } else {
            BTreeMap::new()
        };
        let mut clusters = ledger.clusters;
        for c in &mut clusters {
            c.lease_age_seconds = leases.get(&c.name).copied();
        }
        let leader_addr = metrics
            .current_leader
            .and_then(|l| membership.get_node(&l).map(|n| n.addr.clone()))
            .unwrap_or_default();
        Overview {
            now_ms: now.millis(),
            raft: RaftView {
                node_id: self.node_id,
                state: format!("{:?}", metrics.state),
                running: metrics.running_state.as_ref().err().map(|e| e.to_string()),
                term: sample.term,
                leader_id: metrics.current_leader,
                leader_addr,
                last_log_index: sample.last_log_index,
                commit_index: sample.commit_index,
                applied_index: applied,
                snapshot_index: sample.snapshot_index,
                state_hash: hash.0,
                state_hash_index: hash.1,
                members,
            },
            clusters,
            cluster_queues: ledger.cluster_queues,
            cohorts: ledger.cohorts,
            pending: ledger.pending,
            events: ledger.events,
            totals: ledger.totals,
        }
    }

    /// Whether the cached state hash is missing or stale at the index
    /// applied now.
    fn hash_due(&self) -> bool {
        let applied = *self.handle.applied().borrow();
        let cache = self.hash.lock().unwrap_or_else(|e| e.into_inner());
        cache.as_ref().is_none_or(|c| c.stale(applied))
    }

    /// What the overview reads from the ledger, and the state hash when
    /// `with_hash` asks for one. Both read a copy of the ledger: the lock
    /// is held only to take it (O(1)); the pass over the records and the
    /// hash (seconds at 1M workloads) run while apply goes on.
    pub fn read_ledger(handle: &LedgerHandle, with_hash: bool) -> LedgerRead {
        let (ledger, applied) = handle.view();
        let hash = with_hash.then(|| {
            let started = Instant::now();
            (ledger.state_hash(), started.elapsed())
        });
        LedgerRead {
            overview: LedgerOverview::read(&ledger),
            applied,
            hash,
        }
    }

    /// The state hash (and the applied index it is of): `fresh`, just
    /// computed at `applied` with the time it took, becomes the cache;
    /// otherwise the cache's.
    fn state_hash(&self, fresh: Option<(String, Duration)>, applied: u64) -> (String, u64) {
        let mut cache = self.hash.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((hash, took)) = fresh {
            *cache = Some(HashCache {
                index: applied,
                hash,
                computed: Instant::now(),
                took,
            });
        }
        cache
            .as_ref()
            .map_or_else(Default::default, |c| (c.hash.clone(), c.index))
    }
}

/// [`Dashboard::read_ledger`]'s answer.
pub struct LedgerRead {
    pub overview: LedgerOverview,
    pub applied: u64,
    /// The state hash and the time it took, when asked for.
    pub hash: Option<(String, Duration)>,
}

/// `/api/v1/overview`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// This node's clock (ages on the page are computed against it).
    pub now_ms: u64,
    pub raft: RaftView,
    pub clusters: Vec<ClusterView>,
    pub cluster_queues: Vec<ClusterQueueView>,
    pub cohorts: Vec<CohortView>,
    pub pending: PendingView,
    pub events: Vec<EventView>,
    pub totals: Totals,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftView {
    pub node_id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner`, `Shutdown`.
    pub state: String,
    /// Why Raft stopped, if it did.
    pub running: Option<String>,
    pub term: u64,
    pub leader_id: Option<u64>,
    pub leader_addr: String,
    pub last_log_index: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
    pub state_hash: String,
    pub state_hash_index: u64,
    pub members: Vec<Member>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub voter: bool,
    pub leader: bool,
    pub this_node: bool,
    /// On the leader: the last log index stored there (0 if unknown yet).
    pub matched_index: Option<u64>,
}

/// What the ledger contributes to the overview.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerOverview {
    pub clusters: Vec<ClusterView>,
    pub cluster_queues: Vec<ClusterQueueView>,
    pub cohorts: Vec<CohortView>,
    pub pending: PendingView,
    pub events: Vec<EventView>,
    pub totals: Totals,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub workloads: u64,
    pub pending: u64,
    pub admitted: u64,
    pub running: u64,
    pub finished: u64,
    /// Since the ledger began (the ledger's counters).
    pub admissions: u64,
    pub preemptions: u64,
    pub evictions: u64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterView {
    pub name: String,
    /// `Ready`, `Unreachable`, `Lost`, `Draining`.
    pub state: String,
    pub labels: BTreeMap<String, String>,
    pub lease_policy: String,
    /// Seconds since the leader heard the cluster's agent (only when this
    /// node leads; simulated clusters hold no lease).
    pub lease_age_seconds: Option<f64>,
    pub resources: Vec<ClusterResource>,
    /// Workloads holding a reservation here, oldest admission first.
    pub workloads: Vec<PlacedWorkload>,
    pub workload_count: u64,
    /// Its nodes, where its agent reports them (issue 26): the dashboard
    /// draws each node's devices, grouped by `group`.
    pub nodes: Vec<NodeView>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub name: String,
    /// The node's domain above the host in its flavor's Topology
    /// (`topology.fleetq.dev/rack=2`), empty without one: what the
    /// dashboard groups nodes by.
    pub group: String,
    pub flavor: String,
    /// Cordoned, NotReady, or gone while pods still run there.
    pub unschedulable: bool,
    pub devices: Vec<NodeDevice>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDevice {
    pub resource: String,
    pub capacity: f64,
    pub assigned: f64,
    /// Who holds it: `namespace/name` and units, in admission order.
    pub holders: Vec<(String, f64)>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResource {
    pub flavor: String,
    pub resource: String,
    /// The MIG profile (`1g.10gb`) of a MIG slice resource.
    pub mig_profile: Option<String>,
    pub capacity: f64,
    pub assigned: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacedWorkload {
    pub id: WorkloadId,
    pub namespace: String,
    pub name: String,
    pub cluster_queue: String,
    /// `Admitted` (not reported running yet) or `Running`.
    pub state: String,
    /// Why it is being stopped, if it is (preempted, cancelled, evicted).
    pub stopping: Option<String>,
    pub priority: i32,
    pub admitted_at_ms: u64,
    pub usage: Vec<Amount>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Amount {
    pub flavor: String,
    pub resource: String,
    pub amount: f64,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueView {
    pub name: String,
    pub cohort: Option<String>,
    pub pending: u64,
    pub admitted: u64,
    /// A reason that holds for the whole queue, if any.
    pub reason: Option<String>,
    pub resources: Vec<QuotaView>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaView {
    pub flavor: String,
    pub resource: String,
    pub nominal: f64,
    pub usage: f64,
    pub borrowed: f64,
    pub lent: f64,
    pub available: f64,
    pub borrowing_limit: Option<f64>,
    pub lending_limit: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CohortView {
    pub name: String,
    pub parent: Option<String>,
    pub cluster_queues: Vec<String>,
    pub cohorts: Vec<String>,
    pub resources: Vec<CohortQuota>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CohortQuota {
    pub flavor: String,
    pub resource: String,
    /// Quota of the subtree: its own plus what its members lend it.
    pub quota: f64,
    /// What the ClusterQueues under it use.
    pub usage: f64,
    /// What it takes from its parent cohort beyond its quota.
    pub borrowed: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    pub total: u64,
    /// The first [`PENDING_LIMIT`] in admission order.
    pub workloads: Vec<PendingRow>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRow {
    pub id: WorkloadId,
    pub namespace: String,
    pub name: String,
    /// Its LocalQueue.
    pub queue: String,
    /// Empty when its LocalQueue leads to no ClusterQueue.
    pub cluster_queue: String,
    pub priority: i32,
    pub priority_class: String,
    /// 1-based position in its ClusterQueue, 0 if not queued in one.
    pub position: u64,
    pub reason_kind: String,
    pub reason: String,
    pub requests: String,
    pub created_at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub at_ms: u64,
    /// `Admitted`, `Preempted`, `Evicted`, `Requeued`, `Succeeded`,
    /// `Failed`, `Cancelled`.
    pub kind: String,
    pub id: WorkloadId,
    pub namespace: String,
    pub name: String,
    pub message: String,
}

/// Kueue's units from milli-units.
fn units(milli: u64) -> f64 {
    milli as f64 / 1000.0
}

/// The dashboard's kind of a history entry; `None` for those it leaves
/// out (submitted, running, cancel requested).
fn event_kind(e: &Event) -> Option<&'static str> {
    let m = e.message.as_str();
    match e.state {
        WorkloadState::Succeeded => Some("Succeeded"),
        WorkloadState::Failed => Some("Failed"),
        WorkloadState::Cancelled => Some("Cancelled"),
        _ if m.starts_with("preempted") => Some("Preempted"),
        _ if m.starts_with("requeued") => Some("Requeued"),
        WorkloadState::Admitted if m.starts_with("admitted") => Some("Admitted"),
        WorkloadState::Admitted | WorkloadState::Running if m.contains("not reported running") => {
            Some("Evicted")
        }
        _ => None,
    }
}

impl LedgerOverview {
    /// Reads the overview from `ledger`.
    pub fn read(ledger: &Ledger) -> LedgerOverview {
        let state = ledger.state();
        let snapshot = ledger.snapshot();
        let tree = snapshot.tree();
        let usage = snapshot.usage();

        // One pass over the records: what sits on each cluster, counts,
        // the unbound pending ones and the newest events.
        let mut placed: BTreeMap<&str, Vec<(Timestamp, WorkloadId, &WorkloadRecord)>> =
            BTreeMap::new();
        let mut unbound: Vec<&WorkloadRecord> = Vec::new();
        let mut totals = Totals::default();
        // Min-heap of the newest EVENT_LIMIT: (at, id, index in history).
        let mut newest: BinaryHeap<Reverse<(Timestamp, WorkloadId, usize)>> = BinaryHeap::new();
        for record in state.workloads.values() {
            totals.workloads += 1;
            match record.state {
                WorkloadState::Pending => {
                    totals.pending += 1;
                    if snapshot.get_pending(record.id).is_none() {
                        unbound.push(record);
                    }
                }
                WorkloadState::Admitted => totals.admitted += 1,
                WorkloadState::Running => totals.running += 1,
                _ => totals.finished += 1,
            }
            if let Some(r) = &record.reservation {
                placed
                    .entry(r.assignment.cluster.as_str())
                    .or_default()
                    .push((r.admitted_at, record.id, record));
            }
            for (i, e) in record.history.iter().enumerate() {
                if event_kind(e).is_none() {
                    continue;
                }
                let key = Reverse((e.at, record.id, i));
                if newest.len() < EVENT_LIMIT {
                    newest.push(key);
                } else if newest.peek().is_some_and(|min| key < *min) {
                    newest.pop();
                    newest.push(key);
                }
            }
        }
        let counters = ledger.counters();
        totals.admissions = counters.admissions;
        totals.preemptions = counters.preemptions;
        totals.evictions = counters.evictions.values().flat_map(|m| m.values()).sum();

        // Newest first (ascending order of the reversed keys).
        let events: Vec<EventView> = newest
            .into_sorted_vec()
            .into_iter()
            .filter_map(|Reverse((_, id, i))| {
                let record = ledger.workload(id)?;
                let e = record.history.get(i)?;
                Some(EventView {
                    at_ms: e.at.millis(),
                    kind: event_kind(e)?.to_string(),
                    id,
                    namespace: record.workload.namespace.clone(),
                    name: record.workload.name.clone(),
                    message: crate::status::with_names(ledger, &e.message).into_owned(),
                })
            })
            .collect();

        // Clusters.
        let table = snapshot.cluster_table();
        let clusters = state
            .clusters
            .values()
            .map(|record| {
                let name = record.cluster.name.as_str();
                let index = table.index_of(name);
                let mut resources = Vec::new();
                for (flavor, list) in &record.cluster.capacity {
                    for (resource, qty) in list {
                        let assigned = match (index, tree.cell_of(flavor, resource)) {
                            (Some(c), Some(fr)) => snapshot.cluster_usage().get(c, fr),
                            _ => 0,
                        };
                        resources.push(ClusterResource {
                            flavor: flavor.clone(),
                            resource: resource.clone(),
                            mig_profile: is_mig(resource)
                                .then(|| resource.trim_start_matches(MIG_PREFIX).to_string()),
                            capacity: units(qty.milli()),
                            assigned: units(assigned),
                        });
                    }
                }
                let mut here = placed.remove(name).unwrap_or_default();
                here.sort_by_key(|(at, id, _)| (*at, *id));
                let workload_count = here.len() as u64;
                let workloads: Vec<PlacedWorkload> = here
                    .into_iter()
                    .take(CLUSTER_WORKLOAD_LIMIT)
                    .filter_map(|(_, _, w)| {
                        let r = w.reservation.as_ref()?;
                        Some(PlacedWorkload {
                            id: w.id,
                            namespace: w.workload.namespace.clone(),
                            name: w.workload.name.clone(),
                            cluster_queue: r.cluster_queue.clone(),
                            state: w.state.as_str().to_string(),
                            stopping: r
                                .stopping
                                .as_deref()
                                .map(|m| crate::status::with_names(ledger, m).into_owned()),
                            priority: r.priority,
                            admitted_at_ms: r.admitted_at.millis(),
                            usage: r
                                .assignment
                                .usage
                                .iter()
                                .map(|(fr, q)| Amount {
                                    flavor: fr.flavor.clone(),
                                    resource: fr.resource.clone(),
                                    amount: units(q.milli()),
                                })
                                .collect(),
                        })
                    })
                    .collect();
                let nodes = node_views(ledger, &record.cluster, &workloads);
                ClusterView {
                    nodes,
                    name: name.to_string(),
                    state: format!("{:?}", record.cluster.state),
                    labels: record.cluster.labels.clone(),
                    lease_policy: format!("{:?}", record.lease_policy),
                    lease_age_seconds: None,
                    resources,
                    workloads,
                    workload_count,
                }
            })
            .collect();

        // Pending, in admission order, with positions per ClusterQueue.
        let mut queued: Vec<_> = snapshot
            .pending()
            .map(|p| {
                (
                    Reverse(p.priority),
                    p.created_at,
                    p.id,
                    p.cluster_queue.as_str(),
                )
            })
            .collect();
        queued.sort_unstable();
        let mut last_position: BTreeMap<&str, u64> = BTreeMap::new();
        let mut order: Vec<(WorkloadId, u64)> = Vec::with_capacity(queued.len());
        for (_, _, id, cq) in &queued {
            let n = last_position.entry(cq).or_default();
            *n += 1;
            order.push((*id, *n));
        }
        unbound.sort_by_key(|r| (r.created_at, r.id));
        let rows = order
            .into_iter()
            .chain(unbound.iter().map(|r| (r.id, 0)))
            .take(PENDING_LIMIT)
            .filter_map(|(id, position)| {
                let record = ledger.workload(id)?;
                let s = status::workload_status(ledger, record);
                Some(PendingRow {
                    id,
                    namespace: s.namespace,
                    name: s.name,
                    queue: s.queue,
                    cluster_queue: s.cluster_queue,
                    priority: s.priority,
                    priority_class: s.priority_class,
                    position,
                    reason_kind: s.reason_kind,
                    reason: s.reason,
                    requests: s.requests,
                    created_at_ms: s.created_at_ms,
                })
            })
            .collect();
        let pending = PendingView {
            total: totals.pending,
            workloads: rows,
        };

        // ClusterQueues, counted as /metrics counts them.
        let census = Census::counts(ledger);
        let cluster_queues = state
            .config
            .cluster_queues
            .iter()
            .map(|(name, cq)| ClusterQueueView {
                name: name.clone(),
                cohort: cq.spec.cohort.clone(),
                pending: census.cluster_queue(name).pending(),
                admitted: census.cluster_queue(name).admitted,
                reason: state.queue_reasons.get(name).map(|r| r.message.clone()),
                resources: status::quota_cells(ledger, name)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| QuotaView {
                        flavor: c.flavor,
                        resource: c.resource,
                        nominal: units(c.nominal),
                        usage: units(c.usage),
                        borrowed: units(c.borrowed),
                        lent: units(c.lent),
                        available: units(c.available),
                        borrowing_limit: c.borrowing_limit.map(units),
                        lending_limit: c.lending_limit.map(units),
                    })
                    .collect(),
            })
            .collect();

        // Cohorts (those with an object and those only named).
        let cohorts = tree
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Cohort)
            .map(|(id, n)| {
                let members = tree.cluster_queues_under(id);
                let resources = tree
                    .cells
                    .iter()
                    .enumerate()
                    .filter(|(fr, _)| {
                        n.subtree_quota.get(*fr).is_some_and(|q| *q > 0)
                            || members.iter().any(|&m| usage.get(m, *fr) > 0)
                    })
                    .map(|(fr, cell)| {
                        let used: u64 = members.iter().map(|&m| usage.get(m, fr)).sum();
                        let quota = n.subtree_quota.get(fr).copied().unwrap_or(0);
                        CohortQuota {
                            flavor: cell.flavor.clone(),
                            resource: cell.resource.clone(),
                            quota: units(quota),
                            usage: units(used),
                            borrowed: units(usage.get(id, fr).saturating_sub(quota)),
                        }
                    })
                    .collect();
                let children = |kind: NodeKind| {
                    n.children
                        .iter()
                        .filter(|&&c| tree.nodes[c].kind == kind)
                        .map(|&c| tree.nodes[c].name.clone())
                        .collect::<Vec<_>>()
                };
                CohortView {
                    name: n.name.clone(),
                    parent: n.parent.map(|p| tree.nodes[p].name.clone()),
                    cluster_queues: children(NodeKind::ClusterQueue),
                    cohorts: children(NodeKind::Cohort),
                    resources,
                }
            })
            .collect();

        LedgerOverview {
            clusters,
            cluster_queues,
            cohorts,
            pending,
            events,
            totals,
        }
    }
}

/// The nodes of `cluster` as the dashboard draws them: each device
/// resource with what is assigned, and which of `shown` (the workloads
/// the cluster card lists) hold it, from their pods per node.
fn node_views(
    ledger: &Ledger,
    cluster: &fleetq_model::Cluster,
    shown: &[PlacedWorkload],
) -> Vec<NodeView> {
    let config = &ledger.state().config;
    let table = ledger.snapshot().cluster_table();
    let Some(c) = table.index_of(&cluster.name) else {
        return Vec::new();
    };
    let info = &table.clusters[c];
    let books = ledger.snapshot().node_usage().of(c);
    // Who holds what on each node: the scheduler's own per-node charges.
    let mut holders: BTreeMap<(usize, &str), Vec<(String, f64)>> = BTreeMap::new();
    for placed in shown {
        let Some(record) = ledger.workload(placed.id) else {
            continue;
        };
        let Some(r) = record.reservation.as_ref() else {
            continue;
        };
        let key = format!("{}/{}", placed.namespace, placed.name);
        for (n, resource, q) in nodes::charges(info, &record.workload, &r.assignment.pod_sets) {
            holders
                .entry((n, resource))
                .or_default()
                .push((key.clone(), units(q)));
        }
    }
    // The table's copy of the nodes: the books are indexed by it.
    info.cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(n, node)| {
            let group = nodes::levels_of(config, &node.flavor)
                .iter()
                .filter(|l| l.as_str() != fleetq_model::topology::HOSTNAME_LABEL)
                .filter_map(|l| node.labels.get(l).map(|v| format!("{l}={v}")))
                .collect::<Vec<_>>()
                .join(", ");
            let devices = node
                .allocatable
                .iter()
                .filter(|(r, _)| r.contains('/'))
                .map(|(resource, q)| NodeDevice {
                    resource: resource.clone(),
                    capacity: units(q.milli()),
                    assigned: units(
                        books
                            .get(n)
                            .and_then(|u| u.get(resource))
                            .copied()
                            .unwrap_or(0),
                    ),
                    holders: holders.remove(&(n, resource.as_str())).unwrap_or_default(),
                })
                .collect();
            NodeView {
                name: node.name.clone(),
                group,
                flavor: node.flavor.clone(),
                unschedulable: node.unschedulable,
                devices,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use fleetq_ledger::Submission;
    use fleetq_ledger::{AdmitBatch, Command, CycleId, LeasePolicy, Phase, Request, StatusReport};
    use fleetq_model::kueue::import_manifests;
    use fleetq_model::workload::{PodSet, WorkloadSpec};
    use fleetq_model::{Cluster, ClusterState, Quantity};
    use fleetq_scheduler::schedule;

    use super::*;

    const GPU: &str = "nvidia.com/gpu";
    const MIG: &str = "nvidia.com/mig-1g.10gb";

    /// team-a and team-b (8 GPUs, 7 MIG slices each) in cohort research;
    /// LocalQueues team-a and extra lead to team-a.
    const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
      - name: nvidia.com/mig-1g.10gb
        nominalQuota: 7
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
      - name: nvidia.com/mig-1g.10gb
        nominalQuota: 7
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: team-a
spec:
  clusterQueue: team-a
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: extra
spec:
  clusterQueue: team-a
"#;

    struct Harness {
        ledger: Ledger,
        now: u64,
        seq: u64,
    }

    impl Harness {
        fn new() -> Harness {
            let mut h = Harness {
                ledger: Ledger::default(),
                now: 1_000_000,
                seq: 0,
            };
            let objects = import_manifests(CONFIG)
                .unwrap_or_else(|e| panic!("{e:?}"))
                .into_iter()
                .map(|d| d.object)
                .collect();
            h.apply(Command::ApplyObjects { objects });
            let capacity = BTreeMap::from([(
                "h100-80gb".to_string(),
                BTreeMap::from([
                    (GPU.to_string(), Quantity::units(16)),
                    (MIG.to_string(), Quantity::units(7)),
                ]),
            )]);
            h.apply(Command::RegisterCluster {
                cluster: Cluster {
                    nodes: Vec::new(),
                    name: "east".into(),
                    labels: BTreeMap::from([("zone".to_string(), "a".to_string())]),
                    capacity,
                    state: ClusterState::Ready,
                },
                lease_policy: LeasePolicy::Fence,
            });
            h
        }

        fn apply(&mut self, command: Command) {
            self.now += 1_000;
            let r = self.ledger.apply(&Request {
                at: Timestamp(self.now),
                command,
            });
            assert!(r.is_ok(), "{r:?}");
        }

        fn submit(&mut self, queue: &str, name: &str, resource: &str, amount: u64) {
            let workload = fleetq_model::Workload {
                namespace: "default".into(),
                name: name.into(),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: queue.into(),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: BTreeMap::from([(resource.to_string(), Quantity::units(amount))]),
                        topology_request: None,
                    }],
                    ..WorkloadSpec::default()
                },
            };
            self.apply(Command::SubmitWorkloads {
                submissions: vec![Submission {
                    request_id: None,
                    workload: workload.into(),
                }],
                max_pending_per_local_queue: None,
                admit: Vec::new(),
            });
        }

        fn cycle(&mut self) {
            let d = schedule(
                self.ledger.snapshot(),
                Timestamp(self.now),
                self.ledger.scheduler_config(),
            );
            self.seq += 1;
            self.apply(Command::AdmitBatch(AdmitBatch {
                cycle: CycleId {
                    term: 0,
                    seq: self.seq,
                },
                admissions: d.admissions,
                preemptions: d.preemptions,
                reasons: d.pending.into_iter().collect(),
                queue_reasons: d.queue_reasons.into_iter().collect(),
            }));
        }

        fn report(&mut self, name: &str, phase: Phase) {
            let r = self
                .ledger
                .workload_by_name("default", name)
                .and_then(|w| w.reservation.clone().map(|r| (w.id, r)));
            let Some((id, r)) = r else {
                panic!("{name} holds no reservation");
            };
            self.apply(Command::ReportStatus {
                reports: vec![StatusReport {
                    cluster: r.assignment.cluster,
                    workload: id,
                    epoch: r.epoch,
                    phase,
                    message: String::new(),
                }],
            });
        }
    }

    /// a (12 GPUs: team-a borrows 4) and m (3 MIG slices) run, done ran
    /// and succeeded, c (8) waits for quota, d (2) and e (2) came after
    /// the last cycle, o's LocalQueue was deleted.
    fn busy() -> Harness {
        let mut h = Harness::new();
        h.submit("team-a", "done", GPU, 1);
        h.cycle();
        h.report("done", Phase::Running);
        h.report("done", Phase::Succeeded);
        h.submit("team-a", "a", GPU, 12);
        h.submit("team-a", "m", MIG, 3);
        h.cycle();
        h.report("a", Phase::Running);
        h.submit("team-a", "c", GPU, 8);
        h.cycle();
        h.submit("team-a", "d", GPU, 2);
        h.submit("team-a", "e", GPU, 2);
        h.submit("extra", "o", GPU, 1);
        h.apply(Command::DeleteObject {
            kind: "LocalQueue".into(),
            name: "default/extra".into(),
        });
        h
    }

    #[test]
    fn the_overview_reads_clusters_queues_cohorts_pending_and_events() {
        let h = busy();
        let o = LedgerOverview::read(&h.ledger);

        assert_eq!(o.clusters.len(), 1);
        let east = &o.clusters[0];
        assert_eq!((east.name.as_str(), east.state.as_str()), ("east", "Ready"));
        assert_eq!(east.labels.get("zone").map(String::as_str), Some("a"));
        let cell = |r: &str| {
            east.resources
                .iter()
                .find(|c| c.resource == r)
                .unwrap_or_else(|| panic!("no {r}"))
        };
        assert_eq!((cell(GPU).capacity, cell(GPU).assigned), (16.0, 12.0));
        assert_eq!(cell(GPU).mig_profile, None);
        assert_eq!((cell(MIG).capacity, cell(MIG).assigned), (7.0, 3.0));
        assert_eq!(cell(MIG).mig_profile.as_deref(), Some("1g.10gb"));
        let placed: Vec<(&str, &str)> = east
            .workloads
            .iter()
            .map(|w| (w.name.as_str(), w.state.as_str()))
            .collect();
        assert_eq!(placed, [("a", "Running"), ("m", "Admitted")]);
        assert_eq!(east.workload_count, 2);
        assert_eq!(east.workloads[0].usage[0].amount, 12.0);

        let a = &o.cluster_queues[0];
        assert_eq!(a.name, "team-a");
        assert_eq!(a.cohort.as_deref(), Some("research"));
        assert_eq!((a.admitted, a.pending), (2, 3));
        let gpu = &a.resources[0];
        assert_eq!(gpu.resource, GPU);
        assert_eq!(
            (gpu.nominal, gpu.usage, gpu.borrowed, gpu.lent),
            (8.0, 12.0, 4.0, 0.0)
        );
        let b = &o.cluster_queues[1];
        assert_eq!((b.resources[0].usage, b.resources[0].lent), (0.0, 4.0));

        assert_eq!(o.cohorts.len(), 1);
        let research = &o.cohorts[0];
        assert_eq!(research.name, "research");
        assert_eq!(research.cluster_queues, ["team-a", "team-b"]);
        let gpu = &research.resources[0];
        assert_eq!((gpu.quota, gpu.usage, gpu.borrowed), (16.0, 12.0, 0.0));

        // Pending in admission order with positions per ClusterQueue (the
        // same as `status::position`), the unbound one last.
        let names: Vec<(&str, u64)> = o
            .pending
            .workloads
            .iter()
            .map(|p| (p.name.as_str(), p.position))
            .collect();
        assert_eq!(names, [("c", 1), ("d", 2), ("e", 3), ("o", 0)]);
        for p in &o.pending.workloads {
            assert_eq!(p.position, status::position(&h.ledger, p.id), "{}", p.name);
        }
        assert_eq!(o.pending.total, 4);
        assert_eq!(o.pending.workloads[0].reason_kind, "WaitingForQuota");
        assert!(!o.pending.workloads[0].reason.is_empty());
        assert_eq!(o.pending.workloads[3].cluster_queue, "");
        assert_eq!(o.pending.workloads[3].reason_kind, "Misconfigured");

        // Events newest first: the admissions and the finish.
        let events: Vec<(&str, &str)> = o
            .events
            .iter()
            .map(|e| (e.kind.as_str(), e.name.as_str()))
            .collect();
        assert_eq!(
            events,
            [
                ("Admitted", "m"),
                ("Admitted", "a"),
                ("Succeeded", "done"),
                ("Admitted", "done")
            ]
        );
        assert!(o.events.windows(2).all(|w| w[0].at_ms >= w[1].at_ms));

        assert_eq!(o.totals.workloads, 7);
        assert_eq!(
            (
                o.totals.pending,
                o.totals.admitted,
                o.totals.running,
                o.totals.finished
            ),
            (4, 1, 1, 1)
        );
        assert_eq!(o.totals.admissions, 3);

        // The JSON the page reads: camelCase, amounts as numbers.
        let json = serde_json::to_value(&o).unwrap_or_default();
        assert_eq!(json["clusterQueues"][0]["resources"][0]["borrowed"], 4.0);
        assert_eq!(json["clusters"][0]["resources"][1]["migProfile"], "1g.10gb");
        assert_eq!(
            json["pending"]["workloads"][0]["reasonKind"],
            "WaitingForQuota"
        );
    }

    #[test]
    fn pending_and_events_are_capped_keeping_the_first_and_the_newest() {
        let mut h = Harness::new();
        for i in 0..(PENDING_LIMIT + 5) {
            h.submit("team-a", &format!("w{i:03}"), GPU, 100);
        }
        h.cycle();
        let o = LedgerOverview::read(&h.ledger);
        assert_eq!(o.pending.total as usize, PENDING_LIMIT + 5);
        assert_eq!(o.pending.workloads.len(), PENDING_LIMIT);
        assert_eq!(o.pending.workloads[0].name, "w000");
        assert_eq!(o.pending.workloads[0].position, 1);
        assert_eq!(
            o.pending.workloads[PENDING_LIMIT - 1].position,
            PENDING_LIMIT as u64
        );

        let mut h = Harness::new();
        for i in 0..(EVENT_LIMIT + 5) {
            h.submit("team-a", &format!("s{i:03}"), GPU, 1);
            h.cycle();
            h.report(&format!("s{i:03}"), Phase::Running);
            h.report(&format!("s{i:03}"), Phase::Succeeded);
        }
        let o = LedgerOverview::read(&h.ledger);
        assert_eq!(o.events.len(), EVENT_LIMIT);
        let last = format!("s{:03}", EVENT_LIMIT + 4);
        assert_eq!(
            (o.events[0].kind.as_str(), o.events[0].name.as_str()),
            ("Succeeded", last.as_str())
        );
    }

    #[test]
    fn history_entries_map_to_event_kinds() {
        let e = |state, message: &str| Event {
            at: Timestamp(1),
            state,
            message: message.into(),
        };
        use WorkloadState as S;
        let cases = [
            (e(S::Pending, "submitted"), None),
            (
                e(S::Admitted, "admitted by ClusterQueue a to cluster b"),
                Some("Admitted"),
            ),
            (e(S::Running, "running on cluster b"), None),
            (
                e(S::Running, "preempted (InCohortReclamation) to admit workload 7"),
                Some("Preempted"),
            ),
            (
                e(S::Pending, "requeued: preempted (InCohortReclamation) to admit workload 7"),
                Some("Requeued"),
            ),
            (
                e(
                    S::Admitted,
                    "not reported running within 5m of admission (eviction 1); requeued, backing off 1m; waiting for its executor to stop it",
                ),
                Some("Evicted"),
            ),
            (
                e(S::Running, "cancel requested; waiting for the executor to stop it"),
                None,
            ),
            (e(S::Succeeded, "simulated run completed"), Some("Succeeded")),
            (e(S::Failed, "deactivated"), Some("Failed")),
            (e(S::Cancelled, "cancelled while pending"), Some("Cancelled")),
        ];
        for (event, kind) in cases {
            assert_eq!(event_kind(&event), kind, "{event:?}");
        }
    }

    #[test]
    fn the_state_hash_is_recomputed_only_when_due() {
        let c = HashCache {
            index: 5,
            hash: "h".into(),
            computed: Instant::now(),
            took: Duration::from_millis(1),
        };
        assert!(!c.stale(5), "same index");
        assert!(!c.stale(6), "computed just now");
        let old = HashCache {
            computed: Instant::now() - Duration::from_secs(2),
            ..c
        };
        assert!(old.stale(6));
        assert!(!old.stale(5));
        let slow = HashCache {
            took: Duration::from_millis(500),
            ..old
        };
        assert!(!slow.stale(6), "a 500 ms hash waits 10 s");
    }

    #[test]
    fn the_page_is_self_contained() {
        let r = page();
        assert_eq!(
            r.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()),
            Some("text/html; charset=utf-8")
        );
        assert!(PAGE.contains(OVERVIEW_PATH));
        for external in ["src=\"http", "href=\"http", "@import", "url(http", "//cdn"] {
            assert!(!PAGE.contains(external), "the page refers to {external}");
        }
        // Text from the ledger goes in as text, never as markup.
        assert!(!PAGE.contains("innerHTML") && !PAGE.contains("insertAdjacentHTML"));
    }

    /// Issue 26, item 6: a cluster that reports its nodes shows each one,
    /// with its devices, who holds them, and unschedulable ones marked.
    #[test]
    fn the_overview_shows_each_node_and_who_holds_its_devices() {
        let mut h = Harness::new();
        let node = |name: &str, gpus: u64, unschedulable: bool| fleetq_model::Node {
            name: name.into(),
            labels: BTreeMap::from([("kubernetes.io/hostname".into(), name.into())]),
            flavor: "h100-80gb".into(),
            allocatable: BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
            unschedulable,
        };
        let capacity = BTreeMap::from([(
            "h100-80gb".to_string(),
            BTreeMap::from([(GPU.to_string(), Quantity::units(16))]),
        )]);
        h.apply(Command::RegisterCluster {
            cluster: Cluster {
                nodes: vec![
                    node("gpu-1", 8, false),
                    node("gpu-2", 8, false),
                    node("gpu-3", 8, true),
                ],
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity,
                state: ClusterState::Ready,
            },
            lease_policy: LeasePolicy::Fence,
        });
        h.submit("team-a", "a", GPU, 6);
        h.cycle();
        let o = LedgerOverview::read(&h.ledger);
        let east = &o.clusters[0];
        let names: Vec<(&str, bool)> = east
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.unschedulable))
            .collect();
        assert_eq!(names, [("gpu-1", false), ("gpu-2", false), ("gpu-3", true)]);
        let held: Vec<&NodeDevice> = east
            .nodes
            .iter()
            .map(|n| &n.devices[0])
            .filter(|d| d.assigned > 0.0)
            .collect();
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(held[0].assigned, 6.0);
        assert_eq!(held[0].holders, [("default/a".to_string(), 6.0)]);
        assert_eq!(east.nodes[0].devices[0].capacity, 8.0);
    }
}
