//! `fleetq completion bash|zsh|fish`: a shell completion script on stdout,
//! generated from the CLI's own definition so it never drifts from it.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use clap_complete::Shell as Generator;

/// How to install each script; shown by `fleetq completion --help`.
const INSTALL: &str = "\
Installing:
  bash  one shell:    source <(fleetq completion bash)
        every shell:  fleetq completion bash > ~/.local/share/bash-completion/completions/fleetq
                      (needs the bash-completion package; or add the first line to ~/.bashrc)
  zsh   fleetq completion zsh > \"${fpath[1]}/_fleetq\"
        (any directory on $fpath; `autoload -U compinit && compinit` in ~/.zshrc,
        then start a new shell)
  fish  fleetq completion fish > ~/.config/fish/completions/fleetq.fish

With object names from the server (ClusterQueues, LocalQueues, clusters,
workloads) as you type, register the dynamic completion instead:
  bash  source <(COMPLETE=bash fleetq)
  zsh   source <(COMPLETE=zsh fleetq)
  fish  COMPLETE=fish fleetq | source";

#[derive(Debug, Args)]
#[command(after_help = INSTALL)]
pub struct CompletionArgs {
    /// The shell to write the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Writes the script for `cmd` (the whole `fleetq` command) to stdout.
pub fn run(args: &CompletionArgs, mut cmd: clap::Command) -> ExitCode {
    let generator = match args.shell {
        Shell::Bash => Generator::Bash,
        Shell::Zsh => Generator::Zsh,
        Shell::Fish => Generator::Fish,
    };
    let name = cmd.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(generator, &mut cmd, name, &mut script);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`| head`) is not worth a message.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing the completion script: {e}");
            ExitCode::FAILURE
        }
    }
}
