//! Node books: what is assigned on each node of the clusters that report
//! their nodes, placing a workload's pod sets there, and re-checking a
//! placement in apply() (issue 26, items 3 and 4).
//!
//! A pod set is placed on nodes when one of its assigned flavors is the
//! flavor of some node of the cluster; its pods then each land on one
//! schedulable node of that flavor, by [`crate::placement::place`], under
//! its `topologyRequest` read against the flavor's Topology levels. A
//! resource counts on a node when the cluster reports it for the flavor
//! (as at the cluster level: an unreported resource such as `cpu` beside
//! GPUs is not limited there). Pod sets of flavors no node has (a CPU-only
//! flavor) are placed by totals only, as before nodes existed.
//!
//! The scheduler and apply() both call into here, so apply() cannot catch
//! a placement bug shared with the scheduler; the chaos suite's journals
//! do that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetq_model::assignment::Assignment;
use fleetq_model::assignment::{NodePods, PodSetAssignment};
use fleetq_model::mutants::Mutant;
use fleetq_model::topology::TopologyPlacement;
use fleetq_model::workload::PodSet;
use fleetq_model::{Config, Quantity, ResourceList, Workload};

use crate::clusters::ClusterInfo;
use crate::placement::{self, Constraint, NodeRoom};

/// Milli-units assigned per resource on one node.
pub type NodeUsed = BTreeMap<String, u64>;

/// Assigned milli-units per node, for every cluster (by index in the
/// cluster table; no entries for a cluster without nodes). Each cluster's
/// books are shared until written: a cycle starts from a copy of the
/// snapshot's, and copying every node's books of every cluster per cycle
/// cost a quarter of an admission at 1,000 nodes per cluster (the trace
/// replay's profile); now only the clusters a cycle places pods on are
/// copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeUsage {
    clusters: Vec<Arc<Vec<NodeUsed>>>,
    /// Per cluster, its schedulable nodes by free devices, kept with the
    /// books; `None` once a change came without the cluster's nodes to
    /// keep it by (placement then passes over the nodes).
    free: Vec<Option<Arc<FreeIndex>>>,
}

/// (milli-units free, place in name order, node index).
type FreeKey = (u64, usize, usize);

/// One cluster's schedulable nodes ordered, per (flavor, device
/// resource), by the milli-units of it free, then by name: where Best-fit
/// for a pod set that one node holds starts looking, instead of passing
/// over every node of the flavor (10 x 1,000 nodes: issue 26, item 9).
/// A pure function of the books; rebuilt per node as they change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeIndex {
    by: BTreeMap<(String, String), BTreeSet<FreeKey>>,
    /// Each node's place in name order.
    rank: Vec<usize>,
}

impl FreeIndex {
    fn new(info: &ClusterInfo, used: &[NodeUsed]) -> FreeIndex {
        let mut rank = vec![0; info.cluster.nodes.len()];
        for (r, &n) in info.node_index.values().enumerate() {
            if let Some(slot) = rank.get_mut(n) {
                *slot = r;
            }
        }
        let mut index = FreeIndex {
            by: BTreeMap::new(),
            rank,
        };
        for n in 0..info.cluster.nodes.len() {
            index.insert(info, used, n);
        }
        index
    }

    /// The keys of node `n` under `used`: (flavor, resource) and free.
    /// Read from the books as they are (the index is what placement
    /// starts from; the planted bug that ignores usage skips it).
    fn keys<'i>(
        info: &'i ClusterInfo,
        used: &[NodeUsed],
        n: usize,
    ) -> Vec<((&'i str, &'i str), u64)> {
        let node = &info.cluster.nodes[n];
        let books = used.get(n);
        node.allocatable
            .iter()
            .filter(|(r, _)| r.contains('/') && !node.unschedulable)
            .map(|(r, q)| {
                let taken = books.and_then(|b| b.get(r.as_str())).copied().unwrap_or(0);
                (
                    (node.flavor.as_str(), r.as_str()),
                    q.milli().saturating_sub(taken),
                )
            })
            .collect()
    }

    fn insert(&mut self, info: &ClusterInfo, used: &[NodeUsed], n: usize) {
        let rank = self.rank.get(n).copied().unwrap_or(n);
        for ((flavor, resource), free) in Self::keys(info, used, n) {
            self.by
                .entry((flavor.to_string(), resource.to_string()))
                .or_default()
                .insert((free, rank, n));
        }
    }

    fn remove(&mut self, info: &ClusterInfo, used: &[NodeUsed], n: usize) {
        let rank = self.rank.get(n).copied().unwrap_or(n);
        for ((flavor, resource), free) in Self::keys(info, used, n) {
            if let Some(set) = self.by.get_mut(&(flavor.to_string(), resource.to_string())) {
                set.remove(&(free, rank, n));
            }
        }
    }

    /// The nodes of `flavor` with at least `need` milli-units of
    /// `resource` free, fewest free first, then by name.
    fn from<'s>(
        &'s self,
        flavor: &str,
        resource: &str,
        need: u64,
    ) -> impl Iterator<Item = (u64, usize)> + 's {
        self.by
            .get(&(flavor.to_string(), resource.to_string()))
            .into_iter()
            .flat_map(move |set| set.range((need, 0, 0)..))
            .map(|&(free, _, n)| (free, n))
    }
}

