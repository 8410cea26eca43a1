//! Flavor assignment: for each pod set and each resource group it
//! touches, walk the ClusterQueue's flavors in order and pick one by
//! Kueue's fungibility rules, judging each flavor by quota *and* by whether
//! an eligible cluster has the devices, counting what the workload's
//! earlier pod sets already took. Pod sets of one workload may get
//! different flavors (flavors are node groups inside a cluster), as in
//! Kueue; the whole workload still lands on one cluster.

use std::collections::BTreeMap;

use fleetq_model::cluster_queue::{FungibilityPolicy, ReclaimWithinCohort, WithinClusterQueue};
use fleetq_model::{ClusterQueue, FlavorResource, FlavorUsage, Quantity};

use crate::clusters::{ClusterTable, ClusterUsage};
use crate::decision::{Assignment, PendingReason, PodSetAssignment, ReasonKind};
use crate::quota::{FrId, NodeId, QuotaTree, Usage};
use crate::snapshot::PendingWorkload;

/// How well a flavor (or a whole plan) fits; ordered best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Fits in the queue's own unused quota.
    Fit,
    /// Fits by borrowing from the cohort.
    Borrow,
    /// Would fit if something were preempted or finished.
    Preempt,
    /// Can never fit as configured.
    NoFit,
}

/// What one pod set asks of one resource group: total per resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupDemand {
    /// Index of the pod set in the workload.
    pub pod_set: usize,
    pub group: usize,
    pub resources: Vec<(String, u64)>,
}

/// Per pod set and group totals for given pod counts, pod sets in order.
/// Fails with `Misconfigured` when a requested resource is covered by no
/// resource group.
pub fn demand(
    cq: &ClusterQueue,
    workload: &PendingWorkload,
    counts: &[u32],
) -> Result<Vec<GroupDemand>, PendingReason> {
    let mut groups: BTreeMap<(usize, usize), BTreeMap<String, u64>> = BTreeMap::new();
    for (index, (ps, &count)) in workload
        .workload
        .spec
        .pod_sets
        .iter()
        .zip(counts)
        .enumerate()
    {
        for (resource, q) in &ps.requests {
            if q.is_zero() {
                continue;
            }
            let Some((g, _)) = cq.group_for(resource) else {
                return Err(PendingReason::new(
                    ReasonKind::Misconfigured,
                    format!(
                        "pod set {:?} requests {resource:?}, which no flavor of ClusterQueue {:?} covers",
                        ps.name, cq.name
                    ),
                ));
            };
            let total = q.milli().saturating_mul(u64::from(count));
            let slot = groups
                .entry((index, g))
                .or_default()
                .entry(resource.clone())
                .or_default();
            *slot = slot.saturating_add(total);
        }
    }
    Ok(groups
        .into_iter()
        .map(|((pod_set, group), r)| GroupDemand {
            pod_set,
            group,
            resources: r.into_iter().collect(),
        })
        .collect())
}

/// One flavor judged for one group: mode, flavor, cells, why not better.
type FlavorChoice = (Mode, String, Vec<(FrId, u64)>, Option<PendingReason>);

/// A chosen flavor per (pod set, group) and the cells it charges.
#[derive(Clone, Debug)]
pub struct Plan {
    pub flavors: Vec<((usize, usize), String)>,
    pub cells: Vec<(FrId, u64)>,
    pub mode: Mode,
    /// Why the plan is not `Fit`/`Borrow`, for the pending reason.
    pub reason: Option<PendingReason>,
    /// The pod counts it is for, where the caller set them (not in the
    /// flavor assigner's preemption simulations): preemption then checks
    /// that its victims free room the pods can be placed in.
    pub counts: Vec<u32>,
}

/// Everything flavor assignment reads, borrowed from the cycle.
pub struct AssignContext<'a> {
    pub tree: &'a QuotaTree,
    pub usage: &'a Usage,
    pub clusters: &'a ClusterTable,
    pub cluster_usage: &'a ClusterUsage,
    pub eligible: &'a [usize],
    pub node: NodeId,
    pub cq: &'a ClusterQueue,
    /// Fair sharing is on (Kueue's `canPreemptWhileBorrowing` reads it).
    pub fair_sharing: bool,
    /// Flavors passed over for this attempt: their totals had room but no
    /// cluster's nodes could take the pods (`Cycle::attempt`).
    pub passed_over: &'a [String],
}

