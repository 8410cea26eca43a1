//! The status of the Job (or JobSet) that runs an admission on this
//! cluster, read from the API server when the leader asks
//! (`WorkloadJobStatus`): the front door of the cluster where the user
//! created the Job copies it back, as MultiKueue copies a worker's Job
//! status to the manager. Jobs, JobSets, PyTorchJobs and RayJobs are found by the labels the
//! executor puts on the objects it creates or adopts. A pod workload has
//! no such object: its status is its pod's (`{"pods": {name: status}}`
//! for a group).

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use kube::Api;
use serde_json::Value;

use crate::kubernetes::{workload_selector, LABEL_EPOCH};

/// The `status` of `workload`'s Job on `cluster` for `epoch` (its latest
/// admission's where 0), with the epoch it belongs to.
pub async fn read(
    client: kube::Client,
    cluster: &str,
    workload: u64,
    epoch: u64,
) -> Result<(u64, Value), String> {
    let selector = workload_selector(cluster, workload);
    let jobs = Api::<Job>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list the Jobs of workload {workload}: {e}"))?;
    let found: Vec<(u64, Value)> = jobs
        .items
        .into_iter()
        .filter_map(|job| {
            let e = epoch_of(job.metadata.labels.as_ref()?)?;
            Some((
                e,
                serde_json::to_value(job.status.unwrap_or_default()).ok()?,
            ))
        })
        .collect();
    let mut found = found;
    // Not a Job: a custom resource's object, or pods.
    for resource in [
        super::kubernetes::jobset_resource(),
        super::kubernetes::pytorchjob_resource(),
        super::kubernetes::rayjob_resource(),
    ] {
        if found.is_empty() {
            found = custom(client.clone(), &selector, resource).await?;
        }
    }
    if found.is_empty() {
        found = pods(client, &selector).await?;
    }
    let chosen = match epoch {
        0 => found.into_iter().max_by_key(|(e, _)| *e),
        want => found.into_iter().find(|(e, _)| *e == want),
    };
    chosen.ok_or_else(|| {
        format!("no Job of workload {workload} on this cluster (not created yet, or removed)")
    })
}

fn epoch_of(labels: &std::collections::BTreeMap<String, String>) -> Option<u64> {
    labels.get(LABEL_EPOCH)?.parse::<u64>().ok()
}

/// The (epoch, status) of the objects of a custom resource (JobSets,
/// PyTorchJobs) the selector finds; none where the cluster lacks the API.
async fn custom(
    client: kube::Client,
    selector: &str,
    resource: kube::discovery::ApiResource,
) -> Result<Vec<(u64, Value)>, String> {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let list = match api.list(&ListParams::default().labels(selector)).await {
        Ok(list) => list,
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list {}s: {e}", resource.kind)),
    };
    Ok(list
        .items
        .into_iter()
        .filter_map(|js| {
            let e = epoch_of(js.metadata.labels.as_ref()?)?;
            Some((
                e,
                js.data
                    .get("status")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({})),
            ))
        })
        .collect())
}

/// The (epoch, status) of each pod admission the selector finds: the
/// pod's status, or `{"pods": {name: status}}` for a group.
async fn pods(client: kube::Client, selector: &str) -> Result<Vec<(u64, Value)>, String> {
    let selector = format!("{selector},{}", super::kubernetes::LABEL_POD_COUNT);
    let list = Api::<Pod>::all(client)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list pods: {e}"))?;
    let mut by_epoch: std::collections::BTreeMap<u64, serde_json::Map<String, Value>> =
        std::collections::BTreeMap::new();
    for pod in list.items {
        let Some(epoch) = pod.metadata.labels.as_ref().and_then(epoch_of) else {
            continue;
        };
        let status = serde_json::to_value(pod.status.unwrap_or_default())
            .unwrap_or_else(|_| serde_json::json!({}));
        by_epoch
            .entry(epoch)
            .or_default()
            .insert(pod.metadata.name.unwrap_or_default(), status);
    }
    Ok(by_epoch
        .into_iter()
        .map(|(epoch, pods)| match pods.len() {
            1 => (epoch, pods.into_values().next().unwrap_or_default()),
            _ => (epoch, serde_json::json!({ "pods": pods })),
        })
        .collect())
}
