//! In-memory Raft storage with an explicit fsync model, for the
//! deterministic simulator.
//!
//! Every write lands in the node's *current* view at once (so it can be
//! read back, as openraft requires) and in a queue of unsynced operations.
//! A sync, after the configured latency, replays the queue onto the
//! *durable* view. [`MemDisk::crash`] drops the current view and the queue:
//! the node restarts from what was durable, exactly what a power cut would
//! leave. `append` acknowledges only after its sync, so openraft never
//! counts an unsynced entry towards a quorum.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};

use super::io_error;
use super::snapshot_store::{SnapshotStore, StoredSnapshot};
use crate::raft::{Entry, LogId, StorageError, TypeConfig, Vote};

#[derive(Clone, Debug, Default)]
struct DiskState {
    logs: BTreeMap<u64, Entry>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
    snapshot: Option<StoredSnapshot>,
}

#[derive(Clone, Debug)]
enum Op {
    Append(Vec<Entry>),
    Truncate(u64),
    Purge(LogId),
    Vote(Vote),
    Committed(Option<LogId>),
}

impl DiskState {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append(entries) => {
                for e in entries {
                    self.logs.insert(e.log_id.index, e.clone());
                }
            }
            Op::Truncate(from) => {
                self.logs.split_off(from);
            }
            Op::Purge(upto) => {
                self.logs = self.logs.split_off(&(upto.index + 1));
                self.last_purged = Some(*upto);
            }
            Op::Vote(v) => self.vote = Some(*v),
            Op::Committed(c) => self.committed = *c,
        }
    }
}

#[derive(Debug, Default)]
struct DiskInner {
    durable: DiskState,
    current: DiskState,
    unsynced: Vec<Op>,
    fsync_latency: Duration,
    syncs: u64,
    crashes: u64,
}

/// One node's simulated disk. Clones share it; it outlives a simulated
/// crash of the node that uses it.
#[derive(Clone, Debug, Default)]
pub struct MemDisk {
    inner: Arc<Mutex<DiskInner>>,
}

impl MemDisk {
    pub fn new(fsync_latency: Duration) -> MemDisk {
        let disk = MemDisk::default();
        disk.lock().fsync_latency = fsync_latency;
        disk
    }

    fn lock(&self) -> MutexGuard<'_, DiskInner> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a write in the current view and the unsynced queue; returns
    /// the crash count it was made under (for [`Self::sync_after_latency`]).
    fn write(&self, op: Op) -> u64 {
        let mut inner = self.lock();
        inner.current.apply(&op);
        inner.unsynced.push(op);
        inner.crashes
    }

    /// Makes every write so far durable.
    pub fn sync(&self) {
        Self::sync_locked(&mut self.lock());
    }

    fn sync_locked(inner: &mut DiskInner) {
        let ops = std::mem::take(&mut inner.unsynced);
        for op in &ops {
            inner.durable.apply(op);
        }
        inner.syncs += 1;
    }

    /// Waits out the fsync latency, then syncs. A crash since the write
    /// (made under `written_under` crashes) discarded it: that is an
    /// error, never an acknowledgement of a write that is gone.
    async fn sync_after_latency(&self, written_under: u64) -> std::io::Result<()> {
        let latency = self.lock().fsync_latency;
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        let mut inner = self.lock();
        if inner.crashes != written_under {
            return Err(std::io::Error::other(
                "simulated crash before the write was synced",
            ));
        }
        Self::sync_locked(&mut inner);
        Ok(())
    }

    /// A power cut: everything not yet synced is gone.
    pub fn crash(&self) {
        let mut inner = self.lock();
        inner.current = inner.durable.clone();
        inner.unsynced.clear();
        inner.crashes += 1;
    }

    /// Writes waiting for a sync (for tests of the fsync model).
    pub fn unsynced_writes(&self) -> usize {
        self.lock().unsynced.len()
    }

    /// The entry at `index` as the node sees it now (synced or not): lets
    /// a simulator strike while a particular command is in flight.
    pub fn entry(&self, index: u64) -> Option<Entry> {
        self.lock().current.logs.get(&index).cloned()
    }

    /// Every log entry the node sees now, in index order (for debugging
    /// dumps of a simulated run).
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().current.logs.values().cloned().collect()
    }

    pub fn durable_last_index(&self) -> Option<u64> {
        self.lock().durable.logs.keys().next_back().copied()
    }
}

/// The Raft log on a [`MemDisk`].
#[derive(Clone, Debug)]
pub struct MemLogStore {
    disk: MemDisk,
}

impl MemLogStore {
    pub fn new(disk: MemDisk) -> MemLogStore {
        MemLogStore { disk }
    }
}

impl RaftLogReader<TypeConfig> for MemLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let inner = self.disk.lock();
        Ok(inner
            .current
            .logs
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<TypeConfig> for MemLogStore {
    type LogReader = MemLogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.disk.lock();
        let last = inner.current.logs.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: inner.current.last_purged,
            last_log_id: last.or(inner.current.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let written_under = self.disk.write(Op::Vote(*vote));
        self.disk
            .sync_after_latency(written_under)
            .await
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.disk.lock().current.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.disk.write(Op::Committed(committed));
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.disk.lock().current.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let written_under = self.disk.write(Op::Append(entries.into_iter().collect()));
        let synced = self.disk.sync_after_latency(written_under).await;
        callback.log_io_completed(synced);
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let written_under = self.disk.write(Op::Truncate(log_id.index));
        self.disk
            .sync_after_latency(written_under)
            .await
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.disk.write(Op::Purge(log_id));
        Ok(())
    }
}

/// The snapshot on a [`MemDisk`]; saved durably at once.
#[derive(Clone, Debug)]
pub struct MemSnapshotStore {
    disk: MemDisk,
}

impl MemSnapshotStore {
    pub fn new(disk: MemDisk) -> MemSnapshotStore {
        MemSnapshotStore { disk }
    }
}

impl SnapshotStore for MemSnapshotStore {
    fn save(&self, snapshot: &StoredSnapshot) -> Result<(), String> {
        let mut inner = self.disk.lock();
        inner.current.snapshot = Some(snapshot.clone());
        inner.durable.snapshot = Some(snapshot.clone());
        Ok(())
    }

    fn load(&self) -> Result<Option<StoredSnapshot>, String> {
        Ok(self.disk.lock().current.snapshot.clone())
    }
}
