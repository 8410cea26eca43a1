//! Fair sharing: Kueue's dominant-resource share between ClusterQueues of a
//! cohort, and admission fair sharing's decayed usage per LocalQueue.

use std::time::Duration;

use fleetq_model::{Quantity, Timestamp};
use serde::{Deserialize, Serialize};

use crate::quota::{NodeId, QuotaTree, Usage};

/// Dominant resource share of `node`: over every cell, what it borrows
/// beyond its own quota as a fraction (per million) of what its cohort
/// tree can lend, divided by its weight. 0 when it borrows nothing. A weight
/// of 0 makes any borrowing infinitely expensive (`u64::MAX`).
pub fn dominant_resource_share(
    tree: &QuotaTree,
    usage: &Usage,
    node: NodeId,
    weight: Quantity,
) -> u64 {
    dominant_resource_share_with(tree, node, weight, |fr| usage.get(node, fr))
}

/// Like [`dominant_resource_share`] with the node's usage given per cell.
pub fn dominant_resource_share_with(
    tree: &QuotaTree,
    node: NodeId,
    weight: Quantity,
    usage_of: impl Fn(usize) -> u64,
) -> u64 {
    let mut root = node;
    while let Some(p) = tree.nodes[root].parent {
        root = p;
    }
    let mut share: u128 = 0;
    for fr in 0..tree.cells.len() {
        let borrowed = usage_of(fr).saturating_sub(tree.nodes[node].subtree_quota[fr]);
        if borrowed == 0 {
            continue;
        }
        let lendable = tree.nodes[root].subtree_quota[fr].max(1);
        share = share.max(u128::from(borrowed) * 1_000_000 / u128::from(lendable));
    }
    if share == 0 {
        return 0;
    }
    if weight.is_zero() {
        return u64::MAX;
    }
    (share * 1000 / u128::from(weight.milli())).min(u128::from(u64::MAX - 1)) as u64
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
