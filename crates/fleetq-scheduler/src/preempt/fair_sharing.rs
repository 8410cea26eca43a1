//! Kueue's fair-sharing preemption (`fairPreemptions`), on one cluster.
//!
//! Victims are not taken in one global order. Again and again the queue
//! to take from is chosen by a tournament down the cohort tree: at each
//! cohort, among the children that still borrow and hold candidates, the
//! one with the highest dominant resource share wins (a cohort is entered,
//! a ClusterQueue yields its next candidate). The preemptor's own queue
//! takes part with the preemptor's request counted in. A candidate of
//! another queue is taken only if a strategy allows it, comparing shares
//! at the children of the two queues' lowest common ancestor, not of the
//! queues themselves (so a cohort's weight and quota count):
//!
//! 1. the first strategy (`LessThanOrEqualToFinalShare` by default) is
//!    tried on the candidates as the tournament yields them;
//! 2. if the preemptor still does not fit, rule S2-b: one candidate per
//!    queue that the first refused, `LessThanInitialShare`.
//!
//! A preemptor that stays within its nominal quota in what needs
//! preemption skips the strategies (Kueue's
//! `FairSharingPreemptWithinNominal`; such candidates carry reason
//! `InCohortReclamation`, see `candidates`). Workloads already being
//! evicted are taken first: they are leaving anyway.

use std::collections::{BTreeMap, HashSet, VecDeque};

use super::{fits, release, restore, Candidate};
use crate::assign::Plan;
use crate::cycle::Cycle;
use crate::decision::PreemptionReason;
use crate::fair::{self, Drs};
use crate::quota::{NodeId, NodeKind};
use crate::FairSharingStrategy;

