//! A ClusterQueue's and a LocalQueue's `status` in Kueue's shape:
//! workload counts and quota in use per flavor.
//!
//! fleetq has no admission checks, so a quota reservation is an admission:
//! `reservingWorkloads` equals `admittedWorkloads` and `flavorsReservation`
//! equals `flavorsUsage`, as in a Kueue without checks.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::workload::{Phase, WorkloadFacts};
use crate::{LocalQueue, Quantity, Workload};

/// Quota in use in one (flavor, resource) cell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageCell {
    pub flavor: String,
    pub resource: String,
    pub total: Quantity,
    /// Beyond the nominal quota, taken from the cohort (ClusterQueues
    /// only; Kueue's LocalQueue status has no such field).
    pub borrowed: Option<Quantity>,
}

impl UsageCell {
    /// Cells of totals by (flavor, resource), in that order, with no
    /// borrowing known.
    pub fn from_totals(totals: BTreeMap<(String, String), Quantity>) -> Vec<UsageCell> {
        totals
            .into_iter()
            .map(|((flavor, resource), total)| UsageCell {
                flavor,
                resource,
                total,
                borrowed: None,
            })
            .collect()
    }
}

/// What fleetq knows of a queue's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStatus {
    pub pending_workloads: u64,
    pub reserving_workloads: u64,
    pub admitted_workloads: u64,
    /// In the order to print: a ClusterQueue's cells in its quota order,
    /// so cells of one flavor sit together.
    pub usage: Vec<UsageCell>,
}

impl QueueStatus {
    /// A LocalQueue's status from the workloads of its namespace (others
    /// are skipped): pending ones count as pending, those holding quota as
    /// reserving and admitted, and their assigned pod sets' requests times
    /// the admitted count add up per flavor.
    pub fn of_local_queue<'a>(
        lq: &LocalQueue,
        workloads: impl IntoIterator<Item = (&'a Workload, &'a WorkloadFacts)>,
    ) -> QueueStatus {
        let mut status = QueueStatus::default();
        let mut usage: BTreeMap<(String, String), Quantity> = BTreeMap::new();
        let ours = workloads
            .into_iter()
            .filter(|(w, _)| w.namespace == lq.namespace && w.spec.queue_name == lq.name);
        for (workload, facts) in ours {
            match facts.phase {
                Phase::Pending => status.pending_workloads += 1,
                Phase::Admitted | Phase::Running if !facts.pod_sets.is_empty() => {
                    status.reserving_workloads += 1;
                    status.admitted_workloads += 1;
                    for (resource, flavor, amount) in facts.resource_usage(workload) {
                        let cell = usage.entry((flavor, resource)).or_default();
                        *cell = cell.saturating_add(amount);
                    }
                }
                _ => {}
            }
        }
        status.usage = UsageCell::from_totals(usage);
        status
    }

    /// Kueue's ClusterQueueStatus.
    pub(super) fn cluster_queue_value(&self) -> Value {
        self.value(true)
    }

    /// Kueue's LocalQueueStatus.
    pub(super) fn local_queue_value(&self) -> Value {
        self.value(false)
    }

    fn value(&self, with_borrowed: bool) -> Value {
        let flavors = self.flavors(with_borrowed);
        let mut map = Map::new();
        map.insert("pendingWorkloads".into(), self.pending_workloads.into());
        map.insert("reservingWorkloads".into(), self.reserving_workloads.into());
        map.insert("admittedWorkloads".into(), self.admitted_workloads.into());
        map.insert("flavorsReservation".into(), flavors.clone());
        map.insert("flavorsUsage".into(), flavors);
        Value::Object(map)
    }

    /// `[{name: flavor, resources: [{name, total, borrowed?}]}]`, flavors in
    /// the order they first appear.
    fn flavors(&self, with_borrowed: bool) -> Value {
        let mut flavors: Vec<(&str, Vec<Value>)> = Vec::new();
        for cell in &self.usage {
            let mut resource = json!({"name": cell.resource, "total": cell.total.to_string()});
            if with_borrowed {
                resource["borrowed"] = cell.borrowed.unwrap_or_default().to_string().into();
            }
            match flavors.iter_mut().find(|(f, _)| *f == cell.flavor) {
                Some((_, resources)) => resources.push(resource),
                None => flavors.push((&cell.flavor, vec![resource])),
            }
        }
        flavors
            .into_iter()
            .map(|(name, resources)| json!({"name": name, "resources": resources}))
            .collect()
    }
}
