//! Export is the inverse of import: what `get -o yaml|json` prints imports
//! back to the identical object.

use super::*;
use crate::kueue::import_manifests;

const SAMPLE: &str = include_str!("../../../../../deploy/dev/sample.yaml");

const WORKLOAD: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: train
  namespace: team-a
  labels: {app: llm}
  annotations:
    fleetq.dev/duration: 30m
    fleetq.dev/preemption-grace-period: 20s
spec:
  queueName: team-a
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  priority: 1000
  maximumExecutionTimeSeconds: 3600
  podSets:
  - name: workers
    count: 4
    minCount: 2
    topologyRequest:
      required: cloud.provider.com/topology-rack
      podIndexLabel: kubernetes.io/job-completion-index
    template:
      spec:
        containers:
        - name: main
          image: pytorch:2
          command: [python, train.py]
          env: [{name: EPOCHS, value: "3"}]
          resources: {requests: {nvidia.com/gpu: "2", cpu: "8"}}
  - name: launcher
    count: 1
    topologyRequest: {preferred: kubernetes.io/hostname}
    template:
      spec:
        containers:
        - name: main
          resources: {requests: {cpu: "1"}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec:
  levels:
  - nodeLabel: cloud.provider.com/topology-block
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
"#;

fn objects(yaml: &str) -> Vec<Object> {
    match import_manifests(yaml) {
        Ok(docs) => docs.into_iter().map(|d| d.object).collect(),
        Err(errors) => panic!("import failed: {errors:?}\n{yaml}"),
    }
}

/// Every object exported alone and as one List imports back equal.
fn round_trips(yaml: &str) {
    let originals = objects(yaml);
    assert!(!originals.is_empty());
    for original in &originals {
        let printed = serde_json::to_string_pretty(&object(original)).unwrap();
        assert_eq!(objects(&printed), vec![original.clone()], "{printed}");
    }
    let listed = list(originals.iter().map(object).collect());
    let printed = serde_norway::to_string(&listed).unwrap();
    assert_eq!(objects(&printed), originals, "{printed}");
}

#[test]
fn the_dev_sample_round_trips() {
    round_trips(SAMPLE);
}

#[test]
fn workloads_and_topologies_round_trip() {
    round_trips(WORKLOAD);
}

#[test]
fn a_workload_prints_as_kueue_writes_it() {
    let workload = objects(WORKLOAD).remove(0);
    let printed = object(&workload);
    assert_eq!(printed["apiVersion"], KUEUE_API_VERSION);
    assert_eq!(printed["kind"], "Workload");
    assert_eq!(printed["metadata"]["namespace"], "team-a");
    assert_eq!(printed["spec"]["queueName"], "team-a");
    assert_eq!(
        printed["spec"]["podSets"][0]["topologyRequest"]["required"],
        "cloud.provider.com/topology-rack"
    );
    assert_eq!(
        printed["metadata"]["annotations"]["fleetq.dev/duration"],
        "30m"
    );
}
