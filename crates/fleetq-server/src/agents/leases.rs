//! Cluster leases on the leader (docs/architecture.md §7). Heartbeats do not go
//! through Raft: the leader remembers when it last heard from each agent.
//! A cluster whose agent has been silent for a full `lease_ttl` is expired
//! through the ledger (its workloads fenced and requeued, or kept charged
//! under policy `keep`). A new leader has heard nobody yet, so it first
//! waits one full `lease_ttl` from taking office before it expires anyone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::Command;
use fleetq_model::ClusterState;
use tokio::time::Instant;

use crate::leader::task::{LeaderTask, Office, Wakes};
use crate::raft::proposer::Proposer;

/// The label that marks clusters simulated inside the control plane; they
/// have no agent and hold no lease.
pub const SIMULATED_LABEL: &str = "fleetq.dev/simulated";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub ttl: Duration,
    /// How often agents send heartbeats.
    pub heartbeat: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
        }
    }
}

/// Last heartbeat per cluster, on this node (meaningful while leader), and
/// when a quorum last confirmed this node's leadership.
#[derive(Clone, Default)]
pub struct LeaseTable {
    beats: Arc<Mutex<Beats>>,
    confirmed: Arc<Mutex<Option<Instant>>>,
}

/// Beats and expiries share one lock: a heartbeat is either heard before
/// the leader decides to expire its cluster (and postpones the expiry) or
/// after (and is not acknowledged), never acknowledged by a leader that is
/// expiring the cluster anyway.
#[derive(Default)]
struct Beats {
    last: BTreeMap<String, Instant>,
    /// Clusters whose expiry this leader decided and has not finished
    /// proposing.
    expiring: std::collections::BTreeSet<String>,
}

impl LeaseTable {
    /// Whether a quorum confirmed this node as leader within `within`.
    /// Only then may it acknowledge heartbeats: a leader cut off from its
    /// peers must let its agents' leases run out (so they fence) before
    /// the new leader, which waits one lease from taking office, can give
    /// their quota away.
    pub fn leadership_fresh(&self, within: Duration) -> bool {
        self.confirmed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| t.elapsed() <= within)
    }

    fn confirm(&self, at: Option<Instant>) {
        *self.confirmed.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    fn lock_beats(&self) -> std::sync::MutexGuard<'_, Beats> {
        self.beats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a message from `cluster`'s agent. Returns whether its
    /// heartbeat may be acknowledged: not while this leader is expiring
    /// the cluster.
    pub fn beat(&self, cluster: &str) -> bool {
        let mut beats = self.lock_beats();
        beats.last.insert(cluster.to_string(), Instant::now());
        !beats.expiring.contains(cluster)
    }

    /// Decides, atomically with [`Self::beat`], whether `cluster` has been
    /// silent for `ttl` (counting from `since` at the earliest); if so,
    /// marks it expiring until [`Self::expiry_done`].
    fn claim_expiry(&self, cluster: &str, since: Instant, ttl: Duration) -> bool {
        let now = Instant::now();
        let mut beats = self.lock_beats();
        let last = beats.last.get(cluster).copied();
        let heard =
            if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::ExpireWithoutWaiting) {
                last.unwrap_or_else(|| now.checked_sub(ttl).unwrap_or(now))
            } else {
                last.map_or(since, |t| t.max(since))
            };
        let silent = now.duration_since(heard) >= ttl;
        if silent {
            beats.expiring.insert(cluster.to_string());
        }
        silent
    }

    fn expiry_done(&self, cluster: &str) {
        self.lock_beats().expiring.remove(cluster);
    }

    /// Time since the last heartbeat of every cluster heard from (on the
    /// leader; a follower's entries are from when it last led).
    pub fn ages(&self) -> Vec<(String, Duration)> {
        let now = Instant::now();
        self.lock_beats()
            .last
            .iter()
            .map(|(c, t)| (c.clone(), now.saturating_duration_since(*t)))
            .collect()
    }
}

/// How fresh the leadership confirmation behind a heartbeat ack must be:
/// a tenth of the lease, which with the agent's quarter-lease fencing
/// margin leaves time for a stop to complete.
pub fn ack_freshness(config: &LeaseConfig) -> Duration {
    config.ttl / 10
}

