//! The leader's admission loop (DESIGN.md §3): whenever the ledger changed
//! (or a timer for time-based reasons passed), run one scheduler cycle on
//! the applied state and propose its decisions as one `AdmitBatch`. The
//! ledger re-validates every decision at apply, so this loop may be stale
//! or run twice without harm; it waits for each batch to apply before the
//! next cycle so that it does not propose the same decisions twice.

use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::raft::Raft;
use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{
    AdmitBatch, Command, CycleId, Ledger, Outcome, RunningWorkload, WorkloadState,
};
use fleetq_model::Timestamp;
use fleetq_scheduler::{schedule, Decisions};
use openraft::ServerState;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::metrics::ServerMetrics;
use crate::proposer::Proposer;

/// Statistics of the last cycles, for status and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionStats {
    pub cycles: u64,
    pub batches: u64,
    pub admitted: u64,
    pub rejected: u64,
    pub last_cycle_micros: u64,
    pub total_cycle_micros: u64,
}

/// How often the loop looks again without a change (budgets refill and
/// backoffs pass with time).
const IDLE_TICK: Duration = Duration::from_secs(1);

/// Retention runs at most this often, unless the last `RemoveFinished`
/// left more due: removal is housekeeping, one small entry a second.
const RETENTION_EVERY: Duration = Duration::from_secs(1);

/// The most finished workloads one `RemoveFinished` removes: bounds the
/// time one apply holds the state machine on every replica (about 1-2 µs
/// a workload). A larger backlog goes in several commands, one after
/// another, with other entries between them: at 20,000 per command,
/// 10,000 admissions/s with a 2 s retention had a p99 of 26-32 ms against
/// 4-7 ms.
pub const REMOVE_PER_COMMAND: u32 = 1_000;

