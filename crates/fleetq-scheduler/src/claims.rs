//! Room on a cluster kept for a nominated preemptor, as kube-scheduler
//! counts a pod nominated to a node as if it ran there.
//!
//! A preemptor whose victims have stopped is admitted in the next cycle's
//! nominated pass. Without a claim, another nominated workload tried
//! before it (higher priority or older) could be admitted into that room,
//! and the preemptor would preempt again: soak seed 121199, where a
//! workload reclaimed two victims on one cluster, one of them (older,
//! itself a preemptor waiting on another cluster) took the freed room, and
//! the reclaim repeated three rounds. Restricting a nominee to its own
//! cluster (81e0e9d, reverted) was wrong: victims chosen for quota may run
//! on a cluster other than the preemptor's room.
//!
//! On a cluster that reports its nodes, a claim also keeps the node room
//! its pods would be placed on: soak seed 220640, where a preemptor's
//! victims freed a node, a smaller workload of another queue (room in the
//! totals beside the claim) was placed on that node, and the preemptor,
//! whose pods no other node could hold, preempted again.
//!
//! Claims only ever add to the cycle's cluster and node usage, so they
//! cannot make an admission the ledger would refuse; at worst they keep
//! room idle for one cycle.

use std::collections::{BTreeMap, HashMap};

use crate::clusters::{ClusterInfo, ClusterUsage};
use crate::nodes::{NodeUsage, NodeUsed};
use crate::quota::FrId;
use crate::WorkloadId;

/// What one nominated preemptor needs on the cluster its room was
/// planned on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    pub id: WorkloadId,
    pub cluster: usize,
    pub cells: Vec<(FrId, u64)>,
    /// (node index, resource, milli-units) its pods would take on the
    /// cluster's nodes; empty where the cluster reports none or no
    /// placement was found.
    pub nodes: Vec<(usize, String, u64)>,
}

/// The cycle's claims and what of them is charged now.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    claims: Vec<Claim>,
    /// Per cluster, what evicting workloads still hold. Victims keep their
    /// room charged until they stop, so a claim needs only what is left
    /// beyond them; this counts every evicting workload on the cluster,
    /// whoever preempted it, which can only claim less, never more.
    evicting: HashMap<usize, Vec<(FrId, u64)>>,
    /// Per cluster, what evicting workloads still hold on each node.
    evicting_nodes: HashMap<usize, Vec<NodeUsed>>,
    charged: Vec<(usize, FrId, u64)>,
    charged_nodes: Vec<(usize, usize, String, u64)>,
}

