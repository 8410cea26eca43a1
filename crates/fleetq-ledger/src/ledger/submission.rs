//! Workloads entering and leaving on the ledger: submission (with the
//! admissions the leader planned into the same entry), cancel, and
//! stop and resume (`spec.active`).

use super::*;

impl Ledger {
    pub(super) fn submit(
        &mut self,
        submissions: &[Submission],
        max_pending: Option<u64>,
        admit: &[AdmissionOnSubmit],
        at: Timestamp,
    ) -> Response {
        let nothing_waiting = self.snapshot.pending_count() == 0;
        let results: Vec<SubmitResult> = submissions
            .iter()
            .map(|s| self.submit_one(s, max_pending, at))
            .collect();
        let admitted_on_submit = if admit.is_empty() {
            0
        } else {
            self.admit_on_submit(admit, &results, nothing_waiting, at)
        };
        Response::ok(Outcome::Submitted {
            results,
            admitted_on_submit,
        })
    }

    /// The leader's planned admissions of workloads this command created.
    /// The plan assumed nothing else waited and that its decisions hold in
    /// order; where either is no longer so, the rest of the plan is dropped
    /// and those workloads wait for the ordinary cycle, which orders them
    /// with everything else.
    pub(super) fn admit_on_submit(
        &mut self,
        admit: &[AdmissionOnSubmit],
        results: &[SubmitResult],
        nothing_waiting: bool,
        at: Timestamp,
    ) -> u32 {
        let mut made = 0u32;
        for planned in admit {
            if !nothing_waiting {
                break;
            }
            let created = match results.get(planned.submission as usize) {
                Some(SubmitResult::Created { id }) => Some(*id),
                _ => None,
            };
            let Some(id) = created else {
                break;
            };
            if self.admit_one(&planned.for_workload(id), true, at).is_err() {
                break;
            }
            made += 1;
        }
        self.counters.admissions_on_submit += u64::from(made);
        self.counters.rejected_on_submit += admit.len() as u64 - u64::from(made);
        made
    }

    /// Plans admissions for `submissions` as the next cycle would make them
    /// once they were queued, for the leader to put in the
    /// `SubmitWorkloads` entry that queues them (see
    /// [`fleetq_scheduler::schedule_on_submit`], which answers nothing where
    /// its plan could differ from the cycle's). Leaves out submissions
    /// that would not create a workload.
    pub fn plan_on_submit(
        &self,
        submissions: &[Submission],
        now: Timestamp,
    ) -> Vec<AdmissionOnSubmit> {
        if self.snapshot.pending_count() > 0 || submissions.is_empty() {
            return Vec::new();
        }
        let now = now.max(self.state.now);
        let mut names = std::collections::HashSet::new();
        let mut arriving = Vec::with_capacity(submissions.len());
        for (position, s) in submissions.iter().enumerate() {
            let key = s.workload.key();
            let known = s
                .request_id
                .as_ref()
                .is_some_and(|r| self.state.by_request.contains_key(r))
                || self.state.by_name.contains_key(&key);
            // An inactive submission is kept, not queued: nothing to plan.
            if known || !names.insert(key) || s.workload.spec.inactive {
                continue;
            }
            let Ok(binding) = self.state.config.bind_workload(&s.workload) else {
                continue;
            };
            arriving.push(PendingWorkload {
                // Stands for the submission until apply assigns the id;
                // ordered as the real ids will be.
                id: position as WorkloadId,
                workload: Arc::clone(&s.workload),
                local_queue: binding.local_queue,
                cluster_queue: binding.cluster_queue,
                priority: binding.priority,
                created_at: now,
                not_before: None,
                nominated: false,
                borrow_preemptions: 0,
                reclaimed: 0,
                reclaimed_for: None,
            });
        }
        fleetq_scheduler::schedule_on_submit(&self.snapshot, arriving, now, &self.config.scheduler)
            .into_iter()
            .map(|a| AdmissionOnSubmit::planned(a.workload as u32, a))
            .collect()
    }

