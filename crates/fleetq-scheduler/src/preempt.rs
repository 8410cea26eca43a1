//! Choosing preemption victims, with Kueue's policies, for quota *and*
//! devices on one cluster.
//!
//! Candidates are ordered as Kueue orders them: workloads already being
//! evicted first (they cost nothing), then those of other ClusterQueues
//! over which the preemptor has a hierarchical advantage, then the other
//! ClusterQueues' (only while their queue, and every cohort between it and
//! the preemptor, exceeds its quota), then the preemptor's own queue; each
//! class lowest priority first, then the most recently admitted. Victims
//! are removed in that order until the preemptor fits, then added back
//! where the preemptor still fits without them, so the set is minimal.
//! Each eligible cluster is tried; the one needing the fewest,
//! lowest-priority victims wins.

mod fair_sharing;

use std::cmp::Reverse;
use std::collections::BTreeSet;

use fleetq_model::ClusterQueue;

use crate::assign::{Plan, Possibility};
use crate::cycle::Cycle;
use crate::decision::{PendingReason, Preemption, PreemptionReason, ReasonKind};
use crate::policy::{self, CohortVariant, Rank};
use crate::quota::{FrId, NodeId, NodeKind, QuotaTree, Usage};
use crate::snapshot::{AdmittedWorkload, PendingWorkload};
use crate::WorkloadId;

struct Candidate<'a> {
    workload: &'a AdmittedWorkload,
    node: NodeId,
    cluster: Option<usize>,
    cells: Vec<(FrId, u64)>,
    /// Already being evicted: free for the taking, not a new victim.
    evicting: bool,
    reason: PreemptionReason,
    /// Classical preemption, another ClusterQueue: Kueue's variant, which
    /// says whether it may be taken while the preemptor borrows. `None`
    /// for the own queue, evicting workloads and fair sharing.
    variant: Option<CohortVariant>,
    /// The cohort at whose level the hierarchical walk found it (Kueue's
    /// lowest common ancestor): the queue and the cohorts below this one
    /// must still exceed their quota for it to be taken.
    lca: Option<NodeId>,
}

impl Candidate<'_> {
    /// Evicting first, then hierarchical candidates, other queues, the own
    /// queue; lower priority, newest (ties: the later submission) first.
    fn order_key(
        &self,
        own: NodeId,
    ) -> (
        u8,
        i32,
        Reverse<fleetq_model::Timestamp>,
        Reverse<WorkloadId>,
    ) {
        let class = if self.evicting {
            0
        } else if self.node == own {
            3
        } else if self.variant == Some(CohortVariant::HierarchicalReclaim) {
            1
        } else {
            2
        };
        (
            class,
            self.workload.pending.priority,
            Reverse(self.workload.admitted_at),
            Reverse(self.workload.pending.id),
        )
    }
}

/// The cluster and victims (indices into the candidates returned with
/// them) that would make room for `w` under `plan`, changing nothing.
#[allow(clippy::type_complexity)]
fn find_victims<'s>(
    cycle: &mut Cycle<'s>,
    node: NodeId,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    eligible: &[usize],
) -> Option<(usize, Vec<usize>, Vec<Candidate<'s>>)> {
    cycle.decisions.stats.preemption_searches += 1;
    // A workload held from borrowing (`Cycle::held_by`) may
    // preempt only for room within its queue's nominal quota: room that
    // needs borrowing it could not take, and its victims would be
    // re-admitted into it and preempted again (soak seed 177246).
    let held = cycle.held_by(w).is_some();
    let tries_for = |cycle: &Cycle<'_>, all: &[Candidate<'_>]| {
        if held {
            vec![false]
        } else {
            attempts(cycle, node, cq, plan, all)
        }
    };
    let all = candidates(cycle, node, cq, w, plan, false);
    let tries = tries_for(cycle, &all);
    if let Some((c, v)) = search(cycle, node, cq, w, plan, eligible, &all, &tries) {
        return Some((c, v, all));
    }
    // minRuntimeBeforePreemption protects young workloads unless nothing
    // else frees enough and they rank below the preemptor.
    let with_protected = candidates(cycle, node, cq, w, plan, true);
    let tries = tries_for(cycle, &with_protected);
    search(cycle, node, cq, w, plan, eligible, &with_protected, &tries)
        .map(|(c, v)| (c, v, with_protected))
}

