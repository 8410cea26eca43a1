//! Who may preempt whom: the one definition of a ClusterQueue's preemption
//! policy that the scheduler's victim search and apply()'s re-check both
//! call, so that they cannot disagree. (They once did: with
//! `withinClusterQueue: LowerOrNewerEqualPriority` the scheduler chose a
//! newer victim of equal priority that apply() refused, every cycle.)
//!
//! Whether a preemption was *needed* (the victim's queue still borrows, the
//! preemptor does not fit without it) depends on usage at planning time and
//! stays the scheduler's call; a needless preemption cannot over-commit.

use fleetq_model::cluster_queue::{
    BorrowWithinCohortPolicy, PreemptionPolicy, ReclaimWithinCohort, WithinClusterQueue,
};
use fleetq_model::{Config, Timestamp};

use crate::decision::PreemptionReason;
use crate::quota::QuotaTree;

/// What the policy looks at of a workload: its priority and when it was
/// created (Kueue compares creation for `LowerOrNewerEqualPriority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rank {
    pub priority: i32,
    pub created_at: Timestamp,
}

/// Where the victim stands relative to the preemptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The same ClusterQueue.
    SameQueue,
    /// Another ClusterQueue under the same root cohort.
    SameTree,
    /// Unrelated: nobody may preempt across cohort trees.
    Unrelated,
}

/// `withinClusterQueue`: may the preemptor evict `victim` of its own queue?
pub fn within_cluster_queue_allows(
    policy: WithinClusterQueue,
    preemptor: Rank,
    victim: Rank,
) -> bool {
    match policy {
        WithinClusterQueue::Never => false,
        WithinClusterQueue::LowerPriority => victim.priority < preemptor.priority,
        WithinClusterQueue::LowerOrNewerEqualPriority => {
            victim.priority < preemptor.priority
                || (victim.priority == preemptor.priority
                    && victim.created_at > preemptor.created_at)
        }
    }
}

/// `reclaimWithinCohort`: may the preemptor take back lent quota from a
/// workload of another queue that borrows it?
pub fn reclaim_allows(policy: ReclaimWithinCohort, preemptor: i32, victim: i32) -> bool {
    match policy {
        ReclaimWithinCohort::Never => false,
        ReclaimWithinCohort::LowerPriority => victim < preemptor,
        ReclaimWithinCohort::Any => true,
    }
}

/// `borrowWithinCohort`: may a preemptor that will itself borrow evict
/// `victim` of another queue?
pub fn borrow_within_cohort_allows(policy: &PreemptionPolicy, preemptor: i32, victim: i32) -> bool {
    let bwc = policy.borrow_within_cohort;
    bwc.policy == BorrowWithinCohortPolicy::LowerPriority
        && victim < preemptor
        && bwc.max_priority_threshold.is_none_or(|t| victim <= t)
}

/// What a preemptor may do to a workload of another ClusterQueue of its
/// cohort tree: Kueue's preemption variants for such a candidate
/// (`classifyPreemptionVariant` in Kueue's classical preemption).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CohortVariant {
    /// The preemptor's request fits in the quota of a subtree (a cohort,
    /// or its own queue) that the candidate uses without owning it: the
    /// preemptor is closer to that quota, so it may take it back even if
    /// it borrows afterwards. Reason `InCohortReclamation`.
    HierarchicalReclaim,
    /// Only if the preemptor's queue ends within its nominal quota once
    /// the victims are gone. Reason `InCohortReclamation`.
    ReclaimWithoutBorrowing,
    /// Even if the preemptor's queue borrows afterwards
    /// (`borrowWithinCohort`). Reason `InCohortReclaimWhileBorrowing`.
    ReclaimWhileBorrowing,
}

impl CohortVariant {
    /// The reason a victim of this variant is preempted for.
    pub fn reason(self) -> PreemptionReason {
        match self {
            CohortVariant::HierarchicalReclaim | CohortVariant::ReclaimWithoutBorrowing => {
                PreemptionReason::InCohortReclamation
            }
            CohortVariant::ReclaimWhileBorrowing => PreemptionReason::InCohortReclaimWhileBorrowing,
        }
    }
}