    pub(super) fn submit_one(
        &mut self,
        submission: &Submission,
        max_pending: Option<u64>,
        at: Timestamp,
    ) -> SubmitResult {
        if let Some(id) = submission
            .request_id
            .as_ref()
            .and_then(|r| self.state.by_request.get(r))
        {
            return SubmitResult::Existing { id: *id };
        }
        let workload = &submission.workload;
        let key = workload.key();
        if let Some(&id) = self.state.by_name.get(&key) {
            // The same spec again is a retry; another spec under a taken
            // name is a conflict (Kueue's AlreadyExists), not an update.
            let difference = self
                .state
                .workloads
                .get(&id)
                .and_then(|existing| existing.workload.difference(workload));
            return match difference {
                None => SubmitResult::Existing { id },
                Some(d) => SubmitResult::Refused {
                    errors: vec![FieldError::new(
                        format!("Workload/{key}"),
                        d.path.clone(),
                        format!(
                            "workload {:?} already exists in namespace {:?} with another spec: {} is {} there, {} in this submission (cancel it first, or submit under another name)",
                            workload.name, workload.namespace, d.path, d.existing, d.submitted
                        ),
                    )],
                },
            };
        }
        let binding = match self.state.config.bind_workload(workload) {
            Ok(b) => b,
            Err(errors) => return SubmitResult::Refused { errors },
        };
        if let Some(limit) = max_pending.filter(|l| *l > 0) {
            let queued = self.snapshot.pending_in_local_queue(&binding.local_queue);
            if queued as u64 >= limit {
                return SubmitResult::QueueFull {
                    errors: vec![FieldError::new(
                        format!("Workload/{key}"),
                        "spec.queueName",
                        format!(
                            "LocalQueue {:?} is full: it already holds {queued} pending workloads and the limit is {limit} (max_pending_per_local_queue); wait until some are admitted, or cancel some",
                            binding.local_queue
                        ),
                    )],
                };
            }
        }
        let id = self.state.next_id;
        let workload = Arc::clone(workload);
        let queued = if workload.spec.inactive {
            // Kept, not queued (requeue_binding gives it its reason below).
            Ok(())
        } else {
            self.snapshot.add_pending(PendingWorkload {
                id,
                workload: Arc::clone(&workload),
                local_queue: binding.local_queue,
                cluster_queue: binding.cluster_queue,
                priority: binding.priority,
                created_at: at,
                not_before: None,
                nominated: false,
                borrow_preemptions: 0,
                reclaimed: 0,
                reclaimed_for: None,
            })
        };
        if let Err(e) = queued {
            return SubmitResult::Refused {
                errors: vec![FieldError::new(
                    format!("Workload/{key}"),
                    "spec.queueName",
                    e.to_string(),
                )],
            };
        }
        self.state.next_id += 1;
        let mut record = WorkloadRecord {
            id,
            workload,
            request_id: submission.request_id.clone(),
            created_at: at,
            state: WorkloadState::Pending,
            reservation: None,
            cancel_requested: false,
            reason: None,
            history: Vec::new(),
            requeue_count: 0,
            not_before: None,
            nominated: false,
            nominated_on: None,
        };
        record.push_event(at, WorkloadState::Pending, "submitted");
        self.state.by_name.insert(key, id);
        if let Some(r) = &submission.request_id {
            self.state.by_request.insert(r.clone(), id);
        }
        let inactive = record.workload.spec.inactive;
        self.state.workloads.insert(id, record);
        if inactive {
            self.requeue_binding(id);
        }
        self.changed.push(id);
        SubmitResult::Created { id }
    }

    /// The record of `namespace/name`, or the refusal naming the field.
    pub(super) fn named(&self, namespace: &str, name: &str) -> Result<&WorkloadRecord, Response> {
        let key = format!("{namespace}/{name}");
        let object = format!("Workload/{key}");
        let refuse = |message: String| {
            Response::refused(vec![FieldError::new(&object, "metadata.name", message)])
        };
        let Some(&id) = self.state.by_name.get(&key) else {
            return Err(refuse(format!(
                "workload {name:?} does not exist in namespace {namespace:?}"
            )));
        };
        self.state
            .workloads
            .get(&id)
            .ok_or_else(|| refuse("workload index is inconsistent".into()))
    }

