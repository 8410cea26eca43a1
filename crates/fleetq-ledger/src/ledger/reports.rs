//! Executors' reports on the ledger: what an admission did on its
//! cluster (running, finished, stopped, or not started yet), and the
//! release of what it held once it stopped.

use super::*;

impl Ledger {
    pub(super) fn report_status(&mut self, reports: &[StatusReport], at: Timestamp) -> Response {
        let (mut applied, mut stale) = (0, 0);
        for report in reports {
            if self.report_one(report, at) {
                applied += 1;
            } else {
                stale += 1;
                self.counters.stale_reports += 1;
            }
        }
        Response::ok(Outcome::Reported { applied, stale })
    }

    /// Applies one report if it matches the workload's current admission;
    /// returns false for a stale or repeated report (a no-op).
    pub(super) fn report_one(&mut self, report: &StatusReport, at: Timestamp) -> bool {
        let Some(record) = self.state.workloads.get(&report.workload) else {
            return false;
        };
        let Some(reservation) = &record.reservation else {
            return false;
        };
        let any_epoch =
            fleetq_model::mutants::active(fleetq_model::mutants::Mutant::StaleEpochReport);
        if (reservation.epoch != report.epoch && !any_epoch)
            || reservation.assignment.cluster != report.cluster
        {
            return false;
        }
        let id = report.workload;
        match report.phase {
            Phase::Running => {
                if record.state != WorkloadState::Admitted {
                    return false;
                }
                if let Some(record) = self.record_mut(id) {
                    if let Some(r) = record.reservation.as_mut() {
                        r.started_at = Some(at);
                    }
                    record.push_event(
                        at,
                        WorkloadState::Running,
                        format!("running on cluster {}", report.cluster),
                    );
                }
            }
            Phase::Succeeded | Phase::Failed => {
                let state = if report.phase == Phase::Succeeded {
                    WorkloadState::Succeeded
                } else {
                    WorkloadState::Failed
                };
                let message = if report.message.is_empty() {
                    format!(
                        "{} on cluster {}",
                        state.as_str().to_lowercase(),
                        report.cluster
                    )
                } else {
                    report.message.clone()
                };
                self.finish(id, state, message, at);
            }
            Phase::Stopped => {
                let fallback = format!("stopped on cluster {}", report.cluster);
                self.settle_stopped(id, fallback, at);
            }
            Phase::Waiting => {
                let stopping = reservation.stopping.is_some();
                if record.state != WorkloadState::Admitted || stopping {
                    return false;
                }
                let message = waiting_message(&report.cluster, &report.message);
                if record.history.last().is_some_and(|e| e.message == message) {
                    return false;
                }
                if let Some(record) = self.record_mut(id) {
                    record.push_event(at, WorkloadState::Admitted, message);
                }
            }
        }
        true
    }

    /// A stopped admission's quota is released and the workload becomes
    /// what its stop asked for: Cancelled, Failed (deactivated), or
    /// Pending again (backing off after a wait-for-ready eviction, or
    /// requeued after preemption). `fallback` is the reason when no stop
    /// was asked for (the workload stopped by itself or was fenced).
    pub(super) fn settle_stopped(&mut self, id: WorkloadId, fallback: String, at: Timestamp) {
        let Some(record) = self.state.workloads.get(&id) else {
            return;
        };
        let (why, after) = record
            .reservation
            .as_ref()
            .map_or((fallback.clone(), AfterStop::Requeue), |r| {
                (r.stopping.clone().unwrap_or(fallback), r.after_stop)
            });
        if record.cancel_requested {
            self.finish(
                id,
                WorkloadState::Cancelled,
                "cancelled; processes stopped",
                at,
            );
            return;
        }
        match after {
            AfterStop::Requeue => self.release_and_requeue(id, ReasonKind::Evicted, why, at),
            AfterStop::BackOff => self.release_and_requeue(id, ReasonKind::BackingOff, why, at),
            AfterStop::Deactivate => self.finish(id, WorkloadState::Failed, why, at),
        }
    }

    /// Releases a reservation and records the workload's end.
    pub(super) fn finish(
        &mut self,
        id: WorkloadId,
        state: WorkloadState,
        message: impl Into<String>,
        at: Timestamp,
    ) {
        self.release(id, at);
        if let Some(record) = self.record_mut(id) {
            record.reservation = None;
            record.reason = None;
            record.push_event(at, state, message);
        }
    }

    /// Releases a reservation and puts the workload back in its queue with
    /// the eviction as its reason (an evicted workload is Pending again).
    pub(super) fn release_and_requeue(
        &mut self,
        id: WorkloadId,
        kind: ReasonKind,
        why: String,
        at: Timestamp,
    ) {
        if self
            .state
            .workloads
            .get(&id)
            .is_some_and(|r| r.cancel_requested)
        {
            self.finish(
                id,
                WorkloadState::Cancelled,
                format!("cancelled; {why}"),
                at,
            );
            return;
        }
        self.release(id, at);
        if let Some(record) = self.record_mut(id) {
            record.reservation = None;
            record.reason = Some(Box::new(PendingReason::new(kind, why.clone())));
            // An inactive workload is kept out of the queue
            // (requeue_binding): say so, not "requeued".
            let event = if record.workload.spec.inactive {
                format!("{why}; not requeued")
            } else {
                format!("requeued: {why}")
            };
            record.push_event(at, WorkloadState::Pending, event);
        }
        self.requeue_binding(id);
        // requeue_binding clears only Misconfigured reasons; keep the eviction.
    }

    /// Releases the scheduler's reservation and charges what it used (its
    /// assignment's usage, weighted as the replicated Configuration says,
    /// for as long as it held it) to the LocalQueue's admission-fair-sharing
    /// usage.
    pub(super) fn release(&mut self, id: WorkloadId, at: Timestamp) {
        if let Ok(admitted) = self.snapshot.release(id, at) {
            let cfg = self.config.scheduler.with_settings(&self.state.config);
            let rate = fleetq_scheduler::fair::afs_rate(
                &admitted.assignment.usage,
                &cfg.afs_resource_weights,
            );
            let used = fleetq_scheduler::fair::afs_usage(rate, at.since(admitted.admitted_at));
            let half_life = cfg.afs_half_life;
            self.snapshot.record_local_queue_usage(
                &admitted.pending.local_queue,
                used,
                at,
                half_life,
            );
        }
    }

    /// Counts an eviction the workload did not ask for and no earlier
    /// stop (preemption, cancel, wait-for-ready) already accounts for.
    pub(super) fn count_involuntary_stop(&mut self, id: WorkloadId, reason: &str) {
        let cq = self
            .state
            .workloads
            .get(&id)
            .filter(|r| !r.cancel_requested)
            .and_then(|r| r.reservation.as_ref())
            .filter(|r| r.stopping.is_none())
            .map(|r| r.cluster_queue.clone());
        if let Some(cq) = cq {
            self.counters.evicted(&cq, reason);
        }
    }
}

/// A Waiting report's history line: why its pods cannot start, cut to a
/// length a history keeps (an agent's text is not trusted to be short).
pub(super) fn waiting_message(cluster: &str, why: &str) -> String {
    const MAX: usize = 512;
    let mut end = why.len().min(MAX);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    format!("not started on cluster {cluster}: {}", &why[..end])
}
