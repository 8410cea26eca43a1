//! The Kueue configuration and workload mix a random plan draws: one to
//! four ClusterQueues, alone, in one cohort or in a nested cohort tree
//! (a cohort may hold quota of its own), nominal quotas with borrowing
//! and lending limits, two or three priorities, every preemption policy,
//! GPUs and MIG slices; workloads of 1, 2 or 4 GPUs or 1-2 MIG slices,
//! mostly low priority, many of them in one burst (the mix that once
//! sent preemption into a loop on `fleetq dev`).
//!
//! Drawn from a stream of their own ([`CONFIG_STREAM`]), so that a
//! seed's faults and timings stay what they were before configurations
//! were drawn.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::agents::{AGENTS, AGENT_GPUS, AGENT_MIG_SLICES, FLAVOR, GPU, MIG};
use crate::oracle::quota::{cq_key, Amounts, Tree};

/// Mixed into the seed for the configuration's own random stream.
pub const CONFIG_STREAM: u64 = 0xc0f1_9d2a_77e1;

/// One quota line: nominal, and the limits (None: unlimited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    pub nominal: u32,
    pub borrowing_limit: Option<u32>,
    pub lending_limit: Option<u32>,
}

/// A ClusterQueue of the drawn configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnQueue {
    pub name: String,
    pub cohort: Option<String>,
    pub gpu: Quota,
    pub mig: Quota,
    pub within_cluster_queue: &'static str,
    pub reclaim_within_cohort: &'static str,
    /// `borrowWithinCohort`: None (Never), or LowerPriority with an
    /// optional maxPriorityThreshold.
    pub borrow_within_cohort: Option<Option<i32>>,
    pub strict_fifo: bool,
}

/// A Cohort object of the drawn configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnCohort {
    pub name: String,
    pub parent: Option<String>,
    /// GPUs of its own (beside what its children lend).
    pub gpus: u32,
}

/// The configuration of a random plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnConfig {
    pub queues: Vec<DrawnQueue>,
    pub cohorts: Vec<DrawnCohort>,
    /// (name, value), lowest first.
    pub priorities: Vec<(&'static str, i32)>,
    /// Kueue's Configuration: fair sharing on, with these preemption
    /// strategies (empty: Kueue's default, both) and these weights per
    /// queue (None: unset, 1). Drawn by [`DrawnConfig::draw_fair_sharing`].
    pub fair_sharing: Option<FairSharing>,
}

/// Fair sharing as a plan draws it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FairSharing {
    pub strategies: Vec<&'static str>,
    /// Per queue, its `fairSharing.weight` as written, or None.
    pub weights: Vec<Option<&'static str>>,
}

/// Mixed into the seed for fair sharing's own stream: a seed's queues,
/// workloads and faults stay what they were before fair sharing was
/// drawn.
pub const FAIR_SHARING_STREAM: u64 = 0xfa12_5a3e_0b1d;

fn quota(rng: &mut StdRng, max: u32) -> Quota {
    let nominal = rng.gen_range(0..=max);
    Quota {
        nominal,
        borrowing_limit: rng.gen_ratio(1, 3).then(|| rng.gen_range(0..=max)),
        lending_limit: rng.gen_ratio(1, 3).then(|| rng.gen_range(0..=nominal)),
    }
}

