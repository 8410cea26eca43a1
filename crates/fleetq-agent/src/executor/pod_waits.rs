//! Pods that cannot start where the ledger placed them: the Kubernetes
//! executor pins every pod to its chosen nodes, and when kube-scheduler
//! still finds no room there (another scheduler's pod took it, a taint,
//! the node went away) the pod stays Pending with its `PodScheduled`
//! condition False for reason `Unschedulable`. Without this, nothing said
//! so until wait-for-ready evicted the workload; now the executor reports
//! the admission `Waiting` with kube-scheduler's message, once per
//! admission and message, and the ledger writes it in the workload's
//! history (`fleetq describe workload`).

use std::collections::HashMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::mpsc;

use super::{Event, Report};
use crate::kubernetes::{LABEL_EPOCH, LABEL_WORKLOAD_ID};

/// The admission of a pod that cannot be scheduled, and why: (workload,
/// epoch, "pod NAME cannot be scheduled: MESSAGE"); `None` for any other
/// pod.
pub fn unschedulable(pod: &Pod) -> Option<(u64, u64, String)> {
    let labels = pod.metadata.labels.as_ref()?;
    let id = labels.get(LABEL_WORKLOAD_ID)?.parse().ok()?;
    let epoch = labels.get(LABEL_EPOCH)?.parse().ok()?;
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let condition = status.conditions.as_ref()?.iter().find(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })?;
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let why = condition.message.as_deref().unwrap_or("no reason given");
    Some((id, epoch, format!("pod {name} cannot be scheduled: {why}")))
}

/// Watches the pods of fleetq's Jobs (`selector`: the executor's label
/// for its cluster) and reports each admission
/// whose pod cannot be scheduled, while `waiting(id, epoch)` says the
/// admission has not started, each message once. Ends when `events`
/// closes (the executor is gone).
pub async fn watch(
    client: kube::Client,
    selector: String,
    waiting: impl Fn(u64, u64) -> bool,
    events: mpsc::UnboundedSender<Report>,
) {
    let pods: Api<Pod> = Api::all(client);
    let mut stream = watcher(pods, watcher::Config::default().labels(&selector))
        .default_backoff()
        .boxed();
    let mut told: HashMap<(u64, u64), String> = HashMap::new();
    while let Some(event) = stream.next().await {
        if events.is_closed() {
            return;
        }
        let pod = match event {
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "pod watch interrupted; retrying");
                continue;
            }
        };
        let Some((id, epoch, message)) = unschedulable(&pod) else {
            continue;
        };
        if !waiting(id, epoch) || told.get(&(id, epoch)) == Some(&message) {
            continue;
        }
        tracing::warn!(workload = id, epoch, %message, "a pod cannot start on its node");
        told.insert((id, epoch), message.clone());
        let _ = events.send(Report {
            workload: id,
            epoch,
            event: Event::Waiting,
            message,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::kubernetes::LABEL_CLUSTER;

    fn pod(phase: &str, condition: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "train-0", "labels": {
                LABEL_WORKLOAD_ID: "7", LABEL_EPOCH: "2", LABEL_CLUSTER: "east"}},
            "status": {"phase": phase, "conditions": [condition]},
        }))
        .expect("a pod")
    }

    #[test]
    fn only_unschedulable_pending_pods_of_fleetq_are_reported() {
        let stuck = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu."});
        assert_eq!(
            unschedulable(&pod("Pending", stuck.clone())),
            Some((
                7,
                2,
                "pod train-0 cannot be scheduled: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu."
                    .into()
            ))
        );
        assert_eq!(unschedulable(&pod("Running", stuck)), None);
        let scheduled = json!({"type": "PodScheduled", "status": "True"});
        assert_eq!(unschedulable(&pod("Pending", scheduled)), None);
        let gated = json!({"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"});
        assert_eq!(unschedulable(&pod("Pending", gated)), None);
    }
}