    pub(super) fn cancel(&mut self, namespace: &str, name: &str, at: Timestamp) -> Response {
        let object = format!("Workload/{namespace}/{name}");
        let record = match self.named(namespace, name) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        let id = record.id;
        match record.state {
            WorkloadState::Pending => {
                self.snapshot.remove_pending(id);
                if let Some(record) = self.record_mut(id) {
                    record.cancel_requested = true;
                    record.reason = None;
                    record.push_event(at, WorkloadState::Cancelled, "cancelled while pending");
                }
            }
            WorkloadState::Admitted | WorkloadState::Running if record.cancel_requested => {
                // Already asked; asking again changes nothing.
            }
            WorkloadState::Admitted | WorkloadState::Running => {
                // Quota follows physical truth: it stays charged until the
                // executor confirms the processes are gone.
                let _ = self.snapshot.mark_evicting(id);
                if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::ReleaseOnCancel) {
                    self.release(id, at);
                }
                if let Some(record) = self.record_mut(id) {
                    record.cancel_requested = true;
                    if let Some(r) = record.reservation.as_mut() {
                        r.stopping = Some("cancelled by user".into());
                    }
                    let state = record.state;
                    record.push_event(
                        at,
                        state,
                        "cancel requested; waiting for the executor to stop it",
                    );
                }
            }
            s => {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "status",
                    format!("workload already ended ({})", s.as_str()),
                )]);
            }
        }
        let state = self
            .state
            .workloads
            .get(&id)
            .map(|r| r.state)
            .unwrap_or(WorkloadState::Cancelled);
        Response::ok(Outcome::Cancelled { id, state })
    }

    /// Kueue's `spec.active` ([`Command::SetWorkloadActive`]). A
    /// deactivated workload that holds quota is evicted as a preempted one
    /// is (quota follows physical truth: released when the executor
    /// confirms the stop) and is not requeued; `requeue_binding` keeps
    /// every inactive workload out of the queues.
    pub(super) fn set_active(
        &mut self,
        namespace: &str,
        name: &str,
        active: bool,
        at: Timestamp,
    ) -> Response {
        let object = format!("Workload/{namespace}/{name}");
        let record = match self.named(namespace, name) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        let (id, state) = (record.id, record.state);
        if state.is_terminal() || record.cancel_requested {
            let why = if state.is_terminal() {
                format!("workload already ended ({})", state.as_str())
            } else {
                "workload is being cancelled".to_string()
            };
            return Response::refused(vec![FieldError::new(&object, "status", why)]);
        }
        if record.workload.spec.inactive != active {
            return Response::ok(Outcome::Activation {
                id,
                state,
                changed: false,
            });
        }
        let stopping = record
            .reservation
            .as_ref()
            .is_some_and(|r| r.stopping.is_some());
        if let Some(record) = self.record_mut(id) {
            let mut workload = (*record.workload).clone();
            workload.spec.inactive = !active;
            record.workload = Arc::new(workload);
            let message = match (active, state.is_reserved(), stopping) {
                (true, _, _) => "resumed (spec.active: true)",
                (false, false, _) => "stopped (spec.active: false)",
                (false, true, true) => "stopped (spec.active: false); not requeued once it stops",
                (false, true, false) => {
                    "stopped (spec.active: false); waiting for the executor to stop it"
                }
            };
            record.push_event(at, state, message);
        }
        if state.is_reserved() && !active && !stopping {
            let _ = self.snapshot.mark_evicting(id);
            if let Some(r) = self.record_mut(id).and_then(|r| r.reservation.as_mut()) {
                r.stopping = Some("stopped (spec.active: false)".into());
            }
        }
        if state == WorkloadState::Pending {
            if let Some(record) = self.record_mut(id) {
                record.reason = None;
            }
            self.requeue_binding(id);
        }
        let state = self.state.workloads.get(&id).map_or(state, |r| r.state);
        Response::ok(Outcome::Activation {
            id,
            state,
            changed: true,
        })
    }
}
