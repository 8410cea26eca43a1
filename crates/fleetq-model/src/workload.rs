//! Workload: what a tenant asks to run: pod sets with per-pod requests, a
//! queue, a priority class and the thing to run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::resources::{scale, ResourceList, GPU};
use crate::time::duration_opt;
use crate::topology::PodSetTopologyRequest;
use crate::{PriorityClassSource, Quantity};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub spec: WorkloadSpec,
}

/// In a workload's `run.jobTemplate` annotations, put there by an agent's
/// front door (`fleetq agent --watch-queued-jobs`): the cluster whose
/// agent unsuspends the user's own Job in place, and that Job's uid. The
/// server lets an agent submit, read and cancel only workloads naming its
/// own cluster here.
pub const ADOPT_CLUSTER_ANNOTATION: &str = "fleetq.dev/adopt-cluster";

/// The label naming who submitted a workload: the server sets it from
/// the authenticated caller (a tenant's name, or `agent.CLUSTER` for an
/// agent's front door) and drops any value the client wrote, so it can
/// be trusted (`get workloads --user`, `cancel --user`).
pub const SUBMITTED_BY_LABEL: &str = "fleetq.dev/submitted-by";
pub const ADOPT_UID_ANNOTATION: &str = "fleetq.dev/adopt-uid";

/// A Job's `spec.managedBy` that hands it to MultiKueue: Kubernetes' Job
/// controller leaves such a Job alone, so it never runs where it was
/// created; a copy without it runs on the cluster it was admitted to and
/// the copy's status is written onto it.
pub const MULTIKUEUE_MANAGED_BY: &str = "kueue.x-k8s.io/multikueue";

impl Workload {
    /// The cluster whose front door made this workload from a user's Job
    /// ([`ADOPT_CLUSTER_ANNOTATION`]), if one did.
    pub fn adopting_cluster(&self) -> Option<&str> {
        self.adoption_annotation(ADOPT_CLUSTER_ANNOTATION)
    }

    /// Whether its Job template hands the Job to MultiKueue
    /// ([`MULTIKUEUE_MANAGED_BY`]): it runs as a copy, even on the
    /// cluster it came from.
    pub fn managed_by_multikueue(&self) -> bool {
        self.spec
            .run
            .job_template
            .as_ref()
            .is_some_and(|t| t["spec"]["managedBy"] == MULTIKUEUE_MANAGED_BY)
    }

    /// On a Job or Pod template, its annotation; on a pod group's `v1
    /// List`, the value every pod carries (none where they differ).
    fn adoption_annotation(&self, key: &str) -> Option<&str> {
        let template = self.spec.run.job_template.as_ref()?;
        if template["kind"] != "List" {
            return template["metadata"]["annotations"][key].as_str();
        }
        let mut values = template["items"]
            .as_array()?
            .iter()
            .map(|pod| pod["metadata"]["annotations"][key].as_str());
        let first = values.next()??;
        values.all(|v| v == Some(first)).then_some(first)
    }

    /// `namespace/name`, unique among live workloads.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The first field where `other` (a submission under the same
    /// namespace/name) differs from this workload in its labels or spec,
    /// with both values; `None` when it asks for the same thing. Fields
    /// are compared as they serialize, in key order, so the answer is the
    /// same on every replica. Activation (`spec.active`) is not compared:
    /// a workload is stopped and resumed, not submitted again.
    pub fn difference(&self, other: &Workload) -> Option<Difference> {
        let same_activation = |spec: &WorkloadSpec| WorkloadSpec {
            inactive: self.spec.inactive,
            ..spec.clone()
        };
        let other_spec = same_activation(&other.spec);
        if self.labels == other.labels && self.spec == other_spec {
            return None;
        }
        let shape = |labels: &BTreeMap<String, String>, spec: &WorkloadSpec| {
            serde_json::json!({
                "metadata": { "labels": labels },
                "spec": serde_json::to_value(spec).unwrap_or(serde_json::Value::Null),
            })
        };
        let found = first_difference(
            String::new(),
            Some(&shape(&self.labels, &self.spec)),
            Some(&shape(&other.labels, &other_spec)),
        );
        // Equal JSON but unequal values (cannot happen with these types):
        // still a difference, named by its section.
        Some(found.unwrap_or_else(|| Difference {
            path: "spec".into(),
            existing: "(the existing spec)".into(),
            submitted: "(another spec)".into(),
        }))
    }
}

