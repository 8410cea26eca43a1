//! What `fleetq bench` reports: a table for people, JSON or YAML with
//! `-o`, and in the table's last line the headline figures as `key=value`
//! pairs for scripts.

use serde::Serialize;

/// Percentiles of a set of latencies in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values` (all zero when empty).
    pub fn from_values(mut values: Vec<u64>) -> Percentiles {
        values.sort_unstable();
        let at = |p: f64| {
            values
                .get(((values.len().saturating_sub(1)) as f64 * p).round() as usize)
                .copied()
                .unwrap_or(0)
        };
        Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            p999: at(0.999),
            max: values.last().copied().unwrap_or(0),
        }
    }

    /// `p50 A p99 B max C`, for the stage lines.
    pub fn short(&self) -> String {
        format!("p50 {} p99 {} max {}", self.p50, self.p99, self.max)
    }
}

/// What a run's latencies and rates count from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimedFrom {
    /// Each workload's send time.
    Submit,
    /// A `--deep-queue` run's release of the held queues.
    Release,
}

impl TimedFrom {
    fn label(self) -> &'static str {
        match self {
            TimedFrom::Submit => "submit",
            TimedFrom::Release => "release",
        }
    }

    /// Where the rates' spans begin, in words.
    fn since(self) -> &'static str {
        match self {
            TimedFrom::Submit => "the first submit",
            TimedFrom::Release => "the release",
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub workloads: u64,
    pub mode: String,
    pub timed_from: TimedFrom,
    /// GPUs of the simulated cluster, when limited.
    pub gpus: Option<u64>,
    /// Nodes per flavor the simulated cluster reports (0: totals only).
    pub nodes: u64,
    pub clients: u64,
    pub batch: u64,
    pub cluster_queues: u64,
    pub cohorts: u64,
    pub flavors: u64,
    pub priorities: u64,
    /// Workloads parked pending (never admitted) during the run.
    pub pending_backlog: u64,
    pub submit_seconds: f64,
    pub submissions_per_second: f64,
    pub admit_seconds: f64,
    pub admissions_per_second: f64,
    /// Until the last Running report (Slurm's "started").
    pub start_seconds: f64,
    pub starts_per_second: f64,
    /// Finished workloads per second, from the first finish to the last;
    /// not measured when workloads run longer than a minute.
    pub completions_per_second: Option<f64>,
    /// Submit -> admitted (see `admitted_measured_at`).
    pub latency_ms_p50: u64,
    pub latency_ms_p90: u64,
    pub latency_ms_p99: u64,
    pub latency_ms_p999: u64,
    pub latency_ms_max: u64,
    /// What "admitted" was timed by.
    pub admitted_measured_at: String,
    /// Workloads whose admission was not observed and were timed by their
    /// Running report instead (a watcher fell behind).
    pub admitted_fallbacks: u64,
    /// Submit -> the leader's stamp on the executor's Running report.
    pub running_ms_p50: u64,
    pub running_ms_p90: u64,
    pub running_ms_p99: u64,
    pub running_ms_p999: u64,
    pub running_ms_max: u64,
    /// Submit call until the leader stamped the submission.
    pub stage_submit_ms: String,
    /// Submission until the leader stamped (proposed) the admission.
    pub stage_schedule_ms: String,
    /// Admission proposed until the executor's Running report was stamped.
    pub stage_executor_ms: String,
    pub scheduler_cycles: u64,
    pub scheduler_cycle_us_mean: u64,
    pub admit_batches: u64,
    pub decisions_per_batch: f64,
    /// Admissions the leader planned into the entry that queued the
    /// workload (one commit instead of two).
    pub admitted_on_submit: u64,
    /// CPU of this whole process (group, executor and clients) from the
    /// first submission until the last admission.
    pub cpu_seconds: f64,
    pub cpu_seconds_per_1k: f64,
    /// Resident memory the `--pending` backlog added, per workload and per
    /// replica (the three nodes share this process).
    pub rss_bytes_per_pending: Option<u64>,
}

impl Report {
    pub fn set_latency(&mut self, p: Percentiles) {
        self.latency_ms_p50 = p.p50;
        self.latency_ms_p90 = p.p90;
        self.latency_ms_p99 = p.p99;
        self.latency_ms_p999 = p.p999;
        self.latency_ms_max = p.max;
    }

    pub fn set_running(&mut self, p: Percentiles) {
        self.running_ms_p50 = p.p50;
        self.running_ms_p90 = p.p90;
        self.running_ms_p99 = p.p99;
        self.running_ms_p999 = p.p999;
        self.running_ms_max = p.max;
    }

