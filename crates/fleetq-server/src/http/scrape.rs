//! The series computed at each scrape of `/metrics` (docs/metrics.md):
//! Raft's view of this node, and the ledger's queues, quotas, cohorts and
//! clusters, sampled under the read lock and encoded after it is
//! released; agents' lease ages on the leader. The node's own
//! instruments, counted as things happen, are [`crate::metrics`].

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use fleetq_ledger::raft::Raft;
use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{Counters, Ledger, WorkloadState};
use fleetq_model::cluster_queue::StopPolicy;
use fleetq_model::Timestamp;
use fleetq_scheduler::fair;
use fleetq_scheduler::quota::NodeKind;
use openraft::ServerState;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::agents::leases::LeaseTable;
use crate::census::Census;
use crate::clock::SharedClock;

use crate::metrics::{counters, gauges, gauges_owned, MetricsConfig, ServerMetrics};

/// The registry `/metrics` encodes: this node's own instruments plus the
/// ledger and Raft series computed at each scrape.
pub fn registry(collector: NodeCollector, own: &ServerMetrics) -> Registry {
    let mut registry = Registry::default();
    own.register(&mut registry);
    registry.register_collector(Box::new(collector));
    registry
}

/// Computes the ledger-derived and Raft series at scrape time.
pub struct NodeCollector {
    pub raft: Raft,
    pub handle: LedgerHandle,
    pub leases: LeaseTable,
    pub clock: SharedClock,
    pub config: MetricsConfig,
}

impl fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeCollector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let raft = RaftSample::from_metrics(&self.raft.metrics().borrow());
        let now = self.clock.now();
        let ledger =
            LedgerSample::of_handle(&self.handle, now, self.config.reserved_not_running_after);
        // Only the leader hears heartbeats; a follower's table is stale.
        let leases: Vec<(String, f64)> = if raft.is_leader {
            self.leases
                .ages()
                .into_iter()
                .filter(|(c, _)| ledger.clusters.iter().any(|s| &s.name == c))
                .map(|(c, age)| (c, age.as_secs_f64()))
                .collect()
        } else {
            Vec::new()
        };
        raft.encode(&mut encoder)?;
        ledger.encode(&mut encoder)?;
        gauges(
            &mut encoder,
            "fleetq_cluster_lease_age_seconds",
            "Seconds since the leader last heard a heartbeat from the cluster's agent (reported by the leader only; clusters simulated in the control plane hold no lease)",
            leases.iter().map(|(c, age)| (vec![("cluster", c.as_str())], *age)),
        )
    }
}

/// What Raft reports about this node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RaftSample {
    pub term: u64,
    pub leader: u64,
    pub is_leader: bool,
    pub last_log_index: u64,
    pub commit_index: u64,
    pub applied_index: u64,
    pub snapshot_index: u64,
}

impl RaftSample {
    pub fn from_metrics(m: &openraft::RaftMetrics<u64, openraft::BasicNode>) -> RaftSample {
        let applied = m.last_applied.map_or(0, |l| l.index);
        let last_log = m.last_log_index.unwrap_or(0);
        let is_leader = m.state == ServerState::Leader;
        // openraft 0.9 does not publish the commit index. On the leader it
        // is the highest index a quorum of voters has stored; a follower
        // can only report what it applied (which trails the commit).
        let commit = match (&m.replication, is_leader) {
            (Some(replication), true) => {
                let mut matched: Vec<u64> = m
                    .membership_config
                    .voter_ids()
                    .map(|id| {
                        let theirs = replication.get(&id).and_then(|l| l.map(|l| l.index));
                        if id == m.id {
                            theirs.unwrap_or(last_log)
                        } else {
                            theirs.unwrap_or(0)
                        }
                    })
                    .collect();
                matched.sort_unstable_by(|a, b| b.cmp(a));
                matched
                    .get(matched.len() / 2)
                    .copied()
                    .unwrap_or(applied)
                    .max(applied)
            }
            _ => applied,
        };
        RaftSample {
            term: m.current_term,
            leader: m.current_leader.unwrap_or(0),
            is_leader,
            last_log_index: last_log,
            commit_index: commit,
            applied_index: applied,
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
        }
    }

    fn encode(&self, e: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let one = |e: &mut DescriptorEncoder, name: &str, help: &str, v: u64| {
            gauges(e, name, help, std::iter::once((Vec::new(), v as f64)))
        };
        one(
            e,
            "fleetq_raft_term",
            "The node's current Raft term",
            self.term,
        )?;
        one(
            e,
            "fleetq_raft_leader",
            "Id of the Raft leader this node knows, 0 if none",
            self.leader,
        )?;
        one(
            e,
            "fleetq_raft_is_leader",
            "1 if this node is the Raft leader, else 0",
            u64::from(self.is_leader),
        )?;
        one(
            e,
            "fleetq_raft_last_log_index",
            "Index of the last entry in this node's Raft log",
            self.last_log_index,
        )?;
        one(
            e,
            "fleetq_raft_commit_index",
            "Highest log index known committed: on the leader, the highest index stored on a quorum of voters; on a follower, its applied index (openraft does not publish the follower's commit index)",
            self.commit_index,
        )?;
        one(
            e,
            "fleetq_raft_applied_index",
            "Highest log index applied to this node's ledger",
            self.applied_index,
        )?;
        one(
            e,
            "fleetq_raft_snapshot_index",
            "Last log index covered by this node's latest Raft snapshot, 0 if none",
            self.snapshot_index,
        )
    }
}

/// One (flavor, resource) quota line of a ClusterQueue, in Kueue's units.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaSample {
    pub flavor: String,
    pub resource: String,
    pub nominal: f64,
    pub usage: f64,
    pub borrowing_limit: Option<f64>,
    pub lending_limit: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterQueueSample {
    pub name: String,
    /// Its cohort, "" if none (Kueue's `cohort` label).
    pub cohort: String,
    /// The root of its cohort tree, "" if it has no cohort.
    pub root_cohort: String,
    /// Kueue's `cluster_queue_status`: `active`, or `pending` while stopped.
    pub status: &'static str,
    pub pending_active: u64,
    pub pending_inadmissible: u64,
    pub admitted_active: u64,
    /// Finished workloads the ledger still keeps.
    pub finished: u64,
    pub weighted_share: f64,
    pub quota: Vec<QuotaSample>,
    /// What its pending workloads request in all, per resource, in Kueue's
    /// units (every pod of every pod set, before flavors are assigned).
    pub pending_resources: BTreeMap<String, f64>,
}

