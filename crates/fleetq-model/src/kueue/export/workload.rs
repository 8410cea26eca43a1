//! A Workload as Kueue writes it: `spec` as the importer
//! (`super::super::workload`) reads it back to the identical fleetq spec,
//! and `status` (conditions, admission, cluster) from what the ledger
//! knows.
//!
//! The importer derives per-pod requests, the command, image and
//! environment from the pod templates; so each pod set gets a template
//! with one container holding exactly those (the first pod set's container
//! also the command, image and environment). A workload made from a Job
//! keeps the Job's own pod template instead, when it derives the same
//! values, because that is what Kueue shows for a Job's Workload. What
//! Kueue has no field for travels in fleetq's annotations
//! ([`super::super::annotations`]).
//!
//! Known gaps, both outside what `fleetq submit` or a manifest produce: a
//! request of zero (Kubernetes drops zero requests, and so does the
//! importer) and a maximum execution time that is not whole seconds
//! (printed rounded up) do not map back exactly.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde_json::{json, Map, Value};

use super::super::annotations;
use super::super::pod::PodTemplate;
use super::super::KUEUE_GROUP;
use super::{fields, manifest, value, Metadata, KUEUE_API_VERSION};
use crate::topology::{PodSetTopologyRequest, TopologyPlacement};
use crate::workload::{PodSet, RunSpec, WorkloadSpec};
use crate::{PriorityClassSource, Quantity, Timestamp, Workload};

/// Where a workload is in its life, as the ledger names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Admitted,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl FromStr for Phase {
    type Err = String;

    fn from_str(s: &str) -> Result<Phase, String> {
        Ok(match s {
            "Pending" => Phase::Pending,
            "Admitted" => Phase::Admitted,
            "Running" => Phase::Running,
            "Succeeded" => Phase::Succeeded,
            "Failed" => Phase::Failed,
            "Cancelled" => Phase::Cancelled,
            other => {
                return Err(format!(
                    "{other:?} is not a workload state (Pending, Admitted, Running, Succeeded, Failed, Cancelled)"
                ))
            }
        })
    }
}

impl Phase {
    fn is_terminal(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed | Phase::Cancelled)
    }
}

/// One pod set of a quota reservation: how many pods were admitted and
/// the flavor of each resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssignedPodSet {
    pub name: String,
    pub count: u32,
    /// Resource -> flavor.
    pub flavors: BTreeMap<String, String>,
}

/// What the ledger knows of a workload's state, for its `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadFacts {
    pub phase: Phase,
    /// The ClusterQueue it is charged to or queued in; empty if none.
    pub cluster_queue: String,
    /// Its priority (its class's value; 0 without one).
    pub priority: i32,
    pub created_at: Timestamp,
    /// When its current reservation was made.
    pub admitted_at: Option<Timestamp>,
    /// The cluster of its reservation; empty without one.
    pub cluster: String,
    /// Its reservation's pod sets; empty without one.
    pub pod_sets: Vec<AssignedPodSet>,
    /// The ledger's reason kind (`WaitingForQuota`, `Evicted`, ...).
    pub reason_kind: String,
    /// Why it waits, or how it ended.
    pub reason: String,
    /// Why its reservation is being stopped, while it is.
    pub stopping: Option<String>,
    /// Its latest event: when, and what it said.
    pub last_change: Timestamp,
    pub last_message: String,
}

impl WorkloadFacts {
    fn reserved(&self) -> bool {
        !self.pod_sets.is_empty() && !self.phase.is_terminal()
    }

    /// (resource, flavor, total) of every assigned resource: a pod's
    /// request times the admitted count, as Kueue's `resourceUsage`.
    pub(super) fn resource_usage(&self, workload: &Workload) -> Vec<(String, String, Quantity)> {
        let mut out = Vec::new();
        for assigned in &self.pod_sets {
            for (resource, amount) in pod_set_usage(workload, assigned) {
                if let Some(flavor) = assigned.flavors.get(&resource) {
                    out.push((resource, flavor.clone(), amount));
                }
            }
        }
        out
    }
}

/// A pod's requests in the pod set named as `assigned`, times its count.
fn pod_set_usage(workload: &Workload, assigned: &AssignedPodSet) -> BTreeMap<String, Quantity> {
    workload
        .spec
        .pod_sets
        .iter()
        .find(|ps| ps.name == assigned.name)
        .map(|ps| {
            ps.requests
                .iter()
                .map(|(r, q)| (r.clone(), q.saturating_mul(u64::from(assigned.count))))
                .collect()
        })
        .unwrap_or_default()
}

