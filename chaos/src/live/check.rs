//! The checker, from the outside only: the public API of every replica,
//! the replicas' state hashes, and the process executors' own journals
//! (`journal.jsonl`: when each child really started and ended). docs/architecture.md
//! §6's invariants as they can be seen from there:
//!
//! - no over-admission: a cluster's assigned devices never exceed its
//!   capacity (sampled throughout the run);
//! - no double run: a workload's journal intervals never overlap across
//!   clusters or admissions;
//! - nothing stranded or leaked: after heal and quiesce every workload is
//!   finished, no quota or device is still charged, and no child still
//!   runs;
//! - the ledger agrees with the executors: every Succeeded workload
//!   really exited 0 somewhere;
//! - nothing acknowledged is lost; unknown outcomes are allowed either way;
//! - every replica reaches the same state hash.

use std::collections::BTreeMap;

use fleetq_agent::executor::process::read_journal;

use serde_json::Value;

use super::load::Outcomes;
use std::time::Duration;

use super::system::{Clients, System};

/// A JSON answer from the first server that gives one.
fn query(clients: &Clients, args: &[&str]) -> Option<Value> {
    (0..clients.addrs.len()).find_map(|i| {
        let out = clients.cli_at(i, args, Duration::from_secs(5)).ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    })
}

/// Devices over capacity on any cluster right now (one line each), or
/// None when no server answered (counted by the sampler: too many
/// unanswered samples fail the run).
pub fn over_capacity(clients: &Clients) -> Option<Vec<String>> {
    let clusters = query(clients, &["get", "clusters", "-o", "json"])?;
    let mut found = Vec::new();
    for c in clusters.as_array().into_iter().flatten() {
        for f in c["capacity"].as_array().into_iter().flatten() {
            let (Some(cap), Some(assigned)) = (number(&f["capacity"]), number(&f["assigned"]))
            else {
                continue;
            };
            if assigned > cap {
                found.push(format!(
                    "over-admission: cluster {} {}/{} assigned {assigned} of {cap}",
                    c["name"], f["flavor"], f["resource"]
                ));
            }
        }
    }
    Some(found)
}

/// The most samples that may go unanswered, as a share of all.
pub const UNANSWERED_LIMIT: f64 = 0.10;

/// The sampler's account: over-capacity findings, samples taken, and
/// samples no server answered.
#[derive(Debug, Default)]
pub struct Samples {
    pub found: Vec<String>,
    pub taken: u64,
    pub unanswered: u64,
}

impl Samples {
    pub fn add(&mut self, sample: Option<Vec<String>>) {
        self.taken += 1;
        match sample {
            Some(found) => self.found.extend(found),
            None => self.unanswered += 1,
        }
    }

