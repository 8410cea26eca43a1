//! The scheduler's view of the world, kept up to date incrementally by its
//! owner (the ledger) so that a cycle never sorts or rescans everything.
//!
//! Pending workloads sit in per-ClusterQueue ordered sets (one per
//! LocalQueue under admission fair sharing); admitted workloads are indexed
//! per ClusterQueue in preemption order; usage is a flat table per tree
//! node and per cluster.

use crate::{BigMap, BigSet};
use fleetq_model::mutants::Mutant;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetq_model::{Cluster, Config, FlavorResource, Timestamp, Workload};
use serde::{Deserialize, Serialize};

use crate::budget::{self, BudgetState};
use crate::clusters::{ClusterTable, ClusterUsage};
use crate::decision::{Admission, Assignment, Decisions};
use crate::fair::{self, AfsUsage};
use crate::nodes::NodeUsage;
use crate::quota::{FrId, NodeId, QuotaTree, Usage};
use crate::WorkloadId;

/// A workload waiting for admission, bound to its queues and priority.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingWorkload {
    pub id: WorkloadId,
    pub workload: Arc<Workload>,
    /// `namespace/name` of the LocalQueue.
    pub local_queue: String,
    pub cluster_queue: String,
    pub priority: i32,
    pub created_at: Timestamp,
    /// Requeue backoff: not admitted before this time.
    pub not_before: Option<Timestamp>,
    /// Its preemptions were applied: what its victims free is meant for
    /// it, so a cycle tries it before every head that is not nominated
    /// (kube-scheduler's nominated node, at the ledger's level). Without
    /// this a victim could be re-admitted into the room freed for its
    /// preemptor and be preempted again, forever.
    pub nominated: bool,
    /// How often a borrowing preemptor (borrowWithinCohort) preempted it
    /// (`fleetq_scheduler::policy::BORROWER_PREEMPTIONS`).
    pub borrow_preemptions: u32,
    /// How often other queues took its borrowed quota back (reclaim or
    /// fair sharing)
    /// (`fleetq_scheduler::policy::RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION`).
    pub reclaimed: u32,
    /// The workload of another ClusterQueue whose preemption last sent it
    /// back to the queue, if it has not been admitted since. While that
    /// preemptor is pending it may not borrow
    /// ([`Snapshot::borrowing_held_by`]).
    pub reclaimed_for: Option<WorkloadId>,
}

/// A workload holding a quota reservation.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmittedWorkload {
    pub pending: PendingWorkload,
    pub assignment: Assignment,
    pub admitted_at: Timestamp,
    /// Chosen as a preemption victim; still charged until it stops.
    pub evicting: bool,
    pub budget_charge: u64,
}

/// Order inside a queue: higher priority first, then older, then lower id.
pub type QueueKey = (Reverse<i32>, Timestamp, WorkloadId);

/// Order of preemption candidates inside a ClusterQueue: lower priority
/// first, then the most recently admitted.
pub type VictimKey = (i32, Reverse<Timestamp>, WorkloadId);

/// Which sub-queue of a ClusterQueue a pending workload sits in: its
/// LocalQueue when the ClusterQueue uses admission fair sharing (else ""),
/// and the set of resources it requests. Splitting by resources lets a
/// cycle skip, in O(1), every workload that asks for a resource the queue
/// has run out of, however deep the queue is.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubQueueKey {
    pub local_queue: String,
    pub resources: Vec<String>,
}

/// Pending workloads of one ClusterQueue in ordered sub-queues.
#[derive(Clone, Debug, Default)]
pub struct ClusterQueueQueue {
    pub sub_queues: BTreeMap<SubQueueKey, BigSet<QueueKey>>,
    pub len: usize,
}

/// Per-LocalQueue state that changes over time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalQueueState {
    pub afs: AfsUsage,
    /// Entry penalties of admissions since usage was last sampled; they
    /// count on top of `afs` and fold into it at the next sample.
    #[serde(default)]
    pub afs_penalty: u64,
    pub budget: Option<BudgetState>,
}