/// Where two workloads differ ([`Workload::difference`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Field path in Kueue's spelling: `spec.podSets[0].count`,
    /// `metadata.labels[team]`.
    pub path: String,
    /// The existing workload's value (compact JSON), `(none)` if absent.
    pub existing: String,
    /// The submitted value, the same way.
    pub submitted: String,
}

/// The first path (in key order) where `a` and `b` differ.
fn first_difference(
    path: String,
    a: Option<&serde_json::Value>,
    b: Option<&serde_json::Value>,
) -> Option<Difference> {
    use serde_json::Value;
    match (a, b) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                let plain = !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                let next = match (path.is_empty(), plain) {
                    (true, _) => k.clone(),
                    (false, true) => format!("{path}.{k}"),
                    (false, false) => format!("{path}[{k}]"),
                };
                first_difference(next, a.get(k), b.get(k))
            })
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => (0..a.len().max(b.len()))
            .find_map(|i| first_difference(format!("{path}[{i}]"), a.get(i), b.get(i))),
        (a, b) if a == b => None,
        (a, b) => {
            let show = |v: Option<&Value>| match v {
                None | Some(Value::Null) => "(none)".to_string(),
                Some(Value::String(s)) => format!("{s:?}"),
                Some(v) => v.to_string(),
            };
            let cut = |s: String| {
                if s.chars().count() > 60 {
                    format!("{}…", s.chars().take(59).collect::<String>())
                } else {
                    s
                }
            };
            Some(Difference {
                path,
                existing: cut(show(a)),
                submitted: cut(show(b)),
            })
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadSpec {
    /// LocalQueue name in the workload's namespace.
    pub queue_name: String,
    /// Must name an existing class of `priority_class_source`'s kind;
    /// absent means the `globalDefault` PriorityClass's value, or 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Which kind of class the name is (absent from the stored JSON, and
    /// the hash, for a WorkloadPriorityClass, as before PriorityClasses).
    #[serde(
        default,
        skip_serializing_if = "PriorityClassSource::is_workload_priority_class"
    )]
    pub priority_class_source: PriorityClassSource,
    pub pod_sets: Vec<PodSet>,
    #[serde(default)]
    pub run: RunSpec,
    /// Hard limit on runtime; also what a GPU-second budget is charged for.
    #[serde(
        default,
        with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub maximum_execution_time: Option<Duration>,
    /// Not chosen as a preemption victim before it has run this long
    /// (unless nothing else frees enough).
    #[serde(
        default,
        with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_runtime_before_preemption: Option<Duration>,
    /// Time between the stop signal and the kill, to checkpoint.
    #[serde(
        default,
        with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub preemption_grace_period: Option<Duration>,
    /// Kueue's `spec.active: false`: kept, but neither queued nor run
    /// until it is resumed (`fleetq stop/resume workload`). Absent from the
    /// stored JSON, and the hash, while active, as before it existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inactive: bool,
}

impl WorkloadSpec {
    /// Total GPUs (`nvidia.com/gpu`) across all pods at full count.
    pub fn total_gpus(&self) -> u64 {
        self.pod_sets
            .iter()
            .map(|ps| {
                let per_pod = ps.requests.get(GPU).copied().unwrap_or_default();
                per_pod.saturating_mul(u64::from(ps.count)).units_ceil()
            })
            .sum()
    }
}

/// A group of identical pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSet {
    pub name: String,
    pub count: u32,
    /// Partial admission: fewer pods, down to this many, are acceptable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// Requests of one pod.
    #[serde(default)]
    pub requests: ResourceList,
    /// Kueue's topology-aware placement request. Stored and validated, not
    /// yet honoured by placement (crate::topology). Absent from the JSON
    /// when unset, so workloads and log entries written before it existed
    /// read back unchanged and hash the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

impl PodSet {
    /// Requests of `count` pods; `None` on overflow.
    pub fn total(&self, count: u32) -> Option<ResourceList> {
        scale(&self.requests, u64::from(count))
    }

    pub fn request(&self, resource: &str) -> Quantity {
        self.requests.get(resource).copied().unwrap_or_default()
    }
}

/// The thing to run. The agent's executor decides which field it uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// A `batch/v1` Job template for the Kubernetes executor, kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_template: Option<serde_json::Value>,
    /// How long the simulated executor "runs" it.
    #[serde(
        default,
        with = "duration_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration: Option<Duration>,
}
