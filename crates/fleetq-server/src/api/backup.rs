//! Backups of the ledger taken by a running node (`fleetq backup`, the
//! `Backup` RPC), and the optional schedule that writes them to a
//! directory (`fleetq server --backup-dir`). The file format and restores
//! are `fleetq_ledger::backup`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::backup::Backup;
use fleetq_ledger::store::LedgerHandle;
use tokio::sync::watch;

use crate::metrics::BackupStatus;
use crate::raft::proposer::Proposer;

/// A backup of this node's applied ledger as it is now. Only the copy is
/// taken under the state machine's lock; serialising and hashing run off
/// it and off the async workers, so apply (and admission) go on.
pub async fn take(node_id: u64, handle: &LedgerHandle) -> Result<Backup, String> {
    let (exported, last_applied, membership) = {
        let sm = handle.read();
        (sm.ledger.exported(), sm.last_applied, sm.membership.clone())
    };
    let last_applied = last_applied.ok_or("this node has applied nothing yet")?;
    tokio::task::spawn_blocking(move || {
        Backup::new(
            &exported,
            last_applied,
            membership,
            format!("node {node_id}"),
        )
    })
    .await
    .map_err(|e| format!("the backup task failed: {e}"))?
}

/// [`take`], encoded as the backup file's bytes (off the async workers
/// too), with its header.
pub async fn take_encoded(
    node_id: u64,
    handle: &LedgerHandle,
) -> Result<(fleetq_ledger::backup::BackupHeader, Vec<u8>), String> {
    let backup = take(node_id, handle).await?;
    tokio::task::spawn_blocking(move || Ok((backup.header.clone(), backup.encode()?)))
        .await
        .map_err(|e| format!("the backup task failed: {e}"))?
}

/// Scheduled backups: every `every`, a backup into `dir`, keeping the
/// newest `keep` files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupSchedule {
    pub dir: PathBuf,
    pub every: Duration,
    pub keep: usize,
}

const PREFIX: &str = "fleetq-backup-";
const SUFFIX: &str = ".fqb";

/// The file name of a backup: sortable by time, with its log index.
fn file_name(backup: &Backup) -> String {
    format!(
        "{PREFIX}{:016}-{:012}{SUFFIX}",
        backup.header.taken_at_ms, backup.header.index
    )
}

/// Backup files in `dir` written by the schedule, oldest first.
fn scheduled_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// One scheduled backup: after the read barrier (so it holds everything
/// acknowledged before it began), written durably, then the oldest files
/// beyond `keep` removed. Returns the file written.
pub async fn write_one(
    node_id: u64,
    proposer: &Proposer,
    handle: &LedgerHandle,
    schedule: &BackupSchedule,
) -> Result<PathBuf, String> {
    proposer
        .read_barrier()
        .await
        .map_err(|e| format!("read barrier: {e}"))?;
    let backup = take(node_id, handle).await?;
    let path = schedule.dir.join(file_name(&backup));
    let write_to = path.clone();
    tokio::task::spawn_blocking(move || backup.write_file(&write_to))
        .await
        .map_err(|e| format!("the backup writer failed: {e}"))??;
    let files = scheduled_files(&schedule.dir)
        .map_err(|e| format!("cannot list {}: {e}", schedule.dir.display()))?;
    let excess = files.len().saturating_sub(schedule.keep.max(1));
    for old in &files[..excess] {
        if let Err(e) = std::fs::remove_file(old) {
            tracing::warn!(file = %old.display(), error = %e, "cannot remove an old backup");
        }
    }
    Ok(path)
}

/// Writes a backup every `schedule.every` until shutdown. Every node with
/// a schedule writes its own (each after the read barrier), so a backup
/// exists wherever a node survives.
pub async fn run(
    node_id: u64,
    proposer: Arc<Proposer>,
    handle: LedgerHandle,
    schedule: BackupSchedule,
    status: BackupStatus,
    mut shutdown: watch::Receiver<bool>,
) {
    status.started();
    if let Err(e) = std::fs::create_dir_all(&schedule.dir) {
        tracing::error!(dir = %schedule.dir.display(), error = %e, "cannot create the backup directory; scheduled backups are off");
        return;
    }
    loop {
        tokio::select! {
            _ = tokio::time::sleep(schedule.every) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        match write_one(node_id, &proposer, &handle, &schedule).await {
            Ok(path) => {
                status.succeeded();
                tracing::info!(file = %path.display(), "scheduled backup written");
            }
            Err(e) => tracing::warn!(error = %e, "scheduled backup failed"),
        }
    }
}
