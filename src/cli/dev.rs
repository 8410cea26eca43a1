//! `fleetq dev`: the zero-setup way to try fleetq. One process runs a
//! three-node Raft group on loopback (sled, fsync on), two simulated GPU
//! clusters and a sample Kueue configuration.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use fleetq_proto::v1 as pb;
use fleetq_server::agents::simulated::{self, SimulatedCluster};
use fleetq_server::{NodeConfig, RaftTiming};

use fleetq_proto::tls::{Tls, TlsFiles};
use fleetq_server::guard::auth::Authorizer;

use super::client;
use super::limits::LimitArgs;
use super::server::{init_logging, runtime, termination, LogFormat};
use super::tls::{TlsArgs, RELOAD_EVERY};

/// What `--fair-sharing` applies: Kueue's Configuration, its fair sharing
/// part, with Kueue's default strategies.
pub const FAIR_SHARING: &str = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: true\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n";

/// The sample configuration loaded unless `--no-sample`.
pub const SAMPLE: &str = include_str!("../../deploy/dev/sample.yaml");

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Client port of node 1; nodes 2 and 3 take the next two ports.
    #[arg(long, default_value_t = 7400)]
    pub port: u16,
    /// Keep the nodes' data here (default: a temporary directory removed
    /// on exit).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Simulated clusters instead of the default two,
    /// NAME:FLAVOR[/RESOURCE]=QTY,... (repeatable).
    #[arg(long = "cluster", value_name = "SPEC")]
    pub clusters: Vec<String>,
    /// Start with an empty configuration.
    #[arg(long)]
    pub no_sample: bool,
    /// Turn Kueue's fair sharing on: applies a Kueue Configuration with
    /// `fairSharing.enable: true` (replicated, so every node that leads
    /// schedules alike; `fleetq status` shows it).
    #[arg(long)]
    pub fair_sharing: bool,
    /// HTTP address (/ui dashboard, /metrics, /healthz, /readyz) of node
    /// 1; nodes 2 and 3 take the next two ports [default: 127.0.0.1:9464,
    /// or free ports if those are taken].
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// Quota-leak canary threshold (fleetq_quota_reserved_not_running)
    /// [default: 60s].
    #[arg(long, value_name = "DURATION")]
    pub reserved_not_running_after: Option<String>,
    /// Remove a finished workload from the ledger this long after it
    /// ended (as `fleetq server --finished-retention`), or `never`
    /// [default: 24h].
    #[arg(long, value_name = "DURATION|never")]
    pub finished_retention: Option<String>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Limits against abuse, the same on every node.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Default HTTP port of node 1 (Prometheus exporters' customary range).
pub const DEFAULT_HTTP_PORT: u16 = 9464;

/// Binds node `id`'s HTTP listener: `--http-listen` shifted by `id - 1`,
/// or the default, falling back to a free port when the default is taken
/// (a dev loop must not fail because another exporter sits there).
async fn bind_http(
    explicit: Option<SocketAddr>,
    id: u64,
) -> Result<tokio::net::TcpListener, String> {
    let offset = id as u16 - 1;
    match explicit {
        Some(base) => {
            let mut addr = base;
            if base.port() != 0 {
                addr.set_port(base.port() + offset);
            }
            fleetq_server::http::bind(addr)
                .await
                .map_err(|e| format!("--http-listen: node {id}: {e}"))
        }
        None => {
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, DEFAULT_HTTP_PORT + offset));
            match fleetq_server::http::bind(addr).await {
                Ok(l) => Ok(l),
                Err(_) => fleetq_server::http::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
                    .await
                    .map_err(|e| format!("node {id}: HTTP: {e}")),
            }
        }
    }
}

