//! The ledger as openraft's state machine.
//!
//! The state lives in memory behind a [`LedgerHandle`] that the server
//! reads (queries, the admission cycle) while openraft applies. Only
//! snapshots are persisted: after a restart the node loads its last
//! snapshot and openraft re-applies the committed log after it.

use std::io::Cursor;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::config::LedgerConfig;
use fleetq_scheduler::WorkloadId;
use openraft::storage::RaftStateMachine;
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftSnapshotBuilder, Snapshot,
};
use tokio::sync::{broadcast, watch, Notify};

use super::snapshot_store::{SnapshotStore, StoredSnapshot};
use crate::command::{Command, Outcome, Request, Response};
use crate::ledger::Ledger;
use crate::raft::{Entry, LogId, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

/// The applied state of one node.
#[derive(Debug)]
pub struct StateMachine {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub ledger: Ledger,
}

/// What changed in one apply step, for watchers and executors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// These workloads' records changed.
    Workloads(Arc<Vec<WorkloadId>>),
    /// The whole state was replaced (a snapshot was installed): look at
    /// everything again.
    All,
}

/// What a state machine tells its [`ApplyObserver`]: each applied command
/// with its outcome and the ledger as it left it, or a ledger that
/// replaced the state whole (opened from a snapshot, or one installed).
pub enum Applied<'a> {
    Entry {
        index: u64,
        request: &'a Request,
        response: &'a Response,
        ledger: &'a Ledger,
    },
    Reset {
        index: u64,
        ledger: &'a Ledger,
    },
}

/// Watches every command a node applies, in order, under the state
/// machine's lock: how the simulator's independent checker reads each
/// replica's stream (chaos/src/oracle). Not used in production.
pub type ApplyObserver = Arc<dyn Fn(Applied<'_>) + Send + Sync>;

/// Shared access to a node's applied ledger, plus the signals the server
/// waits on.
#[derive(Clone)]
pub struct LedgerHandle {
    inner: Arc<RwLock<StateMachine>>,
    holds: Arc<LockHolds>,
    /// Woken after a command that may make new admissions possible.
    changed: Arc<Notify>,
    applied: watch::Sender<u64>,
    changes: broadcast::Sender<Change>,
}

impl LedgerHandle {
    fn new(sm: StateMachine) -> LedgerHandle {
        let index = sm.last_applied.map(|l| l.index).unwrap_or(0);
        LedgerHandle {
            inner: Arc::new(RwLock::new(sm)),
            holds: Arc::default(),
            changed: Arc::new(Notify::new()),
            applied: watch::channel(index).0,
            changes: broadcast::channel(4096).0,
        }
    }

    /// A feed of changed workloads. A receiver that lags behind gets
    /// `RecvError::Lagged` and must look at everything again.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Read access; hold it briefly (apply waits for it).
    pub fn read(&self) -> ReadGuard<'_> {
        ReadGuard {
            guard: self.inner.read().unwrap_or_else(|p| p.into_inner()),
            _held: Held::since_now(&self.holds.read),
        }
    }

    fn write(&self) -> WriteGuard<'_> {
        WriteGuard {
            guard: self.inner.write().unwrap_or_else(|p| p.into_inner()),
            _held: Held::since_now(&self.holds.write),
        }
    }

    /// A copy of the applied ledger and the index it is at, taken in
    /// O(1) under the lock (the maps that grow with the workloads are
    /// persistent): what reads all of it (a scrape, the dashboard, a
    /// hash) does its O(N) work on the copy, while apply goes on.
    pub fn view(&self) -> (Ledger, u64) {
        let sm = self.read();
        (sm.ledger.clone(), sm.last_applied.map_or(0, |l| l.index))
    }

    /// The longest the lock was held for reading and for writing since
    /// the last call (then starts over): what a reader costs apply, and
    /// what apply costs every reader.
    pub fn take_longest_holds(&self) -> LongestHolds {
        LongestHolds {
            read: Duration::from_nanos(self.holds.read.swap(0, Ordering::Relaxed)),
            write: Duration::from_nanos(self.holds.write.swap(0, Ordering::Relaxed)),
        }
    }

    /// Notified when the admission cycle has new work to look at.
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// The last applied log index, as a watch.
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Waits until the state machine has applied `index`.
    pub async fn wait_applied(&self, index: u64) {
        let mut rx = self.applied();
        let _ = rx.wait_for(|&i| i >= index).await;
    }
}

