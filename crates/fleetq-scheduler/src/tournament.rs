//! Kueue's fair-sharing head order: which ClusterQueue head of a cohort
//! tree goes next, chosen by a tournament at every cohort.
//!
//! With fair sharing on, Kueue (`fairSharingIterator`) does not sort heads
//! by one key. Each cohort, from the leaves up, nominates one head among
//! those of its child queues and the nominees of its child cohorts; the
//! root's nominee goes next. Two children are compared by their subtree's
//! state *after* admitting the head they nominate:
//!
//! 1. a child that does not borrow from the cohort on the flavor-resources
//!    its head requests goes first (`FairSharingPrioritizeNonBorrowing`);
//! 2. then the lower dominant resource share (`fair::Drs::compare`);
//! 3. then the higher priority, the earlier creation and the lower id.
//!
//! Shares are recomputed for every pick, against the usage the cycle has
//! reached, so a queue that was just admitted competes with its new share.

use std::cmp::Ordering;
use std::collections::HashMap;

use fleetq_model::fair_weight::FairWeight;
use fleetq_model::Timestamp;

use crate::fair::{self, Drs};
use crate::quota::{FrId, NodeId, NodeKind, QuotaTree, Usage};
use crate::WorkloadId;

/// One ClusterQueue's head, as the tournament sees it.
#[derive(Clone, Debug)]
pub(crate) struct Entrant {
    /// The head's ClusterQueue.
    pub node: NodeId,
    /// What its flavor assignment would charge, per cell.
    pub cells: Vec<(FrId, u64)>,
    pub priority: i32,
    pub created: Timestamp,
    pub id: WorkloadId,
}

/// How a child of a cohort stands with its nominee admitted.
#[derive(Clone, Copy)]
struct Standing {
    /// Whether the child would use more than its subtree quota in a cell
    /// the nominee requests.
    borrows: bool,
    share: Drs,
}

/// The index in `entrants` of the head that goes next in the tree under
/// `root`; `entrants` must all be ClusterQueues under `root`. `weight`
/// gives any node's fair-sharing weight. `usage` is charged with each
/// head in turn and left as it was (no copy per pick).
pub(crate) fn winner(
    tree: &QuotaTree,
    usage: &mut Usage,
    weight: &dyn Fn(NodeId) -> FairWeight,
    root: NodeId,
    entrants: &[Entrant],
) -> Option<usize> {
    #[cfg(debug_assertions)]
    let before = usage.clone();
    let standings = standings(tree, usage, weight, entrants);
    #[cfg(debug_assertions)]
    debug_assert!(
        before == *usage,
        "the tournament must leave usage as it was"
    );
    let entrant_of: HashMap<NodeId, usize> = entrants
        .iter()
        .enumerate()
        .map(|(i, e)| (e.node, i))
        .collect();
    // Cohorts in preorder; walked backwards, every cohort comes after its
    // descendants, so their nominees are known (no recursion: a cohort
    // tree may be deep).
    let mut cohorts = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if tree.nodes[n].kind == NodeKind::Cohort {
            cohorts.push(n);
            stack.extend(tree.nodes[n].children.iter().copied());
        }
    }
    let mut nominee: HashMap<NodeId, usize> = HashMap::new();
    for &cohort in cohorts.iter().rev() {
        let best = tree.nodes[cohort]
            .children
            .iter()
            .filter_map(|c| match tree.nodes[*c].kind {
                NodeKind::Cohort => nominee.get(c).copied(),
                NodeKind::ClusterQueue => entrant_of.get(c).copied(),
            })
            .min_by(|&a, &b| compare(entrants, &standings, cohort, a, b));
        if let Some(best) = best {
            nominee.insert(cohort, best);
        }
    }
    nominee.get(&root).copied()
}

/// For every entrant, the standing of each node on its path below each
/// cohort above it: `(cohort, standing of the child on the path)`.
fn standings(
    tree: &QuotaTree,
    scratch: &mut Usage,
    weight: &dyn Fn(NodeId) -> FairWeight,
    entrants: &[Entrant],
) -> Vec<Vec<(NodeId, Standing)>> {
    entrants
        .iter()
        .map(|e| {
            for &(fr, q) in &e.cells {
                tree.charge(scratch, e.node, fr, q);
            }
            let mut out = Vec::new();
            let mut child = e.node;
            while let Some(parent) = tree.nodes[child].parent {
                let borrows = e.cells.iter().any(|&(fr, q)| {
                    q > 0 && scratch.get(child, fr) > tree.nodes[child].subtree_quota[fr]
                });
                let share = fair::drs(tree, scratch, child, weight(child));
                out.push((parent, Standing { borrows, share }));
                child = parent;
            }
            for &(fr, q) in &e.cells {
                tree.release(scratch, e.node, fr, q);
            }
            out
        })
        .collect()
}

/// Kueue's `entryComparer.less` at `cohort`, as an ordering (less goes
/// first), with the entrant id as the last tie-break.
fn compare(
    entrants: &[Entrant],
    standings: &[Vec<(NodeId, Standing)>],
    cohort: NodeId,
    a: usize,
    b: usize,
) -> Ordering {
    let at = |i: usize| {
        standings[i]
            .iter()
            .find(|(c, _)| *c == cohort)
            .map(|(_, s)| *s)
    };
    let (ea, eb) = (&entrants[a], &entrants[b]);
    let by_standing = match (at(a), at(b)) {
        (Some(sa), Some(sb)) => sa
            .borrows
            .cmp(&sb.borrows)
            .then_with(|| sa.share.compare(&sb.share)),
        _ => Ordering::Equal,
    };
    by_standing
        .then_with(|| eb.priority.cmp(&ea.priority))
        .then_with(|| ea.created.cmp(&eb.created))
        .then_with(|| ea.id.cmp(&eb.id))
}
