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
//! Claims only ever add to the cycle's cluster usage, so they cannot make
//! an admission the ledger would refuse; at worst they keep room idle for
//! one cycle.

use std::collections::{BTreeMap, HashMap};

use crate::clusters::ClusterUsage;
use crate::quota::FrId;
use crate::WorkloadId;

/// What one nominated preemptor needs on the cluster its room was
/// planned on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    pub id: WorkloadId,
    pub cluster: usize,
    pub cells: Vec<(FrId, u64)>,
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
    charged: Vec<(usize, FrId, u64)>,
}

impl Claims {
    pub fn new(claims: Vec<Claim>, evicting: HashMap<usize, Vec<(FrId, u64)>>) -> Self {
        Claims {
            claims,
            evicting,
            charged: Vec::new(),
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

    /// Charges every claim but `except`'s onto both usages.
    pub fn lay(&mut self, except: Option<WorkloadId>, usages: [&mut ClusterUsage; 2]) {
        debug_assert!(self.charged.is_empty(), "claims laid twice");
        let mut wanted: BTreeMap<(usize, FrId), u64> = BTreeMap::new();
        for claim in self.claims.iter().filter(|c| Some(c.id) != except) {
            for &(fr, q) in &claim.cells {
                let slot = wanted.entry((claim.cluster, fr)).or_default();
                *slot = slot.saturating_add(q);
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
        let [a, b] = usages;
        for &(cluster, fr, q) in &self.charged {
            a.add(cluster, fr, q);
            b.add(cluster, fr, q);
        }
    }

    /// Takes back what [`Self::lay`] charged.
    pub fn lift(&mut self, usages: [&mut ClusterUsage; 2]) {
        let [a, b] = usages;
        for (cluster, fr, q) in self.charged.drain(..) {
            a.sub(cluster, fr, q);
            b.sub(cluster, fr, q);
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
                },
                Claim {
                    id: 2,
                    cluster: 1,
                    cells: vec![(0, 4000)],
                },
            ],
            HashMap::from([(0, vec![(0, 3000)])]),
        );
        claims.lay(None, [&mut a, &mut b]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (1000, 4000));
        assert_eq!((b.get(0, 0), b.get(1, 0)), (1000, 4000));
        claims.lift([&mut a, &mut b]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (0, 0));
        // Its own claim does not bind the claimant.
        claims.lay(Some(2), [&mut a, &mut b]);
        assert_eq!(a.get(1, 0), 0);
        claims.lift([&mut a, &mut b]);
        claims.remove(1);
        claims.lay(None, [&mut a, &mut b]);
        assert_eq!((a.get(0, 0), a.get(1, 0)), (0, 4000));
    }
}