/// The victims (indices into `all`) that let the preemptor of `node` fit
/// on `cluster`, or `None`. The projected state is as before on return.
pub(super) fn victims(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    plan: &Plan,
    cluster: usize,
    all: &[Candidate<'_>],
) -> Option<Vec<usize>> {
    let mut removed: Vec<usize> = Vec::new();
    let mut fit = fits(cycle, node, plan, cluster, true);
    for (i, cand) in all.iter().enumerate() {
        if fit || !cand.evicting {
            continue;
        }
        release(cycle, cand);
        removed.push(i);
        fit = fits(cycle, node, plan, cluster, true);
    }
    if !fit {
        // Shares count the preemptor's request (Kueue's
        // SimulateUsageAddition), fits() adds it itself.
        simulate(cycle, node, plan, true);
        let mut search = Search {
            node,
            plan,
            cluster,
            all,
            removed: &mut removed,
        };
        fit = search.run(cycle);
        simulate(cycle, node, plan, false);
    }
    if !fit {
        for &i in removed.iter().rev() {
            restore(cycle, &all[i]);
        }
        return None;
    }
    Some(fill_back(cycle, node, plan, cluster, all, removed))
}

/// Kueue's `fillBackWorkloads`: in reverse, every victim but the last is
/// put back where the preemptor still fits without taking it. Leaves the
/// projected state as it was.
fn fill_back(
    cycle: &mut Cycle<'_>,
    node: NodeId,
    plan: &Plan,
    cluster: usize,
    all: &[Candidate<'_>],
    mut removed: Vec<usize>,
) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    let last = removed.pop();
    // Workloads already evicting are filled back like the rest (as
    // Kueue's fillBackWorkloads does): one kept without need is taken
    // from the preemptor it was evicted for, which then finds no victims,
    // loses its nomination, and preempts its victim again once that is
    // re-admitted (soak seed 261636: a nominee of another cluster took
    // the victim, three rounds).
    for i in removed.into_iter().rev() {
        restore(cycle, &all[i]);
        if fits(cycle, node, plan, cluster, true) {
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
    kept
}

/// Adds (or takes back) the preemptor's request to its queue's projected
/// usage.
fn simulate(cycle: &mut Cycle<'_>, node: NodeId, plan: &Plan, add: bool) {
    let tree = &cycle.snap.tree;
    for &(fr, q) in &plan.cells {
        if add {
            tree.charge(&mut cycle.projected, node, fr, q);
        } else {
            tree.release(&mut cycle.projected, node, fr, q);
        }
    }
}

struct Search<'p, 'c, 'a> {
    node: NodeId,
    plan: &'p Plan,
    cluster: usize,
    all: &'c [Candidate<'a>],
    removed: &'p mut Vec<usize>,
}

impl Search<'_, '_, '_> {
    fn run(&mut self, cycle: &mut Cycle<'_>) -> bool {
        let strategies = cycle.cfg.fair_sharing_strategies.clone();
        let first = strategies
            .first()
            .copied()
            .unwrap_or(FairSharingStrategy::LessThanOrEqualToFinalShare);
        let fresh: Vec<usize> = (0..self.all.len())
            .filter(|&i| !self.all[i].evicting)
            .collect();
        let (fit, retry) = self.first_strategy(cycle, fresh, first);
        if fit {
            return true;
        }
        strategies.len() > 1 && self.second_strategy(cycle, retry)
    }

    /// Whether the preemptor fits now (its simulated request taken out
    /// for the check, as Kueue's `workloadFitsForFairSharing`).
    fn fits_now(&self, cycle: &mut Cycle<'_>) -> bool {
        simulate(cycle, self.node, self.plan, false);
        let fit = fits(cycle, self.node, self.plan, self.cluster, true);
        simulate(cycle, self.node, self.plan, true);
        fit
    }

    fn take(&mut self, cycle: &mut Cycle<'_>, i: usize) -> bool {
        release(cycle, &self.all[i]);
        self.removed.push(i);
        self.fits_now(cycle)
    }

    /// Kueue's `runFirstFsStrategy`: the fit, and the candidates the
    /// strategy refused (for rule S2-b).
    fn first_strategy(
        &mut self,
        cycle: &mut Cycle<'_>,
        candidates: Vec<usize>,
        strategy: FairSharingStrategy,
    ) -> (bool, Vec<usize>) {
        let mut retry = Vec::new();
        let mut order = Ordering::new(cycle, self.node, self.all, candidates);
        while let Some(target) = order.next(cycle) {
            if target == self.node
                || order.front_reason(target) == Some(PreemptionReason::InCohortReclamation)
            {
                let Some(i) = order.pop(target) else { continue };
                if self.take(cycle, i) {
                    return (true, retry);
                }
                continue;
            }
            let (preemptor_new, target_old) = shares(cycle, self.node, target);
            if preemptor_new.weighted().is_infinite() && !target_old.weighted().is_infinite() {
                // No candidate here can pass; keep them for S2-b.
                while let Some(i) = order.pop(target) {
                    retry.push(i);
                }
                continue;
            }
            while let Some(i) = order.pop(target) {
                let target_new = share_without(cycle, self.node, target, &self.all[i]);
                let passed = match strategy {
                    FairSharingStrategy::LessThanOrEqualToFinalShare => {
                        preemptor_new.compare(&target_new).is_le()
                    }
                    FairSharingStrategy::LessThanInitialShare => {
                        preemptor_new.compare(&target_old).is_lt()
                    }
                };
                if passed {
                    if self.take(cycle, i) {
                        return (true, retry);
                    }
                    // Shares changed: the tournament chooses again.
                    break;
                }
                retry.push(i);
            }
        }
        (false, retry)
    }

    /// Kueue's `runSecondFsStrategy` (rule S2-b): per queue, the first
    /// refused candidate, if the preemptor's new share is below the
    /// queue's share now; then the queue is dropped.
    fn second_strategy(&mut self, cycle: &mut Cycle<'_>, retry: Vec<usize>) -> bool {
        let mut order = Ordering::new(cycle, self.node, self.all, retry);
        while let Some(target) = order.next(cycle) {
            let (preemptor_new, target_old) = shares(cycle, self.node, target);
            let passed = preemptor_new.compare(&target_old).is_lt();
            if let Some(i) = order.pop(target) {
                if passed && self.take(cycle, i) {
                    return true;
                }
            }
            order.drop_queue(target);
        }
        false
    }
}

fn share(cycle: &Cycle<'_>, node: NodeId) -> Drs {
    fair::drs(
        &cycle.snap.tree,
        &cycle.projected,
        node,
        fair::weight(cycle.snap.config(), &cycle.snap.tree, node),
    )
}

/// The path from `node` up to the root, `node` first.
fn path_up(cycle: &Cycle<'_>, node: NodeId) -> Vec<NodeId> {
    let mut out = vec![node];
    let mut n = node;
    while let Some(p) = cycle.snap.tree.nodes[n].parent {
        out.push(p);
        n = p;
    }
    out
}

/// The children of the lowest common ancestor of `a` and `b` on their
/// paths (Kueue's almost-LCAs). Both are in one tree.
fn almost_lcas(cycle: &Cycle<'_>, a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    let (pa, pb) = (path_up(cycle, a), path_up(cycle, b));
    let lca = pb
        .iter()
        .skip(1)
        .find(|n| pa.contains(n))
        .copied()
        .unwrap_or(pa[pa.len() - 1]);
    let below = |path: &[NodeId]| {
        path.iter()
            .position(|&n| n == lca)
            .and_then(|i| i.checked_sub(1))
            .map_or(path[0], |i| path[i])
    };
    (below(&pa), below(&pb))
}

/// The preemptor's share (its request counted in) and the target's, at
/// their almost-LCAs.
fn shares(cycle: &Cycle<'_>, preemptor: NodeId, target: NodeId) -> (Drs, Drs) {
    let (p, t) = almost_lcas(cycle, preemptor, target);
    (share(cycle, p), share(cycle, t))
}

