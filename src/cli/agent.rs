//! `fleetq agent`: the per-cluster agent. Every setting is a flag and a
//! key of the TOML file (`--config`, read as [`AgentConfig`]); flags win.
//! The flags are one definition: [`AgentArgs`] serializes the flags given
//! into the file's shape (serde names and nesting on its fields), and that
//! table is laid over the file's before it is read as one
//! ([`resolve`]). The control-plane servers are the global
//! `--server ADDR[,ADDR...]` (or `FLEETQ_SERVER`).
//!
//! ```text
//! fleetq agent --cluster east --server 10.0.0.1:7400,10.0.0.2:7400 \
//!   --inventory static --static-inventory h100-80gb=8 --executor simulated
//! fleetq agent --cluster gpu-node-7 --server 10.0.0.1:7400 --inventory nvml \
//!   --flavor "NVIDIA H100 80GB HBM3=h100-80gb" --executor process --state-dir /var/lib/fleetq-agent
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use fleetq_agent::{Agent, AgentConfig};
use serde::{Serialize, Serializer};

use super::server::{init_logging, runtime, termination, LogFormat};
use super::tls::{Role, TlsArgs, RELOAD_EVERY};

/// As the file's `inventory_source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InventoryFlag {
    Static,
    Nvml,
    Kubernetes,
}

/// As the file's `executor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorFlag {
    Simulated,
    Process,
    Kubernetes,
}

/// `fleetq agent`'s flags. Serialized, the flags given become the
/// configuration file's keys (`AgentConfig`), unset ones left out.
#[derive(Debug, Default, Args, Serialize)]
pub struct AgentArgs {
    /// TOML file with any of these settings (keys: cluster, servers,
    /// inventory_source, executor, state_dir, lease_policy, heartbeat_ms,
    /// follow_redirects, source_address, finished_job_ttl, watch_queued_jobs,
    /// suspend_queued_jobs, [labels], [[inventory]],
    /// [flavors], [kubernetes] with kubeconfig, context, node_selector).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// The cluster's name in the ledger.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Where the inventory comes from.
    #[arg(long, value_enum)]
    #[serde(rename = "inventory_source", skip_serializing_if = "Option::is_none")]
    pub inventory: Option<InventoryFlag>,
    /// Static inventory, FLAVOR[/RESOURCE]=QTY,... (a bare FLAVOR=N means
    /// N nvidia.com/gpu).
    #[arg(long, value_delimiter = ',', value_name = "SPEC")]
    #[serde(
        rename = "inventory",
        serialize_with = "static_inventory",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub static_inventory: Vec<String>,
    /// Product -> flavor, "PRODUCT=FLAVOR" (repeatable): NVML's device
    /// name, or the nvidia.com/gpu.product node label for kubernetes.
    #[arg(long = "flavor", value_name = "PRODUCT=FLAVOR")]
    #[serde(serialize_with = "flavor_map", skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<String>,
    /// What runs the workloads.
    #[arg(long, value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorFlag>,
    /// Run records and logs of the process executor.
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    /// The process executor runs workloads as this user (name or uid);
    /// an agent running as root needs it (or --allow-root-workloads).
    #[arg(long, value_name = "USER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<String>,
    /// ...and this group (default: the user's primary group).
    #[arg(long, value_name = "GROUP")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<String>,
    /// Let an agent running as root run workloads as root.
    #[arg(long)]
    #[serde(skip_serializing_if = "is_false")]
    pub allow_root_workloads: bool,
    /// fence (stop workloads before the lease can expire) or keep.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_policy: Option<String>,
    /// Never dial the leader address a follower names; try the --server
    /// addresses in turn instead (for servers reached through a proxy,
    /// load balancer or NAT).
    #[arg(long)]
    #[serde(
        rename = "follow_redirects",
        serialize_with = "negated",
        skip_serializing_if = "is_false"
    )]
    pub no_follow_redirects: bool,
    /// Local IP address the session goes out from.
    #[arg(long, value_name = "IP")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_address: Option<std::net::IpAddr>,
    #[command(flatten)]
    #[serde(rename = "kubernetes", skip_serializing_if = "KubeArgs::is_empty")]
    pub kube: KubeArgs,
    /// How long Kubernetes keeps a Job the kubernetes executor made after
    /// it finished (its ttlSecondsAfterFinished): a duration such as 1h,
    /// 30m or 2d, or `never`. Default 1h; keep it above any agent outage.
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_job_ttl: Option<String>,
    /// With --executor kubernetes: turn this cluster's suspended Jobs
    /// labelled kueue.x-k8s.io/queue-name (as kubectl users create them
    /// for Kueue) into workloads, and unsuspend them in place once
    /// admitted here.
    #[arg(long)]
    #[serde(skip_serializing_if = "is_false")]
    pub watch_queued_jobs: bool,
    /// With --watch-queued-jobs: suspend a queue-labelled Job created
    /// unsuspended (where no Kueue webhook suspends them), then queue it.
    #[arg(long, requires = "watch_queued_jobs")]
    #[serde(skip_serializing_if = "is_false")]
    pub suspend_queued_jobs: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    #[serde(skip)]
    pub log_format: LogFormat,
}

