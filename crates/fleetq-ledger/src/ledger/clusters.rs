//! Clusters on the ledger: registration (with their nodes), reconcile
//! after an agent reconnects, lease expiry by policy, drain and
//! uncordon.

use super::*;

impl Ledger {
    pub(super) fn register_cluster(
        &mut self,
        cluster: &Cluster,
        policy: LeasePolicy,
        at: Timestamp,
    ) -> Response {
        let object = format!("Cluster/{}", cluster.name);
        if cluster.name.is_empty() {
            return Response::refused(vec![FieldError::new(&object, "name", "must not be empty")]);
        }
        // Nodes, when reported, must add up to what the cluster reports
        // (none did before nodes existed, so old entries replay alike).
        let problems = cluster.node_problems();
        if !problems.is_empty() {
            return Response::refused(
                problems
                    .into_iter()
                    .map(|p| FieldError::new(&object, "nodes", p))
                    .collect(),
            );
        }
        let mut clusters = self.state.clusters.clone();
        let previous = self.state.clusters.get(&cluster.name).map(|c| &c.cluster);
        let (mut registered, left) =
            nodes_left::merge(previous, cluster, &self.pods_by_node(&cluster.name));
        // Re-registering (new inventory, an agent restart) keeps a drain the
        // operator asked for; anything else comes back Ready.
        let draining = self
            .state
            .clusters
            .get(&cluster.name)
            .is_some_and(|c| c.cluster.state == ClusterState::Draining);
        registered.state = if draining || cluster.state == ClusterState::Draining {
            ClusterState::Draining
        } else {
            ClusterState::Ready
        };
        clusters.insert(
            cluster.name.clone(),
            ClusterRecord {
                cluster: registered,
                lease_policy: policy,
                registered_at: at,
            },
        );
        let list: Vec<Cluster> = clusters.values().map(|c| c.cluster.clone()).collect();
        // Checked and swapped in place: a copy of the snapshot would cost
        // every pending workload (a second at 1M pending, under apply).
        if let Err(excesses) = self.snapshot.try_set_clusters(&list) {
            return Response::refused(
                excesses
                    .into_iter()
                    .map(|v| {
                        FieldError::new(
                            &object,
                            "capacity",
                            format!(
                                "reported capacity is below what is already assigned there: {v}"
                            ),
                        )
                    })
                    .collect(),
            );
        }
        self.state.clusters = clusters;
        for l in left {
            self.node_left_under(&cluster.name, policy, &l, at);
        }
        Response::ok(Outcome::ClusterRegistered {
            cluster: cluster.name.clone(),
        })
    }

    /// Per node of `cluster`, the workloads whose reservations place pods
    /// there (stopping ones too: their pods may still run). Read through
    /// the scheduler's admitted workloads, which are exactly those holding
    /// a reservation (an invariant), in the same order as the records.
    pub(super) fn pods_by_node(&self, cluster: &str) -> BTreeMap<String, Vec<WorkloadId>> {
        let mut out: BTreeMap<String, Vec<WorkloadId>> = BTreeMap::new();
        let reserved = self
            .snapshot
            .admitted()
            .filter_map(|a| self.workload(a.pending.id));
        for record in reserved {
            let Some(r) = record.reservation.as_ref() else {
                continue;
            };
            if r.assignment.cluster != cluster {
                continue;
            }
            for placed in r.assignment.pod_sets.iter().flat_map(|p| &p.nodes) {
                let ids = out.entry(placed.node.clone()).or_default();
                if ids.last() != Some(&record.id) {
                    ids.push(record.id);
                }
            }
        }
        out
    }