/// Kueue's classification of a workload of another ClusterQueue of the
/// preemptor's cohort tree (classical preemption), or `None` where the
/// policy forbids taking it. `reclaimWithinCohort` must allow it whatever
/// the variant; then a hierarchical advantage makes it
/// [`CohortVariant::HierarchicalReclaim`]; otherwise `borrowWithinCohort`
/// (its priority threshold, and fleetq's shields against borrowers taking
/// turns) decides whether it may be taken while the preemptor borrows.
/// Every variant's reason is accepted by [`allows`] for the same inputs.
pub fn classify_in_cohort(
    policy: &PreemptionPolicy,
    preemptor: Rank,
    victim: Rank,
    hierarchical_advantage: bool,
    victim_borrow_preemptions: u32,
    preemptor_reclaimed: u32,
) -> Option<CohortVariant> {
    if !reclaim_allows(
        policy.reclaim_within_cohort,
        preemptor.priority,
        victim.priority,
    ) {
        return None;
    }
    if hierarchical_advantage {
        return Some(CohortVariant::HierarchicalReclaim);
    }
    if victim_borrow_preemptions < BORROWER_PREEMPTIONS
        && preemptor_reclaimed < RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION
        && borrow_within_cohort_allows(policy, preemptor.priority, victim.priority)
    {
        Some(CohortVariant::ReclaimWhileBorrowing)
    } else {
        Some(CohortVariant::ReclaimWithoutBorrowing)
    }
}

/// How often a workload may be preempted by borrowing preemptors
/// (`borrowWithinCohort`, or a fair-sharing strategy) before it is
/// shielded from them. Borrowers of one cohort can otherwise take turns
/// for ever: a borrower preempts a lower-priority borrower of another
/// queue, an owner reclaims from it with `reclaimWithinCohort: Any`, and
/// the first victim returns by preempting that owner's lower-priority
/// peer in its own queue (found by the soak, seed 102121: three
/// workloads, 650 admissions in 180 s). Under fair sharing the same,
/// with four queues' workloads and a fair-sharing preemption in place of
/// the borrower's (seed 176200: one workload preempted 192 times).
/// Kueue has the same rules and no such shield; fleetq must settle.
/// A shielded workload is still reclaimed by a preemptor that stays
/// within its queue's nominal quota.
pub const BORROWER_PREEMPTIONS: u32 = 2;

/// How often a workload's borrowed quota may be taken back by another
/// queue (reclaimed by an owner, or preempted by fair sharing) before it
/// may no longer preempt while borrowing (`borrowWithinCohort`, or a
/// fair-sharing strategy): borrowing again by preemption would only be
/// taken back again. The other side of [`BORROWER_PREEMPTIONS`], which
/// shields each victim but not the next one: a borrower that took three
/// different victims in turn, each time reclaimed by an owner whose peers
/// then preempted each other, churned one owner's workloads 13 times
/// (found by the soak, seed 105319).
///
/// Under fair sharing the same turn-taking needs no priorities (soak
/// seed 173396, `LessThanInitialShare`): a high-priority workload takes
/// its queue's low ones and borrows above its cohort's share; another
/// cohort's workload takes it by fair sharing, borrowing the first
/// cohort's own nominal quota; a low workload of the first cohort takes
/// that back, within its cohort's nominal quota; and again, 147 times in
/// 180 s. Every step is Kueue's rule; Kueue has no shield (its own
/// proof covers two workloads, not three). A workload taken back twice
/// waits for quota instead of preempting for more than its nominal.
pub const RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION: u32 = 2;

/// Whether the preemptor's queue policy allows evicting `victim` for
/// `reason`. Fair-sharing preemption follows `reclaimWithinCohort`, as in
/// Kueue. `InCohortReclamation` is what [`classify_in_cohort`] gives both a
/// hierarchical reclaim and a reclaim that leaves the preemptor within its
/// nominal quota: which of the two it was depends on usage at planning
/// time (the scheduler's call), and both need `reclaimWithinCohort` alone.
/// `victim_borrow_preemptions`: how often borrowing preemptors already
/// took it; `preemptor_reclaimed`: how often owners reclaimed the
/// preemptor's borrowed quota.
pub fn allows(
    policy: &PreemptionPolicy,
    reason: PreemptionReason,
    relation: Relation,
    preemptor: Rank,
    victim: Rank,
    victim_borrow_preemptions: u32,
    preemptor_reclaimed: u32,
) -> bool {
    match (reason, relation) {
        (PreemptionReason::InClusterQueue, Relation::SameQueue) => {
            within_cluster_queue_allows(policy.within_cluster_queue, preemptor, victim)
        }
        (PreemptionReason::InCohortReclamation, Relation::SameTree) => reclaim_allows(
            policy.reclaim_within_cohort,
            preemptor.priority,
            victim.priority,
        ),
        // Both let the preemptor borrow by preemption (a fair-sharing
        // strategy, or borrowWithinCohort): both shields hold.
        (PreemptionReason::InCohortFairSharing, Relation::SameTree)
        | (PreemptionReason::InCohortReclaimWhileBorrowing, Relation::SameTree) => {
            reclaim_allows(
                policy.reclaim_within_cohort,
                preemptor.priority,
                victim.priority,
            ) && victim_borrow_preemptions < BORROWER_PREEMPTIONS
                && preemptor_reclaimed < RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION
                && (reason == PreemptionReason::InCohortFairSharing
                    || borrow_within_cohort_allows(policy, preemptor.priority, victim.priority))
        }
        _ => false,
    }
}