/// Kueue's `SimulatePreemption`, asked by flavor assignment for one
/// flavor: whether preemption could make room for `w` under `plan`, and
/// whether only other queues would lose workloads (`Reclaim`). Changes
/// nothing.
pub(crate) fn simulate(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    eligible: &[usize],
) -> Possibility {
    #[cfg(debug_assertions)]
    let before = (cycle.projected.clone(), cycle.taken.len());
    let found = find_victims(cycle, node, cq, w, plan, eligible);
    #[cfg(debug_assertions)]
    debug_assert!(
        before == (cycle.projected.clone(), cycle.taken.len()),
        "a simulated preemption must change nothing"
    );
    match found {
        None => Possibility::NoCandidates,
        Some((_, chosen, all)) if chosen.iter().any(|&i| all[i].node == node) => {
            Possibility::Preempt
        }
        Some(_) => Possibility::Reclaim,
    }
}

/// Tries to make room for `w` by preemption. On success the victims are
/// recorded in the cycle's decisions, the freed quota is reserved for `w`
/// for the rest of the cycle, and the reason `w` now waits is returned.
/// Otherwise, why preemption cannot help, for its pending reason.
pub(crate) fn try_preempt(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    eligible: &[usize],
) -> Result<PendingReason, String> {
    let Some((cluster, chosen, all)) = find_victims(cycle, node, cq, w, plan, eligible) else {
        return Err(why_not(cycle, cq, w, plan));
    };
    let snap = cycle.snap;
    let mut new_victims = 0;
    let mut waiting_for = 0;
    // Where the victims it waits for run: victims chosen for quota may run
    // on another cluster than the preemptor's room.
    let mut waiting_on = BTreeSet::new();
    // Victims keep their quota until they really stop (quota follows
    // physical truth), so the cycle's working state keeps charging them:
    // nobody else in this cycle may use what they will free. What the
    // preemptor needs beyond what its victims free comes out of currently
    // free quota; reserve that part now so a later, lower-ranked workload in
    // this cycle cannot take it. The working state thus only ever
    // over-approximates real usage, so every admission it allows is one the
    // ledger will accept.
    let reserve = quota_beyond_victims(cycle, node, plan, chosen.iter().map(|&i| &all[i]));
    let mut reserve_on_cluster = plan.cells.clone();
    for cand in chosen.iter().map(|&i| &all[i]) {
        cycle.taken.insert(cand.workload.pending.id);
        for &(fr, q) in &cand.cells {
            if cand.cluster == Some(cluster) {
                for r in reserve_on_cluster.iter_mut().filter(|r| r.0 == fr) {
                    r.1 = r.1.saturating_sub(q);
                }
            }
        }
        if cand.evicting {
            waiting_for += 1;
            if let Some(c) = cand.cluster {
                waiting_on.insert(snap.clusters.clusters[c].name());
            }
            continue;
        }
        new_victims += 1;
        cycle.decisions.preemptions.push(Preemption {
            victim: cand.workload.pending.id,
            preemptor: w.id,
            reason: cand.reason,
            grace_period: cand.workload.pending.workload.spec.preemption_grace_period,
            cluster: Some(snap.clusters.clusters[cluster].name().to_string()),
        });
    }
    for &(fr, q) in &reserve {
        snap.tree.charge(&mut cycle.usage, node, fr, q);
    }
    for &(fr, q) in &reserve_on_cluster {
        cycle.cluster_usage.add(cluster, fr, q);
    }
    let on_cluster = chosen
        .iter()
        .map(|&i| &all[i])
        .filter(|c| c.cluster == Some(cluster))
        .map(|c| c.workload);
    cycle.reserve_node_room(cq, w, plan, cluster, on_cluster);
    // In the projected state the victims are gone and the preemptor runs.
    for cand in chosen.iter().map(|&i| &all[i]) {
        release(cycle, cand);
    }
    for &(fr, q) in &plan.cells {
        snap.tree.charge(&mut cycle.projected, node, fr, q);
        cycle.projected_cluster.add(cluster, fr, q);
    }
    let cluster_name = snap.clusters.clusters[cluster].name();
    let message = if new_victims > 0 {
        format!("preempting {new_victims} workload(s) on cluster {cluster_name}; admitted once they stop")
    } else if waiting_for > 0 {
        let on = waiting_on.into_iter().collect::<Vec<_>>().join(", ");
        format!("waiting for {waiting_for} evicted workload(s) on cluster(s) {on} to stop; its room is on cluster {cluster_name}")
    } else {
        // Room that this cycle's earlier victims free beyond their preemptors' needs.
        format!("waiting for workloads preempted on cluster {cluster_name} to stop")
    };
    Ok(PendingReason::new(ReasonKind::Preempting, message))
}

