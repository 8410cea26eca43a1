//! One scheduling cycle: pop the best head among all ClusterQueues, try to
//! place it, repeat. Unlike Kueue, which admits one head per ClusterQueue
//! per cycle, a cycle admits as many as fit; each attempt costs O(log n)
//! queue work plus a walk up the cohort tree, never a rescan.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Bound;

use fleetq_model::assignment::NodePods;
use fleetq_model::cluster_queue::{QueueingStrategy, ReclaimWithinCohort, StopPolicy};
use fleetq_model::resources::GPU;
use fleetq_model::{ClusterQueue, Quantity, Timestamp};

use crate::assign::{self, AssignContext, GroupDemand, Mode};
use crate::budget;
use crate::claims::{Claim, Claims};
use crate::clusters::ClusterUsage;
use crate::decision::{Admission, Decisions, PendingReason, ReasonKind};
use crate::fair;
use crate::nodes::{self, NodeUsage};
use crate::policy::{within_cluster_queue_allows, Rank};
use crate::preempt;
use crate::quota::{FrId, NodeId, NodeKind, QuotaTree, Usage};
use crate::snapshot::{PendingWorkload, QueueKey, Snapshot};
use crate::tournament;
use crate::BigSet;
use crate::{SchedulerConfig, WorkloadId};

/// Order of ClusterQueue heads, Kueue's `entryOrdering`: its borrowing
/// level (0, within its own quota, first), fair share (0 when fair sharing is off),
/// priority; then admission-fair-sharing usage, age and id. (Nominated
/// preemptors go before every head: `run_nominated`. Under fair sharing
/// the first key only names the cohort tree whose tournament picks the
/// next head: `pop_head`.)
type HeadKey = (
    usize,
    (bool, u64),
    Reverse<i32>,
    u64,
    Timestamp,
    WorkloadId,
    NodeId,
);

/// Per-ClusterQueue progress through its pending set in this cycle.
#[derive(Default)]
struct Cursor {
    /// Last key taken from each sub-queue, by the sub-queue's position in
    /// the snapshot's (fixed during a cycle) map: no key comparisons.
    last: Vec<Option<QueueKey>>,
    /// Position of the sub-queue whose head is in the heap.
    head_sub: Option<usize>,
    inadmissible: usize,
}

impl Cursor {
    fn remember(&mut self, sub: usize, key: QueueKey) {
        if self.last.len() <= sub {
            self.last.resize(sub + 1, None);
        }
        self.last[sub] = Some(key);
    }
}

/// Per-LocalQueue figures as of `now`, updated as the cycle admits.
#[derive(Clone, Copy)]
struct LocalQueueNow {
    afs: u64,
    tokens: Option<u64>,
}

pub(crate) struct Cycle<'a> {
    pub snap: &'a Snapshot,
    /// The ClusterQueue of each ClusterQueue node, looked up once per cycle.
    cluster_queues: Vec<Option<&'a ClusterQueue>>,
    pub now: Timestamp,
    pub cfg: &'a SchedulerConfig,
    pub usage: Usage,
    pub cluster_usage: ClusterUsage,
    /// What is assigned on each node, this cycle's admissions included.
    node_usage: NodeUsage,
    /// Usage as it will be once this cycle's victims have stopped and their
    /// preemptors are admitted. `usage` keeps victims charged (they hold
    /// their quota until they stop), which is right for admitting but would
    /// make a preemptor's queue look emptier, and its victims' queues fuller,
    /// than they are about to be; preemption decisions (who borrows, which
    /// victims free enough, fair shares) are taken against this instead.
    pub projected: Usage,
    pub projected_cluster: ClusterUsage,
    /// Victims and evicting workloads already counted as freed this cycle.
    pub taken: HashSet<WorkloadId>,
    pub decisions: Decisions,
    local_queues: HashMap<String, LocalQueueNow>,
    heads: BTreeSet<HeadKey>,
    /// Under fair sharing, what each head's flavor assignment would charge
    /// (its ClusterQueue's tournament entry, see `pop_head`).
    head_cells: HashMap<NodeId, Vec<(FrId, u64)>>,
    cursors: HashMap<NodeId, Cursor>,
    eligible: HashMap<NodeId, Vec<usize>>,
    /// Failed demand shapes per ClusterQueue, with their reason.
    memo: HashMap<(NodeId, i32, Vec<GroupDemand>), PendingReason>,
    /// Resources a ClusterQueue has no unused quota for in any flavor, with
    /// the reason. Usage only grows within a cycle, so in a queue that may
    /// not preempt a later workload asking for one of them cannot fit
    /// either; checking this first keeps a deep, full queue cheap to skip.
    exhausted: HashMap<NodeId, Vec<(String, PendingReason)>>,
    /// Nominated workloads already tried this cycle, before any head.
    tried_nominated: HashSet<WorkloadId>,
    /// Whether a queue's namespaceSelector selects a namespace.
    namespaces: HashMap<(NodeId, String), bool>,
    /// Quota held for the rest of the cycle, per ClusterQueue, by workloads
    /// that need preemption and found no victims (see `hold`).
    holds: HashMap<NodeId, Holds>,
    /// Room kept for nominated preemptors on their planned clusters.
    claims: Claims,
    /// In the nominated pass each attempt sees other claims than the last,
    /// so the memo is neither read nor fed there.
    in_nominated_pass: bool,
    /// Per ClusterQueue, the highest-priority workload preempting this
    /// cycle, with the resources it requests (see `behind_preemptor`).
    preempting: HashMap<NodeId, Preemptor>,
    /// Flavors the current attempt passed over because no cluster's
    /// nodes could take its pods there; empty between attempts.
    passed_over: Vec<String>,
}

/// A workload that is preempting for room in its ClusterQueue this cycle.
struct Preemptor {
    id: WorkloadId,
    rank: Rank,
    resources: BTreeSet<String>,
}

fn rank_of(w: &PendingWorkload) -> Rank {
    Rank {
        priority: w.priority,
        created_at: w.created_at,
    }
}

/// The resource names a workload requests.
fn requested(w: &PendingWorkload) -> BTreeSet<String> {
    w.workload
        .spec
        .pod_sets
        .iter()
        .flat_map(|p| p.requests.keys().cloned())
        .collect()
}

/// Kueue's `reserveCapacityForUnreclaimablePreempt` for one ClusterQueue:
/// what each of its workloads that holds quota requests, and what is
/// charged in the cycle's `usage` for them now.
#[derive(Default)]
struct Holds {
    requests: Vec<Vec<(FrId, u64)>>,
    charged: Vec<(FrId, u64)>,
}

/// Kueue's `quotaResourcesToReserve` for a workload that needs preemption:
/// if it would borrow, its whole request (up to nominal + borrowingLimit);
/// otherwise what is left of its queue's nominal quota, up to its request.
fn held_quota(
    tree: &QuotaTree,
    usage: &Usage,
    node: NodeId,
    requests: &[(FrId, u64)],
) -> Vec<(FrId, u64)> {
    let borrowing = requests
        .iter()
        .any(|&(fr, q)| usage.get(node, fr).saturating_add(q) > tree.nominal(node, fr));
    requests
        .iter()
        .map(|&(fr, q)| {
            let (used, nominal) = (usage.get(node, fr), tree.nominal(node, fr));
            let limit = tree.nodes[node].limits[fr]
                .as_ref()
                .and_then(|l| l.borrowing_limit);
            let held = match (borrowing, limit) {
                (true, None) => q,
                (true, Some(limit)) => q.min(nominal.saturating_add(limit).saturating_sub(used)),
                (false, _) => q.min(nominal.saturating_sub(used)),
            };
            (fr, held)
        })
        .filter(|&(_, held)| held > 0)
        .collect()
}