/// The flags of the file's `[kubernetes]` table.
#[derive(Debug, Default, Args, Serialize)]
pub struct KubeArgs {
    /// kubeconfig for the kubernetes inventory and executor (default:
    /// $KUBECONFIG, ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of that kubeconfig.
    #[arg(long)]
    #[serde(rename = "context", skip_serializing_if = "Option::is_none")]
    pub kube_context: Option<String>,
    /// Label selector for the nodes that count as inventory.
    #[arg(long, value_name = "SELECTOR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<String>,
}

impl KubeArgs {
    fn is_empty(&self) -> bool {
        self.kubeconfig.is_none() && self.kube_context.is_none() && self.node_selector.is_none()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `--no-follow-redirects` as `follow_redirects = false`.
fn negated<S: Serializer>(b: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(!*b)
}

/// `--static-inventory FLAVOR[/RESOURCE]=QTY,...` as `[[inventory]]`
/// tables, one per flavor.
fn static_inventory<S: Serializer>(items: &[String], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Flavor<'a> {
        flavor: &'a str,
        resources: BTreeMap<&'a str, &'a str>,
    }
    let mut flavors: Vec<Flavor> = Vec::new();
    for item in items {
        let (key, qty) = item.split_once('=').ok_or_else(|| {
            serde::ser::Error::custom(format!(
                "--static-inventory: {item:?} is not FLAVOR[/RESOURCE]=QTY"
            ))
        })?;
        let (flavor, resource) = key.split_once('/').unwrap_or((key, "nvidia.com/gpu"));
        match flavors.iter_mut().find(|f| f.flavor == flavor) {
            Some(f) => {
                f.resources.insert(resource, qty);
            }
            None => flavors.push(Flavor {
                flavor,
                resources: [(resource, qty)].into(),
            }),
        }
    }
    flavors.serialize(s)
}

/// `--flavor PRODUCT=FLAVOR` (repeatable) as the `[flavors]` table.
fn flavor_map<S: Serializer>(items: &[String], s: S) -> Result<S::Ok, S::Error> {
    let mut map = BTreeMap::new();
    for item in items {
        let (product, flavor) = item.rsplit_once('=').ok_or_else(|| {
            serde::ser::Error::custom(format!("--flavor: {item:?} is not PRODUCT=FLAVOR"))
        })?;
        map.insert(product, flavor);
    }
    map.serialize(s)
}

/// Lays `over` onto `base`: tables merge key by key (so `--flavor` adds
/// to the file's `[flavors]` and `--kubeconfig` keeps its `context`),
/// anything else is replaced whole.
fn lay_over(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => lay_over(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The file (if any) with the flags laid over it, checked. `servers` is
/// the global `--server ADDR[,ADDR...]` when it was given explicitly.
pub fn resolve(args: &AgentArgs, servers: Option<&str>) -> Result<AgentConfig, String> {
    let mut table = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            let parse_error =
                |e: toml::de::Error| format!("{}: {}", path.display(), e.to_string().trim());
            // Typed first: its errors name the key, line and column.
            toml::from_str::<AgentConfig>(&text).map_err(parse_error)?;
            toml::from_str::<toml::Table>(&text).map_err(parse_error)?
        }
        None => toml::Table::new(),
    };
    // A malformed flag says which (the serializers above name it).
    let flags = toml::Table::try_from(args).map_err(|e| e.to_string())?;
    lay_over(&mut table, flags);
    let mut c: AgentConfig = table.try_into().map_err(|e| format!("flags: {e}"))?;
    if let Some(list) = servers {
        c.servers = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
    }
    c.check()?;
    Ok(c)
}

pub fn run(args: &AgentArgs, servers: Option<&str>, tls_args: &TlsArgs) -> ExitCode {
    let config = match resolve(args, servers) {
        Ok(c) => c,
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
    init_logging(args.log_format, "info,h2=warn,tower=warn,hyper=warn");
    // The flags over the config file's keys of the same names.
    let merged = tls_args.over(&TlsArgs {
        tls_dir: config.tls_dir.clone(),
        tls_ca: config.tls_ca.clone(),
        tls_cert: config.tls_cert.clone(),
        tls_key: config.tls_key.clone(),
        token: None,
        insecure: config.insecure,
    });
    // Reported after the inventory: a node without a driver says that
    // first, whatever else is missing.
    let tls = merged.resolve(&Role::Agent(config.cluster.clone()));
    runtime.block_on(async {
        // Read the inventory (and re-adopt running children) before
        // anything else: a node without a driver says so in one line and
        // exits non-zero.
        let mut agent = match Agent::new(config).await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        match tls {
            Ok(Some(tls)) => {
                tls.spawn_reloader(RELOAD_EVERY);
                agent = agent.with_tls(tls);
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let cluster = agent.cluster().to_string();
        let agent = tokio::spawn(agent.run(stopped));
        println!("fleetq agent: cluster {cluster}");
        termination().await;
        let _ = stop.send(true);
        let _ = agent.await;
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
        agent: AgentArgs,
    }

    fn flags(args: &[&str]) -> AgentArgs {
        Cli::try_parse_from([&["fleetq-agent"][..], args].concat())
            .expect("flags parse")
            .agent
    }

    const FILE: &str = r#"
cluster = "east"
servers = ["10.0.0.1:7400"]
inventory_source = "kubernetes"
executor = "kubernetes"
lease_policy = "keep"

[flavors]
"NVIDIA H100 80GB HBM3" = "h100-80gb"

[kubernetes]
context = "prod"
node_selector = "pool=gpu"
"#;

    #[test]
    fn flags_lay_over_the_file_key_by_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("agent.toml");
        std::fs::write(&path, FILE).expect("written");
        let path = path.to_str().expect("utf-8");
        let c = resolve(
            &flags(&[
                "--config",
                path,
                "--cluster",
                "west",
                "--flavor",
                "NVIDIA A100=a100",
                "--kubeconfig",
                "/etc/kube.yaml",
                "--no-follow-redirects",
                "--watch-queued-jobs",
            ]),
            None,
        )
        .expect("resolves");
        assert_eq!(c.cluster, "west", "the flag wins");
        assert_eq!(c.servers, ["10.0.0.1:7400"], "from the file");
        assert_eq!(c.lease_policy, "keep");
        // --flavor adds to the file's [flavors]; --kubeconfig keeps its
        // [kubernetes] context and selector.
        assert_eq!(c.flavors.len(), 2, "{:?}", c.flavors);
        assert_eq!(c.flavors["NVIDIA A100"], "a100");
        assert_eq!(
            c.kubernetes.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kube.yaml"))
        );
        assert_eq!(c.kubernetes.context.as_deref(), Some("prod"));
        assert_eq!(c.kubernetes.node_selector.as_deref(), Some("pool=gpu"));
        assert!(!c.follow_redirects);
        assert!(c.watch_queued_jobs);
        // The global --server replaces the file's list.
        let c = resolve(&flags(&["--config", path]), Some("a:1, b:2")).expect("resolves");
        assert_eq!(c.servers, ["a:1", "b:2"]);
        assert!(c.follow_redirects, "the default");
    }

    #[test]
    fn a_static_inventory_from_flags_alone() {
        let c = resolve(
            &flags(&[
                "--cluster",
                "east",
                "--inventory",
                "static",
                "--static-inventory",
                "h100=8,h100/nvidia.com/mig-1g.10gb=7,a100=2",
            ]),
            Some("127.0.0.1:7400"),
        )
        .expect("resolves");
        assert_eq!(c.inventory.len(), 2, "{:?}", c.inventory);
        assert_eq!(c.inventory[0].flavor, "h100");
        assert_eq!(c.inventory[0].resources["nvidia.com/gpu"], "8");
        assert_eq!(c.inventory[0].resources["nvidia.com/mig-1g.10gb"], "7");
        assert_eq!(c.inventory[1].resources["nvidia.com/gpu"], "2");
    }

    #[test]
    fn malformed_flags_and_files_are_refused_naming_them() {
        let e = resolve(
            &flags(&["--cluster", "east", "--static-inventory", "h100"]),
            Some("127.0.0.1:7400"),
        )
        .expect_err("refused");
        assert!(
            e.contains("--static-inventory") && e.contains("\"h100\""),
            "{e}"
        );
        let e =
            resolve(&flags(&["--cluster", "east", "--flavor", "A100"]), None).expect_err("refused");
        assert!(e.contains("--flavor"), "{e}");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("agent.toml");
        std::fs::write(&path, "cluster = \"east\"\nheartbeat = 5\n").expect("written");
        let e = resolve(&flags(&["--config", path.to_str().expect("utf-8")]), None)
            .expect_err("refused");
        assert!(e.contains("heartbeat") && e.contains("line 2"), "{e}");
    }
}
