//! The leader's decisions on the ledger: each admission and preemption
//! of an `AdmitBatch` re-validated at apply, then recorded.

use super::*;

impl Ledger {
    pub(super) fn admit_batch(
        &mut self,
        batch: &AdmitBatch,
        term: Option<u64>,
        at: Timestamp,
    ) -> Response {
        self.counters.admit_batches += 1;
        let mut outcome = AdmitOutcome::default();
        let other_term = term.is_some_and(|t| t != batch.cycle.term);
        if batch.cycle <= self.state.last_cycle || other_term {
            outcome.stale_batch = true;
            self.counters.stale_batches += 1;
            let n = batch.admissions.len() + batch.preemptions.len();
            self.counters.admissions_rejected += batch.admissions.len() as u64;
            self.counters.preemptions_rejected += batch.preemptions.len() as u64;
            self.counters.rejected("StaleBatch", n as u64);
            outcome.rejected = batch
                .admissions
                .iter()
                .map(|a| a.workload)
                .chain(batch.preemptions.iter().map(|p| p.victim))
                .map(|id| (id, format!("stale batch {:?}", batch.cycle)))
                .take(n)
                .collect();
            return Response::ok(Outcome::Admitted(outcome));
        }
        for p in &batch.preemptions {
            match self.preempt(p.victim, p.preemptor, &p.reason, p.cluster.as_deref(), at) {
                Ok(()) => {
                    outcome.preempted += 1;
                    self.counters.preemptions += 1;
                }
                Err((reason, e)) => {
                    self.counters.preemptions_rejected += 1;
                    self.counters.rejected(reason, 1);
                    outcome.rejected.push((p.victim, e));
                }
            }
        }
        for a in &batch.admissions {
            match self.admit_one(a, false, at) {
                Ok(()) => outcome.admitted += 1,
                Err(e) => {
                    self.counters.admissions_rejected += 1;
                    self.counters.rejected(rejection_reason(&e), 1);
                    outcome.rejected.push((a.workload, e.to_string()));
                }
            }
        }
        if batch.has_decisions() && outcome.admitted == 0 && outcome.preempted == 0 {
            // Every decision was refused: the batch changes nothing, not
            // even the reasons it carries (they were computed from a state
            // that is gone).
            return Response::ok(Outcome::Admitted(outcome));
        }
        self.state.last_cycle = batch.cycle;
        for (id, reason) in &batch.reasons {
            // A nominated workload the cycle no longer sees preempting
            // (its victims' room went elsewhere, the configuration changed)
            // gives up its nomination: it must not go first for ever.
            let denominate = reason.kind != ReasonKind::Preempting;
            let mut cleared = false;
            if let Some(record) = self.record_mut(*id) {
                if record.state == WorkloadState::Pending {
                    record.reason = Some(Box::new(reason.clone()));
                    if denominate && record.nominated {
                        record.nominated = false;
                        record.nominated_on = None;
                        cleared = true;
                    }
                }
            }
            if cleared {
                self.snapshot.set_nominated(*id, false);
            }
        }
        for (cq, reason) in &batch.queue_reasons {
            if self.state.config.cluster_queues.contains_key(cq) {
                self.state.queue_reasons.insert(cq.clone(), reason.clone());
            }
        }
        Response::ok(Outcome::Admitted(outcome))
    }

    /// Admits one pending workload after re-validating the decision
    /// (`on_submit`: planned into the entry that submitted it). On error
    /// nothing changed.
    pub(super) fn admit_one(
        &mut self,
        a: &Admission,
        on_submit: bool,
        at: Timestamp,
    ) -> Result<(), fleetq_scheduler::SnapshotError> {
        // Queued since submission or the last requeue (Kueue's
        // admission wait), read before the record changes.
        let queued_since = self.state.workloads.get(&a.workload).map(|r| {
            r.history
                .iter()
                .rev()
                .find(|e| e.state == WorkloadState::Pending)
                .map_or(r.created_at, |e| e.at)
        });
        self.check_not_held(a)?;
        if on_submit {
            self.snapshot.admit_on_submit(a, at)?;
        } else {
            self.snapshot.admit(a, at)?;
        }
        self.counters.admissions += 1;
        if let Some(since) = queued_since {
            self.counters
                .admission_wait
                .entry(a.cluster_queue.clone())
                .or_default()
                .observe(at.since(since).as_millis() as u64);
        }
        let epoch = self.state.next_epoch;
        self.state.next_epoch += 1;
        let (lq, priority) = self
            .snapshot
            .get_admitted(a.workload)
            .map(|w| (w.pending.local_queue.clone(), w.pending.priority))
            .unwrap_or_default();
        if let Some(record) = self.record_mut(a.workload) {
            record.reservation = Some(Box::new(Reservation {
                epoch,
                cluster_queue: a.cluster_queue.clone(),
                local_queue: lq,
                priority,
                assignment: a.assignment.clone(),
                admitted_at: at,
                budget_charge: a.budget_charge,
                stopping: None,
                after_stop: AfterStop::Requeue,
                started_at: None,
            }));
            record.reason = None;
            record.not_before = None;
            record.nominated = false;
            record.nominated_on = None;
            record.push_event(
                at,
                WorkloadState::Admitted,
                format!(
                    "admitted by ClusterQueue {} to cluster {}",
                    a.cluster_queue, a.assignment.cluster
                ),
            );
        }
        Ok(())
    }

