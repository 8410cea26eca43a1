//! Configuration on the ledger: Kueue objects applied and deleted, the
//! scheduler's snapshot derived again from them, and pending workloads
//! bound again to their queues.

use super::*;

impl Ledger {
    pub(super) fn apply_objects(&mut self, objects: &[Object]) -> Response {
        let mut config = self.state.config.clone();
        let mut errors = Vec::new();
        let mut changes = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            let name = object.display_name();
            let before = config.get(object.kind(), &object.key());
            if config.upsert(object.clone()).is_err() {
                errors.push(
                    FieldError::new(
                        &name,
                        "kind",
                        "a Workload is submitted (fleetq submit), not applied as configuration",
                    )
                    .in_document(i + 1),
                );
                continue;
            }
            if let (Some(Object::Topology(old)), Object::Topology(new)) = (&before, object) {
                if let Some(problem) = old.update_problem(new) {
                    errors.push(FieldError::new(&name, "spec.levels", problem).in_document(i + 1));
                }
            }
            let change = match before {
                None => "created",
                Some(b) if &b == object => "unchanged",
                Some(_) => "configured",
            };
            changes.push((name, change.to_string()));
        }
        errors.extend(config.validate());
        if !errors.is_empty() {
            return Response::refused(errors);
        }
        match self.reconfigure(config) {
            Ok(()) => Response::ok(Outcome::Applied { changes }),
            Err(errors) => Response::refused(errors),
        }
    }

    pub(super) fn delete_object(&mut self, kind: &str, name: &str) -> Response {
        let object = format!("{kind}/{name}");
        let mut config = self.state.config.clone();
        if config.remove(kind, name).is_none() {
            return Response::refused(vec![FieldError::new(
                &object,
                "metadata.name",
                format!("{kind} {name:?} does not exist"),
            )]);
        }
        if kind == "Topology" {
            // The flavors are named here rather than left to validate(),
            // which would report each flavor's topologyName as dangling.
            let users = self.state.config.flavors_using_topology(name);
            if !users.is_empty() {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "metadata.name",
                    match users.as_slice() {
                        [one] => format!(
                            "ResourceFlavor {one:?} still names it in spec.topologyName; change or delete that flavor first"
                        ),
                        many => format!(
                            "ResourceFlavors {} still name it in spec.topologyName; change or delete those flavors first",
                            many.iter().map(|u| format!("{u:?}")).collect::<Vec<_>>().join(", ")
                        ),
                    },
                )]);
            }
        }
        if kind == "ClusterQueue" {
            let holders = self
                .state
                .workloads
                .values()
                .filter(|w| {
                    w.reservation
                        .as_ref()
                        .is_some_and(|r| r.cluster_queue == name)
                })
                .count();
            if holders > 0 {
                return Response::refused(vec![FieldError::new(
                    &object,
                    "metadata.name",
                    format!("{holders} admitted workloads still hold quota in it; cancel them or wait for them to finish"),
                )]);
            }
        }
        let errors = config.validate();
        if !errors.is_empty() {
            return Response::refused(errors);
        }
        match self.reconfigure(config) {
            Ok(()) => Response::ok(Outcome::Deleted { object }),
            Err(errors) => Response::refused(errors),
        }
    }

    /// Installs a new configuration, rebuilding the scheduler snapshot from
    /// the records. Refused (nothing changes) if reservations that exist
    /// would no longer fit: quota is never taken away from under running
    /// work by a configuration change.
    pub(super) fn reconfigure(&mut self, config: Config) -> Result<(), Vec<FieldError>> {
        let snapshot = self.derive_snapshot(&config)?;
        self.state.config = config;
        self.snapshot = snapshot;
        self.state
            .queue_reasons
            .retain(|cq, _| self.state.config.cluster_queues.contains_key(cq));
        // Re-bind pending workloads: their LocalQueue may now point
        // elsewhere, or exist at last.
        self.requeue_all_pending();
        Ok(())
    }

    /// Queues every pending workload under its current binding.
    pub(super) fn requeue_all_pending(&mut self) {
        let pending: Vec<WorkloadId> = self
            .state
            .workloads
            .values()
            .filter(|w| w.state == WorkloadState::Pending)
            .map(|w| w.id)
            .collect();
        for id in pending {
            self.requeue_binding(id);
        }
    }

    /// A scheduler snapshot of `config` holding every reservation (pending
    /// workloads are added by the caller).
    pub(super) fn derive_snapshot(&self, config: &Config) -> Result<Snapshot, Vec<FieldError>> {
        let clusters = self.cluster_list();
        let mut snapshot = Snapshot::new(config.clone(), &clusters);
        for (lq, state) in self.snapshot.local_queue_states() {
            snapshot.restore_local_queue_state(lq, *state);
        }
        // A reservation whose ClusterQueue or (flavor, resource) cell is
        // gone would be charged nowhere (the snapshot skips unknown
        // cells), so its quota and devices could be given away twice.
        let mut uncharged = Vec::new();
        for record in self.state.workloads.values() {
            if let Some(admitted) = admitted_of(record) {
                let cq = admitted.pending.cluster_queue.clone();
                let tree = snapshot.tree();
                if tree.cluster_queue(&cq).is_none() {
                    uncharged.push(FieldError::new(
                        format!("ClusterQueue/{cq}"),
                        "metadata.name",
                        format!("admitted workload {} still holds quota in it", record.key()),
                    ));
                }
                for fr in admitted.assignment.usage.keys() {
                    if tree.cell(fr).is_none() {
                        uncharged.push(FieldError::new(
                            format!("ClusterQueue/{cq}"),
                            "spec.resourceGroups",
                            format!(
                                "admitted workload {} still holds {fr}; keep that quota until it ends",
                                record.key()
                            ),
                        ));
                    }
                }
                // Ids are unique, so a restore cannot collide.
                let _ = snapshot.restore_admitted(admitted);
            }
        }
        if !uncharged.is_empty() {
            return Err(uncharged);
        }
        let violations = snapshot.violations();
        if violations.is_empty() {
            Ok(snapshot)
        } else {
            Err(violations
                .into_iter()
                .map(|v| {
                    FieldError::new(
                        "",
                        "spec.resourceGroups",
                        format!("the change would leave admitted workloads over quota: {v}"),
                    )
                })
                .collect())
        }
    }

    pub(super) fn cluster_list(&self) -> Vec<Cluster> {
        self.state
            .clusters
            .values()
            .map(|c| c.cluster.clone())
            .collect()
    }
}
