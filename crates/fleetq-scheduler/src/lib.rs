//! fleetq's admission scheduler: a pure function from a [`Snapshot`] and
//! the current (leader-stamped) time to [`Decisions`]. No I/O, no clock, no
//! randomness: the same input always gives the same decisions.
//!
//! ```
//! use fleetq_scheduler::{schedule, SchedulerConfig, Snapshot};
//! use fleetq_model::{Config, Timestamp};
//! let snapshot = Snapshot::new(Config::default(), &[]);
//! let decisions = schedule(&snapshot, Timestamp(0), &SchedulerConfig::default());
//! assert!(decisions.admissions.is_empty());
//! ```
//!
//! The ledger owns the snapshot and keeps it current with
//! [`Snapshot::add_pending`], [`Snapshot::admit`] (which re-validates a
//! decision against the state it is applied to), [`Snapshot::mark_evicting`]
//! and [`Snapshot::release`].
//!
//! # Choices the original design left open (recorded in docs/architecture.md §4 and §9)
//!
//! - **Devices.** A flavor some cluster reports is *tracked*: only clusters
//!   reporting it host it, limited to the amounts reported. A resource a
//!   cluster does not report for a flavor it hosts (say `cpu` beside GPUs) is
//!   not limited there; a flavor no cluster reports is quota-only.
//! - **Preemption.** Victims keep their quota until the agent confirms they
//!   stopped; the preemptor waits with reason `Preempting` and is admitted in
//!   a later cycle. Within a cycle the working state keeps victims charged
//!   and reserves the rest of the preemptor's need, so it only ever
//!   over-approximates real usage: every admission a cycle makes is one
//!   apply() accepts (a property test checks this).
//! - **Order of heads.** Kueue's: a head that fits its ClusterQueue's own
//!   quota goes before one that would borrow, then fair share, then
//!   priority, then age. Before any head, a cycle tries the *nominated*
//!   workloads, those whose preemptions were applied, so that what their
//!   victims free reaches them (kube-scheduler's nominated node; Kueue,
//!   which does not place on devices, needs no such rule). Without it a
//!   victim was re-admitted into its preemptor's room and preempted again,
//!   without end.
//! - **Many admissions per queue per cycle** (Kueue: one head per
//!   ClusterQueue), bounded by `max_admissions_per_cycle`; a BestEffortFIFO
//!   queue stops being scanned after `max_inadmissible_per_queue` misses, and
//!   the workloads a cycle did not reach get their queue's reason
//!   ([`Decisions::queue_reasons`]).
//! - **Flavors** are assigned per pod set and resource group, as in Kueue,
//!   but every pod set of a workload lands on the same cluster.
//! - **Fair sharing** orders heads by each ClusterQueue's dominant resource
//!   share against its root cohort's lendable quota (not Kueue's per-level
//!   tournament), and a cohort victim is allowed if any configured strategy
//!   allows it.
//! - **Admission fair sharing** decays LocalQueue usage with integer halvings
//!   plus linear interpolation inside a half-life, so every replica computes
//!   the same figure; usage is GPU-seconds.
//! - **GPU-second budgets** count `nvidia.com/gpu` only (MIG slices are not
//!   charged); a budgeted GPU workload must set `maximumExecutionTime`.

pub mod assign;
pub mod budget;
mod claims;
pub mod clusters;
mod cycle;
pub mod decision;
pub mod fair;
pub mod nodes;
pub mod placement;
pub mod policy;
mod preempt;
pub mod quota;
pub mod snapshot;
mod tournament;

use std::collections::BTreeMap;
use std::time::Duration;

use fleetq_model::Timestamp;
use serde::{Deserialize, Serialize};

pub use decision::{
    Admission, Assignment, CycleStats, Decisions, PendingReason, PodSetAssignment, Preemption,
    PreemptionReason, ReasonKind,
};
pub use snapshot::{AdmittedWorkload, PendingWorkload, Snapshot, SnapshotError};

/// Ledger-assigned workload id, increasing in submission order (a model
/// type: agents read it without the scheduler).
pub use fleetq_model::assignment::WorkloadId;

/// An ordered map that grows with the workloads. Persistent (shared,
/// copied on write by node): a copy of the ledger costs O(1), so what
/// reads all of it (a snapshot, the state hash, a scrape) copies it
/// under the state machine's lock and does its O(N) work after. It
/// serialises as the `BTreeMap` it replaced, so snapshots and state
/// hashes are unchanged.
pub type BigMap<K, V> = imbl::OrdMap<K, V>;

/// The ordered set of the same kind as [`BigMap`].
pub type BigSet<T> = imbl::OrdSet<T>;

/// Kueue's fair-sharing preemption strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FairSharingStrategy {
    /// Preempt if the preemptor's queue, with the workload, has a share no
    /// higher than the target's queue after losing the victim.
    LessThanOrEqualToFinalShare,
    /// Preempt if the preemptor's queue, with the workload, has a share
    /// strictly lower than the target's queue before preemption.
    LessThanInitialShare,
}

