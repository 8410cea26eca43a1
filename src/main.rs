//! `fleetq`: the command-line entry point. Each subcommand lives in its own
//! module under `cli/`, so adding one is a variant here and a module there.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// fleetq: one replicated, verified Kueue-compatible admission queue in
/// front of many GPU clusters.
#[derive(Debug, Parser)]
#[command(name = "fleetq", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check Kueue and fleetq manifests offline, without a server.
    ///
    /// Reads every document of every file (ResourceFlavor, Cohort,
    /// ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload, batch/v1
    /// Job, or a v1 List of them), checks the configuration set with Kueue's
    /// rules, and checks that each Workload or Job finds its LocalQueue,
    /// ClusterQueue and priority class in the set.
    ///
    /// Prints one count per kind and exits 0 when everything is valid;
    /// otherwise prints every error on its own line to stderr (file,
    /// document, object, field path) and exits 1.
    Validate(cli::validate::ValidateArgs),
}

fn main() -> ExitCode {
    // Usage errors exit with status 2 from inside `parse`.
    let cli = Cli::parse();
    match cli.command {
        Command::Validate(args) => cli::validate::run(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