/// Why the snapshot refused a change; the ledger re-validates through these.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("workload {0} is not pending")]
    NotPending(WorkloadId),
    #[error("workload {0} is not admitted")]
    NotAdmitted(WorkloadId),
    #[error("workload {0} already exists")]
    Duplicate(WorkloadId),
    #[error("ClusterQueue {0:?} does not exist")]
    UnknownClusterQueue(String),
    #[error("admission of {workload} targets ClusterQueue {got:?} but the workload is bound to {expected:?}")]
    WrongClusterQueue {
        workload: WorkloadId,
        expected: String,
        got: String,
    },
    #[error("cluster {0:?} does not exist or accepts no new work")]
    ClusterUnavailable(String),
    /// The workload's ClusterQueue or LocalQueue has a stopPolicy other
    /// than None (it was held after the decision was made).
    #[error("admission of {workload} targets {queue}, which is stopped")]
    QueueStopped { workload: WorkloadId, queue: String },
    /// The ClusterQueue's namespaceSelector does not select the
    /// workload's namespace (it may have changed since the decision).
    #[error("admission of {workload}: ClusterQueue {cluster_queue:?}'s namespaceSelector does not select namespace {namespace:?}")]
    NamespaceNotSelected {
        workload: WorkloadId,
        cluster_queue: String,
        namespace: String,
    },
    #[error("{0} has no quota cell in this configuration")]
    UnknownCell(FlavorResource),
    #[error("admission of {workload} no longer fits: {detail}")]
    NoLongerFits {
        workload: WorkloadId,
        detail: String,
    },
    #[error("admission of {workload} does not match the workload's requests: {detail}")]
    Inconsistent {
        workload: WorkloadId,
        detail: String,
    },
}

/// Everything the scheduler reads. Cloning is cheap where it matters: the
/// workloads are shared through `Arc`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub(crate) config: Arc<Config>,
    /// Shared: it changes only when the configuration does (a rebuild).
    pub(crate) tree: Arc<QuotaTree>,
    pub(crate) usage: Usage,
    pub(crate) clusters: ClusterTable,
    pub(crate) cluster_usage: ClusterUsage,
    /// What is assigned on each node of the clusters that report nodes.
    pub(crate) node_usage: NodeUsage,
    pub(crate) queues: Vec<ClusterQueueQueue>,
    pub(crate) pending: BigMap<WorkloadId, PendingWorkload>,
    pub(crate) admitted: BigMap<WorkloadId, AdmittedWorkload>,
    pub(crate) admitted_by_node: Vec<BigSet<VictimKey>>,
    pub(crate) local_queues: BTreeMap<String, LocalQueueState>,
    /// How many pending workloads each LocalQueue (`namespace/name`) has
    /// queued, for the ledger's limit on them.
    pub(crate) pending_by_local_queue: BTreeMap<String, usize>,
    /// Workloads being evicted that hold each cell, for the preemption
    /// search's "already freed" shortcut.
    pub(crate) evicting: BigSet<WorkloadId>,
    /// Pending workloads that are [`PendingWorkload::nominated`]: a cycle
    /// tries these first.
    pub(crate) nominated: BigSet<WorkloadId>,
    /// The cluster a nominated workload's victims were on: it is admitted
    /// there only, so it cannot take room freed for another preemptor
    /// elsewhere (soak seed 121199). Absent: anywhere.
    pub(crate) nominated_on: BigMap<WorkloadId, String>,
}

