//! The Kubernetes executor: each admission becomes one `batch/v1` Job
//! (or a JobSet, a PyTorchJob, or plain pods: the submodules) in
//! the workload's namespace, made from its Job template (`run.jobTemplate`,
//! kept verbatim when a Kueue Job was imported) or, without one, from
//! `run.image` and `run.command`. The Job and its pods carry
//! `fleetq.dev/cluster`, `fleetq.dev/workload-id`, `fleetq.dev/epoch` and
//! `fleetq.dev/workload`; a watch on those labels maps Job status to
//! Running (all pods Ready, or done), Succeeded (condition Complete) and
//! Failed (condition Failed). A stop deletes the Job with foreground
//! propagation and reports Stopped only once the Job is gone, which
//! Kubernetes allows only after its pods are gone.
//!
//! A workload the front door submitted for a Job of this very cluster
//! (`crate::front_door`: its template carries `fleetq.dev/adopt-cluster`
//! naming this cluster) gets no second Job: the executor *adopts* the
//! user's suspended Job, as Kueue does: one merge patch (preconditioned on
//! its uid and resourceVersion) labels it and its pod template like the
//! executor's own Jobs, sets the assigned flavor's GPU product as a node
//! selector (a required node affinity when the flavor has several
//! products), lowers `parallelism` on partial admission and sets
//! `suspend: false` ([`adoption_patch`]). From then on the watch tracks it
//! like any of its Jobs (the `fleetq.dev/adopted` label says it is the
//! user's). A stop suspends it again instead of deleting it (and drops
//! its admission labels), and a user's delete is reported Stopped, not
//! Failed; either only once its pods are gone.
//!
//! The Job's name is `<workload>-<id>-<epoch>`: stable per admission, so a
//! create repeated after an agent restart finds the Job it made before
//! (409) instead of making a second one.
//!
//! What the executor writes is what a real API server accepts (the test
//! API server, `tests/common/fake_kube.rs`, validates the same way): a
//! Job name that is a DNS-1123 label short enough for the `job-name` label
//! the server adds to its pods, label values within 63 characters of the
//! label syntax, and container resources with Kubernetes' names only
//! ([`container_resources`]). Finished Jobs carry `ttlSecondsAfterFinished`
//! (the agent's `finished_job_ttl`), so Kubernetes removes them once the
//! agent has long read their outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use fleetq_model::assignment::{Assignment, PodSetAssignment};
use fleetq_model::resources::{is_mig, ResourceList, GPU, GPU_MEMORY};
use fleetq_model::workload::MULTIKUEUE_MANAGED_BY;
use fleetq_model::Workload;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::discovery::ApiResource;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::{Event, Report};
use crate::inventory::FlavorMapping;
use crate::kubernetes::{
    label_value, LABEL_CLUSTER, LABEL_EPOCH, LABEL_WORKLOAD, LABEL_WORKLOAD_ID, PRODUCT_LABEL,
};

mod jobset;
mod pods;
mod pytorchjob;
mod rayjob;
pub use jobset::{api_resource as jobset_resource, jobset_manifest, jobset_name};
pub use pods::{
    adopted_pods as pods_adopted_by, pod_manifests, KUEUE_ADMISSION_GATE, LABEL_POD_COUNT,
};
pub use pytorchjob::{api_resource as pytorchjob_resource, pytorchjob_manifest};
pub use rayjob::{api_resource as rayjob_resource, rayjob_manifest};

/// Kueue's queue label: a Job carrying it would be held by a Kueue running
/// in the target cluster, so fleetq's copy drops it.
const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Why adopting a user's Job did not work: a conflict is retried.
enum Adopt {
    Conflict(String),
    Failed(String),
}

/// How long the executor waits, after the pods of an adopted Job its
/// user deleted are gone, for the stop the front door's cancel brings.
const USER_DELETE_CANCEL_WAIT: Duration = Duration::from_secs(30);

/// On a Job the executor adopted (the user's, unsuspended in place).
pub const LABEL_ADOPTED: &str = "fleetq.dev/adopted";

/// Labels the Job controller sets on pods; copied from an exported Job
/// they would tie the new Job to the old one's uid.
const CONTROLLER_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// How long a finished Job stays before Kubernetes removes it, unless the
/// agent's `finished_job_ttl` says otherwise.
pub const DEFAULT_FINISHED_JOB_TTL: Duration = Duration::from_secs(3600);

/// A Job name: `<workload>-<id>-<epoch>`, a DNS label of at most 63
/// characters (a Job's name may be a 253-character subdomain, but the API
/// server copies it into the `job-name` label of its pods, whose values
/// stop at 63).
pub fn job_name(workload: &str, id: u64, epoch: u64) -> String {
    let suffix = format!("-{id}-{epoch}");
    let prefix: String = workload
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63usize.saturating_sub(suffix.len()))
        .collect();
    let prefix = prefix.trim_matches('-');
    if prefix.is_empty() {
        format!("fleetq{suffix}")
    } else {
        format!("{prefix}{suffix}")
    }
}

/// The Job for one admission: a pure function of the workload, its
/// assignment, the product -> flavor mapping (whose products for the
/// assigned flavor become a required node affinity, so the pods land on
/// the GPUs the ledger charged) and how long the finished Job is kept
/// (`None`: until someone deletes it).
pub fn job_manifest(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
    finished_job_ttl: Option<Duration>,
) -> Result<Job, String> {
    check_template(workload)?;
    let mut job = match &workload.spec.run.job_template {
        Some(template) => {
            if let Some(kind) = template.get("kind").and_then(Value::as_str) {
                if kind != "Job" {
                    return Err(format!(
                        "run.jobTemplate: kind {kind:?} is not a batch/v1 Job"
                    ));
                }
            }
            template.clone()
        }
        None => job_from_image(workload)?,
    };
    if !job.is_object() {
        return Err("run.jobTemplate: not an object".into());
    }
    let ours = admission_labels(id, epoch, cluster, workload);
    take_metadata(
        &mut job,
        job_name(&workload.name, id, epoch),
        workload,
        &ours,
    );
    job["apiVersion"] = json!("batch/v1");
    job["kind"] = json!("Job");
    let spec = object_at(&mut job, "spec");
    run_now(spec, finished_job_ttl);
    if spec.get("manualSelector") != Some(&json!(true)) {
        spec.remove("selector");
    }
    set_admitted_count(spec, workload, assignment);
    let template = object_at_map(spec, "template");
    label_pods(template, &ours);
    pin_pods(
        object_at_map(template, "spec"),
        &assignment.pod_sets,
        mapping,
    )?;
    serde_json::from_value(job)
        .map_err(|e| format!("run.jobTemplate: not a valid batch/v1 Job: {e}"))
}

/// The kind of the workload's `run.jobTemplate`, if it has one.
/// The API refuses a template that asks for more than its workload is
/// charged; an agent checks again, as it trusts nothing it is sent to
/// run.
fn check_template(workload: &Workload) -> Result<(), String> {
    match fleetq_model::kueue::job_template_problem(&workload.spec) {
        Some((path, message)) => Err(format!("{path}: {message}")),
        None => Ok(()),
    }
}

/// The workload's template of `kind` (a JobSet, PyTorchJob, RayJob, or
/// pods), checked ([`check_template`]).
fn checked_template(workload: &Workload, kind: &str) -> Result<Value, String> {
    check_template(workload)?;
    workload
        .spec
        .run
        .job_template
        .clone()
        .ok_or_else(|| format!("run.jobTemplate: a {kind} workload needs its {kind}"))
}

/// Passes a pod template at `path` through Kubernetes' own type, in
/// place: one the API could not take fails here, and quantities written
/// as numbers go out in their canonical form.
fn canonical_pod_template(template: &mut Value, path: &str) -> Result<(), String> {
    let typed: k8s_openapi::api::core::v1::PodTemplateSpec =
        serde_json::from_value(template.take())
            .map_err(|e| format!("{path}: not a valid pod template: {e}"))?;
    *template = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    Ok(())
}

/// Makes the pod template at `path` (within the workload's template)
/// one of this admission's: canonical ([`canonical_pod_template`]),
/// labelled with `ours`, and pinned to the GPUs and nodes of pod set
/// `pod_set` of the assignment.
fn admit_pod_template(
    template: &mut Value,
    pod_set: &str,
    path: &str,
    assignment: &Assignment,
    ours: &[(&str, String)],
    mapping: &FlavorMapping,
) -> Result<(), String> {
    let charged = assignment
        .pod_sets
        .iter()
        .find(|p| p.name == pod_set)
        .ok_or_else(|| format!("{path}: no pod set {pod_set:?} in the assignment"))?;
    canonical_pod_template(template, path)?;
    let template = template
        .as_object_mut()
        .ok_or_else(|| format!("{path}: not an object"))?;
    label_pods(template, ours);
    pin_pods(
        object_at_map(template, "spec"),
        std::slice::from_ref(charged),
        mapping,
    )
}