/// A LocalQueue's series (Kueue's `local_queue_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalQueueSample {
    pub namespace: String,
    pub name: String,
    /// Kueue's `local_queue_status` `active`: `True`, or `False` while it
    /// or its ClusterQueue is stopped.
    pub active: &'static str,
    pub pending_active: u64,
    pub pending_inadmissible: u64,
    pub admitted_active: u64,
    pub finished: u64,
    /// (flavor, resource) -> quota its admitted workloads hold.
    pub usage: BTreeMap<(String, String), f64>,
}

/// A cohort's series (Kueue's `cohort_*`).
#[derive(Clone, Debug, PartialEq)]
pub struct CohortSample {
    pub name: String,
    /// Its parent, "" for a root.
    pub parent: String,
    /// The root of its tree (itself for a root).
    pub root: String,
    pub weighted_share: f64,
    /// (flavor, resource, nominal quota of the subtree, quota reserved by
    /// the ClusterQueues in it).
    pub subtree: Vec<(String, String, f64, f64)>,
    /// Admitted workloads of the ClusterQueues in its subtree.
    pub admitted_active: u64,
    /// Their admissions so far (`kueue_admitted_workloads_total` summed).
    pub admitted_total: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSample {
    pub name: String,
    /// (flavor, resource, capacity, allocated) in Kueue's units.
    pub resources: Vec<(String, String, f64, f64)>,
}

/// Everything the ledger contributes to a scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LedgerSample {
    pub cluster_queues: Vec<ClusterQueueSample>,
    pub local_queues: Vec<LocalQueueSample>,
    pub cohorts: Vec<CohortSample>,
    pub clusters: Vec<ClusterSample>,
    /// (ClusterQueue, cluster) -> reservations older than the threshold
    /// that their agent has not reported running; every pair of a
    /// ClusterQueue and a registered cluster is present.
    pub reserved_not_running: BTreeMap<(String, String), u64>,
    pub counters: Counters,
}

/// Milli-units to Kueue's float units (GPUs, cores, bytes).
fn units(milli: u64) -> f64 {
    milli as f64 / 1000.0
}

/// Kueue's `roundedWeightedShare`: the share rounded up, `i64::MAX` for a
/// borrowing queue of weight 0.
fn kueue_share(drs: fair::Drs) -> f64 {
    let share = drs.weighted();
    if share.is_infinite() {
        i64::MAX as f64
    } else {
        share.ceil()
    }
}

fn root_of(tree: &fleetq_scheduler::quota::QuotaTree, node: usize) -> String {
    tree.nodes[tree.root_of(node)].name.clone()
}

impl LedgerSample {
    /// [`LedgerSample::take`] from a copy of the ledger: the lock is held
    /// only to take it (O(1)), not for the pass over every workload.
    pub fn of_handle(
        handle: &LedgerHandle,
        now: Timestamp,
        not_running_after: Duration,
    ) -> LedgerSample {
        let (ledger, _) = handle.view();
        LedgerSample::take(&ledger, now, not_running_after)
    }

    /// Reads what a scrape reports from `ledger`; `now` is this node's
    /// clock (the canary needs wall time: a quiet ledger's stamps stand
    /// still).
    pub fn take(ledger: &Ledger, now: Timestamp, not_running_after: Duration) -> LedgerSample {
        let state = ledger.state();
        let snapshot = ledger.snapshot();
        let tree = snapshot.tree();
        let usage = snapshot.usage();

        let census = Census::with_amounts(ledger);
        // Finished workloads still kept, by the queues their LocalQueue
        // names now (a finished record holds no reservation).
        let by_queue: BTreeMap<(&str, &str), (&str, &str)> = state
            .config
            .local_queues
            .iter()
            .map(|(key, lq)| {
                (
                    (lq.namespace.as_str(), lq.name.as_str()),
                    (key.as_str(), lq.spec.cluster_queue.as_str()),
                )
            })
            .collect();
        let mut finished: BTreeMap<&str, u64> = BTreeMap::new();
        let mut lq_finished: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, id) in ledger.finished().ended_by(Timestamp(u64::MAX)) {
            let Some(record) = ledger.workload(id) else {
                continue;
            };
            let w = &record.workload;
            let queue = (w.namespace.as_str(), w.spec.queue_name.as_str());
            if let Some((lq, cq)) = by_queue.get(&queue) {
                *finished.entry(cq).or_default() += 1;
                *lq_finished.entry(lq).or_default() += 1;
            }
        }
        let mut reserved_not_running: BTreeMap<(String, String), u64> = BTreeMap::new();
        for cq in state.config.cluster_queues.keys() {
            for cluster in state.clusters.keys() {
                reserved_not_running.insert((cq.clone(), cluster.clone()), 0);
            }
        }
        for a in snapshot.admitted() {
            let Some(record) = ledger.workload(a.pending.id) else {
                continue;
            };
            let Some(r) = &record.reservation else {
                continue;
            };
            if record.state == WorkloadState::Admitted
                && now.since(r.admitted_at) >= not_running_after
            {
                *reserved_not_running
                    .entry((r.cluster_queue.clone(), r.assignment.cluster.clone()))
                    .or_default() += 1;
            }
        }

        let mut cluster_queues = Vec::new();
        for (name, cq) in &state.config.cluster_queues {
            let Some(node) = tree.cluster_queue(name) else {
                continue;
            };
            let mut quota = Vec::new();
            for (fr, cell) in tree.cells.iter().enumerate() {
                let Some(limits) = tree.nodes[node].limits.get(fr).and_then(|l| l.as_ref()) else {
                    continue;
                };
                quota.push(QuotaSample {
                    flavor: cell.flavor.clone(),
                    resource: cell.resource.clone(),
                    nominal: units(limits.nominal),
                    usage: units(usage.get(node, fr)),
                    borrowing_limit: limits.borrowing_limit.map(units),
                    lending_limit: limits.lending_limit.map(units),
                });
            }
            let counts = census.cluster_queue(name);
            let stopped = cq.spec.stop_policy != StopPolicy::None;
            cluster_queues.push(ClusterQueueSample {
                name: name.clone(),
                cohort: cq.spec.cohort.clone().unwrap_or_default(),
                root_cohort: tree.nodes[node]
                    .parent
                    .map(|p| root_of(tree, p))
                    .unwrap_or_default(),
                status: if stopped { "pending" } else { "active" },
                pending_active: counts.pending_active,
                pending_inadmissible: counts.pending_inadmissible,
                admitted_active: counts.admitted,
                finished: finished.get(name.as_str()).copied().unwrap_or(0),
                pending_resources: census
                    .pending_requests
                    .get(name.as_str())
                    .map(|r| r.iter().map(|(k, v)| (k.clone(), units(*v))).collect())
                    .unwrap_or_default(),
                weighted_share: kueue_share(fair::drs(tree, usage, node, cq.fair_sharing_weight())),
                quota,
            });
        }