impl AssignContext<'_> {
    fn can_preempt(&self) -> bool {
        let p = &self.cq.spec.preemption;
        p.within_cluster_queue != WithinClusterQueue::Never
            || p.reclaim_within_cohort != ReclaimWithinCohort::Never
    }

    /// Kueue's condition for simulating preemption in `fitsResourceQuota`:
    /// the workload's `total` of `fr` fits the queue's nominal quota, or a
    /// cohort below the root has room for it (a hierarchical advantage), or
    /// the policy lets it preempt while borrowing. Otherwise the flavor is
    /// `NoFit` for this resource: the workload waits for quota.
    fn may_try_preemption(&self, fr: FrId, total: u64) -> bool {
        total <= self.tree.nominal(self.node, fr)
            || crate::preempt::may_reclaim_in_hierarchy(self.tree, self.usage, self.node, fr, total)
            || crate::policy::may_preempt_while_borrowing(
                &self.cq.spec.preemption,
                self.fair_sharing,
            )
    }

    /// The reason of a flavor [`Self::may_try_preemption`] refuses.
    fn no_preemption(&self, mut reason: PendingReason, fr: FrId) -> PendingReason {
        if crate::policy::allows_any(&self.cq.spec.preemption) {
            reason.message = format!(
                "{}; it may not preempt for it: the request is above the nominal quota of ClusterQueue {:?} ({}), no cohort below the root has room for it, and borrowWithinCohort is not set",
                reason.message,
                self.cq.name,
                Quantity::from_milli(self.tree.nominal(self.node, fr)),
            );
        }
        reason
    }

    /// Judges one flavor for one pod set's group, on top of what the
    /// workload's earlier pod sets already took (`before`): its mode, its
    /// borrowing level (Kueue's height of the lowest subtree whose quota
    /// holds it, 0 within the queue's own), its cells and why it does not
    /// fit.
    fn judge(
        &self,
        flavor: &str,
        demand: &GroupDemand,
        before: &[(FrId, u64)],
    ) -> (Mode, usize, Vec<(FrId, u64)>, Option<PendingReason>) {
        let mut cells = Vec::with_capacity(demand.resources.len());
        let mut mode = Mode::Fit;
        let mut level = 0;
        let mut reason = None;
        let worsen =
            |m: Mode, r: PendingReason, mode: &mut Mode, reason: &mut Option<PendingReason>| {
                if m > *mode || reason.is_none() && m == *mode {
                    *mode = m;
                    *reason = Some(r);
                }
            };
        for (resource, q) in &demand.resources {
            let Some(fr) = self.tree.cell_of(flavor, resource) else {
                worsen(
                    Mode::NoFit,
                    PendingReason::new(
                        ReasonKind::Misconfigured,
                        format!(
                            "flavor {flavor} of ClusterQueue {:?} has no quota for {resource}",
                            self.cq.name
                        ),
                    ),
                    &mut mode,
                    &mut reason,
                );
                continue;
            };
            cells.push((fr, *q));
            let earlier: u64 = before.iter().filter(|c| c.0 == fr).map(|c| c.1).sum();
            let total = q.saturating_add(earlier);
            match quota_verdict(self.tree, self.usage, self.node, &self.cq.name, fr, total) {
                (m, None) => {
                    if m == Mode::Borrow {
                        let (height, _) = self
                            .tree
                            .lowest_subtree_that_fits(self.usage, self.node, fr, total);
                        level = level.max(height);
                    }
                    mode = mode.max(m);
                }
                (Mode::Preempt, Some(r)) if !self.may_try_preemption(fr, total) => worsen(
                    Mode::NoFit,
                    self.no_preemption(r, fr),
                    &mut mode,
                    &mut reason,
                ),
                (m, Some(r)) => worsen(m, r, &mut mode, &mut reason),
            }
        }
        let together: Vec<(FrId, u64)> = before.iter().chain(&cells).copied().collect();
        if mode <= Mode::Preempt {
            let (phys, why) = self.judge_devices(flavor, &together);
            if phys > mode {
                mode = phys;
                reason = why;
            }
        } else if reason
            .as_ref()
            .is_some_and(|r| r.kind == ReasonKind::WaitingForQuota)
            && !self.fits_some_cluster(&together)
        {
            // Quota may free up; a request larger than every eligible
            // cluster never fits. The permanent reason is the one to show.
            reason = self.judge_devices(flavor, &together).1;
        }
        (mode, level, cells, reason)
    }

    /// Whether some eligible cluster could hold `cells` once empty.
    fn fits_some_cluster(&self, cells: &[(FrId, u64)]) -> bool {
        self.eligible
            .iter()
            .any(|&c| self.clusters.fits_empty(c, cells))
    }

    /// Devices: `Fit` if an eligible cluster has the room now, `Preempt` if
    /// one is big enough once work there ends, else `NoFit`.
    fn judge_devices(&self, flavor: &str, cells: &[(FrId, u64)]) -> (Mode, Option<PendingReason>) {
        if self
            .eligible
            .iter()
            .any(|&c| self.clusters.fits_now(self.cluster_usage, c, cells))
        {
            return (Mode::Fit, None);
        }
        let what = describe(self.tree, cells);
        if self.fits_some_cluster(cells) {
            return (
                Mode::Preempt,
                Some(PendingReason::new(
                    ReasonKind::NoClusterCapacity,
                    format!("no eligible cluster has {what} free in flavor {flavor} right now"),
                )),
            );
        }
        let message = if self.eligible.is_empty() {
            format!(
                "no Ready cluster matches the placement of ClusterQueue {:?}",
                self.cq.name
            )
        } else {
            format!("no eligible cluster is large enough for {what} in flavor {flavor}")
        };
        (
            Mode::NoFit,
            Some(PendingReason::new(ReasonKind::NoClusterCapacity, message)),
        )
    }

    /// Picks a flavor for every group, honouring `flavorFungibility`,
    /// without simulating preemption (a flavor that needs it counts as
    /// `Preempt`).
    pub fn assign(&self, demands: &[GroupDemand]) -> Plan {
        match self.assign_with(demands, None) {
            Assigned::Plan(plan) | Assigned::Simulate { plan, .. } => plan,
        }
    }

    /// Picks a flavor for every group, honouring `flavorFungibility`. With
    /// `simulated`, as Kueue's flavor assigner with its preemption oracle:
    /// a flavor that needs preemption is ranked by what preemption could
    /// do there (reclaim from other queues, better than preempting in the
    /// own queue, better than no candidates at all), and one without
    /// candidates does not stop the search. A flavor not simulated yet
    /// ends the walk with [`Assigned::Simulate`]; the caller simulates it,
    /// records the answer and asks again. Only groups with more than one
    /// flavor are simulated: with one flavor there is nothing to choose.
    pub fn assign_with(&self, demands: &[GroupDemand], simulated: Option<&Simulated>) -> Assigned {
        let fungibility = self.cq.spec.flavor_fungibility;
        let mut plan = Plan {
            flavors: Vec::new(),
            cells: Vec::new(),
            mode: Mode::Fit,
            reason: None,
            counts: Vec::new(),
        };
        for (index, demand) in demands.iter().enumerate() {
            let group = &self.cq.spec.resource_groups[demand.group];
            let simulating = simulated.filter(|_| group.flavors.len() > 1 && self.can_preempt());
            let mut best: Option<(Rank, FlavorChoice)> = None;
            let flavors = group.flavors.iter();
            for flavor in flavors.filter(|f| !self.passed_over.contains(&f.name)) {
                let (mode, level, cells, reason) = self.judge(&flavor.name, demand, &plan.cells);
                let possibility = match (mode, simulating) {
                    (Mode::Preempt, Some(known)) => {
                        match known.get(&(index, flavor.name.clone())) {
                            Some(p) => Some(*p),
                            None => {
                                plan.flavors
                                    .push(((demand.pod_set, demand.group), flavor.name.clone()));
                                plan.cells.extend(cells);
                                plan.mode = plan.mode.max(mode);
                                return Assigned::Simulate {
                                    demand: index,
                                    flavor: flavor.name.clone(),
                                    plan,
                                };
                            }
                        }
                    }
                    _ => None,
                };
                let stop = match mode {
                    Mode::Fit => true,
                    Mode::Borrow => fungibility.when_can_borrow == FungibilityPolicy::MayStopSearch,
                    Mode::Preempt => {
                        self.can_preempt()
                            && possibility != Some(Possibility::NoCandidates)
                            && fungibility.when_can_preempt == FungibilityPolicy::MayStopSearch
                    }
                    Mode::NoFit => false,
                };
                // Keep the first flavor of the best rank; for reasons keep the
                // first flavor's, which is the one the user expects to get.
                let rank = rank(mode, possibility, level);
                if best.as_ref().is_none_or(|b| rank < b.0) {
                    best = Some((rank, (mode, flavor.name.clone(), cells, reason)));
                }
                if stop {
                    break;
                }
            }
            let Some((_, (mode, flavor, cells, reason))) = best else {
                plan.mode = Mode::NoFit;
                if !self.passed_over.is_empty() {
                    // Every flavor was passed over: the placement notes
                    // say why (the caller's reason).
                    return Assigned::Plan(plan);
                }
                plan.reason = Some(PendingReason::new(
                    ReasonKind::Misconfigured,
                    format!(
                        "resource group {} of ClusterQueue {:?} has no flavors",
                        demand.group, self.cq.name
                    ),
                ));
                return Assigned::Plan(plan);
            };
            if mode > plan.mode || (mode == plan.mode && plan.reason.is_none()) {
                plan.reason = reason;
            }
            plan.mode = plan.mode.max(mode);
            plan.flavors.push(((demand.pod_set, demand.group), flavor));
            plan.cells.extend(cells);
        }
        Assigned::Plan(plan)
    }
}

