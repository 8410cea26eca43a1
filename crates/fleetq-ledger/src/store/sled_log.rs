//! The Raft log, vote and committed index in sled.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};

use super::io_error;
use crate::raft::{Entry, LogId, StorageError, TypeConfig, Vote};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// Log entries keyed by big-endian index, so sled's order is log order.
#[derive(Clone)]
pub struct SledLogStore {
    db: sled::Db,
    logs: sled::Tree,
    meta: sled::Tree,
}

impl SledLogStore {
    pub fn new(db: &sled::Db) -> sled::Result<SledLogStore> {
        Ok(SledLogStore {
            db: db.clone(),
            logs: db.open_tree("raft_log")?,
            meta: db.open_tree("raft_meta")?,
        })
    }

    fn read_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &[u8],
    ) -> Result<Option<T>, StorageError> {
        let raw = self
            .meta
            .get(key)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Read, e))?;
        match raw {
            None => Ok(None),
            Some(v) => serde_json::from_slice(&v)
                .map(Some)
                .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Read, e)),
        }
    }

    async fn write_meta<T: serde::Serialize>(
        &self,
        key: &[u8],
        value: &T,
    ) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        self.meta
            .insert(key, bytes)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        Ok(())
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (Bound<[u8; 8]>, Bound<[u8; 8]>) {
    let start = match range.start_bound() {
        Bound::Included(i) => Bound::Included(key(*i)),
        Bound::Excluded(i) => Bound::Excluded(key(*i)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let end = match range.end_bound() {
        Bound::Included(i) => Bound::Included(key(*i)),
        Bound::Excluded(i) => Bound::Excluded(key(*i)),
        Bound::Unbounded => Bound::Unbounded,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for SledLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let mut out = Vec::new();
        for item in self.logs.range(bounds(&range)) {
            let (_, v) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            let entry: Entry = serde_json::from_slice(&v)
                .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            out.push(entry);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for SledLogStore {
    type LogReader = SledLogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId> = self.read_meta(LAST_PURGED)?;
        let last = match self
            .logs
            .last()
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?
        {
            None => None,
            Some((_, v)) => {
                let entry: Entry = serde_json::from_slice(&v)
                    .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
                Some(entry.log_id)
            }
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.write_meta(VOTE, vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.read_meta(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not flushed on its own: losing it only means re-applying less
        // of the log at restart, which later commits catch up.
        let bytes = serde_json::to_vec(&committed)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        self.meta
            .insert(COMMITTED, bytes)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.read_meta::<Option<LogId>>(COMMITTED)?.flatten())
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
        let mut batch = sled::Batch::default();
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            batch.insert(&key(entry.log_id.index), bytes);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        // Acknowledge only once the entries are on disk.
        let flushed = self.db.flush_async().await;
        callback.log_io_completed(flushed.map(|_| ()).map_err(std::io::Error::other));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for item in self.logs.range(key(log_id.index)..) {
            let (k, _) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: a crash in between leaves extra
        // entries, never a hole.
        self.write_meta(LAST_PURGED, &log_id).await?;
        let mut batch = sled::Batch::default();
        for item in self.logs.range(..=key(log_id.index)) {
            let (k, _) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        Ok(())
    }
}
