//! The `kubernetes` inventory source: the cluster's nodes as the API
//! server reports them. Each schedulable, Ready node contributes its
//! allocatable `nvidia.com/gpu` and `nvidia.com/mig-<profile>` to the
//! flavor its `nvidia.com/gpu.product` label maps to (`[flavors]`), and
//! `gpu.memory` (GiB) for whole GPUs where the `nvidia.com/gpu.memory`
//! label (MiB per GPU) says how much. Cordoned and NotReady nodes count
//! for nothing. A watch keeps it current: every change of the total is
//! sent up as a new inventory.

use std::sync::Arc;

use fleetq_model::Quantity;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::watch;

use super::{FlavorMapping, Inventory};
use crate::kubernetes::{MEMORY_LABEL, PRODUCT_LABEL};
use fleetq_model::resources::{GPU, GPU_MEMORY, MIG_PREFIX};

/// The inventory of a set of nodes, and why GPU nodes were left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeInventory {
    pub inventory: Inventory,
    /// "node gpu-7: cordoned", one line per GPU node that counts for nothing.
    pub excluded: Vec<String>,
}

fn is_gpu_resource(name: &str) -> bool {
    name == GPU || name.starts_with(MIG_PREFIX)
}

/// Why a node counts for nothing, if it does not.
fn unusable(node: &Node) -> Option<&'static str> {
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Some("cordoned");
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    (!ready).then_some("NotReady")
}

/// Whole GiB in `mib` MiB (rounded down: never promise memory that is
/// not there).
fn gib_of_mib(mib: u64) -> Quantity {
    Quantity::from_milli((mib / 1024).saturating_mul(1000))
}

/// The inventory `nodes` give under `mapping`: a pure function of the
/// API objects.
pub fn inventory_from_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    mapping: &FlavorMapping,
) -> NodeInventory {
    let mut out = NodeInventory::default();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or("<unnamed>");
        let devices: Vec<(&String, Quantity)> = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .filter(|(r, _)| is_gpu_resource(r))
            .filter_map(|(r, q)| match q.0.parse::<Quantity>() {
                Ok(q) if q > Quantity::default() => Some((r, q)),
                Ok(_) => None,
                Err(e) => {
                    out.excluded
                        .push(format!("node {name}: allocatable {r}: {:?}: {e}", q.0));
                    None
                }
            })
            .collect();
        if devices.is_empty() {
            continue; // not a GPU node
        }
        if let Some(why) = unusable(node) {
            out.excluded.push(format!("node {name}: {why}"));
            continue;
        }
        let labels = node.metadata.labels.as_ref();
        let Some(product) = labels.and_then(|l| l.get(PRODUCT_LABEL)) else {
            out.excluded
                .push(format!("node {name}: no {PRODUCT_LABEL} label"));
            continue;
        };
        let Some(flavor) = mapping.flavor_of(product) else {
            out.excluded.push(format!(
                "node {name}: product {product:?} has no flavor in [flavors]"
            ));
            continue;
        };
        let per_gpu_mib = labels
            .and_then(|l| l.get(MEMORY_LABEL))
            .and_then(|m| m.parse::<u64>().ok());
        let list = out.inventory.entry(flavor.to_string()).or_default();
        for (resource, q) in devices {
            let entry = list.entry(resource.clone()).or_default();
            *entry = entry.saturating_add(q);
            if resource == GPU {
                if let Some(mib) = per_gpu_mib {
                    let memory = gib_of_mib(mib).saturating_mul(q.milli() / 1000);
                    let entry = list.entry(GPU_MEMORY.to_string()).or_default();
                    *entry = entry.saturating_add(memory);
                }
            }
        }
    }
    out
}

fn log_exclusions(excluded: &[String]) {
    for line in excluded {
        tracing::warn!("{line}; it adds no inventory");
    }
}