/// The reason of the first true condition of `status` whose type is one
/// of `types`, with that type: (type, "reason: message").
fn true_condition<'a>(status: &'a Value, types: &[&str]) -> Option<(&'a str, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "True")
        .find_map(|c| {
            let kind = c["type"].as_str().filter(|t| types.contains(t))?;
            let why = [c["reason"].as_str(), c["message"].as_str()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ");
            Some((kind, why))
        })
}

fn template_kind(workload: &Workload) -> Option<&str> {
    workload
        .spec
        .run
        .job_template
        .as_ref()?
        .get("kind")?
        .as_str()
}

/// The labels that tie an object and its pods to one admission.
fn admission_labels(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
) -> [(&'static str, String); 4] {
    [
        (LABEL_CLUSTER, label_value(cluster)),
        (LABEL_WORKLOAD_ID, id.to_string()),
        (LABEL_EPOCH, epoch.to_string()),
        (LABEL_WORKLOAD, label_value(&workload.name)),
    ]
}

/// Replaces the object's metadata with `name` in the workload's namespace:
/// only the user's labels (but Kueue's queue label, which a Kueue in the
/// target cluster would act on) and annotations survive, and `ours` are
/// added. The status goes too.
fn take_metadata(object: &mut Value, name: String, workload: &Workload, ours: &[(&str, String)]) {
    let old = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut labels = old
        .get("labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    labels.remove(KUEUE_QUEUE_LABEL);
    for (k, v) in ours {
        labels.insert(k.to_string(), json!(v));
    }
    let mut metadata = json!({
        "name": name,
        "namespace": workload.namespace,
        "labels": labels,
    });
    if let Some(a) = old.get("annotations") {
        metadata["annotations"] = a.clone();
    }
    object["metadata"] = metadata;
    if let Some(o) = object.as_object_mut() {
        o.remove("status");
    }
}

/// Unsuspends a Job or JobSet spec for its admission: MultiKueue's
/// `managedBy` dropped (the copy runs under the cluster's own
/// controller, as MultiKueue's worker copies do) and the agent's
/// `ttlSecondsAfterFinished` set.
fn run_now(spec: &mut Map<String, Value>, finished_job_ttl: Option<Duration>) {
    spec.insert("suspend".into(), json!(false));
    if spec.get("managedBy").and_then(Value::as_str) == Some(MULTIKUEUE_MANAGED_BY) {
        spec.remove("managedBy");
    }
    if let Some(ttl) = finished_job_ttl {
        // The agent must see the object finish before it goes, so a
        // shorter TTL in the template gives way to the agent's; a longer
        // one (the user keeps it around longer) stays.
        let ours = i64::try_from(ttl.as_secs())
            .unwrap_or(i64::MAX)
            .min(i64::from(i32::MAX));
        let theirs = spec.get("ttlSecondsAfterFinished").and_then(Value::as_i64);
        spec.insert(
            "ttlSecondsAfterFinished".into(),
            json!(theirs.map_or(ours, |t| t.max(ours))),
        );
    }
}

/// Labels a pod template with `ours`, without the Job controller's labels
/// (copied from an exported Job they would tie it to the old one's uid)
/// or Kueue's queue label.
fn label_pods(template: &mut Map<String, Value>, ours: &[(&str, String)]) {
    let pod_labels = object_at_map(object_at_map(template, "metadata"), "labels");
    for l in CONTROLLER_LABELS.iter().chain([&KUEUE_QUEUE_LABEL]) {
        pod_labels.remove(*l);
    }
    for (k, v) in ours {
        pod_labels.insert(k.to_string(), json!(v));
    }
}

/// Pins a pod spec to the GPUs (products) and nodes its pod sets were
/// charged for.
fn pin_pods(
    pod_spec: &mut Map<String, Value>,
    pod_sets: &[PodSetAssignment],
    mapping: &FlavorMapping,
) -> Result<(), String> {
    let products = products_for(pod_sets, mapping)?;
    if !products.is_empty() {
        require_products(pod_spec, &products);
    }
    let nodes = placed_nodes(pod_sets);
    if !nodes.is_empty() {
        require_nodes(pod_spec, &nodes);
    }
    Ok(())
}

/// The merge patch that unsuspends an adopted Job (`current`, as the API
/// server has it) for one admission: the executor's labels on the Job
/// and its pod template (pods fleetq started are not subtracted again from
/// the inventory), the assigned flavor's products as a node selector (a
/// required node affinity when there are several), `parallelism` lowered
/// to the admitted count, and `suspend: false`. The uid and
/// resourceVersion are preconditions: a Job deleted and made again under
/// the same name, or changed since it was read, is not touched. Only what
/// Kubernetes lets change in a suspended Job that never started is
/// touched (the pod template's scheduling directives and labels).
pub fn adoption_patch(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
    current: &Value,
) -> Result<Value, String> {
    let uid = current["metadata"]["uid"].as_str().unwrap_or_default();
    let mut labels = Map::new();
    for (k, v) in [
        (LABEL_CLUSTER, label_value(cluster)),
        (LABEL_WORKLOAD_ID, id.to_string()),
        (LABEL_EPOCH, epoch.to_string()),
        (LABEL_WORKLOAD, label_value(&workload.name)),
    ] {
        labels.insert(k.to_string(), json!(v));
    }
    let mut pod_spec = Map::new();
    let products = products_for(&assignment.pod_sets, mapping)?;
    let nodes = placed_nodes(&assignment.pod_sets);
    if let [one] = products.as_slice() {
        pod_spec.insert("nodeSelector".into(), json!({ PRODUCT_LABEL: one }));
    }
    if products.len() > 1 || !nodes.is_empty() {
        let mut spec = current["spec"]["template"]["spec"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if products.len() > 1 {
            require_products(&mut spec, &products);
        }
        if !nodes.is_empty() {
            require_nodes(&mut spec, &nodes);
        }
        if let Some(affinity) = spec.get("affinity") {
            pod_spec.insert("affinity".into(), affinity.clone());
        }
    }
    let mut job_labels = labels.clone();
    job_labels.insert(LABEL_ADOPTED.into(), json!("true"));
    let mut spec = json!({
        "suspend": false,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    });
    let admitted = assignment.pod_sets.first().map(|p| p.count);
    let requested = workload.spec.pod_sets.first().map(|p| p.count);
    if let (Some(admitted), Some(requested)) = (admitted, requested) {
        if admitted < requested {
            spec["parallelism"] = json!(admitted);
        }
    }
    Ok(json!({
        "metadata": {
            "uid": uid,
            "resourceVersion": current["metadata"]["resourceVersion"],
            "labels": job_labels,
        },
        "spec": spec,
    }))
}

/// What Kubernetes makes of a resource name in a container's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContainerResource {
    /// cpu, memory, ephemeral-storage and `*kubernetes.io/*` names: may be
    /// requested below their limit, or without one.
    Native,
    /// hugepages-*: native, but never overcommitted (limit = request).
    HugePages,
    /// A name with a domain outside kubernetes.io (`nvidia.com/gpu`,
    /// MIG slices, `rdma/ib`): whole numbers, limit = request.
    Extended,
    /// Anything else is not a container resource: fleetq's own
    /// `gpu.memory` and quota-only names.
    NotOne,
}

fn container_resource(name: &str) -> ContainerResource {
    if name.starts_with("hugepages-") {
        ContainerResource::HugePages
    } else if matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name.contains("kubernetes.io/")
    {
        ContainerResource::Native
    } else if name.contains('/') && !name.starts_with("requests.") {
        ContainerResource::Extended
    } else {
        ContainerResource::NotOne
    }
}

/// A pod set's per-pod requests as a container's `requests` and `limits`,
/// by the API server's rules: only names Kubernetes has, so fleetq's
/// `gpu.memory` (and any other name that is no container resource) is
/// dropped rather than mapped: it is charged in the ledger, and the node
/// affinity to the flavor's GPU products is what gives the pods GPUs with
/// that much memory. Extended resources (GPUs, MIG slices) and hugepages
/// get a limit equal to the request, as they must; extended resources must
/// be whole numbers.
pub fn container_resources(requests: &ResourceList) -> Result<(Value, Value), String> {
    let mut out_requests = Map::new();
    let mut out_limits = Map::new();
    for (name, q) in requests {
        let amount = json!(q.to_string());
        match container_resource(name) {
            ContainerResource::NotOne => {
                if name != GPU_MEMORY {
                    tracing::debug!(resource = %name, "not a container resource; charged by fleetq only");
                }
            }
            ContainerResource::Native => {
                out_requests.insert(name.clone(), amount);
            }
            ContainerResource::HugePages => {
                out_requests.insert(name.clone(), amount.clone());
                out_limits.insert(name.clone(), amount);
            }
            ContainerResource::Extended => {
                if q.milli() % 1000 != 0 {
                    return Err(format!(
                        "podSets[0].requests.{name}: {q} is not a whole number; Kubernetes \
                         counts extended resources in whole units"
                    ));
                }
                out_requests.insert(name.clone(), amount.clone());
                out_limits.insert(name.clone(), amount);
            }
        }
    }
    Ok((Value::Object(out_requests), Value::Object(out_limits)))
}

/// A one-container Job from `run.image`/`run.command`, requesting the
/// first pod set's resources per pod ([`container_resources`]).
fn job_from_image(workload: &Workload) -> Result<Value, String> {
    let run = &workload.spec.run;
    let Some(image) = &run.image else {
        return Err("run: the kubernetes executor needs run.jobTemplate or run.image".into());
    };
    let [pod_set] = workload.spec.pod_sets.as_slice() else {
        return Err(
            "podSets: a Job has one pod template; several pod sets need run.jobTemplate".into(),
        );
    };
    let (requests, limits) = container_resources(&pod_set.requests)?;
    let env: Vec<Value> = run
        .env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    let mut container = json!({
        "name": "main",
        "image": image,
        "env": env,
        "resources": {"requests": requests, "limits": limits},
    });
    if !run.command.is_empty() {
        container["command"] = json!(run.command);
    }
    Ok(json!({
        "spec": {
            "parallelism": pod_set.count,
            "completions": pod_set.count,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        }
    }))
}

/// Partial admission: run as many pods as were admitted (as Kueue does,
/// through `parallelism`, and `completions` where it equalled it).
fn set_admitted_count(spec: &mut Map<String, Value>, workload: &Workload, assignment: &Assignment) {
    let (Some(admitted), Some(requested)) = (
        assignment.pod_sets.first().map(|p| p.count),
        workload.spec.pod_sets.first().map(|p| p.count),
    ) else {
        return;
    };
    if admitted >= requested {
        return;
    }
    let parallelism = spec.get("parallelism").and_then(Value::as_u64);
    if spec.get("completions").and_then(Value::as_u64) == parallelism.or(Some(1)) {
        spec.insert("completions".into(), json!(admitted));
    }
    spec.insert("parallelism".into(), json!(admitted));
}

/// Products whose flavor is one the assignment charged. They are matched
/// against the `nvidia.com/gpu.product` node label, so only valid label
/// values can match (an NVML-style name with spaces cannot, and the API
/// server would refuse it in a node affinity); a flavor with products but
/// none of them a label value cannot be pinned to its GPUs, which is an
/// error rather than pods landing on any GPU.
fn products_for(
    pod_sets: &[PodSetAssignment],
    mapping: &FlavorMapping,
) -> Result<Vec<String>, String> {
    let flavors: Vec<&String> = pod_sets
        .iter()
        .flat_map(|p| p.flavors.iter())
        .filter(|(r, _)| *r == GPU || is_mig(r))
        .map(|(_, f)| f)
        .collect();
    let all: Vec<&String> = mapping
        .products
        .iter()
        .filter(|(_, f)| flavors.contains(f))
        .map(|(p, _)| p)
        .collect();
    let usable: Vec<String> = all
        .iter()
        .filter(|p| is_label_value(p))
        .map(|p| p.to_string())
        .collect();
    if usable.is_empty() && !all.is_empty() {
        return Err(format!(
            "flavors: no product of the assigned flavor is a valid {PRODUCT_LABEL} label value \
             ({all:?}): the pods cannot be pinned to its GPUs"
        ));
    }
    Ok(usable)
}

/// A valid label value: at most 63 characters of `[A-Za-z0-9._-]`,
/// starting and ending alphanumeric (or empty).
fn is_label_value(s: &str) -> bool {
    label_value(s) == s
}

/// Adds `nvidia.com/gpu.product In products` to every required node
/// selector term (terms are ORed, so each must carry it).
fn require_products(pod_spec: &mut Map<String, Value>, products: &[String]) {
    let expression = json!({"key": PRODUCT_LABEL, "operator": "In", "values": products});
    require_in_every_term(pod_spec, "matchExpressions", expression);
}

/// The nodes the assignment placed pods on (issue 26, item 5), in order,
/// each once.
fn placed_nodes(pod_sets: &[PodSetAssignment]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for placed in pod_sets.iter().flat_map(|p| &p.nodes) {
        if !out.contains(&placed.node) {
            out.push(placed.node.clone());
        }
    }
    out
}

/// Pins the pods to `nodes` by name. The pods of a Job are alike, so any
/// way the Kubernetes scheduler spreads them over these nodes fits the
/// room the ledger charged there; without it they could land on a node
/// the ledger never charged, and stay Pending while another node's room
/// sat idle. The API server takes one value per `metadata.name`
/// requirement, so each required term becomes one term per node (terms
/// are ORed).
fn require_nodes(pod_spec: &mut Map<String, Value>, nodes: &[String]) {
    let terms = required_terms(pod_spec);
    let mut pinned = Vec::with_capacity(terms.len() * nodes.len());
    for term in terms.iter() {
        for node in nodes {
            let mut one = term.clone();
            let field = json!({"key": "metadata.name", "operator": "In", "values": [node]});
            push_to(&mut one, "matchFields", field);
            pinned.push(one);
        }
    }
    *terms = pinned;
}

/// Adds `requirement` to list `section` of every required node selector
/// term.
fn require_in_every_term(pod_spec: &mut Map<String, Value>, section: &str, requirement: Value) {
    for term in required_terms(pod_spec) {
        push_to(term, section, requirement.clone());
    }
}

/// The pod's required node selector terms, made where missing or not of
/// the right shape: at least one term, each an object.
fn required_terms(pod_spec: &mut Map<String, Value>) -> &mut Vec<Value> {
    let required = object_at_map(
        object_at_map(object_at_map(pod_spec, "affinity"), "nodeAffinity"),
        "requiredDuringSchedulingIgnoredDuringExecution",
    );
    let terms = required
        .entry("nodeSelectorTerms")
        .or_insert_with(|| json!([]));
    if !terms.is_array() {
        *terms = json!([]);
    }
    let Value::Array(terms) = terms else {
        unreachable!("made an array above")
    };
    if terms.is_empty() {
        terms.push(json!({}));
    }
    for term in terms.iter_mut().filter(|t| !t.is_object()) {
        *term = json!({});
    }
    terms
}

/// Appends `requirement` to list `section` of one term (an object).
fn push_to(term: &mut Value, section: &str, requirement: Value) {
    let list = term
        .as_object_mut()
        .map(|t| t.entry(section).or_insert_with(|| json!([])));
    if let Some(Value::Array(list)) = list {
        list.push(requirement);
    }
}

/// `v[key]` as an object, made one if it is missing or not an object.
fn object_at<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => object_at_map(m, key),
        _ => unreachable!("made an object above"),
    }
}

fn object_at_map<'a>(m: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = m.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(o) => o,
        _ => unreachable!("made an object above"),
    }
}

