//! Simulated GPU clusters embedded in the control plane, for `fleetq dev`,
//! tests and benchmarks: a static inventory and an executor that "runs" a
//! workload for its declared duration (`run.duration`; without one it runs
//! until cancelled). It acts only on the leader and reports through the
//! ledger like a real agent would: Running when admitted, Succeeded when
//! its time is up, Stopped when asked to stop. The real per-cluster agents
//! (`fleetq agent`) replace it in production.

use std::collections::BTreeMap;
use std::time::Duration;

use std::collections::BTreeSet;

use fleetq_ledger::store::{Change, LedgerHandle};
use fleetq_ledger::{Command, Epoch, LeasePolicy, Ledger, Phase, StatusReport, WorkloadState};
use fleetq_model::{Cluster, ClusterState, Node, Quantity, ResourceList, Timestamp};
use fleetq_scheduler::WorkloadId;
use openraft::ServerState;
use tokio::sync::broadcast;
use tokio::sync::watch;

use crate::clock::SharedClock;
use crate::raft::proposer::Proposer;

/// One simulated cluster: its name, per-flavor inventory and, when it
/// has them, its nodes (placement then puts each pod on one).
#[derive(Clone, Debug, PartialEq)]
pub struct SimulatedCluster {
    pub name: String,
    pub capacity: BTreeMap<String, ResourceList>,
    pub nodes: Vec<Node>,
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
            nodes: Vec::new(),
        })
    }

    fn as_cluster(&self) -> Cluster {
        Cluster {
            nodes: self.nodes.clone(),
            name: self.name.clone(),
            labels: BTreeMap::from([(
                crate::agents::leases::SIMULATED_LABEL.to_string(),
                "true".to_string(),
            )]),
            capacity: self.capacity.clone(),
            state: ClusterState::Ready,
        }
    }
}

/// The rack label of `fleetq dev`'s nodes, the broader level of the
/// sample's Topology `dev-racks` (`deploy/dev/sample.yaml`).
pub const DEV_RACK_LABEL: &str = "topology.fleetq.dev/rack";

/// The two clusters `fleetq dev` starts with: 8 H100 80GB each plus one
/// H100 split into 7 `1g.10gb` MIG slices, on three nodes in two racks:
/// `NAME-gpu-1` (rack 1) and `NAME-gpu-2` (rack 2) with 4 GPUs each, and
/// `NAME-mig-1` (rack 2) with the slices. A pod of more than 4 GPUs
/// therefore fits no node, as on real hardware of this shape.
pub fn dev_clusters() -> Vec<SimulatedCluster> {
    ["dev-east", "dev-west"]
        .iter()
        .filter_map(|name| {
            let mut c = SimulatedCluster::parse(&format!(
                "{name}:h100-80gb/nvidia.com/gpu=8,h100-80gb/nvidia.com/mig-1g.10gb=7"
            ))
            .ok()?;
            let node = |suffix: &str, rack: u32, resource: &str, n: u64| {
                let node_name = format!("{name}-{suffix}");
                Node {
                    labels: BTreeMap::from([
                        (DEV_RACK_LABEL.to_string(), format!("{name}-rack-{rack}")),
                        (
                            "nvidia.com/gpu.product".to_string(),
                            "NVIDIA-H100-80GB-HBM3".to_string(),
                        ),
                        (
                            fleetq_model::topology::HOSTNAME_LABEL.to_string(),
                            node_name.clone(),
                        ),
                    ]),
                    name: node_name,
                    flavor: "h100-80gb".to_string(),
                    allocatable: BTreeMap::from([(resource.to_string(), Quantity::units(n))]),
                    unschedulable: false,
                }
            };
            c.nodes = vec![
                node("gpu-1", 1, fleetq_model::resources::GPU, 4),
                node("gpu-2", 2, fleetq_model::resources::GPU, 4),
                node("mig-1", 2, "nvidia.com/mig-1g.10gb", 7),
            ];
            Some(c)
        })
        .collect()
}

/// The simulated executors' memory between wake-ups: which workloads to
/// finish when. Rebuilt from the ledger whenever this node becomes leader
/// or falls behind the change feed.
#[derive(Default)]
struct Executors {
    /// (done at, workload, epoch) of running workloads with a duration.
    timers: BTreeSet<(Timestamp, WorkloadId, Epoch)>,
}

