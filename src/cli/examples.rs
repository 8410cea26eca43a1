//! Examples in every command's help, kubectl style ("Examples:", a
//! comment line, the command). Kept in one table, attached to the CLI's
//! definition by [`with_examples`], and checked by the tests below: every
//! command has some, and every example parses as the CLI parses it.

use clap::Command;

/// (command path, examples). Each example is a `# comment` line followed
/// by one or more `fleetq ...` lines.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "validate",
        "\
  # Check a directory of manifests before applying them
  fleetq validate -f deploy/dev/

  # Check what another tool writes, from standard input
  kueue-export | fleetq validate -f -",
    ),
    (
        "dev",
        "\
  # Everything in one process, on 127.0.0.1:7400-7402 (the CLI's default)
  fleetq dev

  # On other ports, with a third cluster and kept data
  fleetq dev --port 7500 --data-dir /tmp/fleetq --cluster dev-north:h100-80gb=16",
    ),
    (
        "server",
        "\
  # Node 1 of a three-node group
  fleetq server --id 1 --listen 10.0.0.1:7400 --data-dir /var/lib/fleetq --peers 1=10.0.0.1:7400,2=10.0.0.2:7400,3=10.0.0.3:7400

  # Everything from a TOML file (flags override it)
  fleetq server --config /etc/fleetq/server.toml",
    ),
    (
        "agent",
        "\
  # A Kubernetes cluster: inventory from its nodes, workloads as Jobs
  fleetq agent --server 10.0.0.1:7400 --cluster prod-east --inventory kubernetes --executor kubernetes --flavor NVIDIA-H100-80GB-HBM3=h100-80gb

  # A host whose GPUs NVML counts, running workloads as processes
  fleetq agent --cluster gpu-node-7 --inventory nvml --executor process --run-as-user fleetq",
    ),
    (
        "apply",
        "\
  # Create or update the objects of a file (Workloads and Jobs in it are submitted)
  fleetq apply -f queues.yaml

  # Show what would change, object by object, without changing anything
  fleetq apply -f queues.yaml --dry-run",
    ),
    (
        "get",
        "\
  # ClusterQueues, then one of them as YAML
  fleetq get cq
  fleetq get cq team-a -o yaml

  # Workloads of every namespace, with where they run and why they wait
  fleetq get workloads -A -o wide

  # The pending workloads of a ClusterQueue, in admission order
  fleetq get pending --cluster-queue team-a",
    ),
    (
        "describe",
        "\
  # A workload's state history and pending reason
  fleetq describe workload train-1 -n research

  # A ClusterQueue's usage, borrowing and pending work per flavor
  fleetq describe cq team-a",
    ),
    (
        "submit",
        "\
  # Four GPUs for two hours, waiting until it is admitted
  fleetq submit --queue team-a --name train-1 --request nvidia.com/gpu=4 --duration 2h --wait

  # Workloads or batch/v1 Jobs from a file
  fleetq submit -f job.yaml",
    ),
    (
        "logs",
        "\
  # What train-1 printed (its latest run), and only the last 4 KiB of it
  fleetq logs train-1 -n research
  fleetq logs train-1 -n research --tail-bytes 4096",
    ),
    (
        "cancel",
        "\
  # Cancel a workload (a running one keeps its quota until it has stopped)
  fleetq cancel train-1 -n research
  # Cancel every unfinished workload labelled app=llm, or of one LocalQueue
  fleetq cancel -n research -l app=llm
  fleetq cancel -n research --queue team-a",
    ),
    (
        "drain",
        "\
  # Place nothing new on dev-east (before maintenance); what runs there finishes
  fleetq drain dev-east
  # dev-east now shows Draining
  fleetq get clusters",
    ),
    (
        "uncordon",
        "\
  # Let dev-east take new work again after a drain
  fleetq uncordon dev-east",
    ),
    (
        "stop",
        "\
  # Admit nothing new from team-a's ClusterQueue (what runs finishes)
  fleetq stop cq team-a
  # The same for one LocalQueue only
  fleetq stop lq team-a -n research
  # Stop one workload (evicted if it runs) and keep it until resumed
  fleetq stop wl train-7 -n research",
    ),
    (
        "resume",
        "\
  # Let team-a admit again
  fleetq resume cq team-a
  # Queue a stopped workload again
  fleetq resume wl train-7 -n research",
    ),
    (
        "delete",
        "\
  # Delete a LocalQueue, then a ClusterQueue no workload holds quota in
  fleetq delete lq team-a -n research
  fleetq delete cq team-a

  # (Workloads are cancelled, not deleted: fleetq cancel NAME)",
    ),
    (
        "status",
        "\
  # The Raft group as one node sees it, with its ledger state hash
  fleetq status --server 10.0.0.2:7400

  # The same for scripts
  fleetq status -o json",
    ),
    (
        "members",
        "\
  # Grow the group: add node 4 as a learner, then make it a voter
  fleetq members add-learner --id 4 --addr 10.0.0.4:7400
  fleetq members set-voters 1,2,3,4",
    ),
    (
        "members add-learner",
        "\
  # Node 4 receives the log and does not vote yet
  fleetq members add-learner --id 4 --addr 10.0.0.4:7400",
    ),
    (
        "members set-voters",
        "\
  # Replace node 3 by node 4 (added as a learner first)
  fleetq members set-voters 1,2,4",
    ),
    (
        "backup",
        "\
  # A consistent backup through any node
  fleetq backup --out fleetq-backup.json

  # From the data directory of a stopped node (a lost quorum)
  fleetq backup --from-data-dir /var/lib/fleetq --out fleetq-backup.json",
    ),
    (
        "restore",
        "\
  # Seed node 1 of a new group from a backup, then start it
  fleetq restore --from fleetq-backup.json --data-dir /var/lib/fleetq --id 1",
    ),
    (
        "bench",
        "\
  # 20,000 workloads through a group started in this process
  fleetq bench

  # Against a running group, 1,000 workloads per second, open loop
  fleetq bench --target 127.0.0.1:7400 --rate 1000 --batch 50",
    ),
    (
        "top",
        "\
  # Queues and clusters, redrawn every second until Ctrl-C
  fleetq top

  # One frame, for scripts
  fleetq top --once",
    ),
    (
        "certs",
        "\
  # A CA, a node's certificate and the CLI's (tenant admin)
  fleetq certs init --dir tls
  fleetq certs issue --dir tls node --id 1 --host 10.0.0.1
  fleetq certs issue --dir tls --name client client --tenant admin",
    ),
    (
        "certs init",
        "\
  # A CA in ./tls (keep ca-key.pem offline)
  fleetq certs init --dir tls",
    ),
    (
        "certs issue",
        "\
  # A node, an agent and the CLI's client certificate
  fleetq certs issue --dir tls node --id 1 --host 10.0.0.1
  fleetq certs issue --dir tls agent --cluster gpu-node-7
  fleetq certs issue --dir tls --name client client --tenant admin",
    ),
    (
        "certs token",
        "\
  # A bearer token, and the digest an authorization policy stores
  fleetq certs token",
    ),
    (
        "completion",
        "\
  # Completion in this bash
  source <(fleetq completion bash)",
    ),
];

