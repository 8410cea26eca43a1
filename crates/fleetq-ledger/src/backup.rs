//! Backups of the ledger, and new data directories seeded from one
//! (`fleetq backup`, `fleetq restore`; docs/operating.md).
//!
//! A backup file is three parts:
//!
//! ```text
//! FLEETQ-BACKUP 1\n                  magic and format version
//! {"format":1,"index":...}\n          the header, one line of JSON
//! <payload>                           Ledger::export, as a Raft snapshot holds it
//! ```
//!
//! The header names the log id the payload reflects (index and term), the
//! Raft membership then, the ledger's state hash, and the SHA-256 of the
//! payload. Reading a file checks the length and the checksum; importing
//! it checks the ledger's invariants and that its state hash is the
//! header's.
//!
//! A restore writes the payload as the node's stored snapshot, with the
//! backup's log id and a membership of the new nodes, an empty log purged
//! up to that log id, and a vote in the backup's term. openraft starts from
//! that as from any node that has compacted its log: `applied_state` and
//! `get_current_snapshot` return the backup's log id, the log state's
//! `last_purged_log_id` and `last_log_id` are that same id, and the node
//! counts as initialized. The first leader of the new group is elected in
//! a later term than the backup's, so the ledger's cycle ids (which must
//! grow with the term) keep growing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};
use openraft::{BasicNode, Membership};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ledger::{Exported, Ledger};
use crate::raft::{LogId, NodeId, SnapshotMeta, StoredMembership, Vote};
use crate::store::{
    SledLogStore, SledSnapshotStore, SnapshotStore, StateMachineStore, StoredSnapshot,
};

/// The format this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: &str = "FLEETQ-BACKUP";

/// What a backup holds, besides the payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BackupHeader {
    pub format: u32,
    /// The last log entry the payload reflects.
    pub index: u64,
    pub term: u64,
    pub last_log_id: LogId,
    /// The Raft membership at that point (the voters and their addresses).
    pub membership: StoredMembership,
    /// [`Ledger::state_hash`] of the payload's ledger.
    pub state_hash: String,
    /// `sha256:` and the hex SHA-256 of the payload.
    pub checksum: String,
    pub payload_bytes: u64,
    /// When it was taken, ms since the Unix epoch.
    pub taken_at_ms: u64,
    /// How it was taken: `node N` (online) or `data directory DIR`.
    pub source: String,
}

/// A backup in memory: its header and payload.
#[derive(Clone, Debug)]
pub struct Backup {
    pub header: BackupHeader,
    pub payload: Vec<u8>,
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn checksum(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Backup {
    /// A backup of an exported ledger at `last_log_id`. Serialises the
    /// ledger and hashes it: call it off the state machine's lock.
    pub fn new(
        exported: &Exported,
        last_log_id: LogId,
        membership: StoredMembership,
        source: String,
    ) -> Result<Backup, String> {
        let payload = exported
            .to_bytes()
            .map_err(|e| format!("cannot serialise the ledger: {e}"))?;
        Ok(Backup {
            header: BackupHeader {
                format: FORMAT_VERSION,
                index: last_log_id.index,
                term: last_log_id.leader_id.term,
                last_log_id,
                membership,
                state_hash: exported.state_hash(),
                checksum: checksum(&payload),
                payload_bytes: payload.len() as u64,
                taken_at_ms: now_ms(),
                source,
            },
            payload,
        })
    }

    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let header = serde_json::to_vec(&self.header)
            .map_err(|e| format!("cannot serialise the backup header: {e}"))?;
        let first = format!("{MAGIC} {}\n", self.header.format);
        let mut out = Vec::with_capacity(first.len() + header.len() + 1 + self.payload.len());
        out.extend_from_slice(first.as_bytes());
        out.extend_from_slice(&header);
        out.push(b'\n');
        out.extend_from_slice(&self.payload);
        Ok(out)
    }

    /// Reads a backup file's bytes; `name` (the file) goes into every
    /// error. Refuses a file of another format or whose payload does not
    /// have the header's length and checksum.
    pub fn decode(bytes: &[u8], name: &str) -> Result<Backup, String> {
        let not_backup =
            || format!("{name} is not a fleetq backup (it does not start with {MAGIC:?})");
        let (first, rest) = split_line(bytes).ok_or_else(not_backup)?;
        let first = std::str::from_utf8(first).map_err(|_| not_backup())?;
        let version = first
            .strip_prefix(MAGIC)
            .and_then(|v| v.strip_prefix(' '))
            .ok_or_else(not_backup)?;
        let version: u32 = version
            .trim()
            .parse()
            .map_err(|_| format!("{name}: unreadable backup format version {version:?}"))?;
        if version == 0 || version > FORMAT_VERSION {
            return Err(format!(
                "{name} is a backup of format {version}; this fleetq reads formats 1 to {FORMAT_VERSION} (use a newer fleetq)"
            ));
        }
        let (header, payload) =
            split_line(rest).ok_or_else(|| format!("{name}: the backup header is cut off"))?;
        let header: BackupHeader = serde_json::from_slice(header)
            .map_err(|e| format!("{name}: the backup header is unreadable: {e}"))?;
        if header.format != version {
            return Err(format!(
                "{name}: the header says format {} but the file starts with format {version}",
                header.format
            ));
        }
        let actual = checksum(payload);
        if payload.len() as u64 != header.payload_bytes || actual != header.checksum {
            return Err(format!(
                "{name} is corrupt: checksum mismatch: the header records {} over {} bytes, the payload has {actual} over {} bytes; refusing to use it",
                header.checksum,
                header.payload_bytes,
                payload.len()
            ));
        }
        Ok(Backup {
            header,
            payload: payload.to_vec(),
        })
    }

    /// Reads and checks a backup file.
    pub fn read_file(path: &Path) -> Result<Backup, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Backup::decode(&bytes, &path.display().to_string())
    }

