//! The arrival stream, by the paper's method: the trace's GPU tasks in
//! trace order, then tasks resampled from them (uniformly, with a seeded
//! RNG, so every run and every policy sees the same stream) until the
//! GPUs they demand reach a target share of the fleet's GPUs. A trace that
//! already demands more is cut at the task that reaches it. Tasks never
//! end, so what is placed stays placed.
//!
//! Demand is counted in whole GPUs as the tasks are submitted (a GPU share
//! counts as one, see `workloads`).
//!
//! [`Order::Shuffled`] first shuffles the trace's tasks (seeded), for a
//! Monte-Carlo reading: in trace order the multigpu50 file is the default
//! file's tasks followed by 909 multi-GPU ones, so the two streams are
//! the same until the default file's tasks run out (near 120% demand).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::workloads::Task;

/// The tasks in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    pub tasks: Vec<Task>,
    /// How many of them come from the trace; the rest were resampled.
    pub from_trace: usize,
}

impl Stream {
    pub fn resampled(&self) -> usize {
        self.tasks.len() - self.from_trace
    }

    /// GPUs demanded by all arrivals.
    pub fn demand(&self) -> u64 {
        self.tasks.iter().map(|t| t.need.gpus).sum()
    }
}

/// The order the trace's own tasks arrive in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// As the file lists them (the paper's replay).
    Trace,
    /// Shuffled with the seed.
    Shuffled,
}

/// Arrivals from `trace` (GPU tasks, in `order`) until they demand
/// `percent`% of `capacity` GPUs; the shuffle and the resampled copies
/// draw from `seed`. Exactly the trace when either is zero or the trace
/// is empty.
pub fn inflate(trace: &[Task], capacity: u64, percent: u64, seed: u64, order: Order) -> Stream {
    let target = u128::from(capacity) * u128::from(percent);
    let reached = |demand: u64| u128::from(demand) * 100 >= target;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ordered: Vec<&Task> = trace.iter().collect();
    if order == Order::Shuffled {
        ordered.shuffle(&mut rng);
    }
    let mut tasks = Vec::new();
    let mut demand = 0u64;
    for task in ordered {
        if target > 0 && reached(demand) {
            break;
        }
        demand = demand.saturating_add(task.need.gpus);
        tasks.push(task.clone());
    }
    let from_trace = tasks.len();
    if target == 0 || trace.is_empty() || trace.iter().all(|t| t.need.gpus == 0) {
        return Stream { tasks, from_trace };
    }
    while !reached(demand) {
        let task = &trace[rng.gen_range(0..trace.len())];
        demand = demand.saturating_add(task.need.gpus);
        tasks.push(task.clone());
    }
    Stream { tasks, from_trace }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clusters::Room;

    fn task(gpus: u64) -> Task {
        Task {
            name: format!("t{gpus}"),
            need: Room {
                gpus,
                cpu_milli: 1000,
                memory_mib: 1024,
            },
            models: Vec::new(),
            shared: false,
        }
    }

    #[test]
    fn a_short_trace_is_inflated_and_a_long_one_cut() {
        let trace = vec![task(1), task(2), task(4)];
        // 7 GPUs of 10 at 100%: resampled up to >= 10, deterministically.
        let s = inflate(&trace, 10, 100, 7, Order::Trace);
        assert_eq!(s.from_trace, 3);
        assert_eq!(s.tasks[..3], trace[..]);
        assert!(s.demand() >= 10 && s.demand() < 14, "{}", s.demand());
        assert_eq!(s, inflate(&trace, 10, 100, 7, Order::Trace));
        // 130% of 2 GPUs is 2.6: the second task (3 in all) reaches it.
        let s = inflate(&trace, 2, 130, 7, Order::Trace);
        assert_eq!((s.tasks.len(), s.from_trace), (2, 2));
        // Shuffled: the same tasks, in another (seeded) order.
        let s = inflate(&trace, 7, 100, 7, Order::Shuffled);
        let mut gpus: Vec<u64> = s.tasks.iter().map(|t| t.need.gpus).collect();
        gpus.sort_unstable();
        assert_eq!(gpus, [1, 2, 4]);
    }
}
