//! The markdown printed per trace file: what was replayed, one table row
//! per policy, and the notes the replays made.

use std::fmt::Write;
use std::time::Duration;

use crate::arrivals::{Order, Stream};
use crate::replay::{Metrics, Point, Replay};
use crate::workloads::TaskCounts;
use crate::Options;

/// Everything one file's section shows.
pub struct Section<'a> {
    pub title: &'a str,
    pub counts: TaskCounts,
    pub stream: &'a Stream,
    pub capacity: u64,
    pub opts: Options,
    pub results: &'a [(Replay, Metrics)],
    pub elapsed: Duration,
}

/// The section as markdown.
pub fn render(s: &Section<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", s.title);
    let _ = writeln!(
        out,
        "{} tasks: {} CPU-only left out, {} GPU tasks ({} GPU shares counted as one whole GPU each). \
         Arrivals: {} ({} from the trace {}, {} resampled with seed {}), demanding {} GPUs, {:.1}% of the fleet's {}. \
         fleetq fed in batches of {}.\n",
        s.counts.rows,
        s.counts.cpu_only,
        s.counts.gpu_tasks,
        s.counts.shared,
        s.stream.tasks.len(),
        s.stream.from_trace,
        match s.opts.order {
            Order::Trace => "in order",
            Order::Shuffled => "shuffled",
        },
        s.stream.resampled(),
        s.opts.seed,
        s.stream.demand(),
        percent(s.stream.demand(), s.capacity),
        s.capacity,
        s.opts.batch,
    );
    out.push_str(&table(s.results, s.capacity));
    let notes: Vec<&String> = s.results.iter().flat_map(|(r, _)| &r.notes).collect();
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            let _ = writeln!(out, "- {note}");
        }
    }
    let _ = writeln!(out, "\nReplayed in {:.1} s.", s.elapsed.as_secs_f64());
    out
}

/// One row per policy: GPUs allocated (share of `capacity`) at the first
/// failure, at 100% and 130% demand; unplaceable admissions; µs each.
pub fn table(results: &[(Replay, Metrics)], capacity: u64) -> String {
    let mut out = String::from(
        "| policy | allocated at first failure % | at 100% demand % | at 130% demand % | unplaceable admissions | µs per admission |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    for (replay, m) in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            replay.policy,
            cell(m.first_failure, capacity),
            cell(m.at_100, capacity),
            cell(m.at_130, capacity),
            m.unplaceable,
            m.us_per_admission
                .map_or_else(|| "n/a".to_string(), |us| format!("{us:.1}")),
        );
    }
    out
}

/// GPUs on nodes as a share of capacity; where more was admitted than
/// placed (a bag of GPUs), the admitted share too.
fn cell(point: Option<Point>, capacity: u64) -> String {
    match point {
        None => "n/a".into(),
        Some(p) if p.admitted != p.placed => format!(
            "{:.1} (admitted {:.1})",
            percent(p.placed, capacity),
            percent(p.admitted, capacity)
        ),
        Some(p) => format!("{:.1}", percent(p.placed, capacity)),
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    part as f64 * 100.0 / whole as f64
}