    /// apply()'s side of `Snapshot::borrowing_held_by`, the victim read
    /// from its record: a workload whose reclaimer is pending (or
    /// evicting) may not be admitted by borrowing.
    pub(super) fn check_not_held(
        &self,
        a: &Admission,
    ) -> Result<(), fleetq_scheduler::SnapshotError> {
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::PreemptorNotNominated) {
            return Ok(());
        }
        let Some(reclaimer) = self
            .state
            .workloads
            .get(&a.workload)
            .and_then(|r| reclaimed_for_of(r, &self.state.workloads))
        else {
            return Ok(());
        };
        // Pending as the scheduler sees it (a workload its binding keeps
        // out of the queues waits for nothing), or about to be: this
        // batch's preemptions are applied before its admissions.
        let waits = self.snapshot.waits_or_will(reclaimer);
        if waits
            && self
                .snapshot
                .admission_borrows(&a.cluster_queue, &a.assignment)
        {
            return Err(fleetq_scheduler::SnapshotError::NoLongerFits {
                workload: a.workload,
                detail: format!(
                    "it would borrow while workload {reclaimer}, which took its borrowed quota back, waits to be admitted"
                ),
            });
        }
        Ok(())
    }

    pub(super) fn preempt(
        &mut self,
        victim: WorkloadId,
        preemptor: WorkloadId,
        reason: &fleetq_scheduler::PreemptionReason,
        room_on: Option<&str>,
        at: Timestamp,
    ) -> Result<(), (&'static str, String)> {
        let Some(p) = self.snapshot.get_pending(preemptor) else {
            return Err((
                "PreemptorNotPending",
                format!("preemptor {preemptor} is not pending any more"),
            ));
        };
        let (p_cq, p_rank) = (
            p.cluster_queue.clone(),
            fleetq_scheduler::policy::Rank {
                priority: p.priority,
                created_at: p.created_at,
            },
        );
        let record = self.state.workloads.get(&victim).ok_or_else(|| {
            (
                "VictimNotReserved",
                format!("victim {victim} does not exist"),
            )
        })?;
        let reservation = record.reservation.as_ref().ok_or_else(|| {
            (
                "VictimNotReserved",
                format!("victim {victim} holds no reservation"),
            )
        })?;
        if reservation.stopping.is_some() {
            return Err((
                "VictimAlreadyStopping",
                format!("victim {victim} is already stopping"),
            ));
        }
        let victim_cq = reservation.cluster_queue.clone();
        let victim_rank = fleetq_scheduler::policy::Rank {
            priority: reservation.priority,
            created_at: record.created_at,
        };
        let shield = (
            borrow_preemptions_of(record),
            self.state.workloads.get(&preemptor).map_or(0, reclaimed_of),
        );
        let proposed = fleetq_scheduler::policy::Proposed {
            preemptor_cq: &p_cq,
            preemptor: p_rank,
            victim_cq: &victim_cq,
            victim: victim_rank,
            victim_borrow_preemptions: shield.0,
            preemptor_reclaimed: shield.1,
            reason: *reason,
        };
        fleetq_scheduler::policy::check_scope(self.snapshot.tree(), &self.state.config, &proposed)
            .map_err(|e| ("PreemptionNotAllowed", format!("victim {victim}: {e}")))?;
        self.snapshot
            .mark_evicting(victim)
            .map_err(|e| ("VictimNotReserved", e.to_string()))?;
        self.counters.evicted(&victim_cq, EVICTED_PREEMPTED);
        if record
            .history
            .iter()
            .any(|e| e.message.starts_with("preempted ("))
        {
            self.counters.preemptions_repeated += 1;
        }
        self.counters.preempted_by(&p_cq, &format!("{reason:?}"));
        // What the victim frees is meant for its preemptor: nominate it,
        // with the cluster the scheduler planned its room on (entries
        // written before decisions named it nominate without a cluster).
        let on = room_on.map(str::to_string);
        self.snapshot.set_nominated(preemptor, true);
        self.snapshot.end_hold_by(preemptor, victim);
        if on.is_some() {
            self.snapshot.set_nominated_on(preemptor, on.clone());
        }
        if let Some(record) = self.record_mut(preemptor) {
            record.nominated = true;
            if on.is_some() {
                record.nominated_on = on;
            }
        }
        if let Some(record) = self.record_mut(victim) {
            let message = format!("preempted ({reason:?}) to admit workload {preemptor}");
            if let Some(r) = record.reservation.as_mut() {
                r.stopping = Some(message.clone());
            }
            let state = record.state;
            record.push_event(at, state, message);
        }
        Ok(())
    }
}