impl NodeUsage {
    /// Zeroed books for `clusters`.
    pub fn new(clusters: &[ClusterInfo]) -> NodeUsage {
        let books: Vec<Vec<NodeUsed>> = clusters
            .iter()
            .map(|c| vec![NodeUsed::new(); c.cluster.nodes.len()])
            .collect();
        NodeUsage {
            free: clusters
                .iter()
                .zip(&books)
                .map(|(c, b)| Some(Arc::new(FreeIndex::new(c, b))))
                .collect(),
            clusters: books.into_iter().map(Arc::new).collect(),
        }
    }

    /// Cluster `c`'s index of nodes by free devices, if it has one.
    pub fn free_index(&self, c: usize) -> Option<&FreeIndex> {
        self.free.get(c).and_then(|f| f.as_deref())
    }

    /// Zeroed books for clusters of `nodes[c]` nodes each.
    #[cfg(test)]
    pub(crate) fn zeroed(nodes: &[usize]) -> NodeUsage {
        NodeUsage {
            clusters: nodes
                .iter()
                .map(|&n| Arc::new(vec![NodeUsed::new(); n]))
                .collect(),
            free: Vec::new(),
        }
    }

    /// The books of cluster `c`'s nodes.
    pub fn of(&self, c: usize) -> &[NodeUsed] {
        self.clusters.get(c).map_or(&[], |b| b.as_slice())
    }

    /// Adds (`add`) or takes back `q` milli-units of `resource` on node
    /// `n` of cluster `c`, whose nodes are `info` (room a cycle keeps for
    /// a claim). Without `info` the cluster's index is dropped.
    pub(crate) fn adjust(
        &mut self,
        info: Option<&ClusterInfo>,
        c: usize,
        n: usize,
        resource: &str,
        q: u64,
        add: bool,
    ) {
        self.reindexing(info, c, &[n], |books| {
            if let Some(used) = books.get_mut(n) {
                adjust(used, resource, q, add);
            }
        });
    }

    /// Changes cluster `c`'s books by `change`, keeping its index of the
    /// `touched` nodes in step.
    fn reindexing(
        &mut self,
        info: Option<&ClusterInfo>,
        c: usize,
        touched: &[usize],
        change: impl FnOnce(&mut Vec<NodeUsed>),
    ) {
        let Some(books) = self.clusters.get_mut(c) else {
            return;
        };
        let books = Arc::make_mut(books);
        let slot = self.free.get_mut(c);
        match (info, slot) {
            (Some(info), Some(Some(index))) => {
                let index = Arc::make_mut(index);
                for &n in touched {
                    index.remove(info, books, n);
                }
                change(books);
                for &n in touched {
                    index.insert(info, books, n);
                }
            }
            (None, Some(slot)) => {
                *slot = None;
                change(books);
            }
            _ => change(books),
        }
    }

    /// Charges (`add`) or releases an assignment's pods on cluster `c`'s
    /// nodes. Pods on a node the cluster no longer reports are not
    /// counted (the node left; its books went with it).
    pub fn charge(
        &mut self,
        info: &ClusterInfo,
        c: usize,
        w: &Workload,
        a: &Assignment,
        add: bool,
    ) {
        if self.clusters.get(c).is_none_or(|b| b.is_empty()) {
            return;
        }
        let mut touched: Vec<usize> = charges(info, w, &a.pod_sets)
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        touched.sort_unstable();
        touched.dedup();
        self.reindexing(Some(info), c, &touched, |books| {
            charge_into(books.as_mut_slice(), info, w, &a.pod_sets, add);
        });
    }
}

/// Charges (`add`) or releases `pod_sets` of `w` in one cluster's books.
pub fn charge_into(
    books: &mut [NodeUsed],
    info: &ClusterInfo,
    w: &Workload,
    pod_sets: &[PodSetAssignment],
    add: bool,
) {
    for (node, resource, q) in charges(info, w, pod_sets) {
        if let Some(used) = books.get_mut(node) {
            adjust(used, resource, q, add);
        }
    }
}

