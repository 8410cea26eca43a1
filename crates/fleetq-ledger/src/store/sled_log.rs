//! The Raft log, vote and committed index in sled.
//!
//! Appends are group-committed: `append` writes the entries into sled's
//! memory and hands openraft's callback to this store's [`Flusher`], a
//! thread that flushes once for everything queued and then acknowledges
//! in order. openraft's core goes on (replicating, answering votes) while
//! the disk works, and a burst of appends costs one fsync, not one each.
//! sled's own `flush_async` would also work, but each call wakes every
//! idle thread of sled's I/O pool (a `notify_all`), which profiled as the
//! largest source of context switches on the admission path.
//!
//! A sled flush alone is not durable against power loss: sled 0.34 ends
//! it with `sync_file_range`, which neither flushes the device's cache
//! nor records a grown file's size, and it writes values too large for its
//! log (over a quarter of a 512 KiB segment: big batches, snapshots) as
//! files under `blobs/` without any sync. So the flusher also syncs every
//! blob file it has not synced yet, the `blobs/` directory when one
//! appeared, and then the data file (`fdatasync`), before it acknowledges.
//! Those rounds make contents durable, not names: when the store opens it
//! syncs the files sled keeps in the data directory, `blobs/`, the data
//! directory and its parent once, so that a power cut soon after a node's
//! first start cannot lose the whole log it had acknowledged.
//!
//! Reads of the newest entries (replication, apply) are served decoded
//! from memory when they can be ([`super::recent_entries`]).

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Debug;
use std::fs::File;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader};

use super::io_error;
use super::recent_entries::{RecentEntries, MAX_CACHED_BYTES};
use crate::raft::{Entry, LogId, NodeId, StorageError, TypeConfig, Vote};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";

/// Log entries keyed by big-endian index, so sled's order is log order.
#[derive(Clone)]
pub struct SledLogStore {
    logs: sled::Tree,
    meta: sled::Tree,
    flusher: Arc<Flusher>,
    /// The newest entries, decoded, shared with the log readers.
    recent: Arc<Mutex<RecentEntries>>,
}