pub fn run(args: &DevArgs, tls: &TlsArgs) -> ExitCode {
    match run_inner(args, tls) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The dev group's certificates: made in the TLS directory (default
/// ~/.fleetq/tls) when missing, so the CLI finds its client.pem there
/// with no flags. `None` with --insecure.
fn dev_tls(
    tls: &TlsArgs,
    clusters: &[SimulatedCluster],
) -> Result<Option<std::path::PathBuf>, String> {
    if tls.insecure {
        tracing::warn!(
            "--insecure: plaintext gRPC, no authentication, every caller may do everything"
        );
        return Ok(None);
    }
    let dir = tls
        .dir()
        .ok_or("--tls-dir: no directory given and HOME is not set")?;
    let names: Vec<String> = clusters.iter().map(|c| c.name.clone()).collect();
    super::certs::ensure_dev_certs(&dir, &[1, 2, 3], &names, "admin")
        .map_err(|e| format!("--tls-dir {}: {e}", dir.display()))?;
    Ok(Some(dir))
}

/// What the banner tells about pointing the CLI at the group: "the
/// default" only where it is the CLI's default (server 127.0.0.1:7400,
/// ~/.fleetq/tls); otherwise the environment to export.
fn cli_setup(api: &str, tls_dir: Option<&std::path::Path>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut export = Vec::new();
    match tls_dir {
        Some(d) if super::tls::default_dir().as_deref() == Some(d) => lines.push(format!(
            "  mutual TLS: CA and certificates in {} (the CLI's default; its client.pem is tenant admin)",
            d.display()
        )),
        Some(d) => {
            lines.push(format!(
                "  mutual TLS: CA and certificates in {} (its client.pem is tenant admin)",
                d.display()
            ));
            export.push(format!("FLEETQ_TLS_DIR={}", d.display()));
        }
        None => {
            lines.push("  plaintext (--insecure): the CLI needs --insecure too".into());
            export.push("FLEETQ_INSECURE=true".into());
        }
    }
    if api == client::DEFAULT_SERVER {
        lines.push(format!(
            "Point the CLI at {api} (the default). Try, from another terminal:"
        ));
    } else {
        lines.push(format!(
            "Point the CLI at {api} (not its default, {}). Try, from another terminal:",
            client::DEFAULT_SERVER
        ));
        export.insert(0, format!("FLEETQ_SERVER={api}"));
    }
    if !export.is_empty() {
        lines.push(format!("  export {}", export.join(" ")));
    }
    lines
}

fn run_inner(args: &DevArgs, tls_args: &TlsArgs) -> Result<(), String> {
    let clusters = if args.clusters.is_empty() {
        simulated::dev_clusters()
    } else {
        args.clusters
            .iter()
            .map(|s| SimulatedCluster::parse(s).map_err(|e| format!("--cluster: {e}")))
            .collect::<Result<Vec<_>, _>>()?
    };
    if args.port > u16::MAX - 2 {
        return Err(format!(
            "--port: {} leaves no room for nodes 2 and 3",
            args.port
        ));
    }
    if let Some(h) = args.http_listen {
        if h.port() > u16::MAX - 2 {
            return Err(format!(
                "--http-listen: port {} leaves no room for nodes 2 and 3",
                h.port()
            ));
        }
    }
    let metrics = super::server::parse_not_running_after(args.reserved_not_running_after.as_ref())?;
    let limits = args.limits.resolve()?;
    // Elections among nodes that start one after another log transient
    // errors; `fleetq dev` keeps its terminal for the tour (RUST_LOG shows them).
    init_logging(args.log_format, "warn,openraft=off,sled=warn");
    let tls_dir = dev_tls(tls_args, &clusters)?;
    let load = |stem: &str| -> Result<Option<Tls>, String> {
        tls_dir
            .as_ref()
            .map(|d| Tls::load(TlsFiles::in_dir(d, stem)))
            .transpose()
    };
    let (_temp, root) = match &args.data_dir {
        Some(d) => (None, d.clone()),
        None => {
            let t = tempfile::Builder::new()
                .prefix("fleetq-dev-")
                .tempdir()
                .map_err(|e| format!("cannot create a temporary data directory: {e}"))?;
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let addrs: BTreeMap<u64, SocketAddr> = (1..=3u64)
        .map(|id| {
            (
                id,
                SocketAddr::from((Ipv4Addr::LOCALHOST, args.port + id as u16 - 1)),
            )
        })
        .collect();
    let members: BTreeMap<u64, String> = addrs.iter().map(|(id, a)| (*id, a.to_string())).collect();
    let mut leader = fleetq_server::leader::LeaderPolicies::default();
    if let Some(v) = &args.finished_retention {
        leader.finished_retention = super::server::parse_finished_retention(v)?;
    }
    runtime()?.block_on(async {
        let mut nodes = Vec::new();
        let mut http = Vec::new();
        for (id, addr) in &addrs {
            let listener = bind_http(args.http_listen, *id).await?;
            let config = NodeConfig {
                id: *id,
                advertise: addr.to_string(),
                initial_members: members.clone(),
                timing: RaftTiming::default(),
                ledger: fleetq_ledger::LedgerConfig::default(),
                leader,
                // The clusters are served by real agents (below).
                simulated_clusters: Vec::new(),
                debug_endpoints: false,
                lease: fleetq_server::agents::leases::LeaseConfig::default(),
                auth: match tls_dir {
                    Some(_) => Authorizer::secure(None)?,
                    None => Authorizer::insecure(),
                },
            };
            let dir = root.join(format!("node-{id}"));
            let tls = load(&format!("node-{id}"))?;
            if let Some(t) = &tls {
                t.spawn_reloader(RELOAD_EVERY);
            }
            let node = fleetq_server::bootstrap::start_node(config, limits, *addr, &dir, None, tls).await?;
            // The local dashboard: dev's listener is loopback, trusted.
            http.push(fleetq_server::http::serve(listener, &node, metrics, true, None)?);
            nodes.push(node);
        }
        // One real agent per cluster (static inventory, simulated
        // executor), the same code `fleetq agent` runs.
        let (stop_agents, agents_stopped) = tokio::sync::watch::channel(false);
        let mut agents = Vec::new();
        for cl in &clusters {
            let mut config = fleetq_agent::AgentConfig::empty();
            config.cluster = cl.name.clone();
            config.servers = members.values().cloned().collect();
            config.labels = [("fleetq.dev/dev".to_string(), "true".to_string())].into();
            config.inventory = cl
                .capacity
                .iter()
                .map(|(flavor, resources)| fleetq_agent::config::StaticFlavor {
                    flavor: flavor.clone(),
                    resources: resources
                        .iter()
                        .map(|(r, q)| (r.clone(), q.to_string()))
                        .collect(),
                })
                .collect();
            config.nodes = cl
                .nodes
                .iter()
                .map(|n| fleetq_agent::config::StaticNode {
                    name: n.name.clone(),
                    flavor: n.flavor.clone(),
                    labels: n.labels.clone(),
                    resources: n
                        .allocatable
                        .iter()
                        .map(|(r, q)| (r.clone(), q.to_string()))
                        .collect(),
                    unschedulable: n.unschedulable,
                })
                .collect();
            config.check()?;
            let mut agent = fleetq_agent::Agent::new(config).await?;
            if let Some(tls) = load(&format!("agent-{}", cl.name))? {
                tls.spawn_reloader(RELOAD_EVERY);
                agent = agent.with_tls(tls);
            }
            agents.push(tokio::spawn(agent.run(agents_stopped.clone())));
        }
        let api = addrs[&1].to_string();
        let client_tls = load("client")?;
        let mut c = client::connect_with(&api, client_tls.as_ref(), None).await?;
        let leader = client::wait_for_leader(&mut c, Duration::from_secs(10)).await?;
        if !args.no_sample {
            let r = c
                .apply(pb::ApplyRequest { manifests: SAMPLE.to_string(), dry_run: false })
                .await
                .map_err(|s| client::status_line(&s))?
                .into_inner();
            if !r.errors.is_empty() {
                return Err(format!("the sample configuration was refused: {:?}", r.errors));
            }
        }
        if args.fair_sharing {
            let r = c
                .apply(pb::ApplyRequest { manifests: FAIR_SHARING.to_string(), dry_run: false })
                .await
                .map_err(|s| client::status_line(&s))?
                .into_inner();
            if !r.errors.is_empty() {
                return Err(format!("the fair sharing Configuration was refused: {:?}", r.errors));
            }
        }
        println!("fleetq dev is running: a 3-node Raft group (sled, fsync on) with node {leader} leading");
        for ((id, a), h) in addrs.iter().zip(&http) {
            println!(
                "  node {id}: {a}  metrics http://{}/metrics  data {}",
                h.local_addr(),
                root.join(format!("node-{id}")).display()
            );
        }
        if let Some(h) = http.first() {
            println!("  dashboard: http://{}/ui (every node serves it)", h.local_addr());
        }
        for cl in &clusters {
            let inv: Vec<String> = cl
                .capacity
                .iter()
                .flat_map(|(f, rs)| rs.iter().map(move |(r, q)| format!("{q} {r} ({f})")))
                .collect();
            println!("  cluster {} (agent: static inventory, simulated executor): {}", cl.name, inv.join(", "));
        }
        if !args.no_sample {
            println!("  sample config: ClusterQueues team-a and team-b in cohort research, LocalQueues default/team-a and default/team-b, priority classes high and low");
        }
        println!();
        for line in cli_setup(&api, tls_dir.as_deref()) {
            println!("{line}");
        }
        println!("  fleetq get cq");
        println!("  fleetq submit --queue team-a --name train-1 --request nvidia.com/gpu=4 --duration 2m --wait");
        println!("  fleetq get workloads");
        println!("Ctrl-C stops it{}.", if args.data_dir.is_none() { " and removes its data" } else { "" });
        termination().await;
        let _ = stop_agents.send(true);
        for agent in agents {
            let _ = agent.await;
        }
        for node in nodes {
            let _ = tokio::time::timeout(Duration::from_secs(5), node.shutdown()).await;
        }
        for h in http {
            let _ = tokio::time::timeout(Duration::from_secs(3), h.join()).await;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::cli_setup;

    #[test]
    fn only_the_cli_default_is_called_the_default() {
        let default = cli_setup("127.0.0.1:7400", None).join("\n");
        assert!(
            default.contains("127.0.0.1:7400 (the default)"),
            "{default}"
        );
        assert!(!default.contains("FLEETQ_SERVER"), "{default}");

        let other =
            cli_setup("127.0.0.1:7500", Some(std::path::Path::new("/tmp/dev-tls"))).join("\n");
        assert!(!other.contains("the default"), "{other}");
        assert!(other.contains("not its default, 127.0.0.1:7400"), "{other}");
        assert!(
            other.contains("export FLEETQ_SERVER=127.0.0.1:7500 FLEETQ_TLS_DIR=/tmp/dev-tls"),
            "{other}"
        );
    }
}