impl DrawnConfig {
    pub fn draw(rng: &mut StdRng) -> DrawnConfig {
        let priorities = if rng.gen_bool(0.5) {
            vec![("low", 10), ("high", 1000)]
        } else {
            vec![("low", 10), ("mid", 100), ("high", 1000)]
        };
        let count = rng.gen_range(1..=4);
        // 0: every queue alone; 1: one cohort; 2: a nested tree.
        let shape = if count == 1 { 0 } else { rng.gen_range(0..3) };
        let mut cohorts = Vec::new();
        match shape {
            1 => cohorts.push(DrawnCohort {
                name: "pool".into(),
                parent: None,
                gpus: if rng.gen_ratio(1, 4) { 2 } else { 0 },
            }),
            2 => {
                cohorts.push(DrawnCohort {
                    name: "pool".into(),
                    parent: None,
                    gpus: if rng.gen_ratio(1, 4) { 2 } else { 0 },
                });
                for side in ["left", "right"] {
                    cohorts.push(DrawnCohort {
                        name: side.into(),
                        parent: Some("pool".into()),
                        gpus: if rng.gen_ratio(1, 4) { 1 } else { 0 },
                    });
                }
            }
            _ => {}
        }
        let queues = (0..count)
            .map(|i| {
                let cohort = match shape {
                    1 => Some("pool".to_string()),
                    2 => Some(["left", "right", "pool"][i % 3].to_string()),
                    _ => None,
                };
                let reclaim = ["Never", "LowerPriority", "Any"][rng.gen_range(0..3)];
                let borrow_within_cohort = (reclaim != "Never" && rng.gen_ratio(1, 3))
                    .then(|| rng.gen_bool(0.5).then_some(100));
                DrawnQueue {
                    name: format!("cq-{}", i + 1),
                    cohort,
                    gpu: quota(rng, 8),
                    mig: quota(rng, 5),
                    within_cluster_queue: ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
                        [rng.gen_range(0..3)],
                    reclaim_within_cohort: reclaim,
                    borrow_within_cohort,
                    strict_fifo: rng.gen_ratio(1, 5),
                }
            })
            .collect();
        let mut drawn = DrawnConfig {
            queues,
            cohorts,
            priorities,
            fair_sharing: None,
        };
        // Every workload needs a queue that can hold it: if the draw left
        // none able to hold anything, the first gets GPUs of its own (its
        // nominal quota is its own whatever the limits).
        let usable = |d: &DrawnConfig| {
            (0..d.queues.len()).any(|i| d.ceiling(i, GPU) > 0 || d.ceiling(i, MIG) > 0)
        };
        if !usable(&drawn) {
            drawn.queues[0].gpu.nominal = 2;
            drawn.queues[0].gpu.lending_limit = None;
        }
        drawn
    }

    /// One plan in three turns fair sharing on, with one of the
    /// strategy lists Kueue accepts and a weight per queue (unset, 0, 0.5,
    /// 1 or 2; 0 borrows only what nobody else wants).
    pub fn draw_fair_sharing(&mut self, rng: &mut StdRng) {
        if !rng.gen_ratio(1, 3) {
            return;
        }
        const FINAL: &str = "LessThanOrEqualToFinalShare";
        const INITIAL: &str = "LessThanInitialShare";
        let strategies = match rng.gen_range(0..4) {
            0 => vec![],
            1 => vec![FINAL],
            2 => vec![INITIAL],
            _ => vec![FINAL, INITIAL],
        };
        let weights = self
            .queues
            .iter()
            .map(|_| [None, Some("0"), Some("0.5"), Some("1"), Some("2")][rng.gen_range(0..5)])
            .collect();
        self.fair_sharing = Some(FairSharing {
            strategies,
            weights,
        });
    }

    /// Whether any queue may preempt.
    pub fn may_preempt(&self) -> bool {
        self.queues
            .iter()
            .any(|q| q.within_cluster_queue != "Never" || q.reclaim_within_cohort != "Never")
    }

