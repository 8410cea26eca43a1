//! `fleetq server`: one control-plane node on real TCP with sled storage.
//!
//! ```text
//! fleetq server --id 1 --listen 127.0.0.1:7401 --data-dir /var/lib/fleetq/1 \
//!   --peers 1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403
//! ```
//!
//! Settings come from flags, or from a TOML file (`--config`) whose keys
//! are the flags' long names with underscores; flags win. One definition
//! serves both: [`ServerArgs`] is the flags (clap) and the file's shape
//! (serde), and the flags are laid over the file as TOML values
//! ([`ServerArgs::over_file`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use fleetq_server::agents::simulated::SimulatedCluster;
use fleetq_server::metrics::MetricsConfig;
use fleetq_server::{Limits, NodeConfig, RaftTiming};
use serde::{Deserialize, Serialize};

use super::limits::LimitArgs;
use super::tls::{Role, TlsArgs, RELOAD_EVERY};
use fleetq_proto::tls::Tls;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// `fleetq server`'s settings: its flags, and the keys of its TOML file
/// (the same names with underscores, plus the file-only keys of
/// [`FILE_ONLY_KEYS`]). Unset values are left out when serialized, so
/// the flags given can be laid over the file ([`ServerArgs::over_file`]).
#[derive(Debug, Default, Args, Deserialize, Serialize)]
#[serde(default)]
pub struct ServerArgs {
    /// TOML file with any of the settings below (flags override it).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// This node's id in the Raft group (a positive integer).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Address to listen on for clients, agents and peers.
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Address others reach this node at (default: --listen).
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertise: Option<String>,
    /// Local IP address that connections to peers go out from (default:
    /// the system's choice).
    #[arg(long, value_name = "IP")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_address: Option<std::net::IpAddr>,
    /// Directory of the node's sled database (log, vote, snapshots).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// The initial voters, ID=ADDR,... (this node included). Used only on
    /// first start; a node not listed starts empty and waits to be added
    /// as a learner.
    #[arg(long, value_delimiter = ',', value_name = "ID=ADDR")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<String>,
    /// Run a simulated GPU cluster in the control plane,
    /// NAME:FLAVOR[/RESOURCE]=QTY,... (repeatable), e.g.
    /// `east:h100-80gb=8,h100-80gb/nvidia.com/mig-1g.10gb=7`.
    #[arg(long = "simulate-cluster", value_name = "SPEC")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub simulate_clusters: Vec<String>,
    /// Serve DebugPropose (raw ledger commands) for tests.
    #[arg(long)]
    #[serde(skip_serializing_if = "is_false")]
    pub debug_endpoints: bool,
    /// Build a Raft snapshot every N applied entries.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
    /// Log entries kept behind the last snapshot.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_logs: Option<u64>,
    /// Shortest election timeout: a follower that hears no leader for a
    /// random time between this and twice this starts an election; the
    /// leader's heartbeat is a quarter of it. Shorter fails over faster
    /// but risks needless elections on a loaded machine [default: 400ms].
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub election_timeout: Option<String>,
    /// Wait-for-ready (Kueue's waitForPodsReady): evict an admission its
    /// executor has not reported running within this, e.g. 5m. Off unless
    /// set.
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_for_ready: Option<String>,
    /// First requeue backoff after such an eviction (doubles each time).
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_backoff_base: Option<String>,
    /// Longest requeue backoff.
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_backoff_max: Option<String>,
    /// Deactivate (fail) a workload after this many such requeues.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeue_limit: Option<u32>,
    /// Turn off admission on submit: by default the leader plans
    /// admissions for the workloads it is about to queue and writes them in
    /// the same log entry, so a workload that finds room (and nothing
    /// waiting ahead of it) is admitted with one commit instead of two.
    /// Off, every admission waits for the next cycle.
    #[arg(long)]
    #[serde(skip_serializing_if = "is_false")]
    pub no_admit_on_submit: bool,
    /// Retention of finished workloads (Kueue's
    /// objectRetentionPolicies.workloads.afterFinished): a workload that
    /// succeeded, failed or was cancelled is removed from the ledger this
    /// long after it ended, e.g. 1h; `never` keeps every one (the ledger
    /// then grows with history) [default: 24h].
    #[arg(long, value_name = "DURATION|never")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_retention: Option<String>,
    /// Agents' lease: a cluster silent this long is expired (its fenced
    /// workloads requeued), e.g. 10s.
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ttl: Option<String>,
    /// Serve Prometheus /metrics, /healthz, /readyz and the /ui dashboard
    /// over HTTP on this address, e.g. 0.0.0.0:9464 (off unless set).
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_listen: Option<SocketAddr>,
    /// Serve the HTTP listener over TLS with this node's certificate;
    /// callers may present a client certificate (as for the API) or a
    /// bearer token. Needs TLS (not --insecure).
    #[arg(long)]
    #[serde(skip_serializing_if = "is_false")]
    pub http_tls: bool,
    /// Quota-leak canary: fleetq_quota_reserved_not_running counts
    /// reservations older than this that their agent has not reported
    /// running (default 60s).
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_not_running_after: Option<String>,
    /// Log format.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: LimitArgs,
    /// Authorization policy (YAML: tenants, their namespaces, verbs and
    /// bearer tokens), reloaded when it changes [default: only the tenant
    /// `admin`, as an admin]. Needs TLS.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_policy: Option<PathBuf>,
    /// Write a backup of the ledger into this directory on a schedule
    /// (each after the read barrier, as `fleetq backup` takes them); off
    /// unless set. `fleetq_backup_last_success_age_seconds` tells how old
    /// the last good one is.
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_dir: Option<PathBuf>,
    /// How often to write a scheduled backup [default: 1h].
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_interval: Option<String>,
    /// How many scheduled backups to keep; older ones are removed
    /// [default: 24].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_keep: Option<usize>,
    /// File only: `admit_on_submit = false` is `--no-admit-on-submit`.
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admit_on_submit: Option<bool>,
    /// File only: the TLS settings (the global flags of the same names
    /// override them).
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_dir: Option<PathBuf>,
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    #[arg(skip)]
    #[serde(skip_serializing_if = "is_false")]
    pub insecure: bool,
}