/// The Workload as Kueue writes it, with `status` when `facts` are given.
pub fn workload(w: &Workload, facts: Option<&WorkloadFacts>) -> Value {
    let metadata = Metadata {
        name: &w.name,
        namespace: Some(&w.namespace),
        labels: Some(&w.labels),
        annotations: annotations::write(&w.spec),
        creation_timestamp: facts.map(|f| f.created_at.rfc3339()),
    };
    let top = fields([
        ("spec", Some(spec(&w.spec, facts.map(|f| f.priority)))),
        ("status", facts.map(|f| status(w, f))),
    ]);
    manifest(KUEUE_API_VERSION, "Workload", metadata, top)
}

fn spec(spec: &WorkloadSpec, priority: Option<i32>) -> Value {
    let group = match spec.priority_class_source {
        PriorityClassSource::WorkloadPriorityClass => KUEUE_GROUP,
        PriorityClassSource::PriorityClass => "scheduling.k8s.io",
    };
    let class = spec.priority_class_name.as_ref().map(
        |name| json!({"group": group, "kind": spec.priority_class_source.kind(), "name": name}),
    );
    // Kueue counts whole seconds; the importer makes a Duration of them.
    let max_seconds = spec.maximum_execution_time.map(|d| {
        let seconds = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        Value::from(seconds.clamp(1, i32::MAX as u64))
    });
    let map = fields([
        ("active", Some(Value::Bool(!spec.inactive))),
        ("maximumExecutionTimeSeconds", max_seconds),
        ("podSets", Some(Value::Array(pod_sets(spec)))),
        // Kueue copies the class's value here, and requires it beside a
        // class; the importer reads the class itself. Without the state
        // (no value known), 0 stands in.
        (
            "priority",
            priority.or(class.is_some().then_some(0)).map(Value::from),
        ),
        ("priorityClassRef", class),
        ("queueName", Some(Value::from(spec.queue_name.as_str()))),
    ]);
    Value::Object(map)
}

/// Kueue's `topologyRequest`, the fields the importer
/// (`super::super::topology`) reads back to `request`.
fn topology_request(request: &PodSetTopologyRequest) -> Value {
    let mut map = Map::new();
    match &request.placement {
        Some(TopologyPlacement::Required(level)) => {
            map.insert("required".into(), level.as_str().into());
        }
        Some(TopologyPlacement::Preferred(level)) => {
            map.insert("preferred".into(), level.as_str().into());
        }
        Some(TopologyPlacement::Unconstrained) => {
            map.insert("unconstrained".into(), true.into());
        }
        None => {}
    }
    let optional = [
        (
            "podIndexLabel",
            request.pod_index_label.as_deref().map(Value::from),
        ),
        (
            "subGroupIndexLabel",
            request.sub_group_index_label.as_deref().map(Value::from),
        ),
        ("subGroupCount", request.sub_group_count.map(Value::from)),
        (
            "podSetSliceRequiredTopology",
            request
                .slice
                .as_ref()
                .map(|s| Value::from(s.level.as_str())),
        ),
        (
            "podSetSliceSize",
            request.slice.as_ref().map(|s| Value::from(s.size)),
        ),
    ];
    for (key, v) in optional {
        if let Some(v) = v {
            map.insert(key.into(), v);
        }
    }
    Value::Object(map)
}

fn pod_sets(spec: &WorkloadSpec) -> Vec<Value> {
    let job_template = job_pod_template(spec);
    spec.pod_sets
        .iter()
        .enumerate()
        .map(|(i, ps)| {
            let template = match (i, &job_template) {
                (0, Some(template)) => template.clone(),
                (0, None) => pod_template(ps, Some(&spec.run)),
                _ => pod_template(ps, None),
            };
            let mut map = Map::new();
            map.insert("name".into(), ps.name.as_str().into());
            map.insert("count".into(), ps.count.into());
            if let Some(min) = ps.min_count {
                map.insert("minCount".into(), min.into());
            }
            map.insert("template".into(), template);
            if let Some(request) = &ps.topology_request {
                map.insert("topologyRequest".into(), topology_request(request));
            }
            Value::Object(map)
        })
        .collect()
}

/// One container with the pod set's per-pod requests (and, for the first
/// pod set, what to run): exactly what the importer reads.
fn pod_template(ps: &PodSet, run: Option<&RunSpec>) -> Value {
    let mut container = Map::new();
    container.insert("name".into(), ps.name.as_str().into());
    if let Some(run) = run {
        if let Some(image) = &run.image {
            container.insert("image".into(), image.as_str().into());
        }
        if !run.command.is_empty() {
            container.insert("command".into(), value(&run.command));
        }
        if !run.env.is_empty() {
            let env: Vec<Value> = run
                .env
                .iter()
                .map(|(name, v)| json!({"name": name, "value": v}))
                .collect();
            container.insert("env".into(), Value::Array(env));
        }
    }
    if !ps.requests.is_empty() {
        container.insert("resources".into(), json!({"requests": value(&ps.requests)}));
    }
    json!({"spec": {"containers": [container]}})
}