/// One cluster's books holding only `workloads`' pods (what victims or
/// evicting workloads hold there).
pub(crate) fn books_of<'w>(
    info: &ClusterInfo,
    workloads: impl Iterator<Item = (&'w Workload, &'w [PodSetAssignment])>,
) -> Vec<NodeUsed> {
    let mut books = vec![NodeUsed::new(); info.cluster.nodes.len()];
    for (w, pod_sets) in workloads {
        charge_into(&mut books, info, w, pod_sets, true);
    }
    books
}

/// Where [`place_all`] would put `pod_sets`' pods, as what they would
/// hold: (node index, resource, milli-units).
pub(crate) fn room_for(
    info: &ClusterInfo,
    used: &[NodeUsed],
    config: &Config,
    w: &Workload,
    pod_sets: &[PodSetAssignment],
) -> Result<Vec<(usize, String, u64)>, String> {
    let placed = place_all(info, used, config, w, pod_sets)?;
    let mut with_nodes = pod_sets.to_vec();
    for (psa, nodes) in with_nodes.iter_mut().zip(placed) {
        psa.nodes = nodes;
    }
    Ok(charges(info, w, &with_nodes)
        .into_iter()
        .map(|(n, resource, q)| (n, resource.to_string(), q))
        .collect())
}

/// Adds (`add`) or takes back `q` milli-units of `resource` in one
/// node's books; a resource that drops to nothing leaves them.
pub(crate) fn adjust(used: &mut NodeUsed, resource: &str, q: u64, add: bool) {
    let slot = used.entry(resource.to_string()).or_default();
    *slot = if add {
        slot.saturating_add(q)
    } else {
        slot.saturating_sub(q)
    };
    if *slot == 0 {
        used.remove(resource);
    }
}

/// (node index, resource, milli-units) that `pod_sets` put on `info`'s
/// nodes; pods on unknown nodes are left out.
pub fn charges<'w>(
    info: &ClusterInfo,
    w: &'w Workload,
    pod_sets: &[PodSetAssignment],
) -> Vec<(usize, &'w str, u64)> {
    let mut out = Vec::new();
    for (ps, psa) in w.spec.pod_sets.iter().zip(pod_sets) {
        for placed in &psa.nodes {
            let Some(&n) = info.node_index.get(&placed.node) else {
                continue;
            };
            let flavor = &info.cluster.nodes[n].flavor;
            for (resource, q) in &ps.requests {
                if psa.flavors.get(resource) == Some(flavor) && !q.is_zero() {
                    let total = q.milli().saturating_mul(u64::from(placed.count));
                    out.push((n, resource.as_str(), total));
                }
            }
        }
    }
    out
}

/// The flavor of `psa` that `info`'s nodes carry, if any: that pod set is
/// placed on nodes. Two such flavors in one pod set cannot be placed (a
/// pod runs on one node, a node has one flavor).
fn node_flavor<'p>(
    info: &ClusterInfo,
    psa: &'p PodSetAssignment,
) -> Result<Option<&'p str>, String> {
    let mut found: Option<&str> = None;
    for flavor in psa.flavors.values() {
        if !info.node_flavors.contains(flavor) || found == Some(flavor.as_str()) {
            continue;
        }
        if let Some(first) = found {
            return Err(format!(
                "pod set {:?} draws on flavors {first:?} and {flavor:?}, but each node of cluster {:?} has one flavor",
                psa.name,
                info.name()
            ));
        }
        found = Some(flavor);
    }
    Ok(found)
}

/// Whether a node of `flavor` is limited in `resource`: the cluster
/// reports it for that flavor (as at the cluster level).
fn limits(info: &ClusterInfo, flavor: &str, resource: &str) -> bool {
    info.cluster
        .capacity
        .get(flavor)
        .is_some_and(|reported| reported.contains_key(resource))
}

/// One pod's requests that count on nodes of `flavor`.
fn per_pod(info: &ClusterInfo, ps: &PodSet, psa: &PodSetAssignment, flavor: &str) -> ResourceList {
    ps.requests
        .iter()
        .filter(|(r, q)| {
            !q.is_zero()
                && psa.flavors.get(*r).map(String::as_str) == Some(flavor)
                && limits(info, flavor, r)
        })
        .map(|(r, q)| (r.clone(), *q))
        .collect()
}

/// How many pods of `per_pod` fit on node `n` now (`u64::MAX` for a pod
/// that asks for nothing counted here). Counted in place: this runs for
/// every node of the flavor on every attempt.
fn fit_on(info: &ClusterInfo, used: &[NodeUsed], n: usize, per_pod: &ResourceList) -> u64 {
    per_pod
        .iter()
        .filter(|(_, q)| !q.is_zero())
        .map(|(r, q)| left_on(info, used, n, r) / q.milli())
        .min()
        .unwrap_or(u64::MAX)
}