/// The file's keys that are no flag of `fleetq server` (the TLS ones
/// are global flags).
pub const FILE_ONLY_KEYS: [&str; 6] = [
    "admit_on_submit",
    "tls_dir",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "insecure",
];

fn is_false(b: &bool) -> bool {
    !*b
}

impl ServerArgs {
    /// The file's keys: every flag's long name with underscores (clap's
    /// ids are the field names), and [`FILE_ONLY_KEYS`].
    fn file_keys() -> Vec<String> {
        use clap::Args as _;
        let cmd = ServerArgs::augment_args(clap::Command::new("server"));
        cmd.get_arguments()
            .map(|a| a.get_id().as_str().to_string())
            .filter(|k| k != "config")
            .chain(FILE_ONLY_KEYS.iter().map(|k| k.to_string()))
            .collect()
    }

    /// The TOML file at `path`, with these flags laid over it: a flag
    /// given replaces the key of the same name. An unknown key is refused
    /// naming it and the keys there are; a bad value names its key, line
    /// and column.
    /// The flag whose value a config file could not hold (TOML's
    /// integers stop at i64::MAX), named, with its value.
    fn flag_over_toml(&self) -> Option<String> {
        let flags = serde_json::to_value(self).ok()?;
        let (key, value) = flags
            .as_object()?
            .iter()
            .find(|(_, v)| v.as_u64().is_some_and(|n| i64::try_from(n).is_err()))?;
        Some(format!(
            "--{}: {value} is over {}, the largest number a config file holds",
            key.replace('_', "-"),
            i64::MAX
        ))
    }

    pub fn over_file(&self, path: &Path) -> Result<ServerArgs, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--config {shown}: cannot read: {e}"))?;
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| format!("--config {shown}: {}", e.to_string().trim()))?;
        let known = ServerArgs::file_keys();
        if let Some(unknown) = table.keys().find(|k| !known.contains(k)) {
            return Err(format!(
                "--config {shown}: unknown key `{unknown}` (the keys are the flags' long names with underscores: {})",
                known.join(", ")
            ));
        }
        // Typed once from the text, for errors with line and column.
        toml::from_str::<ServerArgs>(&text)
            .map_err(|e| format!("--config {shown}: {}", e.to_string().trim()))?;
        let mut merged = table;
        let flags = toml::Table::try_from(self).map_err(|e| match self.flag_over_toml() {
            Some(why) => format!("flags over --config {shown}: {why}"),
            None => format!("flags over --config {shown}: {e}"),
        })?;
        merged.extend(flags);
        merged
            .try_into()
            .map_err(|e| format!("flags over --config {shown}: {e}"))
    }
}

