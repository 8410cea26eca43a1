//! The front door for kubectl users (`watch_queued_jobs`): `batch/v1`
//! Jobs created in this agent's cluster with Kueue's
//! `kueue.x-k8s.io/queue-name` label and `spec.suspend: true` (as Kueue's
//! webhook leaves them) become Workloads in the ledger, the way Kueue's
//! job integration makes one:
//!
//! - with `suspend_queued_jobs`, a queue-labelled Job created unsuspended
//!   (no webhook suspended it) is suspended first, then seen and queued
//!   as the others ([`FrontDoor::suspending_unsuspended`]);
//! - each such Job is converted by the importer `fleetq apply -f` uses
//!   ([`fleetq_model::kueue::import_manifests`]), named
//!   `job-<name>-<uid prefix>` ([`workload_name`]) and submitted through
//!   the client API with the Job's uid as the request id, so a restart or
//!   a re-list submits it once; the Job is then annotated
//!   `fleetq.dev/workload: <namespace>/<workload>`;
//! - the submitted template carries `fleetq.dev/adopt-cluster` and
//!   `fleetq.dev/adopt-uid` annotations ([`ADOPT_CLUSTER`], [`ADOPT_UID`]):
//!   the Kubernetes executor of that cluster unsuspends the Job in place
//!   instead of creating a second one (`executor::kubernetes`);
//! - while the workload is pending, the Job's `fleetq.dev/pending-reason`
//!   and `fleetq.dev/queue-position` annotations say why and where it
//!   waits (polled, rewritten only when they change); admitted to another
//!   cluster, `fleetq.dev/admitted-cluster` names it;
//! - admitted to another cluster, the Job stays suspended here and a copy
//!   runs there (that cluster's executor creates it from the template);
//!   the copy's status is read through the leader (`WorkloadJobStatus`)
//!   and copied back (`FrontDoor::mirror`), as MultiKueue does: onto
//!   the Job's `status` when it carries MultiKueue's `spec.managedBy:
//!   kueue.x-k8s.io/multikueue` (Kubernetes' Job controller leaves such a
//!   Job alone; it runs as a copy even when admitted here), else into the
//!   `fleetq.dev/remote-status` annotation, since that status is the Job
//!   controller's;
//! - each change is also told in an Event on the Job ([`event_for`]:
//!   `CreatedWorkload`, `Pending` with the reason, `Started`, `Finished`,
//!   or a `Refused` warning), through kube's event recorder;
//! - a Job deleted by its user (a watch event, or missing from a re-list)
//!   has its workload cancelled; the executor reports the admission
//!   stopped, which frees the quota, only once the Job's pods are gone.
//!
//! JobSets (`jobset.x-k8s.io/v1alpha2`, where the cluster has the API)
//! are queued the same way, named `jobset-<name>-<uid prefix>`, with one
//! difference: a JobSet always runs as a copy, on whichever cluster it is
//! admitted to (this one included), and the copy's status comes back
//! onto it. The JobSet API lets a suspended JobSet's pod templates change
//! only in labels, annotations, node selector, tolerations and scheduling
//! gates, so its pods could not be pinned in place to the nodes the
//! ledger charged; the copy is made pinned (docs/deploy.md, "JobSets").
//! Kubeflow PyTorchJobs (`kubeflow.org/v1`, suspended by
//! `spec.runPolicy.suspend`) are queued and run the same way, named
//! `pytorchjob-<name>-<uid prefix>`, and KubeRay's RayJobs (`ray.io/v1`)
//! as `rayjob-<name>-<uid prefix>`.
//!
//! Pods (Kueue's plain pods) are queued when created with Kueue's
//! `kueue.x-k8s.io/admission` scheduling gate (`FrontDoor::on_pod`):
//! one pod as `pod-<name>-<uid prefix>`, the pods of a
//! `kueue.x-k8s.io/pod-group-name` group as one workload once all of its
//! `pod-group-total-count` pods exist ([`workload_from_pod_group`]). Each
//! pod carries the adoption marks, so the executor of this cluster admits
//! them in place (gate removed, pinned; `executor::kubernetes::pods`)
//! and another cluster runs copies. Every pod of a group is annotated; a
//! pod deleted cancels its group's workload. A queue-labelled pod without
//! the gate cannot be held and gets a `NotQueued` Warning Event.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use fleetq_model::config::Object;
use fleetq_model::kueue::{
    import_manifests, POD_GROUP_NAME_LABEL, POD_GROUP_TOTAL_COUNT_ANNOTATION, QUEUE_NAME_LABEL,
};
use fleetq_model::Workload;
use fleetq_proto::transport::{endpoint, Timeouts};
use fleetq_proto::v1 as pb;
use fleetq_proto::v1::fleet_q_client::FleetQClient;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use serde_json::{json, Value};
use tokio::sync::watch;
use tonic::transport::Channel;

/// On a Job: the Workload the front door submitted for it.
pub const ANNOTATION_WORKLOAD: &str = "fleetq.dev/workload";
/// On a Job whose workload is pending: its reason kind and message.
pub const ANNOTATION_PENDING_REASON: &str = "fleetq.dev/pending-reason";
/// On a Job whose workload is pending: its 1-based place in its
/// ClusterQueue's admission order (absent when not computed).
pub const ANNOTATION_QUEUE_POSITION: &str = "fleetq.dev/queue-position";
/// On a Job whose workload was admitted to another cluster.
pub const ANNOTATION_ADMITTED_CLUSTER: &str = "fleetq.dev/admitted-cluster";
/// On a Job whose workload runs as a copy, and whose `status` belongs to
/// Kubernetes' Job controller (no MultiKueue `spec.managedBy`): the
/// copy's `status`, as JSON.
pub const ANNOTATION_REMOTE_STATUS: &str = "fleetq.dev/remote-status";
/// In a submitted workload's `run.jobTemplate` only: the cluster whose
/// agent unsuspends the Job in place, and the Job's uid.
pub use fleetq_model::workload::{
    ADOPT_CLUSTER_ANNOTATION as ADOPT_CLUSTER, ADOPT_UID_ANNOTATION as ADOPT_UID,
};

/// How often pending workloads' reasons are read and work is retried.
const TICK: Duration = Duration::from_secs(1);

/// How often a copy's status is read from the cluster running it.
const MIRROR_EVERY: Duration = Duration::from_secs(2);

/// The `reportingController` of the front door's Events.
pub const EVENT_CONTROLLER: &str = "fleetq.dev/front-door";

/// How many rounds after its workload ends a copy's last status is tried
/// before the Job is left as it is (about a minute).
const FINAL_MIRROR_TRIES: u32 = 60;

/// The fields of a batch/v1 JobStatus: a merge patch sets each, so one
/// the copy no longer has (an `active` back to 0 is left out) is removed.
const JOB_STATUS_FIELDS: [&str; 11] = [
    "active",
    "ready",
    "terminating",
    "succeeded",
    "failed",
    "conditions",
    "startTime",
    "completionTime",
    "completedIndexes",
    "failedIndexes",
    "uncountedTerminatedPods",
];

/// What the front door queues: a batch/v1 Job, a JobSet, or a Pod (alone
/// or in a group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueuedKind {
    Job,
    JobSet,
    PyTorchJob,
    RayJob,
    Pod,
}

impl QueuedKind {
    fn resource(self) -> ApiResource {
        match self {
            QueuedKind::Job => ApiResource::erase::<Job>(&()),
            QueuedKind::JobSet => crate::executor::kubernetes::jobset_resource(),
            QueuedKind::PyTorchJob => crate::executor::kubernetes::pytorchjob_resource(),
            QueuedKind::RayJob => crate::executor::kubernetes::rayjob_resource(),
            QueuedKind::Pod => ApiResource::erase::<Pod>(&()),
        }
    }