/// What of `plan` must come out of quota free right now, once `victims`
/// are gone: the plan less what removing them makes available to `node`
/// in the quota tree. A victim of another ClusterQueue frees `node`
/// nothing unless its queue was borrowing, and one chosen only for room
/// on the cluster may free no quota at all; subtracting victims' cells
/// one for one (as before) under-reserved, and the queue's lower
/// workloads were admitted into the preemptor's room and preempted again
/// (found by the soak, seed 107281: one preemptor, two victims, eight
/// rounds while a third victim could not stop).
fn quota_beyond_victims<'a, 's: 'a>(
    cycle: &Cycle<'_>,
    node: NodeId,
    plan: &Plan,
    victims: impl Iterator<Item = &'a Candidate<'s>>,
) -> Vec<(FrId, u64)> {
    let tree = &cycle.snap.tree;
    let mut after = cycle.usage.clone();
    for cand in victims {
        for &(fr, q) in &cand.cells {
            tree.release(&mut after, cand.node, fr, q);
        }
    }
    // Pod sets on one flavor repeat a cell: what is freed counts once.
    let mut freed: Vec<(FrId, u64)> = Vec::new();
    plan.cells
        .iter()
        .map(|&(fr, q)| {
            let left = match freed.iter_mut().find(|f| f.0 == fr) {
                Some(f) => &mut f.1,
                None => {
                    let gained = tree
                        .available(&after, node, fr)
                        .saturating_sub(tree.available(&cycle.usage, node, fr));
                    freed.push((fr, gained));
                    &mut freed.last_mut().expect("just pushed").1
                }
            };
            let covered = q.min(*left);
            *left -= covered;
            (fr, q - covered)
        })
        .collect()
}

/// Why no set of victims frees enough for `w`: who holds what it needs,
/// and which rule keeps each group out of reach.
fn why_not(cycle: &Cycle<'_>, cq: &ClusterQueue, w: &PendingWorkload, plan: &Plan) -> String {
    let snap = cycle.snap;
    let needed: Vec<FrId> = plan.cells.iter().map(|&(fr, _)| fr).collect();
    let holds = |a: &AdmittedWorkload| {
        snap.cells_of(&a.assignment)
            .iter()
            .any(|(fr, _)| needed.contains(fr))
    };
    let p = &cq.spec.preemption;
    let (mut own_above, mut own_protected) = (0, 0);
    let (mut elsewhere, mut elsewhere_forbidden) = (0, 0);
    for a in snap.admitted.values().filter(|a| !a.evicting && holds(a)) {
        if a.pending.cluster_queue == cq.name {
            let victim = Rank {
                priority: a.pending.priority,
                created_at: a.pending.created_at,
            };
            let preemptor = Rank {
                priority: w.priority,
                created_at: w.created_at,
            };
            if !policy::within_cluster_queue_allows(
                cq.spec.preemption.within_cluster_queue,
                preemptor,
                victim,
            ) {
                own_above += 1;
            } else {
                own_protected += 1;
            }
        } else if !policy::reclaim_allows(p.reclaim_within_cohort, w.priority, a.pending.priority) {
            elsewhere_forbidden += 1;
        } else {
            elsewhere += 1;
        }
    }
    let mut parts = Vec::new();
    if own_above > 0 {
        parts.push(format!(
            "{own_above} workload(s) of ClusterQueue {:?} hold it, which withinClusterQueue: {:?} does not let it preempt",
            cq.name, p.within_cluster_queue
        ));
    }
    if own_protected > 0 {
        parts.push(format!(
            "{own_protected} it may preempt in its own queue do not free enough (or run on another cluster, or are within minRuntimeBeforePreemption)"
        ));
    }
    if elsewhere_forbidden > 0 {
        parts.push(format!(
            "{elsewhere_forbidden} workload(s) of other ClusterQueues hold it, which reclaimWithinCohort: {:?} does not let it preempt",
            p.reclaim_within_cohort
        ));
    }
    if elsewhere > 0 {
        parts.push(format!(
            "{elsewhere} workload(s) of other ClusterQueues hold it within their queues' nominal quota (nothing to reclaim) or free too little"
        ));
    }
    if parts.is_empty() {
        "preemption was considered, but no running workload holds what it needs".to_string()
    } else {
        format!("preemption was considered: {}", parts.join("; "))
    }
}