        let local_queues = state
            .config
            .local_queues
            .iter()
            .map(|(key, lq)| {
                let stopped = lq.spec.stop_policy != StopPolicy::None
                    || state
                        .config
                        .cluster_queues
                        .get(&lq.spec.cluster_queue)
                        .is_none_or(|cq| cq.spec.stop_policy != StopPolicy::None);
                let counts = census.local_queue(key);
                LocalQueueSample {
                    namespace: lq.namespace.clone(),
                    name: lq.name.clone(),
                    active: if stopped { "False" } else { "True" },
                    pending_active: counts.pending_active,
                    pending_inadmissible: counts.pending_inadmissible,
                    admitted_active: counts.admitted,
                    finished: lq_finished.get(key.as_str()).copied().unwrap_or(0),
                    usage: census
                        .local_queue_usage
                        .get(key.as_str())
                        .map(|u| u.iter().map(|(k, v)| (k.clone(), units(*v))).collect())
                        .unwrap_or_default(),
                }
            })
            .collect();

        let admissions = |cq: &str| {
            ledger
                .counters()
                .admission_wait
                .get(cq)
                .map_or(0, |h| h.count)
        };
        let cohorts = tree
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Cohort)
            .map(|(id, n)| {
                // A root has nobody to borrow from: drs() gives it 0.
                let share = fair::drs(tree, usage, id, fair::weight(&state.config, tree, id));
                let queues = tree.cluster_queues_under(id);
                let subtree = tree
                    .cells
                    .iter()
                    .enumerate()
                    .filter(|(fr, _)| {
                        n.subtree_quota[*fr] > 0
                            || queues.iter().any(|&q| tree.nodes[q].limits[*fr].is_some())
                    })
                    .map(|(fr, cell)| {
                        let reserved = queues
                            .iter()
                            .fold(0u64, |sum, &q| sum.saturating_add(usage.get(q, fr)));
                        (
                            cell.flavor.clone(),
                            cell.resource.clone(),
                            units(n.subtree_quota[fr]),
                            units(reserved),
                        )
                    })
                    .collect();
                let names = queues.iter().map(|&q| tree.nodes[q].name.as_str());
                CohortSample {
                    name: n.name.clone(),
                    parent: n
                        .parent
                        .map(|p| tree.nodes[p].name.clone())
                        .unwrap_or_default(),
                    root: root_of(tree, id),
                    weighted_share: kueue_share(share),
                    subtree,
                    admitted_active: names
                        .clone()
                        .map(|q| census.cluster_queue(q).admitted)
                        .sum(),
                    admitted_total: names.map(admissions).sum(),
                }
            })
            .collect();

        let table = snapshot.cluster_table();
        let clusters = state
            .clusters
            .values()
            .map(|record| {
                let index = table.index_of(&record.cluster.name);
                let mut resources = Vec::new();
                for (flavor, list) in &record.cluster.capacity {
                    for (resource, qty) in list {
                        let allocated = match (index, tree.cell_of(flavor, resource)) {
                            (Some(c), Some(fr)) => snapshot.cluster_usage().get(c, fr),
                            _ => 0,
                        };
                        resources.push((
                            flavor.clone(),
                            resource.clone(),
                            units(qty.milli()),
                            units(allocated),
                        ));
                    }
                }
                ClusterSample {
                    name: record.cluster.name.clone(),
                    resources,
                }
            })
            .collect();

        LedgerSample {
            cluster_queues,
            local_queues,
            cohorts,
            clusters,
            reserved_not_running,
            counters: ledger.counters().clone(),
        }
    }

    fn encode(&self, e: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let cqs = &self.cluster_queues;
        gauges(
            e,
            "kueue_pending_workloads",
            "The number of pending workloads, per cluster_queue and status: active (not examined yet, or about to be admitted) or inadmissible (the last admission cycle found a reason that holds it back)",
            cqs.iter().flat_map(|q| {
                [
                    (
                        vec![("cluster_queue", q.name.as_str()), ("status", "active")],
                        q.pending_active as f64,
                    ),
                    (
                        vec![("cluster_queue", q.name.as_str()), ("status", "inadmissible")],
                        q.pending_inadmissible as f64,
                    ),
                ]
            }),
        )?;
        gauges(
            e,
            "kueue_admitted_active_workloads",
            "The number of admitted workloads that hold quota (admitted or running, not finished), per cluster_queue",
            cqs.iter()
                .map(|q| (vec![("cluster_queue", q.name.as_str())], q.admitted_active as f64)),
        )?;
        let wait = &self.counters.admission_wait;
        let mut me = e.encode_descriptor(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per cluster_queue (leader stamps, replicated)",
            None,
            MetricType::Histogram,
        )?;
        for (cq, h) in wait {
            let labels = [("cluster_queue", cq.as_str())];
            let mut m = me.encode_family(&labels)?;
            m.encode_histogram::<NoLabelSet>(
                h.sum_ms as f64 / 1000.0,
                h.count,
                &h.seconds_buckets(),
                None,
            )?;
        }
        counters(
            e,
            "kueue_evicted_workloads",
            "The number of evicted workloads per cluster_queue and reason: Preempted, PodsReadyTimeout, ClusterLost (lease expired, fenced), NotRunningOnCluster (gone after its agent reconnected)",
            self.counters.evictions.iter().flat_map(|(cq, reasons)| {
                reasons.iter().map(move |(reason, n)| {
                    (
                        vec![("cluster_queue", cq.as_str()), ("reason", reason.as_str())],
                        *n,
                    )
                })
            }),
        )?;
        counters(
            e,
            "kueue_preempted_workloads",
            "The number of preempted workloads per preempting_cluster_queue and reason: InClusterQueue, InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing",
            self.counters.preemptions_by.iter().flat_map(|(cq, reasons)| {
                reasons.iter().map(move |(reason, n)| {
                    (
                        vec![
                            ("preempting_cluster_queue", cq.as_str()),
                            ("reason", reason.as_str()),
                        ],
                        *n,
                    )
                })
            }),
        )?;
        counters(
            e,
            "fleetq_preemptions_repeated",
            "Preemptions of a workload that had been preempted before (churn): a preemption livelock shows as this climbing with kueue_preempted_workloads_total",
            std::iter::once((Vec::new(), self.counters.preemptions_repeated)),
        )?;
        let quota_labels = |q: &'_ ClusterQueueSample| {
            let (name, cohort) = (q.name.clone(), q.cohort.clone());
            move |r: &QuotaSample| {
                vec![
                    ("cohort", cohort.clone()),
                    ("cluster_queue", name.clone()),
                    ("flavor", r.flavor.clone()),
                    ("resource", r.resource.clone()),
                ]
            }
        };
        let per_quota = |e: &mut DescriptorEncoder,
                         name: &str,
                         help: &str,
                         value: &dyn Fn(&QuotaSample) -> Option<f64>| {
            gauges_owned(
                e,
                name,
                help,
                cqs.iter().flat_map(|q| {
                    let labels = quota_labels(q);
                    q.quota
                        .iter()
                        .filter_map(move |r| value(r).map(|v| (labels(r), v)))
                        .collect::<Vec<_>>()
                }),
            )
        };
        per_quota(
            e,
            "kueue_cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors (equal to the usage: fleetq has no admission checks)",
            &|r| Some(r.usage),
        )?;
        per_quota(
            e,
            "kueue_cluster_queue_resource_usage",
            "Reports the cluster_queue's total resource usage within all the flavors (quota held by admitted and running workloads, stopping ones included)",
            &|r| Some(r.usage),
        )?;
        per_quota(
            e,
            "kueue_cluster_queue_nominal_quota",
            "Reports the cluster_queue's resource nominal quota within all the flavors",
            &|r| Some(r.nominal),
        )?;
        per_quota(
            e,
            "kueue_cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors (only where one is set)",
            &|r| r.borrowing_limit,
        )?;
        per_quota(
            e,
            "kueue_cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors (only where one is set)",
            &|r| r.lending_limit,
        )?;
        gauges(
            e,
            "kueue_cluster_queue_weighted_share",
            "The maximum over (flavor, resource) of usage above the cluster_queue's quota per mille of what its cohort tree can lend, divided by its fair-sharing weight; 0 when not borrowing, 9223372036854775807 when borrowing with weight 0",
            cqs.iter()
                .map(|q| (vec![("cluster_queue", q.name.as_str())], q.weighted_share)),
        )?;
        gauges(
            e,
            "kueue_cohort_weighted_share",
            "The maximum over (flavor, resource) of usage above the cohort's own subtree quota per mille of what its cohort tree can lend, divided by its fair-sharing weight; 0 for root cohorts",
            self.cohorts
                .iter()
                .map(|c| (vec![("cohort", c.name.as_str())], c.weighted_share)),
        )?;
        self.encode_kueue_more(e)?;
        gauges(
            e,
            "fleetq_cluster_capacity",
            "Physical capacity the cluster's agent reported, per flavor and resource",
            self.clusters.iter().flat_map(|c| {
                c.resources.iter().map(move |(f, r, cap, _)| {
                    (
                        vec![
                            ("cluster", c.name.as_str()),
                            ("flavor", f.as_str()),
                            ("resource", r.as_str()),
                        ],
                        *cap,
                    )
                })
            }),
        )?;
        gauges(
            e,
            "fleetq_cluster_allocated",
            "Capacity assigned to admitted workloads on the cluster, per flavor and resource",
            self.clusters.iter().flat_map(|c| {
                c.resources.iter().map(move |(f, r, _, used)| {
                    (
                        vec![
                            ("cluster", c.name.as_str()),
                            ("flavor", f.as_str()),
                            ("resource", r.as_str()),
                        ],
                        *used,
                    )
                })
            }),
        )?;
        counters(
            e,
            "fleetq_admit_batch_rejected_decisions",
            "Admission and preemption decisions of AdmitBatch commands that apply() refused, per reason (StaleBatch, NoLongerFits, NotPending, ClusterUnavailable, VictimAlreadyStopping, ...)",
            self.counters
                .rejected_decisions
                .iter()
                .map(|(reason, n)| (vec![("reason", reason.as_str())], *n)),
        )?;
        counters(
            e,
            "fleetq_finished_workloads_removed",
            "Finished workloads removed from the ledger once their retention (--finished-retention) passed",
            std::iter::once((Vec::new(), self.counters.finished_removed)),
        )?;
        gauges(
            e,
            "fleetq_quota_reserved_not_running",
            "Quota-leak canary: reservations held on the cluster for longer than the threshold (--reserved-not-running-after) that its agent has not reported running",
            self.reserved_not_running.iter().map(|((cq, cluster), n)| {
                (
                    vec![("cluster_queue", cq.as_str()), ("cluster", cluster.as_str())],
                    *n as f64,
                )
            }),
        )
    }
}