impl Claims {
    pub fn new(
        claims: Vec<Claim>,
        evicting: HashMap<usize, Vec<(FrId, u64)>>,
        evicting_nodes: HashMap<usize, Vec<NodeUsed>>,
    ) -> Self {
        Claims {
            claims,
            evicting,
            evicting_nodes,
            charged: Vec::new(),
            charged_nodes: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// Drops `id`'s claim: it was admitted, or its new preemption reserved
    /// its room itself.
    pub fn remove(&mut self, id: WorkloadId) {
        self.claims.retain(|c| c.id != id);
    }

    /// Charges every claim but `except`'s onto both usages and the node
    /// books.
    pub fn lay(
        &mut self,
        except: Option<WorkloadId>,
        usages: [&mut ClusterUsage; 2],
        nodes: &mut NodeUsage,
        clusters: &[ClusterInfo],
    ) {
        debug_assert!(
            self.charged.is_empty() && self.charged_nodes.is_empty(),
            "claims laid twice"
        );
        let mut wanted: BTreeMap<(usize, FrId), u64> = BTreeMap::new();
        let mut wanted_nodes: BTreeMap<(usize, usize, &str), u64> = BTreeMap::new();
        for claim in self.claims.iter().filter(|c| Some(c.id) != except) {
            for &(fr, q) in &claim.cells {
                let slot = wanted.entry((claim.cluster, fr)).or_default();
                *slot = slot.saturating_add(q);
            }
            for (n, resource, q) in &claim.nodes {
                let slot = wanted_nodes
                    .entry((claim.cluster, *n, resource.as_str()))
                    .or_default();
                *slot = slot.saturating_add(*q);
            }
        }
        for ((cluster, fr), q) in wanted {
            let held: u64 = self
                .evicting
                .get(&cluster)
                .map(|cells| cells.iter().filter(|c| c.0 == fr).map(|c| c.1).sum())
                .unwrap_or(0);
            let q = q.saturating_sub(held);
            if q > 0 {
                self.charged.push((cluster, fr, q));
            }
        }
        for ((cluster, n, resource), q) in wanted_nodes {
            let held = self
                .evicting_nodes
                .get(&cluster)
                .and_then(|books| books.get(n))
                .and_then(|used| used.get(resource))
                .copied()
                .unwrap_or(0);
            let q = q.saturating_sub(held);
            if q > 0 {
                self.charged_nodes
                    .push((cluster, n, resource.to_string(), q));
            }
        }
        let [a, b] = usages;
        for &(cluster, fr, q) in &self.charged {
            a.add(cluster, fr, q);
            b.add(cluster, fr, q);
        }
        for (cluster, n, resource, q) in &self.charged_nodes {
            nodes.adjust(clusters.get(*cluster), *cluster, *n, resource, *q, true);
        }
    }

    /// Takes back what [`Self::lay`] charged.
    pub fn lift(
        &mut self,
        usages: [&mut ClusterUsage; 2],
        nodes: &mut NodeUsage,
        clusters: &[ClusterInfo],
    ) {
        let [a, b] = usages;
        for (cluster, fr, q) in self.charged.drain(..) {
            a.sub(cluster, fr, q);
            b.sub(cluster, fr, q);
        }
        for (cluster, n, resource, q) in self.charged_nodes.drain(..) {
            nodes.adjust(clusters.get(cluster), cluster, n, &resource, q, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two clusters, one cell.
    fn usage() -> ClusterUsage {
        ClusterUsage::zeroed(2, 1)
    }

    #[test]
    fn a_claim_charges_what_evicting_work_does_not_already_hold() {
        let (mut a, mut b) = (usage(), usage());
        let mut claims = Claims::new(
            vec![
                Claim {
                    id: 1,
                    cluster: 0,
                    cells: vec![(0, 4000)],
                    nodes: Vec::new(),
                },
                Claim {
                    id: 2,
                    cluster: 1,
                    cells: vec![(0, 4000)],
                    nodes: Vec::new(),
                },
            ],
            HashMap::from([(0, vec![(0, 3000)])]),
            HashMap::new(),
        );
        let mut books = NodeUsage::default();
        claims.lay(None, [&mut a, &mut b], &mut books, &[]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (1000, 4000));
        assert_eq!((b.get(0, 0), b.get(1, 0)), (1000, 4000));
        claims.lift([&mut a, &mut b], &mut books, &[]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (0, 0));
        // Its own claim does not bind the claimant.
        claims.lay(Some(2), [&mut a, &mut b], &mut books, &[]);
        assert_eq!(a.get(1, 0), 0);
        claims.lift([&mut a, &mut b], &mut books, &[]);
        claims.remove(1);
        claims.lay(None, [&mut a, &mut b], &mut books, &[]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (0, 4000));
    }

    #[test]
    fn a_claim_keeps_the_node_room_evicting_work_does_not_already_hold() {
        let (mut a, mut b) = (usage(), usage());
        // Cluster 0 has two nodes; an evicting victim holds 3 GPUs on node 1.
        let mut books = NodeUsage::zeroed(&[2, 0]);
        let gpu = "nvidia.com/gpu";
        let victim = NodeUsed::from([(gpu.to_string(), 3000)]);
        let mut claims = Claims::new(
            vec![Claim {
                id: 1,
                cluster: 0,
                cells: vec![(0, 4000)],
                nodes: vec![(1, gpu.to_string(), 4000)],
            }],
            HashMap::new(),
            HashMap::from([(0, vec![NodeUsed::new(), victim])]),
        );
        claims.lay(None, [&mut a, &mut b], &mut books, &[]);
        assert_eq!(books.of(0)[1].get(gpu), Some(&1000));
        assert!(books.of(0)[0].is_empty());
        claims.lift([&mut a, &mut b], &mut books, &[]);
        assert!(books.of(0)[1].is_empty());
        claims.lay(Some(1), [&mut a, &mut b], &mut books, &[]);
        assert!(books.of(0)[1].is_empty());
        claims.lift([&mut a, &mut b], &mut books, &[]);
    }
}
