//! Replaying a stream under one policy, and what the paper's method reads
//! from a replay: the share of the fleet's GPUs allocated at the first
//! task that cannot be placed, and when the arrivals' demand reaches 100%
//! and 130% of the fleet's GPUs (a task that fails is skipped; arrivals
//! go on).

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::arrivals::Stream;
use crate::baselines::{self, Policy};
use crate::books::Books;
use crate::clusters::Fleet;

/// What became of one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// On a node that had the room (checked against this crate's books).
    Placed,
    /// Not placed: no node fits (baselines) or fleetq left it waiting.
    /// Skipped, as in the paper.
    Refused,
    /// Admitted, but no node could really hold it given what was admitted
    /// before: what a bag of GPUs admits and cannot run.
    Unplaceable,
}

/// One policy's replay of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub policy: String,
    /// One per arrival, in arrival order.
    pub outcomes: Vec<Outcome>,
    /// Wall time spent deciding (fleetq: its `schedule` calls).
    pub deciding: Duration,
    /// Placements (or fleetq admissions) decided in that time.
    pub admissions: usize,
    /// Observations worth printing under the table.
    pub notes: Vec<String>,
}

/// Replays `stream` on `fleet` with a baseline `policy`; Random-fit draws
/// from `seed`.
pub fn baseline(fleet: &Fleet, stream: &Stream, policy: Policy, seed: u64) -> Replay {
    let mut books = Books::new(fleet);
    // Not the resampling stream's seed: the draws must not correlate.
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(0x9e37_79b9));
    let mut deciding = Duration::ZERO;
    let mut outcomes = Vec::with_capacity(stream.tasks.len());
    for task in &stream.tasks {
        let start = Instant::now();
        let node = baselines::choose(policy, fleet, &books, task, &mut rng);
        deciding += start.elapsed();
        outcomes.push(match node {
            Some(n) if books.charge(n, task) => Outcome::Placed,
            _ => Outcome::Refused,
        });
    }
    Replay {
        policy: policy.name().to_string(),
        admissions: outcomes.iter().filter(|o| **o == Outcome::Placed).count(),
        outcomes,
        deciding,
        notes: Vec::new(),
    }
}

/// GPUs at one point of a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// On nodes that had the room.
    pub placed: u64,
    /// Admitted, placed or not (differs from `placed` for a bag of GPUs).
    pub admitted: u64,
}

/// The paper's figures for one replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    /// At the first arrival that did not get a node.
    pub first_failure: Option<Point>,
    /// After the arrival whose demand reached 100% of capacity.
    pub at_100: Option<Point>,
    /// After the arrival whose demand reached 130% of capacity.
    pub at_130: Option<Point>,
    pub unplaceable: usize,
    pub refused: usize,
    /// Microseconds of deciding per admission.
    pub us_per_admission: Option<f64>,
}

/// Reads [`Metrics`] from `replay` of `stream` on a fleet of `capacity`
/// GPUs.
pub fn measure(replay: &Replay, stream: &Stream, capacity: u64) -> Metrics {
    let mut now = Point {
        placed: 0,
        admitted: 0,
    };
    let mut demand = 0u64;
    let mut m = Metrics {
        first_failure: None,
        at_100: None,
        at_130: None,
        unplaceable: 0,
        refused: 0,
        us_per_admission: (replay.admissions > 0)
            .then(|| replay.deciding.as_secs_f64() * 1e6 / replay.admissions as f64),
    };
    for (task, outcome) in stream.tasks.iter().zip(&replay.outcomes) {
        let gpus = task.need.gpus;
        match outcome {
            Outcome::Placed => {
                now.placed += gpus;
                now.admitted += gpus;
            }
            Outcome::Unplaceable => {
                now.admitted += gpus;
                m.unplaceable += 1;
            }
            Outcome::Refused => m.refused += 1,
        }
        if *outcome != Outcome::Placed && m.first_failure.is_none() {
            m.first_failure = Some(now);
        }
        demand += gpus;
        let reached =
            |percent: u64| u128::from(demand) * 100 >= u128::from(capacity) * u128::from(percent);
        if reached(100) && m.at_100.is_none() {
            m.at_100 = Some(now);
        }
        if reached(130) && m.at_130.is_none() {
            m.at_130 = Some(now);
        }
    }
    m
}