impl Snapshot {
    /// A snapshot of a validated configuration with no workloads.
    pub fn new(config: Config, clusters: &[Cluster]) -> Snapshot {
        let tree = QuotaTree::build(&config);
        let usage = tree.new_usage();
        let clusters = ClusterTable::build(&tree, clusters);
        let cluster_usage = clusters.new_usage(tree.cells.len());
        let node_usage = NodeUsage::new(&clusters.clusters);
        let nodes = tree.nodes.len();
        Snapshot {
            config: Arc::new(config),
            tree: Arc::new(tree),
            usage,
            clusters,
            cluster_usage,
            node_usage,
            queues: vec![ClusterQueueQueue::default(); nodes],
            pending: BigMap::new(),
            admitted: BigMap::new(),
            admitted_by_node: vec![BigSet::new(); nodes],
            local_queues: BTreeMap::new(),
            pending_by_local_queue: BTreeMap::new(),
            evicting: BigSet::new(),
            nominated: BigSet::new(),
            nominated_on: BigMap::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn tree(&self) -> &QuotaTree {
        &self.tree
    }

    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    pub fn cluster_table(&self) -> &ClusterTable {
        &self.clusters
    }

    pub fn cluster_usage(&self) -> &ClusterUsage {
        &self.cluster_usage
    }

    /// What is assigned on each node (clusters that report nodes).
    pub fn node_usage(&self) -> &NodeUsage {
        &self.node_usage
    }

    pub fn pending(&self) -> impl Iterator<Item = &PendingWorkload> {
        self.pending.values()
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Pending workloads queued in LocalQueue `key` (`namespace/name`).
    pub fn pending_in_local_queue(&self, key: &str) -> usize {
        self.pending_by_local_queue.get(key).copied().unwrap_or(0)
    }

    /// This snapshot's configuration, usage, clusters and the state of
    /// the LocalQueues `arriving` is queued in, without any workload: where
    /// the leader plans admissions for workloads not queued yet
    /// ([`crate::schedule_on_submit`]). Cheap to build (the tree is shared);
    /// with no admitted workloads in it, a cycle on it finds no victims.
    pub(crate) fn arriving_view(&self, arriving: &[PendingWorkload]) -> Snapshot {
        let nodes = self.tree.nodes.len();
        let local_queues = arriving
            .iter()
            .filter_map(|w| {
                let state = self.local_queues.get(&w.local_queue)?;
                Some((w.local_queue.clone(), *state))
            })
            .collect();
        Snapshot {
            config: Arc::clone(&self.config),
            tree: Arc::clone(&self.tree),
            usage: self.usage.clone(),
            clusters: self.clusters.clone(),
            cluster_usage: self.cluster_usage.clone(),
            node_usage: self.node_usage.clone(),
            queues: vec![ClusterQueueQueue::default(); nodes],
            pending: BigMap::new(),
            admitted: BigMap::new(),
            admitted_by_node: vec![BigSet::new(); nodes],
            local_queues,
            pending_by_local_queue: BTreeMap::new(),
            evicting: BigSet::new(),
            nominated: BigSet::new(),
            nominated_on: BigMap::new(),
        }
    }

    pub fn get_pending(&self, id: WorkloadId) -> Option<&PendingWorkload> {
        self.pending.get(&id)
    }

    /// The preemptor `w` is held for: the workload of another queue that
    /// last took `w`'s borrowed quota back, while it is pending. Until it
    /// leaves the queue for good (it runs to its end, or is cancelled),
    /// `w` may be admitted within its queue's nominal quota but not by
    /// borrowing, and preempts only for room within it.
    ///
    /// Why: the quota free at such a moment is what the reclaimer waits
    /// for, and taking it sends the reclaimer round again. Kueue counts on
    /// the reclaimer's queue head being admitted in the next cycle. With a
    /// higher-priority peer of the reclaimer taking the quota first (soak
    /// seed 177246), or preempting the reclaimer before it is admitted
    /// (seed 184860), or just after (seed 191358: the victim, re-admitted
    /// by borrowing each time, was preempted 18 times), the victim is
    /// reclaimed again and again. Holding it while the reclaimer is
    /// pending at all, admitted in between or not, is what settles all
    /// three; the victim waits at most as long as the reclaimer does.
    ///
    /// A reclaimer chosen as a victim itself, admitted but evicting, is
    /// about to wait again: it holds too. Without that, the victim borrows
    /// in the moment between the reclaimer's admission and its eviction,
    /// preempts for that room, is held again before the room is free,
    /// and its own victim is re-admitted into it (soak seed 191358: one
    /// workload preempted the same victim six times).
    pub fn borrowing_held_by(&self, w: &PendingWorkload) -> Option<WorkloadId> {
        let reclaimer = w.reclaimed_for?;
        self.waits_or_will(reclaimer).then_some(reclaimer)
    }

    /// Whether `id` is pending, or admitted and evicting (pending again
    /// once it stops).
    pub fn waits_or_will(&self, id: WorkloadId) -> bool {
        self.pending.contains_key(&id) || self.evicting.contains(&id)
    }

    /// Whether admitting `cells` to ClusterQueue `cluster_queue` would take
    /// it above its own quota (Kueue's borrowing) for some cell.
    pub fn admission_borrows(&self, cluster_queue: &str, assignment: &Assignment) -> bool {
        let Some(node) = self.tree.cluster_queue(cluster_queue) else {
            return false;
        };
        self.cells_of(assignment).iter().any(|&(fr, q)| {
            self.usage.get(node, fr).saturating_add(q) > self.tree.nodes[node].subtree_quota[fr]
        })
    }

    pub fn admitted(&self) -> impl Iterator<Item = &AdmittedWorkload> {
        self.admitted.values()
    }

    pub fn get_admitted(&self, id: WorkloadId) -> Option<&AdmittedWorkload> {
        self.admitted.get(&id)
    }

    pub fn local_queue_state(&self, key: &str) -> LocalQueueState {
        self.local_queues.get(key).copied().unwrap_or_default()
    }

    /// Every LocalQueue's time-varying state (for the ledger's snapshots).
    pub fn local_queue_states(&self) -> &BTreeMap<String, LocalQueueState> {
        &self.local_queues
    }

    /// Restores a LocalQueue's state from a ledger snapshot.
    pub fn restore_local_queue_state(&mut self, key: &str, state: LocalQueueState) {
        self.local_queues.insert(key.to_string(), state);
    }

    /// Restores a reservation that was valid when it was recorded (rebuilding
    /// from a ledger snapshot or after a configuration change). It is not
    /// re-validated: the ledger checks [`Snapshot::violations`] afterwards.
    pub fn restore_admitted(&mut self, admitted: AdmittedWorkload) -> Result<(), SnapshotError> {
        let id = admitted.pending.id;
        if self.pending.contains_key(&id) || self.admitted.contains_key(&id) {
            return Err(SnapshotError::Duplicate(id));
        }
        self.insert_admitted(admitted);
        Ok(())
    }

    /// Replaces the configuration and clusters, re-binding every workload
    /// by name and re-charging every reservation. Pending workloads whose
    /// ClusterQueue vanished are returned so the owner can report them.
    pub fn rebuild(&mut self, config: Config, clusters: &[Cluster]) -> Vec<PendingWorkload> {
        let pending = std::mem::take(&mut self.pending);
        let admitted = std::mem::take(&mut self.admitted);
        let local_queues = std::mem::take(&mut self.local_queues);
        *self = Snapshot::new(config, clusters);
        self.local_queues = local_queues;
        for (_, a) in admitted {
            self.insert_admitted(a);
        }
        let mut orphans = Vec::new();
        for (_, p) in pending {
            if let Err(SnapshotError::UnknownClusterQueue(_)) = self.add_pending(p.clone()) {
                orphans.push(p);
            }
        }
        orphans
    }

    /// Replaces the cluster list (registration, inventory change, state).
    pub fn set_clusters(&mut self, clusters: &[Cluster]) {
        let table = ClusterTable::build(&self.tree, clusters);
        (self.cluster_usage, self.node_usage) = self.usage_on(&table);
        self.clusters = table;
    }

    /// Replaces the cluster list unless what is assigned on the clusters
    /// would then exceed what they have, in total or on a node: then
    /// nothing changes and the excesses are returned. Costs the admitted
    /// workloads, not the pending ones (no copy of the snapshot).
    pub fn try_set_clusters(&mut self, clusters: &[Cluster]) -> Result<(), Vec<String>> {
        let table = ClusterTable::build(&self.tree, clusters);
        let (cluster_usage, node_usage) = self.usage_on(&table);
        let mut excesses = table.violations(&self.tree, &cluster_usage);
        excesses.extend(crate::nodes::violations(&table.clusters, &node_usage));
        if !excesses.is_empty() {
            return Err(excesses);
        }
        (self.clusters, self.cluster_usage, self.node_usage) = (table, cluster_usage, node_usage);
        Ok(())
    }

    /// Usage of the tree and of the clusters derived from scratch as the
    /// sum over reservations.
    fn recomputed_usage(&self) -> (Usage, ClusterUsage, NodeUsage) {
        let mut usage = self.tree.new_usage();
        for a in self.admitted.values() {
            if let Some(node) = self.tree.cluster_queue(&a.pending.cluster_queue) {
                for (fr, q) in self.cells_of(&a.assignment) {
                    self.tree.charge(&mut usage, node, fr, q);
                }
            }
        }
        let (cluster_usage, node_usage) = self.usage_on(&self.clusters);
        (usage, cluster_usage, node_usage)
    }

    /// What the reservations use of the clusters in `table`, in total and
    /// per node, summed from scratch.
    fn usage_on(&self, table: &ClusterTable) -> (ClusterUsage, NodeUsage) {
        let mut cluster_usage = table.new_usage(self.tree.cells.len());
        let mut node_usage = NodeUsage::new(&table.clusters);
        for a in self.admitted.values() {
            let Some(c) = table.index_of(&a.assignment.cluster) else {
                continue;
            };
            for (fr, q) in self.cells_of(&a.assignment) {
                cluster_usage.add(c, fr, q);
            }
            node_usage.charge(
                &table.clusters[c],
                c,
                &a.pending.workload,
                &a.assignment,
                true,
            );
        }
        (cluster_usage, node_usage)
    }

    /// The interned cells an assignment charges.
    pub(crate) fn cells_of(&self, assignment: &Assignment) -> Vec<(FrId, u64)> {
        assignment
            .usage
            .iter()
            .filter_map(|(fr, q)| self.tree.cell(fr).map(|id| (id, q.milli())))
            .collect()
    }

    fn sub_queue_key(&self, node: NodeId, workload: &PendingWorkload) -> SubQueueKey {
        let uses_afs = self
            .config
            .cluster_queues
            .get(&self.tree.nodes[node].name)
            .is_some_and(|cq| cq.uses_admission_fair_sharing());
        let resources: BTreeSet<&String> = workload
            .workload
            .spec
            .pod_sets
            .iter()
            .flat_map(|ps| {
                ps.requests
                    .iter()
                    .filter(|(_, q)| !q.is_zero())
                    .map(|(r, _)| r)
            })
            .collect();
        SubQueueKey {
            local_queue: if uses_afs {
                workload.local_queue.clone()
            } else {
                String::new()
            },
            resources: resources.into_iter().cloned().collect(),
        }
    }

    /// Queues a workload. Its binding must name an existing ClusterQueue.
    pub fn add_pending(&mut self, workload: PendingWorkload) -> Result<(), SnapshotError> {
        if self.pending.contains_key(&workload.id) || self.admitted.contains_key(&workload.id) {
            return Err(SnapshotError::Duplicate(workload.id));
        }
        let node = self
            .tree
            .cluster_queue(&workload.cluster_queue)
            .ok_or_else(|| SnapshotError::UnknownClusterQueue(workload.cluster_queue.clone()))?;
        let sub = self.sub_queue_key(node, &workload);
        let queue = &mut self.queues[node];
        queue.sub_queues.entry(sub).or_default().insert((
            Reverse(workload.priority),
            workload.created_at,
            workload.id,
        ));
        queue.len += 1;
        if workload.nominated {
            self.nominated.insert(workload.id);
        }
        *self
            .pending_by_local_queue
            .entry(workload.local_queue.clone())
            .or_default() += 1;
        self.pending.insert(workload.id, workload);
        Ok(())
    }

    /// Marks a pending workload nominated (or not); see
    /// [`PendingWorkload::nominated`]. Returns whether it is pending.
    pub fn set_nominated(&mut self, id: WorkloadId, nominated: bool) -> bool {
        match self.pending.get_mut(&id) {
            Some(w) => {
                w.nominated = nominated;
                if nominated {
                    self.nominated.insert(id);
                } else {
                    self.nominated.remove(&id);
                    self.nominated_on.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Ends `id`'s hold by `victim` ([`Self::borrowing_held_by`]): `id`
    /// has just preempted the workload that once took its borrowed quota
    /// back, which now waits for `id`, not the other way round. Left in
    /// place, the two hold each other: soak seed 220645, where two
    /// workloads of two queues took turns by fair sharing, then neither
    /// could borrow while the other waited, and both stayed pending.
    pub fn end_hold_by(&mut self, id: WorkloadId, victim: WorkloadId) {
        if let Some(w) = self.pending.get_mut(&id) {
            if w.reclaimed_for == Some(victim) {
                w.reclaimed_for = None;
            }
        }
    }

    /// The cluster a nominated workload's victims were on (see
    /// `nominated_on`); `None` lets it go anywhere.
    pub fn set_nominated_on(&mut self, id: WorkloadId, cluster: Option<String>) {
        match cluster {
            Some(c) if self.pending.contains_key(&id) => {
                self.nominated_on.insert(id, c);
            }
            _ => {
                self.nominated_on.remove(&id);
            }
        }
    }

    /// Takes a workload out of its queue (cancelled, or about to be admitted).
    pub fn remove_pending(&mut self, id: WorkloadId) -> Option<PendingWorkload> {
        let workload = self.pending.remove(&id)?;
        self.nominated.remove(&id);
        self.nominated_on.remove(&id);
        if let Some(n) = self.pending_by_local_queue.get_mut(&workload.local_queue) {
            *n -= 1;
            if *n == 0 {
                self.pending_by_local_queue.remove(&workload.local_queue);
            }
        }
        if let Some(node) = self.tree.cluster_queue(&workload.cluster_queue) {
            let sub = self.sub_queue_key(node, &workload);
            let queue = &mut self.queues[node];
            if let Some(set) = queue.sub_queues.get_mut(&sub) {
                if set
                    .remove(&(Reverse(workload.priority), workload.created_at, id))
                    .is_some()
                {
                    queue.len -= 1;
                }
                if set.is_empty() {
                    queue.sub_queues.remove(&sub);
                }
            }
        }
        Some(workload)
    }

    /// Admits a pending workload, re-validating the decision against the
    /// current state: the workload must still be pending in that
    /// ClusterQueue, the assignment must charge exactly what its pod sets
    /// request, and quota and cluster capacity must still hold it. On
    /// error nothing changes.
    pub fn admit(&mut self, admission: &Admission, at: Timestamp) -> Result<(), SnapshotError> {
        let trusting = fleetq_model::mutants::active(Mutant::SkipRevalidation);
        self.admit_checked(admission, at, trusting)
    }

    /// Admits a workload queued by the same ledger command that carries the
    /// decision (the leader planned it with [`crate::schedule_on_submit`]), with
    /// the same checks as [`Snapshot::admit`].
    pub fn admit_on_submit(
        &mut self,
        admission: &Admission,
        at: Timestamp,
    ) -> Result<(), SnapshotError> {
        let trusting = fleetq_model::mutants::active(Mutant::SkipRevalidation)
            || fleetq_model::mutants::active(Mutant::OnSubmitSkipsRevalidation);
        self.admit_checked(admission, at, trusting)
    }

    /// A queue held (stopPolicy Hold or HoldAndDrain) after the cycle
    /// decided admits nothing more, as the cycle itself would not.
    fn check_not_stopped(&self, pending: &PendingWorkload) -> Result<(), SnapshotError> {
        use fleetq_model::cluster_queue::StopPolicy;
        let cq_stopped = self
            .config
            .cluster_queues
            .get(&pending.cluster_queue)
            .is_some_and(|cq| cq.spec.stop_policy != StopPolicy::None);
        let lq_stopped = self
            .config
            .local_queues
            .get(&pending.local_queue)
            .is_some_and(|lq| lq.spec.stop_policy != StopPolicy::None);
        let queue = if cq_stopped {
            format!("ClusterQueue {:?}", pending.cluster_queue)
        } else if lq_stopped {
            format!("LocalQueue {}", pending.local_queue)
        } else {
            return Ok(());
        };
        Err(SnapshotError::QueueStopped {
            workload: pending.id,
            queue,
        })
    }

    /// Refuses a workload whose ClusterQueue's namespaceSelector does not
    /// select its namespace (Kueue's rule).
    fn check_namespace_selected(&self, pending: &PendingWorkload) -> Result<(), SnapshotError> {
        let Some(cq) = self.config.cluster_queues.get(&pending.cluster_queue) else {
            return Ok(());
        };
        if self
            .config
            .admits_namespace(cq, &pending.workload.namespace)
        {
            Ok(())
        } else {
            Err(SnapshotError::NamespaceNotSelected {
                workload: pending.id,
                cluster_queue: cq.name.clone(),
                namespace: pending.workload.namespace.clone(),
            })
        }
    }

    fn admit_checked(
        &mut self,
        admission: &Admission,
        at: Timestamp,
        trusting: bool,
    ) -> Result<(), SnapshotError> {
        let id = admission.workload;
        let pending = self.pending.get(&id).ok_or(SnapshotError::NotPending(id))?;
        if pending.cluster_queue != admission.cluster_queue {
            return Err(SnapshotError::WrongClusterQueue {
                workload: id,
                expected: pending.cluster_queue.clone(),
                got: admission.cluster_queue.clone(),
            });
        }
        let node = self
            .tree
            .cluster_queue(&pending.cluster_queue)
            .ok_or_else(|| SnapshotError::UnknownClusterQueue(pending.cluster_queue.clone()))?;
        if !trusting {
            self.check_not_stopped(pending)?;
            self.check_namespace_selected(pending)?;
        }
        crate::assign::check_assignment_matches(pending, &admission.assignment).map_err(
            |detail| SnapshotError::Inconsistent {
                workload: id,
                detail,
            },
        )?;
        let cluster = self
            .clusters
            .index_of(&admission.assignment.cluster)
            .filter(|&c| trusting || self.clusters.clusters[c].state().accepts_new_work())
            .ok_or_else(|| {
                SnapshotError::ClusterUnavailable(admission.assignment.cluster.clone())
            })?;
        let mut cells = Vec::with_capacity(admission.assignment.usage.len());
        for (fr, q) in &admission.assignment.usage {
            let cell = self
                .tree
                .cell(fr)
                .ok_or_else(|| SnapshotError::UnknownCell(fr.clone()))?;
            cells.push((cell, q.milli()));
        }
        for &(fr, q) in &cells {
            let available = self.tree.available(&self.usage, node, fr);
            if q > available && !trusting {
                return Err(SnapshotError::NoLongerFits {
                    workload: id,
                    detail: format!(
                        "{} needs {} but ClusterQueue {:?} has {} available",
                        self.tree.cells[fr],
                        fleetq_model::Quantity::from_milli(q),
                        pending.cluster_queue,
                        fleetq_model::Quantity::from_milli(available)
                    ),
                });
            }
        }
        if !trusting && !self.clusters.fits_now(&self.cluster_usage, cluster, &cells) {
            return Err(SnapshotError::NoLongerFits {
                workload: id,
                detail: format!(
                    "cluster {:?} has no room left",
                    admission.assignment.cluster
                ),
            });
        }
        if !trusting {
            crate::nodes::check_placement(
                &self.clusters.clusters[cluster],
                self.node_usage.of(cluster),
                &self.config,
                &pending.workload,
                &admission.assignment,
            )
            .map_err(|detail| SnapshotError::NoLongerFits {
                workload: id,
                detail,
            })?;
        }
        let lq_key = pending.local_queue.clone();
        let budget_spec = self
            .config
            .local_queues
            .get(&lq_key)
            .and_then(|lq| lq.spec.gpu_budget);
        if let Some(spec) = budget_spec {
            let state = self.local_queue_state(&lq_key).budget;
            let tokens = budget::tokens_at(spec, state, at);
            if admission.budget_charge > tokens {
                return Err(SnapshotError::NoLongerFits {
                    workload: id,
                    detail: format!(
                        "LocalQueue {lq_key} has {} GPU-seconds of budget left, the admission charges {}",
                        tokens / 1000,
                        admission.budget_charge / 1000
                    ),
                });
            }
        }
        let pending = self
            .remove_pending(id)
            .ok_or(SnapshotError::NotPending(id))?;
        let entry = self.local_queues.entry(lq_key).or_default();
        entry.afs_penalty = entry.afs_penalty.saturating_add(admission.afs_penalty);
        if let Some(spec) = budget_spec {
            entry.budget = Some(budget::charge(
                spec,
                entry.budget,
                at,
                admission.budget_charge,
            ));
        }
        self.insert_admitted(AdmittedWorkload {
            pending,
            assignment: admission.assignment.clone(),
            admitted_at: at,
            evicting: false,
            budget_charge: admission.budget_charge,
        });
        Ok(())
    }

    fn insert_admitted(&mut self, admitted: AdmittedWorkload) {
        let cells = self.cells_of(&admitted.assignment);
        if let Some(node) = self.tree.cluster_queue(&admitted.pending.cluster_queue) {
            for &(fr, q) in &cells {
                self.tree.charge(&mut self.usage, node, fr, q);
            }
            self.admitted_by_node[node].insert((
                admitted.pending.priority,
                Reverse(admitted.admitted_at),
                admitted.pending.id,
            ));
        }
        if let Some(c) = self.clusters.index_of(&admitted.assignment.cluster) {
            for &(fr, q) in &cells {
                self.cluster_usage.add(c, fr, q);
            }
            let info = &self.clusters.clusters[c];
            let (w, a) = (&admitted.pending.workload, &admitted.assignment);
            self.node_usage.charge(info, c, w, a, true);
        }
        if admitted.evicting {
            self.evicting.insert(admitted.pending.id);
        }
        self.admitted.insert(admitted.pending.id, admitted);
    }

    /// Marks an admitted workload as being evicted; it keeps its quota until
    /// [`Snapshot::release`] (quota follows physical truth).
    pub fn mark_evicting(&mut self, id: WorkloadId) -> Result<(), SnapshotError> {
        let a = self
            .admitted
            .get_mut(&id)
            .ok_or(SnapshotError::NotAdmitted(id))?;
        a.evicting = true;
        self.evicting.insert(id);
        Ok(())
    }

    /// Releases a reservation (finished, cancelled and stopped, evicted and
    /// stopped, or its cluster was lost). Refunds the unused part of its
    /// GPU-second budget charge at `at`.
    pub fn release(
        &mut self,
        id: WorkloadId,
        at: Timestamp,
    ) -> Result<AdmittedWorkload, SnapshotError> {
        let admitted = self
            .admitted
            .remove(&id)
            .ok_or(SnapshotError::NotAdmitted(id))?;
        self.evicting.remove(&id);
        let cells = self.cells_of(&admitted.assignment);
        let times = if fleetq_model::mutants::active(Mutant::DoubleRelease) {
            2
        } else {
            1
        };
        if let Some(node) = self.tree.cluster_queue(&admitted.pending.cluster_queue) {
            for _ in 0..times {
                for &(fr, q) in &cells {
                    self.tree.release(&mut self.usage, node, fr, q);
                }
            }
            self.admitted_by_node[node].remove(&(
                admitted.pending.priority,
                Reverse(admitted.admitted_at),
                id,
            ));
        }
        if let Some(c) = self.clusters.index_of(&admitted.assignment.cluster) {
            for _ in 0..times {
                for &(fr, q) in &cells {
                    self.cluster_usage.sub(c, fr, q);
                }
            }
            let info = &self.clusters.clusters[c];
            let (w, a) = (&admitted.pending.workload, &admitted.assignment);
            self.node_usage.charge(info, c, w, a, false);
        }
        let lq = admitted.pending.local_queue.clone();
        let spec = self
            .config
            .local_queues
            .get(&lq)
            .and_then(|l| l.spec.gpu_budget);
        let ran = at.since(admitted.admitted_at);
        let entry = self.local_queues.entry(lq).or_default();
        if let (Some(spec), Some(max)) =
            (spec, admitted.pending.workload.spec.maximum_execution_time)
        {
            let refund = budget::refund(admitted.budget_charge, max, ran);
            entry.budget = Some(budget::credit(spec, entry.budget, at, refund));
        }
        Ok(admitted)
    }

    /// Adds consumed GPU-seconds to a LocalQueue's admission-fair-sharing
    /// usage at `at` (decaying what was there). Entry penalties charged
    /// since the last sample fold into the usage, as Kueue does.
    pub fn record_local_queue_usage(
        &mut self,
        local_queue: &str,
        gpu_milli_seconds: u64,
        at: Timestamp,
        half_life: Duration,
    ) {
        let entry = self
            .local_queues
            .entry(local_queue.to_string())
            .or_default();
        let amount = gpu_milli_seconds.saturating_add(std::mem::take(&mut entry.afs_penalty));
        entry.afs = fair::add_usage(entry.afs, amount, at, half_life);
    }

    /// Applies a cycle's decisions as the ledger would: admissions are
    /// re-validated one by one (rejected ones are returned with their
    /// error), victims are marked as evicting.
    pub fn apply(
        &mut self,
        decisions: &Decisions,
        at: Timestamp,
    ) -> Vec<(WorkloadId, SnapshotError)> {
        let mut rejected = Vec::new();
        for p in &decisions.preemptions {
            if let Err(e) = self.mark_evicting(p.victim) {
                rejected.push((p.victim, e));
            }
        }
        for a in &decisions.admissions {
            if let Err(e) = self.admit(a, at) {
                rejected.push((a.workload, e));
            }
        }
        rejected
    }

    /// Every broken limit (quota tree and clusters) and every mismatch
    /// between recorded usage and the sum over reservations (invariants 1
    /// and 2 of docs/architecture.md §6). Empty when all hold.
    pub fn violations(&self) -> Vec<String> {
        let mut out = self.tree.violations(&self.usage);
        out.extend(self.clusters.violations(&self.tree, &self.cluster_usage));
        out.extend(crate::nodes::violations(
            &self.clusters.clusters,
            &self.node_usage,
        ));
        let (usage, cluster_usage, node_usage) = self.recomputed_usage();
        if usage != self.usage {
            out.push("quota usage differs from the sum over reservations".into());
        }
        if cluster_usage != self.cluster_usage {
            out.push("cluster usage differs from the sum over reservations".into());
        }
        if node_usage != self.node_usage {
            out.push("node usage differs from the sum over reservations".into());
        }
        let mut per_local_queue: BTreeMap<&str, usize> = BTreeMap::new();
        for p in self.pending.values() {
            *per_local_queue.entry(p.local_queue.as_str()).or_default() += 1;
        }
        if !per_local_queue.into_iter().eq(self
            .pending_by_local_queue
            .iter()
            .map(|(k, v)| (k.as_str(), *v)))
        {
            out.push("pending counts per LocalQueue differ from the pending workloads".into());
        }
        out
    }
}
