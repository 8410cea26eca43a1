//! `fleetq apply -f FILE|DIR|-`: send Kueue manifests to the server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fleetq_proto::v1::ApplyRequest;

use super::client::{self, field_error_line};
use super::input::read_sources;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Manifest file, directory, or `-` for standard input (repeatable).
    #[arg(short = 'f', long = "filename", required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Validate against the server's current state and show what would
    /// change (a diff per object) without changing anything.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(server: &str, args: &ApplyArgs) -> ExitCode {
    let sources = read_sources(&args.files);
    if !sources.errors.is_empty() {
        for e in &sources.errors {
            eprintln!("error: {e}");
        }
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    for source in &sources.read {
        let result = client::block_on(async {
            let mut c = client::connect(server).await?;
            c.apply(ApplyRequest {
                manifests: source.text.clone(),
                dry_run: args.dry_run,
            })
            .await
            .map(|r| r.into_inner())
            .map_err(|s| client::status_line(&s))
        })
        .and_then(|r| r);
        match result {
            Err(e) => {
                eprintln!("error: {}: {e}", source.name);
                failed = true;
            }
            Ok(r) => {
                for c in &r.changes {
                    println!("{} {}", c.object, c.change);
                    if !c.diff.is_empty() {
                        print!("{}", c.diff);
                    }
                }
                for e in &r.errors {
                    eprintln!("error: {}: {}", source.name, field_error_line(e));
                }
                if !r.errors.is_empty() {
                    eprintln!("{} errors in {}", r.errors.len(), source.name);
                    failed = true;
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