/// Milli-units of `resource` left on node `n` under `used` (all of it
/// under the planted bug that ignores node usage).
fn left_on(info: &ClusterInfo, used: &[NodeUsed], n: usize, resource: &str) -> u64 {
    let have = info.cluster.nodes[n]
        .allocatable
        .get(resource)
        .map_or(0, |q| q.milli());
    if fleetq_model::mutants::active(Mutant::PlacementIgnoresNodeUsage) {
        return have;
    }
    let taken = used
        .get(n)
        .and_then(|u| u.get(resource))
        .copied()
        .unwrap_or(0);
    have.saturating_sub(taken)
}

/// What is free on node `n` of the resources `per_pod` asks for, in
/// milli-units, (devices, then the rest: the order Best-fit packs by), if
/// `count` such pods fit there; one pass over the pod's resources, as
/// this runs for every node of the flavor on every attempt.
fn free_if_holding(
    info: &ClusterInfo,
    used: &[NodeUsed],
    n: usize,
    per_pod: &ResourceList,
    count: u32,
) -> Option<(u64, u64)> {
    let mut free = (0u64, 0u64);
    for (r, q) in per_pod.iter() {
        if q.is_zero() {
            continue;
        }
        let left = left_on(info, used, n, r);
        if left / q.milli() < u64::from(count) {
            return None;
        }
        match r.contains('/') {
            true => free.0 = free.0.saturating_add(left),
            false => free.1 = free.1.saturating_add(left),
        }
    }
    Some(free)
}

