//! Retention: finished workloads indexed as they end and removed once
//! their retention has passed, and idle records removed.

use super::*;

impl Ledger {
    /// Indexes the workloads that ended in this command (every change to
    /// a record goes through `record_mut` or `submit_one`, which note it).
    pub(super) fn index_finished(&mut self, changed_from: usize) {
        for id in &self.changed[changed_from..] {
            if let Some(record) = self.state.workloads.get(id) {
                self.finished.note(record);
            }
        }
    }

    pub(super) fn remove_finished(
        &mut self,
        retention_ms: u64,
        max: u32,
        at: Timestamp,
    ) -> Response {
        if max == 0 {
            return Response::refused(vec![FieldError::new(
                "",
                "max",
                "must be at least 1 (how many finished workloads one command removes)",
            )]);
        }
        let cutoff = cutoff(at, retention_ms);
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::RemoveUnfinished) {
            self.remove_idle(cutoff, at);
        }
        let due: Vec<(Timestamp, WorkloadId)> =
            self.finished.ended_by(cutoff).take(max as usize).collect();
        let mut removed = 0;
        for (finished_at, id) in due {
            // Taken off the index whether or not it passes: an entry that
            // does not is an inconsistency (the invariants report it), and
            // must not come back in every later command.
            self.finished.remove(finished_at, id);
            if self.removable(id, finished_at) {
                self.remove_record(id);
                removed += 1;
            }
        }
        let more = self.finished.ended_by(cutoff).next().is_some();
        Response::ok(Outcome::RemovedFinished { removed, more })
    }

    /// Re-checks at apply what the index claims: the workload ended then,
    /// holds no quota and is queued nowhere.
    pub(super) fn removable(&self, id: WorkloadId, finished_at: Timestamp) -> bool {
        self.state.workloads.get(&id).is_some_and(|r| {
            r.finished_at() == Some(finished_at)
                && r.reservation.is_none()
                && self.snapshot.get_admitted(id).is_none()
                && self.snapshot.get_pending(id).is_none()
        })
    }

    /// Drops a record and its indexes, and remembers its id as removed.
    pub(super) fn remove_record(&mut self, id: WorkloadId) {
        let Some(record) = self.state.workloads.remove(&id) else {
            return;
        };
        let key = record.key();
        if self.state.by_name.get(&key) == Some(&id) {
            self.state.by_name.remove(&key);
        }
        if let Some(request) = &record.request_id {
            if self.state.by_request.get(request) == Some(&id) {
                self.state.by_request.remove(request);
            }
        }
        self.state.removed.insert(id);
        self.counters.finished_removed += 1;
        // Watchers learn of it as a change to a record that is gone.
        self.changed.push(id);
    }

    /// The planted bug `remove-unfinished`: retention by "nothing has
    /// happened to it for the retention", finished or not, releasing
    /// whatever it held.
    pub(super) fn remove_idle(&mut self, cutoff: Timestamp, at: Timestamp) {
        let idle: Vec<WorkloadId> = self
            .state
            .workloads
            .values()
            .filter(|r| !r.state.is_terminal())
            .filter(|r| r.history.last().is_some_and(|e| e.at <= cutoff))
            .map(|r| r.id)
            .collect();
        for id in idle {
            self.snapshot.remove_pending(id);
            self.release(id, at);
            self.remove_record(id);
        }
    }
}
