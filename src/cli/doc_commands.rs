//! Every `fleetq` command shown in the documentation parses with this
//! build's CLI, so a renamed flag or command cannot leave the docs behind.
//!
//! The test reads the shell blocks (```sh, ```bash, ```console, ```shell)
//! of README.md, docs/**/*.md and deploy/README.md, finds each command
//! that runs fleetq (`fleetq ...`, `target/release/fleetq ...`, `cargo run
//! --release -- ...`), and hands its words to clap. What a command does
//! against a server is the end-to-end tests' business; this checks only
//! that what the docs tell a user to type is accepted.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

/// A command line from a doc, with where it was.
struct DocCommand {
    at: String,
    words: Vec<String>,
}

fn doc_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md"), root.join("deploy/README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The shell lines of `text`'s shell blocks, continuations joined, with
/// their 1-based line numbers.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_shell = false;
    let mut in_other = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(lang) = trimmed.strip_prefix("```") {
            if in_shell || in_other {
                in_shell = false;
                in_other = false;
            } else if matches!(lang.trim(), "sh" | "bash" | "console" | "shell") {
                in_shell = true;
            } else {
                in_other = true;
            }
            continue;
        }
        if !in_shell {
            continue;
        }
        let body = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
        let (number, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
        match body.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((number, joined));
            }
            None => {
                joined.push_str(body);
                out.push((number, joined));
            }
        }
    }
    out
}

/// `$i`, `${N}` and `$((i + 1))` as the number 1, so that a loop's
/// `--id $i` parses as a typed flag would with a real value.
fn expand_variables(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let skip = if let Some(inner) = after.strip_prefix("((") {
            inner.find("))").map_or(after.len(), |end| end + 4)
        } else if let Some(inner) = after.strip_prefix('{') {
            inner.find('}').map_or(after.len(), |end| end + 2)
        } else if after.starts_with('(') {
            // A command substitution: its command is checked on its own.
            out.push('$');
            rest = after;
            continue;
        } else {
            after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len())
        };
        out.push('1');
        rest = &after[skip..];
    }
    out.push_str(rest);
    out
}

/// The fleetq commands on one shell line: split at pipes, `&&`, `;` and
/// `$(`, comments and redirections dropped, leading `VAR=value` skipped.
fn commands_of(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let line = expand_variables(line);
    for part in line.split(['|', ';', '(', ')']).flat_map(|p| p.split("&&")) {
        let Some(words) = shlex::split(part) else {
            continue;
        };
        // `COMPLETE=bash fleetq` registers the dynamic completion: clap
        // answers it before parsing, so there is no command to check.
        if words.first().is_some_and(|w| w.starts_with("COMPLETE=")) {
            continue;
        }
        let words: Vec<String> = words
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .take_while(|w| !w.starts_with(['>', '<', '&']) && !w.starts_with("2>"))
            .collect();
        let rest = match words.first().map(String::as_str) {
            Some("fleetq" | "target/release/fleetq" | "./fleetq" | "target/debug/fleetq") => {
                &words[1..]
            }
            // `cargo run [--release] -- ...` runs fleetq; with `-p`,
            // `--example` or `--manifest-path` it runs something else.
            Some("cargo") => match words.iter().position(|w| w == "--") {
                Some(dash)
                    if words.get(1).is_some_and(|w| w == "run")
                        && words[2..dash]
                            .iter()
                            .all(|w| matches!(w.as_str(), "--release" | "-q" | "--quiet")) =>
                {
                    &words[dash + 1..]
                }
                _ => continue,
            },
            _ => continue,
        };
        out.push(rest.to_vec());
    }
    out
}

fn doc_commands(root: &Path) -> Vec<DocCommand> {
    let mut out = Vec::new();
    for file in doc_files(root) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let name = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, shell) in shell_lines(&text) {
            for words in commands_of(&shell) {
                out.push(DocCommand {
                    at: format!("{name}:{line}"),
                    words,
                });
            }
        }
    }
    out
}

#[test]
fn every_command_in_the_docs_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commands = doc_commands(root);
    // The docs show a few dozen commands; finding none means the reader broke.
    assert!(
        commands.len() > 30,
        "only {} commands found",
        commands.len()
    );
    let mut failures = Vec::new();
    for command in &commands {
        let args = std::iter::once("fleetq".to_string()).chain(command.words.iter().cloned());
        if let Err(e) = crate::Cli::command().try_get_matches_from(args) {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                continue;
            }
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            failures.push(format!(
                "{}: fleetq {}: {first}",
                command.at,
                command.words.join(" ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} documented commands do not parse:\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
}

#[test]
fn reads_commands_as_a_shell_would() {
    assert_eq!(
        commands_of("FLEETQ_SERVER=x fleetq get wl -o json | jq . > out # note"),
        vec![vec!["get", "wl", "-o", "json"]]
    );
    assert_eq!(
        commands_of("cargo run --release -- submit --name 'a b' && fleetq top"),
        vec![vec!["submit", "--name", "a b"], vec!["top"]]
    );
    assert!(commands_of("cargo run --release -p fleetq-chaos -- sim").is_empty());
    assert_eq!(
        commands_of("fleetq server --id $((i + 1)) --listen :740$i --data ${DIR}/x"),
        vec![vec![
            "server", "--id", "1", "--listen", ":7401", "--data", "1/x"
        ]]
    );
    let text = "```sh\nfleetq get \\\n  wl\n```\n```yaml\nfleetq: no\n```\n";
    assert_eq!(shell_lines(text), vec![(2, "fleetq get  wl".to_string())]);
}