    /// Writes the backup to `path` durably: a temporary file next to it,
    /// synced, renamed over `path`, and the directory synced.
    pub fn write_file(&self, path: &Path) -> Result<(), String> {
        write_durably(path, &self.encode()?)
    }

    /// The ledger the payload holds, checked: its invariants hold and its
    /// state hash is the header's.
    pub fn ledger(&self, config: impl Into<crate::LedgerConfig>) -> Result<Ledger, String> {
        let ledger = Ledger::import(&self.payload, config)?;
        let hash = ledger.state_hash();
        if hash != self.header.state_hash {
            return Err(format!(
                "the backup's ledger has state hash {hash}, but its header records {}",
                self.header.state_hash
            ));
        }
        Ok(ledger)
    }

    /// The voters of the backup's membership, with their addresses.
    pub fn voters(&self) -> BTreeMap<NodeId, String> {
        let membership = self.header.membership.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        membership
            .nodes()
            .filter(|(id, _)| voters.contains(id))
            .map(|(id, node)| (*id, node.addr.clone()))
            .collect()
    }
}

fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp", file_name.to_string_lossy()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(&dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// What [`restore`] wrote.
#[derive(Clone, Debug)]
pub struct Restored {
    pub meta: SnapshotMeta,
    pub vote: Vote,
}