/// Kueue's `PreemptionPossibility` for one flavor, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Possibility {
    /// Victims only in other ClusterQueues.
    Reclaim,
    /// Some victim in the workload's own ClusterQueue.
    Preempt,
    /// Nobody could be preempted for it.
    NoCandidates,
}

/// What preemption could do, per (demand index, flavor), as simulated.
pub type Simulated = BTreeMap<(usize, String), Possibility>;

/// A flavor's rank while choosing, Kueue's `isPreferred` (borrowing over
/// preemption): fits (with or without borrowing) before needs preemption
/// before never fits; then what preemption could do; then the lower
/// borrowing level.
type Rank = (u8, Possibility, usize);

fn rank(mode: Mode, possibility: Option<Possibility>, level: usize) -> Rank {
    let class = match mode {
        Mode::Fit | Mode::Borrow => 0,
        Mode::Preempt => 1,
        Mode::NoFit => 2,
    };
    (class, possibility.unwrap_or(Possibility::Preempt), level)
}

/// The outcome of [`AssignContext::assign_with`].
pub enum Assigned {
    Plan(Plan),
    /// Simulate preemption for `flavor` of demand `demand` under `plan`
    /// (the earlier groups' choices and this flavor's cells), then ask
    /// again.
    Simulate {
        demand: usize,
        flavor: String,
        plan: Plan,
    },
}