/// While this node leads, confirms its leadership with a quorum (a read
/// index round) every `ack_freshness / 3`, recording when each successful
/// round *started*: no new leader can have been elected before a quorum
/// answered it. A leader job ([`crate::leader::task`]).
pub struct LeadershipConfirmation {
    pub raft: fleetq_ledger::raft::Raft,
    pub table: LeaseTable,
    every: Duration,
}

impl LeadershipConfirmation {
    pub fn new(
        raft: fleetq_ledger::raft::Raft,
        table: LeaseTable,
        config: &LeaseConfig,
    ) -> LeadershipConfirmation {
        LeadershipConfirmation {
            raft,
            table,
            every: (ack_freshness(config) / 3).max(Duration::from_millis(10)),
        }
    }
}

impl LeaderTask for LeadershipConfirmation {
    fn wakes(&self) -> Wakes {
        Wakes {
            every: self.every,
            on_raft_change: false,
            on_ledger_change: None,
        }
    }

    async fn pass(&mut self, _office: &Office) {
        let started = Instant::now();
        let round = tokio::time::timeout(self.every * 3, self.raft.ensure_linearizable()).await;
        if let Ok(Ok(_)) = round {
            self.table.confirm(Some(started));
        }
    }

    fn out_of_office(&mut self) {
        self.table.confirm(None);
    }
}

/// Expires clusters whose lease ran out, while this node leads: on every
/// Raft change and every half heartbeat. A leader job
/// ([`crate::leader::task`]).
pub struct LeaseExpiry {
    pub handle: LedgerHandle,
    pub proposer: Arc<Proposer>,
    pub table: LeaseTable,
    pub config: LeaseConfig,
    /// Clusters seen Ready (or Draining) on the last pass. One that is
    /// Ready again after being expired has just re-registered: that is
    /// hearing from its agent, even when the registration reached this
    /// leader forwarded by another node (whose table got the agent's
    /// beats).
    live: BTreeSet<String>,
}

impl LeaseExpiry {
    pub fn new(
        handle: LedgerHandle,
        proposer: Arc<Proposer>,
        table: LeaseTable,
        config: LeaseConfig,
    ) -> LeaseExpiry {
        LeaseExpiry {
            handle,
            proposer,
            table,
            config,
            live: BTreeSet::new(),
        }
    }

    /// The clusters whose lease ran out, silence counted from the last
    /// beat or from taking office (`since`), whichever is later.
    fn expired(&mut self, since: Instant) -> Vec<String> {
        let sm = self.handle.read();
        let leased: Vec<&fleetq_ledger::record::ClusterRecord> = sm
            .ledger
            .state()
            .clusters
            .values()
            .filter(|c| !c.cluster.labels.contains_key(SIMULATED_LABEL))
            .filter(|c| {
                matches!(
                    c.cluster.state,
                    ClusterState::Ready | ClusterState::Draining
                )
            })
            .collect();
        let now_live: BTreeSet<String> = leased.iter().map(|c| c.cluster.name.clone()).collect();
        for back in now_live.difference(&self.live) {
            self.table.beat(back);
        }
        self.live = now_live;
        leased
            .into_iter()
            .filter(|c| {
                self.table
                    .claim_expiry(&c.cluster.name, since, self.config.ttl)
            })
            .map(|c| c.cluster.name.clone())
            .collect()
    }
}

impl LeaderTask for LeaseExpiry {
    fn wakes(&self) -> Wakes {
        Wakes {
            every: self.config.heartbeat / 2,
            on_raft_change: true,
            on_ledger_change: None,
        }
    }

    async fn pass(&mut self, office: &Office) {
        for cluster in self.expired(office.since) {
            tracing::warn!(cluster = %cluster, ttl = ?self.config.ttl, "lease expired");
            if let Err(e) = self
                .proposer
                .write_local(Command::ExpireCluster {
                    cluster: cluster.clone(),
                })
                .await
                .written()
            {
                tracing::debug!(error = %e, "expiry not applied");
            }
            self.table.expiry_done(&cluster);
        }
    }
}
