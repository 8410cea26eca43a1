//! The agent's configuration (TOML), checked before anything starts.
//!
//! ```toml
//! cluster = "east"
//! servers = ["10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"]
//! lease_policy = "fence"          # or "keep"
//! executor = "simulated"          # or "process" (needs state_dir) or "kubernetes"
//! inventory_source = "static"     # or "nvml" or "kubernetes" (both need [flavors])
//! [labels]
//! region = "us-east"
//! [[inventory]]                   # static inventory source
//! flavor = "h100-80gb"
//! resources = { "nvidia.com/gpu" = "8", "gpu.memory" = "640" }
//! [[nodes]]                       # optional, static source: its nodes
//! name = "gpu-1"
//! flavor = "h100-80gb"
//! labels = { "topology.example.com/rack" = "r1" }
//! resources = { "nvidia.com/gpu" = "8", "gpu.memory" = "640" }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use fleetq_model::Quantity;
use serde::Deserialize;

use crate::inventory::devices::DevicePool;
use crate::inventory::{FlavorMapping, Inventory, InventoryFeed};
use crate::kubernetes::KubernetesConfig;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// "Runs" each workload for its `run.duration`.
    #[default]
    Simulated,
    /// Real child processes (`run.command`), see `state_dir`.
    Process,
    /// One `batch/v1` Job per admission, see `[kubernetes]`.
    Kubernetes,
}

/// Where the inventory comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InventorySource {
    /// `[[inventory]]` tables in this file.
    #[default]
    Static,
    /// The node's GPUs through NVML, flavors from `[flavors]`.
    Nvml,
    /// The cluster's nodes (allocatable GPUs and MIG slices), flavors
    /// from `[flavors]` keyed by the `nvidia.com/gpu.product` label.
    Kubernetes,
}

impl InventorySource {
    pub fn name(self) -> &'static str {
        match self {
            InventorySource::Static => "static",
            InventorySource::Nvml => "nvml",
            InventorySource::Kubernetes => "kubernetes",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticFlavor {
    pub flavor: String,
    pub resources: BTreeMap<String, String>,
}

/// One node of a static inventory: placement puts each pod on one node.
/// Schedulable nodes may hold no more than the `[[inventory]]` totals.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticNode {
    pub name: String,
    pub flavor: String,
    /// Its labels, among them the flavor's Topology levels (a rack); the
    /// hostname label is added when absent.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub resources: BTreeMap<String, String>,
    #[serde(default)]
    pub unschedulable: bool,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default = "default_policy")]
    pub lease_policy: String,
    #[serde(default)]
    pub executor: ExecutorKind,
    #[serde(default)]
    pub inventory_source: InventorySource,
    #[serde(default)]
    pub inventory: Vec<StaticFlavor>,
    /// The static inventory's nodes (none: the cluster is placed by totals).
    #[serde(default)]
    pub nodes: Vec<StaticNode>,
    /// Product name -> flavor: NVML's device name (inventory_source =
    /// "nvml") or the `nvidia.com/gpu.product` node label ("kubernetes").
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
    /// The API server for the kubernetes inventory source and executor.
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
    /// Where the process executor keeps run records and logs.
    #[serde(default)]
    pub state_dir: Option<std::path::PathBuf>,
    /// Heartbeat interval in milliseconds.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// Dial the leader at the address a follower names (the default).
    /// Set false where the servers are reached through a proxy, load
    /// balancer or NAT whose addresses differ from the servers' own: the
    /// agent then tries the configured `servers` in turn until one is the
    /// leader.
    #[serde(default = "default_true")]
    pub follow_redirects: bool,
    /// Local IP address the session goes out from (default: the system's
    /// choice).
    #[serde(default)]
    pub source_address: Option<std::net::IpAddr>,
    /// How long the simulated executor takes to stop a workload (as a
    /// real process takes to exit after SIGTERM); 0 stops at once.
    #[serde(default)]
    pub simulated_stop_ms: u64,
    /// Mutual TLS: the directory `fleetq certs` wrote (ca.pem,
    /// agent-CLUSTER.pem, agent-CLUSTER-key.pem), or the files one by one.
    /// The `--tls-*` flags override these.
    #[serde(default)]
    pub tls_dir: Option<std::path::PathBuf>,
    #[serde(default)]
    pub tls_ca: Option<std::path::PathBuf>,
    #[serde(default)]
    pub tls_cert: Option<std::path::PathBuf>,
    #[serde(default)]
    pub tls_key: Option<std::path::PathBuf>,
    /// Plaintext to the servers (they must run --insecure too).
    #[serde(default)]
    pub insecure: bool,
    /// The process executor runs workloads as this user (name or uid)
    /// when the agent is root (crate::executor::run_as).
    #[serde(default)]
    pub run_as_user: Option<String>,
    /// ...and this group (default: the user's primary group).
    #[serde(default)]
    pub run_as_group: Option<String>,
    /// Let a root agent run workloads as root (off: it refuses to).
    #[serde(default)]
    pub allow_root_workloads: bool,
    /// The kubernetes executor: how long Kubernetes keeps a finished Job
    /// (its `ttlSecondsAfterFinished`), a duration such as "1h" or
    /// "never"; default 1h. Keep it above any agent outage: a Job removed
    /// before the agent saw it finish is reported failed.
    #[serde(default)]
    pub finished_job_ttl: Option<String>,
    /// The front door (crate::front_door): turn this cluster's suspended
    /// Jobs labelled `kueue.x-k8s.io/queue-name` into workloads, and run
    /// those admitted here in place. Needs the kubernetes executor.
    #[serde(default)]
    pub watch_queued_jobs: bool,
    /// With the front door: a queue-labelled Job created *unsuspended*
    /// (no Kueue webhook suspended it) is suspended, then queued like the
    /// others, as Kueue's webhook would have left it. Without it such a
    /// Job is not fleetq's and runs outside the quota.
    #[serde(default)]
    pub suspend_queued_jobs: bool,
}