impl LedgerSample {
    /// Kueue's series beyond the first set: queue status and hierarchy,
    /// admission counters, LocalQueue and cohort subtree series.
    fn encode_kueue_more(&self, e: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
        let cqs = &self.cluster_queues;
        let lqs = &self.local_queues;
        let wait = &self.counters.admission_wait;
        gauges(
            e,
            "kueue_cluster_queue_status",
            "Reports 'cluster_queue' with its 'status' (pending while its stopPolicy holds it, else active; never terminating): 1 for the one status it has, 0 for the others",
            cqs.iter().flat_map(|q| {
                ["pending", "active", "terminating"].map(|status| {
                    (
                        vec![("cluster_queue", q.name.as_str()), ("status", status)],
                        if status == q.status { 1.0 } else { 0.0 },
                    )
                })
            }),
        )?;
        gauges(
            e,
            "kueue_cluster_queue_info",
            "Reports ClusterQueue hierarchy information: 1, labelled by its cohort and the root of its cohort tree (empty without a cohort)",
            cqs.iter().map(|q| {
                (
                    vec![
                        ("cluster_queue", q.name.as_str()),
                        ("parent_cohort", q.cohort.as_str()),
                        ("root_cohort", q.root_cohort.as_str()),
                    ],
                    1.0,
                )
            }),
        )?;
        gauges(
            e,
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'cluster_queue' (equal to kueue_admitted_active_workloads: fleetq has no admission checks)",
            cqs.iter()
                .map(|q| (vec![("cluster_queue", q.name.as_str())], q.admitted_active as f64)),
        )?;
        gauges(
            e,
            "kueue_finished_workloads",
            "The number of finished workloads per 'cluster_queue' that the ledger still keeps (until --finished-retention)",
            cqs.iter()
                .map(|q| (vec![("cluster_queue", q.name.as_str())], q.finished as f64)),
        )?;
        gauges_owned(
            e,
            "kueue_cluster_queue_resource_pending",
            "Reports the cluster_queue's total pending resource requests (every pod of its pending workloads, before flavors are assigned)",
            cqs.iter().flat_map(|q| {
                q.pending_resources.iter().map(|(resource, v)| {
                    (
                        vec![
                            ("cluster_queue", q.name.clone()),
                            ("resource", resource.clone()),
                        ],
                        *v,
                    )
                })
            }),
        )?;
        counters(
            e,
            "kueue_admitted_workloads",
            "The total number of admitted workloads per 'cluster_queue'",
            wait.iter()
                .map(|(cq, h)| (vec![("cluster_queue", cq.as_str())], h.count)),
        )?;
        counters(
            e,
            "kueue_quota_reserved_workloads",
            "The total number of quota reserved workloads per 'cluster_queue' (equal to kueue_admitted_workloads_total: fleetq has no admission checks)",
            wait.iter()
                .map(|(cq, h)| (vec![("cluster_queue", cq.as_str())], h.count)),
        )?;
        let mut me = e.encode_descriptor(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota reservation, per 'cluster_queue' (kueue_admission_wait_time_seconds: a reservation is an admission)",
            None,
            MetricType::Histogram,
        )?;
        for (cq, h) in wait {
            let labels = [("cluster_queue", cq.as_str())];
            let mut m = me.encode_family(&labels)?;
            m.encode_histogram::<NoLabelSet>(
                h.sum_ms as f64 / 1000.0,
                h.count,
                &h.seconds_buckets(),
                None,
            )?;
        }
        let mut me = e.encode_descriptor(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per 'cluster_queue': 0 for every admission, fleetq has no admission checks",
            None,
            MetricType::Histogram,
        )?;
        for (cq, h) in wait {
            let labels = [("cluster_queue", cq.as_str())];
            let mut m = me.encode_family(&labels)?;
            // Every observation is 0 s: in the first bucket.
            let buckets: Vec<(f64, u64)> = h
                .seconds_buckets()
                .iter()
                .enumerate()
                .map(|(i, (bound, _))| (*bound, if i == 0 { h.count } else { 0 }))
                .collect();
            m.encode_histogram::<NoLabelSet>(0.0, h.count, &buckets, None)?;
        }

        let lq_labels = |q: &LocalQueueSample| {
            vec![("name", q.name.clone()), ("namespace", q.namespace.clone())]
        };
        gauges_owned(
            e,
            "kueue_local_queue_status",
            "Reports 'localQueue' with its 'active' status (False while it or its ClusterQueue is stopped, else True; never Unknown): 1 for the one status it has, 0 for the others",
            lqs.iter().flat_map(|q| {
                ["True", "False", "Unknown"].map(|active| {
                    let mut labels = lq_labels(q);
                    labels.push(("active", active.to_string()));
                    (labels, if active == q.active { 1.0 } else { 0.0 })
                })
            }),
        )?;
        gauges_owned(
            e,
            "kueue_local_queue_pending_workloads",
            "The number of pending workloads, per 'local_queue' and 'status': active or inadmissible, as for kueue_pending_workloads",
            lqs.iter().flat_map(|q| {
                [
                    ("active", q.pending_active),
                    ("inadmissible", q.pending_inadmissible),
                ]
                .map(|(status, n)| {
                    let mut labels = lq_labels(q);
                    labels.push(("status", status.to_string()));
                    (labels, n as f64)
                })
            }),
        )?;
        for (name, help) in [
            (
                "kueue_local_queue_admitted_active_workloads",
                "The number of admitted Workloads that are active, per 'localQueue'",
            ),
            (
                "kueue_local_queue_reserving_active_workloads",
                "The number of Workloads that are reserving quota, per 'localQueue' (equal to the admitted ones: fleetq has no admission checks)",
            ),
        ] {
            gauges_owned(
                e,
                name,
                help,
                lqs.iter()
                    .map(|q| (lq_labels(q), q.admitted_active as f64)),
            )?;
        }
        gauges_owned(
            e,
            "kueue_local_queue_finished_workloads",
            "The number of finished workloads, per 'local_queue', that the ledger still keeps (until --finished-retention)",
            lqs.iter().map(|q| (lq_labels(q), q.finished as f64)),
        )?;
        for (name, help) in [
            (
                "kueue_local_queue_resource_reservation",
                "Reports the localQueue's total resource reservation within all the flavors (equal to the usage: fleetq has no admission checks)",
            ),
            (
                "kueue_local_queue_resource_usage",
                "Reports the localQueue's total resource usage within all the flavors",
            ),
        ] {
            gauges_owned(
                e,
                name,
                help,
                lqs.iter().flat_map(|q| {
                    q.usage.iter().map(move |((flavor, resource), v)| {
                        let mut labels = lq_labels(q);
                        labels.push(("flavor", flavor.clone()));
                        labels.push(("resource", resource.clone()));
                        (labels, *v)
                    })
                }),
            )?;
        }

        let cohorts = &self.cohorts;
        gauges(
            e,
            "kueue_cohort_info",
            "Reports Cohort hierarchy information: 1, labelled by its parent (empty for a root) and the root of its tree",
            cohorts.iter().map(|c| {
                (
                    vec![
                        ("cohort", c.name.as_str()),
                        ("parent_cohort", c.parent.as_str()),
                        ("root_cohort", c.root.as_str()),
                    ],
                    1.0,
                )
            }),
        )?;
        for (name, help, pick) in [
            (
                "kueue_cohort_subtree_quota",
                "Reports the cohort's nominal quota aggregated within the cohort's subtree, per resource and flavor",
                (|(_, _, quota, _): &(String, String, f64, f64)| *quota)
                    as fn(&(String, String, f64, f64)) -> f64,
            ),
            (
                "kueue_cohort_subtree_resource_reservations",
                "Reports the cohort's resource reservations aggregated within the cohort's subtree, per resource and flavor",
                |(_, _, _, reserved): &(String, String, f64, f64)| *reserved,
            ),
        ] {
            gauges_owned(
                e,
                name,
                help,
                cohorts.iter().flat_map(|c| {
                    c.subtree.iter().map(move |cell| {
                        (
                            vec![
                                ("cohort", c.name.clone()),
                                ("flavor", cell.0.clone()),
                                ("resource", cell.1.clone()),
                            ],
                            pick(cell),
                        )
                    })
                }),
            )?;
        }
        gauges(
            e,
            "kueue_cohort_subtree_admitted_active_workloads",
            "The number of admitted Workloads that are active, per cohort's subtree",
            cohorts
                .iter()
                .map(|c| (vec![("cohort", c.name.as_str())], c.admitted_active as f64)),
        )?;
        counters(
            e,
            "kueue_cohort_subtree_admitted_workloads",
            "The total number of admitted workloads per cohort's subtree (the sum over the ClusterQueues now in it)",
            cohorts
                .iter()
                .map(|c| (vec![("cohort", c.name.as_str())], c.admitted_total)),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use fleetq_ledger::{
        AdmitBatch, Command, CycleId, LeasePolicy, Phase, Request, StatusReport, Submission,
    };
    use fleetq_model::kueue::import_manifests;
    use fleetq_model::workload::{PodSet, WorkloadSpec};
    use fleetq_model::{Cluster, ClusterState, Quantity};
    use fleetq_scheduler::schedule;
    use prometheus_client::encoding::prometheus_text;

    use super::*;

    const GPU: &str = "nvidia.com/gpu";

    /// team-a and team-b (8 GPUs each, team-b with a borrowing limit) in
    /// cohort research.
    const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
        borrowingLimit: 2
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: team-a
spec:
  clusterQueue: team-a
"#;

    struct Harness {
        ledger: Ledger,
        now: u64,
        seq: u64,
    }

    impl Harness {
        fn new() -> Harness {
            let mut h = Harness {
                ledger: Ledger::default(),
                now: 1_000_000,
                seq: 0,
            };
            let objects = import_manifests(CONFIG)
                .unwrap_or_else(|e| panic!("{e:?}"))
                .into_iter()
                .map(|d| d.object)
                .collect();
            h.apply(Command::ApplyObjects { objects });
            let capacity = BTreeMap::from([(
                "h100-80gb".to_string(),
                BTreeMap::from([(GPU.to_string(), Quantity::units(16))]),
            )]);
            h.apply(Command::RegisterCluster {
                cluster: Cluster {
                    nodes: Vec::new(),
                    name: "east".into(),
                    labels: BTreeMap::new(),
                    capacity,
                    state: ClusterState::Ready,
                },
                lease_policy: LeasePolicy::Fence,
            });
            h
        }

        fn apply(&mut self, command: Command) {
            self.now += 1_000;
            let r = self.ledger.apply(&Request {
                at: Timestamp(self.now),
                command,
            });
            assert!(r.is_ok(), "{r:?}");
        }

        fn submit(&mut self, name: &str, gpus: u64) {
            let workload = fleetq_model::Workload {
                namespace: "default".into(),
                name: name.into(),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: "team-a".into(),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
                        topology_request: None,
                    }],
                    ..WorkloadSpec::default()
                },
            };
            self.apply(Command::SubmitWorkloads {
                submissions: vec![Submission {
                    request_id: None,
                    workload: workload.into(),
                }],
                max_pending_per_local_queue: None,
                admit: Vec::new(),
            });
        }

