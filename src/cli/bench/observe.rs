//! When each measured workload was admitted: the moment a node first
//! applied its admission (the decision committed and visible to readers),
//! taken from every in-process node's change feed. The ledger's own
//! history stamps an admission when the leader *proposes* it, before it
//! commits, so it cannot tell this moment.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fleetq_ledger::store::{Change, LedgerHandle};
use fleetq_ledger::WorkloadState;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::config::NAMESPACE;

/// Not seen admitted (yet).
const UNSEEN: u64 = u64::MAX;

/// Per measured workload (by its index in `w-{index}`), the earliest
/// wall-clock millisecond any node applied its admission.
pub struct AdmissionObserver {
    admitted_at: Arc<Vec<AtomicU64>>,
    watchers: Vec<JoinHandle<()>>,
}

impl AdmissionObserver {
    /// Starts watching `handles` (subscribed before this returns, so no
    /// later admission is missed) for `workloads` workloads.
    pub fn start(handles: &[LedgerHandle], workloads: u64) -> AdmissionObserver {
        let admitted_at: Arc<Vec<AtomicU64>> =
            Arc::new((0..workloads).map(|_| AtomicU64::new(UNSEEN)).collect());
        let watchers = handles
            .iter()
            .map(|handle| {
                let changes = handle.changes();
                tokio::spawn(watch(handle.clone(), changes, Arc::clone(&admitted_at)))
            })
            .collect();
        AdmissionObserver {
            admitted_at,
            watchers,
        }
    }

    /// When workload `index` was first applied admitted, if seen.
    pub fn admitted_at(&self, index: usize) -> Option<u64> {
        self.admitted_at
            .get(index)
            .map(|a| a.load(Ordering::Relaxed))
            .filter(|&t| t != UNSEEN)
    }
}

impl Drop for AdmissionObserver {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}

async fn watch(
    handle: LedgerHandle,
    mut changes: tokio::sync::broadcast::Receiver<Change>,
    admitted_at: Arc<Vec<AtomicU64>>,
) {
    loop {
        let ids = match changes.recv().await {
            Ok(Change::Workloads(ids)) => ids,
            // A snapshot install replaces the state: nothing to time.
            Ok(Change::All) => continue,
            // Missed notices: their workloads are timed by their Running
            // report instead, and the report counts them.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let now = super::now_ms();
        let sm = handle.read();
        for id in ids.iter() {
            let Some(record) = sm.ledger.workload(*id) else {
                continue;
            };
            if record.state == WorkloadState::Pending || record.workload.namespace != NAMESPACE {
                continue;
            }
            let index = super::workload_index(&record.workload.name);
            if let Some(slot) = index.and_then(|i| admitted_at.get(i)) {
                slot.fetch_min(now, Ordering::Relaxed);
            }
        }
    }
}
