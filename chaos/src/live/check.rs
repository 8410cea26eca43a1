//! The checker, from the outside only: the public API of every replica,
//! the replicas' state hashes, and the process executors' own journals
//! (`journal.jsonl`: when each child really started and ended). DESIGN.md
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

use crate::agents::Run;
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

/// Devices over capacity on any cluster right now (one line each).
pub fn over_capacity(clients: &Clients) -> Vec<String> {
    let Some(clusters) = query(clients, &["get", "clusters", "-o", "json"]) else {
        return Vec::new(); // no answer now is not a violation
    };
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
    found
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

/// The final checks, after heal and quiesce.
pub fn final_checks(system: &System, outcomes: &Outcomes) -> Vec<String> {
    let mut violations = Vec::new();
    let workloads = match system.cli_json(&["get", "workloads", "-A", "-o", "json"]) {
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
    violations.extend(over_capacity(&system.clients()));
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

    // The executors' account.
    let mut runs: BTreeMap<u64, Vec<(String, Run)>> = BTreeMap::new();
    for a in &system.agents {
        for r in crate::agents::runs(&read_journal(&a.state_dir)) {
            runs.entry(r.workload)
                .or_default()
                .push((a.cluster.clone(), r));
        }
    }
    for (id, list) in &runs {
        violations.extend(interval_violations(*id, list));
    }
    let ids: BTreeMap<u64, &Value> = workloads
        .iter()
        .filter_map(|w| Some((w["id"].as_u64()?, w)))
        .collect();
    for (id, w) in &ids {
        if w["state"] != "Succeeded" {
            continue;
        }
        // Finished workloads no longer show their admission in a listing,
        // so the check is: some run of this workload really exited 0.
        let exited = runs.get(id).into_iter().flatten().any(|(_, r)| r.exited_ok);
        if !exited {
            violations.push(format!(
                "disagreement: the ledger says {} (id {id}) succeeded; no executor saw it exit 0",
                w["name"]
            ));
        }
    }

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

/// One workload's runs: each start must be closed by an end, and no two
/// runs (on any cluster, of any admission) may overlap in time.
fn interval_violations(id: u64, runs: &[(String, Run)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut intervals: Vec<(u64, u64, String, u64)> = Vec::new();
    for (cluster, r) in runs {
        match r.end {
            Some(end) => intervals.push((r.start, end, cluster.clone(), r.epoch)),
            None => out.push(format!(
                "leak: workload {id} epoch {} started on {cluster} and never ended",
                r.epoch
            )),
        }
    }
    intervals.sort();
    for pair in intervals.windows(2) {
        let ((_, end_a, ca, ea), (start_b, _, cb, eb)) = (&pair[0], &pair[1]);
        if start_b < end_a {
            out.push(format!(
                "double run: workload {id} epoch {ea} on {ca} and epoch {eb} on {cb} overlap by {} ms",
                end_a - start_b
            ));
        }
    }
    out
}
