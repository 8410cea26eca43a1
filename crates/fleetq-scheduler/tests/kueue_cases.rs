//! Kueue conformance replay: 177 cases translated from Kueue's scheduler,
//! preemption and flavor-assigner unit tests (commit ff69552e, see
//! `kueue_cases/cases.yaml` and docs/kueue-conformance.md) are replayed
//! through fleetq's pure scheduler, one cycle each, and every case gets a
//! verdict: `match`, or `differs: ...` with what Kueue expects and what
//! fleetq did.
//!
//! After the cycle Kueue checks, every case runs on to a settled state
//! with apply()'s re-checks on every decision ([`settle`]): victims stop
//! and queue again, preemptors are admitted, until a cycle decides
//! nothing.
//!
//! Known differences do not fail the test. It fails when a case cannot be
//! set up (a parse failure or a panic), when apply() would refuse a
//! decision the scheduler made or a case does not settle, or when fewer
//! cases match than [`MATCH_FLOOR`], so a regression shows. Run with `-- --nocapture` to see
//! one line per case.
//!
//! How a case is replayed:
//! - One cluster, `big`, reports every flavor of the case with far more of
//!   every resource than any quota, so only quota decides.
//! - Names Kueue accepts but fleetq's validation does not (`b_one`, `AA`)
//!   are lowercased with `_` turned into `-`, and turned back in reports.
//! - Workloads hold their priority directly (no priority classes) and
//!   point straight at their ClusterQueue. `created` and `admitted_at` are
//!   seconds from the cycle's `now`; `-1000` (unset in Go) is time zero.
//! - Kueue breaks the last ties by UID, which the fair-preemption tests
//!   set to the name. fleetq breaks them by id: the lower id first in a
//!   queue, the higher id first among preemption candidates. So pending
//!   workloads get ids in ascending name order and admitted ones in
//!   descending name order, which gives both the name order Kueue uses.
//! - The configuration is checked with fleetq's validation, but replayed
//!   even where it fails (some Go tables hold objects Kueue's own webhooks
//!   would refuse); the failure is reported beside the verdict.
//! - `preemption_targets` cases (Kueue calls `GetTargets` with a fixed
//!   flavor assignment) are replayed as a full cycle: fleetq chooses the
//!   flavor itself. The victims and their reasons are compared, and the
//!   preemptor must stay pending.
//!   A victim the case marks `(already evicting)` was being evicted before
//!   the cycle: fleetq must choose no new victim for it and have the
//!   preemptor wait for it.
//! - `schedule_cycle` and `flavor_assignment` cases compare the workloads
//!   admitted in the cycle (with flavors per pod set and resource, and pod
//!   counts), the victims and their reasons. `expected.inadmissible` is not
//!   compared: fleetq keeps no inadmissible list.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use fleetq_model::cluster_queue::{
    BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueueSpec, FairSharing, FlavorFungibility,
    FlavorQuotas, FungibilityPolicy, PreemptionPolicy, QueueingStrategy, ReclaimWithinCohort,
    ResourceGroup, ResourceQuota, WithinClusterQueue,
};
use fleetq_model::cohort::CohortSpec;
use fleetq_model::config::Object;
use fleetq_model::fair_weight::FairWeight;
use fleetq_model::flavor::ResourceFlavorSpec;
use fleetq_model::workload::WorkloadSpec;
use fleetq_model::{
    Cluster, ClusterQueue, ClusterState, Cohort, Config, FlavorResource, FlavorUsage, PodSet,
    Quantity, ResourceFlavor, Timestamp, Workload,
};
use fleetq_scheduler::{
    policy, schedule, AdmittedWorkload, Assignment, Decisions, FairSharingStrategy, PendingReason,
    PendingWorkload, PodSetAssignment, PreemptionReason, ReasonKind, SchedulerConfig, Snapshot,
};
use serde::Deserialize;

const CASES: &str = include_str!("kueue_cases/cases.yaml");

/// Cases whose replay matches Kueue, as measured when the test was written.
const MATCH_FLOOR: usize = 168;

/// How the case file writes the reason of a victim that was already being
/// evicted before the cycle.
const ALREADY_EVICTING: &str = "(already evicting)";

/// `now` of every replayed cycle, in seconds.
const NOW_SECS: u64 = 1_000_000;

