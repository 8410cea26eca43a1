//! Wait-for-ready on the ledger: admissions never reported running
//! within the timeout are evicted, then requeued with backoff.

use super::*;

impl Ledger {
    /// Wait-for-ready (Kueue's waitForPodsReady): an admission its executor
    /// did not report running within the timeout is evicted: marked
    /// stopping, its quota kept until the executor confirms the stop or its
    /// cluster is fenced (a Running report may have been lost with a
    /// leader). It is then requeued with exponential backoff, or
    /// deactivated (Failed) past the requeue limit.
    pub(super) fn evict_not_ready(
        &mut self,
        workloads: &[RunningWorkload],
        at: Timestamp,
    ) -> Response {
        let Some(policy) = self.config.wait_for_ready else {
            return Response::refused(vec![FieldError::new(
                "",
                "waitForReady",
                "wait-for-ready is not enabled on this control plane",
            )]);
        };
        let (mut requeued, mut deactivated, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for w in workloads {
            let due = self.state.workloads.get(&w.workload).is_some_and(|r| {
                r.state == WorkloadState::Admitted
                    && r.reservation.as_ref().is_some_and(|res| {
                        res.epoch == w.epoch
                            && res.stopping.is_none()
                            && res.admitted_at.saturating_add(policy.timeout) <= at
                    })
            });
            if !due {
                skipped.push(w.workload);
                continue;
            }
            let id = w.workload;
            let count = self
                .state
                .workloads
                .get(&id)
                .map_or(1, |r| r.requeue_count.saturating_add(1));
            let why = format!(
                "not reported running within {} of admission (eviction {count})",
                fleetq_model::time::format_duration(policy.timeout)
            );
            // The executor may have started it after all (a Running report
            // lost with a leader): ask it to stop, and release the quota
            // only once it confirms or its cluster is fenced.
            let deactivate = policy
                .backoff_limit_count
                .is_some_and(|limit| count > limit);
            let (message, after) = if deactivate {
                let message = format!(
                    "deactivated: {why}; the requeue limit is {}",
                    policy.backoff_limit_count.unwrap_or(0)
                );
                (message, AfterStop::Deactivate)
            } else {
                let wait = policy.backoff(count);
                let message = format!(
                    "{why}; requeued, backing off {}",
                    fleetq_model::time::format_duration(wait)
                );
                if let Some(r) = self.record_mut(id) {
                    r.not_before = Some(at.saturating_add(wait));
                }
                (message, AfterStop::BackOff)
            };
            let _ = self.snapshot.mark_evicting(id);
            if let Some(cq) = self
                .state
                .workloads
                .get(&id)
                .and_then(|r| r.reservation.as_ref())
                .map(|r| r.cluster_queue.clone())
            {
                self.counters.evicted(&cq, EVICTED_PODS_READY_TIMEOUT);
            }
            if let Some(r) = self.record_mut(id) {
                r.requeue_count = count;
                if let Some(res) = r.reservation.as_mut() {
                    res.stopping = Some(message.clone());
                    res.after_stop = after;
                }
                let state = r.state;
                r.push_event(
                    at,
                    state,
                    format!("{message}; waiting for its executor to stop it"),
                );
            }
            if deactivate {
                deactivated.push(id);
            } else {
                requeued.push(id);
            }
        }
        Response::ok(Outcome::NotReadyEvicted {
            requeued,
            deactivated,
            skipped,
        })
    }
}
