//! Names for shell completion, asked of the server: clap_complete's
//! dynamic completion (`source <(COMPLETE=bash fleetq)`) calls these for
//! the arguments that name objects, so `fleetq get cq <TAB>` offers the
//! ClusterQueues, `--queue <TAB>` the LocalQueues of the namespace and
//! `fleetq drain <TAB>` the clusters.
//!
//! A completer sees only the word being completed, so the kind, the
//! namespace and the server are read from the command line the shell
//! passed after `--`. Nothing is printed on failure: a completion that
//! cannot reach the server offers no names, within [`ASK_TIMEOUT`].

use std::ffi::OsStr;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use fleetq_proto::v1 as pb;

use super::client;

/// How long a completion waits for the server before offering nothing.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The command line being completed, without the program's name.
fn words() -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--") {
        Some(i) => args.into_iter().skip(i + 2).collect(),
        None => Vec::new(),
    }
}

/// The value of `--long`/`-s` in `words` (`--long V` or `--long=V`).
fn flag(words: &[String], long: &str, short: Option<&str>) -> Option<String> {
    let eq = format!("{long}=");
    words.iter().enumerate().find_map(|(i, w)| {
        if w == long || short.is_some_and(|s| w == s) {
            words.get(i + 1).cloned()
        } else {
            w.strip_prefix(&eq).map(str::to_string)
        }
    })
}

/// The words that are not flags or flag values: the subcommand and its
/// positional arguments.
fn positionals(words: &[String]) -> Vec<&str> {
    // Flags of the CLI that take a value.
    const VALUED: [&str; 16] = [
        "--server",
        "-n",
        "--namespace",
        "-o",
        "--output",
        "--queue",
        "--state",
        "-u",
        "--user",
        "-l",
        "--selector",
        "--tls-dir",
        "--tls-ca",
        "--tls-cert",
        "--tls-key",
        "--token",
    ];
    let mut out = Vec::new();
    let mut skip = false;
    for w in words {
        if skip {
            skip = false;
        } else if VALUED.contains(&w.as_str()) {
            skip = true;
        } else if !w.starts_with('-') {
            out.push(w.as_str());
        }
    }
    out
}

/// The global TLS flags on the line (or their environment variables), as
/// clap would read them for the command itself.
fn tls_args(words: &[String]) -> super::tls::TlsArgs {
    let value = |long: &str, env: &str| flag(words, long, None).or_else(|| std::env::var(env).ok());
    let path = |long: &str, env: &str| value(long, env).map(std::path::PathBuf::from);
    let insecure = words.iter().any(|w| w == "--insecure")
        || std::env::var("FLEETQ_INSECURE")
            .is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on"));
    super::tls::TlsArgs {
        tls_dir: path("--tls-dir", "FLEETQ_TLS_DIR"),
        tls_ca: path("--tls-ca", "FLEETQ_TLS_CA"),
        tls_cert: path("--tls-cert", "FLEETQ_TLS_CERT"),
        tls_key: path("--tls-key", "FLEETQ_TLS_KEY"),
        token: value("--token", "FLEETQ_TOKEN"),
        insecure,
    }
}

fn server(words: &[String]) -> String {
    flag(words, "--server", None)
        .or_else(|| std::env::var("FLEETQ_SERVER").ok())
        .unwrap_or_else(|| client::DEFAULT_SERVER.to_string())
}

fn namespace(words: &[String]) -> String {
    flag(words, "--namespace", Some("-n")).unwrap_or_else(|| "default".to_string())
}

/// Candidates among `names` that start with `current`.
fn matching(names: Vec<String>, current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    names
        .into_iter()
        .filter(|n| n.starts_with(current.as_ref()))
        .map(CompletionCandidate::new)
        .collect()
}

/// Runs `ask` against the server, within [`ASK_TIMEOUT`]; empty on any
/// failure.
fn ask<F, Fut>(words: &[String], ask: F) -> Vec<String>
where
    F: FnOnce(client::Client) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>, String>>,
{
    let server = server(words);
    client::configure(tls_args(words));
    client::block_on(async move {
        tokio::time::timeout(ASK_TIMEOUT, async move {
            let c = client::connect(&server).await?;
            ask(c).await
        })
        .await
        .map_err(|_| "timed out".to_string())
        .and_then(|r| r)
    })
    .and_then(|r| r)
    .unwrap_or_default()
}

/// The names of configuration objects of `kind` (a Kueue kind).
fn objects(words: &[String], kind: &'static str) -> Vec<String> {
    let ns = namespace(words);
    ask(words, move |mut c| async move {
        let list = c
            .list_objects(pb::ListObjectsRequest {
                kind: kind.into(),
                namespace: ns,
            })
            .await
            .map_err(|s| s.to_string())?
            .into_inner()
            .objects_json;
        Ok(list
            .iter()
            .filter_map(|o| serde_json::from_str::<serde_json::Value>(o).ok())
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect())
    })
}

fn cluster_names(words: &[String]) -> Vec<String> {
    ask(words, |mut c| async move {
        Ok(c.list_clusters(pb::ListClustersRequest {})
            .await
            .map_err(|s| s.to_string())?
            .into_inner()
            .clusters
            .into_iter()
            .map(|c| c.name)
            .collect())
    })
}

fn workload_names(words: &[String]) -> Vec<String> {
    let ns = namespace(words);
    ask(words, move |mut c| async move {
        Ok(c.list_workloads(pb::ListWorkloadsRequest {
            namespace: ns,
            ..Default::default()
        })
        .await
        .map_err(|s| s.to_string())?
        .into_inner()
        .workloads
        .into_iter()
        .map(|w| w.name)
        .collect())
    })
}

/// `NAME` of `get`, `describe`, `delete`, `stop` and `resume`: objects of
/// the kind given before it.
pub fn object_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let words = words();
    let kind = positionals(&words).get(1).map(|k| k.to_ascii_lowercase());
    let names = match kind.as_deref() {
        Some("workloads" | "workload" | "wl" | "wls") => workload_names(&words),
        Some("clusters" | "cluster") => cluster_names(&words),
        Some(kind) => match fleetq_server::api::service::canonical_kind(kind) {
            Some(kind) => objects(&words, kind),
            None => Vec::new(),
        },
        None => Vec::new(),
    };
    matching(names, current)
}

/// A LocalQueue of the namespace (`--queue`).
pub fn local_queues(current: &OsStr) -> Vec<CompletionCandidate> {
    matching(objects(&words(), "LocalQueue"), current)
}

/// A cluster (`drain`, `uncordon`).
pub fn clusters(current: &OsStr) -> Vec<CompletionCandidate> {
    matching(cluster_names(&words()), current)
}

/// A workload of the namespace (`cancel`).
pub fn workloads(current: &OsStr) -> Vec<CompletionCandidate> {
    matching(workload_names(&words()), current)
}

#[cfg(test)]
mod tests {
    use super::{flag, positionals};

    fn w(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn the_command_line_is_read_as_clap_reads_it() {
        let words = w("--server 10.0.0.2:7400 get -n research lq te");
        assert_eq!(positionals(&words), ["get", "lq", "te"]);
        assert_eq!(
            flag(&words, "--server", None).as_deref(),
            Some("10.0.0.2:7400")
        );
        assert_eq!(
            flag(&words, "--namespace", Some("-n")).as_deref(),
            Some("research")
        );
        let words = w("get --server=h:1 cq");
        assert_eq!(flag(&words, "--server", None).as_deref(), Some("h:1"));
        assert_eq!(positionals(&words), ["get", "cq"]);
    }
}