// ---------------------------------------------------------------------------
// The case file; its format is summarised in docs/kueue-conformance.md.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    id: String,
    source: Source,
    kueue_commit: String,
    kind: Kind,
    fair_sharing: bool,
    #[serde(default)]
    fair_sharing_strategies: Option<Vec<String>>,
    #[serde(default)]
    feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    adapted: Option<String>,
    config: CaseConfig,
    admitted: Vec<AdmittedSpec>,
    pending: Vec<PendingSpec>,
    expected: Expected,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Source {
    #[allow(dead_code)]
    file: String,
    test: String,
    case: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    PreemptionTargets,
    ScheduleCycle,
    FlavorAssignment,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseConfig {
    flavors: Vec<String>,
    cohorts: Vec<CohortDef>,
    #[serde(rename = "clusterQueues")]
    cluster_queues: Vec<QueueDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CohortDef {
    name: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default, rename = "fairWeight")]
    fair_weight: Option<Q>,
    #[serde(default, rename = "resourceGroups")]
    resource_groups: Vec<GroupDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueueDef {
    name: String,
    #[serde(default)]
    cohort: Option<String>,
    strategy: QueueingStrategy,
    preemption: PreemptionDef,
    #[serde(rename = "flavorFungibility")]
    flavor_fungibility: FungibilityDef,
    #[serde(default, rename = "fairWeight")]
    fair_weight: Option<Q>,
    #[serde(rename = "resourceGroups")]
    resource_groups: Vec<GroupDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PreemptionDef {
    within_cluster_queue: WithinClusterQueue,
    reclaim_within_cohort: ReclaimWithinCohort,
    #[serde(default)]
    borrow_within_cohort: Option<BorrowDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BorrowDef {
    policy: BorrowWithinCohortPolicy,
    #[serde(default)]
    max_priority_threshold: Option<i32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct FungibilityDef {
    when_can_borrow: FungibilityPolicy,
    when_can_preempt: FungibilityPolicy,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupDef {
    covered: Vec<String>,
    flavors: Vec<FlavorDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlavorDef {
    name: String,
    resources: BTreeMap<String, QuotaDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct QuotaDef {
    nominal: Q,
    #[serde(default)]
    borrowing_limit: Option<Q>,
    #[serde(default)]
    lending_limit: Option<Q>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdmittedSpec {
    name: String,
    cq: String,
    priority: i32,
    created: i64,
    admitted_at: i64,
    #[serde(rename = "podSets")]
    pod_sets: Vec<PodSetDef>,
    /// pod set -> resource -> flavor
    flavors: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    evicting: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingSpec {
    name: String,
    cq: String,
    priority: i32,
    created: i64,
    #[serde(rename = "podSets")]
    pod_sets: Vec<PodSetDef>,
    /// pod set -> resource -> {flavor, mode}; Kueue's GetTargets input.
    #[serde(default)]
    fixed_assignment: Option<BTreeMap<String, BTreeMap<String, FixedDef>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedDef {
    flavor: String,
    mode: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PodSetDef {
    name: String,
    count: u32,
    #[serde(default, rename = "minCount")]
    min_count: Option<u32>,
    requests: BTreeMap<String, Q>,
}

/// workload -> pod set -> resource -> flavor
type Flavors = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    admitted: Flavors,
    #[serde(default)]
    admitted_counts: BTreeMap<String, BTreeMap<String, u32>>,
    preempted: Vec<String>,
    #[serde(default)]
    preemption_reasons: BTreeMap<String, String>,
    pending: Vec<String>,
    #[serde(default)]
    #[allow(dead_code)]
    inadmissible: Vec<String>,
    #[allow(dead_code)]
    notes: String,
}

/// A quantity as the YAML holds it: a string (`2000m`, `3Gi`) or a number.
#[derive(Clone, Deserialize)]
#[serde(untagged)]
enum Q {
    Text(String),
    Int(u64),
    Float(f64),
}

impl Q {
    fn text(&self) -> String {
        match self {
            Q::Text(s) => s.clone(),
            Q::Int(i) => i.to_string(),
            Q::Float(f) => f.to_string(),
        }
    }

    fn quantity(&self) -> Quantity {
        let text = self.text();
        text.parse()
            .unwrap_or_else(|e| panic!("quantity {text:?}: {e:?}"))
    }

    fn weight(&self) -> FairWeight {
        let text = self.text();
        text.parse()
            .unwrap_or_else(|e| panic!("weight {text:?}: {e:?}"))
    }
}

// ---------------------------------------------------------------------------
// Building fleetq's view of a case.

/// Kueue names to names fleetq's validation accepts, per kind of object.
#[derive(Default)]
struct Names {
    flavors: BTreeMap<String, String>,
    flavors_back: BTreeMap<String, String>,
    cohorts: BTreeMap<String, String>,
    queues: BTreeMap<String, String>,
}

/// Lowercase, `_` as `-`, made unique among `taken`.
fn dns_name(name: &str, taken: &BTreeMap<String, String>) -> String {
    let base: String = name
        .chars()
        .map(|c| {
            if c == '_' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    let mut candidate = base.clone();
    let mut n = 2;
    while taken.values().any(|v| *v == candidate) {
        candidate = format!("{base}-{n}");
        n += 1;
    }
    candidate
}

impl Names {
    fn from_case(case: &Case) -> Names {
        let mut names = Names::default();
        for f in &case.config.flavors {
            let n = dns_name(f, &names.flavors);
            names.flavors_back.insert(n.clone(), f.clone());
            names.flavors.insert(f.clone(), n);
        }
        let mut cohorts: Vec<&String> = case.config.cohorts.iter().map(|c| &c.name).collect();
        cohorts.extend(case.config.cohorts.iter().filter_map(|c| c.parent.as_ref()));
        cohorts.extend(
            case.config
                .cluster_queues
                .iter()
                .filter_map(|q| q.cohort.as_ref()),
        );
        for c in cohorts {
            if !names.cohorts.contains_key(c) {
                let n = dns_name(c, &names.cohorts);
                names.cohorts.insert(c.clone(), n);
            }
        }
        for q in &case.config.cluster_queues {
            let n = dns_name(&q.name, &names.queues);
            names.queues.insert(q.name.clone(), n);
        }
        names
    }

    fn flavor(&self, f: &str) -> String {
        self.flavors
            .get(f)
            .unwrap_or_else(|| panic!("flavor {f} is not in config.flavors"))
            .clone()
    }

    fn flavor_back(&self, f: &str) -> String {
        self.flavors_back
            .get(f)
            .cloned()
            .unwrap_or_else(|| f.to_string())
    }

    fn queue(&self, q: &str) -> String {
        self.queues
            .get(q)
            .unwrap_or_else(|| panic!("ClusterQueue {q} is not defined"))
            .clone()
    }
}

fn groups(names: &Names, defs: &[GroupDef], notes: &mut Vec<String>) -> Vec<ResourceGroup> {
    defs.iter()
        .map(|g| ResourceGroup {
            covered_resources: g.covered.clone(),
            flavors: g
                .flavors
                .iter()
                .map(|f| {
                    for r in f.resources.keys() {
                        assert!(g.covered.contains(r), "{r} is not covered by its group");
                    }
                    FlavorQuotas {
                        name: names.flavor(&f.name),
                        // In covered order, as fleetq's validation wants.
                        resources: g
                            .covered
                            .iter()
                            .map(|r| match f.resources.get(r) {
                                Some(q) => ResourceQuota {
                                    name: r.clone(),
                                    nominal_quota: q.nominal.quantity(),
                                    borrowing_limit: q.borrowing_limit.as_ref().map(Q::quantity),
                                    lending_limit: q.lending_limit.as_ref().map(Q::quantity),
                                },
                                None => {
                                    notes.push(format!(
                                        "flavor {} has no quota for covered {r}: nominal 0",
                                        f.name
                                    ));
                                    ResourceQuota {
                                        name: r.clone(),
                                        ..ResourceQuota::default()
                                    }
                                }
                            })
                            .collect(),
                    }
                })
                .collect(),
        })
        .collect()
}

fn weight(w: &Option<Q>) -> Option<FairSharing> {
    w.as_ref().map(|w| FairSharing {
        weight: Some(w.weight()),
    })
}

/// The configuration and the fleetq validation errors it has, if any.
fn build_config(case: &Case, names: &Names, notes: &mut Vec<String>) -> (Config, Vec<String>) {
    let mut objects = Vec::new();
    for f in &case.config.flavors {
        objects.push(Object::ResourceFlavor(ResourceFlavor {
            name: names.flavor(f),
            spec: ResourceFlavorSpec::default(),
        }));
    }
    for c in &case.config.cohorts {
        objects.push(Object::Cohort(Cohort {
            name: names.cohorts[&c.name].clone(),
            spec: CohortSpec {
                parent: c.parent.as_ref().map(|p| names.cohorts[p].clone()),
                resource_groups: groups(names, &c.resource_groups, notes),
                fair_sharing: weight(&c.fair_weight),
            },
        }));
    }
    for q in &case.config.cluster_queues {
        let bwc = q
            .preemption
            .borrow_within_cohort
            .as_ref()
            .map(|b| BorrowWithinCohort {
                policy: b.policy,
                max_priority_threshold: b.max_priority_threshold,
            })
            .unwrap_or_default();
        objects.push(Object::ClusterQueue(ClusterQueue {
            name: names.queue(&q.name),
            spec: ClusterQueueSpec {
                cohort: q.cohort.as_ref().map(|c| names.cohorts[c].clone()),
                resource_groups: groups(names, &q.resource_groups, notes),
                queueing_strategy: q.strategy,
                flavor_fungibility: FlavorFungibility {
                    when_can_borrow: q.flavor_fungibility.when_can_borrow,
                    when_can_preempt: q.flavor_fungibility.when_can_preempt,
                },
                preemption: PreemptionPolicy {
                    reclaim_within_cohort: q.preemption.reclaim_within_cohort,
                    borrow_within_cohort: bwc,
                    within_cluster_queue: q.preemption.within_cluster_queue,
                },
                fair_sharing: weight(&q.fair_weight),
                ..ClusterQueueSpec::default()
            },
        }));
    }
    let mut config = Config::default();
    for o in objects {
        config.upsert(o).expect("configuration objects only");
    }
    let errors = config.validate().iter().map(|e| format!("{e:?}")).collect();
    (config, errors)
}

/// One cluster with every flavor of the case and, of every resource, twice
/// what all quotas and all workloads of the case add up to (at least
/// 100000 units), so that it never binds.
fn big_cluster(case: &Case, names: &Names) -> Cluster {
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |r: &str, q: Quantity| {
        let slot = total.entry(r.to_string()).or_default();
        *slot = slot.saturating_add(q.milli());
    };
    let all_groups = case
        .config
        .cluster_queues
        .iter()
        .flat_map(|q| &q.resource_groups)
        .chain(case.config.cohorts.iter().flat_map(|c| &c.resource_groups));
    for g in all_groups {
        for f in &g.flavors {
            for (r, q) in &f.resources {
                add(r, q.nominal.quantity());
            }
        }
    }
    let pod_sets = case
        .admitted
        .iter()
        .flat_map(|w| &w.pod_sets)
        .chain(case.pending.iter().flat_map(|w| &w.pod_sets));
    for ps in pod_sets {
        for (r, q) in &ps.requests {
            add(r, q.quantity().saturating_mul(u64::from(ps.count)));
        }
    }
    let mut capacity = BTreeMap::new();
    for f in &case.config.flavors {
        let resources = total
            .iter()
            .map(|(r, &m)| {
                let q = Quantity::from_milli(m.saturating_mul(2)).max(Quantity::units(100_000));
                (r.clone(), q)
            })
            .collect();
        capacity.insert(names.flavor(f), resources);
    }
    Cluster {
        nodes: Vec::new(),
        name: "big".into(),
        labels: BTreeMap::new(),
        capacity,
        state: ClusterState::Ready,
    }
}

fn at(relative: i64) -> Timestamp {
    if relative == -1000 {
        Timestamp::ZERO
    } else {
        Timestamp::from_secs(NOW_SECS.checked_add_signed(relative).expect("time"))
    }
}

fn workload(key: &str, pod_sets: &[PodSetDef]) -> Workload {
    let (namespace, name) = key.split_once('/').unwrap_or(("ns", key));
    Workload {
        namespace: namespace.to_string(),
        name: name.to_string(),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: "lq".into(),
            pod_sets: pod_sets
                .iter()
                .map(|ps| PodSet {
                    name: ps.name.clone(),
                    count: ps.count,
                    min_count: ps.min_count,
                    requests: ps
                        .requests
                        .iter()
                        .map(|(r, q)| (r.clone(), q.quantity()))
                        .collect(),
                    topology_request: None,
                })
                .collect(),
            ..WorkloadSpec::default()
        },
    }
}

fn pending_workload(
    id: u64,
    key: &str,
    queue: String,
    priority: i32,
    created: i64,
    pod_sets: &[PodSetDef],
) -> PendingWorkload {
    let w = workload(key, pod_sets);
    PendingWorkload {
        id,
        local_queue: format!("{}/lq", w.namespace),
        workload: Arc::new(w),
        cluster_queue: queue,
        priority,
        created_at: at(created),
        not_before: None,
        nominated: false,
        borrow_preemptions: 0,
        reclaimed: 0,
        reclaimed_for: None,
    }
}

/// The assignment an admitted workload of the case holds.
fn held_assignment(names: &Names, w: &AdmittedSpec) -> Assignment {
    let mut usage = FlavorUsage::new();
    let mut pod_sets = Vec::new();
    for ps in &w.pod_sets {
        let mut flavors = BTreeMap::new();
        for (r, q) in &ps.requests {
            let q = q.quantity();
            if q.is_zero() {
                continue;
            }
            let flavor = w
                .flavors
                .get(&ps.name)
                .and_then(|f| f.get(r))
                .unwrap_or_else(|| panic!("{}: no flavor for {}/{r}", w.name, ps.name));
            let flavor = names.flavor(flavor);
            let slot = usage
                .entry(FlavorResource::new(&flavor, r))
                .or_insert(Quantity::ZERO);
            *slot = slot.saturating_add(q.saturating_mul(u64::from(ps.count)));
            flavors.insert(r.clone(), flavor);
        }
        pod_sets.push(PodSetAssignment {
            name: ps.name.clone(),
            count: ps.count,
            flavors,
            nodes: Vec::new(),
        });
    }
    Assignment {
        cluster: "big".into(),
        pod_sets,
        usage,
    }
}

fn scheduler_config(case: &Case) -> SchedulerConfig {
    let mut cfg = SchedulerConfig {
        fair_sharing: case.fair_sharing,
        ..SchedulerConfig::default()
    };
    if let Some(strategies) = &case.fair_sharing_strategies {
        cfg.fair_sharing_strategies = strategies
            .iter()
            .map(|s| match s.as_str() {
                "LessThanOrEqualToFinalShare" => FairSharingStrategy::LessThanOrEqualToFinalShare,
                "LessThanInitialShare" => FairSharingStrategy::LessThanInitialShare,
                other => panic!("unknown fair sharing strategy {other}"),
            })
            .collect();
    }
    cfg
}

/// A case set up in a snapshot, with the workloads' names by id.
struct Replay {
    snap: Snapshot,
    names_of: BTreeMap<u64, String>,
    cq_of: BTreeMap<String, String>,
}

/// Sets the case up: its admitted workloads hold their quota, its pending
/// ones are queued.
fn set_up(case: &Case, names: &Names, config: Config) -> Replay {
    let mut snap = Snapshot::new(config, &[big_cluster(case, names)]);
    let mut names_of = BTreeMap::new();
    let mut cq_of = BTreeMap::new();
    let mut next = 1;
    let mut admitted: Vec<&AdmittedSpec> = case.admitted.iter().collect();
    admitted.sort_by(|a, b| b.name.cmp(&a.name));
    for w in admitted {
        let id = next;
        next += 1;
        let pending = pending_workload(
            id,
            &w.name,
            names.queue(&w.cq),
            w.priority,
            w.created,
            &w.pod_sets,
        );
        snap.restore_admitted(AdmittedWorkload {
            pending,
            assignment: held_assignment(names, w),
            admitted_at: at(w.admitted_at),
            evicting: w.evicting,
            budget_charge: 0,
        })
        .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        names_of.insert(id, w.name.clone());
        cq_of.insert(w.name.clone(), w.cq.clone());
    }
    let mut pending: Vec<&PendingSpec> = case.pending.iter().collect();
    pending.sort_by(|a, b| a.name.cmp(&b.name));
    for w in pending {
        let id = next;
        next += 1;
        snap.add_pending(pending_workload(
            id,
            &w.name,
            names.queue(&w.cq),
            w.priority,
            w.created,
            &w.pod_sets,
        ))
        .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        names_of.insert(id, w.name.clone());
        cq_of.insert(w.name.clone(), w.cq.clone());
    }
    Replay {
        snap,
        names_of,
        cq_of,
    }
}

/// What one fleetq cycle did, in the case's names.
struct Got {
    admitted: Flavors,
    counts: BTreeMap<String, BTreeMap<String, u32>>,
    /// victim -> reason
    preempted: BTreeMap<String, String>,
    /// preemptor -> victims
    preemptors: BTreeMap<String, BTreeSet<String>>,
    /// Why each workload left pending waits.
    reasons: BTreeMap<String, PendingReason>,
}

fn outcome(replay: &Replay, names: &Names, decisions: &Decisions) -> Got {
    let name = |id: &u64| replay.names_of[id].clone();
    let mut admitted = Flavors::new();
    let mut counts: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    for a in &decisions.admissions {
        let wl = name(&a.workload);
        for ps in &a.assignment.pod_sets {
            admitted.entry(wl.clone()).or_default().insert(
                ps.name.clone(),
                ps.flavors
                    .iter()
                    .map(|(r, f)| (r.clone(), names.flavor_back(f)))
                    .collect(),
            );
            counts
                .entry(wl.clone())
                .or_default()
                .insert(ps.name.clone(), ps.count);
        }
    }
    let mut preempted = BTreeMap::new();
    let mut preemptors: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &decisions.preemptions {
        preempted.insert(name(&p.victim), format!("{:?}", p.reason));
        preemptors
            .entry(name(&p.preemptor))
            .or_default()
            .insert(name(&p.victim));
    }
    let mut reasons = BTreeMap::new();
    for (id, wl) in &replay.names_of {
        if replay.snap.get_pending(*id).is_none() || admitted.contains_key(wl) {
            continue;
        }
        if let Some(r) = decisions.reason_for(*id, &names.queue(&replay.cq_of[wl])) {
            reasons.insert(wl.clone(), r.clone());
        }
    }
    Got {
        admitted,
        counts,
        preempted,
        preemptors,
        reasons,
    }
}

fn show_set<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let v: Vec<&str> = names.into_iter().map(String::as_str).collect();
    format!("[{}]", v.join(", "))
}

fn show_flavors(f: &BTreeMap<String, BTreeMap<String, String>>) -> String {
    let parts: Vec<String> = f
        .iter()
        .map(|(ps, rs)| {
            let rs: Vec<String> = rs.iter().map(|(r, fl)| format!("{r}={fl}")).collect();
            format!("{ps}:{}", rs.join(","))
        })
        .collect();
    parts.join(" ")
}

/// The differences between what Kueue expects and what fleetq did; empty
/// when they agree.
fn compare(case: &Case, got: &Got) -> Vec<String> {
    let exp = &case.expected;
    let mut diffs = Vec::new();
    let exp_adm: BTreeSet<&String> = exp.admitted.keys().collect();
    let got_adm: BTreeSet<&String> = got.admitted.keys().collect();
    if exp_adm != got_adm {
        let got_shown: Vec<String> = got_adm
            .iter()
            .map(|wl| {
                if exp_adm.contains(wl) {
                    wl.to_string()
                } else {
                    format!(
                        "{wl} ({}; pods {:?})",
                        show_flavors(&got.admitted[*wl]),
                        got.counts[*wl]
                    )
                }
            })
            .collect();
        diffs.push(format!(
            "admitted: expected {} got {}",
            show_set(exp_adm.iter().copied()),
            show_set(&got_shown)
        ));
    }
    for wl in exp_adm.intersection(&got_adm) {
        let (e, g) = (&exp.admitted[*wl], &got.admitted[*wl]);
        if e != g {
            diffs.push(format!(
                "flavors of {wl}: expected {} got {}",
                show_flavors(e),
                show_flavors(g)
            ));
        }
        let spec = case.pending.iter().find(|p| &p.name == *wl);
        let expected_counts: BTreeMap<String, u32> = match exp.admitted_counts.get(*wl) {
            Some(c) => spec
                .map(|s| {
                    s.pod_sets
                        .iter()
                        .map(|ps| {
                            (
                                ps.name.clone(),
                                c.get(&ps.name).copied().unwrap_or(ps.count),
                            )
                        })
                        .collect()
                })
                .unwrap_or_else(|| c.clone()),
            None => spec
                .map(|s| {
                    s.pod_sets
                        .iter()
                        .map(|ps| (ps.name.clone(), ps.count))
                        .collect()
                })
                .unwrap_or_default(),
        };
        if let Some(g) = got.counts.get(*wl) {
            if &expected_counts != g {
                diffs.push(format!(
                    "pod counts of {wl}: expected {expected_counts:?} got {g:?}"
                ));
            }
        }
    }
    // A victim already being evicted before the cycle gets no new
    // Preempted condition in Kueue either (its reason is written as
    // "(already evicting)"): fleetq must pick no new victim and have the
    // preemptor wait for the evicting ones.
    let evicting: BTreeSet<&String> = exp
        .preemption_reasons
        .iter()
        .filter(|(_, r)| r.as_str() == ALREADY_EVICTING)
        .map(|(n, _)| n)
        .collect();
    if !evicting.is_empty() {
        for p in &case.pending {
            let waits = got.reasons.get(&p.name).is_some_and(|r| {
                r.kind == ReasonKind::Preempting
                    && r.message.contains(&format!(
                        "waiting for {} evicted workload(s)",
                        evicting.len()
                    ))
            });
            if !waits {
                diffs.push(format!(
                    "{} should wait for the evicting {}; got {}",
                    p.name,
                    show_set(evicting.iter().copied()),
                    got.reasons
                        .get(&p.name)
                        .map_or("no reason".to_string(), |r| r.to_string())
                ));
            }
        }
    }
    let exp_pre: BTreeSet<&String> = exp
        .preempted
        .iter()
        .filter(|n| !evicting.contains(n))
        .collect();
    let got_pre: BTreeSet<&String> = got.preempted.keys().collect();
    if exp_pre != got_pre {
        diffs.push(format!(
            "preempted: expected {} got {}",
            show_set(exp_pre.iter().copied()),
            show_set(got_pre.iter().copied())
        ));
    }
    for (victim, reason) in &exp.preemption_reasons {
        if evicting.contains(victim) {
            continue;
        }
        if let Some(g) = got.preempted.get(victim) {
            if g != reason {
                diffs.push(format!("reason of {victim}: expected {reason} got {g}"));
            }
        }
    }
    // The pending set follows from the admitted one; checked for the
    // encoding's sake.
    let all: BTreeSet<&String> = case.pending.iter().map(|p| &p.name).collect();
    let exp_pending: BTreeSet<&String> = exp.pending.iter().collect();
    let derived: BTreeSet<&String> = all.difference(&exp_adm).copied().collect();
    assert_eq!(
        exp_pending, derived,
        "{}: expected.pending is not the complement of expected.admitted",
        case.id
    );
    diffs
}

/// Replays one case; returns the verdict and diagnostic notes.
/// Cycles a case may take to settle after Kueue's one (victims stop and
/// are requeued, preemptors admitted, requeued victims placed where they
/// fit). The cases hold at most a dozen workloads; a loop shows as a run
/// past this.
const SETTLE_CYCLES: usize = 40;

/// Runs a case on from the cycle Kueue checks to a settled state, as the
/// ledger would: every preemption is re-checked by apply()'s rule
/// (`policy::check_scope`, the function the ledger calls) and every
/// admission by the snapshot's re-validation (`Snapshot::apply`); a
/// preemptor is nominated; each victim stops and is requeued with its
/// priority and creation time, counting the preemption as the ledger's
/// history does. Returns what broke: a decision apply() refuses, a broken
/// invariant, a workload preempted more than twice, or no settling within
/// [`SETTLE_CYCLES`].
fn settle(
    replay: &mut Replay,
    cfg: &SchedulerConfig,
    first: Decisions,
    limits_held: bool,
) -> Vec<String> {
    let name = |replay: &Replay, id: u64| replay.names_of.get(&id).cloned().unwrap_or_default();
    let mut broken = Vec::new();
    let mut preempted: BTreeMap<u64, usize> = BTreeMap::new();
    let mut decisions = first;
    for cycle in 0..SETTLE_CYCLES {
        let now = Timestamp::from_secs(NOW_SECS + cycle as u64);
        if decisions.admissions.is_empty() && decisions.preemptions.is_empty() {
            return broken;
        }
        for p in &decisions.preemptions {
            let (Some(preemptor), Some(victim)) = (
                replay.snap.get_pending(p.preemptor),
                replay.snap.get_admitted(p.victim),
            ) else {
                broken.push(format!(
                    "cycle {cycle}: {} preempts {}: one of them is gone",
                    name(replay, p.preemptor),
                    name(replay, p.victim)
                ));
                continue;
            };
            let proposed = policy::Proposed {
                preemptor_cq: &preemptor.cluster_queue,
                preemptor: policy::Rank {
                    priority: preemptor.priority,
                    created_at: preemptor.created_at,
                },
                victim_cq: &victim.pending.cluster_queue,
                victim: policy::Rank {
                    priority: victim.pending.priority,
                    created_at: victim.pending.created_at,
                },
                victim_borrow_preemptions: victim.pending.borrow_preemptions,
                preemptor_reclaimed: preemptor.reclaimed,
                reason: p.reason,
            };
            if let Err(e) = policy::check_scope(replay.snap.tree(), replay.snap.config(), &proposed)
            {
                broken.push(format!(
                    "cycle {cycle}: apply() refuses {} preempting {}: {e}",
                    name(replay, p.preemptor),
                    name(replay, p.victim)
                ));
            }
            let n = preempted.entry(p.victim).or_default();
            *n += 1;
            if *n > 2 {
                broken.push(format!(
                    "cycle {cycle}: {} preempted {n} times",
                    name(replay, p.victim)
                ));
            }
        }
        for (id, e) in replay.snap.apply(&decisions, now) {
            broken.push(format!(
                "cycle {cycle}: apply() refuses the decision for {}: {e}",
                name(replay, id)
            ));
        }
        let violations = replay.snap.violations();
        if limits_held && !violations.is_empty() {
            broken.push(format!("cycle {cycle}: invariants broken: {violations:?}"));
        }
        if !broken.is_empty() {
            return broken;
        }
        for p in &decisions.preemptions {
            replay.snap.set_nominated(p.preemptor, true);
            replay.snap.set_nominated_on(p.preemptor, p.cluster.clone());
        }
        // The victims stop (their executors report them gone) and queue
        // again, as the ledger requeues an evicted workload.
        for p in &decisions.preemptions {
            let Ok(stopped) = replay.snap.release(p.victim, now) else {
                continue;
            };
            let mut again = stopped.pending;
            again.nominated = false;
            match p.reason {
                PreemptionReason::InCohortReclaimWhileBorrowing => again.borrow_preemptions += 1,
                PreemptionReason::InCohortReclamation => again.reclaimed += 1,
                PreemptionReason::InCohortFairSharing => {
                    again.reclaimed += 1;
                    again.borrow_preemptions += 1;
                }
                _ => {}
            }
            if let Err(e) = replay.snap.add_pending(again) {
                broken.push(format!("requeue of {}: {e}", name(replay, p.victim)));
                return broken;
            }
        }
        decisions = schedule(&replay.snap, now, cfg);
    }
    broken.push(format!(
        "not settled after {SETTLE_CYCLES} cycles: still deciding {} admissions and {} preemptions",
        decisions.admissions.len(),
        decisions.preemptions.len()
    ));
    broken
}

fn replay_case(case: &Case) -> (Vec<String>, Vec<String>, Vec<String>) {
    assert_eq!(
        case.kueue_commit,
        "ff69552e79ad21652c36caa97038382e55625cf7"
    );
    let mut notes = Vec::new();
    let names = Names::from_case(case);
    let (config, errors) = build_config(case, &names, &mut notes);
    if !errors.is_empty() {
        notes.push(format!(
            "config fails fleetq validation, replayed unvalidated: {}",
            errors.join(" | ")
        ));
    }
    if let Some(a) = &case.adapted {
        notes.push(format!("adapted case: {a}"));
    }
    for (gate, on) in &case.feature_gates {
        notes.push(format!(
            "Kueue runs with {gate}={on}; fleetq has no such switch"
        ));
    }
    let cfg = scheduler_config(case);
    let mut replay = set_up(case, &names, config);
    let violations = replay.snap.violations();
    let limits_held = violations.is_empty();
    if !limits_held {
        notes.push(format!(
            "state before the cycle breaks limits: {violations:?}"
        ));
    }
    let decisions = schedule(&replay.snap, Timestamp::from_secs(NOW_SECS), &cfg);
    let got = outcome(&replay, &names, &decisions);
    let diffs = compare(case, &got);
    if diffs.is_empty() {
        let broken = settle(&mut replay, &cfg, decisions, limits_held);
        return (diffs, notes, broken);
    }
    // Diagnostics for a difference: facts only, the causes are analysed
    // in docs/kueue-conformance.md.
    for (wl, reason) in &got.reasons {
        notes.push(format!("fleetq left {wl:?} pending: {reason}"));
    }
    for (preemptor, victims) in &got.preemptors {
        notes.push(format!("{preemptor} preempts {}", show_set(victims)));
    }
    let mut per_queue: BTreeMap<&String, usize> = BTreeMap::new();
    for wl in got.admitted.keys().chain(got.preemptors.keys()) {
        *per_queue.entry(&replay.cq_of[wl]).or_default() += 1;
    }
    for (cq, n) in per_queue.iter().filter(|(_, &n)| n > 1) {
        notes.push(format!(
            "fleetq admitted or nominated {n} workloads of ClusterQueue {cq} in one cycle"
        ));
    }
    for w in &case.pending {
        let Some(fixed) = &w.fixed_assignment else {
            continue;
        };
        let modes: Vec<String> = fixed
            .iter()
            .flat_map(|(ps, rs)| {
                rs.iter()
                    .map(move |(r, f)| format!("{ps}/{r}={}({})", f.flavor, f.mode))
            })
            .collect();
        notes.push(format!("Kueue's fixed assignment: {}", modes.join(" ")));
    }
    let broken = settle(&mut replay, &cfg, decisions, limits_held);
    (diffs, notes, broken)
}

#[test]
fn kueue_cases_replay() {
    let cases: Vec<Case> = serde_norway::from_str(CASES).expect("cases.yaml parses");
    assert_eq!(cases.len(), 177, "cases.yaml holds 177 cases");
    let ids: BTreeSet<&String> = cases.iter().map(|c| &c.id).collect();
    assert_eq!(ids.len(), cases.len(), "case ids are unique");
    let mut failures = Vec::new();
    let mut unsettled = Vec::new();
    let mut matched = 0;
    // test function -> (matched, total)
    let mut per_source: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut per_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for case in &cases {
        let result = catch_unwind(AssertUnwindSafe(|| replay_case(case)));
        let (diffs, notes, broken) = match result {
            Ok(r) => r,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                eprintln!("SETUP FAILED {}: {msg}", case.id);
                failures.push(format!("{}: {msg}", case.id));
                continue;
            }
        };
        for b in &broken {
            eprintln!("UNSETTLED {}: {b}", case.id);
            unsettled.push(format!("{}: {b}", case.id));
        }
        let source = per_source.entry(case.source.test.clone()).or_default();
        let kind = per_kind.entry(format!("{:?}", case.kind)).or_default();
        source.1 += 1;
        kind.1 += 1;
        let verdict = if diffs.is_empty() {
            matched += 1;
            source.0 += 1;
            kind.0 += 1;
            "match".to_string()
        } else {
            format!("differs: {}", diffs.join("; "))
        };
        eprintln!(
            "CASE\t{}\t{}\t{}\t{}",
            case.source.test, case.source.case, case.id, verdict
        );
        for n in notes {
            eprintln!("  note: {n}");
        }
    }
    eprintln!("SUMMARY matched {matched} of {}", cases.len());
    for (source, (m, t)) in &per_source {
        eprintln!("SUMMARY {source}: {m}/{t}");
    }
    for (kind, (m, t)) in &per_kind {
        eprintln!("SUMMARY kind {kind}: {m}/{t}");
    }
    assert!(
        failures.is_empty(),
        "cases that could not be set up: {failures:#?}"
    );
    assert!(
        unsettled.is_empty(),
        "cases where apply() refused the scheduler or nothing settled: {unsettled:#?}"
    );
    assert!(
        matched >= MATCH_FLOOR,
        "only {matched} Kueue cases match, below the floor of {MATCH_FLOOR}"
    );
}
