//! `fleetq-chaos sim [--seed N | --seeds COUNT --start S] [--nodes 3|5]
//! [--scenario random|regressions|NAME,...]`: runs simulated seeds, prints
//! one line per seed and a summary, exits non-zero on any failure.
//! `fleetq-chaos live`: the real binaries under faults.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fleetq-chaos", about = "fleetq's deterministic simulator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a three- (or five-) node control plane and two agents
    /// under the faults each seed draws, and check the invariants.
    Sim {
        /// Run exactly this seed (to replay a failure).
        #[arg(long, conflicts_with_all = ["seeds", "start"])]
        seed: Option<u64>,
        /// How many consecutive seeds to run.
        #[arg(long, default_value_t = 10)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Seeds run at once (default: the CPUs). Each seed runs in a
        /// process of its own, so `--seed S` replays it exactly.
        #[arg(long)]
        jobs: Option<usize>,
        /// Stop starting seeds after the first violation.
        #[arg(long)]
        until_violation: bool,
        /// Control-plane nodes: 3 or 5.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(3..=5))]
        nodes: u64,
        /// `random` (faults drawn from each seed), `regressions` (every
        /// Kueue regression scenario), or regression names separated by
        /// commas; each scenario runs every seed. `--scenario list` names
        /// them.
        #[arg(long, default_value = "random")]
        scenario: String,
        /// `all` (the default): every fault kind a seed can draw; `basic`:
        /// random plans keep only their leader partition or node crash and
        /// their agent fault (the fault set of earlier soaks).
        #[arg(long, default_value = "all", value_parser = ["all", "basic"])]
        faults: String,
        /// `on` (the default): plans with nodes may put them in racks and
        /// draw gangs with topology; `off`: the plan a seed drew before
        /// racks were drawn (7 Dec), so a seed that once failed replays
        /// as it did.
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        racks: String,
        /// The ledger's own after-every-command invariant check: `on` (the
        /// default, whatever the build profile) or `off` (to show that the
        /// outside checks, the oracle and the journals, stand alone).
        #[arg(long, default_value = "on", value_parser = ["on", "off"])]
        ledger_checks: String,
    },
    /// Run the real binaries on loopback (3 servers, 2 agents with the
    /// process executor) under named faults with clients submitting and
    /// cancelling throughout; then heal, quiesce and check.
    Live {
        /// Faults to inject, in order: leader-partition, leader-kill,
        /// agent-partition, agent-kill, follower-pause, slow-network,
        /// lossy-network, split-brain (comma-separated; run in order).
        #[arg(
            long,
            default_value = "leader-partition,leader-kill,agent-partition,agent-kill"
        )]
        scenario: String,
        /// Total time under load, shared by the scenarios (e.g. 60s, 1h).
        #[arg(long, default_value = "60s")]
        duration: String,
        /// The fleetq binary (default: next to this one).
        #[arg(long, value_name = "PATH")]
        fleetq: Option<std::path::PathBuf>,
        /// Seed of the clients' choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Keep the run's directory (logs, data, journals) even when it passes.
        #[arg(long)]
        keep: bool,
    },
    /// Measure failover: kill -9 the leader of the real binaries (3
    /// servers, 2 agents on loopback) again and again, and time each from
    /// the kill to the first admission the new leader makes; prints p50
    /// and p99 and ends with `kills=N p50_ms=… p99_ms=… max_ms=…`.
    Failover {
        /// How many times to kill the leader.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10000))]
        kills: u64,
        /// The fleetq binary (default: next to this one).
        #[arg(long, value_name = "PATH")]
        fleetq: Option<std::path::PathBuf>,
        /// Keep the run's directory (logs, data).
        #[arg(long)]
        keep: bool,
        /// The servers' `--election-timeout` (default: theirs, 400ms).
        #[arg(long, value_name = "DURATION")]
        election_timeout: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Node logs are off unless RUST_LOG asks for them.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    match cli.command {
        Command::Sim {
            seed,
            seeds,
            start,
            jobs,
            until_violation,
            nodes,
            scenario,
            faults,
            racks,
            ledger_checks,
        } => {
            // Read once by every ledger this process (and each seed's
            // process, which inherits it) creates.
            std::env::set_var(fleetq_ledger::INVARIANT_CHECKS_ENV, &ledger_checks);
            let basic = faults == "basic";
            let racks = racks == "on";
            if nodes == 4 {
                eprintln!("error: --nodes: 3 or 5 (an even group tolerates no more failures than the odd one below it)");
                return ExitCode::from(2);
            }
            if scenario == "list" {
                for r in fleetq_chaos::regressions::REGRESSIONS {
                    println!("{:<28} {:<26} {}", r.name, r.kueue, r.mechanism);
                }
                return ExitCode::SUCCESS;
            }
            let scenarios = match scenarios(&scenario) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: --scenario: {e}");
                    return ExitCode::from(2);
                }
            };
            let seeds: Vec<u64> = match seed {
                Some(s) => vec![s],
                None => (0..seeds).map(|i| start.wrapping_add(i)).collect(),
            };
            let runs: Vec<Run> = scenarios
                .iter()
                .flat_map(|&scenario| {
                    seeds.iter().map(move |&seed| Run {
                        scenario,
                        seed,
                        nodes,
                        basic,
                        racks,
                    })
                })
                .collect();
            let jobs = jobs
                .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
                .unwrap_or(1)
                .max(1);
            // A long random run must strike every kind of fault.
            let require_coverage = scenarios.len() == 1
                && scenarios[0].is_none()
                && !basic
                && runs.len() >= COVERAGE_SEEDS;
            if runs.len() > 1 {
                sim_in_processes(&runs, jobs, until_violation, require_coverage)
            } else {
                sim_here(&runs)
            }
        }
        Command::Live {
            scenario,
            duration,
            fleetq,
            seed,
            keep,
        } => live(&scenario, &duration, fleetq, seed, keep),
        Command::Failover {
            kills,
            fleetq,
            keep,
            election_timeout,
        } => failover(kills as usize, fleetq, keep, election_timeout),
    }
}

