//! What is free on every node, kept here and not by fleetq: the baselines
//! place against these books, and fleetq's admissions are checked against
//! them, so a placement bug in fleetq cannot hide behind its own
//! accounting.

use crate::clusters::{Fleet, Room};
use crate::workloads::Task;

/// Free room per node of a fleet (indices as in [`Fleet::nodes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Books {
    free: Vec<Room>,
    /// GPUs allocated per node.
    used_gpus: Vec<u64>,
}

impl Books {
    /// Every node empty.
    pub fn new(fleet: &Fleet) -> Books {
        Books {
            free: fleet.nodes.iter().map(|n| n.room).collect(),
            used_gpus: vec![0; fleet.nodes.len()],
        }
    }

    pub fn free(&self, node: usize) -> Room {
        self.free[node]
    }

    /// Some of its GPUs are allocated.
    pub fn active(&self, node: usize) -> bool {
        self.used_gpus[node] > 0
    }

    /// `task` may run on `node` (an accepted model) and it has the room.
    pub fn fits(&self, fleet: &Fleet, node: usize, task: &Task) -> bool {
        task.accepts(&fleet.nodes[node].model) && self.free[node].holds(&task.need)
    }

    /// Some node of `fleet` could take `task` now.
    pub fn any_fits(&self, fleet: &Fleet, task: &Task) -> bool {
        (0..self.free.len()).any(|n| self.fits(fleet, n, task))
    }

    /// Puts `task` on `node`; `false` (and nothing charged) where it does
    /// not have the room.
    pub fn charge(&mut self, node: usize, task: &Task) -> bool {
        match self.free[node].minus(&task.need) {
            Some(left) => {
                self.free[node] = left;
                self.used_gpus[node] += task.need.gpus;
                true
            }
            None => false,
        }
    }

    pub fn allocated_gpus(&self) -> u64 {
        self.used_gpus.iter().sum()
    }
}