/// One preemption as apply() re-checks it: the two workloads, their
/// queues and the shields of [`allows`].
#[derive(Clone, Copy, Debug)]
pub struct Proposed<'a> {
    pub preemptor_cq: &'a str,
    pub preemptor: Rank,
    pub victim_cq: &'a str,
    pub victim: Rank,
    pub victim_borrow_preemptions: u32,
    pub preemptor_reclaimed: u32,
    pub reason: PreemptionReason,
}

/// The part of the preemption rules apply() can re-check cheaply: who may
/// preempt whom, by the preemptor's queue policy in `config`, with the
/// queues' relation read from `tree`. The ledger's apply() and the Kueue
/// case replay both call it, so a test of the scheduler's choices is a
/// test against apply()'s rule. The error says which policy refused whom.
pub fn check_scope(tree: &QuotaTree, config: &Config, p: &Proposed) -> Result<(), String> {
    let root = |cq: &str| tree.cluster_queue(cq).map(|n| tree.root_of(n));
    let relation = if p.victim_cq == p.preemptor_cq {
        Relation::SameQueue
    } else if root(p.preemptor_cq).is_some() && root(p.preemptor_cq) == root(p.victim_cq) {
        Relation::SameTree
    } else {
        Relation::Unrelated
    };
    let allowed = config.cluster_queues.get(p.preemptor_cq).is_some_and(|cq| {
        allows(
            &cq.spec.preemption,
            p.reason,
            relation,
            p.preemptor,
            p.victim,
            p.victim_borrow_preemptions,
            p.preemptor_reclaimed,
        )
    });
    if allowed {
        return Ok(());
    }
    Err(format!(
        "{:?} does not allow ClusterQueue {} at priority {} to preempt a workload of ClusterQueue {} at priority {}",
        p.reason, p.preemptor_cq, p.preemptor.priority, p.victim_cq, p.victim.priority
    ))
}

/// Kueue's `canPreemptWhileBorrowing`: whether the preemptor may look for
/// victims when its request exceeds its queue's nominal quota (and no
/// cohort below the root has room for it): with `borrowWithinCohort`, or
/// under fair sharing with `reclaimWithinCohort`. Otherwise such a request
/// waits for quota without preempting (flavor assignment, `assign.rs`).
pub fn may_preempt_while_borrowing(policy: &PreemptionPolicy, fair_sharing: bool) -> bool {
    policy.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
        || (fair_sharing && policy.reclaim_within_cohort != ReclaimWithinCohort::Never)
}

