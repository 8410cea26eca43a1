//! Simulated GPU clusters embedded in the control plane, for `fleetq dev`,
//! tests and benchmarks: a static inventory and an executor that "runs" a
//! workload for its declared duration (`run.duration`; without one it runs
//! until cancelled). It acts only on the leader and reports through the
//! ledger like a real agent would: Running when admitted, Succeeded when
//! its time is up, Stopped when asked to stop. The real per-cluster agents
//! (`fleetq agent`) replace it in production.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::{Command, LeasePolicy, Ledger, Phase, StatusReport, WorkloadState};
use fleetq_model::{Cluster, ClusterState, Quantity, ResourceList, Timestamp};
use openraft::ServerState;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::proposer::Proposer;

/// One simulated cluster: its name and per-flavor inventory.
#[derive(Clone, Debug, PartialEq)]
pub struct SimulatedCluster {
    pub name: String,
    pub capacity: BTreeMap<String, ResourceList>,
}

impl SimulatedCluster {
    /// Parses `NAME:FLAVOR/RESOURCE=QTY,...` e.g.
    /// `dev-east:h100-80gb/nvidia.com/gpu=8,h100-80gb/nvidia.com/mig-1g.10gb=7`.
    /// A resource without a flavor prefix counts as `nvidia.com/gpu` of the
    /// named flavor: `dev-east:h100-80gb=8`.
    pub fn parse(spec: &str) -> Result<SimulatedCluster, String> {
        let (name, rest) = spec.split_once(':').ok_or_else(|| {
            format!("simulated cluster {spec:?}: expected NAME:FLAVOR=COUNT[,...]")
        })?;
        if name.is_empty() {
            return Err(format!("simulated cluster {spec:?}: the name is empty"));
        }
        let mut capacity: BTreeMap<String, ResourceList> = BTreeMap::new();
        for item in rest.split(',').filter(|s| !s.is_empty()) {
            let (key, qty) = item.split_once('=').ok_or_else(|| {
                format!("simulated cluster {name}: {item:?} is not FLAVOR[/RESOURCE]=QUANTITY")
            })?;
            let (flavor, resource) = match key.split_once('/') {
                Some((f, r)) => (f, r),
                None => (key, fleetq_model::resources::GPU),
            };
            let quantity = qty.parse::<Quantity>().map_err(|e| {
                format!("simulated cluster {name}: quantity of {flavor}/{resource}: {e}")
            })?;
            capacity
                .entry(flavor.to_string())
                .or_default()
                .insert(resource.to_string(), quantity);
        }
        if capacity.is_empty() {
            return Err(format!("simulated cluster {name}: no inventory given"));
        }
        Ok(SimulatedCluster {
            name: name.to_string(),
            capacity,
        })
    }

    fn as_cluster(&self) -> Cluster {
        Cluster {
            name: self.name.clone(),
            labels: BTreeMap::from([("fleetq.dev/simulated".to_string(), "true".to_string())]),
            capacity: self.capacity.clone(),
            state: ClusterState::Ready,
        }
    }
}

/// The two clusters `fleetq dev` starts with: 8 H100 80GB each plus one
/// H100 split into 7 `1g.10gb` MIG slices.
pub fn dev_clusters() -> Vec<SimulatedCluster> {
    ["dev-east", "dev-west"]
        .iter()
        .filter_map(|name| {
            SimulatedCluster::parse(&format!(
                "{name}:h100-80gb/nvidia.com/gpu=8,h100-80gb/nvidia.com/mig-1g.10gb=7"
            ))
            .ok()
        })
        .collect()
}

/// What the simulated executors want to tell the ledger now, and when they
/// next need to look.
fn due_commands(
    ledger: &Ledger,
    clusters: &[SimulatedCluster],
    now: Timestamp,
) -> (Vec<Command>, Option<Timestamp>) {
    let mut commands = Vec::new();
    for c in clusters {
        let registered = ledger.state().clusters.get(&c.name);
        if registered.is_none_or(|r| r.cluster.capacity != c.capacity) {
            commands.push(Command::RegisterCluster {
                cluster: c.as_cluster(),
                lease_policy: LeasePolicy::Fence,
            });
        }
    }
    let mut reports = Vec::new();
    let mut next: Option<Timestamp> = None;
    for record in ledger.state().workloads.values() {
        let Some(r) = &record.reservation else {
            continue;
        };
        if !clusters.iter().any(|c| c.name == r.assignment.cluster) {
            continue;
        }
        let report = |phase: Phase, message: &str| StatusReport {
            cluster: r.assignment.cluster.clone(),
            workload: record.id,
            epoch: r.epoch,
            phase,
            message: message.to_string(),
        };
        if r.stopping.is_some() {
            reports.push(report(Phase::Stopped, ""));
        } else if record.state == WorkloadState::Admitted {
            reports.push(report(Phase::Running, ""));
        } else if let (Some(started), Some(duration)) =
            (r.started_at, record.workload.spec.run.duration)
        {
            let done = started.saturating_add(duration);
            if done <= now {
                reports.push(report(Phase::Succeeded, "simulated run completed"));
            } else {
                next = Some(next.map_or(done, |n| n.min(done)));
            }
        }
    }
    if !reports.is_empty() {
        commands.push(Command::ReportStatus { reports });
    }
    (commands, next)
}

pub async fn run(
    clusters: Vec<SimulatedCluster>,
    handle: LedgerHandle,
    proposer: std::sync::Arc<Proposer>,
    clock: SharedClock,
    mut shutdown: watch::Receiver<bool>,
) {
    if clusters.is_empty() {
        return;
    }
    let mut applied = handle.applied();
    let mut metrics = proposer.raft().metrics();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let is_leader = metrics.borrow().state == ServerState::Leader;
        let mut wait = Duration::from_secs(1);
        if is_leader {
            let now = clock.now();
            let (commands, next) = {
                let sm = handle.read();
                due_commands(&sm.ledger, &clusters, now)
            };
            for command in commands {
                if let Err(e) = proposer.write_local(command).await.written() {
                    tracing::debug!(error = %e, "simulated cluster report not applied");
                }
            }
            if let Some(next) = next {
                wait = wait.min(Duration::from_millis(
                    next.millis().saturating_sub(now.millis()).max(1),
                ));
            }
        }
        tokio::select! {
            _ = applied.changed() => {}
            _ = tokio::time::sleep(wait) => {}
            _ = metrics.changed() => {}
            _ = shutdown.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flavor_and_resources() {
        let c =
            SimulatedCluster::parse("east:h100-80gb=8,h100-80gb/nvidia.com/mig-1g.10gb=7").unwrap();
        assert_eq!(c.name, "east");
        let h100 = &c.capacity["h100-80gb"];
        assert_eq!(h100["nvidia.com/gpu"], "8".parse::<Quantity>().unwrap());
        assert_eq!(
            h100["nvidia.com/mig-1g.10gb"],
            "7".parse::<Quantity>().unwrap()
        );
    }

    #[test]
    fn rejects_bad_specs_naming_the_part() {
        assert!(SimulatedCluster::parse("east")
            .unwrap_err()
            .contains("NAME:FLAVOR"));
        assert!(SimulatedCluster::parse("east:h100=abc")
            .unwrap_err()
            .contains("h100/nvidia.com/gpu"));
        assert!(SimulatedCluster::parse(":h100=1")
            .unwrap_err()
            .contains("name is empty"));
    }
}