/// `cmd` (the whole `fleetq` command) with each command's examples after
/// its help, before what the command itself says there (if anything).
pub fn with_examples(cmd: Command) -> Command {
    attach(cmd, "")
}

fn attach(mut cmd: Command, path: &str) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |sub| {
            let sub = match examples_of(&sub_path) {
                None => sub,
                Some(text) => {
                    // (The `"\` that opens each text in EXAMPLES eats its
                    // first line's indentation.)
                    let text = format!("  {}", text.trim_start());
                    let after = match sub.get_after_help() {
                        Some(own) => format!("Examples:\n{text}\n\n{own}"),
                        None => format!("Examples:\n{text}"),
                    };
                    sub.after_help(after)
                }
            };
            attach(sub, &sub_path)
        });
    }
    cmd
}

fn examples_of(path: &str) -> Option<&'static str> {
    EXAMPLES.iter().find(|(p, _)| *p == path).map(|(_, t)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> Command {
        <crate::Cli as clap::CommandFactory>::command()
    }

    /// Every command path: `get`, `members add-learner`, ...
    fn paths(cmd: &Command, prefix: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let path = if prefix.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{prefix} {}", sub.get_name())
            };
            out.push(path.clone());
            paths(sub, &path, out);
        }
    }

    #[test]
    fn every_top_level_command_has_examples() {
        let mut all = Vec::new();
        paths(&cli(), "", &mut all);
        let missing: Vec<&String> = all
            .iter()
            .filter(|p| !p.contains(' ') && examples_of(p).is_none())
            .collect();
        assert!(
            missing.is_empty(),
            "commands without examples in src/cli/examples.rs: {missing:?}"
        );
    }

    #[test]
    fn every_example_parses() {
        let mut all = Vec::new();
        paths(&cli(), "", &mut all);
        for (path, text) in EXAMPLES {
            if !all.iter().any(|p| p == path) {
                // A command this build does not have (yet).
                continue;
            }
            assert!(
                text.trim_start().starts_with("# "),
                "{path}: starts with a comment"
            );
            for line in text.lines().map(str::trim) {
                // Only what fleetq itself parses: up to a pipe or
                // redirection, and not the `source <(...)` lines.
                let Some(command) = line.split(['|', '>', '<']).find(|c| c.contains("fleetq "))
                else {
                    continue;
                };
                let Some(rest) = command.trim().strip_prefix("fleetq ") else {
                    continue;
                };
                let args = std::iter::once("fleetq").chain(rest.split_whitespace());
                if let Err(e) = cli().try_get_matches_from(args) {
                    panic!("{path}: {line:?} does not parse: {e}");
                }
            }
        }
    }

    #[test]
    fn help_shows_examples_and_keeps_a_command_s_own_text() {
        let mut cmd = with_examples(cli());
        let completion = cmd.find_subcommand_mut("completion").expect("completion");
        let help = completion.render_help().to_string();
        let examples = help.find("Examples:").expect("examples");
        let installing = help.find("Installing:").expect("install notes");
        assert!(examples < installing, "{help}");
    }
}
