//! Fair sharing: Kueue's dominant-resource share between ClusterQueues of a
//! cohort, and admission fair sharing's decayed usage per LocalQueue.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetq_model::fair_weight::FairWeight;
use fleetq_model::resources::GPU;
use fleetq_model::{Config, FlavorUsage, Timestamp};
use serde::{Deserialize, Serialize};

use crate::quota::{NodeId, NodeKind, QuotaTree, Usage};

/// Kueue's `DominantResourceShare` of a node (ClusterQueue or cohort):
/// for each resource name, what the node uses beyond its subtree quota,
/// summed over flavors, per thousand of what its parent could ever lend
/// it (`potentialAvailable`, summed over flavors); the largest such
/// ratio, divided by the node's fair-sharing weight. Floating point as in
/// Kueue: only the leader's scheduler computes it, and apply() never
/// re-derives a share, so replicas cannot disagree on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drs {
    /// Largest borrowed/lendable ratio, per thousand, before the weight.
    pub unweighted: f64,
    /// The node's fair-sharing weight (1 unless set).
    pub weight: f64,
    /// Whether the node uses more than its quota of some cell (even one
    /// whose parent lends nothing, where the ratio stays 0).
    pub borrowing: bool,
}

impl Drs {
    /// The start of every comparison: below any real share.
    pub const NEGATIVE: Drs = Drs {
        unweighted: -1.0,
        weight: 1.0,
        borrowing: false,
    };

    /// The share, +inf for a borrowing node of weight 0.
    pub fn weighted(&self) -> f64 {
        if self.unweighted == 0.0 {
            0.0
        } else if self.weight == 0.0 {
            f64::INFINITY
        } else {
            self.unweighted / self.weight
        }
    }

    fn zero_weight_borrows(&self) -> bool {
        self.weight == 0.0 && self.unweighted != 0.0
    }

    /// Kueue's `CompareDRS`: lower is preferred for admission, higher for
    /// preemption.
    pub fn compare(&self, other: &Drs) -> std::cmp::Ordering {
        match (self.zero_weight_borrows(), other.zero_weight_borrows()) {
            (true, true) => self.unweighted.total_cmp(&other.unweighted),
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            (false, false) => self.weighted().total_cmp(&other.weighted()),
        }
    }

    /// A key that sorts as [`Drs::compare`] (shares are never negative,
    /// so their bit patterns sort as the numbers do).
    pub fn sort_key(&self) -> (bool, u64) {
        if self.zero_weight_borrows() {
            (true, self.unweighted.to_bits())
        } else {
            (false, self.weighted().to_bits())
        }
    }
}

/// The fair-sharing weight of a ClusterQueue or cohort (1 unless set).
pub fn weight(config: &Config, tree: &QuotaTree, node: NodeId) -> FairWeight {
    let n = &tree.nodes[node];
    match n.kind {
        NodeKind::ClusterQueue => config
            .cluster_queues
            .get(&n.name)
            .map_or(FairWeight::ONE, |cq| cq.fair_sharing_weight()),
        NodeKind::Cohort => config
            .cohorts
            .get(&n.name)
            .and_then(|c| c.spec.fair_sharing)
            .and_then(|f| f.weight)
            .unwrap_or(FairWeight::ONE),
    }
}

/// The share of `node` with `usage`, Kueue's `dominantResourceShare`.
/// A root has no share (nobody to borrow from).
pub fn drs(tree: &QuotaTree, usage: &Usage, node: NodeId, weight: FairWeight) -> Drs {
    let weight = weight.as_f64();
    let mut out = Drs {
        unweighted: 0.0,
        weight,
        borrowing: false,
    };
    let Some(parent) = tree.nodes[node].parent else {
        return out;
    };
    // Per resource name: (borrowed, lendable), summed over flavors.
    let mut per_resource: std::collections::BTreeMap<&str, (u128, u128)> =
        std::collections::BTreeMap::new();
    for (fr, cell) in tree.cells.iter().enumerate() {
        let entry = per_resource.entry(cell.resource.as_str()).or_default();
        entry.1 += u128::from(potential_available(tree, parent, fr));
        let borrowed = usage
            .get(node, fr)
            .saturating_sub(tree.nodes[node].subtree_quota[fr]);
        if borrowed > 0 {
            out.borrowing = true;
            entry.0 += u128::from(borrowed);
        }
    }
    for (borrowed, lendable) in per_resource.into_values() {
        if borrowed > 0 && lendable > 0 {
            let ratio = borrowed as f64 * 1000.0 / lendable as f64;
            if ratio > out.unweighted {
                out.unweighted = ratio;
            }
        }
    }
    out
}

/// Kueue's `potentialAvailable`: the most `node` could hold of `fr` with
/// nothing in use, within borrowing limits.
fn potential_available(tree: &QuotaTree, node: NodeId, fr: usize) -> u64 {
    let n = &tree.nodes[node];
    let Some(parent) = n.parent else {
        return n.subtree_quota[fr];
    };
    let avail = n.guaranteed[fr].saturating_add(potential_available(tree, parent, fr));
    match n.limits[fr].as_ref().and_then(|l| l.borrowing_limit) {
        Some(limit) => avail.min(n.subtree_quota[fr].saturating_add(limit)),
        None => avail,
    }
}