impl Executors {
    /// Registrations the ledger lacks or has out of date.
    fn registrations(ledger: &Ledger, clusters: &[SimulatedCluster]) -> Vec<Command> {
        clusters
            .iter()
            .filter(|c| {
                ledger
                    .state()
                    .clusters
                    .get(&c.name)
                    .is_none_or(|r| r.cluster.capacity != c.capacity || r.cluster.nodes != c.nodes)
            })
            .map(|c| Command::RegisterCluster {
                cluster: c.as_cluster(),
                lease_policy: LeasePolicy::Fence,
            })
            .collect()
    }

    /// Reports for the given workloads plus every timer that is due.
    fn reports(
        &mut self,
        ledger: &Ledger,
        clusters: &[SimulatedCluster],
        ids: impl Iterator<Item = WorkloadId>,
        now: Timestamp,
    ) -> Vec<StatusReport> {
        let mut reports = Vec::new();
        for id in ids {
            let Some(record) = ledger.workload(id) else {
                continue;
            };
            let Some(r) = &record.reservation else {
                continue;
            };
            if !clusters.iter().any(|c| c.name == r.assignment.cluster) {
                continue;
            }
            let report = |phase: Phase, message: &str| StatusReport {
                cluster: r.assignment.cluster.clone(),
                workload: id,
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
                self.timers
                    .insert((started.saturating_add(duration), id, r.epoch));
            }
        }
        while let Some(&(done, id, epoch)) = self.timers.first() {
            if done > now {
                break;
            }
            self.timers.pop_first();
            let still_running = ledger.workload(id).is_some_and(|w| {
                w.state == WorkloadState::Running
                    && w.reservation
                        .as_ref()
                        .is_some_and(|r| r.epoch == epoch && r.stopping.is_none())
            });
            if let (true, Some(r)) = (
                still_running,
                ledger.workload(id).and_then(|w| w.reservation.as_ref()),
            ) {
                reports.push(StatusReport {
                    cluster: r.assignment.cluster.clone(),
                    workload: id,
                    epoch,
                    phase: Phase::Succeeded,
                    message: "simulated run completed".into(),
                });
            }
        }
        reports
    }

    fn next_timer(&self) -> Option<Timestamp> {
        self.timers.first().map(|t| t.0)
    }
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
    let mut changes = handle.changes();
    let mut metrics = proposer.raft().metrics();
    let mut executors = Executors::default();
    let mut full_scan = true;
    let mut touched: Vec<WorkloadId> = Vec::new();
    loop {
        if *shutdown.borrow() {
            return;
        }
        if metrics.borrow().state != ServerState::Leader {
            full_scan = true;
            tokio::select! {
                _ = metrics.changed() => {}
                _ = shutdown.changed() => {}
            }
            continue;
        }
        let now = clock.now();
        let mut commands = Vec::new();
        {
            let sm = handle.read();
            let ledger = &sm.ledger;
            if full_scan {
                executors = Executors::default();
                commands.extend(Executors::registrations(ledger, &clusters));
                // Only reservations matter; the scheduler indexes them.
                let ids: Vec<WorkloadId> =
                    ledger.snapshot().admitted().map(|a| a.pending.id).collect();
                touched = ids;
            }
            let reports = executors.reports(ledger, &clusters, touched.drain(..), now);
            if !reports.is_empty() {
                commands.push(Command::ReportStatus { reports });
            }
        }
        full_scan = false;
        for command in commands {
            if let Err(e) = proposer.write_local(command).await.written() {
                tracing::debug!(error = %e, "simulated cluster report not applied");
                full_scan = true;
            }
        }
        let wait = executors
            .next_timer()
            .map(|t| Duration::from_millis(t.millis().saturating_sub(clock.now().millis()).max(1)))
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        tokio::select! {
            change = changes.recv() => {
                let mut next = Some(change);
                while let Some(change) = next {
                    match change {
                        Ok(Change::Workloads(ids)) => touched.extend(ids.iter().copied()),
                        Ok(Change::All) | Err(broadcast::error::RecvError::Lagged(_)) => full_scan = true,
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                    next = changes.try_recv().ok().map(Ok);
                }
            }
            _ = tokio::time::sleep(wait) => {
                // Registrations are checked now and then, in case one was lost.
                full_scan |= executors.timers.is_empty();
            }
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
