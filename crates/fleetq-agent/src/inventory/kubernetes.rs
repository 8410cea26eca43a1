//! The `kubernetes` inventory source: the cluster's nodes as the API
//! server reports them. Each schedulable, Ready node contributes its
//! allocatable `nvidia.com/gpu` and `nvidia.com/mig-<profile>` to the
//! flavor its `nvidia.com/gpu.product` label maps to (`[flavors]`), less
//! what pods fleetq did not start hold there, and `gpu.memory` (GiB) for
//! those whole GPUs where the `nvidia.com/gpu.memory` label (MiB per GPU)
//! says how much. Cordoned and NotReady nodes count for nothing.
//!
//! Busy devices are never offered: every pod bound to a node and not
//! terminated (phase neither Succeeded nor Failed: what the scheduler
//! counts) holds its effective requests there ([`pod_device_requests`],
//! Kubernetes' rule: containers and sidecars summed, init containers at
//! their peak), unless fleetq's executor started it (the admission labels
//! it puts on a Job's pods, [`started_by_fleetq`]): those are already
//! charged in the ledger, so subtracting them too would count them twice.
//!
//! Watches on nodes and on such pods keep it current: every change of the
//! total is sent up as a new inventory.

use std::collections::HashMap;
use std::sync::Arc;

use fleetq_model::Quantity;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as KubeQuantity;
use kube::api::ListParams;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::watch;

use super::{FlavorMapping, Inventory, InventoryReport};
use crate::kubernetes::{
    LABEL_CLUSTER, LABEL_EPOCH, LABEL_WORKLOAD_ID, MEMORY_LABEL, PRODUCT_LABEL,
};
use fleetq_model::resources::{ResourceList, GPU, GPU_MEMORY, MIG_PREFIX};

/// The pods that hold a node's resources: bound to one, not terminated
/// (the field selector `kubectl describe node` and the scheduler use).
pub const HOLDING_PODS: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// The inventory of a set of nodes, and why GPU nodes were left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeInventory {
    pub inventory: Inventory,
    /// Each usable GPU node, with what is free on it (its allocatable
    /// devices less what pods fleetq did not start hold): the inventory
    /// is their sum.
    pub nodes: Vec<fleetq_model::Node>,
    /// "node gpu-7: cordoned", one line per GPU node that counts for nothing.
    pub excluded: Vec<String>,
}

