//! The paper's baseline placement policies, at whole-GPU granularity, as
//! plain functions over the whole fleet's nodes (no scheduler, no quota,
//! no clusters): each picks one node that fits the task, or none.
//!
//! - Random-fit: a node drawn uniformly among those that fit.
//! - Best-fit: the node left with the fewest free GPUs, then the least
//!   free CPU.
//! - GPU packing: a node some of whose GPUs are already allocated before
//!   an idle one, then the fewest free GPUs, then the least free CPU (the
//!   paper's packing prefers partly used GPUs, then idle GPUs of active
//!   nodes, then idle nodes; with whole GPUs the first step is empty).
//!
//! Remaining ties go to the first node in the fleet's order.

use rand::rngs::StdRng;
use rand::Rng;

use crate::books::Books;
use crate::clusters::Fleet;
use crate::workloads::Task;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    RandomFit,
    BestFit,
    GpuPacking,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::RandomFit, Policy::BestFit, Policy::GpuPacking];

    pub fn name(self) -> &'static str {
        match self {
            Policy::RandomFit => "Random-fit",
            Policy::BestFit => "Best-fit",
            Policy::GpuPacking => "GPU packing",
        }
    }
}

/// The node `policy` puts `task` on, or `None` if no node fits it.
pub fn choose(
    policy: Policy,
    fleet: &Fleet,
    books: &Books,
    task: &Task,
    rng: &mut StdRng,
) -> Option<usize> {
    let fits = |n: &usize| books.fits(fleet, *n, task);
    let nodes = 0..fleet.nodes.len();
    match policy {
        Policy::RandomFit => {
            let candidates: Vec<usize> = nodes.filter(fits).collect();
            if candidates.is_empty() {
                return None;
            }
            Some(candidates[rng.gen_range(0..candidates.len())])
        }
        Policy::BestFit => best_fit(nodes.filter(fits), books),
        Policy::GpuPacking => nodes.filter(fits).min_by_key(|&n| {
            let free = books.free(n);
            (!books.active(n), free.gpus, free.cpu_milli, n)
        }),
    }
}

/// Best-fit among `candidates` (nodes that fit): the fewest free GPUs,
/// then the least free CPU, then the first. The task's own need is the
/// same on every node, so "left after" orders as "free now".
pub fn best_fit(candidates: impl Iterator<Item = usize>, books: &Books) -> Option<usize> {
    candidates.min_by_key(|&n| {
        let free = books.free(n);
        (free.gpus, free.cpu_milli, n)
    })
}