/// `plan`'s requests per cell, a cell that pod sets repeat counted once.
fn requests(plan: &Plan) -> Vec<(FrId, u64)> {
    let mut out: Vec<(FrId, u64)> = Vec::new();
    for &(fr, q) in &plan.cells {
        match out.iter_mut().find(|r| r.0 == fr) {
            Some(r) => r.1 = r.1.saturating_add(q),
            None => out.push((fr, q)),
        }
    }
    out
}

/// Kueue's `IsWithinNominalInResources`: `node` uses no more than its
/// subtree's quota in every cell of `cells`.
fn within_quota(tree: &QuotaTree, usage: &Usage, node: NodeId, cells: &[FrId]) -> bool {
    cells
        .iter()
        .all(|&fr| usage.get(node, fr) <= tree.nodes[node].subtree_quota[fr])
}

/// Kueue's `QuantitiesFitInQuota`: whether `requests` fit in `node`'s
/// subtree quota on top of its usage, and what of them is left for the
/// level above once `node`'s unused guaranteed (unlendable) quota is used.
fn fits_in_quota(
    tree: &QuotaTree,
    usage: &Usage,
    node: NodeId,
    requests: &[(FrId, u64)],
) -> (bool, Vec<(FrId, u64)>) {
    let n = &tree.nodes[node];
    let mut fits = true;
    let remaining = requests
        .iter()
        .map(|&(fr, q)| {
            let used = usage.get(node, fr);
            if used.saturating_add(q) > n.subtree_quota[fr] {
                fits = false;
            }
            (fr, q.saturating_sub(n.guaranteed[fr].saturating_sub(used)))
        })
        .collect();
    (fits, remaining)
}

/// The second half of Kueue's `FindHeightOfLowestSubtreeThatFits`: whether
/// `q` of `fr`, beyond what `node` has of its own, fits in the quota of a
/// cohort above it that is not the root; then the preemptor may reclaim
/// there (a hierarchical advantage) even if it exceeds its nominal quota.
pub(crate) fn may_reclaim_in_hierarchy(
    tree: &QuotaTree,
    usage: &Usage,
    node: NodeId,
    fr: FrId,
    q: u64,
) -> bool {
    tree.lowest_subtree_that_fits(usage, node, fr, q).1
}

