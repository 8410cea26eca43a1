//! Retention of finished workloads (Kueue's
//! `objectRetentionPolicies.workloads.afterFinished`): a workload that
//! ended (Succeeded, Failed, Cancelled) is removed from the ledger once it
//! has been over for the retention, so that the ledger, its snapshots and
//! every replica's memory hold what is live and recent, not all history.
//!
//! Two structures make that cheap and checkable:
//!
//! - [`FinishedIndex`]: the finished workloads ordered by when they ended,
//!   derived from the records (not replicated, rebuilt on import), so
//!   `RemoveFinished` takes the oldest first without scanning the ledger.
//! - [`RemovedIds`]: every id removed so far, as ranges. Replicated and in
//!   the state hash: it lets the chaos checker and the API tell a workload
//!   removed after it finished from a lost one (invariant 5). Ids are
//!   handed out in order and workloads finish roughly in order, so the
//!   ranges stay few: gaps are workloads still live (or retained).
//!
//! ```
//! use fleetq_ledger::retention::RemovedIds;
//!
//! let mut removed = RemovedIds::default();
//! for id in [3, 1, 2, 7] {
//!     removed.insert(id);
//! }
//! assert!(removed.contains(2) && !removed.contains(5));
//! assert_eq!(removed.ranges().collect::<Vec<_>>(), vec![(1, 4), (7, 8)]);
//! assert_eq!(removed.len(), 4);
//! ```

use fleetq_model::Timestamp;
use fleetq_scheduler::WorkloadId;
use serde::{Deserialize, Serialize};

use crate::ledger::BigMap;
use crate::record::WorkloadRecord;
use fleetq_scheduler::BigSet;

/// A set of workload ids kept as disjoint, non-adjacent half-open ranges
/// `[start, end)`. Serialised as a list of `[start, end]` pairs in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    from = "Vec<(WorkloadId, WorkloadId)>",
    into = "Vec<(WorkloadId, WorkloadId)>"
)]
pub struct RemovedIds {
    /// start -> end (exclusive). Fragmented by removals in any order, it
    /// can grow with the workloads: a persistent map, copied with the
    /// state in O(1).
    ranges: BigMap<WorkloadId, WorkloadId>,
}

impl RemovedIds {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many ids the set holds.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    pub fn contains(&self, id: WorkloadId) -> bool {
        self.ranges
            .range(..=id)
            .next_back()
            .is_some_and(|(_, &end)| id < end)
    }

    /// Adds `id`, merging it with the ranges it touches.
    pub fn insert(&mut self, id: WorkloadId) {
        if self.contains(id) || id == WorkloadId::MAX {
            return;
        }
        let mut start = id;
        let mut end = id + 1;
        if let Some((&s, &e)) = self.ranges.range(..id).next_back() {
            if e == id {
                start = s;
                self.ranges.remove(&s);
            }
        }
        if let Some(e) = self.ranges.remove(&end) {
            end = e;
        }
        self.ranges.insert(start, end);
    }

    /// The ranges `[start, end)`, in order.
    pub fn ranges(&self) -> impl Iterator<Item = (WorkloadId, WorkloadId)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// The largest id in the set.
    pub fn max(&self) -> Option<WorkloadId> {
        self.ranges.values().next_back().map(|e| e - 1)
    }
}

