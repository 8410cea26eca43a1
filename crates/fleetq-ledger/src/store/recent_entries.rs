//! The newest Raft log entries, decoded, in memory.
//!
//! openraft reads every entry back from the log store soon after it was
//! appended: once per follower to replicate it, and once more to apply it.
//! Read from sled, each of those reads decodes the entry's JSON again:
//! profiled under `fleetq bench --clients 8 --batch 50`, decoding log
//! entries read back from sled took 14% of the process's CPU. The log
//! store therefore keeps the entries it appended last in a
//! [`RecentEntries`], and serves a read from it when the whole range is
//! there: a clone instead of a parse.
//!
//! The cached entries are always one contiguous run of indexes that ends
//! at the log's last entry: appends extend it at the end, a truncation cuts
//! the end, a purge and the size bound cut the start. A read that reaches
//! outside that run goes to sled.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use crate::raft::Entry;

/// Entries kept while their encoded size stays under this bound, per
/// node. Replication and apply follow the appends closely, so the last
/// few hundred milliseconds of appends are what matters; 8 MiB of JSON
/// holds well over a second of the heaviest benchmark load.
pub const MAX_CACHED_BYTES: usize = 8 << 20;

/// The newest appended entries with their encoded sizes, oldest first.
#[derive(Debug)]
pub struct RecentEntries {
    entries: VecDeque<(Entry, usize)>,
    bytes: usize,
    max_bytes: usize,
}

impl RecentEntries {
    pub fn new(max_bytes: usize) -> RecentEntries {
        RecentEntries {
            entries: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.log_id.index)
    }

    fn last_index(&self) -> Option<u64> {
        self.entries.back().map(|(e, _)| e.log_id.index)
    }

    /// Records entries just written to the log, each with its encoded
    /// size. An append that does not continue the cached run (the first
    /// after a restart, or after everything was purged) starts a new run.
    pub fn append(&mut self, entry: Entry, encoded_len: usize) {
        if self
            .last_index()
            .is_some_and(|last| entry.log_id.index != last + 1)
        {
            self.entries.clear();
            self.bytes = 0;
        }
        self.bytes += encoded_len;
        self.entries.push_back((entry, encoded_len));
        while self.bytes > self.max_bytes {
            match self.entries.pop_front() {
                Some((_, len)) => self.bytes -= len,
                None => break,
            }
        }
    }

    /// Forgets the entries at `index` and after (the log was truncated
    /// there).
    pub fn truncate(&mut self, index: u64) {
        while self.last_index().is_some_and(|last| last >= index) {
            if let Some((_, len)) = self.entries.pop_back() {
                self.bytes -= len;
            }
        }
    }

    /// Forgets the entries up to and including `index` (the log was
    /// purged there).
    pub fn purge(&mut self, index: u64) {
        while self.first_index().is_some_and(|first| first <= index) {
            if let Some((_, len)) = self.entries.pop_front() {
                self.bytes -= len;
            }
        }
    }

    /// The entries in `range`, if the cached run holds all of them the
    /// log holds: `None` sends the read to sled.
    pub fn get<RB: RangeBounds<u64>>(&self, range: &RB) -> Option<Vec<Entry>> {
        let (first, last) = (self.first_index()?, self.last_index()?);
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i.checked_add(1)?,
            Bound::Unbounded => 0,
        };
        // The run ends at the log's last entry, so nothing past it exists.
        let end = match range.end_bound() {
            Bound::Included(i) => i.saturating_add(1),
            Bound::Excluded(i) => *i,
            Bound::Unbounded => last + 1,
        }
        .min(last + 1);
        if start < first || start > last {
            return None;
        }
        let skip = (start - first) as usize;
        let take = end.saturating_sub(start) as usize;
        Some(
            self.entries
                .iter()
                .skip(skip)
                .take(take)
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::LogId;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn indexes(entries: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        entries.map(|v| v.iter().map(|e| e.log_id.index).collect())
    }

    fn cache(range: std::ops::RangeInclusive<u64>) -> RecentEntries {
        let mut c = RecentEntries::new(1000);
        for i in range {
            c.append(entry(i), 10);
        }
        c
    }

    #[test]
    fn serves_only_ranges_that_start_inside_the_run() {
        let c = cache(5..=9);
        assert_eq!(indexes(c.get(&(5..8))), Some(vec![5, 6, 7]));
        assert_eq!(indexes(c.get(&(7..))), Some(vec![7, 8, 9]));
        assert_eq!(indexes(c.get(&(6..=9))), Some(vec![6, 7, 8, 9]));
        // The run ends at the log's end: asking beyond it gets what exists.
        assert_eq!(indexes(c.get(&(8..100))), Some(vec![8, 9]));
        assert_eq!(indexes(c.get(&(6..6))), Some(vec![]));
        // Older entries, or a start past the end, are read from sled.
        assert_eq!(indexes(c.get(&(4..8))), None);
        assert_eq!(indexes(c.get(&(..8))), None);
        assert_eq!(indexes(c.get(&(10..12))), None);
        assert_eq!(indexes(RecentEntries::new(10).get(&(0..5))), None);
    }

    #[test]
    fn truncate_and_purge_cut_the_run() {
        let mut c = cache(1..=10);
        c.truncate(8);
        assert_eq!(indexes(c.get(&(5..))), Some(vec![5, 6, 7]));
        c.purge(3);
        assert_eq!(indexes(c.get(&(3..))), None);
        assert_eq!(indexes(c.get(&(4..))), Some(vec![4, 5, 6, 7]));
        assert_eq!(c.bytes, 40);
        // Appending after a truncation continues the run.
        c.append(entry(8), 10);
        assert_eq!(indexes(c.get(&(7..))), Some(vec![7, 8]));
        c.purge(100);
        assert_eq!((c.entries.len(), c.bytes), (0, 0));
    }

    #[test]
    fn a_gap_starts_a_new_run_and_the_size_bound_drops_the_oldest() {
        let mut c = cache(1..=3);
        c.append(entry(7), 10);
        assert_eq!(indexes(c.get(&(1..))), None);
        assert_eq!(indexes(c.get(&(7..))), Some(vec![7]));
        let mut small = RecentEntries::new(25);
        for i in 1..=5 {
            small.append(entry(i), 10);
        }
        assert_eq!(indexes(small.get(&(3..))), None);
        assert_eq!(indexes(small.get(&(4..))), Some(vec![4, 5]));
        assert_eq!(small.bytes, 20);
        // An entry larger than the bound is not kept at all.
        small.append(entry(6), 100);
        assert_eq!((small.entries.len(), small.bytes), (0, 0));
    }
}