fn candidates<'s>(
    cycle: &Cycle<'s>,
    node: NodeId,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    include_protected: bool,
) -> Vec<Candidate<'s>> {
    let snap = cycle.snap;
    let tree = &snap.tree;
    let policy = cq.spec.preemption;
    let needed: Vec<FrId> = plan.cells.iter().map(|&(fr, _)| fr).collect();
    let root = tree.root_of(node);
    let mut out = Vec::new();
    let mut consider = |a: &'s AdmittedWorkload,
                        evicting: bool,
                        reason: PreemptionReason,
                        variant: Option<CohortVariant>,
                        lca: Option<NodeId>| {
        if cycle.taken.contains(&a.pending.id) {
            return;
        }
        let Some(cand_node) = tree.cluster_queue(&a.pending.cluster_queue) else {
            return;
        };
        let cells = snap.cells_of(&a.assignment);
        if !cells.iter().any(|(fr, _)| needed.contains(fr)) {
            return;
        }
        // A workload younger than its minRuntimeBeforePreemption is passed
        // over, unless this is the second pass and it ranks below the
        // preemptor.
        let protected = !evicting
            && a.pending
                .workload
                .spec
                .min_runtime_before_preemption
                .is_some_and(|min| cycle.now.since(a.admitted_at) < min);
        if protected && (!include_protected || a.pending.priority >= w.priority) {
            return;
        }
        out.push(Candidate {
            workload: a,
            node: cand_node,
            cluster: snap.clusters.index_of(&a.assignment.cluster),
            cells,
            evicting,
            reason,
            variant,
            lca,
        });
    };
    for id in &snap.evicting {
        if let Some(a) = snap.admitted.get(id) {
            if tree
                .cluster_queue(&a.pending.cluster_queue)
                .is_some_and(|n| tree.root_of(n) == root)
            {
                consider(a, true, PreemptionReason::InClusterQueue, None, None);
            }
        }
    }
    // Within the ClusterQueue, ordered lowest priority first.
    let preemptor = Rank {
        priority: w.priority,
        created_at: w.created_at,
    };
    for &(priority, _, id) in &snap.admitted_by_node[node] {
        if priority > w.priority {
            break;
        }
        let victim = Rank {
            priority,
            created_at: snap.admitted[&id].pending.created_at,
        };
        let allowed =
            policy::within_cluster_queue_allows(policy.within_cluster_queue, preemptor, victim);
        if allowed && !snap.admitted[&id].evicting {
            consider(
                &snap.admitted[&id],
                false,
                PreemptionReason::InClusterQueue,
                None,
                None,
            );
        }
    }
    if root == node {
        return sorted(out, node);
    }
    // Kueue's FairSharingPreemptWithinNominal (on by default): a
    // preemptor that stays within its queue's nominal quota in what needs
    // preemption reclaims from other queues whatever their shares, for
    // reason InCohortReclamation; `minimal_set` skips the strategies then.
    let fair_reason = if within_nominal_after(cycle, node, plan) {
        PreemptionReason::InCohortReclamation
    } else {
        PreemptionReason::InCohortFairSharing
    };
    let mut take_from = |other: NodeId, advantage: bool, lca: Option<NodeId>| {
        for &(priority, _, id) in &snap.admitted_by_node[other] {
            let a = &snap.admitted[&id];
            if a.evicting {
                continue;
            }
            let victim = Rank {
                priority,
                created_at: a.pending.created_at,
            };
            if cycle.cfg.fair_sharing {
                if policy::allows(
                    &policy,
                    fair_reason,
                    policy::Relation::SameTree,
                    preemptor,
                    victim,
                    a.pending.borrow_preemptions,
                    w.reclaimed,
                ) {
                    consider(a, false, fair_reason, None, None);
                }
            } else if let Some(variant) = policy::classify_in_cohort(
                &policy,
                preemptor,
                victim,
                advantage,
                a.pending.borrow_preemptions,
                w.reclaimed,
            ) {
                consider(a, false, variant.reason(), Some(variant), lca);
            }
        }
    };
    if cycle.cfg.fair_sharing {
        // Fair sharing: every other queue of the tree that borrows what the
        // preemptor needs; the strategies decide (`minimal_set`), unless
        // the preemptor stays within its nominal quota.
        for other in tree.cluster_queues_under(root) {
            if other != node && !within_quota(tree, &cycle.projected, other, &needed) {
                take_from(other, false, None);
            }
        }
        return sorted(out, node);
    }
    if policy.reclaim_within_cohort == fleetq_model::cluster_queue::ReclaimWithinCohort::Never {
        return sorted(out, node);
    }
    // Classical: Kueue's walk from the preemptor's parent to the root. At
    // each cohort it collects the queues of the subtree not yet visited
    // that exceed their quota (skipping whole cohorts within theirs). Once
    // the request fits in the quota of the subtree walked so far (the
    // preemptor's queue, then each cohort above it), the preemptor has a
    // hierarchical advantage over every workload found higher up.
    let requests = requests(plan);
    let (mut advantage, mut remaining) = fits_in_quota(tree, &cycle.projected, node, &requests);
    let mut visited: Option<NodeId> = None;
    let mut level = tree.nodes[node].parent;
    while let Some(cohort) = level {
        let mut stack = vec![cohort];
        while let Some(n) = stack.pop() {
            for &child in &tree.nodes[n].children {
                if child == node
                    || Some(child) == visited
                    || within_quota(tree, &cycle.projected, child, &needed)
                {
                    continue;
                }
                match tree.nodes[child].kind {
                    NodeKind::Cohort => stack.push(child),
                    NodeKind::ClusterQueue => take_from(child, advantage, Some(cohort)),
                }
            }
        }
        let (fits, rest) = fits_in_quota(tree, &cycle.projected, cohort, &remaining);
        advantage |= fits;
        remaining = rest;
        visited = Some(cohort);
        level = tree.nodes[cohort].parent;
    }
    sorted(out, node)
}