impl From<Vec<(WorkloadId, WorkloadId)>> for RemovedIds {
    /// Any list of ranges, in any order, overlapping or not (a snapshot is
    /// outside input); empty and inverted ranges are dropped.
    fn from(list: Vec<(WorkloadId, WorkloadId)>) -> Self {
        let mut sorted: Vec<(WorkloadId, WorkloadId)> =
            list.into_iter().filter(|(s, e)| s < e).collect();
        sorted.sort_unstable();
        let mut ranges: BigMap<WorkloadId, WorkloadId> = BigMap::new();
        let mut last: Option<(WorkloadId, WorkloadId)> = None;
        for (s, e) in sorted {
            last = match last {
                Some((ls, le)) if s <= le => Some((ls, le.max(e))),
                Some((ls, le)) => {
                    ranges.insert(ls, le);
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        if let Some((s, e)) = last {
            ranges.insert(s, e);
        }
        RemovedIds { ranges }
    }
}

impl From<RemovedIds> for Vec<(WorkloadId, WorkloadId)> {
    fn from(ids: RemovedIds) -> Self {
        ids.ranges.into_iter().collect()
    }
}

/// Finished workloads by the time they ended (then id): the order
/// `RemoveFinished` takes them in. Derived from the records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FinishedIndex {
    /// Grows with the finished workloads kept: persistent, like the
    /// records, so a copy of the ledger stays O(1).
    by_end: BigSet<(Timestamp, WorkloadId)>,
}

impl FinishedIndex {
    /// The index of `records`: what apply() keeps up to date one command
    /// at a time, built whole (import, and the invariant check).
    pub fn of<'a>(records: impl IntoIterator<Item = &'a WorkloadRecord>) -> FinishedIndex {
        let mut index = FinishedIndex::default();
        for record in records {
            index.note(record);
        }
        index
    }

    /// Indexes `record` if it has finished.
    pub fn note(&mut self, record: &WorkloadRecord) {
        if let Some(at) = record.finished_at() {
            self.insert(at, record.id);
        }
    }

    pub fn insert(&mut self, finished_at: Timestamp, id: WorkloadId) {
        self.by_end.insert((finished_at, id));
    }

    pub fn remove(&mut self, finished_at: Timestamp, id: WorkloadId) {
        self.by_end.remove(&(finished_at, id));
    }

    pub fn len(&self) -> usize {
        self.by_end.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_end.is_empty()
    }

    /// The finished workloads that ended at or before `cutoff`, oldest
    /// first.
    pub fn ended_by(
        &self,
        cutoff: Timestamp,
    ) -> impl Iterator<Item = (Timestamp, WorkloadId)> + '_ {
        self.by_end
            .iter()
            .copied()
            .take_while(move |(at, _)| *at <= cutoff)
    }

    /// Entries in one index and not the other, at most `n` (for a
    /// violation's message).
    pub fn differences(&self, other: &FinishedIndex, n: usize) -> Vec<(Timestamp, WorkloadId)> {
        self.by_end
            .clone()
            .symmetric_difference(other.by_end.clone())
            .into_iter()
            .take(n)
            .collect()
    }
}

/// The latest end a workload may have had to be past a retention of
/// `retention_ms` at `at`.
pub fn cutoff(at: Timestamp, retention_ms: u64) -> Timestamp {
    Timestamp(at.millis().saturating_sub(retention_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Whatever order ids arrive in, the set holds exactly them, as
        /// disjoint, non-adjacent ranges, and survives a JSON round trip.
        #[test]
        fn removed_ids_hold_exactly_what_was_inserted(ids in proptest::collection::vec(0u64..200, 0..120)) {
            let mut set = RemovedIds::default();
            for &id in &ids {
                set.insert(id);
            }
            let expected: BTreeSet<u64> = ids.iter().copied().collect();
            for id in 0..202 {
                prop_assert_eq!(set.contains(id), expected.contains(&id), "id {}", id);
            }
            prop_assert_eq!(set.len(), expected.len() as u64);
            let ranges: Vec<_> = set.ranges().collect();
            for pair in ranges.windows(2) {
                prop_assert!(pair[0].1 < pair[1].0, "ranges touch or overlap: {:?}", ranges);
            }
            let json = serde_json::to_string(&set).unwrap();
            let back: RemovedIds = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back, set);
        }
    }

    #[test]
    fn ranges_from_outside_are_normalised() {
        let set = RemovedIds::from(vec![(5, 7), (1, 3), (2, 4), (9, 9), (8, 6), (4, 5)]);
        assert_eq!(set.ranges().collect::<Vec<_>>(), vec![(1, 7)]);
    }

    #[test]
    fn the_index_yields_the_oldest_first_up_to_the_cutoff() {
        let mut index = FinishedIndex::default();
        index.insert(Timestamp(30), 1);
        index.insert(Timestamp(10), 2);
        index.insert(Timestamp(20), 3);
        let due: Vec<_> = index.ended_by(Timestamp(20)).map(|(_, id)| id).collect();
        assert_eq!(due, vec![2, 3]);
    }
}