/// The Topology levels (node labels, broadest first) of `flavor`.
pub fn levels_of(config: &Config, flavor: &str) -> Vec<String> {
    config
        .flavors
        .get(flavor)
        .and_then(|f| f.spec.topology_name.as_ref())
        .and_then(|t| config.topologies.get(t))
        .map(|t| t.labels().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A pod set's topology request as a placement constraint on `levels`.
fn constraint_of(ps: &PodSet, levels: &[String], flavor: &str) -> Result<Constraint, String> {
    let placement = ps
        .topology_request
        .as_ref()
        .and_then(|t| t.placement.as_ref());
    let index = |level: &str| {
        levels.iter().position(|l| l == level).ok_or_else(|| {
            format!(
                "pod set {:?} asks for topology level {level:?}, which flavor {flavor:?} does not have",
                ps.name
            )
        })
    };
    Ok(match placement {
        Some(TopologyPlacement::Required(level))
            if fleetq_model::mutants::active(Mutant::RequiredTopologyIgnored) =>
        {
            Constraint::Preferred(index(level)?)
        }
        Some(TopologyPlacement::Required(level)) => Constraint::Required(index(level)?),
        Some(TopologyPlacement::Preferred(level)) => match index(level) {
            Ok(i) => Constraint::Preferred(i),
            Err(_) => Constraint::Unconstrained,
        },
        Some(TopologyPlacement::Unconstrained) | None => Constraint::Unconstrained,
    })
}

/// A pod set's slices (Kueue's `podSetSliceRequiredTopology` and
/// `podSetSliceSize`) on `flavor`: (index of the slice level, slice size),
/// or why they cannot be: a level the flavor's Topology lacks, or one
/// above the pod set's required or preferred level (Kueue's rule).
fn slice_of(
    ps: &PodSet,
    levels: &[String],
    flavor: &str,
    constraint: Constraint,
) -> Result<Option<(usize, u32)>, String> {
    let Some(slice) = ps.topology_request.as_ref().and_then(|t| t.slice.as_ref()) else {
        return Ok(None);
    };
    let level = levels.iter().position(|l| *l == slice.level).ok_or_else(|| {
        format!(
            "pod set {:?} asks for slices within topology level {:?}, which flavor {flavor:?} does not have",
            ps.name, slice.level
        )
    })?;
    if let Constraint::Required(l) | Constraint::Preferred(l) = constraint {
        if l > level {
            return Err(format!(
                "pod set {:?}: its slices' level {:?} is above its own level {:?}; a slice must lie within it",
                ps.name, slice.level, levels[l]
            ));
        }
    }
    Ok(Some((level, slice.size)))
}

/// Places every pod set of `pod_sets` on `info`'s nodes, given what is
/// used there (`used`, this cluster's books): the nodes of each, in
/// order, or why they do not fit. Pod sets not placed on nodes get none.
pub fn place_all(
    info: &ClusterInfo,
    used: &[NodeUsed],
    config: &Config,
    w: &Workload,
    pod_sets: &[PodSetAssignment],
) -> Result<Vec<Vec<NodePods>>, String> {
    place_all_indexed(info, used, None, config, w, pod_sets)
}

/// [`place_all`] with `index`, the index of `used` (the cycle's own
/// books: [`NodeUsage::free_index`]), which finds the node for a pod set
/// that one node holds without passing over every node. The choice is
/// the same with or without it.
pub fn place_all_indexed(
    info: &ClusterInfo,
    used: &[NodeUsed],
    index: Option<&FreeIndex>,
    config: &Config,
    w: &Workload,
    pod_sets: &[PodSetAssignment],
) -> Result<Vec<Vec<NodePods>>, String> {
    // The planted bug that ignores node usage must stay visible: the
    // index, kept from the books, would hide it.
    let index = index.filter(|_| !fleetq_model::mutants::active(Mutant::PlacementIgnoresNodeUsage));
    // Copied only when a later pod set must see an earlier one's pods.
    let mut own: Option<Vec<NodeUsed>> = None;
    let mut out = Vec::with_capacity(pod_sets.len());
    for (ps, psa) in w.spec.pod_sets.iter().zip(pod_sets) {
        let Some(flavor) = node_flavor(info, psa)? else {
            out.push(Vec::new());
            continue;
        };
        let per_pod = per_pod(info, ps, psa, flavor);
        let levels = levels_of(config, flavor);
        let constraint = constraint_of(ps, &levels, flavor)?;
        let slice = slice_of(ps, &levels, flavor, constraint)?;
        if let Some((_, size)) = slice {
            if size == 0 || psa.count % size != 0 {
                return Err(format!(
                    "pod set {:?}: {} pods do not make whole slices of {size}",
                    psa.name, psa.count
                ));
            }
        }
        let members = info.schedulable_of(flavor);
        let now = own.as_deref().unwrap_or(used);
        // Without a Topology, the node that holds the whole pod set and
        // is left with the fewest free devices, then the least of the
        // rest, then by name (Best-fit; Kueue's smallest-by-pod-count
        // stranded GPUs behind a CPU-bound node in the trace replay):
        // found in one pass, without naming and sorting every node.
        let one_node = levels
            .is_empty()
            .then(|| match index.filter(|_| own.is_none()) {
                Some(index) => {
                    smallest_holding_indexed(info, now, index, flavor, &per_pod, psa.count)
                        .unwrap_or_else(|| {
                            smallest_holding(info, now, members, &per_pod, psa.count)
                        })
                }
                None => smallest_holding(info, now, members, &per_pod, psa.count),
            })
            .flatten();
        let placed: Vec<NodePods> = match one_node {
            Some(n) => vec![NodePods {
                node: info.cluster.nodes[n].name.clone(),
                count: psa.count,
            }],
            None => {
                let rooms: Vec<NodeRoom<'_>> = members
                    .iter()
                    .map(|&n| NodeRoom {
                        name: &info.cluster.nodes[n].name,
                        labels: &info.cluster.nodes[n].labels,
                        fit: fit_on(info, now, n, &per_pod),
                    })
                    .collect();
                let found = match slice {
                    Some((level, size)) => {
                        placement::place_sliced(&rooms, &levels, psa.count, constraint, level, size)
                    }
                    None => placement::place(&rooms, &levels, psa.count, constraint),
                };
                let Some(found) = found else {
                    return Err(match slice {
                        Some((level, size)) => {
                            why_no_slices(info, &rooms, &levels, &per_pod, psa, (level, size))
                        }
                        None => {
                            // What each node holds empty: whether waiting can
                            // help. Only a required level's reason asks.
                            let empty_rooms: Vec<NodeRoom<'_>> =
                                if matches!(constraint, Constraint::Required(_)) {
                                    let empty = vec![NodeUsed::new(); info.cluster.nodes.len()];
                                    members
                                        .iter()
                                        .zip(&rooms)
                                        .map(|(&n, r)| NodeRoom {
                                            fit: fit_on(info, &empty, n, &per_pod),
                                            ..*r
                                        })
                                        .collect()
                                } else {
                                    Vec::new()
                                };
                            let rooms = [rooms.as_slice(), empty_rooms.as_slice()];
                            why_not(info, rooms, &levels, &per_pod, psa, constraint)
                        }
                    });
                };
                found
                    .iter()
                    .map(|&(i, count)| NodePods {
                        node: rooms[i].name.to_string(),
                        count,
                    })
                    .collect()
            }
        };
        if out.len() + 1 < pod_sets.len() {
            let mut one = psa.clone();
            one.nodes.clone_from(&placed);
            let books = own.get_or_insert_with(|| used.to_vec());
            charge_into(books, info, w, std::slice::from_ref(&one), true);
        }
        out.push(placed);
    }
    Ok(out)
}

/// [`smallest_holding`] through the index, for a pod asking one device
/// resource: `Some(choice)` (the same node, or none), or `None` when the
/// index cannot answer (the pod asks no device or several). Within one
/// amount of free devices the scan's tie-break is (the rest free, name):
/// the index is ordered by name there, so with nothing else asked the
/// first node that holds the pods is the one; otherwise that amount's
/// nodes are compared.
fn smallest_holding_indexed(
    info: &ClusterInfo,
    used: &[NodeUsed],
    index: &FreeIndex,
    flavor: &str,
    per_pod: &ResourceList,
    count: u32,
) -> Option<Option<usize>> {
    let mut devices = per_pod
        .iter()
        .filter(|(r, q)| r.contains('/') && !q.is_zero());
    let (resource, q) = devices.next()?;
    if devices.next().is_some() {
        return None;
    }
    let others = per_pod
        .iter()
        .any(|(r, q)| !r.contains('/') && !q.is_zero());
    let need = q.milli().saturating_mul(u64::from(count));
    let mut best: Option<((u64, u64), &str, usize)> = None;
    for (free, n) in index.from(flavor, resource, need) {
        if best.is_some_and(|((f, _), _, _)| f != free) {
            break;
        }
        let Some(key) = free_if_holding(info, used, n, per_pod, count) else {
            continue;
        };
        if !others {
            return Some(Some(n));
        }
        let name = info.cluster.nodes[n].name.as_str();
        if best.is_none_or(|(f, b, _)| (key, name) < (f, b)) {
            best = Some((key, name, n));
        }
    }
    Some(best.map(|(_, _, n)| n))
}

/// The node among `members` that holds `count` pods of `per_pod` and is
/// left with the fewest free devices, then the least of the rest (ties
/// by name), if one holds them all.
fn smallest_holding(
    info: &ClusterInfo,
    used: &[NodeUsed],
    members: &[usize],
    per_pod: &ResourceList,
    count: u32,
) -> Option<usize> {
    let mut best: Option<((u64, u64), &str, usize)> = None;
    for &n in members {
        let Some(free) = free_if_holding(info, used, n, per_pod, count) else {
            continue;
        };
        let name = info.cluster.nodes[n].name.as_str();
        if best.is_none_or(|(f, b, _)| (free, name) < (f, b)) {
            best = Some((free, name, n));
        }
    }
    best.map(|(_, _, n)| n)
}

/// A pending reason for a pod set that no placement fits: the most pods
/// that the best domain (or all nodes) could hold; and where even empty
/// nodes could not hold it (`[now, empty]` rooms), that waiting will not
/// help on this cluster.
fn why_not(
    info: &ClusterInfo,
    [rooms, empty]: [&[NodeRoom<'_>]; 2],
    levels: &[String],
    per_pod: &ResourceList,
    psa: &PodSetAssignment,
    constraint: Constraint,
) -> String {
    let fits: Vec<u64> = rooms.iter().map(|r| r.fit).collect();
    let shape = describe(per_pod);
    let all: u64 = fits.iter().fold(0, |s, &f| s.saturating_add(f));
    let best_node = fits.iter().copied().max().unwrap_or(0);
    if let Constraint::Required(level) = constraint {
        let most = |rooms: &[NodeRoom<'_>]| {
            pods_by_domain(rooms, levels, level)
                .into_values()
                .max()
                .unwrap_or(0)
        };
        let (best, best_empty) = (most(rooms), most(empty));
        let never = if best_empty < u64::from(psa.count) {
            format!(
                "; even with every node free the best holds {best_empty}, so it waits for nodes this cluster does not have"
            )
        } else {
            String::new()
        };
        return format!(
            "no {} in cluster {:?} has room for {} pods of {shape} (pod set {:?}): the best holds {best}{never}",
            levels[level],
            info.name(),
            psa.count,
            psa.name
        );
    }
    if best_node == 0 {
        return format!(
            "no node of cluster {:?} has room for a pod of {shape} (pod set {:?})",
            info.name(),
            psa.name
        );
    }
    format!(
        "the nodes of cluster {:?} have room for {all} pods of {shape}, pod set {:?} needs {}",
        info.name(),
        psa.name,
        psa.count
    )
}

/// A pending reason for a pod set in slices that no placement fits: how
/// many whole slices the slice domains hold.
fn why_no_slices(
    info: &ClusterInfo,
    rooms: &[NodeRoom<'_>],
    levels: &[String],
    per_pod: &ResourceList,
    psa: &PodSetAssignment,
    (level, size): (usize, u32),
) -> String {
    let slices: u64 = pods_by_domain(rooms, levels, level)
        .into_values()
        .map(|pods| pods / u64::from(size))
        .sum();
    format!(
        "the nodes of cluster {:?} hold {slices} slices of {size} pods of {} within one {} each; pod set {:?} needs {}{}",
        info.name(),
        describe(per_pod),
        levels[level],
        psa.name,
        psa.count / size.max(1),
        if slices >= u64::from(psa.count / size.max(1)) {
            " (but not within one domain of its required level)"
        } else {
            ""
        }
    )
}

/// How many pods each domain of `level` holds, over `rooms`.
fn pods_by_domain<'r>(
    rooms: &[NodeRoom<'r>],
    levels: &[String],
    level: usize,
) -> BTreeMap<Vec<&'r str>, u64> {
    let mut by_domain: BTreeMap<Vec<&str>, u64> = BTreeMap::new();
    for room in rooms {
        if let Some(path) = placement::domain_of(room.labels, levels, level) {
            let slot = by_domain.entry(path).or_default();
            *slot = slot.saturating_add(room.fit);
        }
    }
    by_domain
}

fn describe(per_pod: &ResourceList) -> String {
    per_pod
        .iter()
        .map(|(r, q)| format!("{q} {r}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// apply()'s check of an assignment's placement on `info`'s nodes, with
/// `used` this cluster's books: every pod set that the nodes carry names
/// schedulable nodes of its flavor, pods adding up to its count, a
/// required level's domain shared by all, and no node gets more than it
/// has; a pod set they do not carry names no nodes.
pub fn check_placement(
    info: &ClusterInfo,
    used: &[NodeUsed],
    config: &Config,
    w: &Workload,
    a: &Assignment,
) -> Result<(), String> {
    // What this assignment adds per node and resource, over its pod sets.
    let mut added: BTreeMap<(usize, &str), u64> = BTreeMap::new();
    for (ps, psa) in w.spec.pod_sets.iter().zip(&a.pod_sets) {
        let Some(flavor) = node_flavor(info, psa)? else {
            if let Some(first) = psa.nodes.first() {
                return Err(format!(
                    "pod set {:?} names node {:?}, but cluster {:?} places it by totals",
                    psa.name,
                    first.node,
                    info.name()
                ));
            }
            continue;
        };
        let mut pods: u64 = 0;
        let mut seen = std::collections::BTreeSet::new();
        for placed in &psa.nodes {
            let node = info
                .node_index
                .get(&placed.node)
                .map(|&n| &info.cluster.nodes[n])
                .ok_or_else(|| {
                    format!("node {:?} is not in cluster {:?}", placed.node, info.name())
                })?;
            if node.flavor != flavor || node.unschedulable || !seen.insert(&placed.node) {
                return Err(format!(
                    "pod set {:?} may not be placed on node {:?} (flavor {:?}, unschedulable {}, or named twice)",
                    psa.name, placed.node, node.flavor, node.unschedulable
                ));
            }
            pods += u64::from(placed.count);
        }
        if pods != u64::from(psa.count) {
            return Err(format!(
                "pod set {:?} places {pods} pods on nodes, not its {}",
                psa.name, psa.count
            ));
        }
        let levels = levels_of(config, flavor);
        let constraint = constraint_of(ps, &levels, flavor)?;
        if let Constraint::Required(level) = constraint {
            let domains: std::collections::BTreeSet<Option<Vec<&str>>> = psa
                .nodes
                .iter()
                .filter_map(|p| info.node_index.get(&p.node))
                .map(|&n| placement::domain_of(&info.cluster.nodes[n].labels, &levels, level))
                .collect();
            if domains.len() > 1 || domains.contains(&None) {
                return Err(format!(
                    "pod set {:?} requires one {} but its nodes span {}",
                    psa.name,
                    levels[level],
                    domains.len()
                ));
            }
        }
        if let Some((level, size)) = slice_of(ps, &levels, flavor, constraint)? {
            // Slices are alike: a placement holds whole slices exactly
            // when every slice domain holds a multiple of the size.
            let mut by_domain: BTreeMap<Option<Vec<&str>>, u64> = BTreeMap::new();
            for p in &psa.nodes {
                if let Some(&n) = info.node_index.get(&p.node) {
                    let domain =
                        placement::domain_of(&info.cluster.nodes[n].labels, &levels, level);
                    *by_domain.entry(domain).or_default() += u64::from(p.count);
                }
            }
            if by_domain.contains_key(&None)
                || by_domain
                    .values()
                    .any(|pods| pods % u64::from(size.max(1)) != 0)
            {
                return Err(format!(
                    "pod set {:?} asks for slices of {size} pods within one {} each, but its nodes do not hold whole slices per {}",
                    psa.name, levels[level], levels[level]
                ));
            }
        }
        for (n, resource, q) in charges(info, w, std::slice::from_ref(psa)) {
            if !limits(info, flavor, resource) {
                continue;
            }
            let slot = added.entry((n, resource)).or_default();
            *slot = slot.saturating_add(q);
            let held = used
                .get(n)
                .and_then(|u| u.get(resource))
                .copied()
                .unwrap_or(0);
            let total = if fleetq_model::mutants::active(Mutant::PlacementIgnoresNodeUsage) {
                q
            } else {
                held.saturating_add(*slot)
            };
            let node = &info.cluster.nodes[n];
            let have = node.allocatable.get(resource).map_or(0, |q| q.milli());
            if total > have {
                return Err(format!(
                    "node {:?} of cluster {:?} would hold {} of {resource}, more than its {}",
                    node.name,
                    info.name(),
                    Quantity::from_milli(total),
                    Quantity::from_milli(have)
                ));
            }
        }
    }
    Ok(())
}

/// Every schedulable node holding more than it has, as messages.
pub fn violations(clusters: &[ClusterInfo], usage: &NodeUsage) -> Vec<String> {
    let mut out = Vec::new();
    for (c, info) in clusters.iter().enumerate() {
        for (n, used) in usage.of(c).iter().enumerate() {
            let node = &info.cluster.nodes[n];
            for (resource, &q) in used {
                let have = node.allocatable.get(resource).map_or(0, |q| q.milli());
                if limits(info, &node.flavor, resource) && !node.unschedulable && q > have {
                    out.push(format!(
                        "node {:?} of cluster {:?} has {} of {resource} assigned but {} allocatable",
                        node.name,
                        info.name(),
                        Quantity::from_milli(q),
                        Quantity::from_milli(have)
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use fleetq_model::{Cluster, ClusterState, Node, Quantity};
    use proptest::prelude::*;

    use super::*;
    use crate::clusters::ClusterTable;
    use crate::quota::QuotaTree;

    const GPU: &str = "nvidia.com/gpu";

    /// One cluster of nodes (GPUs, CPUs, unschedulable), named so that
    /// name order and index order differ.
    fn cluster(nodes: &[(u64, u64, bool)]) -> ClusterInfo {
        let nodes: Vec<Node> = nodes
            .iter()
            .enumerate()
            .map(|(i, &(gpus, cpus, unschedulable))| Node {
                name: format!("n{}", (i * 7) % 11 + 11 * i),
                labels: BTreeMap::new(),
                flavor: "h100".into(),
                allocatable: BTreeMap::from([
                    (GPU.to_string(), Quantity::units(gpus)),
                    ("cpu".to_string(), Quantity::units(cpus)),
                ]),
                unschedulable,
            })
            .collect();
        let cluster = Cluster {
            name: "east".into(),
            labels: BTreeMap::new(),
            capacity: BTreeMap::new(),
            state: ClusterState::Ready,
            nodes,
        };
        ClusterTable::build(&QuotaTree::default(), &[cluster])
            .clusters
            .remove(0)
    }

    proptest! {
        /// The index picks the node the scan over every node picks, and
        /// kept through charges and releases it equals one built afresh
        /// from the books.
        #[test]
        fn the_index_chooses_as_the_scan_does(
            nodes in proptest::collection::vec((0u64..9, 0u64..64, proptest::bool::weighted(0.1)), 1..30),
            changes in proptest::collection::vec((0usize..30, 0u64..5, 0u64..20, any::<bool>()), 0..40),
            gpus in 1u64..5,
            cpus in 0u64..12,
            count in 1u32..3,
        ) {
            let info = cluster(&nodes);
            let mut usage = NodeUsage::new(std::slice::from_ref(&info));
            for (n, g, c, add) in changes {
                let n = n % nodes.len();
                usage.adjust(Some(&info), 0, n, GPU, g * 1000, add);
                usage.adjust(Some(&info), 0, n, "cpu", c * 1000, add);
            }
            let mut per_pod = BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]);
            if cpus > 0 {
                per_pod.insert("cpu".to_string(), Quantity::units(cpus));
            }
            let index = usage.free_index(0).expect("an index");
            prop_assert_eq!(index, &FreeIndex::new(&info, usage.of(0)));
            let scan = smallest_holding(&info, usage.of(0), info.schedulable_of("h100"), &per_pod, count);
            let indexed = smallest_holding_indexed(&info, usage.of(0), index, "h100", &per_pod, count);
            prop_assert_eq!(indexed, Some(scan));
        }
    }

    /// A change made without the cluster's nodes drops its index, so a
    /// stale one is never read.
    #[test]
    fn a_change_without_the_nodes_drops_the_index() {
        let info = cluster(&[(4, 8, false)]);
        let mut usage = NodeUsage::new(std::slice::from_ref(&info));
        assert!(usage.free_index(0).is_some());
        usage.adjust(None, 0, 0, GPU, 1000, true);
        assert!(usage.free_index(0).is_none());
    }
}