/// The pod template of the Job a workload was made from, if it has one pod
/// set and the template yields exactly its requests, command, image and
/// environment (checked with the importer's own reading, so the printed
/// Workload imports to the same spec).
fn job_pod_template(spec: &WorkloadSpec) -> Option<Value> {
    let [pod_set] = spec.pod_sets.as_slice() else {
        return None;
    };
    let template = spec.run.job_template.as_ref()?.pointer("/spec/template")?;
    let parsed: PodTemplate = serde_json::from_value(template.clone()).ok()?;
    let pod = &parsed.spec;
    let same = !pod.containers.is_empty()
        && pod.effective_requests().as_ref() == Some(&pod_set.requests)
        && pod.first_command() == spec.run.command
        && pod.first_image() == spec.run.image
        && pod.first_env() == spec.run.env;
    same.then(|| template.clone())
}

fn status(w: &Workload, facts: &WorkloadFacts) -> Value {
    let mut map = Map::new();
    if facts.reserved() {
        let assignments: Vec<Value> = facts
            .pod_sets
            .iter()
            .map(|assigned| {
                json!({
                    "name": assigned.name,
                    "flavors": assigned.flavors,
                    "resourceUsage": value(&pod_set_usage(w, assigned)),
                    "count": assigned.count,
                })
            })
            .collect();
        map.insert(
            "admission".into(),
            json!({"clusterQueue": facts.cluster_queue, "podSetAssignments": assignments}),
        );
        // MultiKueue's field for the cluster a workload runs on.
        if !facts.cluster.is_empty() {
            map.insert("clusterName".into(), facts.cluster.as_str().into());
        }
    }
    map.insert("conditions".into(), Value::Array(conditions(facts)));
    Value::Object(map)
}

/// Kueue's conditions: QuotaReserved and Admitted (one and the same in
/// fleetq, which has no admission checks), Evicted while a reservation is
/// stopped or after an eviction requeued it, Finished once it ended.
fn conditions(facts: &WorkloadFacts) -> Vec<Value> {
    let mut out = Vec::new();
    let changed = facts.last_change;
    if facts.reserved() {
        let at = facts.admitted_at.unwrap_or(changed);
        out.push(condition(
            "QuotaReserved",
            true,
            "QuotaReserved",
            &format!("Quota reserved in ClusterQueue {}", facts.cluster_queue),
            at,
        ));
        out.push(condition(
            "Admitted",
            true,
            "Admitted",
            "The workload is admitted",
            at,
        ));
    } else {
        let (reason, message) = if facts.phase == Phase::Pending {
            let message = if facts.reason.is_empty() {
                "waiting to be considered for admission"
            } else {
                &facts.reason
            };
            ("Pending", message)
        } else {
            (
                "NoReservation",
                "The workload has ended; its quota is released",
            )
        };
        out.push(condition("QuotaReserved", false, reason, message, changed));
        out.push(condition(
            "Admitted",
            false,
            "NoReservation",
            "The workload has no reservation",
            changed,
        ));
    }
    let requeued = facts.phase == Phase::Pending
        && matches!(facts.reason_kind.as_str(), "Evicted" | "BackingOff");
    let eviction = match (&facts.stopping, requeued) {
        (Some(why), _) if facts.reserved() => Some(why.as_str()),
        (_, true) => Some(facts.reason.as_str()),
        _ => None,
    };
    if let Some(why) = eviction {
        out.push(condition(
            "Evicted",
            true,
            eviction_reason(why),
            why,
            changed,
        ));
    }
    let finished = match facts.phase {
        Phase::Succeeded => Some("Succeeded"),
        Phase::Failed => Some("Failed"),
        Phase::Cancelled => Some("Cancelled"),
        _ => None,
    };
    if let Some(reason) = finished {
        let message = if facts.last_message.is_empty() {
            &facts.reason
        } else {
            &facts.last_message
        };
        out.push(condition("Finished", true, reason, message, changed));
    }
    out
}

/// Kueue's eviction reason for the ledger's message: it writes preemptions
/// as "preempted (...)", wait-for-ready timeouts as "not reported running
/// within ...", and a cancelled running workload as "cancelled ..." (what
/// Kueue calls deactivation). Anything else (a lost cluster, a drain) has
/// no Kueue reason of its own.
fn eviction_reason(message: &str) -> &'static str {
    if message.starts_with("preempted") {
        "Preempted"
    } else if message.starts_with("not reported running") {
        "PodsReadyTimeout"
    } else if message.starts_with("cancelled") || message.starts_with("deactivated") {
        "Deactivated"
    } else {
        "Evicted"
    }
}

fn condition(kind: &str, status: bool, reason: &str, message: &str, at: Timestamp) -> Value {
    json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
        "lastTransitionTime": at.rfc3339(),
    })
}