    /// The manifests, with queue `cut`'s GPU quota set to the given
    /// nominal (a quota change during the run), if any.
    pub fn render(&self, cut: Option<(usize, u32)>) -> String {
        let mut y = String::new();
        let _ = write!(
            y,
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {FLAVOR}\n"
        );
        if let Some(fs) = &self.fair_sharing {
            let _ = write!(
                y,
                "---\napiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: true\n"
            );
            if !fs.strategies.is_empty() {
                let _ = writeln!(y, "  preemptionStrategies: [{}]", fs.strategies.join(", "));
            }
        }
        for (name, value) in &self.priorities {
            let _ = write!(
                y,
                "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\n"
            );
        }
        for c in &self.cohorts {
            let mut spec = String::new();
            if let Some(p) = &c.parent {
                let _ = writeln!(spec, "  parentName: {p}");
            }
            if c.gpus > 0 {
                let _ = write!(
                    spec,
                    "  resourceGroups:\n  - coveredResources: [\"{GPU}\"]\n    flavors:\n    - name: {FLAVOR}\n      resources:\n      - name: \"{GPU}\"\n        nominalQuota: {}\n",
                    c.gpus
                );
            }
            let _ =
                write!(
                y,
                "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata:\n  name: {}\n{}",
                c.name,
                if spec.is_empty() { "spec: {}\n".to_string() } else { format!("spec:\n{spec}") }
            );
        }
        for (i, q) in self.queues.iter().enumerate() {
            let gpu = match cut {
                Some((c, n)) if c == i => Quota {
                    nominal: n,
                    lending_limit: q.gpu.lending_limit.map(|l| l.min(n)),
                    ..q.gpu
                },
                _ => q.gpu,
            };
            let _ = write!(
                y,
                "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: {}\nspec:\n  namespaceSelector: {{}}\n  queueingStrategy: {}\n",
                q.name,
                if q.strict_fifo { "StrictFIFO" } else { "BestEffortFIFO" }
            );
            if let Some(c) = &q.cohort {
                let _ = writeln!(y, "  cohortName: {c}");
            }
            if let Some(w) = self
                .fair_sharing
                .as_ref()
                .and_then(|fs| fs.weights.get(i).copied().flatten())
            {
                let _ = writeln!(y, "  fairSharing:\n    weight: \"{w}\"");
            }
            let _ = write!(
                y,
                "  preemption:\n    withinClusterQueue: {}\n    reclaimWithinCohort: {}\n",
                q.within_cluster_queue, q.reclaim_within_cohort
            );
            if let Some(threshold) = q.borrow_within_cohort {
                y.push_str("    borrowWithinCohort:\n      policy: LowerPriority\n");
                if let Some(t) = threshold {
                    let _ = writeln!(y, "      maxPriorityThreshold: {t}");
                }
            }
            let _ = write!(
                y,
                "  resourceGroups:\n  - coveredResources: [\"{GPU}\", \"{MIG}\"]\n    flavors:\n    - name: {FLAVOR}\n      resources:\n"
            );
            for (resource, line) in [(GPU, gpu), (MIG, q.mig)] {
                let _ = write!(
                    y,
                    "      - name: \"{resource}\"\n        nominalQuota: {}\n",
                    line.nominal
                );
                if q.cohort.is_some() {
                    if let Some(b) = line.borrowing_limit {
                        let _ = writeln!(y, "        borrowingLimit: {b}");
                    }
                    if let Some(l) = line.lending_limit {
                        let _ = writeln!(y, "        lendingLimit: {l}");
                    }
                }
            }
            let _ = write!(
                y,
                "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: lq-{}\nspec:\n  clusterQueue: {}\n",
                i + 1,
                q.name
            );
        }
        y
    }

    /// The most of `resource` queue `i` can hold with every other queue
    /// idle, under the rendered configuration, capped by one cluster's
    /// devices (a workload lands on one cluster).
    pub fn ceiling(&self, i: usize, resource: &str) -> u32 {
        let config = match parse(&self.render(None)) {
            Some(c) => c,
            None => return 0,
        };
        let tree = Tree::from_config(&config);
        let per_cluster = if resource == GPU {
            AGENT_GPUS
        } else {
            AGENT_MIG_SLICES
        } as u32;
        let fits = |n: u32| {
            let usage = std::collections::BTreeMap::from([(
                cq_key(&self.queues[i].name),
                Amounts::from([(
                    (FLAVOR.to_string(), resource.to_string()),
                    u64::from(n) * 1000,
                )]),
            )]);
            tree.violations(&usage).is_empty()
        };
        (0..=per_cluster).rev().find(|&n| fits(n)).unwrap_or(0)
    }
}

/// A configuration from manifests (None if they do not import: a drawn
/// configuration always does; a test checks it).
pub fn parse(yaml: &str) -> Option<fleetq_model::Config> {
    let mut config = fleetq_model::Config::default();
    for doc in fleetq_model::kueue::import_manifests(yaml).ok()? {
        config.upsert(doc.object).ok()?;
    }
    config.validate().is_empty().then_some(config)
}

/// One drawn workload's shape: its LocalQueue (index), resource and
/// per-pod amount, priority class, and whether it comes in the burst.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrawnWorkload {
    pub queue: usize,
    pub resource: &'static str,
    pub amount: u32,
    pub priority_class: Option<&'static str>,
    pub burst: bool,
}