/// The longest holds of a [`LedgerHandle`]'s lock, in nanoseconds.
#[derive(Debug, Default)]
struct LockHolds {
    read: AtomicU64,
    write: AtomicU64,
}

/// See [`LedgerHandle::take_longest_holds`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LongestHolds {
    pub read: Duration,
    pub write: Duration,
}

/// Times one hold of the lock and records it when the guard goes. Two
/// clock reads per hold: next to what any holder does, nothing.
struct Held<'a> {
    since: Instant,
    longest: &'a AtomicU64,
}

impl<'a> Held<'a> {
    fn since_now(longest: &'a AtomicU64) -> Held<'a> {
        Held {
            since: Instant::now(),
            longest,
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.longest.fetch_max(nanos, Ordering::Relaxed);
    }
}

/// Read access to the state machine, timed ([`LedgerHandle::read`]).
pub struct ReadGuard<'a> {
    // Declared before `_held`: the lock is released before the hold is
    // recorded, so the figure never includes the recording.
    guard: RwLockReadGuard<'a, StateMachine>,
    _held: Held<'a>,
}

impl Deref for ReadGuard<'_> {
    type Target = StateMachine;
    fn deref(&self) -> &StateMachine {
        &self.guard
    }
}

/// Write access to the state machine, timed; apply's alone.
struct WriteGuard<'a> {
    guard: RwLockWriteGuard<'a, StateMachine>,
    _held: Held<'a>,
}

impl Deref for WriteGuard<'_> {
    type Target = StateMachine;
    fn deref(&self) -> &StateMachine {
        &self.guard
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut StateMachine {
        &mut self.guard
    }
}

/// openraft's state machine over a [`LedgerHandle`] and a snapshot store.
pub struct StateMachineStore<S: SnapshotStore> {
    handle: LedgerHandle,
    snapshots: Arc<S>,
    config: LedgerConfig,
    snapshot_seq: Arc<AtomicU64>,
    observer: Option<ApplyObserver>,
}

impl<S: SnapshotStore> StateMachineStore<S> {
    /// Reports every applied command to `observer`, starting with the
    /// state as opened.
    pub fn with_observer(mut self, observer: ApplyObserver) -> Self {
        {
            let sm = self.handle.read();
            observer(Applied::Reset {
                index: sm.last_applied.map(|l| l.index).unwrap_or(0),
                ledger: &sm.ledger,
            });
        }
        self.observer = Some(observer);
        self
    }

    /// Opens the state machine from the store's last snapshot, if any.
    pub fn open(snapshots: S, config: impl Into<LedgerConfig>) -> Result<Self, String> {
        let config = config.into();
        let sm = match snapshots.load()? {
            None => StateMachine {
                last_applied: None,
                membership: StoredMembership::default(),
                ledger: Ledger::new(config.clone()),
            },
            Some(stored) => StateMachine {
                last_applied: stored.meta.last_log_id,
                membership: stored.meta.last_membership.clone(),
                ledger: Ledger::import(&stored.data, config.clone())?,
            },
        };
        Ok(StateMachineStore {
            handle: LedgerHandle::new(sm),
            snapshots: Arc::new(snapshots),
            config,
            snapshot_seq: Arc::new(AtomicU64::new(0)),
            observer: None,
        })
    }

    pub fn handle(&self) -> LedgerHandle {
        self.handle.clone()
    }
}

fn sm_error(verb: ErrorVerb, message: String) -> StorageError {
    super::io_error(
        ErrorSubject::StateMachine,
        verb,
        std::io::Error::other(message),
    )
}