/// What a Job's status says of its admission: `None` while it waits (pods
/// not all Ready yet) or is being deleted.
pub fn phase_of(job: &Job) -> Option<(Event, String)> {
    if job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = job.status.as_ref()?;
    for c in status.conditions.iter().flatten() {
        if c.status != "True" {
            continue;
        }
        let why = || {
            [c.reason.as_deref(), c.message.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(": ")
        };
        match c.type_.as_str() {
            "Complete" => return Some((Event::Succeeded, why())),
            "Failed" => return Some((Event::Failed, why())),
            _ => {}
        }
    }
    let spec = job.spec.as_ref();
    let parallelism = spec.and_then(|s| s.parallelism).unwrap_or(1);
    let needed = spec
        .and_then(|s| s.completions)
        .map_or(parallelism, |c| c.min(parallelism))
        .max(1);
    let ready = status.ready.unwrap_or(0) + status.succeeded.unwrap_or(0);
    (ready >= needed).then(|| (Event::Running, String::new()))
}

/// What the executor runs an admission as: a batch/v1 Job, a JobSet, or
/// plain pods (a Pod, or the pods of a group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RunKind {
    Job,
    JobSet,
    PyTorchJob,
    RayJob,
    Pods,
}

impl RunKind {
    fn name(self) -> &'static str {
        match self {
            RunKind::Job => "Job",
            RunKind::JobSet => "JobSet",
            RunKind::PyTorchJob => "PyTorchJob",
            RunKind::RayJob => "RayJob",
            RunKind::Pods => "Pod",
        }
    }
}

/// What the executor reads of the object it runs an admission as.
trait RunObject:
    kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + Sync + 'static
{
    fn kind(&self) -> RunKind;
    fn phase(&self) -> Option<(Event, String)>;
}

impl RunObject for Job {
    fn kind(&self) -> RunKind {
        RunKind::Job
    }
    fn phase(&self) -> Option<(Event, String)> {
        phase_of(self)
    }
}

/// One pod of a pod workload: created through [`create`]; the group's
/// state comes from all of its pods ([`watch_pod_groups`]), not one.
impl RunObject for Pod {
    fn kind(&self) -> RunKind {
        RunKind::Pods
    }
    fn phase(&self) -> Option<(Event, String)> {
        None
    }
}

/// A JobSet or PyTorchJob, through the dynamic API (the custom resources
/// watched), told apart by its kind.
impl RunObject for DynamicObject {
    fn kind(&self) -> RunKind {
        match self.types.as_ref().map(|t| t.kind.as_str()) {
            Some("PyTorchJob") => RunKind::PyTorchJob,
            Some("RayJob") => RunKind::RayJob,
            _ => RunKind::JobSet,
        }
    }
    fn phase(&self) -> Option<(Event, String)> {
        if self.metadata.deletion_timestamp.is_some() {
            return None;
        }
        match self.kind() {
            RunKind::PyTorchJob => pytorchjob::phase_of(&self.data),
            RunKind::RayJob => rayjob::phase_of(&self.data),
            _ => jobset::phase_of(&self.data),
        }
    }
}

/// The admission an object belongs to, from its labels.
fn admission_of(meta: &kube::api::ObjectMeta) -> Option<(u64, u64)> {
    let labels = meta.labels.as_ref()?;
    Some((
        labels.get(LABEL_WORKLOAD_ID)?.parse().ok()?,
        labels.get(LABEL_EPOCH)?.parse().ok()?,
    ))
}

/// One admission's Job as the executor knows it.
#[derive(Clone, Debug)]
struct Tracked {
    kind: RunKind,
    namespace: String,
    name: String,
    reported: Option<Event>,
    stopping: bool,
    /// The API server has shown this Job (a list or watch event), so a
    /// complete list without it means it is gone. A Job being created is
    /// not yet seen, and not missed.
    seen: bool,
    /// The user's Job, unsuspended in place (suspended again on a stop).
    adopted: bool,
    /// The ledger asked for a stop (an adopted Job deleted by its user is
    /// Stopped, so its cancelled workload ends Cancelled, only then).
    stop_asked: bool,
}

impl Tracked {
    /// An admission first met in a list or watch event (a restarted
    /// executor), from its object's metadata.
    fn listed(kind: RunKind, meta: &kube::api::ObjectMeta) -> Tracked {
        Tracked {
            kind,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            reported: None,
            stopping: meta.deletion_timestamp.is_some(),
            seen: true,
            adopted: meta
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(LABEL_ADOPTED)),
            stop_asked: false,
        }
    }

    fn finished(&self) -> bool {
        matches!(self.reported, Some(Event::Succeeded | Event::Failed))
    }
}

type Jobs = Arc<Mutex<HashMap<(u64, u64), Tracked>>>;

fn lock(jobs: &Jobs) -> MutexGuard<'_, HashMap<(u64, u64), Tracked>> {
    // A panic elsewhere while holding the lock leaves plain data behind;
    // keep going with it.
    jobs.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct KubernetesExecutor {
    client: kube::Client,
    /// The cluster's APIs for the custom resources it runs (JobSet,
    /// PyTorchJob, RayJob), where it has them.
    custom_apis: HashMap<RunKind, ApiResource>,
    cluster: String,
    mapping: FlavorMapping,
    finished_job_ttl: Option<Duration>,
    /// The same, for the pod watcher, which deletes a finished pod
    /// admission's pods itself (no controller owns them).
    finished_pods_ttl: Arc<Mutex<Option<Duration>>>,
    jobs: Jobs,
    events: mpsc::UnboundedSender<Report>,
}

