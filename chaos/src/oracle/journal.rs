//! What the executors really ran, from their own journals in simulated
//! time, against the quota actually in force at each moment (the
//! configurations the replicas accepted, from the earliest apply; a
//! refused change is never in force) and each cluster's devices.
//!
//! A run holds what its admission charged: the books' charge of that
//! workload and epoch. Physically running is a subset of reserved at
//! every instant (a run starts after its admission and its quota is
//! released only after it stopped or its cluster was fenced), so what
//! runs must fit the configuration in force whenever a run starts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetq_agent::executor::JournalEntry;
use fleetq_model::Config;

use super::quota::{cq_key, milli, Amounts, Tree};
use super::replica::{show, Held};
use crate::agents::{runs, Run};
use crate::sim::Violation;

/// Check names.
pub const CHECK_LEFT_RUNNING: &str = "journals: nothing left running (invariant 3)";
pub const CHECK_TWICE: &str = "journals: no workload runs twice at once (invariant 4)";
pub const CHECK_QUOTA: &str = "journals: quota in force (invariant 1)";
pub const CHECK_DEVICES: &str = "journals: devices (invariant 1)";
pub const CHECK_RESERVED: &str = "journals: every run has a reservation";
pub const CHECK_AGREE: &str = "journals: the executors agree with the ledger";

/// Devices per cluster: flavor -> resource -> milli.
pub type Devices = BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>;

/// Devices per cluster and node: node -> resource -> milli, for the
/// clusters whose agents report nodes (empty otherwise).
pub type NodeDevices = BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>;

/// What the journals are checked against.
pub struct Expected<'a> {
    /// Every reservation granted, by (workload, epoch).
    pub granted: &'a BTreeMap<(u64, u64), Held>,
    /// Accepted configurations: (ms in force from, index, configuration).
    pub timeline: &'a [(u64, u64, Arc<Config>)],
    pub devices: &'a Devices,
    /// The nodes' devices: the runs on a node at any moment fit it.
    pub nodes: &'a NodeDevices,
    /// Workloads the ledger says succeeded: their last run exited 0.
    pub succeeded: &'a BTreeSet<u64>,
}

fn fail(check: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { check, detail })
}

/// The configurations that may be in force at `t`: the last one applied
/// before `t`, and any applied at `t` itself (order unknown at a tie).
fn configs_at(timeline: &[(u64, u64, Arc<Config>)], t: u64) -> Vec<&Arc<Config>> {
    let mut before: Option<&Arc<Config>> = None;
    let mut at = Vec::new();
    for (ms, _, config) in timeline {
        if *ms < t {
            before = Some(config);
        } else if *ms == t {
            at.push(config);
        }
    }
    before.into_iter().chain(at).collect()
}