/// Kueue's `queueWithinNominalInResourcesNeedingPreemption`, asked with
/// the preemptor's request added: in every flavor-resource that needs
/// preemption (its request does not fit the quota available now), its
/// queue's usage stays within the queue's nominal quota. Where quota is
/// not short at all and only devices on the cluster are (which Kueue,
/// with one cluster, never sees), every flavor-resource it requests
/// counts: "nothing needs preemption" must not let a borrower reclaim
/// without the strategies (chaos seed 170: two queues over their nominal
/// quota took the same devices from each other, 40 rounds).
fn within_nominal_after(cycle: &Cycle<'_>, node: NodeId, plan: &Plan) -> bool {
    let tree = &cycle.snap.tree;
    let requests = requests(plan);
    let short: Vec<(FrId, u64)> = requests
        .iter()
        .copied()
        .filter(|&(fr, q)| q > tree.available(&cycle.projected, node, fr))
        .collect();
    let judged = if short.is_empty() { &requests } else { &short };
    judged.iter().all(|&(fr, q)| {
        cycle.projected.get(node, fr).saturating_add(q) <= tree.nodes[node].subtree_quota[fr]
    })
}

fn sorted(mut out: Vec<Candidate<'_>>, own: NodeId) -> Vec<Candidate<'_>> {
    out.sort_by_key(|c| c.order_key(own));
    out
}

/// Kueue's `candidateIsValid`, asked when the search reaches `cand`: a
/// workload of another queue may be taken only while its queue, and every
/// cohort between that queue and the level it was found at, still exceeds
/// its quota in what the preemptor needs; and one that may only be taken
/// if the preemptor ends within its nominal quota not in an attempt where
/// it may borrow.
fn still_valid(
    cycle: &Cycle<'_>,
    own: NodeId,
    plan: &Plan,
    cand: &Candidate<'_>,
    borrowing: bool,
) -> bool {
    if cand.evicting || cand.node == own {
        return true;
    }
    if borrowing && cand.variant == Some(CohortVariant::ReclaimWithoutBorrowing) {
        return false;
    }
    let tree = &cycle.snap.tree;
    let needed: Vec<FrId> = plan.cells.iter().map(|&(fr, _)| fr).collect();
    if within_quota(tree, &cycle.projected, cand.node, &needed) {
        return false;
    }
    let mut up = tree.nodes[cand.node].parent;
    while let Some(n) = up {
        if Some(n) == cand.lca || cand.lca.is_none() {
            break;
        }
        if within_quota(tree, &cycle.projected, n, &needed) {
            return false;
        }
        up = tree.nodes[n].parent;
    }
    true
}

/// Kueue's attempts, in order (`classicalPreemptions`): whether the
/// preemptor may borrow once its victims are gone (`true`), or must end
/// within its queue's nominal quota (`false`), which lets it also take the
/// workloads of other queues it may only reclaim. Candidates are removed
/// in the same order in both: other queues first, then its own, so a
/// queue that is over its quota only because of its own lower workloads
/// can still reclaim what it lent. Fair sharing tries once, borrowing.
fn attempts(
    cycle: &Cycle<'_>,
    node: NodeId,
    cq: &ClusterQueue,
    plan: &Plan,
    all: &[Candidate<'_>],
) -> Vec<bool> {
    if cycle.cfg.fair_sharing {
        return vec![true];
    }
    let tree = &cycle.snap.tree;
    let from_other_queues = all.iter().any(|c| c.node != node);
    let hierarchical = all
        .iter()
        .any(|c| c.variant == Some(CohortVariant::HierarchicalReclaim));
    let borrowing_forbidden = cq.spec.preemption.borrow_within_cohort.policy
        == fleetq_model::cluster_queue::BorrowWithinCohortPolicy::Never;
    // Kueue's queueUnderNominalInResourcesNeedingPreemption: strictly below
    // nominal before the request, or there is no ending within it.
    let under_nominal = plan
        .cells
        .iter()
        .all(|&(fr, _)| cycle.projected.get(node, fr) < tree.nodes[node].subtree_quota[fr]);
    if !from_other_queues || (borrowing_forbidden && !under_nominal) {
        vec![true]
    } else if borrowing_forbidden && !hierarchical {
        vec![false, true]
    } else {
        vec![true, false]
    }
}

/// Whether the ClusterQueue's policy permits any preemption at all.
pub(crate) fn policy_allows_any(cq: &ClusterQueue) -> bool {
    policy::allows_any(&cq.spec.preemption)
}

/// Takes `cand` out of the projected state: the search, and everything it
/// asks (who borrows, what fits), works on usage as it will be once this
/// cycle's victims stop, never on the working state that admissions use.
fn release(cycle: &mut Cycle<'_>, cand: &Candidate<'_>) {
    for &(fr, q) in &cand.cells {
        cycle
            .snap
            .tree
            .release(&mut cycle.projected, cand.node, fr, q);
        if let Some(c) = cand.cluster {
            cycle.projected_cluster.sub(c, fr, q);
        }
    }
}

fn restore(cycle: &mut Cycle<'_>, cand: &Candidate<'_>) {
    for &(fr, q) in &cand.cells {
        cycle
            .snap
            .tree
            .charge(&mut cycle.projected, cand.node, fr, q);
        if let Some(c) = cand.cluster {
            cycle.projected_cluster.add(c, fr, q);
        }
    }
}

/// Whether the preemptor fits on `cluster` in the projected state; unless
/// `borrowing`, also within its queue's nominal quota (Kueue's
/// `workloadFits`).
fn fits(cycle: &Cycle<'_>, node: NodeId, plan: &Plan, cluster: usize, borrowing: bool) -> bool {
    let tree = &cycle.snap.tree;
    requests(plan).iter().all(|&(fr, q)| {
        q <= tree.available(&cycle.projected, node, fr)
            && (borrowing
                || cycle.projected.get(node, fr).saturating_add(q)
                    <= tree.nodes[node].subtree_quota[fr])
    }) && cycle
        .snap
        .clusters
        .fits_now(&cycle.projected_cluster, cluster, &plan.cells)
}

/// The best (cluster, victim indices into `all`) over all eligible
/// clusters, or `None`. On each cluster the `attempts` are tried in
/// order; the first that frees enough counts.
#[allow(clippy::too_many_arguments)]
fn search(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    eligible: &[usize],
    all: &[Candidate<'_>],
    attempts: &[bool],
) -> Option<(usize, Vec<usize>)> {
    let mut best: Option<((usize, i64, usize), Vec<usize>)> = None;
    for &cluster in eligible {
        if !cycle.snap.clusters.fits_empty(cluster, &plan.cells) {
            continue;
        }
        let Some(victims) = attempts
            .iter()
            .find_map(|&borrowing| minimal_set(cycle, node, plan, cluster, all, borrowing))
        else {
            continue;
        };
        let Some(victims) = with_node_room(cycle, cq, w, plan, cluster, all, victims) else {
            continue;
        };
        let new: Vec<&Candidate> = victims
            .iter()
            .map(|&i| &all[i])
            .filter(|c| !c.evicting)
            .collect();
        let score = (
            new.len(),
            new.iter()
                .map(|c| i64::from(c.workload.pending.priority))
                .sum::<i64>(),
            cluster,
        );
        if best.as_ref().is_none_or(|(b, _)| score < *b) {
            best = Some((score, victims));
        }
    }
    best.map(|(score, victims)| (score.2, victims))
}

/// `victims`, and if the preemptor's pods fit `cluster`'s nodes only
/// once workloads already evicting there have stopped, those it needs of
/// them; `None` when not even that places its pods. Quota can fit while
/// the nodes do not: a preemptor whose quota one stopped victim freed
/// waits for the rest to free its node rather than losing its nomination
/// (soak seed 259299: a victim re-admitted into the hole on that node and
/// preempted again, twice).
fn with_node_room(
    cycle: &Cycle<'_>,
    cq: &ClusterQueue,
    w: &PendingWorkload,
    plan: &Plan,
    cluster: usize,
    all: &[Candidate<'_>],
    mut victims: Vec<usize>,
) -> Option<Vec<usize>> {
    let fits = |victims: &[usize]| {
        let freed = victims
            .iter()
            .map(|&i| &all[i])
            .filter(|c| c.cluster == Some(cluster))
            .map(|c| c.workload);
        cycle.nodes_fit_without(cq, w, plan, cluster, freed)
    };
    if fits(&victims) {
        return Some(victims);
    }
    let leaving: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].evicting && all[i].cluster == Some(cluster) && !victims.contains(&i))
        .collect();
    let chosen = victims.len();
    victims.extend(&leaving);
    if leaving.is_empty() || !fits(&victims) {
        return None;
    }
    // Only those needed: another preemptor may be waiting for the rest.
    let mut at = chosen;
    while at < victims.len() {
        let i = victims.remove(at);
        if !fits(&victims) {
            victims.insert(at, i);
            at += 1;
        }
    }
    victims.sort_unstable();
    Some(victims)
}

fn minimal_set(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    plan: &Plan,
    cluster: usize,
    all: &[Candidate<'_>],
    borrowing: bool,
) -> Option<Vec<usize>> {
    if cycle.cfg.fair_sharing {
        let victims = fair_sharing::victims(cycle, node, plan, cluster, all)?;
        if borrowing {
            return Some(victims);
        }
        // Only a held preemptor tries without borrowing under fair
        // sharing (`find_victims`): it must end within its nominal quota.
        for &i in &victims {
            release(cycle, &all[i]);
        }
        let fit = fits(cycle, node, plan, cluster, false);
        for &i in victims.iter().rev() {
            restore(cycle, &all[i]);
        }
        return fit.then_some(victims);
    }
    let mut removed: Vec<usize> = Vec::new();
    let mut fit = fits(cycle, node, plan, cluster, borrowing);
    for (i, cand) in all.iter().enumerate() {
        if fit {
            break;
        }
        if !still_valid(cycle, node, plan, cand, borrowing) {
            continue;
        }
        release(cycle, cand);
        removed.push(i);
        fit = fits(cycle, node, plan, cluster, borrowing);
    }
    if !fit {
        for &i in removed.iter().rev() {
            restore(cycle, &all[i]);
        }
        return None;
    }
    // Fill back: keep out only those without which it would not fit.
    let mut kept: Vec<usize> = Vec::new();
    let last = removed.pop();
    // Evicting workloads are filled back too: see fair_sharing::fill_back.
    for i in removed.into_iter().rev() {
        restore(cycle, &all[i]);
        if fits(cycle, node, plan, cluster, borrowing) {
            continue;
        }
        release(cycle, &all[i]);
        kept.push(i);
    }
    kept.extend(last);
    for &i in &kept {
        restore(cycle, &all[i]);
    }
    kept.sort_unstable();
    Some(kept)
}
