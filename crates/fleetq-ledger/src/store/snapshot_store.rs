//! Where a node keeps its latest state-machine snapshot.

use serde::{Deserialize, Serialize};

use crate::raft::SnapshotMeta;

/// A snapshot as stored: openraft's metadata plus the exported ledger.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredSnapshot {
    pub meta: SnapshotMeta,
    pub data: Vec<u8>,
}

/// Durable home of the latest snapshot. `save` returns only once the
/// snapshot would survive a crash.
pub trait SnapshotStore: Send + Sync + 'static {
    fn save(&self, snapshot: &StoredSnapshot) -> Result<(), String>;
    fn load(&self) -> Result<Option<StoredSnapshot>, String>;

    /// Whether saving does real I/O that should run off the async worker
    /// threads (the in-memory store for the simulator says no, so that
    /// simulated runs stay on their one deterministic thread).
    fn does_blocking_io(&self) -> bool {
        false
    }
}

/// The snapshot in the node's sled database, next to its log.
#[derive(Clone)]
pub struct SledSnapshotStore {
    db: sled::Db,
    tree: sled::Tree,
}

const META: &[u8] = b"meta";
const DATA: &[u8] = b"data";

impl SledSnapshotStore {
    pub fn new(db: &sled::Db) -> sled::Result<SledSnapshotStore> {
        Ok(SledSnapshotStore {
            db: db.clone(),
            tree: db.open_tree("snapshot")?,
        })
    }
}

impl SnapshotStore for SledSnapshotStore {
    fn save(&self, snapshot: &StoredSnapshot) -> Result<(), String> {
        let meta = serde_json::to_vec(&snapshot.meta).map_err(|e| e.to_string())?;
        let mut batch = sled::Batch::default();
        batch.insert(META, meta);
        batch.insert(DATA, snapshot.data.as_slice());
        self.tree.apply_batch(batch).map_err(|e| e.to_string())?;
        self.db.flush().map_err(|e| e.to_string())?;
        Ok(())
    }

    fn does_blocking_io(&self) -> bool {
        true
    }

    fn load(&self) -> Result<Option<StoredSnapshot>, String> {
        let meta = self.tree.get(META).map_err(|e| e.to_string())?;
        let data = self.tree.get(DATA).map_err(|e| e.to_string())?;
        match (meta, data) {
            (Some(meta), Some(data)) => {
                let meta: SnapshotMeta = serde_json::from_slice(&meta)
                    .map_err(|e| format!("stored snapshot metadata is unreadable: {e}"))?;
                Ok(Some(StoredSnapshot {
                    meta,
                    data: data.to_vec(),
                }))
            }
            _ => Ok(None),
        }
    }
}