impl DrawnConfig {
    /// A workload that fits its queue alone (so every workload can be
    /// admitted once the others have ended: the progress bound holds).
    /// None if no queue can hold anything.
    pub fn draw_workload(&self, rng: &mut StdRng) -> Option<DrawnWorkload> {
        let ceilings: Vec<(u32, u32)> = (0..self.queues.len())
            .map(|i| (self.ceiling(i, GPU), self.ceiling(i, MIG)))
            .collect();
        let usable: Vec<usize> = (0..self.queues.len())
            .filter(|&i| ceilings[i].0 > 0 || ceilings[i].1 > 0)
            .collect();
        if usable.is_empty() {
            return None;
        }
        let queue = usable[rng.gen_range(0..usable.len())];
        let (gpus, migs) = ceilings[queue];
        let mig = migs > 0 && (gpus == 0 || rng.gen_ratio(2, 5));
        let (resource, amount) = if mig {
            (MIG, rng.gen_range(1..=2u32).min(migs))
        } else {
            let wanted = [1, 2, 4][rng.gen_range(0..3)];
            (GPU, wanted.min(gpus))
        };
        let priority_class = match rng.gen_range(0..10) {
            0..=5 => Some(self.priorities[0].0),
            6 | 7 => self.priorities.get(1).map(|p| p.0),
            _ => self.priorities.last().map(|p| p.0),
        };
        Some(DrawnWorkload {
            queue,
            resource,
            amount,
            priority_class,
            burst: rng.gen_bool(0.5),
        })
    }
}

/// The configuration stream of `seed`.
pub fn stream(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ CONFIG_STREAM)
}

/// Devices in all clusters together, per resource (for descriptions).
pub fn fleet() -> (u64, u64) {
    (AGENTS as u64 * AGENT_GPUS, AGENTS as u64 * AGENT_MIG_SLICES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drawn_configuration_imports_and_validates() {
        let mut shapes = std::collections::BTreeSet::new();
        let mut fair_drawn = 0;
        for seed in 0..300 {
            let drawn = DrawnConfig::draw(&mut stream(seed));
            let yaml = drawn.render(None);
            assert!(parse(&yaml).is_some(), "seed {seed}:\n{yaml}");
            let cut = drawn.render(Some((0, 1)));
            assert!(parse(&cut).is_some(), "seed {seed} cut:\n{cut}");
            shapes.insert((drawn.queues.len(), drawn.cohorts.len()));
            let mut fair = drawn.clone();
            fair.draw_fair_sharing(&mut StdRng::seed_from_u64(seed ^ FAIR_SHARING_STREAM));
            if fair.fair_sharing.is_some() {
                fair_drawn += 1;
                let yaml = fair.render(Some((0, 1)));
                let config = parse(&yaml).unwrap_or_else(|| panic!("seed {seed}:\n{yaml}"));
                assert!(
                    config
                        .settings
                        .as_ref()
                        .is_some_and(|s| s.fair_sharing_enabled()),
                    "seed {seed}"
                );
            }
            let mut rng = stream(seed);
            let _ = DrawnConfig::draw(&mut rng);
            assert!(
                drawn.draw_workload(&mut rng).is_some(),
                "seed {seed}: no usable queue"
            );
        }
        // One to four queues; no cohort, one, or a nested tree of three.
        for q in 1..=4 {
            assert!(shapes.iter().any(|s| s.0 == q), "{shapes:?}");
        }
        for c in [0, 1, 3] {
            assert!(shapes.iter().any(|s| s.1 == c), "{shapes:?}");
        }
        assert!((60..140).contains(&fair_drawn), "{fair_drawn} of 300");
    }

    #[test]
    fn drawn_workloads_fit_their_queue_alone() {
        for seed in 0..100 {
            let mut rng = stream(seed);
            let drawn = DrawnConfig::draw(&mut rng);
            for _ in 0..30 {
                let Some(w) = drawn.draw_workload(&mut rng) else {
                    continue;
                };
                assert!(w.amount >= 1);
                assert!(
                    w.amount <= drawn.ceiling(w.queue, w.resource),
                    "seed {seed}: {w:?}"
                );
            }
        }
    }
}