/// What the flusher thread is asked to make durable.
enum FlushJob {
    /// Acknowledge an append to openraft once it is on disk.
    Append(LogFlushed<TypeConfig>),
    /// Answer once everything written before it is on disk.
    Barrier(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// One thread per store that flushes sled for every job queued since its
/// last flush, then completes the jobs in the order they came: callbacks
/// reach openraft in log order, and a barrier returns only after every
/// earlier append was acknowledged.
struct Flusher {
    tx: Mutex<Option<mpsc::Sender<FlushJob>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Everything the flusher thread needs to make sled's writes durable.
struct Disk {
    db: sled::Db,
    /// sled's data file, `DIR/db`, opened again for `fdatasync`.
    data: File,
    blobs: PathBuf,
    /// Blob files already synced (sled writes each once, then only
    /// deletes it).
    synced_blobs: HashSet<OsString>,
}

impl Disk {
    fn open(db: sled::Db, dir: &Path) -> std::io::Result<Disk> {
        let data = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("db"))?;
        sync_names(dir)?;
        Ok(Disk {
            db,
            data,
            blobs: dir.join("blobs"),
            synced_blobs: HashSet::new(),
        })
    }

    /// Makes every write sled has accepted so far durable.
    fn sync(&mut self) -> Result<(), String> {
        self.db.flush().map_err(|e| format!("sled flush: {e}"))?;
        self.sync_blobs()
            .map_err(|e| format!("sync of {}: {e}", self.blobs.display()))?;
        self.data
            .sync_data()
            .map_err(|e| format!("fdatasync of sled's data file: {e}"))
    }

    /// Syncs blob files not synced before (blobs first: the data file
    /// points at them), then the directory that names them.
    fn sync_blobs(&mut self) -> std::io::Result<()> {
        let mut present = HashSet::new();
        let mut new = false;
        for item in std::fs::read_dir(&self.blobs)? {
            let name = item?.file_name();
            if !self.synced_blobs.contains(&name) {
                match File::open(self.blobs.join(&name)) {
                    Ok(f) => f.sync_data()?,
                    // sled removed it since the listing: nothing to keep.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                new = true;
            }
            present.insert(name);
        }
        if new {
            File::open(&self.blobs)?.sync_all()?;
        }
        self.synced_blobs = present;
        Ok(())
    }
}

/// Syncs the files directly in `dir` (sled's data file, its `conf`, its
/// snapshots), then `dir/blobs`, `dir` and the directory that holds `dir`
/// (which may have just been created): the names, which the flush rounds
/// do not sync.
fn sync_names(dir: &Path) -> std::io::Result<()> {
    let dir = dir.canonicalize()?;
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            File::open(entry.path())?.sync_all()?;
        }
    }
    let blobs = dir.join("blobs");
    if blobs.is_dir() {
        File::open(&blobs)?.sync_all()?;
    }
    File::open(&dir)?.sync_all()?;
    if let Some(parent) = dir.parent() {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

impl Flusher {
    fn start(mut disk: Disk) -> std::io::Result<Flusher> {
        let (tx, rx) = mpsc::channel::<FlushJob>();
        let thread = std::thread::Builder::new()
            .name("fleetq-log-flush".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut jobs = vec![first];
                    jobs.extend(rx.try_iter());
                    let flushed = disk.sync();
                    for job in jobs {
                        match job {
                            FlushJob::Append(callback) => callback
                                .log_io_completed(flushed.clone().map_err(std::io::Error::other)),
                            FlushJob::Barrier(reply) => {
                                let _ = reply.send(flushed.clone());
                            }
                        }
                    }
                }
            })?;
        Ok(Flusher {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn send(&self, job: FlushJob) -> Result<(), String> {
        let tx = self.tx.lock().map_err(|_| "the log flusher panicked")?;
        tx.as_ref()
            .ok_or("the log flusher has stopped")?
            .send(job)
            .map_err(|_| "the log flusher has stopped".to_string())
    }

    /// Waits until everything written to sled so far is on disk.
    async fn barrier(&self) -> Result<(), String> {
        let (reply, done) = tokio::sync::oneshot::channel();
        self.send(FlushJob::Barrier(reply))?;
        done.await
            .map_err(|_| "the log flusher has stopped".to_string())?
    }
}

impl Drop for Flusher {
    /// Stops the thread and waits for it, so the database is closed when
    /// the store is (a node restarted in the same process reopens it).
    fn drop(&mut self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

impl SledLogStore {
    /// The log in `db`, which sled opened in `dir`.
    pub fn new(db: &sled::Db, dir: &Path) -> sled::Result<SledLogStore> {
        Ok(SledLogStore {
            logs: db.open_tree("raft_log")?,
            meta: db.open_tree("raft_meta")?,
            flusher: Arc::new(Flusher::start(Disk::open(db.clone(), dir)?)?),
            recent: Arc::new(Mutex::new(RecentEntries::new(MAX_CACHED_BYTES))),
        })
    }

    /// The cache of recent entries, for a `verb` on the log; a poisoned
    /// lock (a panic while it was held) is an error, never a stale answer.
    fn recent(
        &self,
        verb: ErrorVerb,
    ) -> Result<std::sync::MutexGuard<'_, RecentEntries>, StorageError> {
        self.recent.lock().map_err(|_| {
            io_error(
                ErrorSubject::Logs,
                verb,
                std::io::Error::other("the log's entry cache is poisoned"),
            )
        })
    }

    async fn flush(
        &self,
        subject: ErrorSubject<NodeId>,
        verb: ErrorVerb,
    ) -> Result<(), StorageError> {
        self.flusher
            .barrier()
            .await
            .map_err(|e| io_error(subject, verb, std::io::Error::other(e)))
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
        self.flush(ErrorSubject::Store, ErrorVerb::Write).await
    }
}

/// A stored entry, refused (not misread) when a newer build wrote it:
/// the error names the entry and says to run the newer build.
fn decode_entry(key: &[u8], bytes: &[u8]) -> Result<Entry, StorageError> {
    let index = <[u8; 8]>::try_from(key)
        .map(u64::from_be_bytes)
        .unwrap_or(0);
    crate::format::decode(bytes, || format!("log entry {index}"))
        .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))
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
        if let Some(entries) = self.recent(ErrorVerb::Read)?.get(&range) {
            return Ok(entries);
        }
        let mut out = Vec::new();
        for item in self.logs.range(bounds(&range)) {
            let (k, v) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Read, e))?;
            out.push(decode_entry(&k, &v)?);
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
            Some((k, v)) => Some(decode_entry(&k, &v)?.log_id),
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
        let mut appended = Vec::new();
        for entry in entries {
            let bytes = crate::format::encode(&entry)
                .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
            let len = bytes.len();
            batch.insert(&key(entry.log_id.index), bytes);
            appended.push((len, entry));
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Write, e))?;
        // Cached only once in sled: a reader that misses the cache finds
        // the entries there.
        let mut recent = self.recent(ErrorVerb::Write)?;
        for (len, entry) in appended {
            recent.append(entry, len);
        }
        drop(recent);
        // Acknowledged only once the entries are on disk, by the flusher.
        self.flusher.send(FlushJob::Append(callback)).map_err(|e| {
            io_error(
                ErrorSubject::Logs,
                ErrorVerb::Write,
                std::io::Error::other(e),
            )
        })
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Appends still waiting for their flush are acknowledged first, so
        // openraft never hears of an entry after it was truncated.
        self.flush(ErrorSubject::Logs, ErrorVerb::Delete).await?;
        self.recent(ErrorVerb::Delete)?.truncate(log_id.index);
        let mut batch = sled::Batch::default();
        for item in self.logs.range(key(log_id.index)..) {
            let (k, _) = item.map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
            batch.remove(k);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))?;
        self.flush(ErrorSubject::Logs, ErrorVerb::Delete).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: a crash in between leaves extra
        // entries, never a hole.
        self.write_meta(LAST_PURGED, &log_id).await?;
        self.recent(ErrorVerb::Delete)?.purge(log_id.index);
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