    /// The headline figures as `key=value` pairs.
    pub fn machine_line(&self) -> String {
        let mut line = format!(
            "admissions_per_s={:.0} p50_ms={} p99_ms={} cpu_s_per_1k={:.3} \
             submissions_per_s={:.0} completions_per_s={} p90_ms={} p999_ms={} \
             running_p50_ms={} running_p99_ms={} decisions_per_entry={:.1} starts_per_s={:.0} \
             admitted_on_submit={}",
            self.admissions_per_second,
            self.latency_ms_p50,
            self.latency_ms_p99,
            self.cpu_seconds_per_1k,
            self.submissions_per_second,
            self.completions_per_second
                .map_or("n/a".to_string(), |c| format!("{c:.0}")),
            self.latency_ms_p90,
            self.latency_ms_p999,
            self.running_ms_p50,
            self.running_ms_p99,
            self.decisions_per_batch,
            self.starts_per_second,
            self.admitted_on_submit,
        );
        if let Some(rss) = self.rss_bytes_per_pending {
            line.push_str(&format!(" rss_bytes_per_pending={rss}"));
        }
        line
    }

    pub fn print(&self) {
        let mut mix = format!("{} ClusterQueues", self.cluster_queues);
        if self.cohorts > 0 {
            mix.push_str(&format!(" in {} cohorts", self.cohorts));
        }
        if self.flavors > 1 {
            mix.push_str(&format!(", {} flavors", self.flavors));
        }
        if self.priorities > 1 {
            mix.push_str(&format!(", {} priorities", self.priorities));
        }
        if let Some(gpus) = self.gpus {
            mix.push_str(&format!(", {gpus} GPUs"));
        }
        if self.nodes > 0 {
            mix.push_str(&format!(", {} nodes per flavor", self.nodes));
        }
        let from = self.timed_from.label();
        let since = self.timed_from.since();
        println!(
            "{} workloads, {}, {} per call, {mix}, 3 nodes, sled fsync on",
            self.workloads, self.mode, self.batch
        );
        if self.pending_backlog > 0 {
            println!(
                "backlog                  {} workloads pending in a queue with no quota",
                self.pending_backlog
            );
        }
        println!(
            "submissions/s            {:>10.0}   ({:.2} s)",
            self.submissions_per_second, self.submit_seconds
        );
        println!(
            "admissions/s             {:>10.0}   ({:.2} s from {since} to the last admission)",
            self.admissions_per_second, self.admit_seconds
        );
        println!(
            "started/s                {:>10.0}   ({:.2} s from {since} to the last Running report)",
            self.starts_per_second, self.start_seconds
        );
        match self.completions_per_second {
            Some(c) => println!("completions/s            {c:>10.0}"),
            None => println!("completions/s                   n/a   (workloads run over a minute)"),
        }
        println!(
            "{:<25}p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format!("{from}->admitted ms"),
            self.latency_ms_p50,
            self.latency_ms_p90,
            self.latency_ms_p99,
            self.latency_ms_p999,
            self.latency_ms_max
        );
        println!("  admitted = {}", self.admitted_measured_at);
        if self.admitted_fallbacks > 0 {
            println!(
                "  ({} workloads' admissions not observed; timed by their Running report)",
                self.admitted_fallbacks
            );
        }
        println!(
            "{:<25}p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format!("{from}->running ms"),
            self.running_ms_p50,
            self.running_ms_p90,
            self.running_ms_p99,
            self.running_ms_p999,
            self.running_ms_max
        );
        if self.timed_from == TimedFrom::Release {
            println!(
                "  stages ms              release->admission proposed {}; ->running stamped {}",
                self.stage_schedule_ms, self.stage_executor_ms
            );
        } else {
            println!(
                "  stages ms              send->submission stamped {}; ->admission proposed {}; ->running stamped {}",
                self.stage_submit_ms, self.stage_schedule_ms, self.stage_executor_ms
            );
        }
        if self.scheduler_cycles > 0 {
            println!(
                "scheduler                {} cycles, mean {} us; {} AdmitBatch entries, {:.1} decisions per entry",
                self.scheduler_cycles,
                self.scheduler_cycle_us_mean,
                self.admit_batches,
                self.decisions_per_batch
            );
        }
        println!(
            "admitted on submit       {} of {} (by the entry that queued them)",
            self.admitted_on_submit, self.workloads
        );
        if self.cpu_seconds > 0.0 {
            println!(
                "CPU                      {:.1} s (this process), {:.3} s per 1,000 admissions",
                self.cpu_seconds, self.cpu_seconds_per_1k
            );
        }
        if let Some(rss) = self.rss_bytes_per_pending {
            println!("RSS per pending          {rss} bytes per workload per replica");
        }
        println!("{}", self.machine_line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let p = Percentiles::from_values((1..=1000).rev().collect());
        assert_eq!(
            (p.p50, p.p90, p.p99, p.p999, p.max),
            (501, 900, 990, 999, 1000)
        );
        assert_eq!(Percentiles::from_values(Vec::new()), Percentiles::default());
        assert_eq!(Percentiles::from_values(vec![7]).p99, 7);
    }
}
