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
    }
}

fn sim(seeds: &[u64]) -> ExitCode {
    let started = Instant::now();
    let mut failed = Vec::new();
    for &seed in seeds {
        match fleetq_chaos::run_seed(seed) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                println!("FAIL {e}");
                failed.push(seed);
            }
        }
    }
    println!(
        "{} seeds, {} passed, {} failed in {:.1}s",
        seeds.len(),
        seeds.len() - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        for seed in &failed {
            println!("replay: {}", fleetq_chaos::replay_command(*seed));
        }
        ExitCode::FAILURE
    }
}