/// Whether applying this response may let the admission cycle do more.
fn wakes_scheduler(command: &Command, response: &Response) -> bool {
    match (command, &response.outcome) {
        (Command::AdmitBatch(_), Outcome::Admitted(o)) => o.admitted > 0 || o.preempted > 0,
        (Command::AdmitBatch(_), _) => false,
        // Removing finished workloads frees no quota.
        (Command::RemoveFinished { .. }, _) => false,
        _ => response.is_ok(),
    }
}

impl<S: SnapshotStore> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder<S>;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let sm = self.handle.read();
        Ok((sm.last_applied, sm.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut responses = Vec::new();
        let mut wake = false;
        let (last, touched) = {
            let mut sm = self.handle.write();
            for entry in entries {
                sm.last_applied = Some(entry.log_id);
                let response = match entry.payload {
                    EntryPayload::Blank => Response::default(),
                    EntryPayload::Normal(request) => {
                        let response = sm
                            .ledger
                            .apply_in_term(&request, Some(entry.log_id.leader_id.term));
                        wake |= wakes_scheduler(&request.command, &response);
                        if let Some(observer) = &self.observer {
                            observer(Applied::Entry {
                                index: entry.log_id.index,
                                request: &request,
                                response: &response,
                                ledger: &sm.ledger,
                            });
                        }
                        response
                    }
                    EntryPayload::Membership(m) => {
                        sm.membership = StoredMembership::new(Some(entry.log_id), m);
                        wake = true;
                        Response::default()
                    }
                };
                responses.push(response);
            }
            let touched = sm.ledger.take_changed();
            (sm.last_applied.map(|l| l.index).unwrap_or(0), touched)
        };
        if !touched.is_empty() {
            // No receiver is fine: nobody is watching.
            let _ = self
                .handle
                .changes
                .send(Change::Workloads(Arc::new(touched)));
        }
        self.handle.applied.send_replace(last);
        if wake {
            self.handle.changed.notify_one();
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            handle: self.handle.clone(),
            snapshots: Arc::clone(&self.snapshots),
            seq: Arc::clone(&self.snapshot_seq),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let ledger = Ledger::import(&data, self.config.clone())
            .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        self.snapshots
            .save(&StoredSnapshot {
                meta: meta.clone(),
                data,
            })
            .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        let last = {
            let mut sm = self.handle.write();
            sm.ledger = ledger;
            sm.last_applied = meta.last_log_id;
            sm.membership = meta.last_membership.clone();
            let index = sm.last_applied.map(|l| l.index).unwrap_or(0);
            if let Some(observer) = &self.observer {
                observer(Applied::Reset {
                    index,
                    ledger: &sm.ledger,
                });
            }
            index
        };
        let _ = self.handle.changes.send(Change::All);
        self.handle.applied.send_replace(last);
        self.handle.changed.notify_one();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let stored = self
            .snapshots
            .load()
            .map_err(|e| sm_error(ErrorVerb::Read, e))?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

/// Builds a snapshot of the applied state and stores it.
pub struct SnapshotBuilder<S: SnapshotStore> {
    handle: LedgerHandle,
    snapshots: Arc<S>,
    seq: Arc<AtomicU64>,
}

impl<S: SnapshotStore> RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder<S> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // Copy under the lock, serialise without it: apply must not wait
        // for a snapshot of a large ledger to be written out.
        let (exported, last_applied, membership) = {
            let sm = self.handle.read();
            (sm.ledger.exported(), sm.last_applied, sm.membership.clone())
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match last_applied {
            Some(l) => format!("{}-{}-{seq}", l.leader_id, l.index),
            None => format!("empty-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: membership,
            snapshot_id,
        };
        let snapshots = Arc::clone(&self.snapshots);
        let stored_meta = meta.clone();
        let write = move || -> Result<Vec<u8>, String> {
            let data = exported.to_bytes().map_err(|e| e.to_string())?;
            snapshots.save(&StoredSnapshot {
                meta: stored_meta,
                data: data.clone(),
            })?;
            Ok(data)
        };
        let data = if self.snapshots.does_blocking_io() {
            tokio::task::spawn_blocking(write)
                .await
                .map_err(|e| format!("snapshot writer failed: {e}"))
                .and_then(|r| r)
        } else {
            write()
        }
        .map_err(|e| sm_error(ErrorVerb::Write, e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}