/// The target's share at its almost-LCA once `cand` is gone.
fn share_without(
    cycle: &mut Cycle<'_>,
    preemptor: NodeId,
    target: NodeId,
    cand: &Candidate<'_>,
) -> Drs {
    release(cycle, cand);
    let (_, t) = almost_lcas(cycle, preemptor, target);
    let drs = share(cycle, t);
    restore(cycle, cand);
    drs
}

/// Kueue's `TargetClusterQueueOrdering`: which queue to take from next.
struct Ordering<'c, 'a> {
    preemptor: NodeId,
    ancestors: HashSet<NodeId>,
    all: &'c [Candidate<'a>],
    queues: BTreeMap<NodeId, VecDeque<usize>>,
    pruned: HashSet<NodeId>,
}

impl<'c, 'a> Ordering<'c, 'a> {
    fn new(
        cycle: &Cycle<'_>,
        preemptor: NodeId,
        all: &'c [Candidate<'a>],
        candidates: Vec<usize>,
    ) -> Self {
        let mut queues: BTreeMap<NodeId, VecDeque<usize>> = BTreeMap::new();
        for i in candidates {
            queues.entry(all[i].node).or_default().push_back(i);
        }
        Ordering {
            preemptor,
            ancestors: path_up(cycle, preemptor).into_iter().skip(1).collect(),
            all,
            queues,
            pruned: HashSet::new(),
        }
    }

    fn has_workload(&self, node: NodeId) -> bool {
        self.queues.get(&node).is_some_and(|q| !q.is_empty())
    }

    fn pop(&mut self, node: NodeId) -> Option<usize> {
        self.queues.get_mut(&node)?.pop_front()
    }

    fn front_reason(&self, node: NodeId) -> Option<PreemptionReason> {
        let &i = self.queues.get(&node)?.front()?;
        Some(self.all[i].reason)
    }

    fn drop_queue(&mut self, node: NodeId) {
        self.pruned.insert(node);
    }

    /// The next queue to take from, or `None` once the tree is spent.
    fn next(&mut self, cycle: &Cycle<'_>) -> Option<NodeId> {
        let tree = &cycle.snap.tree;
        let Some(parent) = tree.nodes[self.preemptor].parent else {
            return (!self.pruned.contains(&self.preemptor) && self.has_workload(self.preemptor))
                .then_some(self.preemptor);
        };
        let root = path_up(cycle, parent).last().copied().unwrap_or(parent);
        while !self.pruned.contains(&root) {
            if let Some(target) = self.next_under(cycle, root) {
                return Some(target);
            }
        }
        None
    }

    /// Kueue's `nextTarget`: `None` when this call only pruned.
    fn next_under(&mut self, cycle: &Cycle<'_>, cohort: NodeId) -> Option<NodeId> {
        let tree = &cycle.snap.tree;
        let mut best_cq: Option<(NodeId, Drs)> = None;
        let mut best_cohort: Option<(NodeId, Drs)> = None;
        for &child in &tree.nodes[cohort].children {
            if self.pruned.contains(&child) {
                continue;
            }
            let drs = share(cycle, child);
            match tree.nodes[child].kind {
                NodeKind::ClusterQueue => {
                    if (!drs.borrowing && child != self.preemptor) || !self.has_workload(child) {
                        self.pruned.insert(child);
                        continue;
                    }
                    let better = match &best_cq {
                        None => true,
                        Some((b, bd)) => match drs.compare(bd) {
                            std::cmp::Ordering::Greater => true,
                            // Tie: the queue whose next candidate comes
                            // first in Kueue's candidate order.
                            std::cmp::Ordering::Equal => self.queues[&child][0] < self.queues[b][0],
                            std::cmp::Ordering::Less => false,
                        },
                    };
                    if better {
                        best_cq = Some((child, drs));
                    }
                }
                NodeKind::Cohort => {
                    if !drs.borrowing && !self.ancestors.contains(&child) {
                        self.pruned.insert(child);
                    } else if best_cohort
                        .as_ref()
                        .is_none_or(|(_, bd)| drs.compare(bd).is_ge())
                    {
                        best_cohort = Some((child, drs));
                    }
                }
            }
        }
        match (best_cq, best_cohort) {
            (None, None) => {
                self.pruned.insert(cohort);
                None
            }
            (Some((cq, _)), None) => Some(cq),
            (None, Some((c, _))) => self.next_under(cycle, c),
            (Some((cq, cq_drs)), Some((c, c_drs))) => {
                // Ties go to the cohort: the most unfair node inside it
                // may be chosen then.
                if c_drs.compare(&cq_drs).is_ge() {
                    self.next_under(cycle, c)
                } else {
                    Some(cq)
                }
            }
        }
    }
}
