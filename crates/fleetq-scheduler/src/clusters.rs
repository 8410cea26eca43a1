//! Physical capacity of clusters, in the same cells as quota.
//!
//! Quota says what a queue may use; a cluster says what devices exist. A
//! workload is admitted only onto one cluster that has room for all of it.
//!
//! Which cells a cluster constrains: a flavor that some cluster reports is
//! *tracked*; a cluster hosts a tracked flavor only if it reports it, and is
//! limited to the amounts it reports for that flavor's resources (a resource
//! it does not report, such as `cpu` next to GPUs, is not limited there). A
//! flavor no cluster reports (a CPU-only `default-flavor`) is quota-only and
//! fits on every cluster.

use std::collections::{BTreeMap, BTreeSet};

use fleetq_model::cluster_queue::{Placement, PlacementStrategy};
use fleetq_model::{Cluster, ClusterState};

use crate::quota::{FrId, QuotaTree};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// The cluster does not host this flavor.
    Absent,
    /// Hosted and not limited (resource not reported, or flavor untracked).
    Unlimited,
    /// Hosted with this many milli-units in total.
    Limited(u64),
}

#[derive(Clone, Debug)]
pub struct ClusterInfo {
    pub cluster: Cluster,
    pub capacity: Vec<Capacity>,
    /// Its nodes by name (index into `cluster.nodes`).
    pub node_index: BTreeMap<String, usize>,
    /// The flavors its nodes carry: pod sets of these are placed on nodes.
    pub node_flavors: BTreeSet<String>,
    /// Per flavor, its schedulable nodes (indices into `cluster.nodes`),
    /// so an attempt does not filter every node again.
    pub schedulable: BTreeMap<String, Vec<usize>>,
}

impl ClusterInfo {
    pub fn name(&self) -> &str {
        &self.cluster.name
    }

    /// The schedulable nodes of `flavor`.
    pub fn schedulable_of(&self, flavor: &str) -> &[usize] {
        self.schedulable.get(flavor).map_or(&[], Vec::as_slice)
    }

    pub fn state(&self) -> ClusterState {
        self.cluster.state
    }

    /// Whether a queue with `placement` may place new work here.
    pub fn eligible_for(&self, placement: &Placement) -> bool {
        self.cluster.state.accepts_new_work()
            && (placement.clusters.is_empty()
                || placement.clusters.iter().any(|c| c == self.name()))
            && placement
                .cluster_selector
                .iter()
                .all(|(k, v)| self.cluster.labels.get(k) == Some(v))
    }
}

/// All clusters, indexed by position in name order.
#[derive(Clone, Debug, Default)]
pub struct ClusterTable {
    pub clusters: Vec<ClusterInfo>,
    /// Whether any cluster reports its nodes: placement is skipped, on
    /// the scheduler's hot path, where none does.
    any_nodes: bool,
    /// Per cell, whether its resource is a device (an extended resource,
    /// `nvidia.com/gpu`, a MIG profile): the strategies rank clusters by
    /// the room a workload leaves in devices before cpu or memory.
    devices: Vec<bool>,
}

/// The order a strategy prefers clusters in, smallest first, by the room
/// a workload would leave: BinPack the least, Spread the most.
fn preference(strategy: PlacementStrategy, room_after: u64) -> u64 {
    match strategy {
        PlacementStrategy::BinPack => room_after,
        PlacementStrategy::Spread => u64::MAX - room_after,
    }
}

/// Assigned milli-units per cluster and cell, `clusters x cells`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterUsage {
    cells: usize,
    values: Vec<u64>,
}

impl ClusterUsage {
    #[cfg(test)]
    pub(crate) fn zeroed(clusters: usize, cells: usize) -> Self {
        ClusterUsage {
            cells,
            values: vec![0; clusters * cells],
        }
    }

    pub fn get(&self, cluster: usize, fr: FrId) -> u64 {
        self.values[cluster * self.cells + fr]
    }

    pub fn add(&mut self, cluster: usize, fr: FrId, amount: u64) {
        let slot = &mut self.values[cluster * self.cells + fr];
        *slot = slot.saturating_add(amount);
    }

    pub fn sub(&mut self, cluster: usize, fr: FrId, amount: u64) {
        let slot = &mut self.values[cluster * self.cells + fr];
        *slot = slot.saturating_sub(amount);
    }
}

impl ClusterTable {
    pub fn build(tree: &QuotaTree, clusters: &[Cluster]) -> ClusterTable {
        let mut sorted: Vec<Cluster> = clusters.to_vec();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let tracked: BTreeSet<&str> = sorted
            .iter()
            .flat_map(|c| c.capacity.keys().map(String::as_str))
            .collect();
        let infos: Vec<ClusterInfo> = sorted
            .iter()
            .map(|cluster| {
                let capacity = tree
                    .cells
                    .iter()
                    .map(|fr| match cluster.capacity.get(&fr.flavor) {
                        None if tracked.contains(fr.flavor.as_str()) => Capacity::Absent,
                        None => Capacity::Unlimited,
                        Some(resources) => match resources.get(&fr.resource) {
                            Some(q) => Capacity::Limited(q.milli()),
                            None => Capacity::Unlimited,
                        },
                    })
                    .collect();
                ClusterInfo {
                    node_index: cluster
                        .nodes
                        .iter()
                        .enumerate()
                        .map(|(i, n)| (n.name.clone(), i))
                        .collect(),
                    node_flavors: cluster.nodes.iter().map(|n| n.flavor.clone()).collect(),
                    schedulable: {
                        let mut by_flavor: BTreeMap<String, Vec<usize>> = BTreeMap::new();
                        for (i, n) in cluster.nodes.iter().enumerate() {
                            if !n.unschedulable {
                                by_flavor.entry(n.flavor.clone()).or_default().push(i);
                            }
                        }
                        by_flavor
                    },
                    cluster: cluster.clone(),
                    capacity,
                }
            })
            .collect();
        ClusterTable {
            any_nodes: infos.iter().any(|c| !c.cluster.nodes.is_empty()),
            clusters: infos,
            devices: tree
                .cells
                .iter()
                .map(|fr| fr.resource.contains('/'))
                .collect(),
        }
    }