    /// A node left under `l.workload`'s pods: by the cluster's lease
    /// policy, evicted (requeued once its executor confirms the stop) or
    /// kept running, and said in its history either way.
    pub(super) fn node_left_under(
        &mut self,
        cluster: &str,
        policy: LeasePolicy,
        l: &nodes_left::LeftUnder,
        at: Timestamp,
    ) {
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::NodeLeftIgnored) {
            return;
        }
        let live = self.state.workloads.get(&l.workload).is_some_and(|r| {
            !r.cancel_requested && r.reservation.as_ref().is_some_and(|r| r.stopping.is_none())
        });
        if !live {
            return;
        }
        let what = format!("node {} of cluster {cluster} {} under it", l.node, l.how);
        let message = match policy {
            LeasePolicy::Fence => {
                self.count_involuntary_stop(l.workload, EVICTED_NODE_LOST);
                let _ = self.snapshot.mark_evicting(l.workload);
                format!("{what}; evicted (lease policy Fence): requeued once its executor stops it")
            }
            LeasePolicy::Keep => format!("{what}; kept running (lease policy Keep)"),
        };
        if let Some(r) = self.record_mut(l.workload) {
            if policy == LeasePolicy::Fence {
                if let Some(res) = r.reservation.as_mut() {
                    res.stopping = Some(message.clone());
                    res.after_stop = AfterStop::Requeue;
                }
            }
            let state = r.state;
            r.push_event(at, state, message);
        }
    }

    pub(super) fn set_cluster_state(&mut self, name: &str, state: ClusterState) {
        if let Some(c) = self.state.clusters.get_mut(name) {
            c.cluster.state = state;
        }
        let list = self.cluster_list();
        self.snapshot.set_clusters(&list);
    }

    pub(super) fn unknown_cluster(name: &str) -> Response {
        Response::refused(vec![FieldError::new(
            format!("Cluster/{name}"),
            "cluster",
            format!("cluster {name:?} is not registered"),
        )])
    }

    pub(super) fn reservations_on(&self, cluster: &str) -> Vec<WorkloadId> {
        self.state
            .workloads
            .values()
            .filter(|w| {
                w.reservation
                    .as_ref()
                    .is_some_and(|r| r.assignment.cluster == cluster)
            })
            .map(|w| w.id)
            .collect()
    }

    pub(super) fn reconcile_cluster(
        &mut self,
        cluster: &str,
        running: &[RunningWorkload],
        at: Timestamp,
    ) -> Response {
        if !self.state.clusters.contains_key(cluster) {
            return Self::unknown_cluster(cluster);
        }
        let reported: BTreeSet<(WorkloadId, Epoch)> =
            running.iter().map(|r| (r.workload, r.epoch)).collect();
        let mut requeued = Vec::new();
        let mut assigned = BTreeSet::new();
        for id in self.reservations_on(cluster) {
            let Some(record) = self.state.workloads.get(&id) else {
                continue;
            };
            let Some(epoch) = record.reservation.as_ref().map(|r| r.epoch) else {
                continue;
            };
            if reported.contains(&(id, epoch)) {
                assigned.insert((id, epoch));
                if record.state == WorkloadState::Admitted {
                    if let Some(record) = self.record_mut(id) {
                        if let Some(r) = record.reservation.as_mut() {
                            r.started_at = Some(at);
                        }
                        record.push_event(at, WorkloadState::Running, "running (reconciled)");
                    }
                }
            } else if record.state == WorkloadState::Running {
                self.count_involuntary_stop(id, EVICTED_NOT_RUNNING);
                // It ran there and is gone: release exactly once. (An
                // admission never reported running is left alone: the
                // reconcile may predate its assignment in this very
                // session, so the agent may be starting it right now. A
                // stop, if one is due, settles it.)
                self.settle_stopped(
                    id,
                    format!("no longer running on cluster {cluster} after its agent reconnected"),
                    at,
                );
                requeued.push(id);
            }
        }
        let stop = running
            .iter()
            .filter(|r| !assigned.contains(&(r.workload, r.epoch)))
            .cloned()
            .collect();
        let was = self.state.clusters.get(cluster).map(|c| c.cluster.state);
        if matches!(was, Some(ClusterState::Unreachable | ClusterState::Lost)) {
            self.set_cluster_state(cluster, ClusterState::Ready);
        }
        Response::ok(Outcome::Reconciled { stop, requeued })
    }

    pub(super) fn expire_cluster(&mut self, cluster: &str, at: Timestamp) -> Response {
        let Some(policy) = self.state.clusters.get(cluster).map(|c| c.lease_policy) else {
            return Self::unknown_cluster(cluster);
        };
        let (mut requeued, mut kept) = (Vec::new(), Vec::new());
        match policy {
            LeasePolicy::Fence => {
                self.set_cluster_state(cluster, ClusterState::Lost);
                for id in self.reservations_on(cluster) {
                    self.count_involuntary_stop(id, EVICTED_CLUSTER_LOST);
                    // Its agent fenced it: stopped, whatever stop was
                    // already asked of it.
                    self.settle_stopped(
                        id,
                        format!("cluster {cluster} lost its lease; its workloads were fenced"),
                        at,
                    );
                    requeued.push(id);
                }
            }
            LeasePolicy::Keep => {
                self.set_cluster_state(cluster, ClusterState::Unreachable);
                kept = self.reservations_on(cluster);
            }
        }
        Response::ok(Outcome::Expired { requeued, kept })
    }

    pub(super) fn drain_cluster(&mut self, cluster: &str) -> Response {
        if !self.state.clusters.contains_key(cluster) {
            return Self::unknown_cluster(cluster);
        }
        self.set_cluster_state(cluster, ClusterState::Draining);
        Response::ok(Outcome::Drained {
            cluster: cluster.to_string(),
        })
    }

    pub(super) fn uncordon_cluster(&mut self, cluster: &str) -> Response {
        let Some(record) = self.state.clusters.get(cluster) else {
            return Self::unknown_cluster(cluster);
        };
        // Only a drain is undone: an unreachable or lost cluster comes
        // back through its agent, not through an operator.
        if record.cluster.state == ClusterState::Draining {
            self.set_cluster_state(cluster, ClusterState::Ready);
        }
        Response::ok(Outcome::Uncordoned {
            cluster: cluster.to_string(),
        })
    }
}