pub async fn run(
    raft: Raft,
    handle: LedgerHandle,
    proposer: Arc<Proposer>,
    clock: SharedClock,
    stats: watch::Sender<AdmissionStats>,
    server_metrics: ServerMetrics,
    mut shutdown: watch::Receiver<bool>,
) {
    let changed = handle.changed();
    let mut seq = 0u64;
    let mut metrics = raft.metrics();
    let mut retention = Retention::default();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let (is_leader, term, caught_up) = {
            let m = metrics.borrow();
            // A new leader first commits an entry of its own term; until it
            // has applied it, entries of earlier terms may still be
            // unapplied here, and a cycle would propose decisions the log
            // already holds (refused at apply, but wasted).
            let caught_up = m
                .last_applied
                .is_some_and(|l| l.leader_id.term == m.current_term);
            (m.state == ServerState::Leader, m.current_term, caught_up)
        };
        if !is_leader || !caught_up {
            tokio::select! {
                _ = metrics.changed() => {}
                _ = shutdown.changed() => {}
            }
            continue;
        }
        let now = clock.now();
        // Wait-for-ready first: evicting frees quota this cycle can use.
        let not_ready = {
            let sm = handle.read();
            not_ready(&sm.ledger, now)
        };
        if !not_ready.is_empty() {
            if let Err(e) = proposer
                .write_local(Command::EvictNotReady {
                    workloads: not_ready,
                })
                .await
                .written()
            {
                tracing::debug!(error = %e, "wait-for-ready eviction not applied");
            }
        }
        retention.run(&handle, &proposer, now).await;
        let started = std::time::Instant::now();
        let batch = {
            let sm = handle.read();
            // Stay ahead of any batch already accepted in this term (also
            // one forged through a debug endpoint).
            let last = sm.ledger.state().last_cycle;
            if last.term == term {
                seq = seq.max(last.seq);
            }
            seq += 1;
            next_batch(&sm.ledger, now, CycleId { term, seq })
        };
        // An admission attempt (Kueue's metric) is a cycle that decided
        // something or found new reasons; the loop also wakes on every
        // Raft metrics change, and a cycle that only confirms what the
        // ledger already says is not counted.
        let attempted = batch.is_some();
        let took = started.elapsed();
        let elapsed = took.as_micros() as u64;
        let mut admitted = false;
        stats.send_modify(|s| {
            s.cycles += 1;
            s.last_cycle_micros = elapsed;
            s.total_cycle_micros += elapsed;
        });
        if let Some(batch) = batch {
            match proposer
                .write_local(Command::AdmitBatch(batch))
                .await
                .written()
            {
                Ok(w) => {
                    if let Outcome::Admitted(o) = w.response.outcome {
                        admitted = o.admitted > 0;
                        stats.send_modify(|s| {
                            s.batches += 1;
                            s.admitted += u64::from(o.admitted);
                            s.rejected += o.rejected.len() as u64;
                        });
                        if !o.rejected.is_empty() {
                            tracing::debug!(
                                rejected = o.rejected.len(),
                                "admission decisions rejected at apply"
                            );
                        }
                    }
                }
                Err(e) => tracing::debug!(error = %e, "admission batch not applied"),
            }
            // The batch's own apply may have woken us; look again at once
            // only if something else changed meanwhile.
        }
        if attempted {
            server_metrics.admission_attempt(admitted, took);
        }
        if retention.more {
            // More finished workloads are due than one command removes.
            continue;
        }
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(IDLE_TICK) => {}
            _ = metrics.changed() => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// The leader's side of retention (`Command::RemoveFinished`): when some
/// finished workload has been over for the retention, propose removing
/// the due ones. apply() picks and re-checks them itself.
#[derive(Default)]
struct Retention {
    /// tokio's clock, not std's: the simulator drives tokio's.
    last: Option<tokio::time::Instant>,
    /// The last command left more due.
    more: bool,
}

impl Retention {
    async fn run(&mut self, handle: &LedgerHandle, proposer: &Proposer, now: Timestamp) {
        let recent = self.last.is_some_and(|t| t.elapsed() < RETENTION_EVERY);
        if recent && !self.more {
            return;
        }
        let command = {
            let sm = handle.read();
            remove_finished(&sm.ledger, now)
        };
        self.more = false;
        let Some(command) = command else {
            return;
        };
        self.last = Some(tokio::time::Instant::now());
        match proposer.write_local(command).await.written() {
            Ok(w) => {
                if let Outcome::RemovedFinished { more, .. } = w.response.outcome {
                    self.more = more;
                }
            }
            Err(e) => tracing::debug!(error = %e, "removal of finished workloads not applied"),
        }
    }
}

/// The `RemoveFinished` to propose at `now`, if retention is on and some
/// finished workload is past it.
pub fn remove_finished(ledger: &Ledger, now: Timestamp) -> Option<Command> {
    let retention = ledger.scheduler_config().finished_retention?;
    let now = now.max(ledger.state().now);
    ledger
        .finished_due(now, retention)
        .then_some(Command::RemoveFinished {
            retention_ms: retention.as_millis() as u64,
            max: REMOVE_PER_COMMAND,
        })
}

/// Admissions past the wait-for-ready timeout that their executor never
/// reported running (the ledger checks again at apply).
pub fn not_ready(ledger: &Ledger, now: Timestamp) -> Vec<RunningWorkload> {
    let Some(policy) = ledger.scheduler_config().wait_for_ready else {
        return Vec::new();
    };
    let now = now.max(ledger.state().now);
    ledger
        .snapshot()
        .admitted()
        .filter(|a| !a.evicting && a.admitted_at.saturating_add(policy.timeout) <= now)
        .filter_map(|a| ledger.workload(a.pending.id))
        .filter(|r| r.state == WorkloadState::Admitted)
        .filter_map(|r| {
            r.reservation.as_ref().map(|res| RunningWorkload {
                workload: r.id,
                epoch: res.epoch,
            })
        })
        .collect()
}

/// One cycle: the decisions plus changed reasons, or `None` when the cycle
/// would change nothing.
pub fn next_batch(ledger: &Ledger, now: Timestamp, cycle: CycleId) -> Option<AdmitBatch> {
    let now = now.max(ledger.state().now);
    let decisions = schedule(ledger.snapshot(), now, ledger.scheduler_config());
    batch_of(ledger, decisions, cycle)
}

fn batch_of(ledger: &Ledger, decisions: Decisions, cycle: CycleId) -> Option<AdmitBatch> {
    let reasons: Vec<_> = decisions
        .pending
        .into_iter()
        .filter(|(id, reason)| {
            ledger
                .workload(*id)
                .is_some_and(|r| r.reason.as_deref() != Some(reason))
        })
        .collect();
    let queue_reasons: Vec<_> = decisions
        .queue_reasons
        .into_iter()
        .filter(|(cq, reason)| ledger.state().queue_reasons.get(cq) != Some(reason))
        .collect();
    let batch = AdmitBatch {
        cycle,
        admissions: decisions.admissions,
        preemptions: decisions.preemptions,
        reasons,
        queue_reasons,
    };
    if batch.has_decisions() || !batch.reasons.is_empty() || !batch.queue_reasons.is_empty() {
        Some(batch)
    } else {
        None
    }
}