/// Fleet-wide scheduler settings (Kueue's Configuration, plus fleetq limits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerConfig {
    /// Order ClusterQueues of a cohort by dominant resource share and let
    /// fair sharing drive preemption between them.
    pub fair_sharing: bool,
    pub fair_sharing_strategies: Vec<FairSharingStrategy>,
    /// Half-life of LocalQueue usage under admission fair sharing.
    pub afs_half_life: Duration,
    /// Weight per resource of LocalQueue usage, in thousandths
    /// ([`fair::afs_rate`]); empty: GPUs only, weight 1.
    #[serde(default)]
    pub afs_resource_weights: BTreeMap<String, u64>,
    /// Usage charged to a LocalQueue at admission, per GPU, so a burst of
    /// admissions alternates between tenants before any usage is sampled.
    pub afs_entry_penalty: Duration,
    /// Bounds one AdmitBatch.
    pub max_admissions_per_cycle: usize,
    /// A BestEffortFIFO queue stops being scanned after this many
    /// inadmissible workloads in one cycle; the rest wait with its reason.
    pub max_inadmissible_per_queue: usize,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            fair_sharing: false,
            fair_sharing_strategies: vec![
                FairSharingStrategy::LessThanOrEqualToFinalShare,
                FairSharingStrategy::LessThanInitialShare,
            ],
            afs_half_life: Duration::from_secs(3600),
            afs_resource_weights: BTreeMap::new(),
            afs_entry_penalty: Duration::from_secs(300),
            max_admissions_per_cycle: 10_000,
            max_inadmissible_per_queue: 16,
        }
    }
}

impl SchedulerConfig {
    /// These settings with the replicated configuration's Kueue
    /// `Configuration` applied over them (fair sharing, admission fair
    /// sharing's half-life and weights), so that every
    /// replica that leads schedules alike whatever its own flags.
    pub fn with_settings(
        &self,
        config: &fleetq_model::Config,
    ) -> std::borrow::Cow<'_, SchedulerConfig> {
        let Some(settings) = &config.settings else {
            return std::borrow::Cow::Borrowed(self);
        };
        let mut out = self.clone();
        if let Some(afs) = &settings.admission_fair_sharing {
            if let Some(half_life) = afs.half_life() {
                out.afs_half_life = half_life;
            }
            out.afs_resource_weights = afs.weights_milli();
        }
        out.fair_sharing = settings.fair_sharing_enabled();
        out.fair_sharing_strategies = settings
            .strategies()
            .iter()
            .filter_map(|s| match s.as_str() {
                "LessThanOrEqualToFinalShare" => {
                    Some(FairSharingStrategy::LessThanOrEqualToFinalShare)
                }
                "LessThanInitialShare" => Some(FairSharingStrategy::LessThanInitialShare),
                _ => None,
            })
            .collect();
        std::borrow::Cow::Owned(out)
    }
}

/// Runs one admission cycle over `snapshot` at time `now`.
pub fn schedule(snapshot: &Snapshot, now: Timestamp, config: &SchedulerConfig) -> Decisions {
    let config = config.with_settings(snapshot.config());
    cycle::Cycle::new(snapshot, now, &config).run()
}

/// Admissions for `arriving` workloads, which are not queued yet, as the next
/// cycle would make them once they were: the leader plans these before it
/// proposes the submissions, so that a workload that finds room is admitted
/// by the very entry that queues it (one Raft commit instead of two; the
/// ledger re-validates each one at apply as it does an `AdmitBatch`).
///
/// Answers nothing, leaving every decision to the ordinary cycle, where it
/// could differ from that cycle's: when other workloads wait (a cycle would
/// weigh `arriving` against them), and when an arriving workload that does not fit
/// may preempt (a cycle would reserve quota for it, which needs the
/// victims this plan does not look at). The admissions come in the cycle's
/// order of attempts.
///
/// ```
/// use fleetq_scheduler::{schedule_on_submit, SchedulerConfig, Snapshot};
/// use fleetq_model::{Config, Timestamp};
/// let snapshot = Snapshot::new(Config::default(), &[]);
/// let plan = schedule_on_submit(&snapshot, Vec::new(), Timestamp(0), &SchedulerConfig::default());
/// assert!(plan.is_empty());
/// ```
pub fn schedule_on_submit(
    snapshot: &Snapshot,
    arriving: Vec<PendingWorkload>,
    now: Timestamp,
    config: &SchedulerConfig,
) -> Vec<Admission> {
    if arriving.is_empty() || snapshot.pending_count() > 0 {
        return Vec::new();
    }
    let mut view = snapshot.arriving_view(&arriving);
    let ids: Vec<(WorkloadId, String)> = arriving
        .iter()
        .map(|w| (w.id, w.cluster_queue.clone()))
        .collect();
    for w in arriving {
        // A workload bound to no ClusterQueue of this configuration is
        // refused at apply; the plan leaves it out.
        let _ = view.add_pending(w);
    }
    let decisions = schedule(&view, now, config);
    let admitted: std::collections::HashSet<WorkloadId> =
        decisions.admissions.iter().map(|a| a.workload).collect();
    let left_may_preempt = ids.iter().any(|(id, cq)| {
        !admitted.contains(id)
            && snapshot
                .config()
                .cluster_queues
                .get(cq)
                .is_some_and(preempt::policy_allows_any)
    });
    if left_may_preempt {
        return Vec::new();
    }
    decisions.admissions
}