enum Outcome {
    Admitted,
    Preempting(PendingReason),
    Wait(PendingReason),
}

impl<'a> Cycle<'a> {
    pub fn new(snap: &'a Snapshot, now: Timestamp, cfg: &'a SchedulerConfig) -> Self {
        let cluster_queues = snap
            .tree
            .nodes
            .iter()
            .map(|n| match n.kind {
                NodeKind::ClusterQueue => snap.config.cluster_queues.get(&n.name),
                NodeKind::Cohort => None,
            })
            .collect();
        Cycle {
            snap,
            cluster_queues,
            now,
            cfg,
            usage: snap.usage.clone(),
            cluster_usage: snap.cluster_usage.clone(),
            node_usage: snap.node_usage.clone(),
            projected: snap.usage.clone(),
            projected_cluster: snap.cluster_usage.clone(),
            taken: HashSet::new(),
            decisions: Decisions::default(),
            local_queues: HashMap::new(),
            heads: BTreeSet::new(),
            head_cells: HashMap::new(),
            cursors: HashMap::new(),
            eligible: HashMap::new(),
            memo: HashMap::new(),
            exhausted: HashMap::new(),
            tried_nominated: HashSet::new(),
            namespaces: HashMap::new(),
            holds: HashMap::new(),
            claims: Claims::default(),
            in_nominated_pass: false,
            preempting: HashMap::new(),
            passed_over: Vec::new(),
        }
    }

