//! Placing a pod set's pods on a cluster's nodes (issue 26, item 3): each
//! pod on one node, the whole gang or nothing, inside one domain of a
//! required topology level, or the tightest domain of a preferred level
//! first and broader ones after.
//!
//! The algorithm is Kueue's TAS `BestFit`, level by level: at each level
//! the domains that can hold pods are sorted by how many they can hold,
//! largest first; whole domains are taken until the rest fits in one, and
//! for the rest the *smallest* domain that still fits is chosen. Few
//! domains are used (pods stay close) and the large free domains stay
//! whole for the next large gang (less fragmentation). Ties go by name, so
//! every replica computes the same placement.
//!
//! Pure data in, pure data out: no snapshot, no clock. The caller gives
//! how many pods fit on each node (from allocatable minus what is
//! assigned there), counted without building a map per node: placement
//! runs on every attempt, over every node of the flavor.

use std::borrow::Cow;
use std::collections::BTreeMap;

use fleetq_model::ResourceList;

/// One node as placement sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRoom<'a> {
    pub name: &'a str,
    /// Its labels; the topology levels are read from them.
    pub labels: &'a BTreeMap<String, String>,
    /// How many of the pod set's pods fit on it now.
    pub fit: u64,
}

/// What a pod set asks of the topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// All pods in one domain of this level (index into the levels).
    Required(usize),
    /// As close as this level, else the next broader one, else anywhere.
    Preferred(usize),
    /// Any nodes.
    Unconstrained,
}

/// How many pods of `per_pod` fit in `free`. A pod that asks for nothing
/// fits without limit (`u64::MAX`).
pub fn pods_that_fit(free: &ResourceList, per_pod: &ResourceList) -> u64 {
    per_pod
        .iter()
        .filter(|(_, q)| !q.is_zero())
        .map(|(r, q)| free.get(r).map_or(0, |f| f.milli() / q.milli()))
        .min()
        .unwrap_or(u64::MAX)
}

