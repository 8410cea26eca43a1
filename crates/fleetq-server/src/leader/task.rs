//! One shape for the leader's background jobs (TiKV's `Runnable` run by a
//! `Worker`): a job says what one pass does and what wakes it; [`run`]
//! alone decides when it runs. Every node runs every job; a pass happens
//! only while this node holds office: it leads, and it has applied an
//! entry of its own term (until then, entries of earlier terms may still
//! be unapplied here, and a pass would act on a state the log has
//! already moved past).
//!
//! The jobs: admission ([`crate::leader::admission::AdmissionLoop`]),
//! retention ([`crate::leader::retention::Retention`]), lease expiry and
//! the leadership confirmation that agents' acknowledgements wait on
//! ([`crate::agents::leases`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::raft::{NodeId, Raft};
use openraft::{BasicNode, RaftMetrics, ServerState};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// This node's current term of office.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Office {
    /// The Raft term it leads in.
    pub term: u64,
    /// When this node was first seen holding office in `term` (tokio's
    /// clock, which the simulator drives).
    pub since: Instant,
}

/// What wakes a job while this node holds office (out of office, only a
/// change of leadership or shutdown does).
pub struct Wakes {
    /// The longest wait between two passes.
    pub every: Duration,
    /// Also on every change to Raft's metrics (each commit), not only on a
    /// change of leadership.
    pub on_raft_change: bool,
    /// Also when this is notified (the ledger's change signal, which holds
    /// one permit for one waiter: give it to one job only).
    pub on_ledger_change: Option<Arc<Notify>>,
}

/// A background job of the leader.
pub trait LeaderTask: Send + 'static {
    /// What wakes it; asked once, when it starts.
    fn wakes(&self) -> Wakes;

    /// One pass, while this node holds `office`.
    fn pass(&mut self, office: &Office) -> impl Future<Output = ()> + Send;

    /// This node does not hold office (it never did, or lost it): undo what
    /// held only while it did.
    fn out_of_office(&mut self) {}
}

/// Runs `task` on this node until `shutdown`: a pass on taking office, then
/// whenever its [`Wakes`] say, while office is held.
pub async fn run<T: LeaderTask>(mut task: T, raft: Raft, mut shutdown: watch::Receiver<bool>) {
    let wakes = task.wakes();
    let mut metrics = raft.metrics();
    let mut office: Option<Office> = None;
    let mut next = Instant::now();
    loop {
        if *shutdown.borrow() {
            return;
        }
        office = holding(&metrics.borrow(), office);
        match &office {
            Some(held) => {
                task.pass(held).await;
                next = Instant::now() + wakes.every;
            }
            None => task.out_of_office(),
        }
        let leading = office.is_some();
        let ledger = wakes.on_ledger_change.as_deref();
        tokio::select! {
            _ = tokio::time::sleep_until(next), if leading => {}
            _ = async { ledger.unwrap_or(&QUIET).notified().await }, if leading && ledger.is_some() => {}
            changed = metrics.changed(), if !leading || wakes.on_raft_change => {
                if changed.is_err() {
                    return; // Raft has shut down.
                }
            }
            _ = shutdown.changed() => {}
        }
    }
}

/// Never notified: stands in where a job has no ledger wake.
static QUIET: Notify = Notify::const_new();

/// The office this node holds per `metrics`, keeping `held` if it is the
/// same term's.
fn holding(metrics: &RaftMetrics<NodeId, BasicNode>, held: Option<Office>) -> Option<Office> {
    let caught_up = metrics
        .last_applied
        .is_some_and(|l| l.leader_id.term == metrics.current_term);
    if metrics.state != ServerState::Leader || !caught_up {
        return None;
    }
    match held {
        Some(o) if o.term == metrics.current_term => Some(o),
        _ => Some(Office {
            term: metrics.current_term,
            since: Instant::now(),
        }),
    }
}
