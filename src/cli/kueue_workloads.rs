//! `get workloads -o yaml|json`: each workload as Kueue's Workload, spec
//! and status. The server sends the whole workload when asked `with_spec`;
//! the status comes from what [`pb::WorkloadStatus`] says of its state.

use std::str::FromStr;

use fleetq_model::kueue::export::{self, AssignedPodSet, Phase, WorkloadFacts};
use fleetq_model::{Timestamp, Workload};
use fleetq_proto::v1 as pb;
use serde_json::Value;

/// What the ledger knows of `w`'s state, for its Kueue `status`.
pub fn facts(w: &pb::WorkloadStatus) -> Result<WorkloadFacts, String> {
    let phase = Phase::from_str(&w.state)
        .map_err(|e| format!("workload {}/{}: {e}", w.namespace, w.name))?;
    let created_at = Timestamp(w.created_at_ms);
    let (last_change, last_message) = w.history.last().map_or((created_at, String::new()), |e| {
        (Timestamp(e.at_ms), e.message.clone())
    });
    Ok(WorkloadFacts {
        phase,
        cluster_queue: w.cluster_queue.clone(),
        priority: w.priority,
        created_at,
        admitted_at: (w.admitted_at_ms > 0).then_some(Timestamp(w.admitted_at_ms)),
        cluster: w.cluster.clone(),
        pod_sets: w
            .flavors
            .iter()
            .map(|ps| AssignedPodSet {
                name: ps.name.clone(),
                count: ps.count,
                flavors: ps.flavors.clone().into_iter().collect(),
            })
            .collect(),
        reason_kind: w.reason_kind.clone(),
        reason: w.reason.clone(),
        // The status view does not say why a reservation is being
        // stopped; the Evicted condition then carries the reason instead.
        stopping: None,
        last_change,
        last_message,
    })
}

/// One workload as Kueue's Workload, or why it cannot be printed.
pub fn kueue_workload(w: &pb::WorkloadStatus) -> Result<Value, String> {
    if w.workload_json.is_empty() {
        return Err(format!(
            "the server sent workload {}/{} without its spec; it may predate `get -o yaml|json` for workloads",
            w.namespace, w.name
        ));
    }
    let workload: Workload = serde_json::from_str(&w.workload_json)
        .map_err(|e| format!("the server sent a workload this CLI cannot read: {e}"))?;
    Ok(export::workload(&workload, Some(&facts(w)?)))
}

/// The list as Kueue objects: one object when `single`, else a v1 List.
pub fn kueue_workloads(list: &[pb::WorkloadStatus], single: bool) -> Result<Value, String> {
    let items = list
        .iter()
        .map(kueue_workload)
        .collect::<Result<Vec<Value>, String>>()?;
    Ok(match (single, items.as_slice()) {
        (true, [one]) => one.clone(),
        _ => export::list(items),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: &str) -> pb::WorkloadStatus {
        let workload = serde_json::json!({
            "namespace": "team-a",
            "name": "train",
            "spec": {
                "queueName": "team-a",
                "podSets": [{"name": "main", "count": 2, "requests": {"nvidia.com/gpu": "4"}}],
                "run": {"duration": "30m"}
            }
        });
        pb::WorkloadStatus {
            namespace: "team-a".into(),
            name: "train".into(),
            cluster_queue: "team-a".into(),
            state: state.into(),
            cluster: "dev-east".into(),
            flavors: vec![pb::PodSetFlavors {
                name: "main".into(),
                count: 2,
                flavors: [("nvidia.com/gpu".to_string(), "h100-80gb".to_string())]
                    .into_iter()
                    .collect(),
                nodes: Vec::new(),
            }],
            created_at_ms: 1_714_564_800_000,
            admitted_at_ms: 1_714_564_801_000,
            workload_json: workload.to_string(),
            ..pb::WorkloadStatus::default()
        }
    }

    #[test]
    fn an_admitted_workload_prints_with_kueue_conditions() {
        let v = kueue_workloads(&[status("Running")], true).expect("prints");
        assert_eq!(v["kind"], "Workload");
        assert_eq!(v["metadata"]["annotations"]["fleetq.dev/duration"], "30m");
        let conditions = v["status"]["conditions"].as_array().expect("conditions");
        for kind in ["QuotaReserved", "Admitted"] {
            let c = conditions
                .iter()
                .find(|c| c["type"] == kind)
                .unwrap_or_else(|| panic!("no {kind} in {v}"));
            assert_eq!(c["status"], "True", "{c}");
            assert_eq!(c["lastTransitionTime"], "2024-05-01T12:00:01Z", "{c}");
        }
        assert_eq!(
            v["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"],
            "h100-80gb",
            "{v}"
        );
    }

    #[test]
    fn several_print_as_a_list_and_a_missing_spec_is_an_error() {
        let v = kueue_workloads(&[status("Pending"), status("Succeeded")], false).expect("prints");
        assert_eq!(v["kind"], "List");
        assert_eq!(v["items"].as_array().map(Vec::len), Some(2));
        let mut bare = status("Pending");
        bare.workload_json.clear();
        let e = kueue_workloads(&[bare], true).unwrap_err();
        assert!(e.contains("without its spec"), "{e}");
    }
}