    /// The findings, plus a violation if too many samples went
    /// unanswered (a run that could not look cannot pass).
    pub fn violations(&self) -> Vec<String> {
        let mut out = self.found.clone();
        if self.taken > 0 && self.unanswered as f64 > UNANSWERED_LIMIT * self.taken as f64 {
            out.push(format!(
                "sampling: {} of {} over-capacity samples got no answer (limit {:.0}%)",
                self.unanswered,
                self.taken,
                UNANSWERED_LIMIT * 100.0
            ));
        }
        out
    }
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The final checks, after heal and quiesce.
pub fn final_checks(system: &System, outcomes: &Outcomes) -> Vec<String> {
    let mut violations = Vec::new();
    let workloads = match system.cli_json(&["get", "workloads", "-A", "-o", "fleetq-json"]) {
        Ok(Value::Array(w)) => w,
        other => return vec![format!("cannot list workloads: {other:?}")],
    };
    let by_name: BTreeMap<&str, &Value> = workloads
        .iter()
        .filter_map(|w| Some((w["name"].as_str()?, w)))
        .collect();

    for name in &outcomes.acked {
        if !by_name.contains_key(name.as_str()) {
            violations.push(format!(
                "lost: acknowledged submission {name} is not in the ledger"
            ));
        }
    }
    for w in &workloads {
        let state = w["state"].as_str().unwrap_or_default();
        if !matches!(state, "Succeeded" | "Cancelled") {
            violations.push(format!(
                "stranded: {} is {state} after quiesce ({})",
                w["name"], w["reason"]
            ));
        }
    }
    violations.extend(over_capacity(&system.clients()).unwrap_or_default());
    if let Ok(clusters) = system.cli_json(&["get", "clusters", "-o", "json"]) {
        for c in clusters.as_array().into_iter().flatten() {
            for f in c["capacity"].as_array().into_iter().flatten() {
                if number(&f["assigned"]).unwrap_or(0.0) > 0.0 {
                    violations.push(format!(
                        "leak: cluster {} still has {} {} assigned with nothing running",
                        c["name"], f["assigned"], f["resource"]
                    ));
                }
            }
        }
    }

    // The executors' account: their journals against the quota in force
    // (the harness applies one configuration and never changes it) and
    // each cluster's devices, by the oracle's journal check.
    violations.extend(journal_violations(system, outcomes, &workloads));

    // Every replica at the same state.
    let hashes: Vec<(usize, String)> = (0..system.servers.len())
        .filter_map(|i| {
            let s = system.status(i)?;
            Some((i + 1, s["stateHash"].as_str()?.to_string()))
        })
        .collect();
    if hashes.len() < system.servers.len() {
        violations.push(format!("only {} of 3 replicas answered", hashes.len()));
    }
    if hashes.windows(2).any(|w| w[0].1 != w[1].1) {
        violations.push(format!("replicas diverge: {hashes:?}"));
    }
    violations
}

/// The process executors' journals (`journal.jsonl`: when each child
/// really started and ended), checked as the simulator checks its own.
fn journal_violations(system: &System, outcomes: &Outcomes, workloads: &[Value]) -> Vec<String> {
    use crate::oracle::journal::{check, Devices, Expected};
    use crate::oracle::replica::Held;
    let Some(config) = crate::draw::parse(&super::system::config()) else {
        return vec!["harness: its own configuration does not parse".into()];
    };
    let cell = || ("h100-80gb".to_string(), "nvidia.com/gpu".to_string());
    let gpus_of: BTreeMap<u64, u64> = workloads
        .iter()
        .filter_map(|w| {
            let id = w["id"].as_u64()?;
            let gpus = outcomes.gpus.get(w["name"].as_str()?)?;
            Some((id, *gpus))
        })
        .collect();
    let mut journals = BTreeMap::new();
    let mut granted = BTreeMap::new();
    let mut devices = Devices::new();
    for a in &system.agents {
        let entries = read_journal(&a.state_dir);
        for r in crate::agents::runs(&entries) {
            let gpus = gpus_of.get(&r.workload).copied().unwrap_or(0);
            granted.insert(
                (r.workload, r.epoch),
                Held {
                    cluster_queue: "chaos".into(),
                    cluster: a.cluster.clone(),
                    epoch: r.epoch,
                    cells: [(cell(), gpus * 1000)].into(),
                    on_nodes: Default::default(),
                },
            );
        }
        devices.insert(
            a.cluster.clone(),
            [(
                cell().0,
                [(cell().1, super::system::AGENT_GPUS * 1000)].into(),
            )]
            .into(),
        );
        journals.insert(a.cluster.clone(), entries);
    }
    let succeeded = workloads
        .iter()
        .filter(|w| w["state"] == "Succeeded")
        .filter_map(|w| w["id"].as_u64())
        .collect();
    let timeline = [(0, 0, std::sync::Arc::new(config))];
    let no_nodes = Default::default();
    let expected = Expected {
        granted: &granted,
        timeline: &timeline,
        devices: &devices,
        nodes: &no_nodes,
        succeeded: &succeeded,
    };
    match check(&journals, &expected) {
        Ok(()) => Vec::new(),
        Err(v) => vec![format!("{}: {}", v.check, v.detail)],
    }
}
