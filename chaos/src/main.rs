//! `fleetq-chaos sim [--seed N | --seeds COUNT --start S]`: runs simulated
//! seeds, prints one line per seed and a summary, exits non-zero on any
//! failure.

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
    /// Simulate a three-node control plane under one fault per seed and
    /// check the invariants.
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
    },
    /// Run the real binaries on loopback (3 servers, 2 agents with the
    /// process executor) under named faults with clients submitting and
    /// cancelling throughout; then heal, quiesce and check.
    Live {
        /// Faults to inject, in order: leader-partition, leader-kill,
        /// agent-partition, agent-kill, follower-pause, slow-network.
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
        Command::Sim { seed, seeds, start } => {
            let seeds: Vec<u64> = match seed {
                Some(s) => vec![s],
                None => (0..seeds).map(|i| start.wrapping_add(i)).collect(),
            };
            sim(&seeds)
        }
        Command::Live {
            scenario,
            duration,
            fleetq,
            seed,
            keep,
        } => live(&scenario, &duration, fleetq, seed, keep),
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
                "submitted={} acked={} unknown={} cancels={} workloads={}",
                report.acked + report.unknown,
                report.acked,
                report.unknown,
                report.cancels,
                report.workloads
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

fn sim(seeds: &[u64]) -> ExitCode {
    let started = Instant::now();
    let mut failed = Vec::new();
    let mut faults = 0usize;
    for (n, &seed) in seeds.iter().enumerate() {
        match fleetq_chaos::run_seed(seed) {
            Ok(report) => {
                if report.injected.is_some() {
                    faults += 1;
                }
                println!("{report}");
            }
            Err(e) => {
                println!("FAIL {e}");
                failed.push(seed);
            }
        }
        if (n + 1) % 50 == 0 {
            eprintln!(
                "sim: {}/{} seeds, {} violations, {:.0}s",
                n + 1,
                seeds.len(),
                failed.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    for seed in &failed {
        println!("replay: {}", fleetq_chaos::replay_command(*seed));
    }
    println!(
        "{} seeds in {:.1}s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "seeds={} faults={faults} violations={}",
        seeds.len(),
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