pub fn check(
    journals: &BTreeMap<String, Vec<JournalEntry>>,
    expected: &Expected<'_>,
) -> Result<(), Violation> {
    let mut all: Vec<(String, Run)> = Vec::new();
    for (cluster, entries) in journals {
        for r in runs(entries) {
            if r.end.is_none() {
                return fail(
                    CHECK_LEFT_RUNNING,
                    format!(
                        "workload {} epoch {} still runs on {cluster} after the run",
                        r.workload, r.epoch
                    ),
                );
            }
            all.push((cluster.clone(), r));
        }
    }
    check_twice(&all)?;
    let held = |i: usize| -> Option<&Held> {
        let r = &all[i].1;
        expected.granted.get(&(r.workload, r.epoch))
    };
    for (i, (cluster, r)) in all.iter().enumerate() {
        match held(i) {
            Some(h) if h.cluster == *cluster => {}
            Some(h) => {
                return fail(
                    CHECK_RESERVED,
                    format!(
                        "workload {} epoch {} ran on {cluster}, admitted to {}",
                        r.workload, r.epoch, h.cluster
                    ),
                )
            }
            None if r.end == Some(r.start) => {}
            None => {
                return fail(
                    CHECK_RESERVED,
                    format!(
                        "workload {} epoch {} ran on {cluster} from {}ms without any reservation",
                        r.workload, r.epoch, r.start
                    ),
                )
            }
        }
    }
    // Sweep over time: ends before starts at the same instant. A
    // violation names the runs active at that instant.
    let mut events: Vec<(u64, i8, usize)> = Vec::new();
    for (i, (_, r)) in all.iter().enumerate() {
        // A run that ended as it started (a failed start) held nothing.
        if r.end == Some(r.start) {
            continue;
        }
        events.push((r.start, 1, i));
        events.push((r.end.unwrap_or(u64::MAX), -1, i));
    }
    events.sort_by_key(|&(t, d, i)| (t, d, i));
    let describe = |active: &BTreeSet<usize>| {
        active
            .iter()
            .map(|&i| {
                let (c, r) = &all[i];
                let cells = held(i).map(|h| show(&h.cells)).unwrap_or_default();
                let cq = held(i).map(|h| h.cluster_queue.as_str()).unwrap_or("?");
                format!(
                    "w{}/e{} on {c} in {cq} {cells} from {}ms",
                    r.workload, r.epoch, r.start
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut active: BTreeSet<usize> = BTreeSet::new();
    for (t, d, i) in events {
        if d < 0 {
            active.remove(&i);
            continue;
        }
        active.insert(i);
        let mut per_cluster: BTreeMap<&str, Amounts> = BTreeMap::new();
        let mut per_cq: BTreeMap<String, Amounts> = BTreeMap::new();
        let mut per_node: BTreeMap<(&str, &str), BTreeMap<&str, u64>> = BTreeMap::new();
        for &j in &active {
            let Some(h) = held(j) else { continue };
            for (node, resources) in &h.on_nodes {
                let slot = per_node
                    .entry((all[j].0.as_str(), node.as_str()))
                    .or_default();
                for (resource, v) in resources {
                    *slot.entry(resource.as_str()).or_default() += v;
                }
            }
            for (cell, v) in &h.cells {
                *per_cluster
                    .entry(all[j].0.as_str())
                    .or_default()
                    .entry(cell.clone())
                    .or_default() += v;
                *per_cq
                    .entry(cq_key(&h.cluster_queue))
                    .or_default()
                    .entry(cell.clone())
                    .or_default() += v;
            }
        }
        for (cluster, cells) in &per_cluster {
            for ((flavor, resource), used) in cells {
                let has = expected
                    .devices
                    .get(*cluster)
                    .and_then(|f| f.get(flavor))
                    .and_then(|r| r.get(resource));
                if let Some(&has) = has {
                    if *used > has {
                        return fail(
                            CHECK_DEVICES,
                            format!(
                                "{cluster} ran {} of {flavor}/{resource} at {t}ms; it has {}: {}",
                                milli(*used),
                                milli(has),
                                describe(&active)
                            ),
                        );
                    }
                }
            }
        }
        for ((cluster, node), resources) in &per_node {
            let Some(has) = expected.nodes.get(*cluster).and_then(|n| n.get(*node)) else {
                continue;
            };
            for (resource, used) in resources {
                if let Some(&cap) = has.get(*resource) {
                    if *used > cap {
                        return fail(
                            CHECK_DEVICES,
                            format!(
                                "node {node} of {cluster} ran {} of {resource} at {t}ms; it has {}: {}",
                                milli(*used),
                                milli(cap),
                                describe(&active)
                            ),
                        );
                    }
                }
            }
        }
        let configs = configs_at(expected.timeline, t);
        let verdicts: Vec<Vec<String>> = configs
            .iter()
            .map(|c| Tree::from_config(c).violations(&per_cq))
            .collect();
        if let Some(v) = verdicts
            .iter()
            .find(|_| verdicts.iter().all(|v| !v.is_empty()))
        {
            return fail(
                CHECK_QUOTA,
                format!(
                    "at {t}ms, under the configuration in force: {}; running: {}",
                    v.join("; "),
                    describe(&active)
                ),
            );
        }
    }
    for w in expected.succeeded {
        let last = all
            .iter()
            .filter(|(_, r)| r.workload == *w)
            .max_by_key(|(_, r)| r.start);
        if !last.is_some_and(|(_, r)| r.exited_ok) {
            return fail(
                CHECK_AGREE,
                format!(
                    "workload {w} succeeded in the ledger; its last run did not exit 0 ({last:?})"
                ),
            );
        }
    }
    Ok(())
}

/// No workload runs twice at once. A run is the half-open interval
/// [start, end): one that ends when the next starts does not overlap.
fn check_twice(all: &[(String, Run)]) -> Result<(), Violation> {
    let mut by_workload: BTreeMap<u64, Vec<&(String, Run)>> = BTreeMap::new();
    for run in all {
        by_workload.entry(run.1.workload).or_default().push(run);
    }
    for (w, mut list) in by_workload {
        list.sort_by_key(|(_, r)| r.start);
        for pair in list.windows(2) {
            let (ca, a) = pair[0];
            let (cb, b) = pair[1];
            let a_end = a.end.unwrap_or(u64::MAX);
            if b.start < a_end {
                return fail(
                    CHECK_TWICE,
                    format!(
                        "workload {w}: epoch {} on {ca} [{}ms, {a_end}ms) and epoch {} on {cb} from {}ms",
                        a.epoch, a.start, b.epoch, b.start
                    ),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::kueue::import_manifests;

    fn e(at_ms: u64, workload: u64, epoch: u64, event: &str, detail: &str) -> JournalEntry {
        JournalEntry {
            at_ms,
            workload,
            epoch,
            event: event.into(),
            pid: 0,
            detail: detail.into(),
        }
    }

    fn journals(
        c1: Vec<JournalEntry>,
        c2: Vec<JournalEntry>,
    ) -> BTreeMap<String, Vec<JournalEntry>> {
        [("c1".to_string(), c1), ("c2".to_string(), c2)].into()
    }

    fn config(gpus: u32) -> Arc<Config> {
        let mut config = Config::default();
        for doc in import_manifests(&crate::plan::config_with_quota(gpus)).expect("imports") {
            config.upsert(doc.object).expect("not a workload");
        }
        Arc::new(config)
    }

    fn held(cluster: &str, gpus: u64) -> Held {
        Held {
            cluster_queue: "team-a".into(),
            cluster: cluster.into(),
            epoch: 0,
            cells: [(
                ("h100-80gb".to_string(), "nvidia.com/gpu".to_string()),
                gpus * 1000,
            )]
            .into(),
            on_nodes: Default::default(),
        }
    }

    fn devices() -> Devices {
        ["c1", "c2"]
            .iter()
            .map(|c| {
                (
                    c.to_string(),
                    [(
                        "h100-80gb".to_string(),
                        [("nvidia.com/gpu".to_string(), 6000)].into(),
                    )]
                    .into(),
                )
            })
            .collect()
    }

    fn run_check(
        j: &BTreeMap<String, Vec<JournalEntry>>,
        granted: &[((u64, u64), Held)],
        timeline: &[(u64, u64, Arc<Config>)],
        succeeded: &[u64],
    ) -> Result<(), Violation> {
        let granted: BTreeMap<(u64, u64), Held> = granted.iter().cloned().collect();
        let succeeded: BTreeSet<u64> = succeeded.iter().copied().collect();
        let devices = devices();
        // Node n1 of c1 has 4 GPUs.
        let nodes: NodeDevices = [(
            "c1".to_string(),
            [(
                "n1".to_string(),
                [("nvidia.com/gpu".to_string(), 4000)].into(),
            )]
            .into(),
        )]
        .into();
        check(
            j,
            &Expected {
                granted: &granted,
                timeline,
                devices: &devices,
                nodes: &nodes,
                succeeded: &succeeded,
            },
        )
    }

    #[test]
    fn a_clean_move_passes() {
        let j = journals(
            vec![e(0, 1, 1, "started", ""), e(100, 1, 1, "stopped", "fenced")],
            vec![
                e(100, 1, 2, "started", ""),
                e(900, 1, 2, "exited", "exit 0"),
            ],
        );
        let granted = [((1, 1), held("c1", 4)), ((1, 2), held("c2", 4))];
        run_check(&j, &granted, &[(0, 1, config(8))], &[1]).unwrap();
    }

    #[test]
    fn each_violation_is_caught() {
        let timeline = [(0, 1, config(8))];
        let overlap = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "stopped", "")],
            vec![
                e(400, 1, 2, "started", ""),
                e(900, 1, 2, "exited", "exit 0"),
            ],
        );
        let both = [((1, 1), held("c1", 1)), ((1, 2), held("c2", 1))];
        let v = run_check(&overlap, &both, &timeline, &[1]).unwrap_err();
        assert_eq!(v.check, CHECK_TWICE);

        let open = journals(vec![e(0, 1, 1, "started", "")], vec![]);
        let v = run_check(&open, &both, &timeline, &[1]).unwrap_err();
        assert_eq!(v.check, CHECK_LEFT_RUNNING);

        let two = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "exited", "exit 0")],
            vec![
                e(100, 2, 1, "started", ""),
                e(600, 2, 1, "exited", "exit 0"),
            ],
        );
        let fives = [((1, 1), held("c1", 5)), ((2, 1), held("c2", 5))];
        let v = run_check(&two, &fives, &timeline, &[]).unwrap_err();
        assert_eq!(v.check, CHECK_QUOTA);
        // The quota raised to 10 before the second run started: fine.
        let raised = [(0, 1, config(8)), (50, 2, config(10))];
        run_check(&two, &fives, &raised, &[]).unwrap();
        // Cut to 4 at the very instant a 5-GPU run starts: in force or
        // not, the run fits one of the two.
        let cut = [(0, 1, config(8)), (0, 2, config(4))];
        let one = journals(
            vec![e(0, 1, 1, "started", ""), e(5, 1, 1, "exited", "exit 0")],
            vec![],
        );
        run_check(&one, &fives[..1], &cut, &[]).unwrap();

        let crowded = journals(
            vec![
                e(0, 1, 1, "started", ""),
                e(0, 2, 1, "started", ""),
                e(500, 1, 1, "exited", "exit 0"),
                e(500, 2, 1, "exited", "exit 0"),
            ],
            vec![],
        );
        let fours = [((1, 1), held("c1", 4)), ((2, 1), held("c1", 4))];
        let v = run_check(&crowded, &fours, &[(0, 1, config(16))], &[]).unwrap_err();
        assert_eq!(v.check, CHECK_DEVICES);

        let unreserved = journals(
            vec![e(0, 3, 7, "started", ""), e(5, 3, 7, "exited", "exit 0")],
            vec![],
        );
        let v = run_check(&unreserved, &[], &timeline, &[]).unwrap_err();
        assert_eq!(v.check, CHECK_RESERVED);

        let never_ok = journals(
            vec![e(0, 1, 1, "started", ""), e(500, 1, 1, "stopped", "")],
            vec![],
        );
        let v = run_check(&never_ok, &both, &timeline, &[1]).unwrap_err();
        assert_eq!(v.check, CHECK_AGREE);

        // Two runs of 3 GPUs on one 4-GPU node at once: within the
        // cluster's 6, over the node's 4.
        let on_n1 = |gpus: u64| {
            let mut h = held("c1", gpus);
            h.on_nodes = [(
                "n1".to_string(),
                [("nvidia.com/gpu".to_string(), gpus * 1000)].into(),
            )]
            .into();
            h
        };
        let threes = [((1, 1), on_n1(3)), ((2, 1), on_n1(3))];
        let v = run_check(&crowded, &threes, &[(0, 1, config(16))], &[]).unwrap_err();
        assert_eq!(v.check, CHECK_DEVICES);
        assert!(v.detail.contains("node n1 of c1 ran 6"), "{}", v.detail);
        // One after the other: fine.
        let apart = journals(
            vec![
                e(0, 1, 1, "started", ""),
                e(500, 1, 1, "exited", "exit 0"),
                e(600, 2, 1, "started", ""),
                e(900, 2, 1, "exited", "exit 0"),
            ],
            vec![],
        );
        run_check(&apart, &threes, &[(0, 1, config(16))], &[]).unwrap();
    }
}