/// How `q` of cell `fr` fits ClusterQueue `node` by quota alone: `Fit` or
/// `Borrow` without a reason, else `Preempt` (WaitingForQuota, with how
/// much is missing) or `NoFit` (ExceedsMaxQuota).
pub fn quota_verdict(
    tree: &QuotaTree,
    usage: &Usage,
    node: NodeId,
    cq_name: &str,
    fr: FrId,
    q: u64,
) -> (Mode, Option<PendingReason>) {
    let available = tree.available(usage, node, fr);
    if q <= available {
        let borrows = usage.get(node, fr).saturating_add(q) > tree.nodes[node].subtree_quota[fr];
        return (if borrows { Mode::Borrow } else { Mode::Fit }, None);
    }
    let fr_name = &tree.cells[fr];
    let max = tree.max_capacity(node, fr);
    if q > max {
        return (
            Mode::NoFit,
            Some(PendingReason::new(
                ReasonKind::ExceedsMaxQuota,
                format!(
                    "requests {} of {fr_name} but ClusterQueue {cq_name:?} can get at most {} even with its cohort idle",
                    Quantity::from_milli(q),
                    Quantity::from_milli(max)
                ),
            )),
        );
    }
    (
        Mode::Preempt,
        Some(PendingReason::new(
            ReasonKind::WaitingForQuota,
            format!(
                "insufficient unused quota for {fr_name} in ClusterQueue {cq_name:?}: {} more needed (requested {}, available {})",
                Quantity::from_milli(q - available),
                Quantity::from_milli(q),
                Quantity::from_milli(available)
            ),
        )),
    )
}