    fn cluster_queue(&self, node: NodeId) -> &'a ClusterQueue {
        self.cluster_queues[node].unwrap_or_else(|| {
            // Every ClusterQueue node was built from the configuration; a
            // cohort node never reaches here.
            &self.snap.config.cluster_queues[&self.snap.tree.nodes[node].name]
        })
    }

    /// `Snapshot::borrowing_held_by`, counting this cycle's victims as
    /// evicting: a reclaimer chosen as a victim earlier in the cycle holds
    /// as it will once the batch is applied (apply() sees it evicting).
    pub(crate) fn held_by(&self, w: &PendingWorkload) -> Option<WorkloadId> {
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::PreemptorNotNominated) {
            return None;
        }
        if let Some(reclaimer) = self.snap.borrowing_held_by(w) {
            return Some(reclaimer);
        }
        let reclaimer = w.reclaimed_for?;
        self.taken.contains(&reclaimer).then_some(reclaimer)
    }

    pub fn run(mut self) -> Decisions {
        if !fleetq_model::mutants::active(fleetq_model::mutants::Mutant::PreemptorNotNominated) {
            self.run_nominated();
        }
        let nodes: Vec<NodeId> = self.snap.tree.cluster_queue_ids().collect();
        for node in nodes {
            if self.snap.queues[node].len == 0 {
                continue;
            }
            let cq = self.cluster_queue(node);
            if cq.spec.stop_policy != StopPolicy::None {
                self.decisions.queue_reasons.insert(
                    cq.name.clone(),
                    PendingReason::new(
                        ReasonKind::Suspended,
                        format!(
                            "ClusterQueue {:?} is stopped (stopPolicy {:?})",
                            cq.name, cq.spec.stop_policy
                        ),
                    ),
                );
                continue;
            }
            self.push_head(node);
        }
        while let Some(head) = self.pop_head() {
            let node = head.6;
            if self.decisions.admissions.len() >= self.cfg.max_admissions_per_cycle {
                self.heads.insert(head);
                self.defer_remaining();
                break;
            }
            let cursor = self.cursors.entry(node).or_default();
            let sub = cursor.head_sub.take().unwrap_or_default();
            cursor.remember(sub, (head.2, head.4, head.5));
            let workload = &self.snap.pending[&head.5];
            self.decisions.stats.examined += 1;
            let cq = self.cluster_queue(node);
            match self.attempt(node, cq, workload) {
                Outcome::Admitted => self.push_head(node),
                Outcome::Preempting(reason) | Outcome::Wait(reason) => {
                    self.decisions.pending.insert(workload.id, reason.clone());
                    if cq.spec.queueing_strategy == QueueingStrategy::StrictFIFO {
                        self.decisions.queue_reasons.insert(
                            cq.name.clone(),
                            PendingReason::new(
                                ReasonKind::BlockedByHead,
                                format!(
                                    "StrictFIFO: waiting behind {}/{}: {}",
                                    workload.workload.namespace,
                                    workload.workload.name,
                                    reason.message
                                ),
                            ),
                        );
                        continue;
                    }
                    if reason.kind == ReasonKind::WaitingForQuota
                        && !preempt::policy_allows_any(cq)
                        && self.quota_exhausted(node)
                    {
                        // Nothing behind it can fit, and none may preempt.
                        // (Where preemption is allowed, a smaller workload
                        // behind may still find victims the head could not:
                        // say one that fits the queue's nominal quota and
                        // reclaims it, behind one that would borrow.)
                        self.decisions.queue_reasons.insert(
                            cq.name.clone(),
                            PendingReason::new(
                                ReasonKind::WaitingForQuota,
                                format!(
                                    "ClusterQueue {:?} has no unused quota left: {}",
                                    cq.name, reason.message
                                ),
                            ),
                        );
                        continue;
                    }
                    let cursor = self.cursors.entry(node).or_default();
                    cursor.inadmissible += 1;
                    if cursor.inadmissible >= self.cfg.max_inadmissible_per_queue {
                        self.decisions.queue_reasons.insert(
                            cq.name.clone(),
                            PendingReason::new(
                                ReasonKind::NotYetConsidered,
                                format!(
                                    "the {} workloads ahead of it in ClusterQueue {:?} do not fit either; last: {}",
                                    cursor.inadmissible, cq.name, reason.message
                                ),
                            ),
                        );
                        continue;
                    }
                    self.push_head(node);
                }
            }
        }
        self.decisions.stats.admitted = self.decisions.admissions.len() as u64;
        self.decisions
    }

    /// Tries every nominated workload (its preemptions were applied) before
    /// any queue head, wherever it stands in its queue: the room its
    /// victims free is reserved for it this way, as kube-scheduler keeps a
    /// node for a pod nominated to it. If its victims are still stopping,
    /// its attempt reserves the rest of what it needs (see `try_preempt`).
    fn run_nominated(&mut self) {
        let snap = self.snap;
        // Higher priority first, then older: a nominated preemptor that
        // was itself a victim (and preempted someone lower in turn) must
        // not take the room a higher one was nominated for (found by the
        // soak, seed 100983: two nominated workloads of one queue took
        // turns preempting each other).
        let mut order: Vec<(Reverse<i32>, Timestamp, WorkloadId)> = snap
            .nominated
            .iter()
            .filter_map(|id| snap.pending.get(id))
            .map(|w| (Reverse(w.priority), w.created_at, w.id))
            .collect();
        order.sort_unstable();
        self.claims = self.build_claims();
        self.lay_claims(None);
        self.in_nominated_pass = true;
        for (_, _, id) in order {
            if self.decisions.admissions.len() >= self.cfg.max_admissions_per_cycle {
                break;
            }
            let Some(w) = snap.pending.get(&id) else {
                continue;
            };
            if w.not_before.is_some_and(|t| t > self.now) {
                continue;
            }
            let Some(node) = snap.tree.cluster_queue(&w.cluster_queue) else {
                continue;
            };
            let cq = self.cluster_queue(node);
            if cq.spec.stop_policy != StopPolicy::None {
                continue;
            }
            self.tried_nominated.insert(id);
            self.decisions.stats.examined += 1;
            // Every other nominee's room stays out of reach; its own is
            // lifted.
            self.lift_claims();
            self.lay_claims(Some(id));
            let outcome = self.attempt(node, cq, w);
            self.lift_claims();
            match outcome {
                Outcome::Admitted => self.claims.remove(id),
                Outcome::Preempting(reason) => {
                    // try_preempt reserved its room again.
                    self.claims.remove(id);
                    self.decisions.pending.insert(id, reason);
                }
                Outcome::Wait(reason) => {
                    self.decisions.pending.insert(id, reason);
                }
            }
            self.lay_claims(None);
        }
        // The claims left stay laid for the heads after this pass.
        self.in_nominated_pass = false;
    }

    /// A claim for every nominated workload whose decision named the
    /// cluster its room was planned on, while that cluster is eligible:
    /// its request there, in the flavor assignment would pick now, and on
    /// a cluster with nodes the node room its pods would take once every
    /// evicting workload there has stopped. Claims are placed higher
    /// priority first, then older, each beside the ones before it.
    fn build_claims(&mut self) -> Claims {
        let snap = self.snap;
        let mut wanted = Vec::new();
        for (&id, cluster) in &snap.nominated_on {
            let Some(w) = snap.pending.get(&id) else {
                continue;
            };
            let Some(node) = snap.tree.cluster_queue(&w.cluster_queue) else {
                continue;
            };
            let cq = self.cluster_queue(node);
            let Some(ci) = snap.clusters.index_of(cluster) else {
                continue;
            };
            if !self.eligible_clusters(node, cq).contains(&ci) {
                continue;
            }
            let full: Vec<u32> = w.workload.spec.pod_sets.iter().map(|p| p.count).collect();
            let Ok(demands) = assign::demand(cq, w, &full) else {
                continue;
            };
            let plan = self.context(node, cq, &[ci]).assign(&demands);
            if plan.mode != Mode::NoFit && !plan.cells.is_empty() {
                wanted.push((Reverse(w.priority), w.created_at, cq, w, ci, plan, full));
            }
        }
        if wanted.is_empty() {
            return Claims::default();
        }
        wanted.sort_unstable_by_key(|c| (c.0, c.1, c.3.id));
        let mut evicting: HashMap<usize, Vec<(FrId, u64)>> = HashMap::new();
        let mut evicting_nodes: HashMap<usize, Vec<nodes::NodeUsed>> = HashMap::new();
        for a in snap.evicting.iter().filter_map(|id| snap.admitted.get(id)) {
            if let Some(ci) = snap.clusters.index_of(&a.assignment.cluster) {
                evicting
                    .entry(ci)
                    .or_default()
                    .extend(snap.cells_of(&a.assignment));
                let info = &snap.clusters.clusters[ci];
                if !info.cluster.nodes.is_empty() {
                    let books = evicting_nodes
                        .entry(ci)
                        .or_insert_with(|| nodes::books_of(info, std::iter::empty()));
                    let (w, pod_sets) = (&a.pending.workload, &a.assignment.pod_sets);
                    nodes::charge_into(books, info, w, pod_sets, true);
                }
            }
        }
        // Per cluster, the node books as claims see them: evicting work
        // gone, earlier claims placed.
        let mut seen: HashMap<usize, Vec<nodes::NodeUsed>> = HashMap::new();
        let mut claims = Vec::with_capacity(wanted.len());
        for (_, _, cq, w, ci, plan, full) in wanted {
            let info = &snap.clusters.clusters[ci];
            let mut on_nodes = Vec::new();
            if !info.cluster.nodes.is_empty() {
                let books = seen.entry(ci).or_insert_with(|| {
                    let mut books = self.node_usage.of(ci).to_vec();
                    for (used, gone) in books
                        .iter_mut()
                        .zip(evicting_nodes.get(&ci).into_iter().flatten())
                    {
                        for (resource, &q) in gone {
                            nodes::adjust(used, resource, q, false);
                        }
                    }
                    books
                });
                let skeleton = assign::to_assignment(cq, w, &full, &plan, "", &snap.tree);
                let pod_sets = &skeleton.pod_sets;
                if let Ok(room) = nodes::room_for(info, books, &snap.config, &w.workload, pod_sets)
                {
                    for (n, resource, q) in &room {
                        nodes::adjust(&mut books[*n], resource, *q, true);
                    }
                    on_nodes = room;
                }
            }
            claims.push(Claim {
                id: w.id,
                cluster: ci,
                cells: plan.cells,
                nodes: on_nodes,
            });
        }
        Claims::new(claims, evicting, evicting_nodes)
    }

    fn lay_claims(&mut self, except: Option<WorkloadId>) {
        if !self.claims.is_empty() {
            self.claims.lay(
                except,
                [&mut self.cluster_usage, &mut self.projected_cluster],
                &mut self.node_usage,
                &self.snap.clusters.clusters,
            );
        }
    }

    fn lift_claims(&mut self) {
        self.claims.lift(
            [&mut self.cluster_usage, &mut self.projected_cluster],
            &mut self.node_usage,
            &self.snap.clusters.clusters,
        );
    }

    /// Whether `cq`'s namespaceSelector selects `namespace`, once per
    /// queue and namespace per cycle.
    fn namespace_selected(&mut self, node: NodeId, cq: &ClusterQueue, namespace: &str) -> bool {
        if cq.spec.namespace_selector.is_none() {
            return true;
        }
        if let Some(&ok) = self.namespaces.get(&(node, namespace.to_string())) {
            return ok;
        }
        let ok = self.snap.config.admits_namespace(cq, namespace);
        self.namespaces.insert((node, namespace.to_string()), ok);
        ok
    }

    /// Whether `node` has no quota left in any cell it holds quota for.
    fn quota_exhausted(&mut self, node: NodeId) -> bool {
        self.lift_holds(node);
        let tree = &self.snap.tree;
        let exhausted = (0..tree.cells.len())
            .filter(|&fr| tree.nodes[node].limits[fr].is_some())
            .all(|fr| tree.available(&self.usage, node, fr) == 0);
        self.lay_holds(node);
        exhausted
    }

    /// Kueue's `reserveCapacityForUnreclaimablePreempt`: `w` needs
    /// preemption and found no victims, so it holds the quota it would take
    /// for the rest of the cycle (`held_quota`). A borrower coming after it
    /// cannot take what its queue's nominal quota is waiting for, unless
    /// the queue can always reclaim (`reclaimWithinCohort: Any`). Only
    /// where quota, not devices, is short.
    fn hold(&mut self, node: NodeId, cq: &ClusterQueue, plan: &assign::Plan) {
        if plan.mode != Mode::Preempt
            || cq.spec.preemption.reclaim_within_cohort == ReclaimWithinCohort::Any
        {
            return;
        }
        let mut requests: Vec<(FrId, u64)> = Vec::new();
        for &(fr, q) in &plan.cells {
            match requests.iter_mut().find(|r| r.0 == fr) {
                Some(r) => r.1 = r.1.saturating_add(q),
                None => requests.push((fr, q)),
            }
        }
        let tree = &self.snap.tree;
        if requests
            .iter()
            .all(|&(fr, q)| q <= tree.available(&self.usage, node, fr))
        {
            return;
        }
        self.holds.entry(node).or_default().requests.push(requests);
    }

    /// Takes `node`'s holds out of `usage` while its own workloads are
    /// looked at. In Kueue a hold lasts for the rest of the cycle, in which
    /// its queue has no other head, and in the next cycles the queue moves
    /// past the workload (BestEffortFIFO); here the queue's later workloads
    /// come in the same cycle, so the hold binds the other queues only.
    fn lift_holds(&mut self, node: NodeId) {
        let tree = &self.snap.tree;
        if let Some(holds) = self.holds.get_mut(&node) {
            for (fr, q) in holds.charged.drain(..) {
                tree.release(&mut self.usage, node, fr, q);
            }
        }
    }

    /// Charges `node`'s holds again, recomputed on `usage` as it is now
    /// (what its own workloads took since comes off them).
    fn lay_holds(&mut self, node: NodeId) {
        let tree = &self.snap.tree;
        let Some(holds) = self.holds.get_mut(&node) else {
            return;
        };
        let mut charged = Vec::new();
        for requests in &holds.requests {
            for (fr, q) in held_quota(tree, &self.usage, node, requests) {
                tree.charge(&mut self.usage, node, fr, q);
                charged.push((fr, q));
            }
        }
        holds.charged = charged;
    }

    fn defer_remaining(&mut self) {
        let limit = self.cfg.max_admissions_per_cycle;
        for head in std::mem::take(&mut self.heads) {
            let name = self.snap.tree.nodes[head.6].name.clone();
            self.decisions.queue_reasons.insert(
                name,
                PendingReason::new(
                    ReasonKind::NotYetConsidered,
                    format!("this cycle reached its limit of {limit} admissions; the next cycle continues"),
                ),
            );
        }
    }

    fn local_queue_now(&mut self, key: &str) -> LocalQueueNow {
        if let Some(lq) = self.local_queues.get(key) {
            return *lq;
        }
        let state = self.snap.local_queue_state(key);
        let spec = self
            .snap
            .config
            .local_queues
            .get(key)
            .and_then(|l| l.spec.gpu_budget);
        let lq = LocalQueueNow {
            afs: fair::usage_at(state.afs, self.now, self.cfg.afs_half_life)
                .saturating_add(state.afs_penalty),
            tokens: spec.map(|s| budget::tokens_at(s, state.budget, self.now)),
        };
        self.local_queues.insert(key.to_string(), lq);
        lq
    }

    fn local_queue_weight(&self, key: &str) -> u64 {
        self.snap
            .config
            .local_queues
            .get(key)
            .and_then(|l| l.spec.fair_sharing)
            .and_then(|f| f.weight)
            .map_or(1_000_000_000, |w| w.nanos())
    }

    /// Finds the next eligible workload of `node` and puts it in the heap,
    /// judged without the quota its own workloads hold (`lift_holds`).
    fn push_head(&mut self, node: NodeId) {
        self.lift_holds(node);
        self.push_head_unheld(node);
        self.lay_holds(node);
    }

    /// Finds the next eligible workload of `node` and puts it in the heap.
    /// Sub-queues asking for a resource the queue has run out of are
    /// skipped whole; if that leaves nothing, the queue's reason says why.
    fn push_head_unheld(&mut self, node: NodeId) {
        let snap = self.snap;
        let queue = &snap.queues[node];
        let mut best: Option<(HeadKey, usize)> = None;
        let mut skipped: Option<PendingReason> = None;
        let cq = self.cluster_queue(node);
        let may_preempt = preempt::policy_allows_any(cq);
        for (position, (sub, set)) in queue.sub_queues.iter().enumerate() {
            if !may_preempt {
                self.detect_exhausted(node, cq, &sub.resources);
            }
            if let Some((resource, reason)) = self.exhausted_reason(node, &sub.resources) {
                self.explain_skipped_head(node, cq, position, set, &resource);
                skipped.get_or_insert(reason);
                continue;
            }
            let Some(key) = self.next_in(node, position, set) else {
                continue;
            };
            let afs = if sub.local_queue.is_empty() {
                0
            } else {
                // Usage per unit of weight (weights in nano-units).
                let weight = u128::from(self.local_queue_weight(&sub.local_queue).max(1));
                let usage = u128::from(self.local_queue_now(&sub.local_queue).afs);
                u64::try_from(usage * 1_000_000_000 / weight).unwrap_or(u64::MAX)
            };
            let candidate = (0, (false, 0), key.0, afs, key.1, key.2, node);
            if best.as_ref().is_none_or(|(b, _)| candidate < *b) {
                best = Some((candidate, position));
            }
        }
        let Some((mut key, sub)) = best else {
            if let Some(reason) = skipped {
                let name = snap.tree.nodes[node].name.clone();
                self.decisions.queue_reasons.entry(name).or_insert(reason);
            }
            return;
        };
        // Kueue's rule: heads that fit their queue's own quota go before
        // heads that would borrow, whatever their priority, so an owner
        // gets back what its victims free (or what it lent) before a
        // borrower takes it again and has to be preempted in turn.
        key.0 = if fleetq_model::mutants::active(
            fleetq_model::mutants::Mutant::PreemptorNotNominated,
        ) {
            0
        } else {
            self.borrowing_level(node, &snap.pending[&key.5])
        };
        if self.cfg.fair_sharing {
            let cq = self.cluster_queue(node);
            key.1 = fair::drs(&snap.tree, &self.usage, node, cq.fair_sharing_weight()).sort_key();
            let cells = self.head_cells_of(node, cq, &snap.pending[&key.5]);
            self.head_cells.insert(node, cells);
        }
        self.cursors.entry(node).or_default().head_sub = Some(sub);
        self.heads.insert(key);
    }

    /// What `w`'s flavor assignment would charge now, at full count (none
    /// if its demand is malformed: its attempt will say why).
    fn head_cells_of(
        &mut self,
        node: NodeId,
        cq: &'a ClusterQueue,
        w: &PendingWorkload,
    ) -> Vec<(FrId, u64)> {
        let full: Vec<u32> = w.workload.spec.pod_sets.iter().map(|p| p.count).collect();
        let Ok(demands) = assign::demand(cq, w, &full) else {
            return Vec::new();
        };
        let eligible = self.eligible_clusters(node, cq);
        self.context(node, cq, &eligible).assign(&demands).cells
    }

    /// The next head to attempt. Without fair sharing, the first in
    /// `entryOrdering`. With it, as Kueue's `fairSharingIterator`: the
    /// first head names a cohort tree (trees are independent), and a
    /// tournament over that tree's heads picks the one that goes
    /// (`tournament`).
    fn pop_head(&mut self) -> Option<HeadKey> {
        let first = *self.heads.first()?;
        let tree = &self.snap.tree;
        if !self.cfg.fair_sharing || tree.nodes[first.6].parent.is_none() {
            return self.heads.pop_first();
        }
        let root = tree.root_of(first.6);
        let keys: Vec<HeadKey> = self
            .heads
            .iter()
            .filter(|k| tree.root_of(k.6) == root)
            .copied()
            .collect();
        let entrants: Vec<tournament::Entrant> = keys
            .iter()
            .map(|k| tournament::Entrant {
                node: k.6,
                cells: self.head_cells.get(&k.6).cloned().unwrap_or_default(),
                priority: k.2 .0,
                created: k.4,
                id: k.5,
            })
            .collect();
        let config = self.snap.config();
        let weight = |n: NodeId| fair::weight(config, tree, n);
        let chosen = tournament::winner(tree, &mut self.usage, &weight, root, &entrants)
            .map_or(first, |i| keys[i]);
        self.heads.remove(&chosen);
        Some(chosen)
    }

    /// Kueue's borrowing level of `w` at full count (`Assignment.Borrows`):
    /// 0 if, in every resource group it needs, some flavor holds it within
    /// its ClusterQueue's own quota; else the height of the lowest cohort
    /// subtree whose quota would hold it, in the group's best flavor (the
    /// highest over groups). Judged on the projected state (this cycle's
    /// preemptors running); a flavor missing a resource does not count.
    fn borrowing_level(&self, node: NodeId, w: &PendingWorkload) -> usize {
        let cq = self.cluster_queue(node);
        let full: Vec<u32> = w.workload.spec.pod_sets.iter().map(|p| p.count).collect();
        let Ok(demands) = assign::demand(cq, w, &full) else {
            return 0;
        };
        let tree = &self.snap.tree;
        demands
            .iter()
            .map(|d| {
                cq.spec.resource_groups[d.group]
                    .flavors
                    .iter()
                    .filter_map(|f| {
                        d.resources.iter().try_fold(0, |level, (r, q)| {
                            let fr = tree.cell_of(&f.name, r)?;
                            let (height, _) =
                                tree.lowest_subtree_that_fits(&self.projected, node, fr, *q);
                            Some(level.max(height))
                        })
                    })
                    .min()
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0)
    }

    fn exhausted_reason(
        &self,
        node: NodeId,
        resources: &[String],
    ) -> Option<(String, PendingReason)> {
        let exhausted = self.exhausted.get(&node)?;
        exhausted
            .iter()
            .find(|(r, _)| resources.contains(r))
            .cloned()
    }

    /// Gives the head of a sub-queue skipped for an exhausted `resource` its
    /// own reason, with its numbers, as a full attempt would have; those
    /// behind it get the queue's reason.
    fn explain_skipped_head(
        &mut self,
        node: NodeId,
        cq: &ClusterQueue,
        sub: usize,
        set: &'a BigSet<QueueKey>,
        resource: &str,
    ) {
        let Some(head) = self.next_in(node, sub, set) else {
            return;
        };
        if self.decisions.pending.contains_key(&head.2) {
            return;
        }
        let w = &self.snap.pending[&head.2];
        let q = w
            .workload
            .spec
            .pod_sets
            .iter()
            .map(|ps| {
                ps.request(resource)
                    .milli()
                    .saturating_mul(u64::from(ps.count))
            })
            .fold(0, u64::saturating_add);
        let tree = &self.snap.tree;
        let Some((_, group)) = cq.group_for(resource) else {
            return;
        };
        // As flavor assignment reports it: the first flavor of the best mode.
        let mut best: Option<(Mode, PendingReason)> = None;
        for flavor in &group.flavors {
            let Some(fr) = tree.cell_of(&flavor.name, resource) else {
                continue;
            };
            if let (mode, Some(reason)) =
                assign::quota_verdict(tree, &self.usage, node, &cq.name, fr, q)
            {
                if best.as_ref().is_none_or(|(m, _)| mode < *m) {
                    best = Some((mode, reason));
                }
            }
        }
        if let Some((_, reason)) = best {
            self.decisions.pending.insert(head.2, reason);
        }
    }

    /// The next workload of a sub-queue after its cursor, skipping (with a
    /// reason) those still backing off.
    fn next_in(&mut self, node: NodeId, sub: usize, set: &'a BigSet<QueueKey>) -> Option<QueueKey> {
        loop {
            let cursor = self.cursors.entry(node).or_default();
            let next = match cursor.last.get(sub).copied().flatten() {
                Some(last) => set.range((Bound::Excluded(last), Bound::Unbounded)).next(),
                None => set.iter().next(),
            }?;
            if self.tried_nominated.contains(&next.2) {
                cursor.remember(sub, *next);
                continue;
            }
            let workload = &self.snap.pending[&next.2];
            match workload.not_before {
                Some(t) if t > self.now => {
                    cursor.remember(sub, *next);
                    self.decisions.pending.insert(
                        workload.id,
                        PendingReason::new(
                            ReasonKind::BackingOff,
                            format!("requeued after an eviction; eligible again at {t}"),
                        )
                        .retry_at(t),
                    );
                }
                _ => return Some(*next),
            }
        }
    }

    fn eligible_clusters(&mut self, node: NodeId, cq: &ClusterQueue) -> Vec<usize> {
        self.eligible
            .entry(node)
            .or_insert_with(|| {
                self.snap
                    .clusters
                    .clusters
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.eligible_for(&cq.spec.placement))
                    .map(|(i, _)| i)
                    .collect()
            })
            .clone()
    }

    /// Tries to admit `w`, judged without the quota its own queue's
    /// workloads hold (`lift_holds`); any hold `w` takes is laid after.
    fn attempt(&mut self, node: NodeId, cq: &'a ClusterQueue, w: &'a PendingWorkload) -> Outcome {
        if let Some(reason) = self.behind_preemptor(node, cq, w) {
            return Outcome::Wait(reason);
        }
        self.lift_holds(node);
        let outcome = self.attempt_unheld(node, cq, w);
        self.lay_holds(node);
        if matches!(outcome, Outcome::Preempting(_))
            && self
                .preempting
                .get(&node)
                .is_none_or(|p| p.rank.priority < w.priority)
        {
            self.preempting.insert(
                node,
                Preemptor {
                    id: w.id,
                    rank: rank_of(w),
                    resources: requested(w),
                },
            );
        }
        outcome
    }

    /// Kueue takes one head per ClusterQueue per cycle, so while a
    /// workload preempts for room its queue admits nothing it outranks.
    /// fleetq looks at a queue's later workloads in the same cycle; one
    /// that the preemptor may preempt within the queue and that needs what
    /// the preemptor needs would take the quota its victims free and be
    /// preempted again. Soak seed 142349: a victim of another cluster,
    /// requeued, was re-admitted by borrowing while its preemptor waited
    /// for a victim behind a cut-off agent, four rounds. Seed 153216: the
    /// same with a newer victim of equal priority under
    /// `LowerOrNewerEqualPriority`, which "lower priority" alone let
    /// through. It waits behind the preemptor instead.
    fn behind_preemptor(
        &self,
        node: NodeId,
        cq: &ClusterQueue,
        w: &PendingWorkload,
    ) -> Option<PendingReason> {
        let p = self.preempting.get(&node)?;
        // Only what the preemptor may take back: the policy's own test.
        if p.id == w.id
            || !within_cluster_queue_allows(
                cq.spec.preemption.within_cluster_queue,
                p.rank,
                rank_of(w),
            )
        {
            return None;
        }
        let needs = requested(w);
        let shared: Vec<&String> = needs.intersection(&p.resources).collect();
        if shared.is_empty() {
            return None;
        }
        Some(PendingReason::new(
            ReasonKind::WaitingForQuota,
            format!(
                "workload {} of ClusterQueue {:?} (priority {}) is preempting for {}; workloads of its queue it outranks that need the same wait behind it, as behind Kueue's queue head",
                p.id,
                cq.name,
                p.rank.priority,
                shared
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }

    fn attempt_unheld(
        &mut self,
        node: NodeId,
        cq: &'a ClusterQueue,
        w: &'a PendingWorkload,
    ) -> Outcome {
        if !self.namespace_selected(node, cq, &w.workload.namespace) {
            // Kueue's reason, with who and what.
            let hint = if cq.spec.namespace_selector
                == Some(fleetq_model::cluster_queue::nothing_selector())
            {
                " (it was applied without one, which in Kueue selects no namespace; `namespaceSelector: {}` selects every namespace)"
            } else {
                ""
            };
            return Outcome::Wait(PendingReason::new(
                ReasonKind::Misconfigured,
                format!(
                    "Workload namespace doesn't match ClusterQueue selector: the namespaceSelector of ClusterQueue {:?} does not select namespace {:?}{hint}",
                    cq.name, w.workload.namespace
                ),
            ));
        }
        if let Some(lq) = self.snap.config.local_queues.get(&w.local_queue) {
            if lq.spec.stop_policy != StopPolicy::None {
                return Outcome::Wait(PendingReason::new(
                    ReasonKind::Suspended,
                    format!("LocalQueue {} is stopped", w.local_queue),
                ));
            }
        }
        let full: Vec<u32> = w.workload.spec.pod_sets.iter().map(|p| p.count).collect();
        let minimal: Vec<u32> = w
            .workload
            .spec
            .pod_sets
            .iter()
            .map(|p| p.min_count.unwrap_or(p.count))
            .collect();
        if let Err(reason) = self.check_budget(w, &minimal) {
            return Outcome::Wait(reason);
        }
        let demands = match assign::demand(cq, w, &full) {
            Ok(d) => d,
            Err(reason) => return Outcome::Wait(reason),
        };
        let memo_key = (node, w.priority, demands.clone());
        if !self.in_nominated_pass {
            if let Some(reason) = self.memo.get(&memo_key) {
                self.decisions.stats.memo_hits += 1;
                return Outcome::Wait(reason.clone());
            }
        }
        let eligible = self.eligible_clusters(node, cq);
        let held = self.held_by(w);
        // Why no cluster whose totals had room took the pods, for the
        // pending reason (partial admission's attempts below say nothing).
        let mut placement_note: Option<String> = None;
        // A flavor whose totals have room but whose nodes cannot take the
        // pods is passed over for the next one, as one without room
        // would be (the trace replay: an 8-GPU pod sent by totals to a
        // flavor of fragmented nodes waited, with another model's nodes
        // free; crates/fleetq-trace).
        debug_assert!(self.passed_over.is_empty());
        let plan = loop {
            let mut plan = self.assign_simulating(node, cq, w, &demands, &eligible);
            plan.counts.clone_from(&full);
            if !may_take(plan.mode, held) {
                break plan;
            }
            let note = match self.choose_cluster(cq, w, &full, &plan, &eligible) {
                Ok(chosen) => {
                    self.passed_over.clear();
                    return self.admit(node, cq, w, &full, &plan, chosen);
                }
                Err(note) => {
                    // Its quota is back, within its nominal quota or by
                    // borrowing, but a victim still holds its node room:
                    // it waits for that one (`preempt::with_node_room`).
                    // Borrowing too: one victim stopped and the cohort's
                    // idle quota covers the rest (soak seed 363870).
                    if matches!(plan.mode, Mode::Fit | Mode::Borrow)
                        && self.snap.nominated.contains(&w.id)
                    {
                        if let Ok(reason) =
                            preempt::try_preempt(self, node, cq, w, &plan, &eligible)
                        {
                            self.passed_over.clear();
                            return Outcome::Preempting(reason);
                        }
                    }
                    note
                }
            };
            let on_nodes = self.node_flavors_of(&plan, &eligible);
            if let Some(note) = note {
                placement_note = Some(match placement_note.take() {
                    Some(earlier) => format!("{earlier}; {note}"),
                    None => note,
                });
            }
            if on_nodes.is_empty() {
                break plan;
            }
            self.passed_over.extend(on_nodes);
        };
        let passed_over = !std::mem::take(&mut self.passed_over).is_empty();
        if let (Mode::Borrow, Some(reclaimer)) = (plan.mode, held) {
            // Room within its nominal quota that preemption makes, or that
            // victims already evicting for it are about to free: a held
            // preemptor keeps waiting for them (and keeps its nomination)
            // rather than losing that room to its own victims (seed 382:
            // one victim re-admitted and preempted 464 times).
            if preempt::policy_allows_any(cq) {
                if let Ok(reason) = preempt::try_preempt(self, node, cq, w, &plan, &eligible) {
                    return Outcome::Preempting(reason);
                }
            }
            if minimal != full {
                if let Some(outcome) = self.try_partial(node, cq, w, &full, &minimal, &eligible) {
                    return outcome;
                }
            }
            // Not memoised: the hold is this workload's, not its shape's.
            return Outcome::Wait(PendingReason::new(
                ReasonKind::WaitingForQuota,
                format!(
                    "it may not borrow while workload {reclaimer}, which took its borrowed quota back, waits to be admitted; it may run within the nominal quota of ClusterQueue {:?}",
                    cq.name
                ),
            ));
        }
        // Why preemption cannot help, when it was considered (a queue
        // whose policy allows none says nothing: Kueue's default).
        let mut preemption_note = None;
        if plan.mode == Mode::Preempt && preempt::policy_allows_any(cq) {
            match preempt::try_preempt(self, node, cq, w, &plan, &eligible) {
                Ok(reason) => return Outcome::Preempting(reason),
                Err(why) => preemption_note = Some(why),
            }
        }
        if minimal != full {
            if let Some(outcome) = self.try_partial(node, cq, w, &full, &minimal, &eligible) {
                return outcome;
            }
        }
        self.hold(node, cq, &plan);
        // A shape that fails by node placement is not memoised: the
        // memo's key holds totals, not pods per node or topology.
        let placement_failed = passed_over || plan.reason.is_none() && placement_note.is_some();
        let passed_note = placement_note
            .as_ref()
            .filter(|_| passed_over && plan.reason.is_some())
            .map(|note| {
                format!("flavors whose nodes could not take the pods were passed over: {note}")
            });
        let mut reason = plan.reason.unwrap_or_else(|| {
            PendingReason::new(
                ReasonKind::NoClusterCapacity,
                match placement_note {
                    Some(note) => format!("quota is free but no pod placement fits: {note}"),
                    None => format!(
                        "quota is free but no single eligible cluster has {} free",
                        assign::describe(&self.snap.tree, &plan.cells)
                    ),
                },
            )
        });
        for note in [preemption_note, passed_note].into_iter().flatten() {
            reason.message = format!("{}; {note}", reason.message);
        }
        // Only where nothing may preempt: see the queue skip in `run`.
        if reason.kind == ReasonKind::WaitingForQuota && !preempt::policy_allows_any(cq) {
            self.note_exhausted(node, cq, &demands, &reason);
        }
        if !self.in_nominated_pass && !placement_failed {
            self.memo.insert(memo_key, reason.clone());
        }
        Outcome::Wait(reason)
    }

    /// Flavor assignment with Kueue's preemption oracle: each flavor that
    /// needs preemption is simulated (`preempt::simulate`) when the
    /// assigner asks, until it has chosen.
    fn assign_simulating(
        &mut self,
        node: NodeId,
        cq: &'a ClusterQueue,
        w: &PendingWorkload,
        demands: &[assign::GroupDemand],
        eligible: &[usize],
    ) -> assign::Plan {
        let mut simulated = assign::Simulated::new();
        loop {
            match self
                .context(node, cq, eligible)
                .assign_with(demands, Some(&simulated))
            {
                assign::Assigned::Plan(plan) => return plan,
                assign::Assigned::Simulate {
                    demand,
                    flavor,
                    plan,
                } => {
                    let possibility = preempt::simulate(self, node, cq, w, &plan, eligible);
                    // Each round adds one answer, so this ends within
                    // (groups x flavors) rounds; asked twice would be a bug
                    // in the assigner, and must not loop.
                    if simulated.insert((demand, flavor), possibility).is_some() {
                        debug_assert!(false, "the assigner asked twice for one flavor");
                        return plan;
                    }
                }
            }
        }
    }

    /// Whether every flavor of the group covering `resource` has nothing
    /// of it left for `node`.
    fn resource_exhausted(&self, node: NodeId, cq: &ClusterQueue, resource: &str) -> bool {
        let tree = &self.snap.tree;
        let Some((_, group)) = cq.group_for(resource) else {
            return false;
        };
        group.flavors.iter().all(|f| {
            tree.cell_of(&f.name, resource)
                .is_none_or(|fr| tree.available(&self.usage, node, fr) == 0)
        })
    }

    /// Records the requested resources for which every flavor of their
    /// group has nothing left in `node`.
    fn note_exhausted(
        &mut self,
        node: NodeId,
        cq: &ClusterQueue,
        demands: &[GroupDemand],
        reason: &PendingReason,
    ) {
        for demand in demands {
            for (resource, _) in &demand.resources {
                if self.resource_exhausted(node, cq, resource) {
                    self.exhausted
                        .entry(node)
                        .or_default()
                        .push((resource.clone(), reason.clone()));
                }
            }
        }
    }

    /// Before looking at a sub-queue of a queue that may not preempt:
    /// if a resource its workloads all ask for is used up in every flavor,
    /// none of them can fit this cycle, so none is examined. Saves one full
    /// attempt per full queue per cycle.
    fn detect_exhausted(&mut self, node: NodeId, cq: &ClusterQueue, resources: &[String]) {
        for resource in resources {
            let known = self
                .exhausted
                .get(&node)
                .is_some_and(|e| e.iter().any(|(r, _)| r == resource));
            if known || !self.resource_exhausted(node, cq, resource) {
                continue;
            }
            let tree = &self.snap.tree;
            let in_use: Vec<String> = cq
                .group_for(resource)
                .map(|(_, g)| {
                    g.flavors
                        .iter()
                        .filter_map(|f| {
                            let fr = tree.cell_of(&f.name, resource)?;
                            Some(format!(
                                "{}: {} in use",
                                f.name,
                                Quantity::from_milli(self.usage.get(node, fr))
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let reason = PendingReason::new(
                ReasonKind::WaitingForQuota,
                format!(
                    "insufficient unused quota for {resource} in ClusterQueue {:?}: 0 available in every flavor ({})",
                    cq.name,
                    in_use.join(", ")
                ),
            );
            self.exhausted
                .entry(node)
                .or_default()
                .push((resource.clone(), reason));
        }
    }

    fn context<'c>(
        &'c self,
        node: NodeId,
        cq: &'c ClusterQueue,
        eligible: &'c [usize],
    ) -> AssignContext<'c> {
        AssignContext {
            tree: &self.snap.tree,
            usage: &self.usage,
            clusters: &self.snap.clusters,
            cluster_usage: &self.cluster_usage,
            eligible,
            node,
            cq,
            fair_sharing: self.cfg.fair_sharing,
            passed_over: &self.passed_over,
        }
    }

    /// The flavors of `plan` that the nodes of some cluster in `eligible`
    /// carry (placement decides there), not passed over yet.
    fn node_flavors_of(&self, plan: &assign::Plan, eligible: &[usize]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (_, flavor) in &plan.flavors {
            let carried = eligible
                .iter()
                .any(|&c| self.snap.clusters.clusters[c].node_flavors.contains(flavor));
            if carried && !self.passed_over.contains(flavor) && !out.contains(flavor) {
                out.push(flavor.clone());
            }
        }
        out
    }

    /// The cluster for `plan` among `eligible`, by the queue's strategy,
    /// with its pods per node on a cluster that reports nodes. A cluster
    /// whose totals have room but whose nodes cannot take the pods is
    /// passed over; when none is left, the error says why each was
    /// (`None`: no cluster's totals had room).
    fn choose_cluster(
        &self,
        cq: &ClusterQueue,
        w: &PendingWorkload,
        counts: &[u32],
        plan: &assign::Plan,
        eligible: &[usize],
    ) -> Result<Chosen, Option<String>> {
        let strategy = cq.spec.placement.strategy;
        let table = &self.snap.clusters;
        if !table.any_nodes() {
            let c = table.choose(&self.cluster_usage, eligible, &plan.cells, strategy);
            return c.map(|c| (c, Vec::new())).ok_or(None);
        }
        let skeleton = assign::to_assignment(cq, w, counts, plan, "", &self.snap.tree);
        let mut notes = Vec::new();
        // Best first by the strategy; the first whose nodes take the pods.
        for c in table.ranked(&self.cluster_usage, eligible, &plan.cells, strategy) {
            let info = &table.clusters[c];
            let used = self.node_usage.of(c);
            let pod_sets = &skeleton.pod_sets;
            let index = self.node_usage.free_index(c);
            match nodes::place_all_indexed(
                info,
                used,
                index,
                &self.snap.config,
                &w.workload,
                pod_sets,
            ) {
                Ok(p) => return Ok((c, p)),
                Err(note) => notes.push(note),
            }
        }
        Err((!notes.is_empty()).then(|| notes.join("; ")))
    }

    /// Whether `plan`'s pods could be placed on `cluster`'s nodes once
    /// `victims` there have stopped (always, on a cluster without nodes or
    /// a plan without counts). Preemption asks it so that it never evicts
    /// for room in totals that no node has: the preemptor would wait, its
    /// victims return to the holes, and it would preempt them again.
    pub(crate) fn nodes_fit_without<'v>(
        &self,
        cq: &ClusterQueue,
        w: &PendingWorkload,
        plan: &assign::Plan,
        cluster: usize,
        victims: impl Iterator<Item = &'v crate::snapshot::AdmittedWorkload>,
    ) -> bool {
        self.node_room_without(cq, w, plan, cluster, victims)
            .is_some()
    }

    /// Keeps for a preemptor the node room its pods will take on
    /// `cluster` once `victims` there have stopped: what the victims hold
    /// stays charged until they stop, the rest is charged now, so that no
    /// later workload of this cycle is placed into the preemptor's room
    /// (soak seed 220640, as for claims).
    pub(crate) fn reserve_node_room<'v>(
        &mut self,
        cq: &ClusterQueue,
        w: &PendingWorkload,
        plan: &assign::Plan,
        cluster: usize,
        victims: impl Iterator<Item = &'v crate::snapshot::AdmittedWorkload>,
    ) {
        let victims: Vec<_> = victims.collect();
        let Some(room) = self.node_room_without(cq, w, plan, cluster, victims.iter().copied())
        else {
            return;
        };
        let info = &self.snap.clusters.clusters[cluster];
        let held = nodes::books_of(
            info,
            victims
                .iter()
                .map(|v| (&*v.pending.workload, v.assignment.pod_sets.as_slice())),
        );
        for (n, resource, q) in room {
            let by_victims = held[n].get(resource.as_str()).copied().unwrap_or(0);
            let q = q.saturating_sub(by_victims);
            if q > 0 {
                self.node_usage
                    .adjust(Some(info), cluster, n, &resource, q, true);
            }
        }
    }

    /// Where `plan`'s pods would go on `cluster`'s nodes once `victims`
    /// there have stopped, as (node index, resource, milli-units); `None`
    /// when no placement fits, empty on a cluster without nodes or for a
    /// plan without counts.
    fn node_room_without<'v>(
        &self,
        cq: &ClusterQueue,
        w: &PendingWorkload,
        plan: &assign::Plan,
        cluster: usize,
        victims: impl Iterator<Item = &'v crate::snapshot::AdmittedWorkload>,
    ) -> Option<Vec<(usize, String, u64)>> {
        let info = &self.snap.clusters.clusters[cluster];
        if info.cluster.nodes.is_empty() || plan.counts.is_empty() {
            return Some(Vec::new());
        }
        let mut books = self.node_usage.of(cluster).to_vec();
        for v in victims {
            nodes::charge_into(
                &mut books,
                info,
                &v.pending.workload,
                &v.assignment.pod_sets,
                false,
            );
        }
        let skeleton = assign::to_assignment(cq, w, &plan.counts, plan, "", &self.snap.tree);
        let pod_sets = &skeleton.pod_sets;
        nodes::room_for(info, &books, &self.snap.config, &w.workload, pod_sets).ok()
    }

    /// Partial admission, Kueue's pod-set reducer: the most pods, down to
    /// each pod set's minCount, that fit now or that preemption would make
    /// room for (then the victims are chosen and the workload waits for
    /// them). Pod sets shrink in proportion to how much they may shrink;
    /// binary search on that step.
    fn try_partial(
        &mut self,
        node: NodeId,
        cq: &'a ClusterQueue,
        w: &'a PendingWorkload,
        full: &[u32],
        minimal: &[u32],
        eligible: &[usize],
    ) -> Option<Outcome> {
        let steps = full
            .iter()
            .zip(minimal)
            .map(|(f, m)| f - m)
            .max()
            .unwrap_or(0);
        let counts_at = |s: u32| -> Vec<u32> {
            full.iter()
                .zip(minimal)
                .map(|(&f, &m)| {
                    f - (u64::from(s) * u64::from(f - m)).div_ceil(u64::from(steps)) as u32
                })
                .collect()
        };
        // Kueue's pod-set reducer: a count is good if it fits, or if
        // preemption would make room for it (the victim search, simulated).
        type Good = (assign::Plan, Option<Chosen>);
        let good = |cycle: &mut Self, counts: &[u32]| -> Option<Good> {
            let demands = assign::demand(cq, w, counts).ok()?;
            let mut plan = cycle.context(node, cq, eligible).assign(&demands);
            plan.counts = counts.to_vec();
            if may_take(plan.mode, cycle.held_by(w)) {
                if let Ok(c) = cycle.choose_cluster(cq, w, counts, &plan, eligible) {
                    return Some((plan, Some(c)));
                }
            }
            let may_preempt = plan.mode == Mode::Preempt && preempt::policy_allows_any(cq);
            if may_preempt
                && preempt::simulate(cycle, node, cq, w, &plan, eligible)
                    != assign::Possibility::NoCandidates
            {
                return Some((plan, None));
            }
            None
        };
        good(self, &counts_at(steps))?;
        let (mut lo, mut hi) = (1, steps);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if good(self, &counts_at(mid)).is_some() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let counts = counts_at(lo);
        let (plan, cluster) = good(self, &counts)?;
        if let Err(reason) = self.check_budget(w, &counts) {
            return Some(Outcome::Wait(reason));
        }
        match cluster {
            Some(chosen) => Some(self.admit(node, cq, w, &counts, &plan, chosen)),
            // Admitted at whatever count fits once its victims stop.
            None => preempt::try_preempt(self, node, cq, w, &plan, eligible)
                .ok()
                .map(Outcome::Preempting),
        }
    }

    /// GPUs (milli) of the workload at these counts.
    fn gpus(w: &PendingWorkload, counts: &[u32]) -> u64 {
        w.workload
            .spec
            .pod_sets
            .iter()
            .zip(counts)
            .map(|(ps, &c)| ps.request(GPU).milli().saturating_mul(u64::from(c)))
            .fold(0, u64::saturating_add)
    }

    /// The GPU-second charge of the workload at `counts`, or why its
    /// LocalQueue's budget cannot pay it now.
    fn check_budget(&mut self, w: &PendingWorkload, counts: &[u32]) -> Result<u64, PendingReason> {
        let Some(spec) = self
            .snap
            .config
            .local_queues
            .get(&w.local_queue)
            .and_then(|l| l.spec.gpu_budget)
        else {
            return Ok(0);
        };
        let gpus = Self::gpus(w, counts);
        if gpus == 0 {
            return Ok(0);
        }
        let Some(max_runtime) = w.workload.spec.maximum_execution_time else {
            return Err(PendingReason::new(
                ReasonKind::Misconfigured,
                format!(
                    "LocalQueue {} has a GPU-second budget, so GPU workloads must set spec.maximumExecutionTime",
                    w.local_queue
                ),
            ));
        };
        let cost = budget::cost(gpus, max_runtime);
        let tokens = self.local_queue_now(&w.local_queue).tokens.unwrap_or(0);
        if cost <= tokens {
            return Ok(cost);
        }
        let state = self.snap.local_queue_state(&w.local_queue).budget;
        // The bucket as of `now` minus what this cycle already spent.
        let spent_now = budget::tokens_at(spec, state, self.now).saturating_sub(tokens);
        let as_if = Some(budget::charge(spec, state, self.now, spent_now));
        let message = format!(
            "LocalQueue {} has {} GPU-seconds of budget left; this workload needs {}",
            w.local_queue,
            tokens / 1000,
            cost.div_ceil(1000)
        );
        let reason = PendingReason::new(ReasonKind::BudgetExhausted, message);
        Err(match budget::fits_at(spec, as_if, self.now, cost) {
            Some(at) => reason.retry_at(at),
            None => PendingReason::new(
                ReasonKind::BudgetExhausted,
                format!(
                    "needs {} GPU-seconds but LocalQueue {} can hold at most {} (burstGpuSeconds)",
                    cost.div_ceil(1000),
                    w.local_queue,
                    spec.burst_gpu_seconds
                ),
            ),
        })
    }

    fn admit(
        &mut self,
        node: NodeId,
        cq: &ClusterQueue,
        w: &PendingWorkload,
        counts: &[u32],
        plan: &assign::Plan,
        (cluster, placed): Chosen,
    ) -> Outcome {
        let charge = match self.check_budget(w, counts) {
            Ok(c) => c,
            Err(reason) => return Outcome::Wait(reason),
        };
        for &(fr, q) in &plan.cells {
            self.snap.tree.charge(&mut self.usage, node, fr, q);
            self.cluster_usage.add(cluster, fr, q);
            self.snap.tree.charge(&mut self.projected, node, fr, q);
            self.projected_cluster.add(cluster, fr, q);
        }
        let info = &self.snap.clusters.clusters[cluster];
        let mut assignment =
            assign::to_assignment(cq, w, counts, plan, info.name(), &self.snap.tree);
        for (psa, nodes) in assignment.pod_sets.iter_mut().zip(placed) {
            psa.nodes = nodes;
        }
        self.node_usage
            .charge(info, cluster, &w.workload, &assignment, true);
        let rate = fair::afs_rate(&assignment.usage, &self.cfg.afs_resource_weights);
        let penalty = rate.saturating_mul(self.cfg.afs_entry_penalty.as_secs());
        let lq = self.local_queue_now(&w.local_queue);
        self.local_queues.insert(
            w.local_queue.clone(),
            LocalQueueNow {
                afs: lq.afs.saturating_add(penalty),
                tokens: lq.tokens.map(|t| t.saturating_sub(charge)),
            },
        );
        self.decisions.admissions.push(Admission {
            workload: w.id,
            cluster_queue: cq.name.clone(),
            assignment,
            budget_charge: charge,
            // Persisted by apply() so the next cycles see it too.
            afs_penalty: if cq.uses_admission_fair_sharing() {
                penalty
            } else {
                0
            },
        });
        Outcome::Admitted
    }
}

/// A cluster chosen for a workload (index in the cluster table), with
/// each pod set's pods per node where the cluster reports nodes.
type Chosen = (usize, Vec<Vec<NodePods>>);

/// Whether a plan of this mode may be admitted now: it fits the queue's
/// own quota, or it borrows and no reclaimer of the workload's borrowed
/// quota waits (`Snapshot::borrowing_held_by`).
fn may_take(mode: Mode, held_for: Option<WorkloadId>) -> bool {
    mode == Mode::Fit || mode == Mode::Borrow && held_for.is_none()
}