/// Everything a node needs, resolved and checked.
#[derive(Debug)]
pub struct ServerSettings {
    pub node: NodeConfig,
    pub listen: SocketAddr,
    pub source_address: Option<std::net::IpAddr>,
    pub data_dir: PathBuf,
    pub log_format: LogFormat,
    /// Where /metrics, /healthz, /readyz and /ui are served, if anywhere.
    pub http_listen: Option<SocketAddr>,
    /// Over TLS (`--http-tls`).
    pub http_tls: bool,
    pub metrics: MetricsConfig,
    /// Limits against abuse (request size, write rate, pending, agents).
    pub limits: Limits,
    /// TLS settings of the config file (the global flags override them).
    pub tls: TlsArgs,
    pub auth_policy: Option<PathBuf>,
    /// Scheduled backups, if any.
    pub backup: Option<fleetq_server::api::backup::BackupSchedule>,
}

/// `--backup-dir`, `--backup-interval`, `--backup-keep`.
fn resolve_backup(
    dir: Option<PathBuf>,
    interval: Option<&String>,
    keep: Option<usize>,
) -> Result<Option<fleetq_server::api::backup::BackupSchedule>, String> {
    let Some(dir) = dir else {
        if interval.is_some() || keep.is_some() {
            return Err("--backup-interval and --backup-keep need --backup-dir".into());
        }
        return Ok(None);
    };
    let every = match interval {
        Some(v) => fleetq_model::time::parse_duration(v)
            .map_err(|e| format!("--backup-interval {v:?}: {e}"))?,
        None => Duration::from_secs(3600),
    };
    if every < Duration::from_secs(1) {
        return Err("--backup-interval: must be at least 1s".into());
    }
    let keep = keep.unwrap_or(24);
    if keep == 0 {
        return Err("--backup-keep: must be at least 1".into());
    }
    Ok(Some(fleetq_server::api::backup::BackupSchedule {
        dir,
        every,
        keep,
    }))
}

/// `--finished-retention`: a duration (0s removes a workload as soon as
/// the leader sees it ended), or `never`.
pub fn parse_finished_retention(value: &str) -> Result<Option<std::time::Duration>, String> {
    if value.trim().eq_ignore_ascii_case("never") {
        return Ok(None);
    }
    fleetq_model::time::parse_duration(value)
        .map(Some)
        .map_err(|e| format!("--finished-retention {value:?}: {e} (or `never`)"))
}

/// `--reserved-not-running-after`: a duration longer than zero.
pub fn parse_not_running_after(value: Option<&String>) -> Result<MetricsConfig, String> {
    let mut config = MetricsConfig::default();
    if let Some(v) = value {
        let d = fleetq_model::time::parse_duration(v)
            .map_err(|e| format!("--reserved-not-running-after {v:?}: {e}"))?;
        if d.is_zero() {
            return Err("--reserved-not-running-after: must be longer than 0s".into());
        }
        config.reserved_not_running_after = d;
    }
    Ok(config)
}

pub fn parse_peers(items: &[String]) -> Result<BTreeMap<u64, String>, String> {
    let mut peers = BTreeMap::new();
    for item in items {
        let (id, addr) = item
            .split_once('=')
            .ok_or_else(|| format!("--peers: {item:?} is not ID=ADDR"))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("--peers: {id:?} in {item:?} is not a node id"))?;
        if id == 0 {
            return Err(format!("--peers: node ids start at 1 ({item:?})"));
        }
        if addr.trim().is_empty() {
            return Err(format!("--peers: node {id} has no address"));
        }
        if peers.insert(id, addr.trim().to_string()).is_some() {
            return Err(format!("--peers: node {id} is listed twice"));
        }
    }
    Ok(peers)
}