    /// Whether any cluster reports its nodes (else placement is skipped).
    pub fn any_nodes(&self) -> bool {
        self.any_nodes
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.clusters.binary_search_by(|c| c.name().cmp(name)).ok()
    }

    pub fn new_usage(&self, cells: usize) -> ClusterUsage {
        ClusterUsage {
            cells,
            values: vec![0; cells * self.clusters.len()],
        }
    }

    /// Room left for `fr` on `cluster`: `None` if not hosted, `u64::MAX` if
    /// unlimited.
    pub fn free(&self, used: &ClusterUsage, cluster: usize, fr: FrId) -> Option<u64> {
        match self.clusters[cluster].capacity[fr] {
            Capacity::Absent => None,
            Capacity::Unlimited => Some(u64::MAX),
            Capacity::Limited(total) => Some(total.saturating_sub(used.get(cluster, fr))),
        }
    }

    /// Whether `demand` fits in what is free on `cluster` now.
    pub fn fits_now(&self, used: &ClusterUsage, cluster: usize, demand: &[(FrId, u64)]) -> bool {
        demand
            .iter()
            .all(|&(fr, q)| self.free(used, cluster, fr).is_some_and(|free| q <= free))
    }

    /// Whether `demand` could ever fit on `cluster` if it were empty.
    pub fn fits_empty(&self, cluster: usize, demand: &[(FrId, u64)]) -> bool {
        demand
            .iter()
            .all(|&(fr, q)| match self.clusters[cluster].capacity[fr] {
                Capacity::Absent => false,
                Capacity::Unlimited => true,
                Capacity::Limited(total) => q <= total,
            })
    }

    /// Picks a cluster for `demand` among `eligible` by `strategy`: BinPack
    /// takes the one left with the least room in the first limited cell,
    /// Spread the one with the most. Ties go to the first by name, so the
    /// choice is deterministic.
    pub fn choose(
        &self,
        used: &ClusterUsage,
        eligible: &[usize],
        demand: &[(FrId, u64)],
        strategy: PlacementStrategy,
    ) -> Option<usize> {
        // The first of the best (min_by_key keeps the first of equals).
        eligible
            .iter()
            .filter_map(|&c| Some((preference(strategy, self.room_after(used, c, demand)?), c)))
            .min_by_key(|&(key, _)| key)
            .map(|(_, c)| c)
    }

    /// Every cluster of `eligible` that `demand` fits now, best first by
    /// `strategy` (the first is [`ClusterTable::choose`]'s choice): node
    /// placement tries them in this order and stops at the first whose
    /// nodes take the pods.
    pub fn ranked(
        &self,
        used: &ClusterUsage,
        eligible: &[usize],
        demand: &[(FrId, u64)],
        strategy: PlacementStrategy,
    ) -> Vec<usize> {
        let mut fitting: Vec<(u64, usize)> = eligible
            .iter()
            .filter_map(|&c| Some((preference(strategy, self.room_after(used, c, demand)?), c)))
            .collect();
        // Stable: among equals the first in `eligible` stays first.
        fitting.sort_by_key(|&(key, _)| key);
        fitting.into_iter().map(|(_, c)| c).collect()
    }

    /// Room left in the first limited device cell of `demand` (else its
    /// first limited cell) once it is placed on `cluster` (`u64::MAX`
    /// where none is limited), or `None` if it does not fit now. Devices
    /// first: `cpu` and `memory` sort before `nvidia.com/gpu`, and packing
    /// clusters by cpu left GPUs fragmented (the trace replay).
    fn room_after(&self, used: &ClusterUsage, c: usize, demand: &[(FrId, u64)]) -> Option<u64> {
        if !self.fits_now(used, c, demand) {
            return None;
        }
        let room = |devices_only: bool| {
            demand.iter().find_map(|&(fr, q)| {
                let wanted = !devices_only || self.devices.get(fr) == Some(&true);
                match self.clusters[c].capacity[fr] {
                    Capacity::Limited(_) if wanted => self.free(used, c, fr).map(|f| f - q),
                    _ => None,
                }
            })
        };
        Some(room(true).or_else(|| room(false)).unwrap_or(u64::MAX))
    }

    /// Every cell where a cluster holds more than it reported.
    pub fn violations(&self, tree: &QuotaTree, used: &ClusterUsage) -> Vec<String> {
        let mut out = Vec::new();
        for (c, info) in self.clusters.iter().enumerate() {
            for (fr, cap) in info.capacity.iter().enumerate() {
                let assigned = used.get(c, fr);
                let over = match cap {
                    Capacity::Absent => assigned > 0,
                    Capacity::Unlimited => false,
                    Capacity::Limited(total) => assigned > *total,
                };
                if over {
                    out.push(format!(
                        "cluster {:?} has {} assigned of {} but reports {:?}",
                        info.name(),
                        fleetq_model::Quantity::from_milli(assigned),
                        tree.cells[fr],
                        cap
                    ));
                }
            }
        }
        out
    }
}
