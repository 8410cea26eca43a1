//! The agent's connection to its cluster's Kubernetes API server (for the
//! `kubernetes` inventory source and executor), and the labels fleetq puts
//! on what it creates there.
//!
//! ```toml
//! [kubernetes]
//! kubeconfig = "/etc/fleetq/kubeconfig"   # default: $KUBECONFIG or ~/.kube/config, else in-cluster
//! context = "prod-east"                   # default: the kubeconfig's current context
//! node_selector = "nvidia.com/gpu.present=true"
//! ```

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Deserialize;

/// Node label naming the GPU model (set by NVIDIA's GPU feature discovery);
/// `[flavors]` maps its values to flavors.
pub const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
/// Node label with each GPU's memory in MiB (GPU feature discovery).
pub const MEMORY_LABEL: &str = "nvidia.com/gpu.memory";

/// Labels on every Job (and its pods) the executor creates.
pub const LABEL_CLUSTER: &str = "fleetq.dev/cluster";
pub const LABEL_WORKLOAD_ID: &str = "fleetq.dev/workload-id";
pub const LABEL_EPOCH: &str = "fleetq.dev/epoch";
pub const LABEL_WORKLOAD: &str = "fleetq.dev/workload";

/// The `[kubernetes]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// A kubeconfig file; without one, kube's usual inference.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// A context of that kubeconfig.
    #[serde(default)]
    pub context: Option<String>,
    /// A label selector limiting the nodes that count as inventory.
    #[serde(default)]
    pub node_selector: Option<String>,
}

/// A client for the configured API server. Errors name the setting.
pub async fn client(config: &KubernetesConfig) -> Result<kube::Client, String> {
    let options = KubeConfigOptions {
        context: config.context.clone(),
        ..KubeConfigOptions::default()
    };
    let resolved = match &config.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| format!("kubernetes.kubeconfig: {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| format!("kubernetes.kubeconfig: {}: {e}", path.display()))?
        }
        None if config.context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| format!("kubernetes.context: {e}"))?,
        None => kube::Config::infer().await.map_err(|e| {
            format!("kubernetes: no kubeconfig given and none could be inferred: {e}")
        })?,
    };
    kube::Client::try_from(resolved).map_err(|e| format!("kubernetes: cannot build a client: {e}"))
}

/// The label selector of everything the executor made on `cluster` for
/// `workload` (its Jobs and their pods, every admission).
pub fn workload_selector(cluster: &str, workload: u64) -> String {
    format!(
        "{LABEL_CLUSTER}={},{LABEL_WORKLOAD_ID}={workload}",
        label_value(cluster)
    )
}

/// `value` made a valid label value: at most 63 characters of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric.
pub fn label_value(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("train-llama"), "train-llama");
        assert_eq!(label_value("-a b/c-"), "a-b-c");
        assert_eq!(label_value(&"x".repeat(80)).len(), 63);
    }
}