/// Lists the nodes once (so a missing permission or unreachable API
/// server fails the agent's start with a clear line), then watches them.
/// Returns the first inventory and a receiver of every later change.
pub async fn watch_nodes(
    client: kube::Client,
    selector: Option<String>,
    mapping: FlavorMapping,
) -> Result<watch::Receiver<Inventory>, String> {
    let api: Api<Node> = Api::all(client);
    let mut list = ListParams::default();
    if let Some(s) = &selector {
        list = list.labels(s);
    }
    let nodes = api
        .list(&list)
        .await
        .map_err(|e| format!("kubernetes: cannot list nodes: {e}"))?;
    let first = inventory_from_nodes(&nodes.items, &mapping);
    log_exclusions(&first.excluded);
    let (tx, rx) = watch::channel(first.inventory);
    let mut config = watcher::Config::default();
    if let Some(s) = &selector {
        config = config.labels(s);
    }
    let (reader, writer) = reflector::store::<Node>();
    tokio::spawn(async move {
        let mut last_excluded = first.excluded;
        let mut events = reflector(writer, watcher(api, config))
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            match event {
                // The store is complete again only at InitDone (and must
                // not be awaited here: this loop is what drives it there).
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "node watch interrupted; retrying");
                    continue;
                }
            }
            let nodes: Vec<Arc<Node>> = reader.state();
            let now = inventory_from_nodes(nodes.iter().map(|n| n.as_ref()), &mapping);
            if now.excluded != last_excluded {
                log_exclusions(&now.excluded);
                last_excluded = now.excluded;
            }
            tx.send_if_modified(|inv| {
                let changed = *inv != now.inventory;
                if changed {
                    tracing::info!(inventory = ?now.inventory, "node capacity changed");
                    *inv = now.inventory;
                }
                changed
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, allocatable: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": {
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))
        .unwrap()
    }

    fn mapping() -> FlavorMapping {
        FlavorMapping {
            products: [
                ("NVIDIA-H100-80GB-HBM3".to_string(), "h100-80gb".to_string()),
                ("NVIDIA-A100-SXM4-40GB".to_string(), "a100-40gb".to_string()),
            ]
            .into(),
        }
    }

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn whole_gpus_mig_slices_and_memory_add_up_per_flavor() {
        let h100 = json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"});
        let nodes = [
            node(
                "a",
                h100.clone(),
                json!({"nvidia.com/gpu": "8", "cpu": "96"}),
            ),
            node("b", h100, json!({"nvidia.com/gpu": "8"})),
            node(
                "c",
                json!({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}),
                json!({"nvidia.com/mig-3g.20gb": "1", "nvidia.com/mig-2g.10gb": "2", "nvidia.com/gpu": "0"}),
            ),
            node("cpu-only", json!({}), json!({"cpu": "64"})),
        ];
        let got = inventory_from_nodes(&nodes, &mapping());
        assert!(got.excluded.is_empty(), "{:?}", got.excluded);
        assert_eq!(got.inventory["h100-80gb"][GPU], q("16"));
        assert_eq!(got.inventory["h100-80gb"][GPU_MEMORY], q("1264"));
        assert!(!got.inventory["h100-80gb"].contains_key("cpu"));
        assert_eq!(got.inventory["a100-40gb"]["nvidia.com/mig-3g.20gb"], q("1"));
        assert_eq!(got.inventory["a100-40gb"]["nvidia.com/mig-2g.10gb"], q("2"));
        assert!(!got.inventory["a100-40gb"].contains_key(GPU));
    }

    #[test]
    fn cordoned_not_ready_and_unmapped_nodes_count_for_nothing() {
        let labels = json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"});
        let mut cordoned = node("cordoned", labels.clone(), json!({"nvidia.com/gpu": "8"}));
        cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
        let mut not_ready = node("sick", labels.clone(), json!({"nvidia.com/gpu": "8"}));
        not_ready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        let unmapped = node(
            "l4",
            json!({"nvidia.com/gpu.product": "NVIDIA-L4"}),
            json!({"nvidia.com/gpu": "1"}),
        );
        let unlabelled = node("bare", json!({}), json!({"nvidia.com/gpu": "2"}));
        let good = node("good", labels, json!({"nvidia.com/gpu": "4"}));
        let got = inventory_from_nodes(
            &[cordoned, not_ready, unmapped, unlabelled, good],
            &mapping(),
        );
        assert_eq!(got.inventory.len(), 1);
        assert_eq!(got.inventory["h100-80gb"][GPU], q("4"));
        let why = got.excluded.join("\n");
        for expected in [
            "node cordoned: cordoned",
            "node sick: NotReady",
            "node l4: product \"NVIDIA-L4\" has no flavor",
            "node bare: no nvidia.com/gpu.product label",
        ] {
            assert!(why.contains(expected), "{expected} in {why}");
        }
    }
}