fn default_true() -> bool {
    true
}

fn default_policy() -> String {
    "fence".into()
}

fn default_heartbeat_ms() -> u64 {
    500
}

impl AgentConfig {
    pub fn load(path: &Path) -> Result<AgentConfig, String> {
        let config = AgentConfig::read(path)?;
        config
            .check()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(config)
    }

    /// Reads a file without checking it (flags may still fill it in).
    pub fn read(path: &Path) -> Result<AgentConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.to_string().trim()))
    }

    /// A configuration with nothing set (flags fill it in).
    pub fn empty() -> AgentConfig {
        toml::from_str("").unwrap_or_else(|_| AgentConfig {
            cluster: String::new(),
            servers: Vec::new(),
            labels: BTreeMap::new(),
            lease_policy: default_policy(),
            executor: ExecutorKind::default(),
            inventory_source: InventorySource::default(),
            inventory: Vec::new(),
            nodes: Vec::new(),
            flavors: BTreeMap::new(),
            kubernetes: KubernetesConfig::default(),
            state_dir: None,
            heartbeat_ms: default_heartbeat_ms(),
            follow_redirects: true,
            source_address: None,
            simulated_stop_ms: 0,
            tls_dir: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            insecure: false,
            run_as_user: None,
            run_as_group: None,
            allow_root_workloads: false,
            finished_job_ttl: None,
            watch_queued_jobs: false,
            suspend_queued_jobs: false,
        })
    }

    /// `finished_job_ttl`: `None` for "never", the default when unset.
    pub fn finished_job_ttl(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(value) = &self.finished_job_ttl else {
            return Ok(Some(crate::executor::kubernetes::DEFAULT_FINISHED_JOB_TTL));
        };
        if value.trim().eq_ignore_ascii_case("never") {
            return Ok(None);
        }
        let ttl = fleetq_model::time::parse_duration(value)
            .map_err(|e| format!("finished_job_ttl: {value:?}: {e} (or \"never\")"))?;
        // ttlSecondsAfterFinished is an int32 of seconds.
        if ttl.as_secs() > i32::MAX as u64 {
            return Err(format!(
                "finished_job_ttl: {value:?} is more than Kubernetes' {} seconds",
                i32::MAX
            ));
        }
        Ok(Some(ttl))
    }

    /// Who the process executor runs workloads as.
    pub fn run_as(&self) -> Result<crate::executor::run_as::RunAs, String> {
        crate::executor::run_as::RunAs::resolve(
            self.run_as_user.as_deref(),
            self.run_as_group.as_deref(),
            self.allow_root_workloads,
        )
    }

    /// Every problem, each naming its field.
    pub fn check(&self) -> Result<(), String> {
        let mut errors = Vec::new();
        if self.cluster.trim().is_empty() {
            errors.push("cluster: must not be empty".to_string());
        }
        if self.servers.is_empty() {
            errors.push("servers: at least one control-plane address is required".into());
        }
        if !matches!(self.lease_policy.as_str(), "fence" | "keep") {
            errors.push(format!(
                "lease_policy: {:?} is not fence or keep",
                self.lease_policy
            ));
        }
        if self.executor == ExecutorKind::Process && self.state_dir.is_none() {
            errors.push(
                "state_dir: the process executor needs a directory for run records and logs".into(),
            );
        }
        if self.heartbeat_ms == 0 {
            errors.push("heartbeat_ms: must be at least 1".into());
        }
        if let Err(e) = self.finished_job_ttl() {
            errors.push(e);
        }
        if self.suspend_queued_jobs && !self.watch_queued_jobs {
            errors.push(
                "suspend_queued_jobs: needs watch_queued_jobs (the front door suspends and queues them)"
                    .into(),
            );
        }
        if self.watch_queued_jobs && self.executor != ExecutorKind::Kubernetes {
            errors.push(
                "watch_queued_jobs: needs executor = \"kubernetes\" (it runs the Jobs it queues in place)"
                    .into(),
            );
        }
        match self.inventory_source {
            InventorySource::Static => {
                if self.inventory.is_empty() {
                    errors.push("inventory: a static inventory needs at least one flavor".into());
                }
                if let Err(e) = self.static_inventory() {
                    errors.extend(e);
                }
                if let Err(e) = self.static_nodes() {
                    errors.extend(e);
                }
            }
            InventorySource::Nvml | InventorySource::Kubernetes => {
                if !self.nodes.is_empty() {
                    errors.push(format!(
                        "nodes: only the static source takes nodes from this file; the {} source reports its own",
                        self.inventory_source.name()
                    ));
                }
                if self.flavors.is_empty() {
                    errors.push(format!(
                        "flavors: the {} source needs a product name -> flavor mapping",
                        self.inventory_source.name()
                    ));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    pub fn flavor_mapping(&self) -> FlavorMapping {
        FlavorMapping {
            products: self.flavors.clone(),
        }
    }

    /// The inventory from the configured source: its current value and
    /// every later change (static and NVML inventories never change
    /// while the agent runs), and the devices it holds for the process
    /// executor. `client` is the Kubernetes client where one is needed.
    pub async fn open_inventory(
        &self,
        client: Option<&kube::Client>,
    ) -> Result<(InventoryFeed, DevicePool), String> {
        match self.inventory_source {
            InventorySource::Static => {
                let inventory = self.static_inventory().map_err(|e| e.join("; "))?;
                let nodes = self.static_nodes().map_err(|e| e.join("; "))?;
                let pool = DevicePool::from_static(&inventory);
                let report = crate::inventory::InventoryReport {
                    totals: inventory,
                    nodes,
                };
                Ok((InventoryFeed::fixed_report(report), pool))
            }
            InventorySource::Nvml => {
                let gpus = crate::inventory::nvml::read_gpus()?;
                let mapping = self.flavor_mapping();
                let inventory =
                    crate::inventory::inventory_from_gpus(&gpus, &mapping).map_err(|errors| {
                        errors
                            .iter()
                            .map(|e| e.to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    })?;
                // The host is one node (issue 26): a pod never spans
                // hosts, and the Kubernetes and static sources agree.
                let host = crate::inventory::host_name(&self.cluster);
                let nodes = crate::inventory::host_nodes(&host, &inventory);
                Ok((
                    InventoryFeed::fixed_report(crate::inventory::InventoryReport {
                        totals: inventory,
                        nodes,
                    }),
                    DevicePool::from_gpus(&gpus, &mapping),
                ))
            }
            InventorySource::Kubernetes => {
                let client = client.ok_or("kubernetes: no client")?.clone();
                let rx = crate::inventory::kubernetes::watch_nodes(
                    client,
                    self.kubernetes.node_selector.clone(),
                    self.flavor_mapping(),
                )
                .await?;
                let pool = DevicePool::from_static(&rx.borrow().totals);
                Ok((InventoryFeed::watching(rx), pool))
            }
        }
    }

    /// Whether anything needs a Kubernetes client.
    pub fn uses_kubernetes(&self) -> bool {
        self.inventory_source == InventorySource::Kubernetes
            || self.executor == ExecutorKind::Kubernetes
    }

    /// The static source's nodes, checked against its totals as the
    /// ledger checks them (`Cluster::node_problems`).
    pub fn static_nodes(&self) -> Result<Vec<fleetq_model::Node>, Vec<String>> {
        let mut nodes = Vec::new();
        let mut errors = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() {
                errors.push(format!("nodes[{i}].name: must not be empty"));
            }
            let mut allocatable = fleetq_model::ResourceList::new();
            for (resource, value) in &n.resources {
                match value.parse::<Quantity>() {
                    Ok(q) => {
                        allocatable.insert(resource.clone(), q);
                    }
                    Err(e) => errors.push(format!("nodes[{i}].resources.{resource:?}: {e}")),
                }
            }
            let mut labels = n.labels.clone();
            labels
                .entry(fleetq_model::topology::HOSTNAME_LABEL.to_string())
                .or_insert_with(|| n.name.clone());
            nodes.push(fleetq_model::Node {
                name: n.name.clone(),
                labels,
                flavor: n.flavor.clone(),
                allocatable,
                unschedulable: n.unschedulable,
            });
        }
        if let (true, Ok(capacity)) = (errors.is_empty(), self.static_inventory()) {
            let cluster = fleetq_model::Cluster {
                name: self.cluster.clone(),
                labels: BTreeMap::new(),
                capacity,
                state: fleetq_model::ClusterState::Ready,
                nodes: nodes.clone(),
            };
            errors.extend(
                cluster
                    .node_problems()
                    .into_iter()
                    .map(|p| format!("nodes: {p}")),
            );
        }
        if errors.is_empty() {
            Ok(nodes)
        } else {
            Err(errors)
        }
    }

    /// The static inventory source.
    pub fn static_inventory(&self) -> Result<Inventory, Vec<String>> {
        let mut inventory = Inventory::new();
        let mut errors = Vec::new();
        for (i, f) in self.inventory.iter().enumerate() {
            if f.flavor.is_empty() {
                errors.push(format!("inventory[{i}].flavor: must not be empty"));
            }
            for (resource, value) in &f.resources {
                match value.parse::<Quantity>() {
                    Ok(q) => {
                        inventory
                            .entry(f.flavor.clone())
                            .or_default()
                            .insert(resource.clone(), q);
                    }
                    Err(e) => errors.push(format!("inventory[{i}].resources.{resource:?}: {e}")),
                }
            }
        }
        if errors.is_empty() {
            Ok(inventory)
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentConfig, String> {
        let c: AgentConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.check()?;
        Ok(c)
    }

    /// Static nodes become the registration's nodes (hostname label
    /// added), and must add up within the totals, as the ledger requires.
    #[test]
    fn static_nodes_are_checked_against_the_totals() {
        let base = r#"cluster = "east"
servers = ["127.0.0.1:7400"]
[[inventory]]
flavor = "h100-80gb"
resources = { "nvidia.com/gpu" = "8" }
[[nodes]]
name = "gpu-1"
flavor = "h100-80gb"
labels = { "rack" = "r1" }
resources = { "nvidia.com/gpu" = "4" }
[[nodes]]
name = "gpu-2"
flavor = "h100-80gb"
resources = { "nvidia.com/gpu" = "GPUS" }
"#;
        let c = parse(&base.replace("GPUS", "4")).unwrap();
        let nodes = c.static_nodes().unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].labels["rack"], "r1");
        assert_eq!(nodes[1].labels["kubernetes.io/hostname"], "gpu-2");
        let err = parse(&base.replace("GPUS", "5")).unwrap_err();
        assert!(err.contains("nodes: its schedulable nodes hold 9"), "{err}");
        let err = parse(&base.replace("GPUS", "lots")).unwrap_err();
        assert!(
            err.contains("nodes[1].resources.\"nvidia.com/gpu\""),
            "{err}"
        );
    }

    #[test]
    fn a_complete_config_parses() {
        let c = parse(
            r#"cluster = "east"
servers = ["127.0.0.1:7400"]
[[inventory]]
flavor = "h100-80gb"
resources = { "nvidia.com/gpu" = "8" }
"#,
        )
        .unwrap();
        let inv = c.static_inventory().unwrap();
        assert_eq!(inv["h100-80gb"]["nvidia.com/gpu"], "8".parse().unwrap());
        assert_eq!(c.lease_policy, "fence");
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse(
            r#"cluster = ""
servers = []
lease_policy = "maybe"
[[inventory]]
flavor = "h100"
resources = { "nvidia.com/gpu" = "lots" }
"#,
        )
        .unwrap_err();
        for field in [
            "cluster:",
            "servers:",
            "lease_policy:",
            "inventory[0].resources",
        ] {
            assert!(e.contains(field), "{field} in {e}");
        }
        assert!(parse("cluster = \"x\"\nservers = [\"a\"]\nbogus = 1\n")
            .unwrap_err()
            .contains("bogus"));
    }

    #[test]
    fn suspending_queued_jobs_needs_the_front_door() {
        let base = "cluster = \"x\"\nservers = [\"a\"]\nexecutor = \"kubernetes\"\n\
                    inventory_source = \"kubernetes\"\nsuspend_queued_jobs = true\n\
                    [flavors]\n\"NVIDIA-H100\" = \"h100\"\n";
        let e = parse(base).expect_err("refused");
        assert!(
            e.contains("suspend_queued_jobs: needs watch_queued_jobs"),
            "{e}"
        );
        let with = base.replace(
            "suspend_queued_jobs",
            "watch_queued_jobs = true\nsuspend_queued_jobs",
        );
        parse(&with).expect("with the front door");
    }

    #[test]
    fn finished_job_ttl_is_a_duration_or_never_with_an_hour_by_default() {
        let base = "cluster = \"x\"\nservers = [\"a\"]\n[[inventory]]\nflavor = \"f\"\n\
                    resources = { \"nvidia.com/gpu\" = \"1\" }\n";
        let ttl = |line: &str| parse(&format!("{line}\n{base}")).map(|c| c.finished_job_ttl());
        assert_eq!(
            ttl("").unwrap(),
            Ok(Some(std::time::Duration::from_secs(3600)))
        );
        assert_eq!(
            ttl("finished_job_ttl = \"90s\"").unwrap(),
            Ok(Some(std::time::Duration::from_secs(90)))
        );
        assert_eq!(ttl("finished_job_ttl = \"never\"").unwrap(), Ok(None));
        let e = ttl("finished_job_ttl = \"soon\"").unwrap_err();
        assert!(e.starts_with("finished_job_ttl: \"soon\""), "{e}");
        let e = ttl("finished_job_ttl = \"100000d\"").unwrap_err();
        assert!(e.contains("finished_job_ttl"), "{e}");
    }
}