/// Seeds the empty data directory `dir` of node `id` from `backup`, for a
/// new group of `members` (id -> address, `id` among them): the backup
/// becomes the node's snapshot, the log is empty and purged up to the
/// backup's log id, and the vote is in the backup's term. Every member of
/// the new group is seeded from the same backup with the same `members`.
/// Refuses a directory that holds anything, and checks the backup's
/// ledger (invariants, state hash) before writing.
pub async fn restore(
    backup: &Backup,
    dir: &Path,
    id: NodeId,
    members: &BTreeMap<NodeId, String>,
) -> Result<Restored, String> {
    if !members.contains_key(&id) {
        return Err(format!(
            "node {id} is not among the new group's members {:?}",
            members.keys().collect::<Vec<_>>()
        ));
    }
    if let Ok(mut entries) = std::fs::read_dir(dir) {
        if entries.next().is_some() {
            return Err(format!(
                "{} is not empty: a restore seeds a new node's data directory (move the old one aside first)",
                dir.display()
            ));
        }
    }
    // Checked here too, so that a bad file leaves no directory behind.
    backup.ledger(fleetq_scheduler::SchedulerConfig::default())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    let last_log_id = backup.header.last_log_id;
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    let nodes: BTreeMap<NodeId, BasicNode> = members
        .iter()
        .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
        .collect();
    let meta = SnapshotMeta {
        last_log_id: Some(last_log_id),
        last_membership: StoredMembership::new(
            Some(last_log_id),
            Membership::new(vec![voters], nodes),
        ),
        snapshot_id: format!(
            "restored-{}-{}-{}",
            last_log_id.leader_id, last_log_id.index, backup.header.taken_at_ms
        ),
    };
    let vote = Vote::new(last_log_id.leader_id.term, id);
    let db = crate::store::open_db(dir)?;
    let snapshots =
        SledSnapshotStore::new(&db).map_err(|e| format!("cannot open the snapshot store: {e}"))?;
    snapshots.save(&StoredSnapshot {
        meta: meta.clone(),
        data: backup.payload.clone(),
    })?;
    let mut log =
        SledLogStore::new(&db, dir).map_err(|e| format!("cannot open the Raft log: {e}"))?;
    log.save_committed(Some(last_log_id))
        .await
        .map_err(|e| format!("cannot write the committed index: {e}"))?;
    log.save_vote(&vote)
        .await
        .map_err(|e| format!("cannot write the vote: {e}"))?;
    // Last: purging flushes everything above to disk.
    log.purge(last_log_id)
        .await
        .map_err(|e| format!("cannot write the log's purge point: {e}"))?;
    // Read it back as a starting node would (through the same handle:
    // sled releases its lock on the directory only some time after the
    // last handle is dropped).
    let mut sm = StateMachineStore::open(snapshots, fleetq_scheduler::SchedulerConfig::default())?;
    let state = log
        .get_log_state()
        .await
        .map_err(|e| format!("cannot read back the log: {e}"))?;
    let (applied, membership) = sm
        .applied_state()
        .await
        .map_err(|e| format!("cannot read back the state machine: {e}"))?;
    let hash = sm.handle().read().ledger.state_hash();
    let stored_vote = log
        .read_vote()
        .await
        .map_err(|e| format!("cannot read back the vote: {e}"))?;
    if state.last_log_id != Some(last_log_id)
        || stored_vote != Some(vote)
        || state.last_purged_log_id != Some(last_log_id)
        || applied != Some(last_log_id)
        || membership != meta.last_membership
        || hash != backup.header.state_hash
    {
        return Err(format!(
            "{} did not read back as written (log {:?}, applied {:?}, state hash {hash})",
            dir.display(),
            state,
            applied
        ));
    }
    Ok(Restored { meta, vote })
}