        fn cycle(&mut self) {
            let d = schedule(
                self.ledger.snapshot(),
                Timestamp(self.now),
                self.ledger.scheduler_config(),
            );
            self.seq += 1;
            self.apply(Command::AdmitBatch(AdmitBatch {
                cycle: CycleId {
                    term: 0,
                    seq: self.seq,
                },
                admissions: d.admissions,
                preemptions: d.preemptions,
                reasons: d.pending.into_iter().collect(),
                queue_reasons: d.queue_reasons.into_iter().collect(),
            }));
        }

        fn running(&mut self, name: &str) {
            self.report(name, Phase::Running);
        }

        fn succeeded(&mut self, name: &str) {
            self.report(name, Phase::Succeeded);
        }

        fn report(&mut self, name: &str, phase: Phase) {
            let r = self
                .ledger
                .workload_by_name("default", name)
                .and_then(|w| w.reservation.clone().map(|r| (w.id, r)));
            let Some((id, r)) = r else {
                panic!("{name} holds no reservation");
            };
            self.apply(Command::ReportStatus {
                reports: vec![StatusReport {
                    cluster: r.assignment.cluster,
                    workload: id,
                    epoch: r.epoch,
                    phase,
                    message: String::new(),
                }],
            });
        }
    }

    /// a (4) runs, b (8) is admitted by borrowing 4 from team-b and never
    /// reported running, c (8) waits for quota, d (1) was submitted after
    /// the last cycle.
    fn busy() -> Harness {
        let mut h = Harness::new();
        h.submit("a", 4);
        h.submit("b", 8);
        h.cycle();
        h.running("a");
        h.submit("c", 8);
        h.cycle();
        h.submit("d", 1);
        h
    }

    fn cq<'a>(s: &'a LedgerSample, name: &str) -> &'a ClusterQueueSample {
        s.cluster_queues
            .iter()
            .find(|q| q.name == name)
            .unwrap_or_else(|| panic!("no sample for {name}"))
    }

    #[test]
    fn the_dashboard_counts_queues_as_the_scrape_does() {
        let h = busy();
        let sample = LedgerSample::take(&h.ledger, Timestamp(h.now), Duration::from_secs(60));
        let overview = crate::http::ui::LedgerOverview::read(&h.ledger);
        let mut compared = 0;
        for view in &overview.cluster_queues {
            let s = cq(&sample, &view.name);
            assert_eq!(
                (view.pending, view.admitted),
                (s.pending_active + s.pending_inadmissible, s.admitted_active),
                "{}",
                view.name
            );
            compared += view.pending + view.admitted;
        }
        // a and b admitted, c waiting for team-a's quota, d not yet seen.
        assert_eq!(compared, 4);
        let team_a = cq(&sample, "team-a");
        assert_eq!(
            (
                team_a.pending_active,
                team_a.pending_inadmissible,
                team_a.admitted_active
            ),
            (1, 1, 2)
        );
    }

    #[test]
    fn the_sample_reads_queues_quota_clusters_and_the_canary_from_the_ledger() {
        let h = busy();
        let admitted_b = h
            .ledger
            .workload_by_name("default", "b")
            .and_then(|w| w.reservation.as_ref())
            .map(|r| r.admitted_at)
            .expect("b is admitted");
        let later = admitted_b.saturating_add(Duration::from_secs(61));
        let s = LedgerSample::take(&h.ledger, later, Duration::from_secs(60));

        let a = cq(&s, "team-a");
        assert_eq!(a.cohort, "research");
        assert_eq!((a.pending_active, a.pending_inadmissible), (1, 1));
        assert_eq!(a.admitted_active, 2);
        assert_eq!(a.quota.len(), 1);
        assert_eq!(a.quota[0].nominal, 8.0);
        assert_eq!(a.quota[0].usage, 12.0);
        assert_eq!(a.quota[0].borrowing_limit, None);
        // Borrows 4 of the 16 the cohort holds: 250 per mille, weight 1.
        assert_eq!(a.weighted_share, 250.0);
        let b = cq(&s, "team-b");
        assert_eq!((b.pending_active, b.pending_inadmissible), (0, 0));
        assert_eq!(b.admitted_active, 0);
        assert_eq!(b.quota[0].borrowing_limit, Some(2.0));
        assert_eq!(b.weighted_share, 0.0);
        assert_eq!(s.cohorts.len(), 1);
        assert_eq!(s.cohorts[0].name, "research");
        assert_eq!(s.cohorts[0].weighted_share, 0.0);

        assert_eq!(
            s.clusters,
            vec![ClusterSample {
                name: "east".into(),
                resources: vec![("h100-80gb".into(), GPU.into(), 16.0, 12.0)],
            }]
        );
        // b has not been reported running for over a minute; a runs.
        let key = |cq: &str| (cq.to_string(), "east".to_string());
        assert_eq!(s.reserved_not_running[&key("team-a")], 1);
        assert_eq!(s.reserved_not_running[&key("team-b")], 0);
        let s = LedgerSample::take(&h.ledger, later, Duration::from_secs(120));
        assert_eq!(s.reserved_not_running[&key("team-a")], 0);

        // The wait-time histogram saw a and b.
        assert_eq!(s.counters.admission_wait["team-a"].count, 2);
    }

    #[derive(Debug)]
    struct Fixed(RaftSample, LedgerSample);

    impl Collector for Fixed {
        fn encode(&self, mut e: DescriptorEncoder) -> Result<(), fmt::Error> {
            self.0.encode(&mut e)?;
            self.1.encode(&mut e)
        }
    }

    fn render(raft: RaftSample, ledger: LedgerSample) -> String {
        let own = ServerMetrics::default();
        own.admission_attempt(true, Duration::from_millis(3));
        own.admission_attempt(false, Duration::from_millis(30));
        let mut registry = Registry::default();
        own.register(&mut registry);
        registry.register_collector(Box::new(Fixed(raft, ledger)));
        let mut text = String::new();
        prometheus_text::encode(&mut text, &registry).expect("encodes");
        text
    }

    fn has(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn rendering_uses_kueue_names_labels_and_buckets() {
        let h = busy();
        let s = LedgerSample::take(&h.ledger, Timestamp(h.now), Duration::from_secs(60));
        let raft = RaftSample {
            term: 3,
            leader: 2,
            is_leader: true,
            last_log_index: 40,
            commit_index: 39,
            applied_index: 38,
            snapshot_index: 20,
        };
        let text = render(raft, s);
        for line in [
            r#"kueue_pending_workloads{cluster_queue="team-a",status="active"} 1.0"#,
            r#"kueue_pending_workloads{cluster_queue="team-a",status="inadmissible"} 1.0"#,
            r#"kueue_pending_workloads{cluster_queue="team-b",status="active"} 0.0"#,
            r#"kueue_admitted_active_workloads{cluster_queue="team-a"} 2.0"#,
            r#"kueue_cluster_queue_nominal_quota{cohort="research",cluster_queue="team-a",flavor="h100-80gb",resource="nvidia.com/gpu"} 8.0"#,
            r#"kueue_cluster_queue_resource_usage{cohort="research",cluster_queue="team-a",flavor="h100-80gb",resource="nvidia.com/gpu"} 12.0"#,
            r#"kueue_cluster_queue_resource_reservation{cohort="research",cluster_queue="team-a",flavor="h100-80gb",resource="nvidia.com/gpu"} 12.0"#,
            r#"kueue_cluster_queue_borrowing_limit{cohort="research",cluster_queue="team-b",flavor="h100-80gb",resource="nvidia.com/gpu"} 2.0"#,
            r#"kueue_cluster_queue_weighted_share{cluster_queue="team-a"} 250.0"#,
            r#"kueue_cohort_weighted_share{cohort="research"} 0.0"#,
            r#"kueue_admission_wait_time_seconds_bucket{cluster_queue="team-a",le="1"} 1"#,
            r#"kueue_admission_wait_time_seconds_bucket{cluster_queue="team-a",le="2.5"} 2"#,
            r#"kueue_admission_wait_time_seconds_bucket{cluster_queue="team-a",le="+Inf"} 2"#,
            r#"kueue_admission_wait_time_seconds_count{cluster_queue="team-a"} 2"#,
            r#"kueue_admission_attempts_total{result="success"} 1"#,
            r#"kueue_admission_attempts_total{result="inadmissible"} 1"#,
            r#"kueue_admission_attempt_duration_seconds_bucket{result="success",le="0.005"} 1"#,
            r#"kueue_admission_attempt_duration_seconds_bucket{result="inadmissible",le="0.025"} 0"#,
            r#"kueue_admission_attempt_duration_seconds_bucket{result="inadmissible",le="0.05"} 1"#,
            r#"fleetq_cluster_capacity{cluster="east",flavor="h100-80gb",resource="nvidia.com/gpu"} 16.0"#,
            r#"fleetq_cluster_allocated{cluster="east",flavor="h100-80gb",resource="nvidia.com/gpu"} 12.0"#,
            r#"fleetq_quota_reserved_not_running{cluster_queue="team-a",cluster="east"} 0.0"#,
            "fleetq_raft_term 3.0",
            "fleetq_raft_leader 2.0",
            "fleetq_raft_is_leader 1.0",
            "fleetq_raft_commit_index 39.0",
            "fleetq_raft_applied_index 38.0",
            "fleetq_raft_snapshot_index 20.0",
            "# TYPE kueue_evicted_workloads_total counter",
            "# TYPE kueue_admission_wait_time_seconds histogram",
        ] {
            assert!(has(&text, line), "missing {line:?} in\n{text}");
        }
        // No borrowing limit on team-a: no series rather than a false 0.
        assert!(
            !text.contains(
                r#"kueue_cluster_queue_borrowing_limit{cohort="research",cluster_queue="team-a""#
            ),
            "{text}"
        );
    }

    #[test]
    fn counters_render_with_their_reasons() {
        let mut s = LedgerSample::default();
        s.counters
            .evictions
            .entry("team-a".into())
            .or_default()
            .insert("Preempted".into(), 3);
        s.counters
            .preemptions_by
            .entry("team-b".into())
            .or_default()
            .insert("InCohortReclamation".into(), 2);
        s.counters
            .rejected_decisions
            .insert("NoLongerFits".into(), 5);
        s.counters.finished_removed = 7;
        let text = render(RaftSample::default(), s);
        for line in [
            r#"kueue_evicted_workloads_total{cluster_queue="team-a",reason="Preempted"} 3"#,
            r#"kueue_preempted_workloads_total{preempting_cluster_queue="team-b",reason="InCohortReclamation"} 2"#,
            r#"fleetq_admit_batch_rejected_decisions_total{reason="NoLongerFits"} 5"#,
            "fleetq_finished_workloads_removed_total 7",
        ] {
            assert!(has(&text, line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn a_borrowing_queue_of_weight_zero_reports_kueues_maximum() {
        let drs = |unweighted, weight| fair::Drs {
            unweighted,
            weight,
            borrowing: unweighted > 0.0,
        };
        assert_eq!(kueue_share(drs(10.0, 0.0)), 9223372036854775807.0);
        assert_eq!(kueue_share(drs(250.0, 1.0)), 250.0);
        // Rounded up, as Kueue's roundedWeightedShare.
        assert_eq!(kueue_share(drs(250.0, 3.0)), 84.0);
    }

    /// Kueue's series added from its metrics.go (main): each with Kueue's
    /// name and labels, from the same busy ledger.
    #[test]
    fn kueues_queue_local_queue_and_cohort_series() {
        let h = busy();
        let s = LedgerSample::take(&h.ledger, Timestamp(h.now), Duration::from_secs(60));
        let text = render(RaftSample::default(), s);
        let a = r#"name="team-a",namespace="default""#;
        let cell = r#"flavor="h100-80gb",resource="nvidia.com/gpu""#;
        for line in [
            r#"kueue_cluster_queue_status{cluster_queue="team-a",status="pending"} 0.0"#.to_string(),
            r#"kueue_cluster_queue_status{cluster_queue="team-a",status="active"} 1.0"#.into(),
            r#"kueue_cluster_queue_status{cluster_queue="team-a",status="terminating"} 0.0"#.into(),
            r#"kueue_cluster_queue_info{cluster_queue="team-a",parent_cohort="research",root_cohort="research"} 1.0"#.into(),
            r#"kueue_reserving_active_workloads{cluster_queue="team-a"} 2.0"#.into(),
            r#"kueue_finished_workloads{cluster_queue="team-a"} 0.0"#.into(),
            // c (8) and d (1) wait.
            r#"kueue_cluster_queue_resource_pending{cluster_queue="team-a",resource="nvidia.com/gpu"} 9.0"#.into(),
            r#"kueue_admitted_workloads_total{cluster_queue="team-a"} 2"#.into(),
            r#"kueue_quota_reserved_workloads_total{cluster_queue="team-a"} 2"#.into(),
            r#"kueue_quota_reserved_wait_time_seconds_count{cluster_queue="team-a"} 2"#.into(),
            r#"kueue_quota_reserved_wait_time_seconds_bucket{cluster_queue="team-a",le="2.5"} 2"#.into(),
            r#"kueue_admission_checks_wait_time_seconds_bucket{cluster_queue="team-a",le="1"} 2"#.into(),
            r#"kueue_admission_checks_wait_time_seconds_sum{cluster_queue="team-a"} 0.0"#.into(),
            format!(r#"kueue_local_queue_status{{{a},active="True"}} 1.0"#),
            format!(r#"kueue_local_queue_status{{{a},active="False"}} 0.0"#),
            format!(r#"kueue_local_queue_status{{{a},active="Unknown"}} 0.0"#),
            format!(r#"kueue_local_queue_pending_workloads{{{a},status="active"}} 1.0"#),
            format!(r#"kueue_local_queue_pending_workloads{{{a},status="inadmissible"}} 1.0"#),
            format!(r#"kueue_local_queue_admitted_active_workloads{{{a}}} 2.0"#),
            format!(r#"kueue_local_queue_reserving_active_workloads{{{a}}} 2.0"#),
            format!(r#"kueue_local_queue_finished_workloads{{{a}}} 0.0"#),
            format!(r#"kueue_local_queue_resource_usage{{{a},{cell}}} 12.0"#),
            format!(r#"kueue_local_queue_resource_reservation{{{a},{cell}}} 12.0"#),
            r#"kueue_cohort_info{cohort="research",parent_cohort="",root_cohort="research"} 1.0"#.into(),
            format!(r#"kueue_cohort_subtree_quota{{cohort="research",{cell}}} 16.0"#),
            format!(r#"kueue_cohort_subtree_resource_reservations{{cohort="research",{cell}}} 12.0"#),
            r#"kueue_cohort_subtree_admitted_active_workloads{cohort="research"} 2.0"#.into(),
            r#"kueue_cohort_subtree_admitted_workloads_total{cohort="research"} 2"#.into(),
            "# TYPE kueue_admitted_workloads_total counter".into(),
            "# TYPE kueue_quota_reserved_wait_time_seconds histogram".into(),
        ] {
            assert!(has(&text, &line), "missing {line:?} in\n{text}");
        }
        let build = text
            .lines()
            .find(|l| l.starts_with("kueue_build_info{"))
            .unwrap_or_else(|| panic!("no kueue_build_info in\n{text}"));
        assert!(
            build.starts_with(&format!(
                r#"kueue_build_info{{git_version="v{}",git_commit=""#,
                env!("CARGO_PKG_VERSION")
            )) && build.contains(r#"compiler="rustc",platform=""#)
                && build.ends_with("} 1.0"),
            "{build}"
        );
    }

    #[test]
    fn finished_and_stopped_queues() {
        let mut h = Harness::new();
        h.submit("done", 2);
        h.cycle();
        h.running("done");
        h.succeeded("done");
        let held = CONFIG.replace(
            "  cohortName: research\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100-80gb\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: 8\n---",
            "  cohortName: research\n  stopPolicy: Hold\n  resourceGroups:\n  - coveredResources: [\"nvidia.com/gpu\"]\n    flavors:\n    - name: h100-80gb\n      resources:\n      - name: nvidia.com/gpu\n        nominalQuota: 8\n---",
        );
        assert_ne!(held, CONFIG);
        let objects = import_manifests(&held)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .map(|d| d.object)
            .collect();
        h.apply(Command::ApplyObjects { objects });
        let s = LedgerSample::take(&h.ledger, Timestamp(h.now), Duration::from_secs(60));
        let a = cq(&s, "team-a");
        assert_eq!((a.status, a.finished, a.admitted_active), ("pending", 1, 0));
        assert_eq!(cq(&s, "team-b").status, "active");
        assert_eq!(s.local_queues.len(), 1);
        assert_eq!(s.local_queues[0].active, "False");
        assert_eq!(s.local_queues[0].finished, 1);
        assert!(s.local_queues[0].usage.is_empty());
        let text = render(RaftSample::default(), s);
        for line in [
            r#"kueue_cluster_queue_status{cluster_queue="team-a",status="pending"} 1.0"#,
            r#"kueue_cluster_queue_status{cluster_queue="team-a",status="active"} 0.0"#,
            r#"kueue_finished_workloads{cluster_queue="team-a"} 1.0"#,
            r#"kueue_local_queue_finished_workloads{name="team-a",namespace="default"} 1.0"#,
            r#"kueue_local_queue_status{name="team-a",namespace="default",active="False"} 1.0"#,
            // Still counted after it finished.
            r#"kueue_admitted_workloads_total{cluster_queue="team-a"} 1"#,
        ] {
            assert!(has(&text, line), "missing {line:?} in\n{text}");
        }
    }
}