/// Where `count` pods of `per_pod` go: (index into `nodes`, pods), sorted
/// by node index, or `None` when the constraint cannot be met. `levels`
/// are the node labels of the flavor's Topology, broadest first. A node
/// lacking a level's label is outside every domain of that level (and of
/// the levels below), as in Kueue.
pub fn place(
    nodes: &[NodeRoom<'_>],
    levels: &[String],
    count: u32,
    constraint: Constraint,
) -> Option<Vec<(usize, u32)>> {
    if count == 0 {
        return Some(Vec::new());
    }
    let fit: Vec<u64> = nodes.iter().map(|n| n.fit).collect();
    let all: Vec<usize> = (0..nodes.len()).collect();
    let found = match constraint {
        Constraint::Required(level) => in_one_domain(nodes, levels, &fit, level, count),
        Constraint::Preferred(level) => (0..=level.min(levels.len().saturating_sub(1)))
            .rev()
            .find_map(|l| in_one_domain(nodes, levels, &fit, l, count))
            .or_else(|| fill(&all, nodes, levels, &fit, 0, count)),
        Constraint::Unconstrained => fill(&all, nodes, levels, &fit, 0, count),
    }?;
    let mut out: Vec<(usize, u32)> = found.into_iter().filter(|&(_, p)| p > 0).collect();
    out.sort_unstable();
    Some(out)
}

/// [`place`] for a pod set in slices (Kueue's `podSetSliceRequiredTopology`
/// and `podSetSliceSize`): `count` pods in slices of `size`, each slice
/// within one domain of `slice_level`, the slices as a whole under
/// `constraint` (a level at or above the slice level). Each slice domain
/// becomes one unit that holds as many slices as its pods fill, the
/// slices are placed over those units as pods over nodes, then each
/// unit's pods over its nodes, best fit below. `None` when `size` does not
/// divide `count` or the slices do not fit.
pub fn place_sliced(
    nodes: &[NodeRoom<'_>],
    levels: &[String],
    count: u32,
    constraint: Constraint,
    slice_level: usize,
    size: u32,
) -> Option<Vec<(usize, u32)>> {
    if size == 0 || count % size != 0 || slice_level >= levels.len() {
        return None;
    }
    let fit: Vec<u64> = nodes.iter().map(|n| n.fit).collect();
    let all: Vec<usize> = (0..nodes.len()).collect();
    let domains: Vec<(String, Vec<usize>)> = domains_at(nodes, levels, slice_level, &all)
        .into_iter()
        .collect();
    let units: Vec<NodeRoom<'_>> = domains
        .iter()
        .map(|(key, members)| NodeRoom {
            name: key,
            labels: nodes[members[0]].labels,
            fit: capacity(members, &fit) / u64::from(size),
        })
        .collect();
    let slices = place(&units, &levels[..=slice_level], count / size, constraint)?;
    let mut out = Vec::new();
    for (unit, k) in slices {
        let pods = k.checked_mul(size)?;
        out.extend(fill(
            &domains[unit].1,
            nodes,
            levels,
            &fit,
            slice_level + 1,
            pods,
        )?);
    }
    out.sort_unstable();
    Some(out)
}

/// All pods in one domain of `level`: the smallest domain that holds them.
fn in_one_domain(
    nodes: &[NodeRoom<'_>],
    levels: &[String],
    fit: &[u64],
    level: usize,
    count: u32,
) -> Option<Vec<(usize, u32)>> {
    if level >= levels.len() {
        return None;
    }
    let domains = domains_at(nodes, levels, level, &(0..nodes.len()).collect::<Vec<_>>());
    let chosen = domains
        .iter()
        .map(|(key, members)| (capacity(members, fit), key, members))
        .filter(|(cap, _, _)| *cap >= u64::from(count))
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))?;
    fill(chosen.2, nodes, levels, fit, level + 1, count)
}

/// A unit the greedy step chooses among: a domain of the current level,
/// or a node (below the last level, or where nodes lack the level).
enum Unit {
    Node(usize),
    Domain(Vec<usize>),
}

/// Spreads `count` pods over `members` (node indices), best fit level by
/// level from `level` down; `None` if they do not hold that many.
fn fill(
    members: &[usize],
    nodes: &[NodeRoom<'_>],
    levels: &[String],
    fit: &[u64],
    level: usize,
    count: u32,
) -> Option<Vec<(usize, u32)>> {
    if capacity(members, fit) < u64::from(count) {
        return None;
    }
    let by_domain = level < levels.len()
        && members
            .iter()
            .all(|&i| nodes[i].labels.contains_key(&levels[level]));
    // Node names are borrowed: this runs over every node of the flavor on
    // every attempt.
    let mut units: Vec<(u64, Cow<'_, str>, Unit)> = if by_domain {
        domains_at(nodes, levels, level, members)
            .into_iter()
            .map(|(key, m)| (capacity(&m, fit), Cow::Owned(key), Unit::Domain(m)))
            .collect()
    } else {
        members
            .iter()
            .map(|&i| (fit[i], Cow::Borrowed(nodes[i].name), Unit::Node(i)))
            .collect()
    };
    units.retain(|(cap, _, _)| *cap > 0);
    // Most often one unit holds them all: the smallest such (ties by
    // name), found without sorting.
    let smallest = |units: &[(u64, Cow<'_, str>, Unit)], left: u64, taken: &[bool]| {
        (0..units.len())
            .filter(|&i| !taken.get(i).copied().unwrap_or(false) && units[i].0 >= left)
            .min_by(|&a, &b| {
                units[a]
                    .0
                    .cmp(&units[b].0)
                    .then_with(|| units[a].1.cmp(&units[b].1))
            })
    };
    if let Some(i) = smallest(&units, u64::from(count), &[]) {
        return match &units[i].2 {
            Unit::Node(n) => Some(vec![(*n, count)]),
            Unit::Domain(m) => fill(m, nodes, levels, fit, level + 1, count),
        };
    }
    // Largest first; ties by name.
    units.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut left = u64::from(count);
    let mut taken = vec![false; units.len()];
    let mut out = Vec::new();
    while left > 0 {
        // The smallest unit that holds the rest, if one does; else the
        // largest one left, whole.
        let last = smallest(&units, left, &taken);
        let (index, pods) = match last {
            Some(i) => (i, left),
            None => {
                let i = (0..units.len()).find(|&i| !taken[i])?;
                (i, units[i].0)
            }
        };
        taken[index] = true;
        let pods32 = u32::try_from(pods).ok()?;
        match &units[index].2 {
            Unit::Node(i) => out.push((*i, pods32)),
            Unit::Domain(m) => out.extend(fill(m, nodes, levels, fit, level + 1, pods32)?),
        }
        left -= pods;
    }
    Some(out)
}

/// The domains of `level` among `members`: nodes grouped by their values
/// of levels `0..=level`; nodes without one of them are left out.
fn domains_at(
    nodes: &[NodeRoom<'_>],
    levels: &[String],
    level: usize,
    members: &[usize],
) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in members {
        if let Some(path) = domain_of(nodes[i].labels, levels, level) {
            out.entry(path.join("\u{0}")).or_default().push(i);
        }
    }
    out
}

/// The domain of `level` a node with `labels` lies in: its values of
/// levels `0..=level`, or `None` if it lacks one of them (then it is in
/// no domain of that level, as in Kueue).
pub fn domain_of<'l>(
    labels: &'l BTreeMap<String, String>,
    levels: &[String],
    level: usize,
) -> Option<Vec<&'l str>> {
    levels[..=level]
        .iter()
        .map(|l| labels.get(l).map(String::as_str))
        .collect()
}

/// How many pods `members` hold together (saturating).
fn capacity(members: &[usize], fit: &[u64]) -> u64 {
    members
        .iter()
        .fold(0u64, |sum, &i| sum.saturating_add(fit[i]))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use fleetq_model::{Quantity, ResourceList};
    use proptest::prelude::*;

    use super::*;

    const GPU: &str = "nvidia.com/gpu";
    const LEVELS: [&str; 3] = ["block", "rack", "kubernetes.io/hostname"];

    struct Fleet {
        names: Vec<String>,
        labels: Vec<BTreeMap<String, String>>,
        free: Vec<ResourceList>,
    }

    impl Fleet {
        /// (block, rack, free GPUs) per node.
        fn new(spec: &[(u8, u8, u64)]) -> Fleet {
            let mut fleet = Fleet {
                names: Vec::new(),
                labels: Vec::new(),
                free: Vec::new(),
            };
            for (i, &(block, rack, gpus)) in spec.iter().enumerate() {
                let name = format!("n{i:02}");
                fleet.labels.push(BTreeMap::from([
                    ("block".to_string(), format!("b{block}")),
                    ("rack".to_string(), format!("b{block}-r{rack}")),
                    (LEVELS[2].to_string(), name.clone()),
                ]));
                fleet.names.push(name);
                fleet
                    .free
                    .push(BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]));
            }
            fleet
        }

        fn rooms(&self, per_pod: &ResourceList) -> Vec<NodeRoom<'_>> {
            (0..self.names.len())
                .map(|i| NodeRoom {
                    name: &self.names[i],
                    labels: &self.labels[i],
                    fit: pods_that_fit(&self.free[i], per_pod),
                })
                .collect()
        }
    }

    fn levels() -> Vec<String> {
        LEVELS.iter().map(|l| l.to_string()).collect()
    }

    fn gpus(n: u64) -> ResourceList {
        BTreeMap::from([(GPU.to_string(), Quantity::units(n))])
    }

    /// The value of `level` for every node of a placement, if one.
    fn domain_of(fleet: &Fleet, placed: &[(usize, u32)], level: usize) -> BTreeSet<String> {
        placed
            .iter()
            .map(|&(i, _)| fleet.labels[i][LEVELS[level]].clone())
            .collect()
    }

    #[test]
    fn a_rack_gang_takes_the_tightest_rack_that_holds_it() {
        // Rack b0-r0: 8 + 8 free; rack b0-r1: 8 + 8 + 8; rack b1-r0: 4.
        let fleet = Fleet::new(&[
            (0, 0, 8),
            (0, 0, 8),
            (0, 1, 8),
            (0, 1, 8),
            (0, 1, 8),
            (1, 0, 4),
        ]);
        let placed = place(
            &fleet.rooms(&gpus(1)),
            &levels(),
            16,
            Constraint::Required(1),
        )
        .expect("rack b0-r0 holds 16");
        assert_eq!(placed, vec![(0, 8), (1, 8)]);
        // 20 needs the bigger rack; 25 fits in no rack.
        let placed = place(
            &fleet.rooms(&gpus(1)),
            &levels(),
            20,
            Constraint::Required(1),
        )
        .unwrap();
        assert_eq!(
            domain_of(&fleet, &placed, 1),
            BTreeSet::from(["b0-r1".to_string()])
        );
        assert_eq!(
            place(
                &fleet.rooms(&gpus(1)),
                &levels(),
                25,
                Constraint::Required(1)
            ),
            None
        );
        // Preferred falls back to the block, then anywhere.
        let placed = place(
            &fleet.rooms(&gpus(1)),
            &levels(),
            25,
            Constraint::Preferred(1),
        )
        .unwrap();
        assert_eq!(
            domain_of(&fleet, &placed, 0),
            BTreeSet::from(["b0".to_string()])
        );
        let placed = place(
            &fleet.rooms(&gpus(1)),
            &levels(),
            44,
            Constraint::Preferred(1),
        )
        .unwrap();
        assert_eq!(placed.iter().map(|&(_, p)| p).sum::<u32>(), 44);
    }

    #[test]
    fn a_pod_is_whole_on_one_node() {
        // Two nodes of 3 free: pods of 2 GPUs fit one each, not three.
        let fleet = Fleet::new(&[(0, 0, 3), (0, 0, 3)]);
        let rooms = fleet.rooms(&gpus(2));
        assert!(place(&rooms, &levels(), 2, Constraint::Unconstrained).is_some());
        assert_eq!(place(&rooms, &levels(), 3, Constraint::Unconstrained), None);
    }

    #[test]
    fn the_last_pods_go_to_the_smallest_node_that_holds_them() {
        let fleet = Fleet::new(&[(0, 0, 8), (0, 0, 2), (0, 0, 4)]);
        let placed = place(
            &fleet.rooms(&gpus(1)),
            &levels(),
            10,
            Constraint::Unconstrained,
        )
        .unwrap();
        // 8 on the largest, the remaining 2 on the 2-GPU node: the 4-GPU
        // node stays whole.
        assert_eq!(placed, vec![(0, 8), (1, 2)]);
    }

    fn arb_fleet() -> impl Strategy<Value = Vec<(u8, u8, u64)>> {
        prop::collection::vec((0u8..2, 0u8..3, 0u64..9), 1..12)
    }

    fn arb_constraint() -> impl Strategy<Value = Constraint> {
        prop_oneof![
            (0usize..3).prop_map(Constraint::Required),
            (0usize..3).prop_map(Constraint::Preferred),
            Just(Constraint::Unconstrained),
        ]
    }

    proptest! {
        /// Every placement is whole, within each node's room and, when
        /// required, inside one domain; and one is found whenever one
        /// exists (a domain, or the cluster, holds the gang).
        #[test]
        fn placements_are_sound_and_complete(
            spec in arb_fleet(),
            per_pod in 1u64..4,
            count in 0u32..24,
            constraint in arb_constraint(),
        ) {
            let fleet = Fleet::new(&spec);
            let rooms = fleet.rooms(&gpus(per_pod));
            let fit: Vec<u64> = spec.iter().map(|&(_, _, g)| g / per_pod).collect();
            let result = place(&rooms, &levels(), count, constraint);
            // What exists.
            let domain_capacity = |level: usize| -> BTreeMap<String, u64> {
                let mut out = BTreeMap::new();
                for (i, labels) in fleet.labels.iter().enumerate() {
                    *out.entry(labels[LEVELS[level]].clone()).or_insert(0) += fit[i];
                }
                out
            };
            let total: u64 = fit.iter().sum();
            let exists = match constraint {
                Constraint::Required(l) => domain_capacity(l).values().any(|&c| c >= u64::from(count)),
                _ => total >= u64::from(count),
            };
            prop_assert_eq!(result.is_some(), exists || count == 0, "{:?}", result);
            if let Some(placed) = result {
                let sum: u32 = placed.iter().map(|&(_, p)| p).sum();
                prop_assert_eq!(sum, count);
                let nodes: BTreeSet<usize> = placed.iter().map(|&(i, _)| i).collect();
                prop_assert_eq!(nodes.len(), placed.len(), "a node twice");
                for &(i, pods) in &placed {
                    prop_assert!(u64::from(pods) <= fit[i], "node {} over its room", i);
                }
                // Preferred stays in one domain of its level when one holds
                // the gang.
                if let Constraint::Preferred(l) = constraint {
                    let fits_level = domain_capacity(l).values().any(|&c| c >= u64::from(count));
                    if fits_level && count > 0 {
                        prop_assert_eq!(domain_of(&fleet, &placed, l).len(), 1);
                    }
                }
                if let Constraint::Required(l) = constraint {
                    if count > 0 {
                        let domains = domain_of(&fleet, &placed, l);
                        prop_assert_eq!(domains.len(), 1);
                        // Best fit: no feasible domain of the level is smaller.
                        let caps = domain_capacity(l);
                        let chosen = caps[domains.iter().next().unwrap()];
                        let smallest = caps.values().copied().filter(|&c| c >= u64::from(count)).min().unwrap();
                        prop_assert_eq!(chosen, smallest);
                    }
                }
            }
        }

        /// Slices: every slice domain gets whole slices, nodes stay in
        /// their room, a required domain holds them all; and slices are
        /// placed whenever the domains' whole slices add up (in one
        /// domain of the required level, when required).
        #[test]
        fn slices_are_whole_sound_and_complete(
            spec in arb_fleet(),
            per_pod in 1u64..3,
            slices in 0u32..6,
            size in 1u32..5,
            slice_level in 1usize..3,
            required in proptest::option::of(0usize..2),
        ) {
            let fleet = Fleet::new(&spec);
            let rooms = fleet.rooms(&gpus(per_pod));
            let fit: Vec<u64> = spec.iter().map(|&(_, _, g)| g / per_pod).collect();
            let required = required.filter(|&l| l <= slice_level);
            let constraint = required.map_or(Constraint::Unconstrained, Constraint::Required);
            let count = slices * size;
            let result = place_sliced(&rooms, &levels(), count, constraint, slice_level, size);
            // Whole slices per slice domain, and per required domain.
            let key = |i: usize, level: usize| -> Vec<String> {
                LEVELS[..=level].iter().map(|l| fleet.labels[i][*l].clone()).collect()
            };
            let mut whole: BTreeMap<Vec<String>, u64> = BTreeMap::new();
            for (i, &f) in fit.iter().enumerate() {
                *whole.entry(key(i, slice_level)).or_insert(0) += f;
            }
            let exists = match required {
                Some(l) => {
                    let mut by_top: BTreeMap<Vec<String>, u64> = BTreeMap::new();
                    for (d, pods) in &whole {
                        *by_top.entry(d[..=l].to_vec()).or_insert(0) += pods / u64::from(size);
                    }
                    by_top.values().any(|&k| k >= u64::from(slices))
                }
                None => whole.values().map(|p| p / u64::from(size)).sum::<u64>() >= u64::from(slices),
            };
            prop_assert_eq!(result.is_some(), exists || slices == 0, "{:?}", result);
            if let Some(placed) = result {
                prop_assert_eq!(placed.iter().map(|&(_, p)| p).sum::<u32>(), count);
                let mut per_domain: BTreeMap<Vec<String>, u32> = BTreeMap::new();
                for &(i, pods) in &placed {
                    prop_assert!(u64::from(pods) <= fit[i], "node {} over its room", i);
                    *per_domain.entry(key(i, slice_level)).or_insert(0) += pods;
                }
                for (d, pods) in &per_domain {
                    prop_assert_eq!(pods % size, 0, "a slice split in {:?}", d);
                }
                if let (Some(l), false) = (required, placed.is_empty()) {
                    prop_assert_eq!(domain_of(&fleet, &placed, l).len(), 1);
                }
            }
        }
    }
}
