//! How close two GPUs of one host are, and a close set of them for a
//! workload (issue 26: the NVLink/PCIe/NUMA neighbourhood). NVML tells,
//! per pair, how many NVLinks join them and the closest PCIe ancestor
//! they share; [`closeness`] turns that into one number, smaller being
//! closer, and [`closest_set`] picks the free devices a pod set gets on
//! this node so that they talk over NVLink, or the shortest PCIe path,
//! where the host allows. Pure: tested on recorded topologies without a
//! driver.

use std::collections::BTreeMap;

/// The closest PCIe (or system) ancestor two GPUs share, as NVML's
/// `nvmlGpuTopologyLevel_t` names it, nearest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PcieLevel {
    /// On one board (e.g. a dual-GPU card).
    Internal,
    /// Behind one PCIe switch.
    Single,
    /// Behind several PCIe switches, without the host bridge.
    Multiple,
    /// On one host bridge.
    HostBridge,
    /// On one NUMA node, across host bridges.
    Numa,
    /// Anywhere in the system (across NUMA nodes).
    System,
}

/// Closeness of two GPUs joined by `nvlinks` NVLinks (0: none) whose
/// closest common ancestor is `level` (`None`: unknown): 1-9 over NVLink,
/// fewer the more links; 10-15 over PCIe by level; 16 unknown. Any NVLink
/// is closer than any PCIe path.
pub fn closeness(nvlinks: u32, level: Option<PcieLevel>) -> u32 {
    if nvlinks > 0 {
        return 10 - nvlinks.min(9);
    }
    match level {
        Some(PcieLevel::Internal) => 10,
        Some(PcieLevel::Single) => 11,
        Some(PcieLevel::Multiple) => 12,
        Some(PcieLevel::HostBridge) => 13,
        Some(PcieLevel::Numa) => 14,
        Some(PcieLevel::System) => 15,
        None => 16,
    }
}

/// The `count` devices among `free` (ids, in the pool's order) that are
/// closest together: the smallest sum of pairwise closeness, grown
/// greedily from each device in turn (the nearest next, ties in pool
/// order), the first best. Pairs `distance` does not know count as
/// unknown. `None` when fewer than `count` are free.
pub fn closest_set(
    free: &[&str],
    count: usize,
    distance: &BTreeMap<(String, String), u32>,
) -> Option<Vec<usize>> {
    if count > free.len() {
        return None;
    }
    // Without a topology (a static inventory) or with no choice to make:
    // the first free ones, without weighing every pair.
    if count <= 1 || distance.is_empty() || count == free.len() {
        return Some((0..count).collect());
    }
    let d = |a: usize, b: usize| {
        distance
            .get(&(free[a].to_string(), free[b].to_string()))
            .copied()
            .unwrap_or_else(|| closeness(0, None))
    };
    let mut best: Option<(u32, Vec<usize>)> = None;
    for seed in 0..free.len() {
        let mut chosen = vec![seed];
        let mut total = 0u32;
        while chosen.len() < count {
            let next = (0..free.len())
                .filter(|i| !chosen.contains(i))
                .map(|i| (chosen.iter().map(|&c| d(c, i)).sum::<u32>(), i))
                .min()?;
            total = total.saturating_add(next.0);
            chosen.push(next.1);
        }
        if best.as_ref().is_none_or(|(t, _)| total < *t) {
            best = Some((total, chosen));
        }
    }
    best.map(|(_, mut set)| {
        set.sort_unstable();
        set
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight GPUs in two NVLink islands of four (every pair within an
    /// island joined by 2 links), the islands on different NUMA nodes.
    fn two_islands() -> (Vec<String>, BTreeMap<(String, String), u32>) {
        let ids: Vec<String> = (0..8).map(|i| format!("GPU-{i}")).collect();
        let mut distance = BTreeMap::new();
        for a in 0..8 {
            for b in 0..8 {
                if a == b {
                    continue;
                }
                let same = a / 4 == b / 4;
                let c = match same {
                    true => closeness(2, Some(PcieLevel::Numa)),
                    false => closeness(0, Some(PcieLevel::System)),
                };
                distance.insert((ids[a].clone(), ids[b].clone()), c);
            }
        }
        (ids, distance)
    }

    #[test]
    fn nvlink_is_closer_than_any_pcie_path() {
        assert!(closeness(1, Some(PcieLevel::System)) < closeness(0, Some(PcieLevel::Internal)));
        assert!(closeness(4, None) < closeness(2, None));
        assert!(closeness(0, Some(PcieLevel::Single)) < closeness(0, Some(PcieLevel::System)));
        assert_eq!(closeness(0, None), 16);
    }

    /// With GPU 0 taken, four GPUs go to the whole second island, not to
    /// the first free four (1, 2, 3 and 4, across the islands).
    #[test]
    fn a_set_stays_within_an_nvlink_island() {
        let (ids, distance) = two_islands();
        let free: Vec<&str> = ids[1..].iter().map(String::as_str).collect();
        let set = closest_set(&free, 4, &distance).expect("a set");
        let chosen: Vec<&str> = set.iter().map(|&i| free[i]).collect();
        assert_eq!(chosen, ["GPU-4", "GPU-5", "GPU-6", "GPU-7"]);
        // Two fit in the first island: the first such pair.
        let set = closest_set(&free, 2, &distance).expect("a set");
        let chosen: Vec<&str> = set.iter().map(|&i| free[i]).collect();
        assert_eq!(chosen, ["GPU-1", "GPU-2"]);
        assert_eq!(closest_set(&free, 8, &distance), None);
        // Without a topology: the first free ones.
        let set = closest_set(&free, 3, &BTreeMap::new()).expect("a set");
        assert_eq!(set, [0, 1, 2]);
    }
}