impl NodeInventory {
    /// What the agent registers.
    fn report(&self) -> InventoryReport {
        InventoryReport {
            totals: self.inventory.clone(),
            nodes: self.nodes.clone(),
        }
    }
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

/// Whether fleetq's executor started `pod`: it carries the admission
/// labels the executor puts on every Job's pod template.
pub fn started_by_fleetq(pod: &Pod) -> bool {
    pod.metadata.labels.as_ref().is_some_and(|l| {
        [LABEL_CLUSTER, LABEL_WORKLOAD_ID, LABEL_EPOCH]
            .iter()
            .all(|k| l.contains_key(*k))
    })
}

/// Whether `pod` holds resources on a node now: bound to it and neither
/// Succeeded nor Failed (a Pending pod bound to a node holds them too).
fn holds_resources(pod: &Pod) -> Option<&str> {
    let node = pod
        .spec
        .as_ref()?
        .node_name
        .as_deref()
        .filter(|n| !n.is_empty())?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    (!matches!(phase, Some("Succeeded" | "Failed"))).then_some(node)
}

/// One container's GPU and MIG requests, the limit standing in for a
/// missing request (as the API server defaults it). Amounts that are no
/// quantity (the API server would not have stored them) count as zero.
fn container_devices(container: &Container) -> ResourceList {
    let mut out = ResourceList::new();
    let resources = container.resources.as_ref();
    let amounts = |m: Option<&std::collections::BTreeMap<String, KubeQuantity>>| {
        m.into_iter()
            .flatten()
            .filter(|(r, _)| is_gpu_resource(r))
            .filter_map(|(r, q)| Some((r.clone(), q.0.parse::<Quantity>().ok()?)))
            .collect::<Vec<_>>()
    };
    for (r, q) in amounts(resources.and_then(|r| r.limits.as_ref())) {
        out.insert(r, q);
    }
    for (r, q) in amounts(resources.and_then(|r| r.requests.as_ref())) {
        out.insert(r, q);
    }
    out
}

fn add_into(total: &mut ResourceList, more: &ResourceList) {
    for (r, q) in more {
        let entry = total.entry(r.clone()).or_default();
        *entry = entry.saturating_add(*q);
    }
}

fn max_into(total: &mut ResourceList, other: &ResourceList) {
    for (r, q) in other {
        let entry = total.entry(r.clone()).or_default();
        *entry = (*entry).max(*q);
    }
}

/// The GPUs and MIG slices `pod` holds, by Kubernetes' rule for a pod's
/// effective requests: the larger of the containers (plus sidecars, init
/// containers with `restartPolicy: Always`) summed and each init container
/// (plus the sidecars started before it), then the RuntimeClass overhead.
pub fn pod_device_requests(pod: &Pod) -> ResourceList {
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceList::new();
    };
    let mut running = ResourceList::new();
    for c in &spec.containers {
        add_into(&mut running, &container_devices(c));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for init in spec.init_containers.iter().flatten() {
        let requests = container_devices(init);
        if init.restart_policy.as_deref() == Some("Always") {
            add_into(&mut sidecars, &requests);
            max_into(&mut init_peak, &sidecars);
        } else {
            let mut during = sidecars.clone();
            add_into(&mut during, &requests);
            max_into(&mut init_peak, &during);
        }
    }
    add_into(&mut running, &sidecars);
    max_into(&mut running, &init_peak);
    let overhead = spec.overhead.as_ref().map(|o| {
        let c = Container {
            resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                requests: Some(o.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        container_devices(&c)
    });
    add_into(&mut running, &overhead.unwrap_or_default());
    running.retain(|_, q| !q.is_zero());
    running
}

/// What the pods fleetq did not start hold, per node name.
fn held_by_others<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> HashMap<String, ResourceList> {
    let mut held: HashMap<String, ResourceList> = HashMap::new();
    for pod in pods {
        if started_by_fleetq(pod) {
            continue;
        }
        let Some(node) = holds_resources(pod) else {
            continue;
        };
        let devices = pod_device_requests(pod);
        if !devices.is_empty() {
            add_into(held.entry(node.to_string()).or_default(), &devices);
        }
    }
    held
}

/// The inventory `nodes` give under `mapping`, with no pods running: a
/// pure function of the API objects.
pub fn inventory_from_nodes<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    mapping: &FlavorMapping,
) -> NodeInventory {
    inventory_from_cluster(nodes, std::iter::empty(), mapping)
}

/// The inventory `nodes` give under `mapping` once what `pods` that fleetq
/// did not start hold on them is taken off: a pure function of the API
/// objects.
pub fn inventory_from_cluster<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
    mapping: &FlavorMapping,
) -> NodeInventory {
    let held = held_by_others(pods);
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
        // A cordoned or NotReady node adds nothing to the totals, but is
        // reported (unschedulable): the ledger must see a node leave under
        // pods it placed there (issue 26, item 4).
        let unschedulable = unusable(node);
        if let Some(why) = unschedulable {
            out.excluded.push(format!("node {name}: {why}"));
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
        let busy = held.get(name);
        let mut free = ResourceList::new();
        for (resource, q) in devices {
            let taken = busy
                .and_then(|b| b.get(resource.as_str()))
                .copied()
                .unwrap_or_default();
            let q = q.saturating_sub(taken);
            free.insert(resource.clone(), q);
            if resource == GPU {
                if let Some(mib) = per_gpu_mib {
                    let memory = gib_of_mib(mib).saturating_mul(q.milli() / 1000);
                    free.insert(GPU_MEMORY.to_string(), memory);
                }
            }
        }
        if unschedulable.is_none() {
            let list = out.inventory.entry(flavor.to_string()).or_default();
            for (resource, q) in &free {
                let entry = list.entry(resource.clone()).or_default();
                *entry = entry.saturating_add(*q);
            }
        }
        out.nodes.push(fleetq_model::Node {
            name: name.to_string(),
            labels: labels.cloned().unwrap_or_default().into_iter().collect(),
            flavor: flavor.to_string(),
            allocatable: free,
            unschedulable: unschedulable.is_some(),
        });
    }
    out
}

fn log_exclusions(excluded: &[String]) {
    for line in excluded {
        tracing::warn!("{line}; it adds no inventory");
    }
}

/// What one event of the node or pod watch means for the inventory.
enum Step {
    /// A re-list is under way: its store still shows the previous state.
    Listing,
    /// A (re-)list is complete.
    Listed,
    /// An object changed.
    Changed,
    /// The watch failed (it retries by itself).
    Failed(String),
}

impl<K> From<watcher::Result<watcher::Event<K>>> for Step {
    fn from(event: watcher::Result<watcher::Event<K>>) -> Step {
        match event {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => Step::Listing,
            Ok(watcher::Event::InitDone) => Step::Listed,
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Step::Changed,
            Err(e) => Step::Failed(e.to_string()),
        }
    }
}

/// Lists the nodes and the pods holding resources once (so a missing
/// permission or unreachable API server fails the agent's start with a
/// clear line), then watches both. Returns the first inventory and a
/// receiver of every later change.
pub async fn watch_nodes(
    client: kube::Client,
    selector: Option<String>,
    mapping: FlavorMapping,
) -> Result<watch::Receiver<InventoryReport>, String> {
    let nodes_api: Api<Node> = Api::all(client.clone());
    let pods_api: Api<Pod> = Api::all(client);
    let mut list = ListParams::default();
    if let Some(s) = &selector {
        list = list.labels(s);
    }
    let nodes = nodes_api
        .list(&list)
        .await
        .map_err(|e| format!("kubernetes: cannot list nodes: {e}"))?;
    let pods = pods_api
        .list(&ListParams::default().fields(HOLDING_PODS))
        .await
        .map_err(|e| {
            format!(
                "kubernetes: cannot list pods (the inventory subtracts what pods fleetq did \
                 not start hold; the agent needs get/list/watch on pods in all namespaces): {e}"
            )
        })?;
    let first = inventory_from_cluster(&nodes.items, &pods.items, &mapping);
    log_exclusions(&first.excluded);
    let (tx, rx) = watch::channel(first.report());
    let mut node_config = watcher::Config::default();
    if let Some(s) = &selector {
        node_config = node_config.labels(s);
    }
    let pod_config = watcher::Config::default().fields(HOLDING_PODS);
    let (node_reader, node_writer) = reflector::store::<Node>();
    let (pod_reader, pod_writer) = reflector::store::<Pod>();
    tokio::spawn(async move {
        let mut last_excluded = first.excluded;
        let node_events = reflector(node_writer, watcher(nodes_api, node_config))
            .default_backoff()
            .map(|e| ("node", Step::from(e)))
            .boxed();
        // Only what the arithmetic reads is kept of each pod.
        let pod_events = reflector(
            pod_writer,
            watcher(pods_api, pod_config).modify(|pod| {
                pod.metadata.managed_fields = None;
                pod.metadata.annotations = None;
                if let Some(status) = pod.status.as_mut() {
                    let phase = status.phase.take();
                    *status = Default::default();
                    status.phase = phase;
                }
            }),
        )
        .default_backoff()
        .map(|e| ("pod", Step::from(e)))
        .boxed();
        let mut events = futures::stream::select(node_events, pod_events);
        // Each store is complete only from its first InitDone on (and must
        // not be awaited here: this loop is what drives it there); a
        // re-list keeps the previous complete state readable meanwhile.
        let (mut nodes_ready, mut pods_ready) = (false, false);
        while let Some((watched, step)) = events.next().await {
            match step {
                Step::Listed if watched == "node" => nodes_ready = true,
                Step::Listed => pods_ready = true,
                Step::Changed => {}
                Step::Listing => continue,
                Step::Failed(e) => {
                    tracing::warn!(error = %e, "{watched} watch interrupted; retrying");
                    continue;
                }
            }
            if !(nodes_ready && pods_ready) {
                continue;
            }
            let nodes: Vec<Arc<Node>> = node_reader.state();
            let pods: Vec<Arc<Pod>> = pod_reader.state();
            let now = inventory_from_cluster(
                nodes.iter().map(|n| n.as_ref()),
                pods.iter().map(|p| p.as_ref()),
                &mapping,
            );
            let report = now.report();
            if now.excluded != last_excluded {
                log_exclusions(&now.excluded);
                last_excluded = now.excluded;
            }
            tx.send_if_modified(|inv| {
                let changed = *inv != report;
                if changed {
                    tracing::info!(inventory = ?report.totals, nodes = report.nodes.len(), "node capacity changed");
                    *inv = report;
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

    fn pod(name: &str, node: &str, labels: serde_json::Value, spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": spec,
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn container(requests: serde_json::Value, limits: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "image": "i", "resources": {"requests": requests, "limits": limits}})
    }

    /// Kubernetes' effective requests: containers summed, init containers
    /// at their peak (with the sidecars started before them), sidecars
    /// running alongside, overhead on top.
    #[test]
    fn a_pods_devices_follow_the_effective_request_rules() {
        let gpus = |n: &str| container(json!({GPU: n}), json!({GPU: n}));
        let p = pod(
            "p",
            "a",
            json!({}),
            json!({
                "containers": [gpus("2"), gpus("1"), container(json!({}), json!({GPU: "1"}))],
                "initContainers": [gpus("6"), container(json!({"cpu": "1"}), json!({}))],
            }),
        );
        assert_eq!(pod_device_requests(&p), [(GPU.to_string(), q("6"))].into());
        let p = pod(
            "p",
            "a",
            json!({}),
            json!({
                "containers": [gpus("2")],
                "initContainers": [
                    {"name": "side", "image": "i", "restartPolicy": "Always",
                     "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}},
                    gpus("3"),
                ],
                "overhead": {GPU: "1"},
            }),
        );
        assert_eq!(
            pod_device_requests(&p),
            [
                (GPU.to_string(), q("4")),
                ("nvidia.com/mig-1g.10gb".to_string(), q("1"))
            ]
            .into(),
            "max(2 + sidecar, 3 + sidecar) + 1 overhead"
        );
    }

    /// What pods fleetq did not start hold comes off their node, per
    /// resource and never below zero; fleetq's own pods (already charged
    /// in the ledger), finished pods and unbound pods hold nothing here.
    #[test]
    fn busy_devices_are_not_offered() {
        let h100 = json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81920"});
        let nodes = [
            node("a", h100.clone(), json!({GPU: "8"})),
            node("b", h100, json!({GPU: "8"})),
            node(
                "m",
                json!({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}),
                json!({"nvidia.com/mig-3g.20gb": "2"}),
            ),
        ];
        let limits = |n: &str| json!({"containers": [container(json!({}), json!({GPU: n}))]});
        let fleetq = json!({LABEL_CLUSTER: "east", LABEL_WORKLOAD_ID: "7", LABEL_EPOCH: "1"});
        let mut done = pod("done", "b", json!({}), limits("8"));
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        let pods = [
            pod("squatter", "a", json!({"app": "x"}), limits("3")),
            pod("other", "a", json!({}), limits("1")),
            pod("ours", "a", fleetq, limits("4")),
            pod("greedy", "b", json!({}), limits("9")),
            done,
            pod("unbound", "", json!({}), limits("8")),
            pod(
                "slice",
                "m",
                json!({}),
                json!({"containers": [container(json!({}), json!({"nvidia.com/mig-3g.20gb": "1"}))]}),
            ),
        ];
        let got = inventory_from_cluster(&nodes, &pods, &mapping());
        assert_eq!(
            got.inventory["h100-80gb"][GPU],
            q("4"),
            "8 - 3 - 1 on a, 0 on b"
        );
        assert_eq!(
            got.inventory["h100-80gb"][GPU_MEMORY],
            q("320"),
            "4 free GPUs x 80"
        );
        assert_eq!(got.inventory["a100-40gb"]["nvidia.com/mig-3g.20gb"], q("1"));
        assert!(started_by_fleetq(&pods[2]) && !started_by_fleetq(&pods[0]));
        // The same, node by node (issue 26): what is free on each, with
        // its labels, adding up to the totals.
        let free: Vec<(&str, &str, String)> = got
            .nodes
            .iter()
            .flat_map(|n| {
                n.allocatable
                    .iter()
                    .map(move |(r, q)| (n.name.as_str(), r.as_str(), q.to_string()))
            })
            .collect();
        assert_eq!(
            free,
            [
                ("a", GPU_MEMORY, "320".to_string()),
                ("a", GPU, "4".to_string()),
                ("b", GPU_MEMORY, "0".to_string()),
                ("b", GPU, "0".to_string()),
                ("m", "nvidia.com/mig-3g.20gb", "1".to_string()),
            ]
        );
        assert_eq!(got.nodes[2].flavor, "a100-40gb");
        assert_eq!(
            got.nodes[0].labels.get(PRODUCT_LABEL).map(String::as_str),
            Some("NVIDIA-H100-80GB-HBM3")
        );
        let cluster = fleetq_model::Cluster {
            name: "east".into(),
            labels: Default::default(),
            capacity: got.inventory.clone(),
            state: Default::default(),
            nodes: got.nodes.clone(),
        };
        assert!(
            cluster.node_problems().is_empty(),
            "{:?}",
            cluster.node_problems()
        );
    }

    #[test]
    fn cordoned_not_ready_and_unmapped_nodes_add_no_inventory() {
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
        let nodes: Vec<(&str, bool)> = got
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.unschedulable))
            .collect();
        // Cordoned and NotReady nodes are reported, unschedulable, so that
        // the ledger sees a node leave under running pods.
        assert_eq!(
            nodes,
            [("cordoned", true), ("sick", true), ("good", false)],
            "GPU nodes of a known product are reported"
        );
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