/// "8 nvidia.com/gpu, 64Gi memory" for a list of cells.
pub fn describe(tree: &QuotaTree, cells: &[(FrId, u64)]) -> String {
    cells
        .iter()
        .map(|&(fr, q)| format!("{} {}", Quantity::from_milli(q), tree.cells[fr].resource))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The assignment record for a plan placed on `cluster`.
pub fn to_assignment(
    cq: &ClusterQueue,
    workload: &PendingWorkload,
    counts: &[u32],
    plan: &Plan,
    cluster: &str,
    tree: &QuotaTree,
) -> Assignment {
    let flavor_of_group: BTreeMap<(usize, usize), &str> =
        plan.flavors.iter().map(|(k, f)| (*k, f.as_str())).collect();
    let pod_sets = workload
        .workload
        .spec
        .pod_sets
        .iter()
        .zip(counts)
        .enumerate()
        .map(|(index, (ps, &count))| PodSetAssignment {
            name: ps.name.clone(),
            count,
            flavors: ps
                .requests
                .iter()
                .filter(|(_, q)| !q.is_zero())
                .filter_map(|(r, _)| {
                    let (g, _) = cq.group_for(r)?;
                    Some((r.clone(), flavor_of_group.get(&(index, g))?.to_string()))
                })
                .collect(),
            nodes: Vec::new(),
        })
        .collect();
    let mut usage = FlavorUsage::new();
    for &(fr, q) in &plan.cells {
        let slot = usage.entry(tree.cells[fr].clone()).or_default();
        *slot = slot.saturating_add(Quantity::from_milli(q));
    }
    Assignment {
        cluster: cluster.to_string(),
        pod_sets,
        usage,
    }
}

/// Re-derives the charge of `assignment` from the workload's pod sets and
/// compares: every pod set present once, counts within [minCount, count],
/// every requested resource given a flavor, and the usage exactly the sum of
/// count x per-pod request. Used by apply() so a corrupt or forged decision
/// cannot charge the wrong amount.
pub fn check_assignment_matches(
    workload: &PendingWorkload,
    assignment: &Assignment,
) -> Result<(), String> {
    let spec = &workload.workload.spec;
    if assignment.pod_sets.len() != spec.pod_sets.len() {
        return Err(format!(
            "{} pod set assignments for {} pod sets",
            assignment.pod_sets.len(),
            spec.pod_sets.len()
        ));
    }
    let mut expected = FlavorUsage::new();
    for (ps, a) in spec.pod_sets.iter().zip(&assignment.pod_sets) {
        if ps.name != a.name {
            return Err(format!("pod set {:?} assigned as {:?}", ps.name, a.name));
        }
        let min = ps.min_count.unwrap_or(ps.count);
        if a.count < min || a.count > ps.count {
            return Err(format!(
                "pod set {:?} admitted with {} pods, allowed {min}..={}",
                ps.name, a.count, ps.count
            ));
        }
        for (resource, q) in &ps.requests {
            if q.is_zero() {
                continue;
            }
            let flavor = a
                .flavors
                .get(resource)
                .ok_or_else(|| format!("pod set {:?} has no flavor for {resource}", ps.name))?;
            let total = q
                .checked_mul(u64::from(a.count))
                .ok_or_else(|| format!("pod set {:?} request overflows", ps.name))?;
            let slot = expected
                .entry(FlavorResource::new(flavor, resource))
                .or_default();
            *slot = slot
                .checked_add(total)
                .ok_or_else(|| format!("pod set {:?} request overflows", ps.name))?;
        }
    }
    if expected != assignment.usage {
        return Err("recorded usage is not the sum of the pod sets' requests".into());
    }
    Ok(())
}