pub fn resolve(flags: &ServerArgs) -> Result<ServerSettings, String> {
    let merged;
    let args = match &flags.config {
        Some(path) => {
            merged = flags.over_file(path)?;
            &merged
        }
        None => flags,
    };
    let id = args
        .id
        .ok_or("--id: required (the node's id in the Raft group)")?;
    if id == 0 {
        return Err("--id: node ids start at 1".into());
    }
    let listen = args
        .listen
        .ok_or("--listen: required (e.g. 127.0.0.1:7401)")?;
    let data_dir = args
        .data_dir
        .clone()
        .ok_or("--data-dir: required (where the node keeps its log and snapshots)")?;
    let peers = parse_peers(&args.peers)?;
    let advertise = args
        .advertise
        .clone()
        .or_else(|| peers.get(&id).cloned())
        .unwrap_or_else(|| listen.to_string());
    let simulated_clusters = args
        .simulate_clusters
        .iter()
        .map(|s| SimulatedCluster::parse(s).map_err(|e| format!("--simulate-cluster: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let mut timing = RaftTiming::default();
    if let Some(n) = args.snapshot_every {
        if n == 0 {
            return Err("--snapshot-every: must be at least 1".into());
        }
        timing.snapshot_every = n;
    }
    if let Some(n) = args.keep_logs {
        timing.keep_logs = n;
    }
    if let Some(t) = &args.election_timeout {
        let min = fleetq_model::time::parse_duration(t)
            .map_err(|e| format!("--election-timeout {t:?}: {e}"))?;
        if min < std::time::Duration::from_millis(40) || min > std::time::Duration::from_secs(60) {
            return Err(format!(
                "--election-timeout {t:?}: must be between 40ms and 60s"
            ));
        }
        timing.election_min = min;
        timing.election_max = min * 2;
        timing.heartbeat = min / 4;
    }
    let mut lease = fleetq_server::agents::leases::LeaseConfig::default();
    if let Some(ttl) = &args.lease_ttl {
        let ttl = fleetq_model::time::parse_duration(ttl)
            .map_err(|e| format!("--lease-ttl {ttl:?}: {e}"))?;
        if ttl < std::time::Duration::from_millis(100) {
            return Err("--lease-ttl: must be at least 100ms".into());
        }
        lease.ttl = ttl;
    }
    let mut leader = fleetq_server::leader::LeaderPolicies::default();
    if args.no_admit_on_submit || args.admit_on_submit == Some(false) {
        leader.admit_on_submit = false;
    }
    if let Some(v) = &args.finished_retention {
        leader.finished_retention = parse_finished_retention(v)?;
    }
    let mut ledger = fleetq_ledger::LedgerConfig::default();
    let duration = |flag: &str, v: &String| {
        fleetq_model::time::parse_duration(v).map_err(|e| format!("--{flag} {v:?}: {e}"))
    };
    if let Some(t) = &args.wait_for_ready {
        let mut w = fleetq_ledger::WaitForReady::kueue_default();
        w.timeout = duration("wait-for-ready", t)?;
        if let Some(v) = &args.requeue_backoff_base {
            w.backoff_base = duration("requeue-backoff-base", v)?;
        }
        if let Some(v) = &args.requeue_backoff_max {
            w.backoff_max = duration("requeue-backoff-max", v)?;
        }
        w.backoff_limit_count = args.requeue_limit;
        if w.timeout.is_zero() {
            return Err("--wait-for-ready: must be longer than 0s".into());
        }
        ledger.wait_for_ready = Some(w);
    } else if args.requeue_backoff_base.is_some()
        || args.requeue_backoff_max.is_some()
        || args.requeue_limit.is_some()
    {
        return Err("--requeue-backoff-base, --requeue-backoff-max and --requeue-limit need --wait-for-ready".into());
    }
    let metrics = parse_not_running_after(args.reserved_not_running_after.as_ref())?;
    let backup = resolve_backup(
        args.backup_dir.clone(),
        args.backup_interval.as_ref(),
        args.backup_keep,
    )?;
    let limits = args.limits.resolve()?;
    Ok(ServerSettings {
        node: NodeConfig {
            id,
            advertise,
            initial_members: peers,
            timing,
            ledger,
            leader,
            simulated_clusters,
            debug_endpoints: args.debug_endpoints,
            lease,
            // Set by `run` from the TLS flags.
            auth: fleetq_server::guard::auth::Authorizer::insecure(),
        },
        listen,
        source_address: args.source_address,
        data_dir,
        log_format: args.log_format.unwrap_or_default(),
        http_listen: args.http_listen,
        http_tls: args.http_tls,
        metrics,
        limits,
        tls: TlsArgs {
            tls_dir: args.tls_dir.clone(),
            tls_ca: args.tls_ca.clone(),
            tls_cert: args.tls_cert.clone(),
            tls_key: args.tls_key.clone(),
            token: None,
            insecure: args.insecure,
        },
        auth_policy: args.auth_policy.clone(),
        backup,
    })
}

/// Default log filter of `fleetq server` (RUST_LOG overrides it).
pub const SERVER_LOG_FILTER: &str = "info,openraft=error,sled=warn,h2=warn,tower=warn,hyper=warn";

pub fn init_logging(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn termination() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The node's TLS and authorization: the TLS flags over the config
/// file's keys of the same names, and the policy.
fn security(
    settings: &ServerSettings,
    flags: &TlsArgs,
) -> Result<(Option<Tls>, fleetq_server::guard::auth::Authorizer), String> {
    let file = &settings.tls;
    let tls = flags.over(file).resolve(&Role::Node(settings.node.id))?;
    let auth = match (&tls, &settings.auth_policy) {
        (Some(_), policy) => fleetq_server::guard::auth::Authorizer::secure(policy.clone())?,
        (None, Some(_)) => {
            return Err("--auth-policy: authorization needs TLS (drop --insecure)".into())
        }
        (None, None) => fleetq_server::guard::auth::Authorizer::insecure(),
    };
    Ok((tls, auth))
}

pub fn run(args: &ServerArgs, tls_args: &TlsArgs) -> ExitCode {
    let mut settings = match resolve(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(settings.log_format, SERVER_LOG_FILTER);
    let tls = match security(&settings, tls_args) {
        Ok((tls, auth)) => {
            settings.node.auth = auth;
            tls
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let id = settings.node.id;
        // Bound before the node starts, so that a taken port fails fast.
        let http = match settings.http_listen {
            Some(addr) => match fleetq_server::http::bind(addr).await {
                Ok(l) => Some(l),
                Err(e) => {
                    eprintln!("error: --http-listen: {e}");
                    return ExitCode::FAILURE;
                }
            },
            None => None,
        };
        if let Some(tls) = &tls {
            tls.spawn_reloader(RELOAD_EVERY);
        }
        settings.node.auth.spawn_reloader(RELOAD_EVERY);
        let secure = tls.is_some();
        let http_tls = match (settings.http_tls, &tls) {
            (false, _) => None,
            (true, Some(tls)) => Some(tls.clone()),
            (true, None) => {
                eprintln!("error: --http-tls: needs TLS (--tls-dir or --tls-cert/--tls-key), and this node runs --insecure");
                return ExitCode::from(2);
            }
        };
        let scheme = if http_tls.is_some() { "https" } else { "http" };
        let node = match fleetq_server::bootstrap::start_node(settings.node, settings.limits, settings.listen, &settings.data_dir, settings.source_address, tls).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(node = id, listen = %settings.listen, data_dir = %settings.data_dir.display(), tls = secure, "fleetq server started");
        let l = settings.limits;
        tracing::info!(
            max_request_bytes = l.max_request_bytes,
            client_write_rate = l.client_write_rate,
            max_pending_per_local_queue = l.max_pending_per_local_queue,
            max_agent_sessions = l.max_agent_sessions,
            "limits (0: unlimited)"
        );
        println!("fleetq server: node {id} listening on {}", settings.listen);
        if let Some(schedule) = settings.backup.clone() {
            tracing::info!(dir = %schedule.dir.display(), every = ?schedule.every, keep = schedule.keep, "scheduled backups");
            tokio::spawn(fleetq_server::api::backup::run(
                id,
                std::sync::Arc::clone(&node.proposer),
                node.handle.clone(),
                schedule,
                node.metrics.backups.clone(),
                node.stopping(),
            ));
        }
        let http = match http.map(|l| fleetq_server::http::serve(l, &node, settings.metrics, false, http_tls)) {
            Some(Ok(h)) => {
                println!(
                    "fleetq server: node {id} serving {scheme}://{0}/metrics, /healthz, /readyz and the dashboard {scheme}://{0}/ui",
                    h.local_addr()
                );
                Some(h)
            }
            Some(Err(e)) => {
                eprintln!("error: --http-listen: {e}");
                let _ = tokio::time::timeout(Duration::from_secs(10), node.shutdown()).await;
                return ExitCode::FAILURE;
            }
            None => None,
        };
        termination().await;
        tracing::info!(node = id, "shutting down");
        let _ = tokio::time::timeout(Duration::from_secs(10), node.shutdown()).await;
        if let Some(h) = http {
            let _ = tokio::time::timeout(Duration::from_secs(3), h.join()).await;
        }
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        server: ServerArgs,
    }

    fn flags(args: &[&str]) -> ServerArgs {
        Cli::try_parse_from([&["fleetq-server"][..], args].concat())
            .expect("flags parse")
            .server
    }

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(f.path(), text).expect("written");
        f
    }

    /// Every flag is a key of the file, under the flag's long name with
    /// underscores; the limits (a flattened group) too.
    #[test]
    fn the_files_keys_are_the_flags() {
        let keys = ServerArgs::file_keys();
        for key in [
            "id",
            "listen",
            "data_dir",
            "peers",
            "simulate_clusters",
            "wait_for_ready",
            "no_admit_on_submit",
            "max_request_bytes",
            "max_agent_sessions",
            "backup_keep",
            "admit_on_submit",
            "tls_dir",
            "insecure",
        ] {
            assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:?}");
        }
        assert!(!keys.iter().any(|k| k == "config"), "{keys:?}");
    }

    #[test]
    fn flags_win_over_the_file_and_the_rest_comes_from_it() {
        let f = file(
            "id = 2\nlisten = \"127.0.0.1:7402\"\ndata_dir = \"/tmp/n2\"\npeers = [\"1=a:1\", \"2=b:2\"]\nlease_ttl = \"10s\"\nmax_request_bytes = 4096\nadmit_on_submit = false\ninsecure = true\ndebug_endpoints = true\n",
        );
        let path = f.path().to_str().expect("utf-8");
        let s = resolve(&flags(&[
            "--config",
            path,
            "--id",
            "1",
            "--lease-ttl",
            "3s",
        ]))
        .expect("resolves");
        assert_eq!(s.node.id, 1, "the flag wins");
        assert_eq!(s.node.lease.ttl, Duration::from_secs(3));
        assert_eq!(s.listen.port(), 7402, "from the file");
        assert_eq!(s.node.initial_members.len(), 2);
        assert_eq!(s.node.advertise, "a:1", "node 1's address in --peers");
        assert_eq!(s.limits.max_request_bytes, 4096);
        assert!(!s.node.leader.admit_on_submit);
        assert!(s.tls.insecure);
        assert!(
            s.node.debug_endpoints,
            "a flag not given leaves the file's true"
        );
        // Lists are replaced whole, not appended to.
        let s = resolve(&flags(&["--config", path, "--peers", "1=c:3"])).expect("resolves");
        assert_eq!(
            s.node.initial_members.into_iter().collect::<Vec<_>>(),
            vec![(1, "c:3".to_string())]
        );
    }

    /// A flag's value too big for a config file is named, not reported
    /// as a bare "u64 value was too large".
    #[test]
    fn a_flag_too_big_for_the_file_is_named() {
        let f = file("listen = \"127.0.0.1:7402\"\n");
        let path = f.path().to_str().expect("utf-8");
        let huge = u64::MAX.to_string();
        let e = resolve(&flags(&[
            "--config",
            path,
            "--max-pending-per-local-queue",
            &huge,
        ]))
        .expect_err("refused");
        assert!(
            e.contains("--max-pending-per-local-queue") && e.contains(&huge),
            "{e}"
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_key() {
        let unknown = file("id = 1\nlisten_addr = \"127.0.0.1:1\"\n");
        let e = resolve(&flags(&[
            "--config",
            unknown.path().to_str().expect("utf-8"),
        ]))
        .expect_err("refused");
        assert!(
            e.contains("unknown key `listen_addr`") && e.contains("listen,"),
            "{e}"
        );
        let typed = file("id = \"one\"\n");
        let e = resolve(&flags(&["--config", typed.path().to_str().expect("utf-8")]))
            .expect_err("refused");
        assert!(e.contains("id") && e.contains("line 1"), "{e}");
        let e = resolve(&flags(&["--config", "/no/such/file.toml"])).expect_err("refused");
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn finished_retention_takes_a_duration_or_never_and_names_the_flag() {
        assert_eq!(
            parse_finished_retention("1h"),
            Ok(Some(std::time::Duration::from_secs(3600)))
        );
        assert_eq!(
            parse_finished_retention("0s"),
            Ok(Some(std::time::Duration::ZERO))
        );
        assert_eq!(parse_finished_retention("never"), Ok(None));
        assert_eq!(parse_finished_retention(" Never "), Ok(None));
        let e = parse_finished_retention("soon").unwrap_err();
        assert!(e.starts_with("--finished-retention \"soon\""), "{e}");
        assert!(e.contains("never"), "{e}");
    }
}
