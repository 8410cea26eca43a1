//! Kueue configurations, as the YAML a user would apply.

/// The smallest fleet: one ResourceFlavor, one ClusterQueue holding `gpus`
/// `nvidia.com/gpu` of it for every namespace, and the LocalQueue
/// `local_queue` in namespace `default` pointing at it.
pub fn one_queue(flavor: &str, cluster_queue: &str, local_queue: &str, gpus: u64) -> String {
    format!(
        r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: {flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: {cluster_queue}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: {flavor}
      resources:
      - name: nvidia.com/gpu
        nominalQuota: {gpus}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: {local_queue}
spec:
  clusterQueue: {cluster_queue}
"#
    )
}

/// Two ClusterQueues sharing the cohort `pool` (so borrowing and
/// reclaiming happen), team-a with 8 H100s and team-b with 4, both
/// preempting lower priority within themselves and reclaiming any
/// borrower; a LocalQueue of each team's name in `default`; priority
/// classes `low` (10) and `high` (1000).
pub const POOL: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  cohortName: pool
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
spec:
  namespaceSelector: {}
  cohortName: pool
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team-b}
spec: {clusterQueue: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"#;

/// The fleet the scale benches fill: `queues` ClusterQueues `cq-<q>` in
/// cohorts of `cohort_size` (`cohort-<q / cohort_size>`), each holding
/// `gpus` `nvidia.com/gpu` and 16 CPUs per GPU of `flavor`, and a
/// LocalQueue `team-<q>/default` for each.
pub fn scale(flavor: &str, queues: usize, cohort_size: usize, gpus: u64) -> String {
    let mut yaml = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: {flavor}\n"
    );
    for q in 0..queues {
        yaml.push_str(&format!(
            r#"---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq-{q}
spec:
  namespaceSelector: {{}}
  cohortName: cohort-{cohort}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "cpu"]
    flavors:
    - name: {flavor}
      resources:
      - name: nvidia.com/gpu
        nominalQuota: {gpus}
      - name: cpu
        nominalQuota: {cpus}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: team-{q}
  name: default
spec:
  clusterQueue: cq-{q}
"#,
            cohort = q / cohort_size.max(1),
            cpus = gpus * 16,
        ));
    }
    yaml
}
