//! openraft storage (storage-v2): the Raft log and vote, and the state
//! machine with its snapshots.
//!
//! - [`sled_log`]: the log, vote and committed index in sled; `append`
//!   acknowledges only after sled has flushed and the data file and any
//!   new blob files are synced (docs/architecture.md §8).
//!   The entries it appended last are also kept decoded in memory
//!   (`recent_entries`), so replication and apply do not parse them back.
//! - [`mem`]: the same in memory with an explicit fsync model: writes sit
//!   in a volatile buffer until synced, and [`mem::MemDisk::crash`] throws
//!   away what was not synced. The deterministic simulator uses it.
//! - [`state_machine`]: the [`crate::Ledger`] behind openraft's state
//!   machine trait. Snapshots go to a [`SnapshotStore`] (sled or memory);
//!   after a restart the state is the last snapshot plus the committed log.

pub mod mem;
mod recent_entries;
#[allow(clippy::result_large_err)] // openraft's StorageError is what the traits return
pub mod sled_log;
pub mod snapshot_store;
pub mod state_machine;

pub use mem::{MemDisk, MemLogStore, MemSnapshotStore};
pub use sled_log::SledLogStore;
pub use snapshot_store::{SledSnapshotStore, SnapshotStore, StoredSnapshot};
pub use state_machine::{
    Applied, ApplyObserver, Change, LedgerHandle, LongestHolds, ReadGuard, StateMachineStore,
};

use crate::raft::{NodeId, StorageError};

/// Opens (or creates) a node's sled database in `dir`: its log store and
/// its state machine, restored from the last snapshot.
pub fn open_sled(
    dir: &std::path::Path,
    config: impl Into<crate::LedgerConfig>,
) -> Result<(SledLogStore, StateMachineStore<SledSnapshotStore>), String> {
    let db = open_db(dir)?;
    let log = SledLogStore::new(&db, dir).map_err(|e| format!("cannot open the Raft log: {e}"))?;
    let snapshots =
        SledSnapshotStore::new(&db).map_err(|e| format!("cannot open the snapshot store: {e}"))?;
    let sm = StateMachineStore::open(snapshots, config)?;
    Ok((log, sm))
}

/// Opens (or creates) the sled database of a node's data directory.
pub fn open_db(dir: &std::path::Path) -> Result<sled::Db, String> {
    sled::Config::new()
        .path(dir)
        .mode(sled::Mode::HighThroughput)
        .open()
        .map_err(|e| format!("cannot open the data directory {}: {e}", dir.display()))
}

pub(crate) fn io_error(
    subject: openraft::ErrorSubject<NodeId>,
    verb: openraft::ErrorVerb,
    e: impl std::error::Error + 'static,
) -> StorageError {
    StorageError::IO {
        source: openraft::StorageIOError::new(subject, verb, openraft::AnyError::new(&e)),
    }
}