    fn name(self) -> &'static str {
        match self {
            QueuedKind::Job => "Job",
            QueuedKind::JobSet => "JobSet",
            QueuedKind::PyTorchJob => "PyTorchJob",
            QueuedKind::RayJob => "RayJob",
            QueuedKind::Pod => "Pod",
        }
    }

    /// Kueue's prefix of the Workload's name.
    fn prefix(self) -> &'static str {
        match self {
            QueuedKind::Job => "job",
            QueuedKind::JobSet => "jobset",
            QueuedKind::PyTorchJob => "pytorchjob",
            QueuedKind::RayJob => "rayjob",
            QueuedKind::Pod => "pod",
        }
    }

    /// Whether the user's object is admitted in place (a Job, a Pod), or
    /// always runs as a copy (a JobSet, PyTorchJob or RayJob, whose pod
    /// templates cannot be pinned once created).
    fn adopted_in_place(self) -> bool {
        matches!(self, QueuedKind::Job | QueuedKind::Pod)
    }

    /// Whether the object is suspended (a PyTorchJob says it in its run
    /// policy).
    fn is_suspended(self, data: &Value) -> bool {
        match self {
            QueuedKind::PyTorchJob => data["spec"]["runPolicy"]["suspend"] == json!(true),
            _ => data["spec"]["suspend"] == json!(true),
        }
    }

    /// The merge patch that suspends the object of `uid`.
    fn suspend_patch(self, uid: &str) -> Value {
        match self {
            QueuedKind::PyTorchJob => {
                json!({"metadata": {"uid": uid}, "spec": {"runPolicy": {"suspend": true}}})
            }
            _ => json!({"metadata": {"uid": uid}, "spec": {"suspend": true}}),
        }
    }

    /// The conditions that say the object finished (a pod says it by
    /// its phase, and is never suspended).
    fn finished_conditions(self) -> &'static [&'static str] {
        match self {
            QueuedKind::Job => &["Complete", "Failed"],
            QueuedKind::JobSet => &["Completed", "Failed"],
            QueuedKind::PyTorchJob => &["Succeeded", "Failed"],
            // A RayJob says it by its deployment status (`finished_or_adopted`).
            QueuedKind::RayJob => &[],
            QueuedKind::Pod => &[],
        }
    }
}

/// The Workload's name for a Job: `job-<name>-<first 8 hex digits of the
/// uid>`, a DNS label of at most 63 characters (as Kueue's
/// `job-<name>-<hash>`), stable for the Job and distinct from a later Job
/// of the same name.
pub fn workload_name(job_name: &str, uid: &str) -> String {
    object_workload_name(QueuedKind::Job, job_name, uid)
}

/// [`workload_name`] for an object of `kind` (`jobset-<name>-<hash>` for a
/// JobSet).
pub fn object_workload_name(kind: QueuedKind, job_name: &str, uid: &str) -> String {
    let hash: String = uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase();
    let prefix = kind.prefix();
    let room = 63 - prefix.len() - 2 - hash.len();
    let base: String = job_name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(room)
        .collect();
    let base = base.trim_matches('-');
    format!("{prefix}-{base}-{hash}")
}

/// The Workload for a suspended, queue-labelled Job as the API server
/// returned it: the Job as its user wrote it (server-set metadata, status
/// and fleetq's own annotations left out, so the result is the same
/// however often it is read), with the adoption annotations, through the
/// importer, renamed by [`workload_name`].
pub fn workload_from_job(job: &Value, cluster: &str) -> Result<Workload, String> {
    workload_from_object(QueuedKind::Job, job, cluster)
}

/// [`workload_from_job`] for an object of `kind`. A JobSet carries no
/// adoption marks: it runs as a copy wherever it is admitted.
pub fn workload_from_object(
    kind: QueuedKind,
    job: &Value,
    cluster: &str,
) -> Result<Workload, String> {
    let (name, uid, manifest) = user_manifest(kind, job, cluster)?;
    let mut workload = import_one(kind, &manifest)?;
    workload.name = object_workload_name(kind, &name, &uid);
    Ok(workload)
}