/// Whether the policy permits any preemption at all.
pub fn allows_any(policy: &PreemptionPolicy) -> bool {
    policy.within_cluster_queue != WithinClusterQueue::Never
        || policy.reclaim_within_cohort != ReclaimWithinCohort::Never
        || policy.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(priority: i32, created: u64) -> Rank {
        Rank {
            priority,
            created_at: Timestamp(created),
        }
    }

    #[test]
    fn lower_or_newer_equal_priority_takes_a_newer_equal_victim_only() {
        let p = WithinClusterQueue::LowerOrNewerEqualPriority;
        assert!(within_cluster_queue_allows(p, rank(1, 10), rank(1, 20)));
        assert!(!within_cluster_queue_allows(p, rank(1, 20), rank(1, 10)));
        assert!(!within_cluster_queue_allows(p, rank(1, 10), rank(1, 10)));
        assert!(within_cluster_queue_allows(p, rank(2, 99), rank(1, 0)));
        assert!(!within_cluster_queue_allows(p, rank(1, 0), rank(2, 99)));
    }

    /// The scheduler classifies, apply() re-checks the reason: whatever the
    /// policy, priorities, advantage and shields, apply() accepts what the
    /// scheduler chose.
    #[test]
    fn every_cohort_variant_is_allowed_by_apply() {
        use fleetq_model::cluster_queue::BorrowWithinCohort;
        let reclaims = [
            ReclaimWithinCohort::Never,
            ReclaimWithinCohort::LowerPriority,
            ReclaimWithinCohort::Any,
        ];
        let borrows = [
            (BorrowWithinCohortPolicy::Never, None),
            (BorrowWithinCohortPolicy::LowerPriority, None),
            (BorrowWithinCohortPolicy::LowerPriority, Some(0)),
        ];
        for reclaim in reclaims {
            for (bwc, threshold) in borrows {
                let policy = PreemptionPolicy {
                    reclaim_within_cohort: reclaim,
                    borrow_within_cohort: BorrowWithinCohort {
                        policy: bwc,
                        max_priority_threshold: threshold,
                    },
                    ..PreemptionPolicy::default()
                };
                for (p, v) in [(1, 0), (0, 0), (0, 1), (2, -1)] {
                    for advantage in [false, true] {
                        for shield in [0, BORROWER_PREEMPTIONS] {
                            let (preemptor, victim) = (rank(p, 0), rank(v, 0));
                            let variant = classify_in_cohort(
                                &policy, preemptor, victim, advantage, shield, 0,
                            );
                            if let Some(variant) = variant {
                                assert!(allows(
                                    &policy,
                                    variant.reason(),
                                    Relation::SameTree,
                                    preemptor,
                                    victim,
                                    shield,
                                    0
                                ));
                            }
                            // Nothing is taken that reclaimWithinCohort forbids.
                            assert_eq!(variant.is_some(), reclaim_allows(reclaim, p, v));
                        }
                    }
                }
            }
        }
        // A hierarchical advantage takes a higher priority victim, while
        // borrowing, where reclaimWithinCohort: Any allows it.
        let any = PreemptionPolicy {
            reclaim_within_cohort: ReclaimWithinCohort::Any,
            ..PreemptionPolicy::default()
        };
        assert_eq!(
            classify_in_cohort(&any, rank(0, 0), rank(5, 0), true, 0, 0),
            Some(CohortVariant::HierarchicalReclaim)
        );
        assert_eq!(
            classify_in_cohort(&any, rank(0, 0), rank(5, 0), false, 0, 0),
            Some(CohortVariant::ReclaimWithoutBorrowing)
        );
    }

    #[test]
    fn reasons_need_their_relation() {
        let policy = PreemptionPolicy {
            reclaim_within_cohort: ReclaimWithinCohort::Any,
            within_cluster_queue: WithinClusterQueue::LowerPriority,
            ..PreemptionPolicy::default()
        };
        let (hi, lo) = (rank(2, 0), rank(1, 0));
        assert!(allows(
            &policy,
            PreemptionReason::InClusterQueue,
            Relation::SameQueue,
            hi,
            lo,
            0,
            0
        ));
        assert!(!allows(
            &policy,
            PreemptionReason::InClusterQueue,
            Relation::SameTree,
            hi,
            lo,
            0,
            0
        ));
        assert!(allows(
            &policy,
            PreemptionReason::InCohortReclamation,
            Relation::SameTree,
            lo,
            hi,
            0,
            0
        ));
        assert!(!allows(
            &policy,
            PreemptionReason::InCohortReclamation,
            Relation::SameQueue,
            lo,
            hi,
            0,
            0
        ));
        assert!(!allows(
            &policy,
            PreemptionReason::InCohortReclamation,
            Relation::Unrelated,
            lo,
            hi,
            0,
            0
        ));
        // A borrower preempted twice by borrowers is shielded from them.
        let borrowing = PreemptionPolicy {
            borrow_within_cohort: fleetq_model::cluster_queue::BorrowWithinCohort {
                policy: BorrowWithinCohortPolicy::LowerPriority,
                max_priority_threshold: None,
            },
            ..policy
        };
        let take = |shield| {
            allows(
                &borrowing,
                PreemptionReason::InCohortReclaimWhileBorrowing,
                Relation::SameTree,
                hi,
                lo,
                shield,
                0,
            )
        };
        assert!(take(0) && take(1) && !take(BORROWER_PREEMPTIONS));
        // A borrower whose borrowing owners reclaimed twice may no longer
        // preempt while borrowing.
        let borrow_again = |reclaimed| {
            allows(
                &borrowing,
                PreemptionReason::InCohortReclaimWhileBorrowing,
                Relation::SameTree,
                hi,
                lo,
                0,
                reclaimed,
            )
        };
        assert!(borrow_again(1) && !borrow_again(RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION));
        // The same under fair sharing: taken back twice, a workload may
        // no longer borrow by a fair-sharing strategy, but it may still
        // reclaim within its nominal quota.
        let fair =
            |reason, reclaimed| allows(&policy, reason, Relation::SameTree, lo, hi, 0, reclaimed);
        assert!(fair(PreemptionReason::InCohortFairSharing, 1));
        assert!(!fair(
            PreemptionReason::InCohortFairSharing,
            RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION
        ));
        // And a victim fair sharing took twice is shielded from it.
        let victim_taken = |times| {
            allows(
                &policy,
                PreemptionReason::InCohortFairSharing,
                Relation::SameTree,
                lo,
                hi,
                times,
                0,
            )
        };
        assert!(victim_taken(1) && !victim_taken(BORROWER_PREEMPTIONS));
        assert!(fair(
            PreemptionReason::InCohortReclamation,
            RECLAIMS_BEFORE_NO_BORROWING_PREEMPTION
        ));
        // borrowWithinCohort is Never here.
        assert!(!allows(
            &policy,
            PreemptionReason::InCohortReclaimWhileBorrowing,
            Relation::SameTree,
            hi,
            lo,
            0,
            0
        ));
    }
}
