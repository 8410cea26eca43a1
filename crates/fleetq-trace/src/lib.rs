//! A replay of the Alibaba GPU trace (v2023, "openb") that measures
//! fleetq's node placement against the baselines of "Beware of
//! Fragmentation" (USENIX ATC '23), by that paper's method (issue 26,
//! item 8). See README.md for what is measured and what is simplified.
//!
//! - [`parse`]: the trace's CSV files.
//! - [`clusters`]: the nodes dealt into clusters, as fleetq sees them.
//! - [`workloads`]: tasks as workloads, and their queues.
//! - [`arrivals`]: the arrival stream, inflated to 130% of the GPUs.
//! - [`books`]: free room per node, kept independently of fleetq.
//! - [`baselines`]: Random-fit, Best-fit, GPU packing.
//! - [`fleetq`]: feeding the stream through fleetq's scheduler.
//! - [`replay`]: replaying a stream and the figures read from it.
//! - [`report`]: the markdown tables.

pub mod arrivals;
pub mod baselines;
pub mod books;
pub mod clusters;
pub mod fleetq;
pub mod parse;
pub mod replay;
pub mod report;
pub mod workloads;

use std::path::Path;
use std::time::Instant;

use crate::arrivals::{Order, Stream};
use crate::baselines::Policy;
use crate::clusters::Fleet;
use crate::fleetq::{FleetqError, Mode};
use crate::parse::ParseError;
use crate::replay::{Metrics, Replay};

/// Demand the stream is inflated to, in % of the fleet's GPUs.
pub const TARGET_PERCENT: u64 = 130;

/// The node list's file name in the trace folder.
pub const NODE_FILE: &str = "openb_node_list_gpu_node.csv";
/// The task files, with the titles their sections get.
pub const TASK_FILES: [(&str, &str); 2] = [
    ("default", "openb_pod_list_default.csv"),
    ("multigpu50", "openb_pod_list_multigpu50.csv"),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Seeds the resampling and Random-fit.
    pub seed: u64,
    /// Most arrivals pending in fleetq at a time.
    pub batch: usize,
    /// The order of the trace's own tasks.
    pub order: Order,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Fleetq(#[from] FleetqError),
}

/// Every policy on the same `stream`: fleetq with nodes, fleetq with a
/// bag of GPUs, then the three baselines.
pub fn compare(
    fleet: &Fleet,
    stream: &Stream,
    opts: &Options,
) -> Result<Vec<(Replay, Metrics)>, FleetqError> {
    let capacity = fleet.total_gpus();
    let mut replays = vec![fleetq::replay(fleet, stream, Mode::Nodes, opts.batch)?];
    // Merging the models into one flavor would let a task that names
    // models onto the others' nodes: the diagnostic is for streams where
    // every task accepts any model (both trace files).
    if stream.tasks.iter().all(|t| t.models.is_empty()) {
        replays.push(fleetq::replay(fleet, stream, Mode::OneFlavor, opts.batch)?);
    }
    replays.push(fleetq::replay(fleet, stream, Mode::Bag, opts.batch)?);
    for policy in Policy::ALL {
        replays.push(replay::baseline(fleet, stream, policy, opts.seed));
    }
    Ok(replays
        .into_iter()
        .map(|r| {
            let m = replay::measure(&r, stream, capacity);
            (r, m)
        })
        .collect())
}

/// One task file end to end: read, inflate, compare, render.
pub fn run_file(
    fleet: &Fleet,
    path: &Path,
    title: &str,
    opts: &Options,
) -> Result<String, TraceError> {
    let start = Instant::now();
    let rows = parse::tasks_file(path)?;
    let (tasks, counts) = workloads::gpu_tasks(&rows);
    let capacity = fleet.total_gpus();
    let stream = arrivals::inflate(&tasks, capacity, TARGET_PERCENT, opts.seed, opts.order);
    let results = compare(fleet, &stream, opts)?;
    let full_title = format!("{title} ({})", path.display());
    Ok(report::render(&report::Section {
        title: &full_title,
        counts,
        stream: &stream,
        capacity,
        opts: *opts,
        results: &results,
        elapsed: start.elapsed(),
    }))
}
