//! `fleetq`: the command-line entry point. Each subcommand lives in its own
//! module under `cli/`, so adding one is a variant here and a module there.

mod cli;

/// The control plane allocates many small objects per command (log
/// entries, JSON, gRPC frames) from several threads; mimalloc serves that
/// faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// fleetq: one replicated, verified Kueue-compatible admission queue in
/// front of many GPU clusters.
#[derive(Debug, Parser)]
#[command(name = "fleetq", version, propagate_version = true)]
struct Cli {
    /// Server to talk to (any node of the group).
    #[arg(long, global = true, env = "FLEETQ_SERVER", default_value = cli::client::DEFAULT_SERVER, value_name = "ADDR", help_heading = cli::GLOBAL_OPTIONS)]
    server: String,
    /// Mutual TLS (on by default) or --insecure.
    #[command(flatten)]
    tls: cli::tls::TlsArgs,
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
    /// Run everything in one process to try fleetq: a three-node Raft
    /// group on 127.0.0.1:7400-7402, two simulated GPU clusters (dev-east,
    /// dev-west: 8 H100 80GB plus 7 MIG 1g.10gb slices each) and a sample
    /// Kueue configuration. The CLI's default server is node 1.
    Dev(cli::dev::DevArgs),
    /// Run one control-plane node (Raft over gRPC, sled storage).
    Server(Box<cli::server::ServerArgs>),
    /// Run a cluster's agent: registers its inventory, keeps a lease with
    /// the leader, runs what the ledger admitted there.
    Agent(cli::agent::AgentArgs),
    /// Create or update Kueue objects from YAML; Workloads and batch/v1
    /// Jobs in the same files are submitted.
    Apply(cli::apply::ApplyArgs),
    /// List ClusterQueues (cq), cohorts, flavors, LocalQueues (lq),
    /// priority classes (pc), workloads or clusters.
    Get(cli::get::GetArgs),
    /// Show one workload (state history, pending reason), ClusterQueue
    /// (usage, borrowed, lent, pending per flavor and resource) or cluster.
    Describe(cli::describe::DescribeArgs),
    /// Queue a workload from flags or YAML.
    Submit(cli::submit::SubmitArgs),
    /// Cancel a workload.
    Cancel(cli::cancel::CancelArgs),
    /// Print what a workload printed (its latest run's log, from its
    /// cluster's agent).
    Logs(cli::logs::LogsArgs),
    /// Place no new work on a cluster; what runs there finishes.
    Drain(cli::drain::ClusterArgs),
    /// Undo a drain: the cluster takes new work again.
    Uncordon(cli::drain::ClusterArgs),
    /// Delete a configuration object.
    Delete(cli::delete::DeleteArgs),
    /// Hold a ClusterQueue or LocalQueue (nothing new is admitted from it;
    /// what runs finishes: Kueue's stopPolicy: Hold), or stop a workload
    /// and keep it out of its queue (Kueue's spec.active: false).
    Stop(cli::stop::StopArgs),
    /// Undo a stop: the queue admits again; the workload is queued again.
    Resume(cli::stop::StopArgs),
    /// Show the Raft group as one node sees it, with its ledger state hash.
    Status(cli::status::StatusArgs),
    /// Change the Raft group: add a learner, set the voters.
    Members(cli::members::MembersArgs),
    /// Write a backup of the ledger: a consistent copy taken through any
    /// node (admins only), with its log index, term, state hash and a
    /// SHA-256 checksum; or, with --from-data-dir, of a stopped node's
    /// data directory (docs/operating.md).
    Backup(cli::backup::BackupArgs),
    /// Seed a new node's data directory from a backup (offline, the server
    /// stopped), so that a new group starts from it (docs/operating.md).
    Restore(cli::backup::RestoreArgs),
    /// Load generator: submissions/s, admissions/s and submit-to-admitted
    /// latency through a 3-node group (started in this process unless
    /// --target names one).
    Bench(cli::bench::BenchArgs),
    /// A live view of the ClusterQueues (usage against nominal quota per
    /// flavor and resource, pending, admitted) and the clusters (state,
    /// running, assigned against capacity), with the Raft leader and term;
    /// redrawn every second until Ctrl-C.
    Top(cli::top::TopArgs),
    /// Create a dev certificate authority and node, agent and client
    /// certificates (mutual TLS), or a bearer token.
    Certs(cli::certs::CertsArgs),
    /// Print a shell completion script for bash, zsh or fish.
    Completion(cli::completion::CompletionArgs),
}

fn main() -> ExitCode {
    cli::pipe::die_quietly_on_closed_pipe();
    // `COMPLETE=bash fleetq` (or zsh, fish): the shell's dynamic
    // completion, with object names from the server (cli/names.rs);
    // exits here when the variable is set, before anything is printed.
    clap_complete::CompleteEnv::with_factory(|| {
        cli::examples::with_examples(<Cli as clap::CommandFactory>::command())
    })
    .complete();
    // Usage errors exit with status 2 from inside `get_matches`.
    let matches =
        cli::examples::with_examples(<Cli as clap::CommandFactory>::command()).get_matches();
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli::client::configure(cli.tls.clone());
    if matches!(
        cli.command,
        Command::Dev(_) | Command::Server(_) | Command::Bench(_)
    ) {
        cli::huge_pages::disable_transparent_huge_pages();
    }
    match cli.command {
        Command::Validate(args) => cli::validate::run(&args),
        Command::Dev(args) => cli::dev::run(&args, &cli.tls),
        Command::Server(args) => cli::server::run(&args, &cli.tls),
        Command::Agent(args) => {
            // The agent takes --server only when given (the CLI default
            // would otherwise override the servers of its config file).
            let explicit = std::env::args().any(|a| a == "--server" || a.starts_with("--server="))
                || std::env::var_os("FLEETQ_SERVER").is_some();
            cli::agent::run(&args, explicit.then_some(cli.server.as_str()), &cli.tls)
        }
        Command::Apply(args) => cli::apply::run(&cli.server, &args),
        Command::Get(args) => cli::get::run(&cli.server, &args),
        Command::Describe(args) => cli::describe::run(&cli.server, &args),
        Command::Submit(args) => cli::submit::run(&cli.server, &args),
        Command::Cancel(args) => cli::cancel::run(&cli.server, &args),
        Command::Logs(args) => cli::logs::run(&cli.server, &args),
        Command::Drain(args) => cli::drain::run(&cli.server, &args, cli::drain::Action::Drain),
        Command::Uncordon(args) => {
            cli::drain::run(&cli.server, &args, cli::drain::Action::Uncordon)
        }
        Command::Delete(args) => cli::delete::run(&cli.server, &args),
        Command::Stop(args) => cli::stop::run(&cli.server, &args, cli::stop::Action::Stop),
        Command::Resume(args) => cli::stop::run(&cli.server, &args, cli::stop::Action::Resume),
        Command::Status(args) => cli::status::run(&cli.server, &args),
        Command::Bench(args) => cli::bench::run(&args),
        Command::Members(args) => cli::members::run(&cli.server, &args),
        Command::Backup(args) => cli::backup::run_backup(&cli.server, &args),
        Command::Restore(args) => cli::backup::run_restore(&args),
        Command::Top(args) => cli::top::run(&cli.server, &args),
        Command::Certs(args) => cli::certs::run(&args),
        Command::Completion(args) => {
            cli::completion::run(&args, <Cli as clap::CommandFactory>::command())
        }
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