impl KubernetesExecutor {
    /// An executor for `cluster`'s Jobs. Lists the Jobs it made before (so
    /// a restarted agent reports what still runs, and what finished while
    /// it was away), then watches them.
    pub async fn new(
        client: kube::Client,
        cluster: &str,
        mapping: FlavorMapping,
        events: mpsc::UnboundedSender<Report>,
    ) -> Result<KubernetesExecutor, String> {
        let selector = format!("{LABEL_CLUSTER}={}", label_value(cluster));
        let all: Api<Job> = Api::all(client.clone());
        let existing = all
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| format!("kubernetes: cannot list this cluster's Jobs: {e}"))?;
        let jobs: Jobs = Arc::default();
        for job in &existing.items {
            on_object(&jobs, &events, job);
        }
        tokio::spawn(watch_objects(
            all,
            RunKind::Job,
            client.clone(),
            selector.clone(),
            Arc::downgrade(&jobs),
            events.clone(),
        ));
        // The custom resources this cluster has an API for, each watched.
        let mut custom_apis = HashMap::new();
        for (kind, resource) in [
            (RunKind::JobSet, jobset::api_resource()),
            (RunKind::PyTorchJob, pytorchjob::api_resource()),
            (RunKind::RayJob, rayjob::api_resource()),
        ] {
            let found = watch_custom(&client, cluster, &selector, &jobs, &events, kind, resource);
            if let Some(resource) = found.await? {
                custom_apis.insert(kind, resource);
            }
        }
        // Pod admissions are tracked before the executor starts, as Jobs
        // are, so what a restarted agent says it runs includes them; their
        // state comes with the watch's first list.
        let pod_selector = format!("{selector},{LABEL_POD_COUNT}");
        let all_pods: Api<Pod> = Api::all(client.clone());
        let existing = all_pods
            .list(&ListParams::default().labels(&pod_selector))
            .await
            .map_err(|e| format!("kubernetes: cannot list this cluster's pods: {e}"))?;
        for pod in &existing.items {
            track_listed_pod(&jobs, pod);
        }
        for (key, namespace, found, expected) in pods::incomplete_groups(&existing.items) {
            fail_incomplete_group(
                &client, cluster, &jobs, &events, key, namespace, found, expected,
            );
        }
        let finished_pods_ttl = Arc::new(Mutex::new(Some(DEFAULT_FINISHED_JOB_TTL)));
        tokio::spawn(watch_pod_groups(
            PodWatch {
                client: client.clone(),
                cluster: cluster.to_string(),
                selector: pod_selector,
                finished_ttl: finished_pods_ttl.clone(),
            },
            Arc::downgrade(&jobs),
            events.clone(),
        ));
        // An admission is waiting while the executor tracks it and has
        // reported nothing for it yet.
        let tracked = Arc::downgrade(&jobs);
        let waiting = move |id: u64, epoch: u64| {
            tracked.upgrade().is_some_and(|jobs| {
                lock(&jobs)
                    .get(&(id, epoch))
                    .is_some_and(|t| t.reported.is_none() && !t.stopping)
            })
        };
        tokio::spawn(super::pod_waits::watch(
            client.clone(),
            selector,
            waiting,
            events.clone(),
        ));
        Ok(KubernetesExecutor {
            client,
            custom_apis,
            cluster: cluster.to_string(),
            mapping,
            finished_job_ttl: Some(DEFAULT_FINISHED_JOB_TTL),
            finished_pods_ttl,
            jobs,
            events,
        })
    }

    /// How long Kubernetes keeps a finished Job (`ttlSecondsAfterFinished`);
    /// `None` keeps it until someone deletes it. Default
    /// [`DEFAULT_FINISHED_JOB_TTL`].
    /// Reads the end of an admission's pod logs (`fleetq logs`), apart
    /// from the executor: the read awaits the API server.
    pub fn logs(
        &self,
        id: u64,
        epoch: u64,
        max: u64,
    ) -> impl std::future::Future<Output = Result<super::logs::Tail, String>> + Send + 'static {
        let (client, cluster) = (self.client.clone(), self.cluster.clone());
        async move { super::pod_logs::read_tail(client, &cluster, id, epoch, max).await }
    }

    /// Reads the status of an admission's Job (`WorkloadJobStatus`),
    /// apart from the executor: the read awaits the API server.
    pub fn job_status(
        &self,
        id: u64,
        epoch: u64,
    ) -> impl std::future::Future<Output = Result<(u64, Value), String>> + Send + 'static {
        let (client, cluster) = (self.client.clone(), self.cluster.clone());
        async move { super::job_status::read(client, &cluster, id, epoch).await }
    }

    pub fn with_finished_job_ttl(mut self, ttl: Option<Duration>) -> KubernetesExecutor {
        self.finished_job_ttl = ttl;
        *self
            .finished_pods_ttl
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = ttl;
        self
    }

    /// Creates the admission's Job (a repeat is ignored), or adopts the
    /// user's Job when the front door submitted it from this cluster.
    pub fn start(&mut self, id: u64, epoch: u64, workload: &Workload, assignment: &Assignment) {
        if pods::runs_as_pods(workload) {
            return match pods::adopted_pods(workload, &self.cluster) {
                Some(user_pods) => self.adopt_pods(id, epoch, workload, assignment, user_pods),
                None => self.start_pods(id, epoch, workload, assignment),
            };
        }
        if let Some((namespace, name, uid)) = crate::front_door::adopted_by(workload, &self.cluster)
        {
            return self.adopt(id, epoch, workload, assignment, namespace, name, uid);
        }
        let custom = [
            (jobset::runs_as_jobset(workload), RunKind::JobSet),
            (
                pytorchjob::runs_as_pytorchjob(workload),
                RunKind::PyTorchJob,
            ),
            (rayjob::runs_as_rayjob(workload), RunKind::RayJob),
        ];
        if let Some((_, kind)) = custom.into_iter().find(|(runs, _)| *runs) {
            return self.start_custom(kind, id, epoch, workload, assignment);
        }
        let job = match job_manifest(
            id,
            epoch,
            &self.cluster,
            workload,
            assignment,
            &self.mapping,
            self.finished_job_ttl,
        ) {
            Ok(j) => j,
            Err(e) => return report(&self.events, id, epoch, Event::Failed, e),
        };
        if !self.track(id, epoch, RunKind::Job, workload, &job.metadata) {
            return;
        }
        let api: Api<Job> = Api::namespaced(self.client.clone(), &workload.namespace);
        self.spawn_create(id, epoch, api, job);
    }

    /// Creates a tracked admission's object in the background; Failed
    /// (and untracked) if the API server refuses it.
    fn spawn_create<K: RunObject>(&self, id: u64, epoch: u64, api: Api<K>, object: K) {
        let (jobs, events) = (self.jobs.clone(), self.events.clone());
        tokio::spawn(async move {
            if let Err(e) = create(&api, &object).await {
                if lock(&jobs).remove(&(id, epoch)).is_some() {
                    report(&events, id, epoch, Event::Failed, e);
                }
            }
        });
    }

    /// Creates the admission's object of a custom resource (a JobSet,
    /// PyTorchJob or RayJob; a repeat is ignored); Failed where the
    /// cluster has no API for it (naming what to install) or the object is
    /// refused.
    fn start_custom(
        &mut self,
        kind: RunKind,
        id: u64,
        epoch: u64,
        workload: &Workload,
        assignment: &Assignment,
    ) {
        let (api_version, install) = match kind {
            RunKind::JobSet => (jobset::API_VERSION, "the JobSet controller"),
            RunKind::PyTorchJob => (pytorchjob::API_VERSION, "Kubeflow's Training Operator"),
            _ => (rayjob::API_VERSION, "KubeRay"),
        };
        let resource = self.custom_apis.get(&kind).cloned();
        let Some(resource) = resource else {
            let why = format!(
                "cluster {} has no {} API ({api_version}): install {install} there, then \
                 restart its agent",
                self.cluster,
                kind.name()
            );
            return report(&self.events, id, epoch, Event::Failed, why);
        };
        let (cluster, mapping, ttl) = (&self.cluster, &self.mapping, self.finished_job_ttl);
        let made = match kind {
            RunKind::JobSet => {
                jobset_manifest(id, epoch, cluster, workload, assignment, mapping, ttl)
            }
            RunKind::PyTorchJob => {
                pytorchjob_manifest(id, epoch, cluster, workload, assignment, mapping, ttl)
            }
            _ => rayjob_manifest(id, epoch, cluster, workload, assignment, mapping, ttl),
        };
        let object = match made {
            Ok(o) => o,
            Err(e) => return report(&self.events, id, epoch, Event::Failed, e),
        };
        if !self.track(id, epoch, kind, workload, &object.metadata) {
            return;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &workload.namespace, &resource);
        self.spawn_create(id, epoch, api, object);
    }

    /// Creates the admission's pods (a repeat is ignored); Failed if one
    /// is refused, after deleting those made.
    fn start_pods(&mut self, id: u64, epoch: u64, workload: &Workload, assignment: &Assignment) {
        let pods = match pod_manifests(
            id,
            epoch,
            &self.cluster,
            workload,
            assignment,
            &self.mapping,
        ) {
            Ok(p) => p,
            Err(e) => return report(&self.events, id, epoch, Event::Failed, e),
        };
        let Some(first) = pods.first() else {
            return report(
                &self.events,
                id,
                epoch,
                Event::Failed,
                "run.jobTemplate: no pods".into(),
            );
        };
        if !self.track(id, epoch, RunKind::Pods, workload, &first.metadata) {
            return;
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &workload.namespace);
        let (jobs, events) = (self.jobs.clone(), self.events.clone());
        let (client, namespace, cluster) = (
            self.client.clone(),
            workload.namespace.clone(),
            self.cluster.clone(),
        );
        tokio::spawn(async move {
            for pod in &pods {
                if let Err(e) = create(&api, pod).await {
                    // Half a group holds devices for nothing.
                    delete_pods_until_gone(
                        &client,
                        &namespace,
                        &cluster,
                        id,
                        epoch,
                        Duration::ZERO,
                    )
                    .await;
                    if lock(&jobs).remove(&(id, epoch)).is_some() {
                        report(&events, id, epoch, Event::Failed, e);
                    }
                    return;
                }
            }
        });
    }

    /// Admits the user's gated pods in place ([`pods::pod_adoption_patch`],
    /// one patch per pod); Failed if one is gone, replaced or refused,
    /// after deleting those already admitted (half a group holds devices
    /// for nothing).
    fn adopt_pods(
        &mut self,
        id: u64,
        epoch: u64,
        workload: &Workload,
        assignment: &Assignment,
        user_pods: Vec<pods::AdoptedPod>,
    ) {
        let Some(first) = user_pods.first() else {
            return;
        };
        {
            let mut jobs = lock(&self.jobs);
            if jobs.contains_key(&(id, epoch)) {
                return;
            }
            jobs.insert(
                (id, epoch),
                Tracked {
                    kind: RunKind::Pods,
                    namespace: workload.namespace.clone(),
                    name: first.name.clone(),
                    reported: None,
                    stopping: false,
                    seen: false,
                    adopted: true,
                    stop_asked: false,
                },
            );
        }
        let nodes = pods::nodes_for(&user_pods, assignment);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &workload.namespace);
        let (jobs, events, client) = (self.jobs.clone(), self.events.clone(), self.client.clone());
        let (cluster, workload, assignment, mapping) = (
            self.cluster.clone(),
            workload.clone(),
            assignment.clone(),
            self.mapping.clone(),
        );
        tokio::spawn(async move {
            let count = user_pods.len();
            for (pod, node) in user_pods.iter().zip(nodes) {
                let adopted = match assignment.pod_sets.iter().find(|p| p.name == pod.pod_set) {
                    Some(pod_set) => {
                        let adopt = || async {
                            let current = match api.get_opt(&pod.name).await {
                                Ok(Some(p)) => serde_json::to_value(p)
                                    .map_err(|e| Adopt::Failed(e.to_string()))?,
                                Ok(None) => {
                                    return Err(Adopt::Failed(format!("pod {} is gone", pod.name)))
                                }
                                Err(e) => {
                                    return Err(Adopt::Failed(format!(
                                        "cannot read pod {}: {e}",
                                        pod.name
                                    )))
                                }
                            };
                            if current["metadata"]["uid"].as_str() != Some(pod.uid.as_str()) {
                                return Err(Adopt::Failed(format!(
                                    "pod {} was replaced by another of the same name",
                                    pod.name
                                )));
                            }
                            let patch = pods::pod_adoption_patch(
                                id,
                                epoch,
                                &cluster,
                                &workload,
                                count,
                                pod_set,
                                node.as_deref(),
                                &mapping,
                                &current,
                            )
                            .map_err(Adopt::Failed)?;
                            let why = |e| format!("cannot admit pod {}: {e}", pod.name);
                            patch_adopting(&api, &pod.name, &patch, why).await
                        };
                        retry_conflicts(adopt).await
                    }
                    None => Err(format!(
                        "pod {}: no pod set {:?} in the assignment",
                        pod.name, pod.pod_set
                    )),
                };
                if let Err(why) = adopted {
                    let key = (id, epoch);
                    let namespace = &workload.namespace;
                    return fail_adoption(&client, &cluster, &jobs, &events, key, namespace, why)
                        .await;
                }
            }
            tracing::info!(namespace = %workload.namespace, pods = count, workload = id, epoch, "admitted the user's pods in place: ungated and pinned");
        });
    }

    /// Starts tracking an admission about to be created; false if it is
    /// tracked already (a repeated start).
    fn track(
        &self,
        id: u64,
        epoch: u64,
        kind: RunKind,
        workload: &Workload,
        meta: &kube::api::ObjectMeta,
    ) -> bool {
        let mut jobs = lock(&self.jobs);
        if jobs.contains_key(&(id, epoch)) {
            return false;
        }
        jobs.insert(
            (id, epoch),
            Tracked {
                kind,
                namespace: workload.namespace.clone(),
                name: meta.name.clone().unwrap_or_default(),
                reported: None,
                stopping: false,
                seen: false,
                adopted: false,
                stop_asked: false,
            },
        );
        true
    }

    /// Unsuspends the user's Job `namespace/name` in place for this
    /// admission ([`adoption_patch`]); Failed if it is gone or refused.
    #[allow(clippy::too_many_arguments)]
    fn adopt(
        &mut self,
        id: u64,
        epoch: u64,
        workload: &Workload,
        assignment: &Assignment,
        namespace: String,
        name: String,
        uid: String,
    ) {
        {
            let mut jobs = lock(&self.jobs);
            if jobs.contains_key(&(id, epoch)) {
                return;
            }
            jobs.insert(
                (id, epoch),
                Tracked {
                    kind: RunKind::Job,
                    namespace: namespace.clone(),
                    name: name.clone(),
                    reported: None,
                    stopping: false,
                    seen: false,
                    adopted: true,
                    stop_asked: false,
                },
            );
        }
        let api: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        let jobs = self.jobs.clone();
        let events = self.events.clone();
        let (cluster, workload, assignment, mapping) = (
            self.cluster.clone(),
            workload.clone(),
            assignment.clone(),
            self.mapping.clone(),
        );
        tokio::spawn(async move {
            // The patch carries the resourceVersion it was computed from;
            // a 409 Conflict (the front door annotating the Job meanwhile,
            // or its user) is read again and retried, as controllers do.
            let adopt = || async {
                let current = match api.get_opt(&name).await {
                    Ok(Some(job)) => {
                        serde_json::to_value(job).map_err(|e| Adopt::Failed(e.to_string()))?
                    }
                    Ok(None) => {
                        return Err(Adopt::Failed(format!("Job {namespace}/{name} is gone")))
                    }
                    Err(e) => {
                        return Err(Adopt::Failed(format!(
                            "cannot read Job {namespace}/{name}: {e}"
                        )))
                    }
                };
                if current["metadata"]["uid"].as_str() != Some(uid.as_str()) {
                    return Err(Adopt::Failed(format!(
                        "Job {namespace}/{name} was replaced by another of the same name"
                    )));
                }
                let patch = adoption_patch(
                    id,
                    epoch,
                    &cluster,
                    &workload,
                    &assignment,
                    &mapping,
                    &current,
                )
                .map_err(Adopt::Failed)?;
                let why = |e| format!("cannot unsuspend Job {namespace}/{name}: {e}");
                patch_adopting(&api, &name, &patch, why).await?;
                tracing::info!(job = %format!("{namespace}/{name}"), workload = id, epoch, "adopted the user's Job: unsuspended in place");
                Ok(())
            };
            if let Err(e) = retry_conflicts(adopt).await {
                if lock(&jobs).remove(&(id, epoch)).is_some() {
                    report(&events, id, epoch, Event::Failed, e);
                }
            }
        });
    }

    /// Deletes the admission's Job (foreground); Stopped once it is gone.
    /// An adopted Job is suspended instead, and its admission labels
    /// dropped; Stopped once its pods are gone.
    pub fn stop(&mut self, id: u64, epoch: u64, grace: Duration) {
        let target = {
            let mut jobs = lock(&self.jobs);
            jobs.get_mut(&(id, epoch)).map(|t| {
                let again = t.stopping;
                t.stopping = true;
                t.stop_asked = true;
                (
                    t.namespace.clone(),
                    t.name.clone(),
                    t.adopted,
                    again,
                    t.kind,
                )
            })
        };
        // An adopted Job is suspended; adopted pods cannot be, and are
        // deleted as fleetq's own are.
        if let Some((namespace, name, true, again, RunKind::Job)) = target {
            if !again {
                self.suspend_adopted(id, epoch, namespace, name);
            }
            return;
        }
        let Some((namespace, name, _, _, kind)) = target else {
            return report(
                &self.events,
                id,
                epoch,
                Event::Stopped,
                "not running here".into(),
            );
        };
        let (jobs, events) = (self.jobs.clone(), self.events.clone());
        let client = self.client.clone();
        let custom = self.custom_apis.get(&kind).cloned();
        let cluster = self.cluster.clone();
        tokio::spawn(async move {
            match (kind, custom) {
                (RunKind::JobSet | RunKind::PyTorchJob | RunKind::RayJob, Some(resource)) => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client, &namespace, &resource);
                    delete_until_gone(&api, &name, grace).await;
                }
                (RunKind::Pods, _) => {
                    delete_pods_until_gone(&client, &namespace, &cluster, id, epoch, grace).await;
                }
                _ => {
                    let api: Api<Job> = Api::namespaced(client, &namespace);
                    delete_until_gone(&api, &name, grace).await;
                }
            }
            if lock(&jobs).remove(&(id, epoch)).is_some() {
                report(&events, id, epoch, Event::Stopped, String::new());
            }
        });
    }

    fn suspend_adopted(&self, id: u64, epoch: u64, namespace: String, name: String) {
        let api: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        let client = self.client.clone();
        let (jobs, events, cluster) =
            (self.jobs.clone(), self.events.clone(), self.cluster.clone());
        tokio::spawn(async move {
            let patch = json!({
                "metadata": {"labels": {LABEL_WORKLOAD_ID: null, LABEL_EPOCH: null}},
                "spec": {"suspend": true},
            });
            loop {
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => break,
                    Err(kube::Error::Api(e)) if e.code == 404 => break,
                    Err(e) => {
                        tracing::warn!(job = %name, error = %e, "suspending an adopted Job failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
            wait_pods_gone(&client, &namespace, &cluster, id, epoch).await;
            if lock(&jobs).remove(&(id, epoch)).is_some() {
                report(&events, id, epoch, Event::Stopped, "suspended".into());
            }
        });
    }

    pub fn stop_all(&mut self) -> usize {
        let running = self.running();
        for (id, epoch) in &running {
            self.stop(*id, *epoch, Duration::ZERO);
        }
        running.len()
    }

    /// Admissions whose Job exists and has neither finished nor is being
    /// stopped.
    pub fn running(&mut self) -> Vec<(u64, u64)> {
        lock(&self.jobs)
            .iter()
            .filter(|(_, t)| !t.stopping && !t.finished())
            .map(|(k, _)| *k)
            .collect()
    }
}

fn report(
    events: &mpsc::UnboundedSender<Report>,
    id: u64,
    epoch: u64,
    event: Event,
    message: String,
) {
    let _ = events.send(Report {
        workload: id,
        epoch,
        event,
        message,
    });
}

/// Creates a Job or JobSet; an existing one of the same name is the one
/// an earlier try made. Transient failures are retried; a refusal (4xx)
/// is final and its message is the user's to read.
async fn create<K: RunObject>(api: &Api<K>, object: &K) -> Result<(), String> {
    let kind = object.kind().name();
    let mut wait = Duration::from_millis(500);
    for attempt in 1..=6 {
        match api.create(&PostParams::default(), object).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(kube::Error::Api(e)) if (400..500).contains(&e.code) && e.code != 429 => {
                return Err(format!("the API server refused the {kind}: {}", e.message))
            }
            Err(e) if attempt == 6 => return Err(format!("cannot create the {kind}: {e}")),
            Err(e) => tracing::warn!(error = %e, attempt, kind, "creating failed; retrying"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(8));
    }
    Err(format!("cannot create the {kind}"))
}

/// Deletes with foreground propagation and waits until the Job or JobSet
/// is gone (retrying the API as long as it takes: a stop must finish).
async fn delete_until_gone<K: RunObject>(api: &Api<K>, name: &str, grace: Duration) {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        grace_period_seconds: Some(grace.as_secs().min(u64::from(u32::MAX)) as u32),
        ..DeleteParams::default()
    };
    let mut asked = false;
    loop {
        if !asked {
            match api.delete(name, &params).await {
                Ok(_) => asked = true,
                Err(kube::Error::Api(e)) if e.code == 404 => return,
                Err(e) => tracing::warn!(object = name, error = %e, "deleting failed; retrying"),
            }
        } else {
            match api.get_opt(name).await {
                Ok(None) => return,
                Ok(Some(_)) => {}
                Err(e) => {
                    tracing::warn!(object = name, error = %e, "cannot read an object being deleted")
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deletes the pods of a pod admission and waits until they are gone
/// (retrying the API as long as it takes: a stop must finish).
async fn delete_pods_until_gone(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    id: u64,
    epoch: u64,
    grace: Duration,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "{LABEL_WORKLOAD_ID}={id},{LABEL_EPOCH}={epoch},{LABEL_CLUSTER}={},{LABEL_POD_COUNT}",
        label_value(cluster)
    );
    let params = DeleteParams {
        grace_period_seconds: Some(grace.as_secs().min(u64::from(u32::MAX)) as u32),
        ..DeleteParams::default()
    };
    loop {
        match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) if list.items.is_empty() => return,
            Ok(list) => {
                for pod in list.items {
                    if pod.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    let name = pod.metadata.name.unwrap_or_default();
                    match api.delete(&name, &params).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => {
                            tracing::warn!(pod = %name, error = %e, "deleting a pod failed; retrying")
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list a pod admission's pods; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until no pod of the admission is left in `namespace` (retrying
/// the API as long as it takes).
async fn wait_pods_gone(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    id: u64,
    epoch: u64,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut selector = format!("{LABEL_WORKLOAD_ID}={id},{LABEL_EPOCH}={epoch}");
    if !cluster.is_empty() {
        selector.push_str(&format!(",{LABEL_CLUSTER}={}", label_value(cluster)));
    }
    loop {
        match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) if list.items.is_empty() => return,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot list an adopted Job's pods; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Reports what a Job's or JobSet's status newly says.
fn on_object<K: RunObject>(jobs: &Jobs, events: &mpsc::UnboundedSender<Report>, object: &K) {
    let meta = object.meta();
    let Some(key) = admission_of(meta) else {
        return;
    };
    let mut jobs = lock(jobs);
    let tracked = jobs
        .entry(key)
        .or_insert_with(|| Tracked::listed(object.kind(), meta));
    tracked.seen = true;
    if tracked.stopping {
        return;
    }
    if let Some((event, message)) = object.phase() {
        if tracked.reported != Some(event) && !tracked.finished() {
            tracked.reported = Some(event);
            report(events, key.0, key.1, event, message);
        }
    }
}

/// A Job or JobSet that vanished: Stopped if we were stopping it,
/// otherwise someone deleted it behind fleetq's back and the admission
/// failed.
fn on_deleted<K: RunObject>(
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    object: &K,
    client: Option<&kube::Client>,
) {
    let Some(key) = admission_of(object.meta()) else {
        return;
    };
    let Some(tracked) = lock(jobs).remove(&key) else {
        return;
    };
    report_gone(jobs, events, key, tracked, client);
}

/// After a complete (re-)list: every Job seen before and missing from it
/// was deleted while the watch was away (after a 410 the watcher re-lists,
/// and deletions in the gap come as no event at all).
fn on_relisted(
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    kind: RunKind,
    listed: &std::collections::HashSet<(u64, u64)>,
    client: Option<&kube::Client>,
) {
    let gone: Vec<((u64, u64), Tracked)> = {
        let mut jobs = lock(jobs);
        let keys: Vec<(u64, u64)> = jobs
            .iter()
            .filter(|(k, t)| t.kind == kind && t.seen && !listed.contains(k))
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .filter_map(|k| jobs.remove(&k).map(|t| (k, t)))
            .collect()
    };
    for (key, tracked) in gone {
        report_gone(jobs, events, key, tracked, client);
    }
}

/// Merge-patches the user's object `name` to adopt it: a 409 Conflict (it
/// changed since it was read) is told apart, to be read again and
/// retried; any other refusal is final.
async fn patch_adopting<K>(
    api: &Api<K>,
    name: &str,
    patch: &Value,
    why: impl Fn(kube::Error) -> String,
) -> Result<(), Adopt>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_conflict() => {
            Err(Adopt::Conflict(why(kube::Error::Api(status))))
        }
        Err(e) => Err(Adopt::Failed(why(e))),
    }
}

/// Runs an adoption again after a conflict, a few times with backoff, as
/// controllers do; the reason it failed otherwise.
async fn retry_conflicts<F, Fut>(adopt: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), Adopt>>,
{
    adopt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(50))
                .with_max_times(8),
        )
        .when(|e| matches!(e, Adopt::Conflict(_)))
        .await
        .map_err(|e| match e {
            Adopt::Conflict(why) | Adopt::Failed(why) => why,
        })
}

/// Adopting the user's pods failed: those already admitted are deleted
/// (with the admission's labels; the rest stay gated), then Failed.
async fn fail_adoption(
    client: &kube::Client,
    cluster: &str,
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    key: (u64, u64),
    namespace: &str,
    why: String,
) {
    tracing::warn!(workload = key.0, epoch = key.1, error = %why, "cannot admit the user's pods in place");
    delete_pods_until_gone(client, namespace, cluster, key.0, key.1, Duration::ZERO).await;
    if lock(jobs).remove(&key).is_some() {
        report(events, key.0, key.1, Event::Failed, why);
    }
}

/// After the user deleted their adopted Job or pod, and its pods are
/// gone: Stopped once the front door's cancel brought a stop, so the
/// workload ends Cancelled (reported before the cancel is written,
/// Stopped would requeue it); without a cancel in time (no front door),
/// Failed.
async fn report_after_user_delete(
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    key: (u64, u64),
    why: String,
) {
    let deadline = tokio::time::Instant::now() + USER_DELETE_CANCEL_WAIT;
    let asked = loop {
        let asked = lock(jobs).get(&key).map(|t| t.stop_asked);
        match asked {
            None => return,
            Some(true) => break true,
            Some(false) if tokio::time::Instant::now() >= deadline => break false,
            Some(false) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    if lock(jobs).remove(&key).is_some() {
        let event = if asked { Event::Stopped } else { Event::Failed };
        report(events, key.0, key.1, event, why);
    }
}

fn report_gone(
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    key: (u64, u64),
    tracked: Tracked,
    client: Option<&kube::Client>,
) {
    if tracked.adopted && !tracked.finished() {
        // The user deleted their Job (the front door cancels its
        // workload): stopped, and its quota free, once its pods are gone
        // (a background delete removes them after the Job). Tracked as
        // stopping meanwhile, so a stop that comes now waits too.
        let Some(client) = client.cloned() else {
            return report(events, key.0, key.1, Event::Stopped, String::new());
        };
        let mut waiting = tracked;
        waiting.stopping = true;
        lock(jobs).insert(key, waiting.clone());
        let (jobs, events) = (jobs.clone(), events.clone());
        tokio::spawn(async move {
            wait_pods_gone(&client, &waiting.namespace, "", key.0, key.1).await;
            let why = format!("Job {} was deleted by its user", waiting.name);
            report_after_user_delete(&jobs, &events, key, why).await;
        });
        return;
    }
    if tracked.stopping {
        report(events, key.0, key.1, Event::Stopped, String::new());
    } else if !tracked.finished() {
        report(
            events,
            key.0,
            key.1,
            Event::Failed,
            format!(
                "{} {} was deleted outside fleetq (or by Kubernetes while the agent was \
                 away longer than finished_job_ttl)",
                tracked.kind.name(),
                tracked.name
            ),
        );
    }
}

/// Lists this cluster's objects of a custom resource (JobSets,
/// PyTorchJobs) and watches them, where the cluster has the API; `None`
/// where it has none (404) or the agent may not read it (403), so such
/// admissions fail there with the reason.
#[allow(clippy::too_many_arguments)]
async fn watch_custom(
    client: &kube::Client,
    cluster: &str,
    selector: &str,
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    kind: RunKind,
    resource: ApiResource,
) -> Result<Option<ApiResource>, String> {
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let existing = match all.list(&ListParams::default().labels(selector)).await {
        Ok(list) => list,
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {
            tracing::info!(
                cluster,
                code = e.code,
                kind = kind.name(),
                "no API for this kind: its workloads fail on this cluster"
            );
            return Ok(None);
        }
        Err(e) => {
            return Err(format!(
                "kubernetes: cannot list this cluster's {}s: {e}",
                kind.name()
            ))
        }
    };
    for object in &existing.items {
        on_object(jobs, events, object);
    }
    tokio::spawn(watch_objects(
        all,
        kind,
        client.clone(),
        selector.to_string(),
        Arc::downgrade(jobs),
        events.clone(),
    ));
    Ok(Some(resource))
}

async fn watch_objects<K: RunObject>(
    api: Api<K>,
    kind: RunKind,
    client: kube::Client,
    selector: String,
    jobs: std::sync::Weak<Mutex<HashMap<(u64, u64), Tracked>>>,
    events: mpsc::UnboundedSender<Report>,
) {
    let mut stream = watcher(api, watcher::Config::default().labels(&selector))
        .default_backoff()
        .boxed();
    // The admissions of the objects a (re-)list has shown so far.
    let mut listed = std::collections::HashSet::new();
    while let Some(event) = stream.next().await {
        // The executor is gone: so is the reason to watch.
        let Some(jobs) = jobs.upgrade() else { return };
        match event {
            Ok(watcher::Event::Apply(object)) => on_object(&jobs, &events, &object),
            Ok(watcher::Event::InitApply(object)) => {
                listed.extend(admission_of(object.meta()));
                on_object(&jobs, &events, &object);
            }
            Ok(watcher::Event::Delete(object)) => {
                on_deleted(&jobs, &events, &object, Some(&client))
            }
            Ok(watcher::Event::Init) => listed.clear(),
            Ok(watcher::Event::InitDone) => {
                on_relisted(&jobs, &events, kind, &listed, Some(&client))
            }
            Err(e) => {
                tracing::warn!(error = %e, kind = kind.name(), "watch interrupted; retrying")
            }
        }
    }
}

/// What the pod watcher needs besides the executor's table.
struct PodWatch {
    client: kube::Client,
    cluster: String,
    selector: String,
    finished_ttl: Arc<Mutex<Option<Duration>>>,
}

/// Watches the pods fleetq started for pod admissions and reports each
/// group's state as its pods change ([`pods::group_phase`]). No
/// controller owns these pods, so the watcher also does a controller's
/// part: when a pod fails (or is deleted behind fleetq's back) the
/// group's other pods are deleted before Failed is reported, so its
/// quota is freed only once nothing of it runs; a finished group's pods
/// are deleted after the finished-job TTL. The first list also rebuilds
/// what a restarted agent tracks.
async fn watch_pod_groups(
    watch: PodWatch,
    jobs: std::sync::Weak<Mutex<HashMap<(u64, u64), Tracked>>>,
    events: mpsc::UnboundedSender<Report>,
) {
    let api: Api<Pod> = Api::all(watch.client.clone());
    let mut stream = watcher(api, watcher::Config::default().labels(&watch.selector))
        .default_backoff()
        .boxed();
    let mut store = pods::PodGroupStore::new();
    let mut relisted = pods::PodGroupStore::new();
    // A pod of each admission the (re-)list showed, to read its labels.
    let mut listed_pods: HashMap<(u64, u64), Pod> = HashMap::new();
    while let Some(event) = stream.next().await {
        let Some(jobs) = jobs.upgrade() else { return };
        let (key, outcome, namespace) = match event {
            Ok(watcher::Event::Apply(pod)) => {
                let Some(key) = store_pod(&mut store, &pod) else {
                    continue;
                };
                let outcome = on_pod_group(&jobs, key, &store, &pod);
                (key, outcome, pod.metadata.namespace.unwrap_or_default())
            }
            Ok(watcher::Event::InitApply(pod)) => {
                if let Some(key) = store_pod(&mut relisted, &pod) {
                    listed_pods.insert(key, pod);
                }
                continue;
            }
            Ok(watcher::Event::Delete(pod)) => {
                let Some(key) = admission_of(&pod.metadata) else {
                    continue;
                };
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(group) = store.get_mut(&key) {
                    group.remove(&name);
                    if group.is_empty() {
                        store.remove(&key);
                    }
                }
                let outcome = on_pod_gone(&jobs, key, &name);
                (key, outcome, pod.metadata.namespace.unwrap_or_default())
            }
            Ok(watcher::Event::Init) => {
                relisted.clear();
                listed_pods.clear();
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                store = std::mem::take(&mut relisted);
                // What the list shows, as if each pod had just changed
                // (a restarted agent), then admissions whose pods all went
                // while the watch was away (no event came for them).
                for (key, pod) in listed_pods.drain() {
                    let outcome = on_pod_group(&jobs, key, &store, &pod);
                    let namespace = pod.metadata.namespace.unwrap_or_default();
                    settle_pods(&watch, &jobs, &events, key, outcome, namespace);
                }
                let missing: Vec<((u64, u64), String)> = lock(&jobs)
                    .iter()
                    .filter(|(k, t)| t.kind == RunKind::Pods && t.seen && !store.contains_key(k))
                    .map(|(k, t)| (*k, t.namespace.clone()))
                    .collect();
                for (key, namespace) in missing {
                    let outcome = on_pod_gone(&jobs, key, "(every pod)");
                    settle_pods(&watch, &jobs, &events, key, outcome, namespace);
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, kind = "Pod", "watch interrupted; retrying");
                continue;
            }
        };
        settle_pods(&watch, &jobs, &events, key, outcome, namespace);
    }
}

/// What a pod event means for its admission.
enum PodOutcome {
    Nothing,
    /// Report this now (Running).
    Report(Event, String),
    /// Succeeded: report now, delete the pods after the TTL.
    Finished,
    /// Failed: delete the group's pods, then report.
    Failed(String),
    /// The user deleted one of their adopted pods: delete the rest, then
    /// Stopped once the front door's cancel comes.
    UserDeleted(String),
}

fn settle_pods(
    watch: &PodWatch,
    jobs: &Arc<Mutex<HashMap<(u64, u64), Tracked>>>,
    events: &mpsc::UnboundedSender<Report>,
    key: (u64, u64),
    outcome: PodOutcome,
    namespace: String,
) {
    let (id, epoch) = key;
    let (client, cluster) = (watch.client.clone(), watch.cluster.clone());
    match outcome {
        PodOutcome::Nothing => {}
        PodOutcome::Report(event, message) => report(events, id, epoch, event, message),
        PodOutcome::Finished => {
            report(events, id, epoch, Event::Succeeded, String::new());
            let ttl = *watch.finished_ttl.lock().unwrap_or_else(|p| p.into_inner());
            let Some(ttl) = ttl else { return };
            let jobs = Arc::downgrade(jobs);
            tokio::spawn(async move {
                tokio::time::sleep(ttl).await;
                delete_pods_until_gone(&client, &namespace, &cluster, id, epoch, Duration::ZERO)
                    .await;
                if let Some(jobs) = jobs.upgrade() {
                    let mut jobs = lock(&jobs);
                    if jobs.get(&key).is_some_and(Tracked::finished) {
                        jobs.remove(&key);
                    }
                }
            });
        }
        PodOutcome::Failed(message) => {
            let (jobs, events) = (jobs.clone(), events.clone());
            tokio::spawn(async move {
                delete_pods_until_gone(&client, &namespace, &cluster, id, epoch, Duration::ZERO)
                    .await;
                if lock(&jobs).remove(&key).is_some() {
                    report(&events, id, epoch, Event::Failed, message);
                }
            });
        }
        PodOutcome::UserDeleted(why) => {
            let (jobs, events) = (jobs.clone(), events.clone());
            tokio::spawn(async move {
                delete_pods_until_gone(&client, &namespace, &cluster, id, epoch, Duration::ZERO)
                    .await;
                report_after_user_delete(&jobs, &events, key, why).await;
            });
        }
    }
}

/// A group a restarted executor finds with pods missing (it stopped
/// while creating them): its pods are deleted, then it is Failed, so its
/// quota comes back once nothing of it runs.
#[allow(clippy::too_many_arguments)]
fn fail_incomplete_group(
    client: &kube::Client,
    cluster: &str,
    jobs: &Jobs,
    events: &mpsc::UnboundedSender<Report>,
    key: (u64, u64),
    namespace: String,
    found: usize,
    expected: usize,
) {
    if let Some(tracked) = lock(jobs).get_mut(&key) {
        tracked.stopping = true;
    }
    let (client, cluster, jobs, events) = (
        client.clone(),
        cluster.to_string(),
        jobs.clone(),
        events.clone(),
    );
    tokio::spawn(async move {
        delete_pods_until_gone(&client, &namespace, &cluster, key.0, key.1, Duration::ZERO).await;
        if lock(&jobs).remove(&key).is_some() {
            let why = format!(
                "the agent stopped while creating this admission's pods ({found} of {expected} \
                 existed); they were deleted"
            );
            report(&events, key.0, key.1, Event::Failed, why);
        }
    });
}

/// Tracks the admission of a pod a restarted executor finds.
fn track_listed_pod(jobs: &Jobs, pod: &Pod) {
    let Some(key) = admission_of(&pod.metadata) else {
        return;
    };
    lock(jobs)
        .entry(key)
        .or_insert_with(|| Tracked::listed(RunKind::Pods, &pod.metadata));
}

/// Records a pod's state; its admission, if it carries one.
fn store_pod(store: &mut pods::PodGroupStore, pod: &Pod) -> Option<(u64, u64)> {
    let key = admission_of(&pod.metadata)?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    store
        .entry(key)
        .or_default()
        .insert(name, pods::PodState::from_pod(pod));
    Some(key)
}

/// What a group's pods newly say (tracking the admission if a restarted
/// agent does not yet).
fn on_pod_group(
    jobs: &Jobs,
    key: (u64, u64),
    store: &pods::PodGroupStore,
    pod: &Pod,
) -> PodOutcome {
    let Some(group) = store.get(&key) else {
        return PodOutcome::Nothing;
    };
    let mut jobs = lock(jobs);
    let tracked = jobs
        .entry(key)
        .or_insert_with(|| Tracked::listed(RunKind::Pods, &pod.metadata));
    tracked.seen = true;
    if tracked.stopping || tracked.finished() {
        return PodOutcome::Nothing;
    }
    let expected = pods::expected_pods(pod).unwrap_or(group.len());
    match pods::group_phase(group, expected) {
        Some((event, _)) if tracked.reported == Some(event) => PodOutcome::Nothing,
        Some((Event::Succeeded, _)) => {
            tracked.reported = Some(Event::Succeeded);
            PodOutcome::Finished
        }
        Some((Event::Failed, message)) => {
            // Stopping: later events of its pods change nothing.
            tracked.stopping = true;
            PodOutcome::Failed(message)
        }
        Some((event, message)) => {
            tracked.reported = Some(event);
            PodOutcome::Report(event, message)
        }
        None => PodOutcome::Nothing,
    }
}

/// A pod of a running group deleted by someone else: the group failed.
fn on_pod_gone(jobs: &Jobs, key: (u64, u64), name: &str) -> PodOutcome {
    let mut jobs = lock(jobs);
    let Some(tracked) = jobs.get_mut(&key) else {
        return PodOutcome::Nothing;
    };
    if tracked.kind != RunKind::Pods || tracked.stopping || tracked.finished() {
        return PodOutcome::Nothing;
    }
    tracked.stopping = true;
    if tracked.adopted {
        return PodOutcome::UserDeleted(format!("pod {name} was deleted by its user"));
    }
    PodOutcome::Failed(format!(
        "pod {name} was deleted by someone other than fleetq"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::assignment::PodSetAssignment;

    /// A Workload as `fleetq apply` makes it from a Kueue-managed Job.
    fn imported(count: u32) -> Workload {
        serde_json::from_value(json!({
            "namespace": "ml",
            "name": "Train LLaMA",
            "spec": {
                "queueName": "team-a",
                "podSets": [{"name": "main", "count": count, "requests": {"nvidia.com/gpu": "4"}}],
                "run": {"jobTemplate": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": "train-llama",
                        "namespace": "ml",
                        "uid": "old-uid",
                        "resourceVersion": "7",
                        "labels": {"kueue.x-k8s.io/queue-name": "team-a", "team": "nlp"},
                        "annotations": {"owner": "alice"}
                    },
                    "spec": {
                        "parallelism": count,
                        "completions": count,
                        "suspend": true,
                        "selector": {"matchLabels": {"controller-uid": "old-uid"}},
                        "template": {
                            "metadata": {"labels": {"controller-uid": "old-uid", "job-name": "train-llama"}},
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{
                                    "name": "trainer",
                                    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                                    "resources": {"limits": {"nvidia.com/gpu": "4"}}
                                }]
                            }
                        }
                    },
                    "status": {"active": 1}
                }}
            }
        }))
        .unwrap()
    }

    fn assignment(count: u32) -> Assignment {
        Assignment {
            cluster: "east".into(),
            pod_sets: vec![PodSetAssignment {
                name: "main".into(),
                count,
                flavors: [(GPU.to_string(), "h100-80gb".to_string())].into(),
                nodes: Vec::new(),
            }],
            usage: Default::default(),
        }
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

    fn as_json(job: &Job) -> Value {
        serde_json::to_value(job).unwrap()
    }

    #[test]
    fn a_kueue_job_becomes_a_labelled_runnable_job_in_its_namespace() {
        let job = job_manifest(
            42,
            3,
            "east",
            &imported(2),
            &assignment(2),
            &mapping(),
            None,
        )
        .unwrap();
        let v = as_json(&job);
        assert_eq!(v["metadata"]["name"], "train-llama-42-3");
        assert_eq!(v["metadata"]["namespace"], "ml");
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels[LABEL_WORKLOAD_ID], "42");
        assert_eq!(labels[LABEL_EPOCH], "3");
        assert_eq!(labels[LABEL_CLUSTER], "east");
        assert_eq!(labels[LABEL_WORKLOAD], "Train-LLaMA");
        assert_eq!(labels["team"], "nlp", "the user's labels stay");
        assert!(labels.get(KUEUE_QUEUE_LABEL).is_none(), "no Kueue gate");
        assert_eq!(v["metadata"]["annotations"]["owner"], "alice");
        assert!(v["metadata"].get("uid").is_none());
        assert!(v["metadata"].get("resourceVersion").is_none());
        assert!(v.get("status").is_none());
        let spec = &v["spec"];
        assert_eq!(spec["suspend"], false);
        assert!(spec.get("selector").is_none());
        assert_eq!(spec["parallelism"], 2);
        let pod = &spec["template"];
        assert_eq!(pod["metadata"]["labels"][LABEL_EPOCH], "3");
        assert!(pod["metadata"]["labels"].get("controller-uid").is_none());
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "4"
        );
        let term = &pod["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
        assert_eq!(
            term["matchExpressions"][0],
            json!({"key": PRODUCT_LABEL, "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]})
        );
    }

    #[test]
    fn partial_admission_runs_the_admitted_pods() {
        let job =
            job_manifest(1, 1, "east", &imported(8), &assignment(5), &mapping(), None).unwrap();
        let spec = job.spec.unwrap();
        assert_eq!(spec.parallelism, Some(5));
        assert_eq!(spec.completions, Some(5));
    }

    #[test]
    fn without_a_template_the_job_comes_from_image_and_command() {
        let mut w = imported(2);
        w.spec.run.job_template = None;
        let err = job_manifest(1, 1, "east", &w, &assignment(2), &mapping(), None).unwrap_err();
        assert!(err.contains("run.jobTemplate or run.image"), "{err}");
        w.spec.run.image = Some("busybox".into());
        w.spec.run.command = vec!["sleep".into(), "5".into()];
        let v = as_json(&job_manifest(1, 1, "east", &w, &assignment(2), &mapping(), None).unwrap());
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "busybox");
        assert_eq!(c["command"], json!(["sleep", "5"]));
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "4");
        assert_eq!(c["resources"]["requests"]["nvidia.com/gpu"], "4");
        assert_eq!(v["spec"]["completions"], 2);
    }

    #[test]
    fn a_template_that_is_not_a_job_is_refused_by_field() {
        let mut w = imported(1);
        w.spec.run.job_template = Some(json!({"kind": "Deployment"}));
        let err = job_manifest(1, 1, "east", &w, &assignment(1), &mapping(), None).unwrap_err();
        assert!(err.starts_with("run.jobTemplate"), "{err}");
        w.spec.run.job_template = Some(json!({"kind": "Job", "spec": {"parallelism": "many"}}));
        let err = job_manifest(1, 1, "east", &w, &assignment(1), &mapping(), None).unwrap_err();
        assert!(err.starts_with("run.jobTemplate"), "{err}");
    }

    /// A template that asks Kubernetes for more devices than the pod set
    /// is charged is not created, whatever the API let through.
    #[test]
    fn a_template_asking_for_more_than_its_charge_is_not_created() {
        let mut w = imported(2);
        let template = w.spec.run.job_template.as_mut().unwrap();
        template["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            ["nvidia.com/gpu"] = json!("8");
        let err = job_manifest(1, 1, "east", &w, &assignment(2), &mapping(), None).unwrap_err();
        assert!(
            err.starts_with("run.jobTemplate.spec.template.spec: each pod requests"),
            "{err}"
        );
    }

    fn job_with(spec: Value, status: Value) -> Job {
        serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": spec, "status": status}))
            .unwrap()
    }

    #[test]
    fn job_status_maps_to_events() {
        let spec = json!({"parallelism": 2, "completions": 2, "template": {}});
        assert_eq!(
            phase_of(&job_with(spec.clone(), json!({"active": 2}))),
            None
        );
        assert_eq!(
            phase_of(&job_with(spec.clone(), json!({"active": 2, "ready": 1}))),
            None,
            "a gang runs when all its pods are Ready"
        );
        assert_eq!(
            phase_of(&job_with(spec.clone(), json!({"active": 2, "ready": 2}))).map(|p| p.0),
            Some(Event::Running)
        );
        let done = json!({"conditions": [{"type": "Complete", "status": "True"}]});
        assert_eq!(
            phase_of(&job_with(spec.clone(), done)).map(|p| p.0),
            Some(Event::Succeeded)
        );
        let failed = json!({"conditions": [
            {"type": "Complete", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
        ]});
        assert_eq!(
            phase_of(&job_with(spec, failed)),
            Some((
                Event::Failed,
                "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            ))
        );
    }

    /// A workload as `fleetq apply` makes it from a Kueue Workload: no Job
    /// template, an image and per-pod requests.
    fn from_image(requests: Value) -> Workload {
        let mut w = imported(1);
        w.spec.run.job_template = None;
        w.spec.run.image = Some("busybox".into());
        w.spec.pod_sets[0].requests = serde_json::from_value(requests).unwrap();
        w
    }

    #[test]
    fn containers_get_only_kubernetes_resource_names_with_device_limits() {
        let w = from_image(json!({
            "nvidia.com/gpu": "2",
            "gpu.memory": "160",
            "nvidia.com/mig-1g.10gb": "1",
            "cpu": "4",
            "memory": "16Gi",
            "hugepages-2Mi": "1Gi",
            "rdma/ib": "1",
        }));
        let v = as_json(&job_manifest(1, 1, "east", &w, &assignment(1), &mapping(), None).unwrap());
        let resources = &v["spec"]["template"]["spec"]["containers"][0]["resources"];
        let q = |s: &str| json!(s.parse::<fleetq_model::Quantity>().unwrap().to_string());
        assert_eq!(
            resources["requests"],
            json!({
                "nvidia.com/gpu": q("2"), "nvidia.com/mig-1g.10gb": q("1"), "cpu": q("4"),
                "memory": q("16Gi"), "hugepages-2Mi": q("1Gi"), "rdma/ib": q("1"),
            }),
            "gpu.memory is fleetq's own: dropped"
        );
        assert_eq!(
            resources["limits"],
            json!({
                "nvidia.com/gpu": q("2"), "nvidia.com/mig-1g.10gb": q("1"),
                "hugepages-2Mi": q("1Gi"), "rdma/ib": q("1"),
            }),
            "extended resources and hugepages: limit = request; cpu/memory: no limit"
        );

        let half = from_image(json!({"nvidia.com/gpu": "0.5"}));
        let err = job_manifest(1, 1, "east", &half, &assignment(1), &mapping(), None).unwrap_err();
        assert!(
            err.contains("nvidia.com/gpu") && err.contains("whole"),
            "{err}"
        );
    }

    #[test]
    fn finished_jobs_carry_the_agents_ttl_unless_theirs_is_longer() {
        let ttl = |w: &Workload, agent: Option<Duration>| {
            let job = job_manifest(1, 1, "east", w, &assignment(2), &mapping(), agent).unwrap();
            job.spec.unwrap().ttl_seconds_after_finished
        };
        let hour = Some(DEFAULT_FINISHED_JOB_TTL);
        let mut w = imported(2);
        assert_eq!(ttl(&w, hour), Some(3600));
        assert_eq!(ttl(&w, None), None);
        let template = w.spec.run.job_template.as_mut().unwrap();
        template["spec"]["ttlSecondsAfterFinished"] = json!(10);
        assert_eq!(
            ttl(&w, hour),
            Some(3600),
            "not gone before the agent saw it end"
        );
        let template = w.spec.run.job_template.as_mut().unwrap();
        template["spec"]["ttlSecondsAfterFinished"] = json!(86_400);
        assert_eq!(ttl(&w, hour), Some(86_400));
        assert_eq!(ttl(&w, None), Some(86_400));
    }

    #[test]
    fn products_that_are_no_label_value_are_left_out_of_the_affinity() {
        let mut m = mapping();
        m.products
            .insert("NVIDIA H100 80GB HBM3".into(), "h100-80gb".into());
        let job = job_manifest(1, 1, "east", &imported(1), &assignment(1), &m, None).unwrap();
        let v = as_json(&job);
        let values = &v["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0]["values"];
        assert_eq!(values, &json!(["NVIDIA-H100-80GB-HBM3"]));
        m.products.retain(|p, _| p.contains(' '));
        let err = job_manifest(1, 1, "east", &imported(1), &assignment(1), &m, None).unwrap_err();
        assert!(err.contains("cannot be pinned"), "{err}");
    }

    /// Names and labels within what the API server validates, for any
    /// workload and cluster name.
    #[test]
    fn names_and_labels_are_valid_whatever_the_workload_is_called() {
        let label_ok = |s: &str| {
            s.len() <= 63
                && (s.is_empty()
                    || (s.starts_with(|c: char| c.is_ascii_alphanumeric())
                        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
                        && s.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))))
        };
        for name in [
            "Train LLaMA",
            "ünïcödé/wörk:load",
            "_x_",
            &"Very-Long.Name_".repeat(20),
            "...",
        ] {
            let mut w = imported(1);
            w.name = name.to_string();
            let v = as_json(
                &job_manifest(
                    u64::MAX,
                    u64::MAX,
                    &format!("cluster {name}"),
                    &w,
                    &assignment(1),
                    &mapping(),
                    None,
                )
                .unwrap(),
            );
            let job_name = v["metadata"]["name"].as_str().unwrap();
            assert!(
                job_name.len() <= 63
                    && job_name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !job_name.starts_with('-')
                    && !job_name.ends_with('-'),
                "{job_name:?}"
            );
            for labels in [
                &v["metadata"]["labels"],
                &v["spec"]["template"]["metadata"]["labels"],
            ] {
                for (k, value) in labels.as_object().unwrap() {
                    assert!(label_ok(value.as_str().unwrap()), "{name:?}: {k}={value}");
                }
            }
        }
    }

    /// After a re-list (kube's watcher re-lists after 410 Gone), a Job seen
    /// before and missing now was deleted in the gap, which no watch event
    /// told; one being created was never seen and is not missed.
    #[test]
    fn a_relist_reports_the_jobs_deleted_while_the_watch_was_away() {
        let jobs: Jobs = Arc::default();
        let tracked = |seen: bool, stopping: bool, reported: Option<Event>| Tracked {
            kind: RunKind::Job,
            namespace: "ml".into(),
            name: "j".into(),
            reported,
            stopping,
            seen,
            adopted: false,
            stop_asked: false,
        };
        {
            let mut j = lock(&jobs);
            j.insert((1, 1), tracked(true, false, Some(Event::Running)));
            j.insert((2, 1), tracked(false, false, None));
            j.insert((3, 1), tracked(true, true, Some(Event::Running)));
            j.insert((4, 1), tracked(true, false, Some(Event::Succeeded)));
            j.insert((5, 1), tracked(true, false, Some(Event::Running)));
            // A JobSet: the Jobs' re-list does not list it.
            let mut jobset = tracked(true, false, Some(Event::Running));
            jobset.kind = RunKind::JobSet;
            j.insert((6, 1), jobset);
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        on_relisted(&jobs, &tx, RunKind::Job, &[(5, 1)].into(), None);
        let mut reports = Vec::new();
        while let Ok(r) = rx.try_recv() {
            reports.push((r.workload, r.event));
        }
        reports.sort_by_key(|r| r.0);
        assert_eq!(reports, [(1, Event::Failed), (3, Event::Stopped)]);
        let mut left: Vec<u64> = lock(&jobs).keys().map(|k| k.0).collect();
        left.sort();
        assert_eq!(left, [2, 5, 6]);
    }

    /// An adopted Job is unsuspended by one patch, preconditioned on its
    /// uid and resourceVersion: labels on the Job and its pods, the
    /// flavor's product as a node selector, parallelism lowered on
    /// partial admission (completions untouched: immutable).
    #[test]
    fn an_adopted_job_is_unsuspended_in_place_with_the_flavors_node_selector() {
        let current = json!({"metadata": {"uid": "u-1", "resourceVersion": "7"}, "spec": {}});
        let patch = adoption_patch(
            3,
            9,
            "east",
            &imported(4),
            &assignment(2),
            &mapping(),
            &current,
        )
        .expect("patch");
        assert_eq!(patch["metadata"]["uid"], "u-1");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["metadata"]["labels"][LABEL_ADOPTED], "true");
        assert_eq!(patch["metadata"]["labels"][LABEL_EPOCH], "9");
        assert_eq!(patch["spec"]["suspend"], false);
        assert_eq!(patch["spec"]["parallelism"], 2);
        assert!(patch["spec"].get("completions").is_none());
        let pod = &patch["spec"]["template"];
        assert_eq!(pod["metadata"]["labels"][LABEL_WORKLOAD_ID], "3");
        assert_eq!(
            pod["spec"]["nodeSelector"][PRODUCT_LABEL],
            "NVIDIA-H100-80GB-HBM3"
        );
        let full = adoption_patch(
            3,
            9,
            "east",
            &imported(4),
            &assignment(4),
            &mapping(),
            &current,
        )
        .expect("patch");
        assert!(full["spec"].get("parallelism").is_none());
    }

    #[test]
    fn job_names_are_dns_labels_unique_per_admission() {
        assert_eq!(job_name("Train LLaMA", 42, 3), "train-llama-42-3");
        assert_eq!(job_name("---", 1, 1), "fleetq-1-1");
        let long = job_name(&"a".repeat(100), 123_456, 789);
        assert!(long.len() <= 63 && long.ends_with("-123456-789"), "{long}");
    }

    /// Issue 26, item 5: pods go to the nodes the ledger charged, by node
    /// name, in every required term beside the GPU products; an adopted
    /// Job gets the same.
    #[test]
    fn placed_pods_are_pinned_to_their_nodes_by_name() {
        let mut placed = assignment(3);
        placed.pod_sets[0].nodes = vec![
            fleetq_model::assignment::NodePods {
                node: "gpu-7".into(),
                count: 2,
            },
            fleetq_model::assignment::NodePods {
                node: "gpu-9".into(),
                count: 1,
            },
        ];
        let v =
            as_json(&job_manifest(42, 3, "east", &imported(3), &placed, &mapping(), None).unwrap());
        let terms = &v["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        let terms = terms.as_array().expect("terms");
        // One term per node (one value per metadata.name requirement, as
        // the API server requires), each with the GPU products.
        let names: Vec<&Value> = terms
            .iter()
            .map(|t| &t["matchFields"][0]["values"][0])
            .collect();
        assert_eq!(names, [&json!("gpu-7"), &json!("gpu-9")], "{terms:?}");
        for term in terms {
            assert_eq!(term["matchFields"][0]["key"], "metadata.name");
            assert_eq!(term["matchFields"].as_array().map(Vec::len), Some(1));
            assert_eq!(term["matchExpressions"][0]["key"], PRODUCT_LABEL);
        }
        // Without nodes, nothing pins them.
        let v = as_json(
            &job_manifest(
                42,
                3,
                "east",
                &imported(3),
                &assignment(3),
                &mapping(),
                None,
            )
            .unwrap(),
        );
        let terms = &v["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        assert!(
            terms[0]["matchFields"].as_array().is_none_or(Vec::is_empty),
            "{terms}"
        );
        let current = json!({"metadata": {"uid": "u-1", "resourceVersion": "7"}, "spec": {}});
        let patch = adoption_patch(3, 9, "east", &imported(3), &placed, &mapping(), &current)
            .expect("patch");
        let pod = &patch["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"][PRODUCT_LABEL], "NVIDIA-H100-80GB-HBM3");
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][1]["matchFields"][0]["values"],
            json!(["gpu-9"])
        );
    }
}
