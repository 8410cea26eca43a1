//! The status of the Job that runs an admission on this cluster, read
//! from the API server when the leader asks (`WorkloadJobStatus`): the
//! front door of the cluster where the user created the Job copies it
//! back, as MultiKueue copies a worker's Job status to the manager.
//! Jobs are found by the labels the executor puts on the Jobs it creates
//! or adopts.

use k8s_openapi::api::batch::v1::Job;
use kube::api::ListParams;
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
    let jobs = Api::<Job>::all(client)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| format!("cannot list the Jobs of workload {workload}: {e}"))?;
    let found = jobs.items.into_iter().filter_map(|job| {
        let e = job
            .metadata
            .labels
            .as_ref()?
            .get(LABEL_EPOCH)?
            .parse::<u64>()
            .ok()?;
        Some((e, job))
    });
    let chosen = match epoch {
        0 => found.max_by_key(|(e, _)| *e),
        want => found.into_iter().find(|(e, _)| *e == want),
    };
    let Some((epoch, job)) = chosen else {
        return Err(format!(
            "no Job of workload {workload} on this cluster (not created yet, or removed)"
        ));
    };
    let status = serde_json::to_value(job.status.unwrap_or_default())
        .map_err(|e| format!("cannot encode the Job's status: {e}"))?;
    Ok((epoch, status))
}