/// A LocalQueue's consumed GPU-seconds (milli), decaying with a half-life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfsUsage {
    pub value: u64,
    pub at: Timestamp,
}

/// `value` after `elapsed` with half-life `half_life`: exact halvings for
/// whole half-lives, linear in between (2^-x ~ 1 - x/2 on [0, 1]). Integer
/// only, so every replica computes the same number.
pub fn decay(value: u64, elapsed: Duration, half_life: Duration) -> u64 {
    let h = half_life.as_millis();
    if h == 0 {
        return 0;
    }
    let t = elapsed.as_millis();
    let halvings = t / h;
    if halvings >= 64 {
        return 0;
    }
    let v = value >> halvings;
    let frac = t % h;
    v - (u128::from(v) * frac / (2 * h)) as u64
}

/// What a workload adds to its LocalQueue's admission-fair-sharing usage
/// per second of running, in thousandths of a GPU: what its assignment
/// charges (`usage`, every flavor and resource, the admitted pods only)
/// times each resource's weight (`resourceWeights` of Kueue's
/// `admissionFairSharing`, in thousandths; unlisted: 1 for
/// `nvidia.com/gpu`, 0 for the rest). Integer only, so every replica
/// charges alike.
pub fn afs_rate(usage: &FlavorUsage, weights: &BTreeMap<String, u64>) -> u64 {
    let mut rate: u128 = 0;
    for (cell, q) in usage {
        let weight = weights
            .get(&cell.resource)
            .copied()
            .unwrap_or(if cell.resource == GPU { 1000 } else { 0 });
        rate = rate.saturating_add(u128::from(q.milli()) * u128::from(weight) / 1000);
    }
    u64::try_from(rate).unwrap_or(u64::MAX)
}

/// Usage (GPU-milliseconds, the unit of [`AfsUsage`]) of running at
/// `rate` ([`afs_rate`]) for `ran`.
pub fn afs_usage(rate: u64, ran: Duration) -> u64 {
    let v = u128::from(rate).saturating_mul(ran.as_millis()) / 1000;
    u64::try_from(v).unwrap_or(u64::MAX)
}

pub fn usage_at(usage: AfsUsage, now: Timestamp, half_life: Duration) -> u64 {
    decay(usage.value, now.since(usage.at), half_life)
}

pub fn add_usage(usage: AfsUsage, amount: u64, at: Timestamp, half_life: Duration) -> AfsUsage {
    AfsUsage {
        value: usage_at(usage, at, half_life).saturating_add(amount),
        at: at.max(usage.at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an assignment of `count` pods with these per-pod requests
    /// charges, all in flavor `f`.
    fn usage(requests: &[(&str, &str)], count: u64) -> FlavorUsage {
        requests
            .iter()
            .map(|(r, q)| {
                let q: fleetq_model::Quantity = q.parse().expect("quantity");
                (
                    fleetq_model::FlavorResource::new("f", *r),
                    q.saturating_mul(count),
                )
            })
            .collect()
    }

    #[test]
    fn afs_rate_weighs_gpus_by_default_and_what_is_configured() {
        let per_pod = [(GPU, "2"), ("cpu", "16"), ("nvidia.com/mig-1g.10gb", "1")];
        let three = usage(&per_pod, 3);
        let none = BTreeMap::new();
        // 2 GPUs x 3 pods; cpu and MIG weigh nothing by default.
        assert_eq!(afs_rate(&three, &none), 6_000);
        let weights: BTreeMap<String, u64> = [
            ("cpu".to_string(), 500),
            ("nvidia.com/mig-1g.10gb".to_string(), 143),
            (GPU.to_string(), 2000),
        ]
        .into();
        // 2x6 GPUs + 0.5x48 cpus + 0.143x3 slices.
        assert_eq!(afs_rate(&three, &weights), 12_000 + 24_000 + 429);
        // A partial admission counts its admitted pods.
        assert_eq!(afs_rate(&usage(&per_pod, 1), &none), 2_000);
        assert_eq!(afs_usage(2_000, Duration::from_secs(10)), 20_000);
        assert_eq!(
            afs_usage(u64::MAX, Duration::from_secs(u64::MAX / 4)),
            u64::MAX
        );
    }

    #[test]
    fn decay_halves_per_half_life_and_is_monotone() {
        let h = Duration::from_secs(60);
        assert_eq!(decay(1000, Duration::ZERO, h), 1000);
        assert_eq!(decay(1000, h, h), 500);
        assert_eq!(decay(1000, h * 2, h), 250);
        assert_eq!(decay(1000, h / 2, h), 750);
        let mut last = u64::MAX;
        for s in 0..300 {
            let v = decay(1_000_000, Duration::from_secs(s), h);
            assert!(v <= last);
            last = v;
        }
        assert_eq!(decay(u64::MAX, h * 100, h), 0);
    }
}
