//! `fleetq logs` with the Kubernetes executor: the end of what an
//! admission's pods printed, from the API server's `pods/{name}/log`, one
//! container at a time (the API refuses a pod of several containers
//! without a container name). Pods are found by the labels the executor
//! puts on its Jobs' pod templates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, LogParams};
use kube::Api;

use super::logs::{Tail, MAX_TAIL_BYTES};
use crate::kubernetes::{workload_selector, LABEL_EPOCH};

/// Lines asked of the API server per container: it returns the last
/// lines, and `limitBytes` then caps them from their start.
const TAIL_LINES: i64 = 10_000;

/// The end of the logs of `workload`'s pods on `cluster` for `epoch` (its
/// latest admission's where 0), at most `max` bytes per container.
pub async fn read_tail(
    client: kube::Client,
    cluster: &str,
    workload: u64,
    epoch: u64,
    max: u64,
) -> Result<Tail, String> {
    let selector = workload_selector(cluster, workload);
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list the pods of workload {workload}: {e}"))?;
    // Pods by epoch, then by namespace and name.
    let mut by_epoch: BTreeMap<u64, Vec<(String, String, Vec<String>)>> = BTreeMap::new();
    for pod in pods.items {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let Some(e) = labels.get(LABEL_EPOCH).and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        let containers = pod
            .spec
            .map(|s| s.containers.into_iter().map(|c| c.name).collect())
            .unwrap_or_default();
        by_epoch.entry(e).or_default().push((
            pod.metadata.namespace.unwrap_or_default(),
            pod.metadata.name.unwrap_or_default(),
            containers,
        ));
    }
    let chosen = match epoch {
        0 => by_epoch.keys().next_back().copied(),
        e => by_epoch.contains_key(&e).then_some(e),
    };
    let Some(epoch) = chosen else {
        return Err(format!(
            "no pod of workload {workload} on this cluster (not started yet, or removed with its Job)"
        ));
    };
    let mut pods = by_epoch.remove(&epoch).unwrap_or_default();
    pods.sort();
    let several = pods.len() > 1 || pods.iter().any(|p| p.2.len() > 1);
    let max = max.clamp(1, MAX_TAIL_BYTES);
    let mut text = String::new();
    for (namespace, name, containers) in pods {
        let api = Api::<Pod>::namespaced(client.clone(), &namespace);
        for container in containers {
            let params = LogParams {
                container: Some(container.clone()),
                tail_lines: Some(TAIL_LINES),
                limit_bytes: Some(i64::try_from(max).unwrap_or(i64::MAX)),
                ..LogParams::default()
            };
            let log = api.logs(&name, &params).await.map_err(|e| {
                format!("cannot read the log of pod {namespace}/{name} ({container}): {e}")
            })?;
            if several {
                text.push_str(&format!(
                    "==> pod {namespace}/{name}, container {container} <==\n"
                ));
            }
            text.push_str(&log);
        }
    }
    Ok(Tail {
        text,
        // The API server says nothing of what it cut.
        truncated: false,
        epoch,
    })
}