fn fleetq_binary(fleetq: Option<std::path::PathBuf>) -> std::path::PathBuf {
    fleetq.unwrap_or_else(|| {
        std::env::current_exe()
            .map(|p| p.with_file_name("fleetq"))
            .unwrap_or_else(|_| "fleetq".into())
    })
}

fn failover(
    kills: usize,
    fleetq: Option<std::path::PathBuf>,
    keep: bool,
    election_timeout: Option<String>,
) -> ExitCode {
    use fleetq_chaos::live::failover::{quantile, run, FailoverOptions};
    let options = FailoverOptions {
        fleetq: fleetq_binary(fleetq),
        kills,
        keep,
        election_timeout,
    };
    match run(&options) {
        Ok(rounds) => {
            let admission: Vec<u64> = rounds.iter().map(|r| r.admission_ms).collect();
            let leader: Vec<u64> = rounds.iter().map(|r| r.leader_ms).collect();
            println!(
                "leader seen: p50 {} ms, p99 {} ms; first admission: p50 {} ms, p99 {} ms, max {} ms",
                quantile(&leader, 0.5),
                quantile(&leader, 0.99),
                quantile(&admission, 0.5),
                quantile(&admission, 0.99),
                quantile(&admission, 1.0)
            );
            println!(
                "kills={} p50_ms={} p99_ms={} max_ms={}",
                rounds.len(),
                quantile(&admission, 0.5),
                quantile(&admission, 0.99),
                quantile(&admission, 1.0)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn live(
    scenario: &str,
    duration: &str,
    fleetq: Option<std::path::PathBuf>,
    seed: u64,
    keep: bool,
) -> ExitCode {
    let scenarios = match fleetq_chaos::live::scenario::Scenario::parse_list(scenario) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => {
            eprintln!("error: --scenario: name at least one scenario");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let duration = match fleetq_model::time::parse_duration(duration) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --duration: {e}");
            return ExitCode::from(2);
        }
    };
    let fleetq = fleetq.unwrap_or_else(|| {
        std::env::current_exe()
            .map(|p| p.with_file_name("fleetq"))
            .unwrap_or_else(|_| "fleetq".into())
    });
    let options = fleetq_chaos::live::LiveOptions {
        fleetq,
        scenarios,
        duration,
        seed,
        keep,
    };
    match fleetq_chaos::live::run(&options) {
        Ok(report) => {
            for v in &report.violations {
                println!("VIOLATION {v}");
            }
            println!(
                "submitted={} acked={} unknown={} cancels={} workloads={} samples={} unanswered={}",
                report.acked + report.unknown,
                report.acked,
                report.unknown,
                report.cancels,
                report.workloads,
                report.samples.0,
                report.samples.1
            );
            if let Some(dir) = &report.dir {
                println!("logs: {}", dir.display());
            }
            println!(
                "scenarios={} faults={} violations={}",
                report.scenarios,
                report.faults,
                report.violations.len()
            );
            if report.violations.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One simulated run to do: a scenario (None: random), a seed, a size.
#[derive(Clone, Copy)]
struct Run {
    scenario: Option<&'static fleetq_chaos::regressions::Regression>,
    seed: u64,
    nodes: u64,
    /// `--faults basic`.
    basic: bool,
    /// `--racks on`.
    racks: bool,
}

impl Run {
    fn plan(&self) -> fleetq_chaos::Plan {
        let random = || fleetq_chaos::Plan::drawn(self.seed, self.nodes, self.racks);
        match (self.scenario, self.basic) {
            (Some(r), _) => r.plan(self.seed, self.nodes),
            (None, false) => random(),
            (None, true) => random().basic_faults(),
        }
    }
}

/// The scenarios `--scenario` names.
fn scenarios(
    list: &str,
) -> Result<Vec<Option<&'static fleetq_chaos::regressions::Regression>>, String> {
    use fleetq_chaos::regressions::{find, REGRESSIONS};
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "random" => out.push(None),
            "regressions" => out.extend(REGRESSIONS.iter().map(Some)),
            _ => out.push(Some(find(name).ok_or_else(|| {
                format!(
                    "no scenario {name:?}: random, regressions, or one of {}",
                    REGRESSIONS
                        .iter()
                        .map(|r| r.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?)),
        }
    }
    if out.is_empty() {
        return Err("name at least one scenario".into());
    }
    Ok(out)
}

/// A random run of at least this many seeds fails unless every kind of
/// fault struck in some seed.
const COVERAGE_SEEDS: usize = 500;

/// Planned and struck faults per kind, over a run's seeds.
#[derive(Default)]
struct Coverage(std::collections::BTreeMap<String, (u64, u64)>);

impl Coverage {
    /// Adds a seed's `coverage: kind=1/1 ...` line.
    fn add(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("coverage:") else {
            return;
        };
        for part in rest.split_whitespace() {
            let Some((kind, counts)) = part.split_once('=') else {
                continue;
            };
            let Some((planned, struck)) = counts.split_once('/') else {
                continue;
            };
            let entry = self.0.entry(kind.to_string()).or_default();
            entry.0 += planned.parse::<u64>().unwrap_or(0);
            entry.1 += struck.parse::<u64>().unwrap_or(0);
        }
    }

    /// Prints the table; returns the kinds that never struck, if `required`.
    fn report(&self, required: bool) -> Vec<&'static str> {
        println!("fault coverage (planned / struck):");
        for (kind, (planned, struck)) in &self.0 {
            println!("  {kind:<28} {planned:>7} / {struck}");
        }
        if !required {
            return Vec::new();
        }
        fleetq_chaos::plan::FAULT_KINDS
            .into_iter()
            .filter(|k| self.0.get(*k).is_none_or(|(_, struck)| *struck == 0))
            .collect()
    }
}

/// Runs `runs` one after another in this process.
fn sim_here(runs: &[Run]) -> ExitCode {
    let started = Instant::now();
    let (mut failed, mut faults) = (Vec::new(), 0usize);
    let mut coverage = Coverage::default();
    for (n, run) in runs.iter().enumerate() {
        let plan = run.plan();
        if runs.len() == 1 {
            fleetq_chaos::sim::exit_on_panic(&plan);
        }
        match fleetq_chaos::run(plan.clone()) {
            Ok(report) => {
                faults += report.injected.len();
                println!("{report}");
                let line = report.coverage_line();
                println!("{line}");
                coverage.add(&line);
            }
            Err(e) => {
                println!("FAIL {e}");
                failed.push(plan);
            }
        }
        progress(n + 1, runs.len(), failed.len(), started);
    }
    if runs.len() > 1 {
        coverage.report(false);
    }
    summary(runs.len(), faults, &failed, started)
}

fn progress(done: usize, total: usize, failed: usize, started: Instant) {
    if done % 50 == 0 {
        eprintln!(
            "sim: {done}/{total} seeds, {failed} violations, {:.0}s",
            started.elapsed().as_secs_f64()
        );
    }
}

fn summary(
    seeds: usize,
    faults: usize,
    failed: &[fleetq_chaos::Plan],
    started: Instant,
) -> ExitCode {
    for plan in failed {
        println!("replay: {}", fleetq_chaos::replay_command(plan));
    }
    println!("{seeds} seeds in {:.1}s", started.elapsed().as_secs_f64());
    println!("seeds={seeds} faults={faults} violations={}", failed.len());
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs every seed in a process of its own, `jobs` at a time, and prints
/// their lines in seed order as they become contiguous. A fresh process
/// per seed is what makes a run replay exactly with `--seed S`: when the
/// simulation crashes a node, tokio drops its tasks in an order derived
/// from a process-wide task counter, which earlier runs in the same
/// process would have advanced.
fn sim_in_processes(
    runs: &[Run],
    jobs: usize,
    until_violation: bool,
    require_coverage: bool,
) -> ExitCode {
    let started = Instant::now();
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: cannot find this program to run the seeds: {e}");
            return ExitCode::FAILURE;
        }
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<String>, usize, String)>();
    let mut coverage = Coverage::default();
    let mut lines: Vec<Option<String>> = vec![None; runs.len()];
    let (mut printed, mut failed, mut faults, mut lost) = (0usize, Vec::new(), 0usize, 0usize);
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(runs.len()) {
            let (tx, next, exe, stop) = (tx.clone(), &next, &exe, &stop);
            scope.spawn(move || loop {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(run) = runs.get(i) else { return };
                let mut args = vec![
                    "sim".to_string(),
                    "--seed".into(),
                    run.seed.to_string(),
                    "--nodes".into(),
                    run.nodes.to_string(),
                ];
                if let Some(r) = run.scenario {
                    args.extend(["--scenario".to_string(), r.name.to_string()]);
                }
                if run.basic {
                    args.extend(["--faults".to_string(), "basic".to_string()]);
                }
                if !run.racks {
                    args.extend(["--racks".to_string(), "off".to_string()]);
                }
                // The parent set it from its own --ledger-checks.
                if let Ok(checks) = std::env::var(fleetq_ledger::INVARIANT_CHECKS_ENV) {
                    args.extend(["--ledger-checks".to_string(), checks]);
                }
                let out = std::process::Command::new(exe)
                    .args(&args)
                    .stderr(std::process::Stdio::null())
                    .output();
                let text = out
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                let line = text
                    .lines()
                    .find(|l| l.starts_with("seed ") || l.starts_with("FAIL "))
                    .map(String::from);
                let faults = text
                    .lines()
                    .find_map(|l| l.strip_prefix("seeds="))
                    .and_then(|r| {
                        r.split_whitespace()
                            .find_map(|kv| kv.strip_prefix("faults="))
                    })
                    .and_then(|f| f.parse().ok())
                    .unwrap_or(0);
                let covered = text
                    .lines()
                    .find(|l| l.starts_with("coverage:"))
                    .unwrap_or_default()
                    .to_string();
                let violated = line.as_deref().is_none_or(|l| l.starts_with("FAIL "));
                if violated && until_violation {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                let _ = tx.send((i, line, faults, covered));
            });
        }
        drop(tx);
        for (i, line, f, covered) in rx {
            faults += f;
            coverage.add(&covered);
            match line {
                Some(l) => {
                    if l.starts_with("FAIL ") {
                        failed.push(runs[i].plan());
                    }
                    lines[i] = Some(l);
                }
                None => {
                    // The process died without a verdict: a violation too.
                    let plan = runs[i].plan();
                    lost += 1;
                    lines[i] = Some(format!(
                        "FAIL seed {}: the simulation process ended without a verdict (replay: {})",
                        plan.seed,
                        fleetq_chaos::replay_command(&plan)
                    ));
                    failed.push(plan);
                }
            }
            while printed < lines.len() {
                let Some(l) = lines[printed].take() else {
                    break;
                };
                println!("{l}");
                printed += 1;
                progress(printed, runs.len(), failed.len(), started);
            }
        }
    });
    // Stopped early: what ran after a gap still gets printed.
    let mut ran = printed;
    for l in lines.into_iter().skip(printed).flatten() {
        println!("{l}");
        ran += 1;
    }
    if lost > 0 {
        eprintln!("sim: {lost} seed processes ended without a verdict");
    }
    failed.sort_by_key(|p| (p.scenario, p.seed));
    let never = coverage.report(require_coverage);
    if !never.is_empty() {
        println!("FAIL fault coverage: these kinds never struck in {ran} seeds: {never:?}");
        summary(ran, faults, &failed, started);
        return ExitCode::FAILURE;
    }
    summary(ran, faults, &failed, started)
}