/// A backup of what a stopped node's data directory holds: its snapshot
/// with every entry of its log applied on top, committed or not (as
/// etcd's `--force-new-cluster` commits what its log holds). For a group
/// that lost its quorum for good: the survivor's data, restored as a new
/// group. Fails while a server has the directory open.
pub async fn from_data_dir(dir: &Path) -> Result<Backup, String> {
    if !dir.join("db").is_file() {
        return Err(format!(
            "{} is not a fleetq data directory (it has no sled database)",
            dir.display()
        ));
    }
    // sled holds a lock on the directory: a running server's, or one this
    // process released a moment ago (sled lets it go after its threads).
    let mut tries = 0;
    let (mut log, mut sm) = loop {
        match crate::store::open_sled(dir, fleetq_scheduler::SchedulerConfig::default()) {
            Err(e) if e.contains("could not acquire lock") && tries < 30 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) if e.contains("could not acquire lock") => {
                return Err(format!("{e} (is a server running on it? stop it first)"))
            }
            other => break other?,
        }
    };
    let state = log
        .get_log_state()
        .await
        .map_err(|e| format!("cannot read the log: {e}"))?;
    let (applied, _) = sm
        .applied_state()
        .await
        .map_err(|e| format!("cannot read the state machine: {e}"))?;
    let next = applied.map(|l| l.index + 1).unwrap_or(0);
    let end = state.last_log_id.map(|l| l.index + 1).unwrap_or(0);
    let mut reader = log.get_log_reader().await;
    let mut at = next;
    while at < end {
        let upto = end.min(at + 256);
        let entries = reader
            .try_get_log_entries(at..upto)
            .await
            .map_err(|e| format!("cannot read log entries {at}..{upto}: {e}"))?;
        if entries.first().map(|e| e.log_id.index) != Some(at)
            || entries.last().map(|e| e.log_id.index) != Some(upto - 1)
        {
            return Err(format!(
                "{}: the log has a hole in entries {at}..{upto}",
                dir.display()
            ));
        }
        sm.apply(entries)
            .await
            .map_err(|e| format!("cannot apply log entries {at}..{upto}: {e}"))?;
        at = upto;
    }
    let (exported, last_applied, membership) = {
        let handle = sm.handle();
        let s = handle.read();
        (s.ledger.exported(), s.last_applied, s.membership.clone())
    };
    let last_applied = last_applied
        .ok_or_else(|| format!("{}: the node never applied anything", dir.display()))?;
    Backup::new(
        &exported,
        last_applied,
        membership,
        format!("data directory {}", dir.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Command, Request};
    use fleetq_model::Timestamp;
    use openraft::CommittedLeaderId;

    fn sample() -> Backup {
        let mut ledger = Ledger::default();
        ledger.apply(&Request {
            at: Timestamp::from_secs(1),
            command: Command::DrainCluster {
                cluster: "nowhere".into(),
            },
        });
        let log_id = LogId::new(CommittedLeaderId::new(3, 2), 42);
        let membership = StoredMembership::new(
            Some(LogId::new(CommittedLeaderId::new(1, 1), 1)),
            Membership::new(
                vec![BTreeSet::from([1, 2])],
                BTreeMap::from([
                    (1, BasicNode { addr: "a:1".into() }),
                    (2, BasicNode { addr: "a:2".into() }),
                ]),
            ),
        );
        Backup::new(&ledger.exported(), log_id, membership, "test".into()).unwrap()
    }

    #[test]
    fn a_backup_reads_back_as_written() {
        let b = sample();
        let bytes = b.encode().unwrap();
        assert!(bytes.starts_with(b"FLEETQ-BACKUP 1\n"));
        let back = Backup::decode(&bytes, "f").unwrap();
        assert_eq!(back.header, b.header);
        assert_eq!(back.payload, b.payload);
        assert_eq!(back.header.index, 42);
        assert_eq!(back.header.term, 3);
        assert_eq!(back.voters().len(), 2);
        let ledger = back.ledger(crate::LedgerConfig::default()).unwrap();
        assert_eq!(ledger.state_hash(), b.header.state_hash);
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_refused_naming_it_and_both_checksums() {
        let b = sample();
        let mut bytes = b.encode().unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        let e = Backup::decode(&bytes, "/tmp/x.fqb").unwrap_err();
        assert!(e.contains("/tmp/x.fqb"), "{e}");
        assert!(e.contains(&b.header.checksum), "{e}");
        assert!(
            e.contains(&checksum(&bytes[bytes.len() - b.payload.len()..])),
            "{e}"
        );
        let truncated = &b.encode().unwrap()[..bytes.len() - 10];
        assert!(Backup::decode(truncated, "t")
            .unwrap_err()
            .contains("checksum"));
        let e = Backup::decode(b"hello\n", "h").unwrap_err();
        assert!(e.contains("not a fleetq backup"), "{e}");
        let e = Backup::decode(b"FLEETQ-BACKUP 9\n{}\n", "n").unwrap_err();
        assert!(e.contains("format 9"), "{e}");
    }

    #[tokio::test]
    async fn a_restored_directory_opens_at_the_backup() {
        let b = sample();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("node-7");
        let members = BTreeMap::from([(7, "b:7".to_string()), (8, "b:8".to_string())]);
        let restored = restore(&b, &data, 7, &members).await.unwrap();
        assert_eq!(restored.meta.last_log_id, Some(b.header.last_log_id));
        assert_eq!(restored.vote.leader_id.term, 3);
        // A second restore into the same directory is refused.
        let e = restore(&b, &data, 7, &members).await.unwrap_err();
        assert!(e.contains("not empty"), "{e}");
        // An id outside the members is refused.
        let e = restore(&b, &dir.path().join("x"), 9, &members)
            .await
            .unwrap_err();
        assert!(e.contains("node 9"), "{e}");
        // The restored directory backs up to the same state.
        let again = from_data_dir(&data).await.unwrap();
        assert_eq!(again.header.state_hash, b.header.state_hash);
        assert_eq!(again.header.last_log_id, b.header.last_log_id);
        assert_eq!(again.voters(), members);
    }
}
