//! `fleetq agent`: the per-cluster agent. Every setting is a flag and a
//! key of the TOML file (`--config`); flags win. The control-plane servers
//! are the global `--server ADDR[,ADDR...]` (or `FLEETQ_SERVER`).
//!
//! ```text
//! fleetq agent --cluster east --server 10.0.0.1:7400,10.0.0.2:7400 \
//!   --inventory static --static-inventory h100-80gb=8 --executor simulated
//! fleetq agent --cluster gpu-node-7 --server 10.0.0.1:7400 --inventory nvml \
//!   --flavor "NVIDIA H100 80GB HBM3=h100-80gb" --executor process --state-dir /var/lib/fleetq-agent
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use fleetq_agent::config::{ExecutorKind, InventorySource, StaticFlavor};
use fleetq_agent::{Agent, AgentConfig};

use super::server::{init_logging, runtime, termination, LogFormat};
use super::tls::{Role, TlsArgs, RELOAD_EVERY};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InventoryFlag {
    Static,
    Nvml,
    Kubernetes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExecutorFlag {
    Simulated,
    Process,
    Kubernetes,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// TOML file with any of these settings (keys: cluster, servers,
    /// inventory_source, executor, state_dir, lease_policy, heartbeat_ms,
    /// follow_redirects, source_address, finished_job_ttl, watch_queued_jobs,
    /// suspend_queued_jobs, [labels], [[inventory]],
    /// [flavors], [kubernetes] with kubeconfig, context, node_selector).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The cluster's name in the ledger.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Where the inventory comes from.
    #[arg(long, value_enum)]
    pub inventory: Option<InventoryFlag>,
    /// Static inventory, FLAVOR[/RESOURCE]=QTY,... (a bare FLAVOR=N means
    /// N nvidia.com/gpu).
    #[arg(long, value_delimiter = ',', value_name = "SPEC")]
    pub static_inventory: Vec<String>,
    /// Product -> flavor, "PRODUCT=FLAVOR" (repeatable): NVML's device
    /// name, or the nvidia.com/gpu.product node label for kubernetes.
    #[arg(long = "flavor", value_name = "PRODUCT=FLAVOR")]
    pub flavors: Vec<String>,
    /// What runs the workloads.
    #[arg(long, value_enum)]
    pub executor: Option<ExecutorFlag>,
    /// Run records and logs of the process executor.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The process executor runs workloads as this user (name or uid);
    /// an agent running as root needs it (or --allow-root-workloads).
    #[arg(long, value_name = "USER")]
    pub run_as_user: Option<String>,
    /// ...and this group (default: the user's primary group).
    #[arg(long, value_name = "GROUP")]
    pub run_as_group: Option<String>,
    /// Let an agent running as root run workloads as root.
    #[arg(long)]
    pub allow_root_workloads: bool,
    /// fence (stop workloads before the lease can expire) or keep.
    #[arg(long)]
    pub lease_policy: Option<String>,
    /// Never dial the leader address a follower names; try the --server
    /// addresses in turn instead (for servers reached through a proxy,
    /// load balancer or NAT).
    #[arg(long)]
    pub no_follow_redirects: bool,
    /// Local IP address the session goes out from.
    #[arg(long, value_name = "IP")]
    pub source_address: Option<std::net::IpAddr>,
    /// kubeconfig for the kubernetes inventory and executor (default:
    /// $KUBECONFIG, ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of that kubeconfig.
    #[arg(long)]
    pub kube_context: Option<String>,
    /// Label selector for the nodes that count as inventory.
    #[arg(long, value_name = "SELECTOR")]
    pub node_selector: Option<String>,
    /// How long Kubernetes keeps a Job the kubernetes executor made after
    /// it finished (its ttlSecondsAfterFinished): a duration such as 1h,
    /// 30m or 2d, or `never`. Default 1h; keep it above any agent outage.
    #[arg(long, value_name = "DURATION")]
    pub finished_job_ttl: Option<String>,
    /// With --executor kubernetes: turn this cluster's suspended Jobs
    /// labelled kueue.x-k8s.io/queue-name (as kubectl users create them
    /// for Kueue) into workloads, and unsuspend them in place once
    /// admitted here.
    #[arg(long)]
    pub watch_queued_jobs: bool,
    /// With --watch-queued-jobs: suspend a queue-labelled Job created
    /// unsuspended (where no Kueue webhook suspends them), then queue it.
    #[arg(long, requires = "watch_queued_jobs")]
    pub suspend_queued_jobs: bool,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The file (if any) with the flags laid over it, checked. `servers` is
/// the global `--server ADDR[,ADDR...]` when it was given explicitly.
pub fn resolve(args: &AgentArgs, servers: Option<&str>) -> Result<AgentConfig, String> {
    let mut c = match &args.config {
        Some(p) => AgentConfig::read(p)?,
        None => AgentConfig::empty(),
    };
    if let Some(v) = &args.cluster {
        c.cluster = v.clone();
    }
    if let Some(list) = servers {
        c.servers = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
    }
    if let Some(v) = args.inventory {
        c.inventory_source = match v {
            InventoryFlag::Static => InventorySource::Static,
            InventoryFlag::Nvml => InventorySource::Nvml,
            InventoryFlag::Kubernetes => InventorySource::Kubernetes,
        };
    }
    if !args.static_inventory.is_empty() {
        let mut flavors: Vec<StaticFlavor> = Vec::new();
        for item in &args.static_inventory {
            let (key, qty) = item.split_once('=').ok_or_else(|| {
                format!("--static-inventory: {item:?} is not FLAVOR[/RESOURCE]=QTY")
            })?;
            let (flavor, resource) = key.split_once('/').unwrap_or((key, "nvidia.com/gpu"));
            match flavors.iter_mut().find(|f| f.flavor == flavor) {
                Some(f) => {
                    f.resources.insert(resource.to_string(), qty.to_string());
                }
                None => flavors.push(StaticFlavor {
                    flavor: flavor.to_string(),
                    resources: [(resource.to_string(), qty.to_string())].into(),
                }),
            }
        }
        c.inventory = flavors;
    }
    for item in &args.flavors {
        let (product, flavor) = item
            .rsplit_once('=')
            .ok_or_else(|| format!("--flavor: {item:?} is not PRODUCT=FLAVOR"))?;
        c.flavors.insert(product.to_string(), flavor.to_string());
    }
    if let Some(v) = args.executor {
        c.executor = match v {
            ExecutorFlag::Simulated => ExecutorKind::Simulated,
            ExecutorFlag::Process => ExecutorKind::Process,
            ExecutorFlag::Kubernetes => ExecutorKind::Kubernetes,
        };
    }
    if let Some(v) = &args.state_dir {
        c.state_dir = Some(v.clone());
    }
    if let Some(v) = &args.run_as_user {
        c.run_as_user = Some(v.clone());
    }
    if let Some(v) = &args.run_as_group {
        c.run_as_group = Some(v.clone());
    }
    if args.allow_root_workloads {
        c.allow_root_workloads = true;
    }
    if let Some(v) = &args.lease_policy {
        c.lease_policy = v.clone();
    }
    if args.no_follow_redirects {
        c.follow_redirects = false;
    }
    if let Some(ip) = args.source_address {
        c.source_address = Some(ip);
    }
    if let Some(v) = &args.kubeconfig {
        c.kubernetes.kubeconfig = Some(v.clone());
    }
    if let Some(v) = &args.kube_context {
        c.kubernetes.context = Some(v.clone());
    }
    if let Some(v) = &args.node_selector {
        c.kubernetes.node_selector = Some(v.clone());
    }
    if let Some(v) = &args.finished_job_ttl {
        c.finished_job_ttl = Some(v.clone());
    }
    if args.watch_queued_jobs {
        c.watch_queued_jobs = true;
    }
    if args.suspend_queued_jobs {
        c.suspend_queued_jobs = true;
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