/// The Workload for a complete pod group (Kueue's
/// `kueue.x-k8s.io/pod-group-name`): its pods as their user wrote them,
/// each with the adoption marks, imported as one `v1 List`, named
/// `pod-<group>-<hash of the first pod's uid>`.
pub fn workload_from_pod_group(
    group: &str,
    pods: &[Value],
    cluster: &str,
) -> Result<Workload, String> {
    let mut items = Vec::with_capacity(pods.len());
    let mut first_uid = None;
    for pod in pods {
        let (_, uid, manifest) = user_manifest(QueuedKind::Pod, pod, cluster)?;
        first_uid.get_or_insert(uid);
        items.push(manifest);
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let mut workload = import_one(QueuedKind::Pod, &list)?;
    workload.name = object_workload_name(QueuedKind::Pod, group, &first_uid.unwrap_or_default());
    Ok(workload)
}

/// The first Workload a manifest imports as.
fn import_one(kind: QueuedKind, manifest: &Value) -> Result<Workload, String> {
    let documents = import_manifests(&manifest.to_string()).map_err(|errors| {
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    match documents.into_iter().next().map(|d| d.object) {
        Some(Object::Workload(w)) => Ok(w),
        _ => Err(format!("the {} did not import as a Workload", kind.name())),
    }
}

/// An object as its user wrote it (server-set metadata, status and
/// fleetq's own annotations left out), with the adoption marks on a Job
/// or Pod: (name, uid, manifest).
fn user_manifest(
    kind: QueuedKind,
    job: &Value,
    cluster: &str,
) -> Result<(String, String, Value), String> {
    let meta = &job["metadata"];
    let (Some(name), Some(uid)) = (meta["name"].as_str(), meta["uid"].as_str()) else {
        return Err(format!("the {} has no name or uid", kind.name()));
    };
    let namespace = meta["namespace"].as_str().unwrap_or("default");
    let mut annotations: serde_json::Map<String, Value> = meta["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter(|(k, _)| !k.starts_with("fleetq.dev/"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if kind.adopted_in_place() {
        annotations.insert(ADOPT_CLUSTER.into(), json!(cluster));
        annotations.insert(ADOPT_UID.into(), json!(uid));
    }
    let mut metadata = json!({"name": name, "namespace": namespace, "annotations": annotations});
    if let Some(labels) = meta.get("labels").filter(|l| l.is_object()) {
        metadata["labels"] = labels.clone();
    }
    let manifest = json!({
        "apiVersion": kind.resource().api_version,
        "kind": kind.name(),
        "metadata": metadata,
        "spec": job["spec"],
    });
    Ok((name.to_string(), uid.to_string(), manifest))
}

/// Whether the agent of `cluster` should unsuspend this workload's Job in
/// place: (namespace, Job name, uid) when its template says so.
/// A Job handed to MultiKueue (`spec.managedBy`) is never adopted: it
/// runs as a copy, as anywhere else.
pub fn adopted_by(workload: &Workload, cluster: &str) -> Option<(String, String, String)> {
    if workload.managed_by_multikueue() {
        return None;
    }
    let template = workload.spec.run.job_template.as_ref()?;
    let annotations = &template["metadata"]["annotations"];
    if annotations[ADOPT_CLUSTER].as_str()? != cluster {
        return None;
    }
    Some((
        workload.namespace.clone(),
        template["metadata"]["name"].as_str()?.to_string(),
        annotations[ADOPT_UID].as_str()?.to_string(),
    ))
}

/// The annotations that say what became of a Job's workload (`None`
/// removes one), from its status.
pub fn status_annotations(
    status: &pb::WorkloadStatus,
    cluster: &str,
) -> BTreeMap<&'static str, Option<String>> {
    let mut out = BTreeMap::new();
    let pending = status.state == "Pending";
    let reason = pending.then(|| {
        if status.reason_kind.is_empty() {
            status.reason.clone()
        } else if status.reason.is_empty() {
            status.reason_kind.clone()
        } else {
            format!("{}: {}", status.reason_kind, status.reason)
        }
    });
    out.insert(ANNOTATION_PENDING_REASON, reason.filter(|r| !r.is_empty()));
    out.insert(
        ANNOTATION_QUEUE_POSITION,
        (pending && status.position > 0).then(|| status.position.to_string()),
    );
    let elsewhere = !pending && !status.cluster.is_empty() && status.cluster != cluster;
    out.insert(
        ANNOTATION_ADMITTED_CLUSTER,
        elsewhere.then(|| status.cluster.clone()),
    );
    out
}

/// What the front door tells about a Job in an Event, from its workload's
/// status: (type, reason, note). Kueue's reasons where Kueue has one:
/// `Pending` with the reason it waits, `Started` once admitted (here, or
/// as a copy on another cluster), `Finished` once it ended.
pub fn event_for(
    status: &pb::WorkloadStatus,
    cluster: &str,
) -> Option<(EventType, &'static str, String)> {
    let queue = &status.cluster_queue;
    match status.state.as_str() {
        "Pending" => {
            let reason = status_annotations(status, cluster)
                .remove(ANNOTATION_PENDING_REASON)
                .flatten()?;
            Some((EventType::Normal, "Pending", reason))
        }
        "Admitted" | "Running" if status.cluster == cluster => Some((
            EventType::Normal,
            "Started",
            format!("Admitted by clusterQueue {queue} on this cluster ({cluster})"),
        )),
        "Admitted" | "Running" => Some((
            EventType::Normal,
            "Started",
            format!(
                "Admitted by clusterQueue {queue}; runs as a copy on cluster {}",
                status.cluster
            ),
        )),
        "Succeeded" | "Failed" | "Cancelled" => Some((
            if status.state == "Failed" {
                EventType::Warning
            } else {
                EventType::Normal
            },
            "Finished",
            format!("Workload {}", status.state),
        )),
        _ => None,
    }
}

/// An Event's note: at most 1 kB, as the API server takes it.
fn note(text: &str) -> String {
    let mut end = text.len().min(1024);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// Whether a Job is finished (a true Complete or Failed condition) or is
/// one fleetq's executor adopted: neither is suspended by the front door.
fn finished_or_adopted(kind: QueuedKind, object: &DynamicObject) -> bool {
    let adopted = object
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(crate::executor::kubernetes::LABEL_ADOPTED));
    let ends = kind.finished_conditions();
    let finished = object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["status"] == "True" && c["type"].as_str().is_some_and(|t| ends.contains(&t)))
        || matches!(
            object.data["status"]["jobDeploymentStatus"].as_str(),
            Some("Complete" | "Failed")
        );
    adopted || finished
}

/// What an Event about `object` names it by.
fn reference_of(kind: QueuedKind, object: &DynamicObject) -> ObjectReference {
    ObjectReference {
        api_version: Some(kind.resource().api_version),
        kind: Some(kind.name().into()),
        name: object.metadata.name.clone(),
        namespace: object.metadata.namespace.clone(),
        uid: object.metadata.uid.clone(),
        resource_version: object.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// A pod's group, from Kueue's keys: (namespace, group, total count; 0
/// where the count is missing or not a number, which the importer
/// refuses once the group is converted).
fn pod_group_of(kind: QueuedKind, pod: &DynamicObject) -> Option<(String, String, u32)> {
    if kind != QueuedKind::Pod {
        return None;
    }
    let group = pod.metadata.labels.as_ref()?.get(POD_GROUP_NAME_LABEL)?;
    let total = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_GROUP_TOTAL_COUNT_ANNOTATION))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    Some((namespace, group.clone(), total))
}

/// What the front door tracks an object under: its uid, or for a pod of
/// a group, `group/<namespace>/<group>`.
fn tracking_key(kind: QueuedKind, object: &DynamicObject) -> Option<String> {
    match pod_group_of(kind, object) {
        Some((namespace, group, _)) => Some(format!("group/{namespace}/{group}")),
        None => object.metadata.uid.clone(),
    }
}

/// One queue-labelled Job the front door looks after (or JobSet, Pod, or
/// pod group).
#[derive(Debug)]
struct Tracked {
    kind: QueuedKind,
    namespace: String,
    job: String,
    /// The objects it stands for, (name, uid): the Job, or each pod of a
    /// group. Each is annotated.
    members: Vec<(String, String)>,
    workload: Workload,
    /// The ledger has it (this process submitted it, or the Job carried
    /// the annotation naming it).
    submitted: bool,
    /// Annotated with its workload's name.
    marked: bool,
    /// Why the API refused it (not retried; shown on the Job).
    refused: Option<String>,
    /// The Job is gone: cancel its workload.
    deleted: bool,
    /// The status annotations last written.
    shown: BTreeMap<&'static str, Option<String>>,
    /// The workload ended: nothing more to show.
    done: bool,
    /// The copy's status last written onto the Job, and when it was read.
    mirrored: Option<String>,
    mirrored_at: Option<std::time::Instant>,
    /// It was admitted to another cluster (seen in its status, or in the
    /// annotation an earlier run wrote): a finished workload's status no
    /// longer names its cluster.
    elsewhere: bool,
    /// Rounds since its workload ended without the copy's last status.
    final_tries: u32,
    /// The user suspended it while it ran in place, and has not
    /// unsuspended it since.
    stopped_by_user: bool,
    /// Its workload is to be stopped (`false`) or resumed (`true`).
    set_active: Option<bool>,
    /// The Job, for its Events.
    reference: ObjectReference,
    /// The last Event told about it (reason and note), not told again.
    told: Option<(String, String)>,
}

/// The front door of one cluster.
pub struct FrontDoor {
    kube: kube::Client,
    cluster: String,
    servers: Vec<String>,
    tls: Option<fleetq_proto::tls::Tls>,
    source: Option<std::net::IpAddr>,
    api: Option<FleetQClient<Channel>>,
    next_server: usize,
    jobs: HashMap<String, Tracked>,
    /// Who publishes the Events on the Jobs. A recorder is made per
    /// Event: kube's recorder turns a second Event of the same reason
    /// into a count on the first and keeps the first's note, so a
    /// pending reason that changed would not show; repeats of one note
    /// are not told again anyway ([`Tracked::told`]).
    reporter: Reporter,
    /// Suspend queue-labelled Jobs created unsuspended (`suspend_queued_jobs`).
    suspend_unsuspended: bool,
    /// Such Jobs, by uid: (kind, namespace, name), to suspend next round.
    to_suspend: HashMap<String, (QueuedKind, String, String)>,
    /// The pods of groups not complete yet, by (namespace, group), by uid.
    forming: HashMap<(String, String), BTreeMap<String, Value>>,
    /// Queue-labelled pods created without Kueue's admission gate, told
    /// once that they are not queued.
    ungated: HashSet<String>,
    /// Such pods, to be told next round.
    not_queued: Vec<ObjectReference>,
}

impl FrontDoor {
    pub fn new(
        kube: kube::Client,
        cluster: &str,
        servers: Vec<String>,
        tls: Option<fleetq_proto::tls::Tls>,
        source: Option<std::net::IpAddr>,
    ) -> FrontDoor {
        let reporter = Reporter {
            controller: EVENT_CONTROLLER.into(),
            instance: Some(format!("fleetq-agent-{cluster}")),
        };
        FrontDoor {
            forming: HashMap::new(),
            ungated: HashSet::new(),
            not_queued: Vec::new(),
            suspend_unsuspended: false,
            to_suspend: HashMap::new(),
            reporter,
            kube,
            cluster: cluster.to_string(),
            servers,
            tls,
            source,
            api: None,
            next_server: 0,
            jobs: HashMap::new(),
        }
    }

    /// Suspends queue-labelled Jobs created unsuspended, then queues them
    /// (Kueue's webhook would have created them suspended).
    pub fn suspending_unsuspended(mut self, on: bool) -> FrontDoor {
        self.suspend_unsuspended = on;
        self
    }

    /// Watches the cluster's queue-labelled Jobs (and JobSets, where the
    /// cluster has the API) until `shutdown`.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut kinds = vec![QueuedKind::Job, QueuedKind::Pod];
        for custom in [
            QueuedKind::JobSet,
            QueuedKind::PyTorchJob,
            QueuedKind::RayJob,
        ] {
            if self.has_api(custom).await {
                kinds.push(custom);
            }
        }
        let streams = kinds.into_iter().map(|kind| {
            let all: Api<DynamicObject> = Api::all_with(self.kube.clone(), &kind.resource());
            watcher(all, watcher::Config::default().labels(QUEUE_NAME_LABEL))
                .default_backoff()
                .map(move |event| (kind, event))
                .boxed()
        });
        let mut stream = futures::stream::select_all(streams);
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // What each kind's (re-)list has shown so far.
        let mut listed: HashMap<QueuedKind, HashSet<String>> = HashMap::new();
        loop {
            tokio::select! {
                event = stream.next() => match event {
                    Some((kind, Ok(watcher::Event::Apply(object)))) => self.on_object(kind, &object),
                    Some((kind, Ok(watcher::Event::InitApply(object)))) => {
                        listed.entry(kind).or_default().extend(tracking_key(kind, &object));
                        self.on_object(kind, &object);
                    }
                    Some((kind, Ok(watcher::Event::Delete(object)))) => {
                        // Cancel at once: the executor waits for it.
                        self.on_deleted(kind, &object);
                        if let Some(key) = tracking_key(kind, &object) {
                            let _ = self.work_on(&key).await;
                        }
                    }
                    Some((kind, Ok(watcher::Event::Init))) => {
                        listed.entry(kind).or_default().clear();
                    }
                    Some((kind, Ok(watcher::Event::InitDone))) => {
                        // Gone while the watch was away.
                        let seen = listed.entry(kind).or_default();
                        for (uid, t) in self.jobs.iter_mut() {
                            if t.kind == kind && !seen.contains(uid) {
                                t.deleted = true;
                            }
                        }
                    }
                    Some((kind, Err(e))) => tracing::warn!(error = %e, kind = kind.name(), "queued-object watch interrupted; retrying"),
                    None => return,
                },
                _ = tick.tick() => self.work().await,
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Whether the cluster has the API of a custom `kind` (JobSet,
    /// PyTorchJob) that this agent may read.
    async fn has_api(&self, kind: QueuedKind) -> bool {
        let api: Api<DynamicObject> = Api::all_with(self.kube.clone(), &kind.resource());
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => true,
            Err(e) => {
                tracing::info!(error = %e, kind = kind.name(), "front door: no API to watch for this kind; its objects are not queued");
                false
            }
        }
    }

    /// An API for the objects of `kind` in `namespace`.
    fn objects(&self, kind: QueuedKind, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.kube.clone(), namespace, &kind.resource())
    }

    fn on_object(&mut self, kind: QueuedKind, job: &DynamicObject) {
        if kind == QueuedKind::Pod {
            return self.on_pod(job);
        }
        let Some(uid) = job.metadata.uid.clone() else {
            return;
        };
        if job.metadata.deletion_timestamp.is_some() {
            if let Some(t) = self.jobs.get_mut(&uid) {
                t.deleted = true;
            }
            return;
        }
        if self.jobs.contains_key(&uid) {
            return self.follow_user(kind, &uid, job);
        }
        let value = match serde_json::to_value(job) {
            Ok(v) => v,
            Err(e) => return tracing::warn!(error = %e, "cannot read a queued object"),
        };
        let suspended = kind.is_suspended(&job.data);
        let annotation = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_WORKLOAD))
            .cloned();
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        let expected = format!("{namespace}/{}", object_workload_name(kind, &name, &uid));
        let ours = annotation.as_deref() == Some(expected.as_str());
        let elsewhere = ours
            && job
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANNOTATION_ADMITTED_CLUSTER));
        // A Job that runs without having been queued here is not ours,
        // unless this front door suspends such Jobs (once: a finished or
        // adopted one is left alone).
        if !suspended && !ours {
            if self.suspend_unsuspended && !finished_or_adopted(kind, job) {
                self.to_suspend.insert(uid, (kind, namespace, name));
            }
            return;
        }
        self.to_suspend.remove(&uid);
        let converted = workload_from_object(kind, &value, &self.cluster);
        let (workload, refused) = self.converted(kind, &namespace, &name, &uid, converted);
        let members = vec![(name.clone(), uid.clone())];
        self.track(
            kind,
            uid.clone(),
            job,
            members,
            workload,
            refused,
            ours,
            elsewhere,
        );
        self.follow_user(kind, &uid, job);
    }

    /// What the user did to a queued Job (or JobSet) since: suspended it
    /// while it ran in place (it still carries the admission's labels,
    /// which the executor drops when it suspends it itself), so its
    /// workload is stopped (deactivated: evicted, its quota freed once
    /// its pods are gone, not requeued); or unsuspended it while it is not
    /// admitted here, which would run it outside any quota, so it is
    /// suspended again, as Kueue does, and a workload the user stopped
    /// is resumed (queued again).
    fn follow_user(&mut self, kind: QueuedKind, uid: &str, job: &DynamicObject) {
        let Some(t) = self.jobs.get_mut(uid) else {
            return;
        };
        if !t.submitted || t.done || t.deleted || t.refused.is_some() {
            return;
        }
        let suspended = kind.is_suspended(&job.data);
        let admitted_here = job
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(crate::kubernetes::LABEL_WORKLOAD_ID));
        match (suspended, admitted_here) {
            (true, true) if !t.stopped_by_user => {
                tracing::info!(job = %format!("{}/{}", t.namespace, t.job), "a running queued object was suspended by its user: its workload is stopped");
                t.stopped_by_user = true;
                t.set_active = Some(false);
            }
            (false, false) => {
                if t.stopped_by_user {
                    tracing::info!(job = %format!("{}/{}", t.namespace, t.job), "a stopped queued object was unsuspended by its user: its workload is queued again");
                    t.stopped_by_user = false;
                    t.set_active = Some(true);
                }
                let (namespace, name) = (t.namespace.clone(), t.job.clone());
                self.to_suspend
                    .insert(uid.to_string(), (kind, namespace, name));
            }
            _ => {}
        }
    }

    /// Starts looking after an object (or a pod group, under `key`).
    #[allow(clippy::too_many_arguments)]
    fn track(
        &mut self,
        kind: QueuedKind,
        key: String,
        job: &DynamicObject,
        members: Vec<(String, String)>,
        workload: Workload,
        refused: Option<String>,
        ours: bool,
        elsewhere: bool,
    ) {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let name = job.metadata.name.clone().unwrap_or_default();
        tracing::info!(object = %format!("{namespace}/{name}"), kind = kind.name(), workload = %workload.name, "queued object found");
        self.jobs.insert(
            key,
            Tracked {
                kind,
                namespace,
                job: name,
                members,
                workload,
                submitted: ours,
                marked: ours,
                refused,
                deleted: false,
                shown: BTreeMap::new(),
                done: false,
                mirrored: None,
                mirrored_at: None,
                elsewhere,
                final_tries: 0,
                stopped_by_user: false,
                set_active: None,
                reference: reference_of(kind, job),
                told: None,
            },
        );
    }

    fn on_deleted(&mut self, kind: QueuedKind, job: &DynamicObject) {
        if let Some(uid) = &job.metadata.uid {
            // What is kept per pod goes with the pod, so that a cluster
            // of short-lived pods does not grow the agent.
            self.ungated.remove(uid);
            if let Some((namespace, group, _)) = pod_group_of(kind, job) {
                let key = (namespace, group);
                if let Some(forming) = self.forming.get_mut(&key) {
                    forming.remove(uid);
                    if forming.is_empty() {
                        self.forming.remove(&key);
                    }
                }
            }
        }
        if let Some(t) = tracking_key(kind, job).and_then(|k| self.jobs.get_mut(&k)) {
            t.deleted = true;
        }
    }

    /// A queue-labelled Pod: queued if it carries Kueue's admission
    /// gate (or was queued by an earlier run), alone or, once all of its
    /// group's pods are there, as its group. A pod without the gate
    /// cannot be held (Kubernetes lets no gate be added after creation):
    /// it is told once, with a Warning Event, that it is not queued.
    /// Pods a controller owns (a Job's) are its controller's business.
    fn on_pod(&mut self, pod: &DynamicObject) {
        let kind = QueuedKind::Pod;
        let (Some(uid), Some(key)) = (pod.metadata.uid.clone(), tracking_key(kind, pod)) else {
            return;
        };
        let owned = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true));
        if owned {
            return;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return self.on_deleted(kind, pod);
        }
        let group = pod_group_of(kind, pod);
        if let Some(t) = self.jobs.get_mut(&key) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if !t.members.iter().any(|(_, u)| *u == uid) {
                t.members.push((name, uid));
            }
            return;
        }
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let annotation = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_WORKLOAD));
        let ours =
            annotation.is_some_and(|a| a.starts_with(&format!("{namespace}/{}-", kind.prefix())));
        let gated = pod.data["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| {
                g.iter()
                    .any(|g| g["name"] == crate::executor::kubernetes::KUEUE_ADMISSION_GATE)
            });
        if !gated && !ours {
            if self.ungated.insert(uid) {
                self.not_queued.push(reference_of(kind, pod));
            }
            return;
        }
        let value = match serde_json::to_value(pod) {
            Ok(v) => v,
            Err(e) => return tracing::warn!(error = %e, "cannot read a queued pod"),
        };
        let elsewhere = ours
            && pod
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(ANNOTATION_ADMITTED_CLUSTER));
        let Some((namespace, group, total)) = group else {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let (workload, refused) = self.converted(
                kind,
                &namespace,
                &name,
                &uid,
                workload_from_object(kind, &value, &self.cluster),
            );
            return self.track(
                kind,
                key,
                pod,
                vec![(name, uid)],
                workload,
                refused,
                ours,
                elsewhere,
            );
        };
        let forming = self
            .forming
            .entry((namespace.clone(), group.clone()))
            .or_default();
        forming.insert(uid.clone(), value);
        // A count that is no number (0 here) is converted at once, and
        // refused by the importer naming the annotation.
        if total > 0 && forming.len() < total as usize {
            return;
        }
        let Some(mut pods) = self.forming.remove(&(namespace.clone(), group.clone())) else {
            return;
        };
        // In the order of their names: the same List however they came.
        let mut pods: Vec<Value> = std::mem::take(&mut pods).into_values().collect();
        pods.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        let members: Vec<(String, String)> = pods
            .iter()
            .map(|p| {
                let m = &p["metadata"];
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    m["uid"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let first_uid = members.first().map(|(_, u)| u.clone()).unwrap_or_default();
        let converted = workload_from_pod_group(&group, &pods, &self.cluster);
        let (workload, refused) = self.converted(kind, &namespace, &group, &first_uid, converted);
        self.track(
            kind,
            key.clone(),
            pod,
            members,
            workload,
            refused,
            ours,
            elsewhere,
        );
        if let Some(t) = self.jobs.get_mut(&key) {
            t.job = group;
        }
    }

    /// A workload, or a placeholder named as it would be and why the
    /// object could not be converted.
    fn converted(
        &self,
        kind: QueuedKind,
        namespace: &str,
        name: &str,
        uid: &str,
        result: Result<Workload, String>,
    ) -> (Workload, Option<String>) {
        match result {
            Ok(w) => (w, None),
            Err(e) => {
                tracing::warn!(object = %format!("{namespace}/{name}"), kind = kind.name(), error = %e, "cannot convert a queued object");
                let placeholder = Workload {
                    namespace: namespace.to_string(),
                    name: object_workload_name(kind, name, uid),
                    labels: BTreeMap::new(),
                    spec: Default::default(),
                };
                (placeholder, Some(e))
            }
        }
    }

    /// A client of the API, connecting to the next server if there is none.
    async fn api(&mut self) -> Option<FleetQClient<Channel>> {
        if let Some(api) = &self.api {
            return Some(api.clone());
        }
        if self.servers.is_empty() {
            return None;
        }
        let addr = self.servers[self.next_server % self.servers.len()].clone();
        self.next_server += 1;
        let timeouts = Timeouts::default();
        let channel = match &self.tls {
            Some(tls) => fleetq_proto::tls::tls_channel(&addr, &timeouts, tls, self.source),
            None => match endpoint(&addr, &timeouts) {
                Ok(e) => e
                    .local_address(self.source)
                    .connect()
                    .await
                    .map_err(|e| format!("cannot reach {addr}: {e}")),
                Err(e) => Err(e),
            },
        };
        match channel {
            Ok(c) => {
                let api = FleetQClient::new(c);
                self.api = Some(api.clone());
                Some(api)
            }
            Err(e) => {
                tracing::warn!(server = %addr, error = %e, "front door: cannot reach the API");
                None
            }
        }
    }

    /// A failed call: an unavailable server is dropped (the next call
    /// tries the next one); a refusal for who we are is logged loudly.
    fn failed(&mut self, what: &str, status: &tonic::Status) {
        if status.code() == tonic::Code::PermissionDenied
            || status.code() == tonic::Code::Unauthenticated
        {
            tracing::error!(
                error = %status.message(),
                "front door: the servers refuse this agent's {what}; agents need the right to \
                 submit and cancel workloads (see docs/deploy.md)"
            );
        } else {
            tracing::warn!(error = %status.message(), "front door: {what} failed");
        }
        self.api = None;
    }

    /// One round: cancel for deleted Jobs, submit new ones, mark them,
    /// show pending reasons.
    async fn work(&mut self) {
        self.suspend_waiting().await;
        for pod in std::mem::take(&mut self.not_queued) {
            tracing::warn!(pod = ?pod.name, namespace = ?pod.namespace, "a queue-labelled pod was created without Kueue's admission scheduling gate: not queued (no gate can be added after creation)");
            let event = Event {
                type_: EventType::Warning,
                reason: "NotQueued".into(),
                note: Some(note(&format!(
                    "created without the {} scheduling gate: fleetq cannot hold it, and it runs \
                     outside any quota (create queued pods with the gate, as Kueue's webhook adds it)",
                    crate::executor::kubernetes::KUEUE_ADMISSION_GATE
                ))),
                action: "Admission".into(),
                secondary: None,
            };
            let recorder = Recorder::new(self.kube.clone(), self.reporter.clone());
            if let Err(e) = recorder.publish(&event, &pod).await {
                tracing::warn!(pod = ?pod.name, error = %e, "front door: cannot publish an Event");
            }
        }
        let uids: Vec<String> = self.jobs.keys().cloned().collect();
        for uid in uids {
            if let Err(()) = self.work_on(&uid).await {
                // The API is unreachable: try again next round.
                return;
            }
        }
    }

    async fn work_on(&mut self, uid: &str) -> Result<(), ()> {
        let Some(t) = self.jobs.get(uid) else {
            return Ok(());
        };
        let (namespace, name) = (t.namespace.clone(), t.workload.name.clone());
        if t.deleted {
            if t.submitted && !t.done {
                let mut api = self.api().await.ok_or(())?;
                let request = pb::CancelRequest {
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                match api.cancel(request).await {
                    Ok(r) => {
                        tracing::info!(workload = %format!("{namespace}/{name}"), state = %r.get_ref().state, "queued Job deleted; workload cancelled")
                    }
                    Err(s) if s.code() == tonic::Code::NotFound => {}
                    Err(s) if s.code() == tonic::Code::FailedPrecondition => {}
                    Err(s) => {
                        self.failed("cancel", &s);
                        return Err(());
                    }
                }
            }
            self.jobs.remove(uid);
            return Ok(());
        }
        if let Some(why) = t.refused.clone() {
            if !t.marked {
                self.tell(uid, EventType::Warning, "Refused", &why).await;
                let mut shown = BTreeMap::new();
                shown.insert(ANNOTATION_PENDING_REASON, Some(format!("Refused: {why}")));
                if self.annotate_tracked(uid, &shown).await {
                    if let Some(t) = self.jobs.get_mut(uid) {
                        t.marked = true;
                    }
                }
            }
            return Ok(());
        }
        if !t.submitted {
            let body = match serde_json::to_string(&t.workload) {
                Ok(b) => b,
                Err(_) => return Ok(()),
            };
            let mut api = self.api().await.ok_or(())?;
            let request = pb::SubmitRequest {
                request_id: uid.to_string(),
                workload_json: body,
                workloads_json: Vec::new(),
            };
            match api.submit(request).await {
                Ok(r) => {
                    let errors: Vec<String> = r
                        .get_ref()
                        .results
                        .iter()
                        .flat_map(|r| r.errors.iter())
                        .map(|e| format!("{}: {}", e.path, e.message))
                        .collect();
                    if let Some(t) = self.jobs.get_mut(uid) {
                        if errors.is_empty() {
                            tracing::info!(workload = %format!("{namespace}/{name}"), "queued Job submitted");
                            t.submitted = true;
                            let created = format!("Created Workload: {namespace}/{name}");
                            self.tell(uid, EventType::Normal, "CreatedWorkload", &created)
                                .await;
                        } else {
                            tracing::warn!(workload = %format!("{namespace}/{name}"), errors = %errors.join("; "), "queued Job refused");
                            t.refused = Some(errors.join("; "));
                            return Ok(());
                        }
                    }
                }
                Err(s) if s.code() == tonic::Code::InvalidArgument => {
                    if let Some(t) = self.jobs.get_mut(uid) {
                        t.refused = Some(s.message().to_string());
                    }
                    return Ok(());
                }
                Err(s) => {
                    self.failed("submit", &s);
                    return Err(());
                }
            }
        }
        let Some(t) = self.jobs.get(uid) else {
            return Ok(());
        };
        if t.done {
            return Ok(());
        }
        if let Some(active) = t.set_active {
            let mut api = self.api().await.ok_or(())?;
            let request = pb::SetWorkloadActiveRequest {
                namespace: namespace.clone(),
                name: name.clone(),
                active,
            };
            match api.set_workload_active(request).await {
                Ok(_) => {}
                Err(s) if s.code() == tonic::Code::NotFound => {}
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {}
                Err(s) => {
                    self.failed("stop or resume", &s);
                    return Err(());
                }
            }
            let what = if active { "resumed" } else { "stopped" };
            tracing::info!(workload = %format!("{namespace}/{name}"), "workload {what} as its user asked");
            if let Some(t) = self.jobs.get_mut(uid) {
                // Unless the user changed their mind meanwhile.
                if t.set_active == Some(active) {
                    t.set_active = None;
                }
            }
        }
        let Some(t) = self.jobs.get(uid) else {
            return Ok(());
        };
        let mut wanted = BTreeMap::new();
        if !t.marked {
            wanted.insert(ANNOTATION_WORKLOAD, Some(format!("{namespace}/{name}")));
        }
        let mut api = self.api().await.ok_or(())?;
        let request = pb::WorkloadRef {
            namespace: namespace.clone(),
            name: name.clone(),
            with_spec: false,
        };
        let status = match api.get_workload(request).await {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == tonic::Code::NotFound => {
                // Submitted by an earlier run and since removed by retention.
                if let Some(t) = self.jobs.get_mut(uid) {
                    t.done = true;
                }
                return Ok(());
            }
            Err(s) => {
                self.failed("read of a workload", &s);
                return Err(());
            }
        };
        let shown_now = status_annotations(&status, &self.cluster);
        let shown_before = self.jobs.get(uid).map(|t| t.shown.clone());
        for (k, v) in &shown_now {
            let before = shown_before.as_ref().and_then(|s| s.get(k)).cloned();
            // Never written and nothing to write: leave the Job alone.
            if before.as_ref() != Some(v) && !(before.is_none() && v.is_none()) {
                wanted.insert(k, v.clone());
            }
        }
        let done = matches!(status.state.as_str(), "Succeeded" | "Failed" | "Cancelled");
        if let Some((kind, reason, text)) = event_for(&status, &self.cluster) {
            self.tell(uid, kind, reason, &text).await;
        }
        // The copy's last status is kept trying for a while after the
        // workload ends (its cluster's agent may be reconnecting).
        let settled = self.mirror(uid, &status, done).await
            || self
                .jobs
                .get(uid)
                .is_some_and(|t| t.final_tries >= FINAL_MIRROR_TRIES);
        if (wanted.is_empty() || self.annotate_tracked(uid, &wanted).await)
            && self.jobs.contains_key(uid)
        {
            if let Some(t) = self.jobs.get_mut(uid) {
                t.marked = true;
                t.shown = shown_now;
                t.done = done && settled;
                t.final_tries += u32::from(done);
            }
        }
        Ok(())
    }

    /// Where its workload runs as a copy (admitted to another cluster, or
    /// handed to MultiKueue), copies the copy's status onto the user's
    /// Job, at most every [`MIRROR_EVERY`] (and once more when it ends):
    /// into `status` when the Job is MultiKueue's (Kubernetes' Job
    /// controller leaves it alone), else into [`ANNOTATION_REMOTE_STATUS`].
    /// A copy that cannot be read now is tried again next time. Whether
    /// the Job shows what the copy shows now (or there is no copy, or the
    /// copy is gone).
    async fn mirror(&mut self, uid: &str, status: &pb::WorkloadStatus, done: bool) -> bool {
        let Some(t) = self.jobs.get(uid) else {
            return true;
        };
        let kind = t.kind;
        let multikueue = t.workload.managed_by_multikueue();
        let ran = matches!(
            status.state.as_str(),
            "Admitted" | "Running" | "Succeeded" | "Failed"
        );
        let copy = multikueue
            || !kind.adopted_in_place()
            || t.elsewhere
            || (!status.cluster.is_empty() && status.cluster != self.cluster);
        let due = t
            .mirrored_at
            .is_none_or(|at| done || at.elapsed() >= MIRROR_EVERY);
        if !(ran && copy) {
            return true;
        }
        if !due {
            return false;
        }
        let (namespace, job, name) = (t.namespace.clone(), t.job.clone(), t.workload.name.clone());
        if let Some(t) = self.jobs.get_mut(uid) {
            t.mirrored_at = Some(std::time::Instant::now());
            t.elsewhere |= !multikueue;
        }
        let Some(mut api) = self.api().await else {
            return false;
        };
        let request = pb::WorkloadRef {
            namespace: namespace.clone(),
            name: name.clone(),
            with_spec: false,
        };
        let copied = match api.workload_job_status(request).await {
            Ok(r) => r.into_inner(),
            // The copy is gone (its agent says so): nothing more to show.
            Err(s) if s.code() == tonic::Code::NotFound => return true,
            Err(s) => {
                tracing::debug!(workload = %format!("{namespace}/{name}"), error = %s.message(), "front door: the copy's status cannot be read now");
                return false;
            }
        };
        let Ok(copy_status) = serde_json::from_str::<Value>(&copied.status_json) else {
            return false;
        };
        let text = copy_status.to_string();
        if self.jobs.get(uid).and_then(|t| t.mirrored.as_ref()) == Some(&text) {
            return true;
        }
        let api = self.objects(kind, &namespace);
        let written = if multikueue {
            let mut patch = json!({"status": {}});
            match kind {
                QueuedKind::Job => {
                    for field in JOB_STATUS_FIELDS {
                        patch["status"][field] =
                            copy_status.get(field).cloned().unwrap_or(Value::Null);
                    }
                }
                // A JobSet's status is written whole, as the copy has it
                // (a pod is never MultiKueue's).
                QueuedKind::JobSet
                | QueuedKind::PyTorchJob
                | QueuedKind::RayJob
                | QueuedKind::Pod => patch["status"] = copy_status.clone(),
            }
            api.patch_status(&job, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        } else {
            let mut shown = BTreeMap::new();
            shown.insert(ANNOTATION_REMOTE_STATUS, Some(text.clone()));
            match self.annotate_tracked(uid, &shown).await {
                true => Ok(()),
                false => Err("annotation refused".to_string()),
            }
        };
        match written {
            Ok(()) => {
                tracing::debug!(job = %format!("{namespace}/{job}"), cluster = %copied.cluster, "front door: the copy's status copied");
                if let Some(t) = self.jobs.get_mut(uid) {
                    t.mirrored = Some(text);
                }
                true
            }
            Err(e) => {
                tracing::warn!(job = %format!("{namespace}/{job}"), error = %e, "front door: cannot copy the copy's status onto the Job");
                false
            }
        }
    }

    /// Suspends the queue-labelled Jobs found running unqueued; each is
    /// then seen suspended and queued. A Job gone or replaced meanwhile
    /// (uid precondition) is dropped; another failure is tried again.
    async fn suspend_waiting(&mut self) {
        let waiting: Vec<(String, (QueuedKind, String, String))> =
            self.to_suspend.drain().collect();
        for (uid, (kind, namespace, name)) in waiting {
            let api = self.objects(kind, &namespace);
            let patch = kind.suspend_patch(&uid);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(object = %format!("{namespace}/{name}"), kind = kind.name(), "a queue-labelled object was created unsuspended: suspended, to be queued")
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => {
                    tracing::warn!(object = %format!("{namespace}/{name}"), kind = kind.name(), error = %e, "cannot suspend a queue-labelled object; retrying");
                    self.to_suspend.insert(uid, (kind, namespace, name));
                }
            }
        }
    }

    /// Publishes an Event on the Job of `uid`, unless it is the one told
    /// last. A refused Event is logged and not retried: Events are a
    /// courtesy, the annotations carry the same.
    async fn tell(&mut self, uid: &str, kind: EventType, reason: &str, text: &str) {
        let Some(t) = self.jobs.get_mut(uid) else {
            return;
        };
        let key = (reason.to_string(), text.to_string());
        if t.told.as_ref() == Some(&key) {
            return;
        }
        t.told = Some(key);
        let event = Event {
            type_: kind,
            reason: reason.to_string(),
            note: Some(note(text)),
            action: "Admission".into(),
            secondary: None,
        };
        let reference = t.reference.clone();
        let recorder = Recorder::new(self.kube.clone(), self.reporter.clone());
        if let Err(e) = recorder.publish(&event, &reference).await {
            tracing::warn!(job = ?reference.name, error = %e, "front door: cannot publish an Event on the Job (the agent needs create and patch on events.events.k8s.io)");
        }
    }

    /// Annotates every object a tracked entry stands for.
    async fn annotate_tracked(
        &self,
        key: &str,
        annotations: &BTreeMap<&'static str, Option<String>>,
    ) -> bool {
        let Some(t) = self.jobs.get(key) else {
            return false;
        };
        let mut all = true;
        for (name, uid) in &t.members {
            all &= self
                .annotate(t.kind, &t.namespace, name, uid, annotations)
                .await;
        }
        all
    }

    /// Merge-patches the Job's annotations (`None` removes one), only if
    /// it is still the Job of `uid`.
    async fn annotate(
        &self,
        kind: QueuedKind,
        namespace: &str,
        job: &str,
        uid: &str,
        annotations: &BTreeMap<&'static str, Option<String>>,
    ) -> bool {
        let api = self.objects(kind, namespace);
        let patch = json!({"metadata": {"uid": uid, "annotations": annotations}});
        match api
            .patch(job, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(job = %format!("{namespace}/{job}"), error = %e, "cannot annotate a queued Job");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Value {
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "Train_LLaMA",
                "namespace": "ml",
                "uid": "1f0c2a9e-77aa-4b1e-9d0e-0123456789ab",
                "resourceVersion": "42",
                "generation": 1,
                "creationTimestamp": "2025-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}],
                "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
                "annotations": {"fleetq.dev/pending-reason": "old", "team": "ml"}
            },
            "spec": {
                "suspend": true,
                "parallelism": 2,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "i", "resources": {
                        "requests": {"nvidia.com/gpu": "2"},
                        "limits": {"nvidia.com/gpu": "2"}}}]
                }}
            },
            "status": {"active": 0}
        })
    }

    #[test]
    fn names_are_stable_dns_labels_from_the_uid() {
        let uid = "1f0c2a9e-77aa-4b1e-9d0e-0123456789ab";
        assert_eq!(
            workload_name("Train_LLaMA", uid),
            "job-train-llama-1f0c2a9e"
        );
        let long = workload_name(&"x".repeat(100), uid);
        assert!(long.len() <= 63 && long.ends_with("-1f0c2a9e"), "{long}");
    }

    #[test]
    fn a_job_imports_as_kueue_would_with_the_adoption_marks() {
        let w = workload_from_job(&job(), "east").expect("imports");
        assert_eq!(w.namespace, "ml");
        assert_eq!(w.name, "job-train-llama-1f0c2a9e");
        assert_eq!(w.spec.queue_name, "team-a");
        assert_eq!(w.spec.pod_sets[0].count, 2);
        assert_eq!(
            adopted_by(&w, "east"),
            Some((
                "ml".into(),
                "Train_LLaMA".into(),
                "1f0c2a9e-77aa-4b1e-9d0e-0123456789ab".into()
            ))
        );
        assert_eq!(adopted_by(&w, "west"), None);
        // What the server or fleetq set does not change what is submitted.
        let mut again = job();
        again["metadata"]["resourceVersion"] = json!("99");
        again["metadata"]["annotations"][ANNOTATION_WORKLOAD] = json!("ml/x");
        let template = w.spec.run.job_template.clone().expect("template");
        assert_eq!(
            workload_from_job(&again, "east")
                .expect("imports")
                .spec
                .run
                .job_template,
            Some(template.clone())
        );
        assert!(template["metadata"].get("managedFields").is_none());
        assert_eq!(template["metadata"]["annotations"]["team"], "ml");
        assert!(template.get("status").is_none());
    }

    /// A JobSet imports with a pod set per replicated Job, named as Kueue
    /// names its Workload, and without adoption marks: it runs as a copy
    /// wherever it is admitted, this cluster included.
    #[test]
    fn a_jobset_imports_as_kueue_would_and_is_never_adopted() {
        let jobset = json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {
                "name": "Train",
                "namespace": "ml",
                "uid": "ABCDEF12-0000",
                "resourceVersion": "3",
                "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
            },
            "spec": {"suspend": true, "replicatedJobs": [{
                "name": "workers",
                "replicas": 3,
                "template": {"spec": {"template": {"spec": {"containers": [{
                    "name": "w",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }]}}}},
            }]},
            "status": {"restarts": 0},
        });
        let w = workload_from_object(QueuedKind::JobSet, &jobset, "east").expect("imports");
        assert_eq!(w.name, "jobset-train-abcdef12");
        assert_eq!(
            (w.spec.pod_sets[0].name.as_str(), w.spec.pod_sets[0].count),
            ("workers", 3)
        );
        assert_eq!(adopted_by(&w, "east"), None);
        let template = w.spec.run.job_template.expect("kept");
        assert_eq!(template["kind"], "JobSet");
        assert!(template.get("status").is_none());
        assert!(template["metadata"].get("resourceVersion").is_none());
    }

    /// A Job handed to MultiKueue never runs in place, even here: its
    /// copy runs, without `spec.managedBy`, under Kubernetes' own Job
    /// controller.
    #[test]
    fn a_multikueue_job_runs_as_a_copy_even_here() {
        let mut managed = job();
        managed["spec"]["managedBy"] = json!(fleetq_model::workload::MULTIKUEUE_MANAGED_BY);
        let w = workload_from_job(&managed, "east").expect("imports");
        assert!(w.managed_by_multikueue());
        assert_eq!(adopted_by(&w, "east"), None);
        let plain = workload_from_job(&job(), "east").expect("imports");
        assert!(!plain.managed_by_multikueue());
        let assignment = fleetq_model::assignment::Assignment {
            cluster: "east".into(),
            pod_sets: Vec::new(),
            usage: Default::default(),
        };
        let copy = crate::executor::kubernetes::job_manifest(
            1,
            1,
            "east",
            &w,
            &assignment,
            &Default::default(),
            None,
        )
        .expect("a copy");
        let spec = copy.spec.expect("spec");
        assert_eq!(spec.managed_by, None);
        assert_eq!(spec.suspend, Some(false));
    }

    /// Kueue's reasons: Pending with why, Started naming where it runs,
    /// Finished (a warning when it failed); notes fit the API's 1 kB.
    #[test]
    fn workload_states_become_events() {
        let pending = pb::WorkloadStatus {
            state: "Pending".into(),
            reason_kind: "ExceedsMaxQuota".into(),
            reason: "needs 16 nvidia.com/gpu".into(),
            ..Default::default()
        };
        let (kind, reason, text) = event_for(&pending, "east").expect("an event");
        assert_eq!((kind, reason), (EventType::Normal, "Pending"));
        assert_eq!(text, "ExceedsMaxQuota: needs 16 nvidia.com/gpu");
        let mut running = pb::WorkloadStatus {
            state: "Running".into(),
            cluster: "west".into(),
            cluster_queue: "team-a".into(),
            ..Default::default()
        };
        let (_, reason, text) = event_for(&running, "east").expect("an event");
        assert_eq!(reason, "Started");
        assert!(
            text.contains("copy on cluster west") && text.contains("team-a"),
            "{text}"
        );
        running.cluster = "east".into();
        let (_, _, text) = event_for(&running, "east").expect("an event");
        assert!(text.contains("on this cluster (east)"), "{text}");
        let failed = pb::WorkloadStatus {
            state: "Failed".into(),
            ..Default::default()
        };
        let (kind, reason, _) = event_for(&failed, "east").expect("an event");
        assert_eq!((kind, reason), (EventType::Warning, "Finished"));
        let long = "é".repeat(600);
        let cut = note(&long);
        assert!(cut.len() <= 1024 && long.starts_with(&cut));
    }

    #[test]
    fn pending_status_becomes_annotations() {
        let status = pb::WorkloadStatus {
            state: "Pending".into(),
            reason_kind: "ExceedsMaxQuota".into(),
            reason: "needs 16 nvidia.com/gpu".into(),
            position: 2,
            ..Default::default()
        };
        let a = status_annotations(&status, "east");
        assert_eq!(
            a[ANNOTATION_PENDING_REASON].as_deref(),
            Some("ExceedsMaxQuota: needs 16 nvidia.com/gpu")
        );
        assert_eq!(a[ANNOTATION_QUEUE_POSITION].as_deref(), Some("2"));
        assert_eq!(a[ANNOTATION_ADMITTED_CLUSTER], None);
        let admitted = pb::WorkloadStatus {
            state: "Admitted".into(),
            cluster: "west".into(),
            ..Default::default()
        };
        let a = status_annotations(&admitted, "east");
        assert_eq!(a[ANNOTATION_PENDING_REASON], None);
        assert_eq!(a[ANNOTATION_ADMITTED_CLUSTER].as_deref(), Some("west"));
    }

    /// A complete pod group is one workload named after the group and
    /// its first pod's uid, each pod kept with its adoption marks, so the
    /// server sees the group as this cluster's front door's.
    #[test]
    fn a_pod_group_imports_as_one_workload_adopted_here() {
        let pod = |i: u32| {
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": format!("ray-{i}"), "namespace": "ml", "uid": format!("ABCD{i}-9"),
                    "resourceVersion": "5",
                    "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/pod-group-name": "ray"},
                    "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
                },
                "spec": {
                    "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                    "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
                "status": {"phase": "Pending"},
            })
        };
        let w = workload_from_pod_group("ray", &[pod(0), pod(1)], "east").expect("imports");
        assert_eq!(w.name, "pod-ray-abcd09");
        assert_eq!(w.spec.pod_sets.iter().map(|p| p.count).sum::<u32>(), 2);
        assert_eq!(w.adopting_cluster(), Some("east"));
        let adopted = crate::executor::kubernetes::pods_adopted_by(&w, "east").expect("here");
        assert_eq!(
            adopted
                .iter()
                .map(|p| (p.name.as_str(), p.uid.as_str()))
                .collect::<Vec<_>>(),
            [("ray-0", "ABCD0-9"), ("ray-1", "ABCD1-9")]
        );
        let mut alone = pod(0);
        alone["metadata"]["labels"] = json!({"kueue.x-k8s.io/queue-name": "q"});
        alone["metadata"]["annotations"] = json!({});
        let single = workload_from_object(QueuedKind::Pod, &alone, "east").expect("imports");
        assert_eq!(single.name, "pod-ray-0-abcd09");
        assert_eq!(single.adopting_cluster(), Some("east"));
    }
}
