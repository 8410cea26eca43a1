//! A fake Kubernetes API server for end-to-end tests of the kube-rs client.
//!
//! The agent talks to a cluster through kube's typed `Api<Node>`,
//! `Api<Pod>` and `Api<Job>` calls and kube-runtime's `watcher`. A real
//! cluster (or kind) is too slow and too heavy for `cargo test` (and cannot
//! be installed on the machines this is built on), and mocking at the Rust
//! level would skip exactly the parts that break in practice: URLs, query
//! parameters, status codes, `Status` bodies, the watch stream's framing
//! and resourceVersion bookkeeping, and what the API server refuses. So
//! this fake speaks the wire protocol itself, over plain HTTP/1.1 on
//! loopback, for the resources the agent uses, and lets a test play the
//! rest of the cluster: the node inventory ([`FakeKube::put_node`]), the
//! kubelet and scheduler ([`FakeKube::put_pod`], [`FakeKube::start_job_pods`],
//! [`FakeKube::set_pod_phase`]) and the Job controller
//! ([`FakeKube::set_job_status`]). The garbage collector (the delayed
//! removal after a foreground delete, and of a Job's pods) and the
//! TTL-after-finished controller run inside the fake.
//!
//! Where the real API server's behaviour matters to a client it is copied
//! (each point is checked by `tests/fake_kube_selftest.rs`, which names the
//! Kubernetes documentation it mirrors):
//!
//! * one global, monotonically increasing resourceVersion; 201/404/409 with
//!   `Status` bodies; an immediate delete answers with a `Status` of
//!   `Success` (kube's `Either::Right`) while a foreground delete answers
//!   with the terminating object (`Either::Left`);
//! * decoding through the typed objects, so a wrongly typed field is a 400
//!   and an unknown field is dropped (fieldValidation=Warn, the default);
//! * validation of what is stored, for the fields fleetq writes, with 422
//!   Invalid and the field named in the message and in `details.causes`:
//!   object names, label and annotation syntax and sizes, container
//!   resource names, extended resources (whole numbers, request equal to
//!   limit, no request without a limit), a Job's restart policy, selector,
//!   node affinity and `spec.managedBy`, and the immutability of a Job's
//!   `spec.selector`, `spec.template` and `spec.managedBy` on update and
//!   patch;
//! * the defaulting that changes what a client reads back: a Job's
//!   generated selector and controller labels, parallelism, completions and
//!   backoffLimit; a Pod's requests from its limits and its phase;
//! * a create in a namespace that does not exist is 404 `namespaces "x" not
//!   found`;
//! * a bounded event history (`Options::event_window`, [`FakeKube::compact`]):
//!   a watch from a resourceVersion older than it gets a 410 `Expired` ERROR
//!   event (as the watch cache answers), a list with
//!   `resourceVersionMatch=Exact` or a continue token that old gets HTTP 410,
//!   so clients' re-list paths run;
//! * watches with a label or field selector get DELETED when an object stops
//!   matching and ADDED when it starts to;
//! * field selectors the real server supports for nodes, pods and Jobs
//!   (any other field is a 400, as there);
//! * `ttlSecondsAfterFinished`: a finished Job is deleted (foreground) that
//!   long after the fake saw it finish;
//! * events.k8s.io/v1 Events, created and merge-patched as kube's event
//!   `Recorder` writes them, validated as `ValidateEventCreate` does.
//!
//! Where it does not matter to this project it is left out: no admission
//! plugins, no PodSpec defaults beyond the ones above, no JSON patch or
//! server-side apply (415), strategic merge patches are applied as JSON
//! merge patches (lists are replaced, not merged by key), a status
//! subresource for Jobs only (`jobs/{name}/status`: GET, and PATCH that
//! keeps only the status), no bookmarks, no finalizers other than `foregroundDeletion`,
//! and Namespaces are only a set the test fills ([`FakeKube::put_namespace`]).
//!
//! Tests are synchronous, so the server runs on its own single-threaded tokio
//! runtime on a background thread, and the test-side methods only take a lock.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot, watch};

/// How long the imitated garbage collector takes to remove a Job after a
/// foreground delete: long enough that a watcher sees the terminating
/// MODIFIED before the DELETED, short enough not to slow tests down.
const FOREGROUND_GC_DELAY: Duration = Duration::from_millis(300);

/// Events kept by default: far more than any test makes, so only a test
/// that asks for a small window (or calls [`FakeKube::compact`]) sees 410.
pub const DEFAULT_EVENT_WINDOW: usize = 100_000;

/// The namespaces every cluster starts with.
const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Labels the Job controller's selector uses (batch/v1, Kubernetes 1.27+
/// sets both the legacy and the prefixed ones).
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";

/// How a fake is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// How many events the history keeps (the watch cache's window, or
    /// etcd's compaction): a watch or exact list from a resourceVersion
    /// older than the oldest kept event gets 410 Expired.
    pub event_window: usize,
    /// Whether the cluster has the JobSet API (`jobset.x-k8s.io/v1alpha2`,
    /// a custom resource the JobSet controller installs); without it
    /// every JobSet path is 404, as on a real server without the CRD.
    pub jobset_api: bool,
    /// Whether the cluster has Kubeflow's PyTorchJob API
    /// (`kubeflow.org/v1`, the Training Operator's custom resource).
    pub kubeflow_api: bool,
    /// Whether the cluster has KubeRay's RayJob API (`ray.io/v1`).
    pub ray_api: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            event_window: DEFAULT_EVENT_WINDOW,
            jobset_api: true,
            kubeflow_api: true,
            ray_api: true,
        }
    }
}

/// A write the fake refused: (method, path, HTTP code, Status message).
pub type Refusal = (String, String, u16, String);

/// A fake API server serving Nodes, Pods and batch/v1 Jobs on 127.0.0.1.
///
/// Dropping it stops the server and closes every connection, so clients
/// still watching see their streams end.
pub struct FakeKube {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeKube {
    /// Starts serving on 127.0.0.1:<ephemeral> with the default options.
    pub fn start() -> FakeKube {
        FakeKube::start_with(Options::default())
    }

    /// Starts serving on 127.0.0.1:<ephemeral>.
    ///
    /// The socket is bound before this returns, so a client may connect at
    /// once; connections queue in the backlog until the server thread runs.
    pub fn start_with(options: Options) -> FakeKube {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("fake kube: bind a loopback port");
        let addr = listener.local_addr().expect("fake kube: local address");
        listener
            .set_nonblocking(true)
            .expect("fake kube: non-blocking listener");
        let (changed, _) = watch::channel(0);
        let (paused, _) = watch::channel(false);
        let store = Store {
            window: options.event_window.max(1),
            jobset_api: options.jobset_api,
            kubeflow_api: options.kubeflow_api,
            ray_api: options.ray_api,
            namespaces: INITIAL_NAMESPACES.iter().map(|n| n.to_string()).collect(),
            ..Store::default()
        };
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            changed,
            paused,
        });
        let (stop, stopped) = oneshot::channel();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fake-kube-{}", addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("fake kube: tokio runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .expect("fake kube: register the listener with tokio");
                    tokio::spawn(ttl_after_finished(server_shared.clone()));
                    serve(listener, server_shared, stopped).await;
                });
                // Dropping the runtime here cancels every connection task and
                // pending foreground deletion, closing their sockets.
            })
            .expect("fake kube: spawn the server thread");
        FakeKube {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// "http://127.0.0.1:PORT"
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig YAML file into `dir` pointing at this server
    /// (cluster server: url(), no TLS, a user with a dummy token, one context
    /// named "fake", current-context "fake") and returns its path.
    ///
    /// The file name carries the port so that several fakes can share a
    /// directory.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let yaml = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  \
               cluster:\n    \
                 server: {url}\n\
             users:\n\
             - name: fake\n  \
               user:\n    \
                 token: fake-token\n\
             contexts:\n\
             - name: fake\n  \
               context:\n    \
                 cluster: fake\n    \
                 user: fake\n    \
                 namespace: default\n\
             current-context: fake\n",
            url = self.url()
        );
        let path = dir.join(format!("kubeconfig-{}.yaml", self.addr.port()));
        std::fs::write(&path, yaml).expect("fake kube: write the kubeconfig");
        path
    }

    /// Adds a namespace (the fake starts with default, kube-system,
    /// kube-public and kube-node-lease).
    pub fn put_namespace(&self, name: &str) {
        self.shared.commit(|store| {
            store.namespaces.insert(name.to_string());
        });
    }

    /// Adds or replaces a Node (a full v1 Node object as JSON; metadata.name
    /// is the key). Emits ADDED or MODIFIED to watchers.
    ///
    /// A replaced Node keeps its uid and creationTimestamp, as an update on a
    /// real cluster would.
    pub fn put_node(&self, node: Value) {
        self.shared
            .commit(|store| store.put(Kind::Node, None, node))
            .unwrap_or_else(|e| panic!("put_node: {}", e.message));
    }

    /// Adds or replaces a Pod (a v1 Pod as JSON, `metadata.namespace`
    /// defaulting to "default"), the way the kubelet and scheduler would
    /// leave it: its `spec.nodeName` and `status` are kept as given (phase
    /// Pending when there is none). It is defaulted and validated like a
    /// created Pod, so a test cannot plant a pod a real cluster would not
    /// hold; panics with the API server's message if it is invalid or its
    /// namespace does not exist.
    pub fn put_pod(&self, mut pod: Value) {
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        pod["metadata"]["namespace"] = json!(namespace);
        self.shared
            .commit(|store| store.put(Kind::Pod, Some(&namespace), pod))
            .unwrap_or_else(|e| panic!("put_pod: {}", e.message));
    }

    /// Sets `status.phase` of Pod ns/name (emits MODIFIED); panics if there
    /// is no such Pod. This is the test playing the kubelet.
    pub fn set_pod_phase(&self, namespace: &str, name: &str, phase: &str) {
        self.shared.commit(|store| {
            let i = store
                .position(Kind::Pod, Some(namespace), name)
                .unwrap_or_else(|| panic!("set_pod_phase: no Pod {namespace}/{name}"));
            let previous = store.pods[i].object.clone();
            let rv = store.next_rv();
            let seq = store.pods[i].seq;
            let object = &mut store.pods[i].object;
            object["status"]["phase"] = json!(phase);
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let object = object.clone();
            store.log_event(rv, Kind::Pod, seq, Some(object), Some(previous));
        });
    }

    /// Sets what `container` of Pod ns/name printed, served by
    /// `pods/{name}/log`. This is the test playing the container runtime.
    pub fn set_pod_log(&self, namespace: &str, name: &str, container: &str, text: &str) {
        self.shared.lock().pod_logs.insert(
            (
                namespace.to_string(),
                name.to_string(),
                container.to_string(),
            ),
            text.to_string(),
        );
    }

    /// `kubectl create` of a Pod: through the API as a client creates it
    /// (decoded, defaulted, validated); returns the stored Pod. Panics
    /// with the API server's message if it is refused.
    pub fn kubectl_create_pod(&self, pod: Value) -> Value {
        let namespace = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let body = serde_json::to_vec(&pod).unwrap_or_default();
        if let Err(e) = create(&self.shared, Kind::Pod, &namespace, &BTreeMap::new(), &body) {
            panic!("kubectl create: {}", e.message);
        }
        self.pod(&namespace, &name)
            .unwrap_or_else(|| panic!("kubectl create: {namespace}/{name} not stored"))
    }

    /// Pod ns/name as stored.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.pods()
            .into_iter()
            .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name)
    }

    /// Plays the scheduler and the kubelet for Pod ns/name: binds it to
    /// `node` and sets it Running, if the scheduler could
    /// ([`schedulable_on`]: no gates, node selector and required node
    /// affinity matched); otherwise says why and changes nothing.
    pub fn bind_pod(&self, namespace: &str, name: &str, node: &str) -> Result<(), String> {
        self.shared.commit(|store| {
            let i = store
                .position(Kind::Pod, Some(namespace), name)
                .ok_or_else(|| format!("no Pod {namespace}/{name}"))?;
            let n = store
                .position(Kind::Node, None, node)
                .ok_or_else(|| format!("no Node {node}"))?;
            let previous = store.pods[i].object.clone();
            schedulable_on(&previous, &store.nodes[n].object)?;
            let rv = store.next_rv();
            let seq = store.pods[i].seq;
            let object = &mut store.pods[i].object;
            object["spec"]["nodeName"] = json!(node);
            object["status"]["phase"] = json!("Running");
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let object = object.clone();
            store.log_event(rv, Kind::Pod, seq, Some(object), Some(previous));
            Ok(())
        })
    }

    /// Removes Pod ns/name at once (emits DELETED); panics if there is none.
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.shared.commit(|store| {
            let i = store
                .position(Kind::Pod, Some(namespace), name)
                .unwrap_or_else(|| panic!("delete_pod: no Pod {namespace}/{name}"));
            store.remove_at(Kind::Pod, i);
        });
    }

    /// Plays the Job controller and the scheduler for Job ns/name: makes
    /// its `parallelism` pods from its template (its labels, an owner
    /// reference to the Job), bound to `node_name` and Running, and returns
    /// their names. They go when the Job goes (unless it is orphaned).
    /// Panics if there is no such Job.
    pub fn start_job_pods(&self, namespace: &str, name: &str, node_name: &str) -> Vec<String> {
        let job = {
            let store = self.shared.lock();
            let i = store
                .position(Kind::Job, Some(namespace), name)
                .unwrap_or_else(|| panic!("start_job_pods: no Job {namespace}/{name}"));
            store.jobs[i].object.clone()
        };
        let count = job["spec"]["parallelism"].as_u64().unwrap_or(1);
        let template = &job["spec"]["template"];
        let mut names = Vec::new();
        for i in 0..count {
            let pod_name = format!("{name}-{}", random_suffix(i + 1));
            self.start_owned_pod(
                template,
                &[],
                (namespace, &pod_name),
                ("batch/v1", "Job", &job),
                node_name,
            );
            names.push(pod_name);
        }
        names
    }

    /// A Running pod `namespace/name` bound to `node_name`, made from
    /// `template` (its labels, plus `labels`) and owned by the controller
    /// `(apiVersion, kind, object)`, as that controller and the scheduler
    /// would make it.
    fn start_owned_pod(
        &self,
        template: &Value,
        labels: &[(&str, String)],
        (namespace, name): (&str, &str),
        (api_version, kind, owner): (&str, &str, &Value),
        node_name: &str,
    ) {
        let mut metadata = template["metadata"].clone();
        if !metadata.is_object() {
            metadata = json!({});
        }
        metadata["name"] = json!(name);
        metadata["namespace"] = json!(namespace);
        if !labels.is_empty() && !metadata["labels"].is_object() {
            metadata["labels"] = json!({});
        }
        for (key, value) in labels {
            metadata["labels"][*key] = json!(value);
        }
        metadata["ownerReferences"] = json!([{
            "apiVersion": api_version,
            "kind": kind,
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": true,
            "blockOwnerDeletion": true,
        }]);
        let mut spec = template["spec"].clone();
        spec["nodeName"] = json!(node_name);
        self.put_pod(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": { "phase": "Running" },
        }));
    }

    /// Replaces the `status` of Job ns/name (emits MODIFIED); panics if there
    /// is no such Job.
    ///
    /// This is the test playing the Job controller, which is why it bumps the
    /// resourceVersion but not `metadata.generation`. A status with a
    /// `Complete` or `Failed` condition starts the Job's
    /// `ttlSecondsAfterFinished`, if it has one.
    pub fn set_job_status(&self, namespace: &str, name: &str, status: Value) {
        self.shared.commit(|store| {
            let i = store
                .position(Kind::Job, Some(namespace), name)
                .unwrap_or_else(|| panic!("set_job_status: no Job {namespace}/{name}"));
            let previous = store.jobs[i].object.clone();
            let rv = store.next_rv();
            let finished = job_finished(&status);
            let entry = &mut store.jobs[i];
            entry.finished_at = match (finished, entry.finished_at) {
                (false, _) => None,
                (true, Some(at)) => Some(at),
                (true, None) => Some(Instant::now()),
            };
            let seq = entry.seq;
            let object = &mut entry.object;
            object["status"] = status;
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let object = object.clone();
            store.log_event(rv, Kind::Job, seq, Some(object), Some(previous));
        });
    }

    /// `kubectl create -f job.yaml`: a Job through the API server's own
    /// create path (decoding, defaulting, validation, uid), as a user
    /// creates one; returns it as stored. Panics with the server's
    /// message if it is refused.
    pub fn kubectl_create_job(&self, job: Value) -> Value {
        let namespace = job["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let name = job["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let body = serde_json::to_vec(&job).unwrap_or_default();
        if let Err(e) = create(&self.shared, Kind::Job, &namespace, &BTreeMap::new(), &body) {
            panic!("kubectl create: {}", e.message);
        }
        self.jobs()
            .into_iter()
            .find(|j| j["metadata"]["namespace"] == namespace && j["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("kubectl create: {namespace}/{name} not stored"))
    }

    /// `kubectl patch job --type=merge`: a user's change, under the
    /// update rules (not recorded in [`FakeKube::patches`], which lists
    /// the clients'). Panics with the API server's message if refused.
    pub fn kubectl_patch_job(&self, namespace: &str, name: &str, patch: Value) -> Value {
        self.shared
            .commit(|store| {
                let (i, old, new) = store.patched(Kind::Job, namespace, name, &patch)?;
                store.update_job_at(i, old, new, false)
            })
            .unwrap_or_else(|e: ApiError| panic!("kubectl patch: {}", e.message))
    }

    /// `kubectl delete job`: background propagation (kubectl's default),
    /// so the Job goes at once and the garbage collector removes its pods.
    /// Panics if there is no such Job.
    pub fn kubectl_delete_job(&self, namespace: &str, name: &str) {
        if let Err(e) = delete(
            &self.shared,
            Kind::Job,
            namespace,
            name,
            &BTreeMap::new(),
            b"",
        ) {
            panic!("kubectl delete: {}", e.message);
        }
    }

    /// Plays the JobSet, Job and kube-scheduler controllers for JobSet
    /// ns/name: for every replicated Job, `replicas` times `parallelism`
    /// pods from its pod template (its labels and the JobSet controller's
    /// `jobset.sigs.k8s.io/*` labels), owned by the JobSet (the fake skips
    /// the Jobs in between: nothing fleetq reads is on them), bound to
    /// `node_name` and Running. Returns their names; panics if there is
    /// no such JobSet.
    pub fn start_jobset_pods(&self, namespace: &str, name: &str, node_name: &str) -> Vec<String> {
        let jobset = {
            let store = self.shared.lock();
            let i = store
                .position(Kind::JobSet, Some(namespace), name)
                .unwrap_or_else(|| panic!("start_jobset_pods: no JobSet {namespace}/{name}"));
            store.jobsets[i].object.clone()
        };
        let mut names = Vec::new();
        for job in jobset["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let job_name = job["name"].as_str().unwrap_or_default();
            let template = &job["template"]["spec"]["template"];
            let pods = job["template"]["spec"]["parallelism"].as_u64().unwrap_or(1);
            for index in 0..job["replicas"].as_u64().unwrap_or(1) {
                for pod in 0..pods {
                    let pod_name = format!("{name}-{job_name}-{index}-{pod}");
                    let labels = [
                        ("jobset.sigs.k8s.io/jobset-name", name.to_string()),
                        (
                            "jobset.sigs.k8s.io/replicatedjob-name",
                            job_name.to_string(),
                        ),
                        ("jobset.sigs.k8s.io/job-index", index.to_string()),
                    ];
                    self.start_owned_pod(
                        template,
                        &labels,
                        (namespace, &pod_name),
                        ("jobset.x-k8s.io/v1alpha2", "JobSet", &jobset),
                        node_name,
                    );
                    names.push(pod_name);
                }
            }
        }
        names
    }

    /// Replaces the `status` of JobSet ns/name, as its controller does
    /// (emits MODIFIED); panics if there is no such JobSet.
    pub fn set_jobset_status(&self, namespace: &str, name: &str, status: Value) {
        self.set_custom_status("JobSet", namespace, name, status);
    }

    /// `kubectl create -f jobset.yaml`: a JobSet through the API server's
    /// create path; returns it as stored. Panics with the server's
    /// message if it is refused.
    pub fn kubectl_create_jobset(&self, jobset: Value) -> Value {
        self.kubectl_create_custom(jobset)
    }

    /// `kubectl create -f`: a JobSet, PyTorchJob or RayJob (by its `kind`)
    /// through the API server's create path; returns it as stored.
    /// Panics with the server's message if it is refused.
    pub fn kubectl_create_custom(&self, object: Value) -> Value {
        let kind = custom_kind(object["kind"].as_str().unwrap_or_default());
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let body = serde_json::to_vec(&object).unwrap_or_default();
        if let Err(e) = create(&self.shared, kind, &namespace, &BTreeMap::new(), &body) {
            panic!("kubectl create: {}", e.message);
        }
        self.custom_objects(kind.kind())
            .into_iter()
            .find(|j| j["metadata"]["namespace"] == namespace && j["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("kubectl create: {namespace}/{name} not stored"))
    }

    /// `kubectl patch KIND --type=merge`: a user's change to a PyTorchJob
    /// or RayJob (not recorded in [`FakeKube::patches`]). Panics if
    /// refused.
    pub fn kubectl_patch_custom(&self, kind: &str, namespace: &str, name: &str, patch: Value) {
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        let kind = custom_kind(kind);
        if let Err(e) = patch_custom(
            &self.shared,
            kind,
            namespace,
            name,
            "application/merge-patch+json",
            &body,
        ) {
            panic!("kubectl patch: {}", e.message);
        }
    }

    /// `kubectl delete KIND`: background propagation. Panics if there is
    /// none.
    pub fn kubectl_delete_custom(&self, kind: &str, namespace: &str, name: &str) {
        if let Err(e) = delete(
            &self.shared,
            custom_kind(kind),
            namespace,
            name,
            &BTreeMap::new(),
            b"",
        ) {
            panic!("kubectl delete: {}", e.message);
        }
    }

    /// Every stored PyTorchJob or RayJob (by `kind`).
    pub fn custom_objects(&self, kind: &str) -> Vec<Value> {
        let kind = custom_kind(kind);
        self.shared
            .lock()
            .entries(kind)
            .iter()
            .map(|e| e.object.clone())
            .collect()
    }

    /// Replaces the `status` of PyTorchJob or RayJob ns/name, as its
    /// operator does (emits MODIFIED); panics if there is none.
    pub fn set_custom_status(&self, kind: &str, namespace: &str, name: &str, status: Value) {
        let kind = custom_kind(kind);
        self.shared.commit(|store| {
            let i = store
                .position(kind, Some(namespace), name)
                .unwrap_or_else(|| {
                    panic!("set_custom_status: no {} {namespace}/{name}", kind.kind())
                });
            let previous = store.entries(kind)[i].object.clone();
            let rv = store.next_rv();
            let entry = &mut store.entries_mut(kind)[i];
            let seq = entry.seq;
            entry.object["status"] = status;
            entry.object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let object = entry.object.clone();
            store.log_event(rv, kind, seq, Some(object), Some(previous));
        });
    }

    /// `kubectl delete jobset`: background propagation, so the JobSet
    /// goes at once and the garbage collector removes its pods.
    pub fn kubectl_delete_jobset(&self, namespace: &str, name: &str) {
        self.kubectl_delete_custom("JobSet", namespace, name);
    }

    /// Every JobSet currently stored, in creation order.
    pub fn jobsets(&self) -> Vec<Value> {
        self.custom_objects("JobSet")
    }

    /// Every Job currently stored (with server-set fields), in creation order.
    pub fn jobs(&self) -> Vec<Value> {
        let store = self.shared.lock();
        store.jobs.iter().map(|e| e.object.clone()).collect()
    }

    /// Every PATCH of a Job (main resource) received, in order:
    /// (namespace, name, the patch), accepted or not.
    pub fn patches(&self) -> Vec<(String, String, Value)> {
        self.shared.lock().patches.clone()
    }

    /// Every Event (events.k8s.io/v1) stored, in creation order.
    pub fn events(&self) -> Vec<Value> {
        let store = self.shared.lock();
        store.events.iter().map(|e| e.object.clone()).collect()
    }

    /// Every Pod currently stored, in creation order.
    pub fn pods(&self) -> Vec<Value> {
        let store = self.shared.lock();
        store.pods.iter().map(|e| e.object.clone()).collect()
    }

    /// Every DELETE request received for a Job: (namespace, name, the
    /// DeleteOptions body as JSON or Null when there was none, plus the query
    /// string's propagationPolicy merged in if given that way).
    ///
    /// Requests are recorded whether or not the Job existed, so a test can
    /// check what a client asked for even when it raced the deletion; only a
    /// body that is not JSON at all is rejected without being recorded.
    pub fn deletes(&self) -> Vec<(String, String, Value)> {
        self.shared.lock().deletes.clone()
    }

    /// Every write (POST, PUT, PATCH, DELETE) the fake answered with an
    /// error, in order: what a real API server would have refused of what
    /// the client sent.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.shared.lock().refusals.clone()
    }

    /// Forgets the whole event history, as etcd's compaction does: from now
    /// on a watch from any earlier resourceVersion gets 410 Expired.
    pub fn compact(&self) {
        self.shared.commit(|store| {
            store.log.clear();
            store.compacted = store.rv;
        });
    }

    /// Ends every open watch, and holds new watch requests until
    /// [`FakeKube::resume_watches`] (an API server restarting). Writes made
    /// meanwhile are what a reconnecting client has missed.
    pub fn pause_watches(&self) {
        self.shared.paused.send_replace(true);
    }

    /// Lets held and new watch requests through again.
    pub fn resume_watches(&self) {
        self.shared.paused.send_replace(false);
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // Joining makes the port and all sockets closed by the time drop
            // returns, so a test that restarts a fake never races the old one.
            let _ = thread.join();
        }
    }
}

/// A Ready, schedulable Node JSON with the given name, labels and
/// allocatable/capacity resources (map resource name -> quantity string).
///
/// Only the given labels are set (no `kubernetes.io/hostname`), so label
/// selectors in tests match exactly what the test wrote.
pub fn node(name: &str, labels: &[(&str, &str)], allocatable: &[(&str, &str)]) -> Value {
    let labels: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let resources: Map<String, Value> = allocatable
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let now = rfc3339(SystemTime::now());
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": labels },
        "spec": {},
        "status": {
            "capacity": resources.clone(),
            "allocatable": resources,
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
        },
    })
}

/// A Running Pod JSON in `namespace`, bound to `node_name`, with one
/// container whose limits are `limits` (requests default to them, as the
/// API server does) and the given labels.
pub fn pod(
    namespace: &str,
    name: &str,
    node_name: &str,
    labels: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> Value {
    let labels: Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let limits: Map<String, Value> = limits
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "nodeName": node_name,
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": "busybox",
                "resources": { "limits": limits },
            }],
        },
        "status": { "phase": "Running" },
    })
}

/// Whether a Job status carries a true `Complete` or `Failed` condition.
fn job_finished(status: &Value) -> bool {
    status["conditions"].as_array().is_some_and(|conditions| {
        conditions.iter().any(|c| {
            matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True"
        })
    })
}

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------

/// The resources the fake serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Node,
    Pod,
    Job,
    /// jobset.x-k8s.io/v1alpha2 JobSet, where [`Options::jobset_api`].
    JobSet,
    /// kubeflow.org/v1 PyTorchJob, where [`Options::kubeflow_api`].
    PyTorchJob,
    /// ray.io/v1 RayJob, where [`Options::ray_api`].
    RayJob,
    /// events.k8s.io/v1 Event (what kube's event `Recorder` writes).
    Event,
}

impl Kind {
    fn api_version(self) -> &'static str {
        match self {
            Kind::Node | Kind::Pod => "v1",
            Kind::Job => "batch/v1",
            Kind::JobSet => "jobset.x-k8s.io/v1alpha2",
            Kind::PyTorchJob => "kubeflow.org/v1",
            Kind::RayJob => "ray.io/v1",
            Kind::Event => "events.k8s.io/v1",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::Job => "Job",
            Kind::JobSet => "JobSet",
            Kind::PyTorchJob => "PyTorchJob",
            Kind::RayJob => "RayJob",
            Kind::Event => "Event",
        }
    }

    fn list_kind(self) -> &'static str {
        match self {
            Kind::Node => "NodeList",
            Kind::Pod => "PodList",
            Kind::Job => "JobList",
            Kind::JobSet => "JobSetList",
            Kind::PyTorchJob => "PyTorchJobList",
            Kind::RayJob => "RayJobList",
            Kind::Event => "EventList",
        }
    }

    /// The plural resource name, as `Status.details.kind` spells it.
    fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::Job => "jobs",
            Kind::JobSet => "jobsets",
            Kind::PyTorchJob => "pytorchjobs",
            Kind::RayJob => "rayjobs",
            Kind::Event => "events",
        }
    }

    fn group(self) -> &'static str {
        match self {
            Kind::Node | Kind::Pod => "",
            Kind::Job => "batch",
            Kind::JobSet => "jobset.x-k8s.io",
            Kind::PyTorchJob => "kubeflow.org",
            Kind::RayJob => "ray.io",
            Kind::Event => "events.k8s.io",
        }
    }

    fn namespaced(self) -> bool {
        !matches!(self, Kind::Node)
    }

    /// "nodes" or "jobs.batch", the way the API server names a resource in
    /// error messages.
    fn qualified(self) -> String {
        match self.group() {
            "" => self.plural().to_string(),
            group => format!("{}.{group}", self.plural()),
        }
    }

    /// "Pod" or "Job.batch": the qualified kind of a 422's message.
    fn qualified_kind(self) -> String {
        match self.group() {
            "" => self.kind().to_string(),
            group => format!("{}.{group}", self.kind()),
        }
    }
}

/// A stored object and its creation sequence number; the sequence number
/// orders lists and serves as the continue token, so pagination stays stable
/// while objects come and go.
struct Entry {
    seq: u64,
    object: Value,
    /// When the fake first saw this Job finished (for its TTL).
    finished_at: Option<Instant>,
}

/// One change as it was committed; the log is what lets a watch resume
/// from a resourceVersion, and an exact list go back to one.
struct LoggedEvent {
    rv: u64,
    kind: Kind,
    seq: u64,
    /// The object after the change; None when it was deleted.
    current: Option<Value>,
    /// The object before the change; None when it was created.
    previous: Option<Value>,
}

impl LoggedEvent {
    /// The watch event a watcher with `filter` gets for this change, if
    /// any. Like the watch cache, it compares the object before and after:
    /// an object that starts to match is ADDED, one that stops matching is
    /// DELETED (with its previous content at this resourceVersion).
    fn as_seen_by(&self, filter: &Filter) -> Option<(&'static str, Value)> {
        if self.kind != filter.kind {
            return None;
        }
        let now = self.current.as_ref().filter(|o| filter.matches(o));
        let before = self.previous.as_ref().filter(|o| filter.matches(o));
        match (now, before) {
            (Some(o), None) => Some(("ADDED", o.clone())),
            (Some(o), Some(_)) => Some(("MODIFIED", o.clone())),
            (None, Some(o)) => {
                let mut o = o.clone();
                o["metadata"]["resourceVersion"] = json!(self.rv.to_string());
                Some(("DELETED", o))
            }
            (None, None) => None,
        }
    }
}

#[derive(Default)]
struct Store {
    /// The last resourceVersion handed out (one counter for everything, like
    /// etcd's revision).
    rv: u64,
    seq: u64,
    nodes: Vec<Entry>,
    pods: Vec<Entry>,
    jobs: Vec<Entry>,
    jobsets: Vec<Entry>,
    events: Vec<Entry>,
    namespaces: BTreeSet<String>,
    /// [`Options::jobset_api`].
    jobset_api: bool,
    pytorchjobs: Vec<Entry>,
    /// [`Options::kubeflow_api`].
    kubeflow_api: bool,
    rayjobs: Vec<Entry>,
    /// [`Options::ray_api`].
    ray_api: bool,
    log: VecDeque<LoggedEvent>,
    /// How many events `log` keeps.
    window: usize,
    /// Every event at or below this resourceVersion is gone from `log`.
    compacted: u64,
    deletes: Vec<(String, String, Value)>,
    /// Every merge patch of a Job's main resource: (namespace, name, patch).
    patches: Vec<(String, String, Value)>,
    refusals: Vec<Refusal>,
    /// What each pod's containers printed, by (namespace, pod, container):
    /// the test plays the container runtime ([`FakeKube::set_pod_log`]).
    pod_logs: BTreeMap<(String, String, String), String>,
}

impl Store {
    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn entries(&self, kind: Kind) -> &Vec<Entry> {
        match kind {
            Kind::Node => &self.nodes,
            Kind::Pod => &self.pods,
            Kind::Job => &self.jobs,
            Kind::JobSet => &self.jobsets,
            Kind::PyTorchJob => &self.pytorchjobs,
            Kind::RayJob => &self.rayjobs,
            Kind::Event => &self.events,
        }
    }

    fn entries_mut(&mut self, kind: Kind) -> &mut Vec<Entry> {
        match kind {
            Kind::Node => &mut self.nodes,
            Kind::Pod => &mut self.pods,
            Kind::Job => &mut self.jobs,
            Kind::JobSet => &mut self.jobsets,
            Kind::PyTorchJob => &mut self.pytorchjobs,
            Kind::RayJob => &mut self.rayjobs,
            Kind::Event => &mut self.events,
        }
    }

    fn position(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<usize> {
        self.entries(kind).iter().position(|e| {
            e.object["metadata"]["name"].as_str() == Some(name)
                && namespace.is_none_or(|ns| e.object["metadata"]["namespace"].as_str() == Some(ns))
        })
    }

    fn log_event(
        &mut self,
        rv: u64,
        kind: Kind,
        seq: u64,
        current: Option<Value>,
        previous: Option<Value>,
    ) {
        self.log.push_back(LoggedEvent {
            rv,
            kind,
            seq,
            current,
            previous,
        });
        while self.log.len() > self.window {
            if let Some(dropped) = self.log.pop_front() {
                self.compacted = dropped.rv;
            }
        }
    }

    /// The 410 a watch or list from `rv` gets once history before it is
    /// gone, in the watch cache's words.
    fn too_old(&self, rv: u64) -> ApiError {
        ApiError {
            code: 410,
            reason: "Expired",
            message: format!("too old resource version: {rv} ({})", self.compacted),
            details: None,
        }
    }

    /// Watch lines for the logged events after `after` as a watcher with
    /// `filter` sees them, and the resourceVersion it has now seen up to;
    /// 410 when events after `after` are no longer kept.
    fn events_after(&self, after: u64, filter: &Filter) -> Result<(Vec<Bytes>, u64), ApiError> {
        if after < self.compacted {
            return Err(self.too_old(after));
        }
        let start = self.log.partition_point(|e| e.rv <= after);
        let lines = self
            .log
            .range(start..)
            .filter_map(|e| e.as_seen_by(filter))
            .map(|(kind_of_event, object)| watch_line(kind_of_event, &object))
            .collect();
        Ok((lines, self.rv.max(after)))
    }

    /// Every object of `kind` as it was at resourceVersion `rv` (by
    /// creation sequence), undoing the logged changes after it.
    fn state_at(&self, kind: Kind, rv: u64) -> Result<BTreeMap<u64, Value>, ApiError> {
        if rv < self.compacted {
            return Err(self.too_old(rv));
        }
        let mut objects: BTreeMap<u64, Value> = self
            .entries(kind)
            .iter()
            .map(|e| (e.seq, e.object.clone()))
            .collect();
        for event in self.log.iter().rev().take_while(|e| e.rv > rv) {
            if event.kind != kind {
                continue;
            }
            match &event.previous {
                Some(before) => objects.insert(event.seq, before.clone()),
                None => objects.remove(&event.seq),
            };
        }
        Ok(objects)
    }

    /// Adds or replaces an object the way the test, playing a controller,
    /// writes it: Nodes as given; Pods decoded, defaulted and validated as
    /// the API server would (keeping the given status).
    fn put(&mut self, kind: Kind, namespace: Option<&str>, object: Value) -> Result<(), ApiError> {
        if let Some(ns) = namespace {
            if !self.namespaces.contains(ns) {
                return Err(ApiError::namespace_not_found(ns));
            }
        }
        let mut object = match kind {
            Kind::Pod => decode(kind, object)?,
            _ => object,
        };
        let name = object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::bad_request("the object needs a metadata.name"))?;
        if kind == Kind::Pod {
            default_pod(&mut object);
            let errors = validate_pod(&object);
            if !errors.is_empty() {
                return Err(ApiError::invalid(kind, &name, errors));
            }
        }
        let obj = object
            .as_object_mut()
            .ok_or_else(|| ApiError::bad_request("the object must be a JSON object"))?;
        let rv = self.next_rv();
        let existing = self.position(kind, namespace, &name);
        let previous = existing.map(|i| self.entries(kind)[i].object.clone());
        obj.insert("apiVersion".into(), json!(kind.api_version()));
        obj.insert("kind".into(), json!(kind.kind()));
        let meta = metadata_mut(obj).map_err(ApiError::bad_request)?;
        for key in ["uid", "creationTimestamp"] {
            let kept = previous.as_ref().map(|p| p["metadata"][key].clone());
            match kept {
                Some(v) if !v.is_null() => {
                    meta.insert(key.into(), v);
                }
                _ => {
                    if !meta.contains_key(key) {
                        let fresh = if key == "uid" {
                            json!(uid(rv))
                        } else {
                            json!(rfc3339(SystemTime::now()))
                        };
                        meta.insert(key.into(), fresh);
                    }
                }
            }
        }
        match namespace {
            Some(ns) => meta.insert("namespace".into(), json!(ns)),
            None => meta.remove("namespace"),
        };
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        let object = Value::Object(obj.clone());
        match existing {
            Some(i) => {
                let seq = self.entries(kind)[i].seq;
                self.entries_mut(kind)[i].object = object.clone();
                self.log_event(rv, kind, seq, Some(object), previous);
            }
            None => {
                let seq = self.next_seq();
                self.entries_mut(kind).push(Entry {
                    seq,
                    object: object.clone(),
                    finished_at: None,
                });
                self.log_event(rv, kind, seq, Some(object), None);
            }
        }
        Ok(())
    }

    /// Removes the object at `i` of `kind` (emits DELETED) and returns it
    /// with the deletion's resourceVersion.
    fn remove_at(&mut self, kind: Kind, i: usize) -> Value {
        let rv = self.next_rv();
        let entry = self.entries_mut(kind).remove(i);
        let previous = entry.object.clone();
        let mut object = entry.object;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.log_event(rv, kind, entry.seq, None, Some(previous));
        object
    }

    /// The garbage collector's cascade: removes every Pod whose owner
    /// references name `owner_uid`.
    fn remove_dependents(&mut self, owner_uid: &Value) {
        while let Some(i) = self.pods.iter().position(|p| {
            p.object["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| refs.iter().any(|r| r["uid"] == *owner_uid))
        }) {
            self.remove_at(Kind::Pod, i);
        }
    }
}

struct Shared {
    store: Mutex<Store>,
    /// Carries the latest resourceVersion; watch streams wait on it instead
    /// of polling.
    changed: watch::Sender<u64>,
    /// True while watches are paused ([`FakeKube::pause_watches`]).
    paused: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock can only come from a test-side
        // method (e.g. set_job_status on a missing Job); the store is still
        // consistent then, so keep serving rather than cascade the panic.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `change` under the lock, then wakes every watch stream.
    ///
    /// Waking after the lock is released, and after the events are in the
    /// log, is what lets a stream that subscribed before reading the log
    /// never miss an event.
    fn commit<R>(&self, change: impl FnOnce(&mut Store) -> R) -> R {
        let (result, rv) = {
            let mut store = self.lock();
            let result = change(&mut store);
            (result, store.rv)
        };
        self.changed.send_replace(rv);
        result
    }
}

// ---------------------------------------------------------------------------
// Serving
// ---------------------------------------------------------------------------

type Body = UnsyncBoxBody<Bytes, Infallible>;

async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        // E.g. out of file descriptors: back off rather than
                        // spin, and keep serving the connections we have.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(shared, req).await) }
                    });
                    // A client that hangs up mid-request is its business.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
    }
}

/// The API server's error shape: kube turns any 4xx/5xx whose body parses
/// as a `Status` into `kube::Error::Api`, so every failure goes out as one.
struct ApiError {
    code: u16,
    reason: &'static str,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    /// 422 Invalid, as `errors.NewInvalid` builds it: every field error in
    /// the message and as a cause naming its field.
    fn invalid(kind: Kind, name: &str, errors: Vec<FieldError>) -> ApiError {
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({ "reason": e.reason(), "message": e.body(), "field": e.field }))
            .collect();
        let listed: Vec<String> = errors.iter().map(FieldError::to_string).collect();
        let aggregate = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut details = json!({ "name": name, "kind": kind.kind(), "causes": causes });
        if !kind.group().is_empty() {
            details["group"] = json!(kind.group());
        }
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "{} {} is invalid: {aggregate}",
                kind.qualified_kind(),
                go_quote(name)
            ),
            details: Some(details),
        }
    }

    fn not_found(kind: Kind, name: &str) -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{name}\" not found", kind.qualified()),
            details: Some(details(kind, name)),
        }
    }

    /// What the NamespaceLifecycle admission plugin answers to a create in
    /// a namespace that does not exist.
    fn namespace_not_found(namespace: &str) -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("namespaces \"{namespace}\" not found"),
            details: Some(json!({ "name": namespace, "kind": "namespaces" })),
        }
    }

    fn already_exists(kind: Kind, name: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{name}\" already exists", kind.qualified()),
            details: Some(details(kind, name)),
        }
    }

    fn conflict(kind: Kind, name: &str, message: String) -> ApiError {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {message}",
                kind.qualified()
            ),
            details: Some(details(kind, name)),
        }
    }

    fn method_not_allowed() -> ApiError {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource \
                      (the fake serves GET and list/watch of nodes, pods and Jobs; POST and \
                      DELETE of pods and Jobs; PUT and PATCH of Jobs)"
                .into(),
            details: None,
        }
    }

    fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: application/merge-patch+json, application/strategic-merge-patch+json \
                 (the fake has no JSON patch or apply); got {content_type:?}"
            ),
            details: None,
        }
    }

    /// A resourceVersion the server has not reached yet.
    fn too_large(rv: u64, current: u64) -> ApiError {
        ApiError {
            code: 504,
            reason: "Timeout",
            message: format!("Too large resource version: {rv}, current: {current}"),
            details: Some(json!({
                "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
                "retryAfterSeconds": 1,
            })),
        }
    }

    fn unknown_path(path: &str) -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("the server could not find the requested resource: {path}"),
            details: None,
        }
    }

    fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }

    fn into_response(self) -> Response<Body> {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.status())
    }
}

fn details(kind: Kind, name: &str) -> Value {
    let mut details = json!({ "name": name, "kind": kind.plural() });
    if !kind.group().is_empty() {
        details["group"] = json!(kind.group());
    }
    details
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let body = Full::new(Bytes::from(value.to_string())).boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// What a request path names.
enum Route {
    Version,
    /// A collection; `namespace` is None for cluster-wide (all Nodes, or
    /// Pods or Jobs across namespaces).
    Collection {
        kind: Kind,
        namespace: Option<String>,
    },
    Item {
        kind: Kind,
        namespace: Option<String>,
        name: String,
    },
    /// `pods/{name}/log`.
    PodLog {
        namespace: String,
        name: String,
    },
    /// `jobsets/{name}/status`: the status subresource.
    JobSetStatus {
        namespace: String,
        name: String,
    },
    /// `jobs/{name}/status`: the status subresource.
    JobStatus {
        namespace: String,
        name: String,
    },
}

fn route(path: &str) -> Result<Route, ApiError> {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    let segments = trimmed
        .split('/')
        .map(|s| percent_decode(s, false))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ApiError::bad_request)?;
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let collection = |kind, namespace: Option<&str>| {
        Ok(Route::Collection {
            kind,
            namespace: namespace.map(str::to_owned),
        })
    };
    let item = |kind, namespace: Option<&str>, name: &str| {
        Ok(Route::Item {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_string(),
        })
    };
    match segments.as_slice() {
        ["version"] => Ok(Route::Version),
        ["api", "v1", "nodes"] => collection(Kind::Node, None),
        ["api", "v1", "nodes", name] if !name.is_empty() => item(Kind::Node, None, name),
        ["api", "v1", "pods"] => collection(Kind::Pod, None),
        ["api", "v1", "namespaces", ns, "pods"] if !ns.is_empty() => {
            collection(Kind::Pod, Some(ns))
        }
        ["api", "v1", "namespaces", ns, "pods", name] if !ns.is_empty() && !name.is_empty() => {
            item(Kind::Pod, Some(ns), name)
        }
        ["api", "v1", "namespaces", ns, "pods", name, "log"]
            if !ns.is_empty() && !name.is_empty() =>
        {
            Ok(Route::PodLog {
                namespace: ns.to_string(),
                name: name.to_string(),
            })
        }
        ["apis", "batch", "v1", "jobs"] => collection(Kind::Job, None),
        ["apis", "jobset.x-k8s.io", "v1alpha2", "jobsets"] => collection(Kind::JobSet, None),
        ["apis", "kubeflow.org", "v1", "pytorchjobs"] => collection(Kind::PyTorchJob, None),
        ["apis", "ray.io", "v1", "rayjobs"] => collection(Kind::RayJob, None),
        ["apis", "ray.io", "v1", "namespaces", ns, "rayjobs"] if !ns.is_empty() => {
            collection(Kind::RayJob, Some(ns))
        }
        ["apis", "ray.io", "v1", "namespaces", ns, "rayjobs", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            item(Kind::RayJob, Some(ns), name)
        }
        ["apis", "kubeflow.org", "v1", "namespaces", ns, "pytorchjobs"] if !ns.is_empty() => {
            collection(Kind::PyTorchJob, Some(ns))
        }
        ["apis", "kubeflow.org", "v1", "namespaces", ns, "pytorchjobs", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            item(Kind::PyTorchJob, Some(ns), name)
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets"] if !ns.is_empty() => {
            collection(Kind::JobSet, Some(ns))
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            item(Kind::JobSet, Some(ns), name)
        }
        ["apis", "jobset.x-k8s.io", "v1alpha2", "namespaces", ns, "jobsets", name, "status"]
            if !ns.is_empty() && !name.is_empty() =>
        {
            Ok(Route::JobSetStatus {
                namespace: ns.to_string(),
                name: name.to_string(),
            })
        }
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events"] if !ns.is_empty() => {
            collection(Kind::Event, Some(ns))
        }
        ["apis", "events.k8s.io", "v1", "namespaces", ns, "events", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            item(Kind::Event, Some(ns), name)
        }
        ["apis", "batch", "v1", "namespaces", ns, "jobs"] if !ns.is_empty() => {
            collection(Kind::Job, Some(ns))
        }
        ["apis", "batch", "v1", "namespaces", ns, "jobs", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            item(Kind::Job, Some(ns), name)
        }
        ["apis", "batch", "v1", "namespaces", ns, "jobs", name, "status"]
            if !ns.is_empty() && !name.is_empty() =>
        {
            Ok(Route::JobStatus {
                namespace: ns.to_string(),
                name: name.to_string(),
            })
        }
        _ => Err(ApiError::unknown_path(path)),
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    match dispatch(shared.clone(), req).await {
        Ok(response) => response,
        Err(e) => {
            if method != Method::GET {
                shared
                    .lock()
                    .refusals
                    .push((method.to_string(), path, e.code, e.message.clone()));
            }
            e.into_response()
        }
    }
}

async fn dispatch(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let route = route(req.uri().path())?;
    let jobset_path = matches!(
        route,
        Route::Collection {
            kind: Kind::JobSet,
            ..
        } | Route::Item {
            kind: Kind::JobSet,
            ..
        } | Route::JobSetStatus { .. }
    );
    if jobset_path && !shared.lock().jobset_api {
        return Err(ApiError::unknown_path(req.uri().path()));
    }
    let kubeflow_path = matches!(
        route,
        Route::Collection {
            kind: Kind::PyTorchJob,
            ..
        } | Route::Item {
            kind: Kind::PyTorchJob,
            ..
        }
    );
    if kubeflow_path && !shared.lock().kubeflow_api {
        return Err(ApiError::unknown_path(req.uri().path()));
    }
    let ray_path = matches!(
        route,
        Route::Collection {
            kind: Kind::RayJob,
            ..
        } | Route::Item {
            kind: Kind::RayJob,
            ..
        }
    );
    if ray_path && !shared.lock().ray_api {
        return Err(ApiError::unknown_path(req.uri().path()));
    }
    let query = parse_query(req.uri().query().unwrap_or("")).map_err(ApiError::bad_request)?;
    let method = req.method().clone();
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?
        .to_bytes();
    match (route, method) {
        (Route::Version, Method::GET) => Ok(json_response(StatusCode::OK, &version())),
        (Route::PodLog { namespace, name }, Method::GET) => {
            pod_log(&shared, &namespace, &name, &query)
        }
        (Route::JobStatus { namespace, name }, Method::GET) => {
            get(&shared, Kind::Job, Some(&namespace), &name)
        }
        (Route::JobStatus { namespace, name }, Method::PATCH) => {
            patch_job_status(&shared, &namespace, &name, &content_type, &query, &body)
        }
        (Route::JobSetStatus { namespace, name }, Method::GET) => {
            get(&shared, Kind::JobSet, Some(&namespace), &name)
        }
        (Route::JobSetStatus { namespace, name }, Method::PATCH) => {
            patch_jobset_status(&shared, &namespace, &name, &content_type, &query, &body)
        }
        (
            Route::Item {
                kind: Kind::JobSet,
                namespace: Some(namespace),
                name,
            },
            Method::PATCH,
        ) => patch_jobset(&shared, &namespace, &name, &content_type, &query, &body),
        (Route::Collection { kind, namespace }, Method::GET) => {
            let filter = Filter::from_query(kind, namespace, &query)?;
            if is_watch(&query)? {
                watch_collection(shared, filter, &query).await
            } else {
                list(&shared, &filter, &query)
            }
        }
        (
            Route::Collection {
                kind:
                    kind @ (Kind::Job
                    | Kind::JobSet
                    | Kind::PyTorchJob
                    | Kind::RayJob
                    | Kind::Pod
                    | Kind::Event),
                namespace: Some(namespace),
            },
            Method::POST,
        ) => create(&shared, kind, &namespace, &query, &body),
        (
            Route::Item {
                kind,
                namespace,
                name,
            },
            Method::GET,
        ) => get(&shared, kind, namespace.as_deref(), &name),
        (
            Route::Item {
                kind: Kind::Job,
                namespace: Some(namespace),
                name,
            },
            Method::PUT,
        ) => update_job(&shared, &namespace, &name, &query, &body),
        (
            Route::Item {
                kind: Kind::Job,
                namespace: Some(namespace),
                name,
            },
            Method::PATCH,
        ) => patch_job(&shared, &namespace, &name, &content_type, &query, &body),
        (
            Route::Item {
                kind: Kind::Event,
                namespace: Some(namespace),
                name,
            },
            Method::PATCH,
        ) => patch_event(&shared, &namespace, &name, &content_type, &body),
        (
            Route::Item {
                kind: Kind::Pod,
                namespace: Some(namespace),
                name,
            },
            Method::PATCH,
        ) => patch_pod(&shared, &namespace, &name, &content_type, &body),
        (
            Route::Item {
                kind: kind @ (Kind::PyTorchJob | Kind::RayJob),
                namespace: Some(namespace),
                name,
            },
            Method::PATCH,
        ) => patch_custom(&shared, kind, &namespace, &name, &content_type, &body),
        (
            Route::Item {
                kind:
                    kind @ (Kind::Job | Kind::JobSet | Kind::PyTorchJob | Kind::RayJob | Kind::Pod),
                namespace: Some(namespace),
                name,
            },
            Method::DELETE,
        ) => delete(&shared, kind, &namespace, &name, &query, &body),
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a5551a203a0c1bd1ed2b2d",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:07:55Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `GET pods/{name}/log` as the API server answers it: 404 for a pod
/// that does not exist; 400 without `container` when the pod has several
/// containers, or naming one it lacks; `tailLines` keeps the last lines,
/// then `limitBytes` cuts from their start; the body is plain text.
fn pod_log(
    shared: &Shared,
    namespace: &str,
    name: &str,
    query: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let store = shared.lock();
    let i = store
        .position(Kind::Pod, Some(namespace), name)
        .ok_or_else(|| ApiError::not_found(Kind::Pod, name))?;
    let containers: Vec<String> = store.pods[i].object["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let container = match query.get("container") {
        Some(c) if containers.contains(c) => c.clone(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )))
        }
    };
    let number = |key: &str| -> Result<Option<usize>, ApiError> {
        query
            .get(key)
            .map(|v| {
                v.parse::<usize>()
                    .map_err(|_| ApiError::bad_request(format!("{key}: {v:?} is not a number")))
            })
            .transpose()
    };
    let text = store
        .pod_logs
        .get(&(namespace.to_string(), name.to_string(), container))
        .cloned()
        .unwrap_or_default();
    let mut text = match number("tailLines")? {
        Some(n) => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            lines[lines.len().saturating_sub(n)..].concat()
        }
        None => text,
    };
    if let Some(limit) = number("limitBytes")? {
        let mut cut = limit.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(response)
}

fn get(
    shared: &Shared,
    kind: Kind,
    namespace: Option<&str>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let store = shared.lock();
    let i = store
        .position(kind, namespace, name)
        .ok_or_else(|| ApiError::not_found(kind, name))?;
    Ok(json_response(
        StatusCode::OK,
        &store.entries(kind)[i].object,
    ))
}

/// Lists, following the API's resourceVersion semantics: unset, "0" or
/// `resourceVersionMatch=NotOlderThan` get the latest state (a version the
/// server has not reached is 504); `resourceVersionMatch=Exact` gets the
/// state at that version, 410 Expired once it is older than the kept
/// history. `limit`/`continue` page through one consistent snapshot: the
/// continue token carries its resourceVersion, and expires the same way.
fn list(
    shared: &Shared,
    filter: &Filter,
    query: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let limit = match query.get("limit").map(String::as_str) {
        None | Some("") => None,
        Some(s) => match s.parse::<usize>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => return Err(ApiError::bad_request(format!("invalid limit {s:?}"))),
        },
    };
    let rv = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid resourceVersion {s:?} for a list"))
        })?),
    };
    let exact = match query.get("resourceVersionMatch").map(String::as_str) {
        None | Some("") | Some("NotOlderThan") => false,
        Some("Exact") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
            )))
        }
    };
    if exact && rv.is_none_or(|rv| rv == 0) {
        return Err(ApiError::bad_request(
            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\" or unset",
        ));
    }
    let store = shared.lock();
    let (snapshot, after) = match query.get("continue").map(String::as_str) {
        None | Some("") => {
            let at = match rv {
                Some(rv) if rv > store.rv => return Err(ApiError::too_large(rv, store.rv)),
                Some(rv) if exact => rv,
                _ => store.rv,
            };
            (at, 0)
        }
        Some(token) => {
            let parsed = token
                .split_once(':')
                .and_then(|(rv, seq)| Some((rv.parse::<u64>().ok()?, seq.parse::<u64>().ok()?)));
            let (at, seq) = parsed.ok_or_else(|| {
                ApiError::bad_request(format!("continue key is not valid: {token:?}"))
            })?;
            if at < store.compacted {
                return Err(ApiError {
                    code: 410,
                    reason: "Expired",
                    message: "The provided continue parameter is too old to display a \
                              consistent list result. You can start a new list without the \
                              continue parameter."
                        .into(),
                    details: None,
                });
            }
            (at, seq)
        }
    };
    let objects: Vec<(u64, Value)> = if snapshot == store.rv {
        store
            .entries(filter.kind)
            .iter()
            .map(|e| (e.seq, e.object.clone()))
            .collect()
    } else {
        store.state_at(filter.kind, snapshot)?.into_iter().collect()
    };
    let matching: Vec<(u64, Value)> = objects
        .into_iter()
        .filter(|(seq, object)| *seq > after && filter.matches(object))
        .collect();
    let take = limit.unwrap_or(matching.len()).min(matching.len());
    let mut metadata = json!({ "resourceVersion": snapshot.to_string() });
    if take < matching.len() {
        metadata["continue"] = json!(format!("{snapshot}:{}", matching[take - 1].0));
        metadata["remainingItemCount"] = json!(matching.len() - take);
    }
    let items: Vec<Value> = matching.into_iter().take(take).map(|(_, o)| o).collect();
    let list = json!({
        "apiVersion": filter.kind.api_version(),
        "kind": filter.kind.list_kind(),
        "metadata": metadata,
        "items": items,
    });
    Ok(json_response(StatusCode::OK, &list))
}

/// Decodes a request body as the API server's JSON serializer would into
/// `kind`'s typed object: a body that is not a JSON object, a wrong
/// apiVersion or kind, or a field of the wrong type is a 400; fields the
/// type does not have are dropped (fieldValidation=Warn, the default).
fn decode(kind: Kind, mut value: Value) -> Result<Value, ApiError> {
    let obj = value
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body is not a JSON object"))?;
    for (field, expected) in [("apiVersion", kind.api_version()), ("kind", kind.kind())] {
        match obj.get(field) {
            None => {}
            Some(Value::String(s)) if s == expected => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "{field} is {other}, expected {expected:?} for a {}",
                    kind.kind()
                )))
            }
        }
        obj.insert(field.into(), json!(expected));
    }
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::events::v1::Event;
    let typed = match kind {
        Kind::JobSet => decode_jobset(value),
        Kind::PyTorchJob => decode_pytorchjob(value),
        Kind::RayJob => decode_rayjob(value),
        Kind::Event => serde_json::from_value::<Event>(value).and_then(serde_json::to_value),
        Kind::Job => serde_json::from_value::<Job>(value).and_then(serde_json::to_value),
        Kind::Pod => serde_json::from_value::<Pod>(value).and_then(serde_json::to_value),
        Kind::Node => serde_json::from_value::<Node>(value).and_then(serde_json::to_value),
    };
    let decoded = typed.map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version \"v1\" cannot be handled as a {}: {e}",
            kind.kind(),
            kind.kind()
        ))
    })?;
    // Quantities are parsed while decoding, so a malformed one is a 400
    // too.
    let pod_specs: Vec<&Value> = match kind {
        Kind::Job => vec![&decoded["spec"]["template"]["spec"]],
        Kind::JobSet => decoded["spec"]["replicatedJobs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|job| &job["template"]["spec"]["template"]["spec"])
            .collect(),
        Kind::PyTorchJob => decoded["spec"]["pytorchReplicaSpecs"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, replica)| &replica["template"]["spec"])
            .collect(),
        Kind::RayJob => rayjob_pod_templates(&decoded)
            .into_iter()
            .map(|(_, t)| &t["spec"])
            .collect(),
        Kind::Event => Vec::new(),
        _ => vec![&decoded["spec"]],
    };
    for (pod_spec, key) in pod_specs
        .iter()
        .flat_map(|spec| [(spec, "containers"), (spec, "initContainers")])
    {
        for container in pod_spec[key].as_array().into_iter().flatten() {
            for section in ["requests", "limits"] {
                let amounts = container["resources"][section].as_object();
                for (name, q) in amounts.into_iter().flatten() {
                    // A JSON number is a quantity too (the int-or-string of
                    // resource.Quantity's JSON form).
                    let text = match q {
                        Value::Number(n) => n.to_string(),
                        other => other.as_str().unwrap_or_default().to_string(),
                    };
                    let text = text.as_str();
                    if milli(text).is_none() {
                        return Err(ApiError::bad_request(format!(
                            "{} in version \"v1\" cannot be handled as a {}: quantities must \
                             match the regular expression \
                             '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' \
                             (resources.{section}[{name}]: {text:?})",
                            kind.kind(),
                            kind.kind()
                        )));
                    }
                }
            }
        }
    }
    Ok(decoded)
}

/// POST of a Pod or Job, in the API server's order: decode (400),
/// namespace lifecycle (404), name generation, defaulting, validation
/// (422), then storage (409).
fn create(
    shared: &Shared,
    kind: Kind,
    namespace: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not a JSON {}: {e}",
            kind.kind()
        ))
    })?;
    let mut object = decode(kind, value)?;
    let dry_run = query.contains_key("dryRun");
    let obj = object
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body is not a JSON object"))?;
    let meta = metadata_mut(obj).map_err(ApiError::bad_request)?;
    match meta.get("namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(ns)) if ns.is_empty() || ns == namespace => {}
        Some(_) => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
    meta.insert("namespace".into(), json!(namespace));
    let given_name = meta
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let generate_name = meta
        .get("generateName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    for server_owned in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        meta.remove(server_owned);
    }

    let created = shared.commit(|store| {
        if !store.namespaces.contains(namespace) {
            return Err(ApiError::namespace_not_found(namespace));
        }
        let name = match (&given_name, &generate_name) {
            (Some(name), _) => name.clone(),
            (None, Some(prefix)) => format!("{prefix}{}", random_suffix(store.seq + 1)),
            (None, None) => String::new(),
        };
        let rv = store.rv + 1;
        let mut object = object.clone();
        let meta = &mut object["metadata"];
        meta["name"] = json!(name);
        meta["uid"] = json!(uid(rv));
        meta["creationTimestamp"] = json!(rfc3339(SystemTime::now()));
        match kind {
            Kind::Job => {
                meta["generation"] = json!(1);
                default_job(&mut object);
                generate_selector(&mut object);
                // The API server resets status on create; only the
                // controller (here: set_job_status) writes it.
                object["status"] = json!({});
            }
            Kind::JobSet => {
                meta["generation"] = json!(1);
                default_jobset(&mut object);
                object["status"] = json!({});
            }
            Kind::PyTorchJob | Kind::RayJob => {
                meta["generation"] = json!(1);
                object["status"] = json!({});
            }
            Kind::Event => {}
            _ => {
                default_pod(&mut object);
                object["status"] = json!({ "phase": "Pending" });
            }
        }
        let errors = match kind {
            Kind::Job => validate_job(&object),
            Kind::JobSet => validate_jobset(&object),
            Kind::PyTorchJob => validate_pytorchjob(&object),
            Kind::RayJob => validate_rayjob(&object),
            Kind::Event => validate_event(&object),
            _ => validate_pod(&object),
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid(kind, &name, errors));
        }
        if store.position(kind, Some(namespace), &name).is_some() {
            return Err(ApiError::already_exists(kind, &name));
        }
        if !dry_run {
            let rv = store.next_rv();
            let seq = store.next_seq();
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            store.entries_mut(kind).push(Entry {
                seq,
                object: object.clone(),
                finished_at: None,
            });
            store.log_event(rv, kind, seq, Some(object.clone()), None);
        } else {
            object["metadata"]["resourceVersion"] = json!(store.rv.to_string());
        }
        Ok(object)
    })?;
    Ok(json_response(StatusCode::CREATED, &created))
}

/// PUT of a Job: the whole object, applied over the stored one under the
/// update rules (server-owned metadata and status kept, optimistic
/// concurrency on resourceVersion, immutable fields checked).
fn update_job(
    shared: &Shared,
    namespace: &str,
    name: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not a JSON Job: {e}")))?;
    let new = decode(Kind::Job, value)?;
    match new["metadata"]["name"].as_str() {
        Some(n) if n == name => {}
        other => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                other.unwrap_or_default()
            )))
        }
    }
    match new["metadata"]["namespace"].as_str() {
        None | Some("") => {}
        Some(ns) if ns == namespace => {}
        Some(_) => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
    let dry_run = query.contains_key("dryRun");
    let updated = shared.commit(|store| {
        let i = store
            .position(Kind::Job, Some(namespace), name)
            .ok_or_else(|| ApiError::not_found(Kind::Job, name))?;
        let old = store.jobs[i].object.clone();
        check_preconditions(Kind::Job, name, &old, &new)?;
        store.update_job_at(i, old, new, dry_run)
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// PATCH of a Job: a JSON merge patch (RFC 7386), or a strategic merge
/// patch applied as one (the fake has no patch strategies: lists are
/// replaced), then the same rules as an update.
fn patch_job(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let dry_run = query.contains_key("dryRun");
    shared
        .lock()
        .patches
        .push((namespace.to_string(), name.to_string(), patch.clone()));
    let updated = shared.commit(|store| {
        let (i, old, new) = store.patched(Kind::Job, namespace, name, &patch)?;
        store.update_job_at(i, old, new, dry_run)
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// PATCH of a Pod: a JSON merge patch under `ValidatePodUpdate`'s rules
/// ([`validate_pod_update`]); metadata the server owns and the status
/// (the kubelet's) are kept.
fn patch_pod(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let updated = shared.commit(|store| {
        let (i, old, mut new) = store.patched(Kind::Pod, namespace, name, &patch)?;
        keep_server_fields(&old, &mut new);
        default_pod(&mut new);
        let mut errors = validate_pod(&new);
        errors.extend(validate_pod_update(&old, &new));
        if !errors.is_empty() {
            return Err(ApiError::invalid(Kind::Pod, name, errors));
        }
        if new == old {
            return Ok(old);
        }
        Ok(store.replace_at(Kind::Pod, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// What a write through the main resource (PUT or PATCH of a Job, JobSet,
/// Pod or custom kind) cannot change: the metadata the server owns, and
/// the status (a controller's, through its subresource).
fn keep_server_fields(old: &Value, new: &mut Value) {
    for key in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "resourceVersion",
        "generation",
    ] {
        match old["metadata"].get(key) {
            Some(v) => new["metadata"][key] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(key);
                }
            }
        }
    }
    new["status"] = old["status"].clone();
}

/// `ValidatePodUpdate` for the spec (labels and annotations may change
/// freely): a pod's spec is immutable but for its containers' images,
/// `activeDeadlineSeconds` and added tolerations; scheduling gates may
/// only be removed (`validatePodSchedulingGates`: "only deletion is
/// allowed"); and while the pod is still gated, its scheduling
/// directives may be narrowed (KEP-3838): keys added to `nodeSelector`,
/// requirements added to each required node-affinity term (or any
/// required affinity where it had none).
fn validate_pod_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let (old_spec, new_spec) = (&old["spec"], &new["spec"]);
    let gates = |spec: &Value| -> Vec<String> {
        spec["schedulingGates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["name"].as_str().map(str::to_string))
            .collect()
    };
    let (old_gates, new_gates) = (gates(old_spec), gates(new_spec));
    for (i, gate) in new_gates.iter().enumerate() {
        if !old_gates.contains(gate) {
            errors.push(FieldError::new(
                format!("spec.schedulingGates[{i}]"),
                ErrorType::Forbidden,
                None,
                format!("only deletion is allowed, but found new scheduling gate '{gate}'"),
            ));
        }
    }
    let gated = !old_gates.is_empty();
    if gated {
        let (old_sel, new_sel) = (&old_spec["nodeSelector"], &new_spec["nodeSelector"]);
        let kept = old_sel
            .as_object()
            .into_iter()
            .flatten()
            .all(|(k, v)| new_sel.get(k) == Some(v));
        if !kept {
            errors.push(FieldError::new(
                "spec.nodeSelector",
                ErrorType::Forbidden,
                None,
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            ));
        }
        let terms = |spec: &Value| {
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"]
                .clone()
        };
        let (old_terms, new_terms) = (terms(old_spec), terms(new_spec));
        if let Some(old_terms) = old_terms.as_array() {
            let narrowed = new_terms.as_array().is_some_and(|new_terms| {
                new_terms.len() == old_terms.len()
                    && old_terms.iter().zip(new_terms).all(|(o, n)| {
                        ["matchExpressions", "matchFields"].iter().all(|section| {
                            o[*section].as_array().into_iter().flatten().all(|r| {
                                n[*section].as_array().is_some_and(|list| list.contains(r))
                            })
                        })
                    })
            });
            if !narrowed {
                errors.push(FieldError::new(
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
                    ErrorType::Forbidden,
                    None,
                    "only additions are allowed (no mutations or deletions)",
                ));
            }
        }
    }
    // What is left must be equal.
    let comparable = |spec: &Value| {
        let mut spec = spec.clone();
        if let Some(m) = spec.as_object_mut() {
            for key in ["schedulingGates", "activeDeadlineSeconds", "tolerations"] {
                m.remove(key);
            }
            if gated {
                m.remove("nodeSelector");
                if let Some(a) = m.get_mut("affinity").and_then(Value::as_object_mut) {
                    if let Some(n) = a.get_mut("nodeAffinity").and_then(Value::as_object_mut) {
                        n.remove("requiredDuringSchedulingIgnoredDuringExecution");
                        n.remove("preferredDuringSchedulingIgnoredDuringExecution");
                        if n.is_empty() {
                            a.remove("nodeAffinity");
                        }
                    }
                    if a.is_empty() {
                        m.remove("affinity");
                    }
                }
            }
            for section in ["containers", "initContainers"] {
                for c in m
                    .get_mut(section)
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
        spec
    };
    if comparable(old_spec) != comparable(new_spec) {
        errors.push(FieldError::new(
            "spec",
            ErrorType::Forbidden,
            None,
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
    errors
}

/// Whether the scheduler may put `pod` on `node`: no scheduling gates
/// left, its node selector matched by the node's labels, and one of its
/// required node-affinity terms (if any) matched (`In`, `NotIn`,
/// `Exists`, `DoesNotExist` on labels; `metadata.name` fields).
fn schedulable_on(pod: &Value, node: &Value) -> Result<(), String> {
    let spec = &pod["spec"];
    if spec["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        return Err(format!("the pod is gated: {}", spec["schedulingGates"]));
    }
    let labels = &node["metadata"]["labels"];
    for (k, v) in spec["nodeSelector"].as_object().into_iter().flatten() {
        if labels.get(k) != Some(v) {
            return Err(format!("node selector {k}={v} does not match"));
        }
    }
    let name = node["metadata"]["name"].clone();
    let holds = |r: &Value, value: Option<&Value>| {
        let values = r["values"].as_array().cloned().unwrap_or_default();
        match r["operator"].as_str() {
            Some("In") => value.is_some_and(|v| values.contains(v)),
            Some("NotIn") => !value.is_some_and(|v| values.contains(v)),
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    };
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    if let Some(terms) = terms.as_array() {
        let matched = terms.iter().any(|t| {
            let exprs = t["matchExpressions"].as_array().into_iter().flatten();
            let fields = t["matchFields"].as_array().into_iter().flatten();
            exprs
                .clone()
                .all(|r| holds(r, r["key"].as_str().and_then(|k| labels.get(k))))
                && fields
                    .clone()
                    .all(|r| r["key"] == "metadata.name" && holds(r, Some(&name)))
        });
        if !matched {
            return Err("no required node-affinity term matches".into());
        }
    }
    Ok(())
}

/// `spec.managedBy` (KEP-4368): unset, or a domain-prefixed path of at
/// most 63 characters such as `kueue.x-k8s.io/multikueue`.
fn validate_managed_by(managed_by: &Value) -> Vec<FieldError> {
    let Some(value) = managed_by.as_str() else {
        return Vec::new();
    };
    let prefixed = value.split_once('/').is_some_and(|(domain, path)| {
        !path.is_empty()
            && domain.contains('.')
            && domain.split('.').all(|l| {
                !l.is_empty()
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    let mut errors = Vec::new();
    if !prefixed {
        errors.push(FieldError::new(
            "spec.managedBy",
            ErrorType::Invalid,
            Some(managed_by),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
    }
    if value.len() > 63 {
        errors.push(FieldError::new(
            "spec.managedBy",
            ErrorType::TooLong,
            Some(managed_by),
            "must have at most 63 bytes",
        ));
    }
    errors
}

/// PATCH of an Event (kube's `Recorder` patches an event it published
/// before with its `series`): a merge patch, then validated again.
fn patch_event(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let updated = shared.commit(|store| {
        let (i, old, mut new) = store.patched(Kind::Event, namespace, name, &patch)?;
        for key in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "resourceVersion",
        ] {
            new["metadata"][key] = old["metadata"][key].clone();
        }
        let errors = validate_event(&new);
        if !errors.is_empty() {
            return Err(ApiError::invalid(Kind::Event, name, errors));
        }
        Ok(store.replace_at(Kind::Event, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// `ValidateEventCreate` for events.k8s.io/v1: `eventTime`,
/// `reportingController` (a qualified name), `reportingInstance`,
/// `action` and `reason` are required, the last three at most 128
/// characters; `note` at most 1 kB; `type` Normal or Warning; the object
/// it is about in the event's namespace.
fn validate_event(event: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&event["metadata"], "metadata");
    if event["eventTime"].is_null() {
        errors.push(FieldError::required("eventTime", ""));
    }
    match event["reportingController"].as_str() {
        None | Some("") => errors.push(FieldError::required("reportingController", "")),
        Some(c) => errors.extend(
            qualified_name(c)
                .into_iter()
                .map(|m| FieldError::invalid("reportingController", c, m)),
        ),
    }
    for (field, limit) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
        match event[field].as_str() {
            None | Some("") => errors.push(FieldError::required(field, "")),
            Some(v) if v.len() > limit => errors.push(FieldError::new(
                field,
                ErrorType::TooLong,
                Some(&event[field]),
                format!("can have at most {limit} characters"),
            )),
            Some(_) => {}
        }
    }
    if event["note"].as_str().is_some_and(|n| n.len() > 1024) {
        errors.push(FieldError::new(
            "note",
            ErrorType::TooLong,
            None,
            "can have at most 1024 characters",
        ));
    }
    if !matches!(event["type"].as_str(), Some("Normal" | "Warning")) {
        errors.push(FieldError::new(
            "type",
            ErrorType::NotSupported,
            Some(&event["type"]),
            "supported values: \"Normal\", \"Warning\"",
        ));
    }
    let namespace = &event["metadata"]["namespace"];
    let about = &event["regarding"]["namespace"];
    if !about.is_null() && about != namespace {
        errors.push(FieldError::invalid(
            "regarding.namespace",
            about.as_str().unwrap_or_default(),
            "does not match event.namespace",
        ));
    }
    errors
}

/// PATCH of a Job's status subresource (what a controller that manages
/// the Job writes): the patch is applied as for the main resource, then
/// only its `status` is kept (the spec and metadata changes are ignored,
/// as `jobStatusStrategy` does), and the status is validated.
fn patch_job_status(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let dry_run = query.contains_key("dryRun");
    let updated = shared.commit(|store| {
        let (i, old, decoded) = store.patched(Kind::Job, namespace, name, &patch)?;
        let mut new = old.clone();
        new["status"] = decoded["status"].clone();
        let errors = validate_job_status(&new["status"]);
        if !errors.is_empty() {
            return Err(ApiError::invalid(Kind::Job, name, errors));
        }
        if new == old || dry_run {
            return Ok(new);
        }
        Ok(store.replace_at(Kind::Job, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// PATCH of a JobSet: a JSON merge patch under the JobSet webhook's update
/// rule (the replicated Jobs are immutable, but for their pod templates'
/// labels, annotations, node selector, tolerations and scheduling gates
/// while the JobSet is or becomes suspended); status stays the
/// controller's.
fn patch_jobset(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let dry_run = query.contains_key("dryRun");
    shared
        .lock()
        .patches
        .push((namespace.to_string(), name.to_string(), patch.clone()));
    let updated = shared.commit(|store| {
        let (i, old, mut new) = store.patched(Kind::JobSet, namespace, name, &patch)?;
        keep_server_fields(&old, &mut new);
        default_jobset(&mut new);
        let mut errors = validate_jobset(&new);
        errors.extend(validate_jobset_update(&old, &new));
        if !errors.is_empty() {
            return Err(ApiError::invalid(Kind::JobSet, name, errors));
        }
        if new == old || dry_run {
            return Ok(new);
        }
        if new["spec"] != old["spec"] {
            let generation = old["metadata"]["generation"].as_u64().unwrap_or(1);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        Ok(store.replace_at(Kind::JobSet, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// The JobSet webhook's `ValidateUpdate` for the replicated Jobs.
fn validate_jobset_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let suspended = old["spec"]["suspend"] == json!(true) || new["spec"]["suspend"] == json!(true);
    let munge = |jobset: &Value| -> Value {
        let mut jobs = jobset["spec"]["replicatedJobs"].clone();
        if suspended {
            for job in jobs.as_array_mut().into_iter().flatten() {
                let template = &mut job["template"]["spec"]["template"];
                if let Some(meta) = template["metadata"].as_object_mut() {
                    meta.remove("labels");
                    meta.remove("annotations");
                }
                if let Some(spec) = template["spec"].as_object_mut() {
                    for key in ["nodeSelector", "tolerations", "schedulingGates"] {
                        spec.remove(key);
                    }
                }
            }
        }
        jobs
    };
    if munge(old) == munge(new) {
        return Vec::new();
    }
    vec![FieldError::new(
        "spec.replicatedJobs",
        ErrorType::Invalid,
        Some(&new["spec"]["replicatedJobs"]),
        "field is immutable",
    )]
}

/// PATCH of a JobSet's status subresource: only `status` changes.
fn patch_jobset_status(
    shared: &Shared,
    namespace: &str,
    name: &str,
    content_type: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let dry_run = query.contains_key("dryRun");
    let updated = shared.commit(|store| {
        let (i, old, decoded) = store.patched(Kind::JobSet, namespace, name, &patch)?;
        let mut new = old.clone();
        new["status"] = decoded["status"].clone();
        if new == old || dry_run {
            return Ok(new);
        }
        Ok(store.replace_at(Kind::JobSet, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// `ValidateJobStatus`, for what a status patch can get wrong here:
/// counts are never negative, `ready` and `terminating` are counts too.
fn validate_job_status(status: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["active", "ready", "terminating", "succeeded", "failed"] {
        errors.extend(non_negative(&status[field], format!("status.{field}")));
    }
    errors
}

/// The body of a merge patch, refused (415, 400) as the API server does
/// for another media type or a body that is not a JSON object.
fn merge_patch_body(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if !matches!(
        media.as_str(),
        "application/merge-patch+json" | "application/strategic-merge-patch+json"
    ) {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not JSON: {e}")))?;
    if !patch.is_object() {
        return Err(ApiError::bad_request("a merge patch must be a JSON object"));
    }
    Ok(patch)
}

/// A resourceVersion or uid in a patch is a precondition.
fn patched_preconditions(patch: &Value) -> Value {
    let mut preconditions = json!({ "metadata": {} });
    for key in ["resourceVersion", "uid"] {
        if let Some(v) = patch["metadata"].get(key) {
            preconditions["metadata"][key] = v.clone();
        }
    }
    preconditions
}

/// Optimistic concurrency: a resourceVersion or uid the client sent must
/// be the stored one.
fn check_preconditions(kind: Kind, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    let sent_rv = new["metadata"]["resourceVersion"].as_str().unwrap_or("");
    if !sent_rv.is_empty() && Some(sent_rv) != old["metadata"]["resourceVersion"].as_str() {
        return Err(ApiError::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    let sent_uid = new["metadata"]["uid"].as_str().unwrap_or("");
    let stored_uid = old["metadata"]["uid"].as_str().unwrap_or("");
    if !sent_uid.is_empty() && sent_uid != stored_uid {
        return Err(ApiError::conflict(
            kind,
            name,
            format!("Precondition failed: UID in precondition: {sent_uid}, UID in object meta: {stored_uid}"),
        ));
    }
    Ok(())
}

impl Store {
    /// The common end of PUT and PATCH of the Job at `i`.
    fn update_job_at(
        &mut self,
        i: usize,
        old: Value,
        mut new: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        // The main resource ignores status; it is the status
        // subresource's (the controller's).
        keep_server_fields(&old, &mut new);
        default_job(&mut new);
        let name = old["metadata"]["name"].as_str().unwrap_or_default();
        let mut errors = validate_job(&new);
        errors.extend(validate_job_update(&old, &new));
        if !errors.is_empty() {
            return Err(ApiError::invalid(Kind::Job, name, errors));
        }
        if new == old {
            // A no-op update writes nothing and keeps the resourceVersion.
            return Ok(old);
        }
        if new["spec"] != old["spec"] {
            let generation = old["metadata"]["generation"].as_u64().unwrap_or(1);
            new["metadata"]["generation"] = json!(generation + 1);
        }
        if dry_run {
            return Ok(new);
        }
        Ok(self.replace_at(Kind::Job, i, old, new))
    }

    /// The `kind` object ns/name with a merge `patch` applied and
    /// decoded, its preconditions (a resourceVersion or uid in the patch)
    /// checked: (its index, the stored object, the patched one).
    fn patched(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(usize, Value, Value), ApiError> {
        let i = self
            .position(kind, Some(namespace), name)
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        let old = self.entries(kind)[i].object.clone();
        let mut patched = old.clone();
        merge_patch(&mut patched, patch);
        check_preconditions(kind, name, &old, &patched_preconditions(patch))?;
        Ok((i, old, decode(kind, patched)?))
    }

    /// Stores `new` in place of `old`, the `kind` object at `i`, under a
    /// new resourceVersion, and logs the change for watches.
    fn replace_at(&mut self, kind: Kind, i: usize, old: Value, mut new: Value) -> Value {
        let rv = self.next_rv();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let seq = self.entries(kind)[i].seq;
        self.entries_mut(kind)[i].object = new.clone();
        self.log_event(rv, kind, seq, Some(new.clone()), Some(old));
        new
    }
}

/// RFC 7386: objects merge key by key, null removes, anything else
/// replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

fn delete(
    shared: &Arc<Shared>,
    kind: Kind,
    namespace: &str,
    name: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let mut options = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| {
            ApiError::bad_request(format!("the request body is not JSON DeleteOptions: {e}"))
        })?
    };
    if let Some(policy) = query.get("propagationPolicy") {
        match &mut options {
            Value::Null => options = json!({ "propagationPolicy": policy }),
            Value::Object(map) => {
                map.entry("propagationPolicy").or_insert(json!(policy));
            }
            _ => {}
        }
    }
    if matches!(
        kind,
        Kind::Job | Kind::JobSet | Kind::PyTorchJob | Kind::RayJob
    ) {
        shared
            .lock()
            .deletes
            .push((namespace.to_string(), name.to_string(), options.clone()));
    }

    if !matches!(options, Value::Null | Value::Object(_)) {
        return Err(ApiError::bad_request(
            "the request body is not a JSON DeleteOptions object",
        ));
    }
    match options.get("kind") {
        None => {}
        Some(Value::String(k)) if k == "DeleteOptions" => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "kind {other} in a DELETE body, expected \"DeleteOptions\""
            )))
        }
    }
    let policy = match options.get("propagationPolicy") {
        None | Some(Value::Null) => "Background",
        Some(Value::String(p)) if matches!(p.as_str(), "Foreground" | "Background" | "Orphan") => {
            p.as_str()
        }
        Some(other) => {
            return Err(ApiError::invalid(
                kind,
                name,
                vec![FieldError::new(
                    "propagationPolicy",
                    ErrorType::NotSupported,
                    Some(other),
                    "supported values: \"Foreground\", \"Background\", \"Orphan\"",
                )],
            ))
        }
    };
    let dry_run = query.contains_key("dryRun")
        || options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
    let precondition = |field: &str| -> Result<Option<String>, ApiError> {
        match options.get("preconditions").and_then(|p| p.get(field)) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ApiError::bad_request(format!(
                "preconditions.{field} must be a string, got {other}"
            ))),
        }
    };
    let want_uid = precondition("uid")?;
    let want_rv = precondition("resourceVersion")?;

    let outcome = shared.commit(|store| {
        let i = store
            .position(kind, Some(namespace), name)
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        let current = &store.entries(kind)[i].object;
        for (field, wanted) in [("uid", &want_uid), ("resourceVersion", &want_rv)] {
            let actual = current["metadata"][field].as_str().unwrap_or_default();
            if let Some(wanted) = wanted.as_deref().filter(|w| *w != actual) {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    format!(
                        "Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                    ),
                ));
            }
        }
        // An object already being deleted stays as it is: repeating the
        // delete just reports the terminating object, as the API server
        // does.
        if dry_run || !current["metadata"]["deletionTimestamp"].is_null() {
            return Ok(Deleted::Pending(current.clone()));
        }
        if matches!(kind, Kind::Job | Kind::JobSet | Kind::PyTorchJob | Kind::RayJob) && policy == "Foreground" {
            Ok(Deleted::Foreground(store.mark_foreground(kind, i)))
        } else {
            let object = store.remove_at(kind, i);
            if policy != "Orphan" {
                store.remove_dependents(&object["metadata"]["uid"]);
            }
            Ok(Deleted::Now(object))
        }
    })?;

    match outcome {
        Deleted::Pending(object) => Ok(json_response(StatusCode::OK, &object)),
        Deleted::Foreground(object) => {
            spawn_garbage_collection(shared, kind, &object);
            Ok(json_response(StatusCode::OK, &object))
        }
        Deleted::Now(object) => {
            // The Job registry does not set ReturnDeletedObject, so an
            // immediate delete answers with a Success Status, which kube
            // reports as `Either::Right`.
            let mut details = details(kind, name);
            details["uid"] = object["metadata"]["uid"].clone();
            let status = json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            });
            Ok(json_response(StatusCode::OK, &status))
        }
    }
}

enum Deleted {
    /// Nothing changed (a dry run, or the object was already terminating).
    Pending(Value),
    /// Marked for foreground deletion; removal follows later.
    Foreground(Value),
    /// Removed at once.
    Now(Value),
}

impl Store {
    /// Marks the Job or JobSet at `i` for foreground deletion
    /// (deletionTimestamp and the foregroundDeletion finalizer; emits
    /// MODIFIED) and returns it.
    fn mark_foreground(&mut self, kind: Kind, i: usize) -> Value {
        let rv = self.next_rv();
        let entry = &mut self.entries_mut(kind)[i];
        let previous = entry.object.clone();
        let seq = entry.seq;
        let meta = &mut entry.object["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        meta["deletionTimestamp"] = json!(rfc3339(SystemTime::now()));
        meta["deletionGracePeriodSeconds"] = json!(0);
        let mut finalizers: Vec<Value> = meta["finalizers"].as_array().cloned().unwrap_or_default();
        if !finalizers.iter().any(|f| f == "foregroundDeletion") {
            finalizers.push(json!("foregroundDeletion"));
        }
        meta["finalizers"] = Value::Array(finalizers);
        let object = entry.object.clone();
        self.log_event(rv, kind, seq, Some(object.clone()), Some(previous));
        object
    }
}

/// The garbage collector's half of a foreground delete, after a delay:
/// the Job's pods go, then (its finalizer removed) the Job. The uid check
/// keeps a Job recreated under the same name in the meantime from being
/// removed in its place.
fn spawn_garbage_collection(shared: &Arc<Shared>, kind: Kind, job: &Value) {
    let uid = job["metadata"]["uid"].clone();
    let namespace = job["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = job["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let shared = shared.clone();
    tokio::spawn(async move {
        tokio::time::sleep(FOREGROUND_GC_DELAY).await;
        shared.commit(|store| {
            store.remove_dependents(&uid);
            let Some(i) = store.position(kind, Some(&namespace), &name) else {
                return;
            };
            if store.entries(kind)[i].object["metadata"]["uid"] != uid {
                return;
            }
            store.entries_mut(kind)[i].object["metadata"]["finalizers"] = json!([]);
            store.remove_at(kind, i);
        });
    });
}

/// The TTL-after-finished controller: deletes (foreground, with a uid
/// precondition) every Job whose `ttlSecondsAfterFinished` has passed
/// since the fake saw it finish.
async fn ttl_after_finished(shared: Arc<Shared>) {
    let mut changes = shared.changed.subscribe();
    loop {
        let (expired, next) = {
            let store = shared.lock();
            let now = std::time::Instant::now();
            let mut expired = Vec::new();
            let mut next: Option<std::time::Instant> = None;
            for (i, entry) in store.jobs.iter().enumerate() {
                let (Some(at), Some(ttl)) = (
                    entry.finished_at,
                    entry.object["spec"]["ttlSecondsAfterFinished"].as_u64(),
                ) else {
                    continue;
                };
                if !entry.object["metadata"]["deletionTimestamp"].is_null() {
                    continue;
                }
                let due = at + Duration::from_secs(ttl);
                if due <= now {
                    expired.push((i, entry.object["metadata"]["uid"].clone()));
                } else if next.is_none_or(|n| due < n) {
                    next = Some(due);
                }
            }
            (expired, next)
        };
        if !expired.is_empty() {
            for (i, uid) in expired {
                let job = shared.commit(|store| {
                    (store.jobs.get(i)?.object["metadata"]["uid"] == uid)
                        .then(|| store.mark_foreground(Kind::Job, i))
                });
                if let Some(job) = job {
                    spawn_garbage_collection(&shared, Kind::Job, &job);
                }
            }
            continue;
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Defaulting and validation
// ---------------------------------------------------------------------------
//
// What follows copies the API server's rules for the fields fleetq writes
// (k8s.io/kubernetes pkg/apis/core/validation and pkg/apis/batch/validation,
// apimachinery's util/validation), with its messages, so a refusal here
// reads like one from a cluster.

/// The kinds of `field.Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorType {
    Invalid,
    Required,
    Forbidden,
    TooLong,
    NotSupported,
    Duplicate,
}

/// One `field.Error`: the field's path, what is wrong, the offending value
/// (already formatted as Go's `%q`/`%v` would) and a detail.
#[derive(Clone, Debug)]
struct FieldError {
    field: String,
    kind: ErrorType,
    value: Option<String>,
    detail: String,
}

impl FieldError {
    fn new(
        field: impl Into<String>,
        kind: ErrorType,
        value: Option<&Value>,
        detail: impl Into<String>,
    ) -> FieldError {
        FieldError {
            field: field.into(),
            kind,
            value: value.map(go_value),
            detail: detail.into(),
        }
    }

    fn invalid(field: impl Into<String>, value: &str, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorType::Invalid, Some(&json!(value)), detail)
    }

    fn required(field: impl Into<String>, detail: impl Into<String>) -> FieldError {
        FieldError::new(field, ErrorType::Required, None, detail)
    }

    /// `StatusCause.reason`.
    fn reason(&self) -> &'static str {
        match self.kind {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
        }
    }

    /// `field.Error.ErrorBody()`: the message without the field.
    fn body(&self) -> String {
        let head = match self.kind {
            ErrorType::Invalid => "Invalid value",
            ErrorType::Required => "Required value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
        };
        let mut body = match (self.kind, &self.value) {
            (ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong, _) | (_, None) => {
                head.to_string()
            }
            (_, Some(value)) => format!("{head}: {value}"),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A value as a Go error message prints it: strings quoted, numbers and
/// booleans bare, anything else as compact JSON.
fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

fn go_quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case \
    alphanumeric characters or '-', and must start and end with an alphanumeric character \
    (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
    must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
    '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric \
    characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
    'MyValue',  or 'my_value',  or '12345', regex used for validation is \
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// `TotalAnnotationSizeLimitB`: keys and values of all annotations together.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_dns_label_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter().all(|c| edge(c) || *c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Label`.
fn dns1123_label(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !is_dns_label_shaped(s) {
        errors.push(DNS1123_LABEL_MSG.to_string());
    }
    errors
}

/// `IsDNS1123Subdomain`.
fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    if !s.split('.').all(is_dns_label_shaped) {
        errors.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    errors
}

/// `IsQualifiedName`: label keys, annotation keys, resource names.
fn qualified_name(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                for e in dns1123_subdomain(prefix) {
                    errors.push(format!("prefix part {e}"));
                }
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix \
                 and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errors
}

/// `IsValidLabelValue`.
fn label_value_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !s.is_empty() && !is_qualified_name_part(s) {
        errors.push(LABEL_VALUE_MSG.to_string());
    }
    errors
}

/// `ValidateLabels` (also used for a pod's nodeSelector).
fn validate_labels(labels: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (key, value) in labels.as_object().into_iter().flatten() {
        for e in qualified_name(key) {
            errors.push(FieldError::invalid(path, key, e));
        }
        let value = value.as_str().unwrap_or_default();
        for e in label_value_errors(value) {
            errors.push(FieldError::invalid(path, value, e));
        }
    }
    errors
}

/// `ValidateAnnotations`: qualified keys (compared in lower case), and at
/// most 256 KiB of keys and values together.
fn validate_annotations(annotations: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut total = 0usize;
    for (key, value) in annotations.as_object().into_iter().flatten() {
        for e in qualified_name(&key.to_ascii_lowercase()) {
            errors.push(FieldError::invalid(path, key, e));
        }
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errors.push(FieldError::new(
            path,
            ErrorType::TooLong,
            None,
            format!("may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
        ));
    }
    errors
}

/// `ValidateObjectMeta` for a namespaced object whose name must be a DNS
/// subdomain (Jobs, Pods).
fn validate_object_meta(meta: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = meta["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        errors.push(FieldError::required(
            format!("{path}.name"),
            "name or generateName is required",
        ));
    } else {
        for e in dns1123_subdomain(name) {
            errors.push(FieldError::invalid(format!("{path}.name"), name, e));
        }
    }
    errors.extend(validate_labels(&meta["labels"], &format!("{path}.labels")));
    errors.extend(validate_annotations(
        &meta["annotations"],
        &format!("{path}.annotations"),
    ));
    errors
}

/// A quantity in thousandths, rounded up to 1m as Kubernetes rounds finer
/// amounts; None when it is not a quantity.
fn milli(q: &str) -> Option<i128> {
    let (negative, rest) = match q.as_bytes().first() {
        Some(b'-') => (true, &q[1..]),
        Some(b'+') => (false, &q[1..]),
        _ => (false, q),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let (pow10, pow2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) => (s[1..].parse::<i32>().ok()?, 0),
        _ => return None,
    };
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let scaled = mantissa.checked_mul(1i128.checked_shl(pow2)?)?;
    let exp = pow10 + 3 - frac.len() as i32;
    let value = if exp >= 0 {
        scaled.checked_mul(10i128.checked_pow(exp.try_into().ok()?)?)?
    } else {
        let divisor = 10i128
            .checked_pow((-exp).try_into().ok()?)
            .unwrap_or(i128::MAX);
        (scaled + divisor - 1) / divisor
    };
    Some(if negative { -value } else { value })
}

/// `IsNativeResource`: no domain, or a kubernetes.io one.
fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: a domain outside kubernetes.io, and usable in
/// a ResourceQuota as `requests.<name>`.
fn is_extended_resource(name: &str) -> bool {
    !is_native_resource(name)
        && !name.starts_with("requests.")
        && qualified_name(&format!("requests.{name}")).is_empty()
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsStandardResourceName`.
fn is_standard_resource(name: &str) -> bool {
    const STANDARD: [&str; 22] = [
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
        "count/pods",
        "attachable-volumes-",
    ];
    STANDARD.contains(&name) || is_hugepages(name) || name.starts_with("requests.hugepages-")
}

/// `IsStandardContainerResourceName`.
fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_hugepages(name)
}

/// `IsOvercommitAllowed`: only native, non-hugepages resources may request
/// less than their limit.
fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !is_hugepages(name)
}

/// `validateContainerResourceName`.
fn container_resource_name(name: &str, field: &str) -> Vec<FieldError> {
    let mut errors: Vec<FieldError> = qualified_name(name)
        .into_iter()
        .map(|e| FieldError::invalid(field, name, e))
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    if !name.contains('/') {
        if !is_standard_resource(name) {
            errors.push(FieldError::invalid(
                field,
                name,
                "must be a standard resource type or fully qualified",
            ));
        }
        if !is_standard_container_resource(name) {
            errors.push(FieldError::invalid(
                field,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native_resource(name) && !is_extended_resource(name) {
        errors.push(FieldError::invalid(
            field,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
    errors
}

/// `ValidateResourceQuantityValue`: non-negative, and whole for extended
/// resources.
fn quantity_errors(name: &str, quantity: &str, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(m) = milli(quantity) else {
        return errors; // a 400 at decoding already
    };
    if m < 0 {
        errors.push(FieldError::invalid(
            field,
            quantity,
            "must be greater than or equal to 0",
        ));
    }
    if is_extended_resource(name) && m % 1000 != 0 {
        errors.push(FieldError::invalid(field, quantity, "must be an integer"));
    }
    errors
}

/// `ValidateResourceRequirements` of one container.
fn validate_resources(resources: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let limits = resources["limits"].as_object().cloned().unwrap_or_default();
    let requests = resources["requests"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, quantity) in &limits {
        let field = format!("{path}.limits[{name}]");
        let quantity = quantity.as_str().unwrap_or_default();
        errors.extend(container_resource_name(name, &field));
        errors.extend(quantity_errors(name, quantity, &field));
    }
    for (name, quantity) in &requests {
        let field = format!("{path}.requests[{name}]");
        let quantity = quantity.as_str().unwrap_or_default();
        errors.extend(container_resource_name(name, &field));
        errors.extend(quantity_errors(name, quantity, &field));
        match limits.get(name).and_then(Value::as_str) {
            Some(limit) => {
                let (q, l) = (milli(quantity), milli(limit));
                // Named by the requests map, not the key, as
                // ValidateResourceRequirements does ("resources.requests:
                // Invalid value: \"1\": must be less than or equal to cpu
                // limit of 500m").
                if !overcommit_allowed(name) && q != l {
                    errors.push(FieldError::invalid(
                        format!("{path}.requests"),
                        quantity,
                        format!("must be equal to {name} limit of {limit}"),
                    ));
                } else if q > l {
                    errors.push(FieldError::invalid(
                        format!("{path}.requests"),
                        quantity,
                        format!("must be less than or equal to {name} limit of {limit}"),
                    ));
                }
            }
            None if !overcommit_allowed(name) => errors.push(FieldError::required(
                format!("{path}.limits"),
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
    errors
}

/// `ValidateNodeSelector` (required node affinity).
fn validate_node_selector(selector: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let terms_path = format!("{path}.nodeSelectorTerms");
    let terms = selector["nodeSelectorTerms"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if terms.is_empty() {
        return vec![FieldError::required(
            terms_path,
            "must have at least one node selector term",
        )];
    }
    for (i, term) in terms.iter().enumerate() {
        for (j, rq) in term["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let rq_path = format!("{terms_path}[{i}].matchExpressions[{j}]");
            let values = rq["values"].as_array().cloned().unwrap_or_default();
            let operator = rq["operator"].as_str().unwrap_or_default();
            match operator {
                "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(
                    format!("{rq_path}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::new(
                    format!("{rq_path}.values"),
                    ErrorType::Forbidden,
                    None,
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )),
                "Gt" | "Lt" if values.len() != 1 => errors.push(FieldError::required(
                    format!("{rq_path}.values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )),
                "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
                other => errors.push(FieldError::invalid(
                    format!("{rq_path}.operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            let key = rq["key"].as_str().unwrap_or_default();
            for e in qualified_name(key) {
                errors.push(FieldError::invalid(format!("{rq_path}.key"), key, e));
            }
            for (k, value) in values.iter().enumerate() {
                let value = value.as_str().unwrap_or_default();
                for e in label_value_errors(value) {
                    errors.push(FieldError::invalid(
                        format!("{rq_path}.values[{k}]"),
                        value,
                        e,
                    ));
                }
            }
        }
        // `ValidateNodeFieldSelectorRequirement`: only `metadata.name`,
        // In or NotIn, and exactly one value.
        for (j, rq) in term["matchFields"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let rq_path = format!("{terms_path}[{i}].matchFields[{j}]");
            let values = rq["values"].as_array().map_or(0, Vec::len);
            match rq["operator"].as_str().unwrap_or_default() {
                "In" | "NotIn" if values != 1 => errors.push(FieldError::required(
                    format!("{rq_path}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )),
                "In" | "NotIn" => {}
                other => errors.push(FieldError::invalid(
                    format!("{rq_path}.operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            let key = rq["key"].as_str().unwrap_or_default();
            if key != "metadata.name" {
                errors.push(FieldError::new(
                    format!("{rq_path}.key"),
                    ErrorType::NotSupported,
                    Some(&json!(key)),
                    "supported values: \"metadata.name\"",
                ));
            }
        }
    }
    errors
}

/// `ValidatePodSpec`, for the fields fleetq writes: containers (names,
/// images, env names, resources), restart policy, node selector and
/// required node affinity. A Job's pods may only restart OnFailure or
/// Never.
fn validate_pod_spec(spec: &Value, path: &str, in_job: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let policy = spec["restartPolicy"].as_str();
    let allowed: &[&str] = if in_job {
        &["OnFailure", "Never"]
    } else {
        &["Always", "OnFailure", "Never"]
    };
    let supported = allowed
        .iter()
        .map(|p| go_quote(p))
        .collect::<Vec<_>>()
        .join(", ");
    match policy {
        None | Some("") if in_job => errors.push(FieldError::required(
            format!("{path}.restartPolicy"),
            format!("valid values: {supported}"),
        )),
        None | Some("") => {}
        Some(p) if allowed.contains(&p) => {}
        Some(p) => errors.push(FieldError::new(
            format!("{path}.restartPolicy"),
            ErrorType::NotSupported,
            Some(&json!(p)),
            format!("supported values: {supported}"),
        )),
    }
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        errors.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names = BTreeSet::new();
    for key in ["initContainers", "containers"] {
        for (i, c) in spec[key].as_array().into_iter().flatten().enumerate() {
            let c_path = format!("{path}.{key}[{i}]");
            let name = c["name"].as_str().unwrap_or_default();
            if name.is_empty() {
                errors.push(FieldError::required(format!("{c_path}.name"), ""));
            } else {
                for e in dns1123_label(name) {
                    errors.push(FieldError::invalid(format!("{c_path}.name"), name, e));
                }
                if !names.insert(name.to_string()) {
                    errors.push(FieldError::new(
                        format!("{c_path}.name"),
                        ErrorType::Duplicate,
                        Some(&json!(name)),
                        "",
                    ));
                }
            }
            if c["image"].as_str().is_none_or(str::is_empty) {
                errors.push(FieldError::required(format!("{c_path}.image"), ""));
            }
            for (j, env) in c["env"].as_array().into_iter().flatten().enumerate() {
                let env_name = env["name"].as_str().unwrap_or_default();
                let field = format!("{c_path}.env[{j}].name");
                if env_name.is_empty() {
                    errors.push(FieldError::required(field, ""));
                } else if !env_name
                    .bytes()
                    .all(|b| (b' '..=b'~').contains(&b) && b != b'=')
                {
                    // RelaxedEnvironmentVariableValidation, on by default
                    // since 1.32.
                    errors.push(FieldError::invalid(
                        field,
                        env_name,
                        "a valid environment variable name must consist only of printable \
                         ASCII characters other than '='",
                    ));
                }
            }
            errors.extend(validate_resources(
                &c["resources"],
                &format!("{c_path}.resources"),
            ));
        }
    }
    errors.extend(validate_labels(
        &spec["nodeSelector"],
        &format!("{path}.nodeSelector"),
    ));
    let required =
        &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    if !required.is_null() {
        errors.extend(validate_node_selector(
            required,
            &format!("{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"),
        ));
    }
    errors
}

fn validate_pod(pod: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&pod["metadata"], "metadata");
    errors.extend(validate_pod_spec(&pod["spec"], "spec", false));
    errors
}

/// A non-negative integer field, if set.
fn non_negative(value: &Value, field: String) -> Option<FieldError> {
    match value.as_i64() {
        Some(n) if n < 0 => Some(FieldError::new(
            field,
            ErrorType::Invalid,
            Some(value),
            "must be greater than or equal to 0",
        )),
        _ => None,
    }
}

/// A JobSet as the API server decodes a custom resource: any object, its
/// replicated Jobs' templates decoded as Job templates (so a malformed
/// quantity is a 400, as the structural schema of the CRD makes it).
fn decode_jobset(value: Value) -> Result<Value, serde_json::Error> {
    use k8s_openapi::api::batch::v1::JobTemplateSpec;
    for job in value["spec"]["replicatedJobs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        serde_json::from_value::<JobTemplateSpec>(job["template"].clone())?;
    }
    Ok(value)
}

/// The custom kind a test names (`JobSet`, `PyTorchJob`, `RayJob`).
fn custom_kind(kind: &str) -> Kind {
    match kind {
        "JobSet" => Kind::JobSet,
        "PyTorchJob" => Kind::PyTorchJob,
        "RayJob" => Kind::RayJob,
        other => panic!("no custom kind {other:?} in the fake"),
    }
}

/// A PyTorchJob as the API server decodes a custom resource: any object,
/// each replica's pod template decoded as a pod template (a malformed
/// quantity is a 400, as the CRD's structural schema makes it).
fn decode_pytorchjob(value: Value) -> Result<Value, serde_json::Error> {
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    for (_, replica) in value["spec"]["pytorchReplicaSpecs"]
        .as_object()
        .into_iter()
        .flatten()
    {
        serde_json::from_value::<PodTemplateSpec>(replica["template"].clone())?;
    }
    Ok(value)
}

/// The Training Operator's webhook, for the fields fleetq writes: the
/// metadata, a DNS-1035 name (it names services after the job), replica
/// types Master and Worker only (one Master), each with a pod template
/// the API server would take for a pod.
fn validate_pytorchjob(job: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&job["metadata"], "metadata");
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    for detail in dns1035_label(name) {
        errors.push(FieldError::invalid("metadata.name", name, detail));
    }
    let Some(specs) = job["spec"]["pytorchReplicaSpecs"].as_object() else {
        errors.push(FieldError::required(
            "spec.pytorchReplicaSpecs",
            "must be set",
        ));
        return errors;
    };
    for (kind, replica) in specs {
        let path = format!("spec.pytorchReplicaSpecs[{kind}]");
        if kind != "Master" && kind != "Worker" {
            errors.push(FieldError::new(
                path.clone(),
                ErrorType::NotSupported,
                Some(&json!(kind)),
                "supported values: \"Master\", \"Worker\"",
            ));
        }
        if kind == "Master" && replica["replicas"].as_i64().unwrap_or(1) != 1 {
            errors.push(FieldError::new(
                format!("{path}.replicas"),
                ErrorType::Forbidden,
                Some(&replica["replicas"]),
                "must be 1",
            ));
        }
        errors.extend(validate_pod_spec(
            &replica["template"]["spec"],
            &format!("{path}.template.spec"),
            false,
        ));
    }
    errors
}

/// PATCH of a PyTorchJob or RayJob: a JSON merge patch; metadata the
/// server owns and the status (the controller's) are kept, and the result
/// is validated as on create.
fn patch_custom(
    shared: &Shared,
    kind: Kind,
    namespace: &str,
    name: &str,
    content_type: &str,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let patch = merge_patch_body(content_type, body)?;
    let updated = shared.commit(|store| {
        let (i, old, mut new) = store.patched(kind, namespace, name, &patch)?;
        keep_server_fields(&old, &mut new);
        let errors = match kind {
            Kind::RayJob => validate_rayjob(&new),
            _ => validate_pytorchjob(&new),
        };
        if !errors.is_empty() {
            return Err(ApiError::invalid(kind, name, errors));
        }
        if new == old {
            return Ok(old);
        }
        Ok(store.replace_at(kind, i, old, new))
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// A RayJob's pod templates with where each is: the head's, each worker
/// group's, the submitter's.
fn rayjob_pod_templates(job: &Value) -> Vec<(String, &Value)> {
    let cluster = &job["spec"]["rayClusterSpec"];
    let mut out = vec![(
        "spec.rayClusterSpec.headGroupSpec.template".to_string(),
        &cluster["headGroupSpec"]["template"],
    )];
    for (i, group) in cluster["workerGroupSpecs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        out.push((
            format!("spec.rayClusterSpec.workerGroupSpecs[{i}].template"),
            &group["template"],
        ));
    }
    if !job["spec"]["submitterPodTemplate"].is_null() {
        out.push((
            "spec.submitterPodTemplate".into(),
            &job["spec"]["submitterPodTemplate"],
        ));
    }
    out
}

/// A RayJob as the API server decodes a custom resource: its pod
/// templates decoded as pod templates (a malformed quantity is a 400).
fn decode_rayjob(value: Value) -> Result<Value, serde_json::Error> {
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    for (_, template) in rayjob_pod_templates(&value) {
        if !template.is_null() {
            serde_json::from_value::<PodTemplateSpec>(template.clone())?;
        }
    }
    Ok(value)
}

/// KubeRay's RayJob webhook, for the fields fleetq writes: the metadata,
/// a DNS-1035 name of at most 47 characters (KubeRay names the Ray
/// cluster and its pods after it), a head group with a pod template,
/// worker group names unique, pod templates as the API server takes a
/// pod's.
fn validate_rayjob(job: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&job["metadata"], "metadata");
    let name = job["metadata"]["name"].as_str().unwrap_or_default();
    for detail in dns1035_label(name) {
        errors.push(FieldError::invalid("metadata.name", name, detail));
    }
    if name.len() > 47 {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 47 characters",
        ));
    }
    if job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"].is_null() {
        errors.push(FieldError::required(
            "spec.rayClusterSpec.headGroupSpec.template",
            "must be set",
        ));
    }
    let mut groups = BTreeSet::new();
    for (i, group) in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let group_name = group["groupName"].as_str().unwrap_or_default();
        if !groups.insert(group_name.to_string()) {
            errors.push(FieldError::new(
                format!("spec.rayClusterSpec.workerGroupSpecs[{i}].groupName"),
                ErrorType::Duplicate,
                Some(&json!(group_name)),
                "",
            ));
        }
    }
    for (path, template) in rayjob_pod_templates(job) {
        if !template.is_null() {
            errors.extend(validate_pod_spec(
                &template["spec"],
                &format!("{path}.spec"),
                false,
            ));
        }
    }
    errors
}

/// The JobSet CRD's defaults: one replica per replicated Job, not
/// suspended.
fn default_jobset(jobset: &mut Value) {
    if !jobset["spec"].is_object() {
        jobset["spec"] = json!({});
    }
    if jobset["spec"]["suspend"].is_null() {
        jobset["spec"]["suspend"] = json!(false);
    }
    for job in jobset["spec"]["replicatedJobs"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if job["replicas"].is_null() {
            job["replicas"] = json!(1);
        }
    }
}

/// `IsDNS1035Label`: a DNS label that starts with a letter.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !is_dns_label_shaped(s) || !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        errors.push(DNS1035_LABEL_MSG.to_string());
    }
    errors
}

const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric \
    characters or '-', start with an alphabetic character, and end with an alphanumeric \
    character (e.g. 'my-name',  or 'abc-123', regex used for validation is \
    '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// The JobSet webhook's checks on create, for the fields fleetq writes:
/// metadata; replicated Jobs present, uniquely named by DNS-1035 labels;
/// every Job name the controller derives (`<jobset>-<replicated job>-<index>`)
/// and, for Indexed Jobs, every pod name (`...-<pod index>-<5 random>`) a
/// DNS-1035 label. The real chain refuses a bad pod template when the
/// JobSet controller creates the Job; the fake refuses it at once, with the
/// Job's own rules, so a test sees it where fleetq made it.
fn validate_jobset(jobset: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&jobset["metadata"], "metadata");
    let name = jobset["metadata"]["name"].as_str().unwrap_or_default();
    let Some(replicated) = jobset["spec"]["replicatedJobs"].as_array() else {
        errors.push(FieldError::required("spec.replicatedJobs", ""));
        return errors;
    };
    let mut names = BTreeSet::new();
    for (i, job) in replicated.iter().enumerate() {
        let path = format!("spec.replicatedJobs[{i}]");
        let job_name = job["name"].as_str().unwrap_or_default();
        for problem in dns1035_label(job_name) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                ErrorType::Invalid,
                Some(&job["name"]),
                problem,
            ));
        }
        if !names.insert(job_name) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                ErrorType::Duplicate,
                Some(&job["name"]),
                "",
            ));
        }
        errors.extend(non_negative(&job["replicas"], format!("{path}.replicas")));
        let replicas = job["replicas"].as_u64().unwrap_or(1);
        let longest_job = format!("{name}-{job_name}-{}", replicas.saturating_sub(1));
        let spec = &job["template"]["spec"];
        let mut longest = vec![longest_job.clone()];
        if spec["completionMode"] == "Indexed" {
            if let Some(completions) = spec["completions"].as_u64() {
                longest.push(format!(
                    "{longest_job}-{}-abcde",
                    completions.saturating_sub(1)
                ));
            }
        }
        for derived in longest {
            for problem in dns1035_label(&derived) {
                errors.push(FieldError::new(
                    "metadata.name",
                    ErrorType::Invalid,
                    Some(&json!(derived)),
                    problem,
                ));
            }
        }
        for field in ["parallelism", "completions", "backoffLimit"] {
            errors.extend(non_negative(
                &spec[field],
                format!("{path}.template.spec.{field}"),
            ));
        }
        let template = &spec["template"];
        errors.extend(validate_labels(
            &template["metadata"]["labels"],
            &format!("{path}.template.spec.template.metadata.labels"),
        ));
        errors.extend(validate_annotations(
            &template["metadata"]["annotations"],
            &format!("{path}.template.spec.template.metadata.annotations"),
        ));
        errors.extend(validate_pod_spec(
            &template["spec"],
            &format!("{path}.template.spec.template.spec"),
            true,
        ));
    }
    errors
}

/// `ValidateJob`: metadata, the generated (or manual) selector and the
/// labels it selects, counts, and the pod template.
fn validate_job(job: &Value) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&job["metadata"], "metadata");
    let spec = &job["spec"];
    for field in [
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ] {
        errors.extend(non_negative(&spec[field], format!("spec.{field}")));
    }
    errors.extend(validate_managed_by(&spec["managedBy"]));
    let template_labels = &spec["template"]["metadata"]["labels"];
    let selector = &spec["selector"];
    if spec["manualSelector"] != json!(true) {
        // validateGeneratedSelector
        let uid = &job["metadata"]["uid"];
        let name = &job["metadata"]["name"];
        for (label, want) in [
            (LEGACY_CONTROLLER_UID, uid),
            (CONTROLLER_UID, uid),
            (LEGACY_JOB_NAME, name),
            (JOB_NAME, name),
        ] {
            if template_labels[label] != *want {
                errors.push(FieldError::new(
                    "spec.template.metadata.labels",
                    ErrorType::Invalid,
                    Some(template_labels),
                    format!("`{label}` must be {}", go_value(want)),
                ));
            }
        }
        let generated = json!({ "matchLabels": { CONTROLLER_UID: uid } });
        if selector.is_null() {
            errors.push(FieldError::required(
                "spec.selector",
                "This field should be autogenerated.",
            ));
        } else if *selector != generated {
            errors.push(FieldError::new(
                "spec.selector",
                ErrorType::Invalid,
                Some(selector),
                "`selector` not auto-generated",
            ));
        }
    } else if selector.is_null() {
        errors.push(FieldError::required("spec.selector", ""));
    }
    if let Some(match_labels) = selector["matchLabels"].as_object() {
        let selects = match_labels
            .iter()
            .all(|(k, v)| template_labels.get(k) == Some(v));
        if !selects {
            errors.push(FieldError::new(
                "spec.template.metadata.labels",
                ErrorType::Invalid,
                Some(template_labels),
                "`selector` does not match template `labels`",
            ));
        }
    }
    errors.extend(validate_labels(
        template_labels,
        "spec.template.metadata.labels",
    ));
    errors.extend(validate_annotations(
        &spec["template"]["metadata"]["annotations"],
        "spec.template.metadata.annotations",
    ));
    errors.extend(validate_pod_spec(
        &spec["template"]["spec"],
        "spec.template.spec",
        true,
    ));
    errors
}

/// The pod template without what a suspended Job that never started may
/// still change (JobMutableSchedulingDirectives, GA in 1.27).
fn without_scheduling_directives(template: &Value) -> Value {
    let mut t = template.clone();
    if let Some(spec) = t["spec"].as_object_mut() {
        for key in ["nodeSelector", "affinity", "tolerations", "schedulingGates"] {
            spec.remove(key);
        }
    }
    if let Some(meta) = t["metadata"].as_object_mut() {
        meta.remove("labels");
        meta.remove("annotations");
    }
    t
}

/// `ValidateJobSpecUpdate`: the selector, the pod template (but for the
/// scheduling directives of a suspended Job that never started), the
/// completion mode and (outside elastic indexed Jobs) completions are
/// immutable.
fn validate_job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let immutable = |field: &str, value: &Value| {
        FieldError::new(field, ErrorType::Invalid, Some(value), "field is immutable")
    };
    let (old_spec, new_spec) = (&old["spec"], &new["spec"]);
    if old_spec["selector"] != new_spec["selector"] {
        errors.push(immutable("spec.selector", &new_spec["selector"]));
    }
    let never_started = old_spec["suspend"] == json!(true) && old["status"]["startTime"].is_null();
    let template_changed = if never_started {
        without_scheduling_directives(&old_spec["template"])
            != without_scheduling_directives(&new_spec["template"])
    } else {
        old_spec["template"] != new_spec["template"]
    };
    if template_changed {
        errors.push(immutable("spec.template", &new_spec["template"]));
    }
    if old_spec["managedBy"] != new_spec["managedBy"] {
        errors.push(immutable("spec.managedBy", &new_spec["managedBy"]));
    }
    if old_spec["completionMode"] != new_spec["completionMode"] {
        errors.push(immutable(
            "spec.completionMode",
            &new_spec["completionMode"],
        ));
    }
    let elastic = new_spec["completionMode"] == "Indexed"
        && new_spec["completions"] == new_spec["parallelism"];
    if old_spec["completions"] != new_spec["completions"] && !elastic {
        errors.push(immutable("spec.completions", &new_spec["completions"]));
    }
    errors
}

/// batch/v1 `SetDefaults_Job`: counts, backoff, completion mode, suspend,
/// pod replacement, and the Job's labels from its template's when it has
/// none.
fn default_job(job: &mut Value) {
    if !job["spec"].is_object() {
        job["spec"] = json!({});
    }
    let template_labels = job["spec"]["template"]["metadata"]["labels"].clone();
    let labels = &job["metadata"]["labels"];
    if labels.as_object().is_none_or(Map::is_empty)
        && template_labels.as_object().is_some_and(|l| !l.is_empty())
    {
        job["metadata"]["labels"] = template_labels;
    }
    let spec = &mut job["spec"];
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
    }
    if spec["parallelism"].is_null() {
        spec["parallelism"] = json!(1);
    }
    if spec["backoffLimit"].is_null() && spec["backoffLimitPerIndex"].is_null() {
        spec["backoffLimit"] = json!(6);
    }
    for (field, default) in [
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        if spec[field].is_null() {
            spec[field] = default;
        }
    }
}

/// The Job strategy's `generateSelector` on create (unless
/// `manualSelector`): the controller labels added to the template where
/// absent, and the selector on the controller uid. A selector or labels a
/// client copied from another Job are kept, and so fail validation.
fn generate_selector(job: &mut Value) {
    if job["spec"]["manualSelector"] == json!(true) {
        return;
    }
    let uid = job["metadata"]["uid"].clone();
    let name = job["metadata"]["name"].clone();
    let template = &mut job["spec"]["template"];
    if !template.is_object() {
        *template = json!({});
    }
    if !template["metadata"].is_object() {
        template["metadata"] = json!({});
    }
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        for (label, value) in [
            (LEGACY_JOB_NAME, &name),
            (JOB_NAME, &name),
            (LEGACY_CONTROLLER_UID, &uid),
            (CONTROLLER_UID, &uid),
        ] {
            labels.entry(label).or_insert_with(|| value.clone());
        }
    }
    let selector = &mut job["spec"]["selector"];
    if !selector.is_object() {
        *selector = json!({});
    }
    if !selector["matchLabels"].is_object() {
        selector["matchLabels"] = json!({});
    }
    if let Some(match_labels) = selector["matchLabels"].as_object_mut() {
        match_labels.entry(CONTROLLER_UID).or_insert(uid);
    }
}

/// core/v1 `SetDefaults_Pod`: each container's missing requests from its
/// limits (for Pods only, not pod templates), restart policy Always, and
/// phase Pending when the test gave no status.
fn default_pod(pod: &mut Value) {
    for key in ["initContainers", "containers"] {
        // `get_mut`, not indexing: indexing a Value mutably inserts a null
        // field, which no real API server returns.
        let Some(containers) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(key))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers {
            let limits = c["resources"]["limits"].as_object().cloned();
            for (name, q) in limits.into_iter().flatten() {
                if c["resources"]["requests"][&name].is_null() {
                    c["resources"]["requests"][&name] = q;
                }
            }
        }
    }
    if pod["spec"]["restartPolicy"].is_null() {
        pod["spec"]["restartPolicy"] = json!("Always");
    }
    if pod["status"]["phase"].is_null() {
        pod["status"]["phase"] = json!("Pending");
    }
}

// ---------------------------------------------------------------------------
// Watches
// ---------------------------------------------------------------------------

fn is_watch(query: &BTreeMap<String, String>) -> Result<bool, ApiError> {
    match query.get("watch").map(String::as_str) {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid value for watch: {other:?}"
        ))),
    }
}

/// Starts a watch stream.
///
/// * `resourceVersion=N` (N > 0): replays every logged event after N, then
///   follows. This is what kube's watcher sends after its initial list, and
///   when it reconnects. When events after N are no longer kept, the
///   stream is one ERROR event with a 410 Expired Status, as the watch
///   cache answers (over a 200: kube's watcher then re-lists; an HTTP 410
///   would make it retry the same version forever).
/// * no `resourceVersion`, or `"0"`: synthetic ADDED events for the current
///   state, then follows, like the API server's "start at most recent".
/// * `sendInitialEvents=true` (kube's streaming-list mode): the same
///   synthetic ADDED events, then a BOOKMARK annotated
///   `k8s.io/initial-events-end`, which is how the client learns the initial
///   state is complete.
/// * `timeoutSeconds`: the response ends after that long and the client is
///   expected to reconnect, as with the real server.
/// * `allowWatchBookmarks` is accepted and ignored: the fake sends no
///   periodic bookmarks, so a watcher whose objects do not change while
///   more than the window of other changes happen gets 410 on reconnect.
///
/// While watches are paused ([`FakeKube::pause_watches`]) the request waits
/// before it reads anything.
async fn watch_collection(
    shared: Arc<Shared>,
    filter: Filter,
    query: &BTreeMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let since = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid resourceVersion {s:?} for a watch"))
        })?),
    };
    let initial_events = match query.get("sendInitialEvents").map(String::as_str) {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid value for sendInitialEvents: {other:?}"
            )))
        }
    };
    let timeout = match query.get("timeoutSeconds").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(s) => Some(Duration::from_secs(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {s:?}"))
        })?)),
    };

    let mut paused = shared.paused.subscribe();
    while *paused.borrow_and_update() {
        if paused.changed().await.is_err() {
            break;
        }
    }
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);

    // Subscribe before reading the log: anything committed after this point
    // wakes the stream, anything before it is in what we read below.
    let changes = shared.changed.subscribe();
    let (first, cursor, ended) = {
        let store = shared.lock();
        match since {
            Some(rv) if !initial_events => match store.events_after(rv, &filter) {
                Ok((lines, cursor)) => (lines, cursor, false),
                Err(gone) => (vec![watch_line("ERROR", &gone.status())], store.rv, true),
            },
            _ => {
                let mut lines: Vec<Bytes> = store
                    .entries(filter.kind)
                    .iter()
                    .filter(|e| filter.matches(&e.object))
                    .map(|e| watch_line("ADDED", &e.object))
                    .collect();
                if initial_events {
                    let bookmark = json!({
                        "apiVersion": filter.kind.api_version(),
                        "kind": filter.kind.kind(),
                        "metadata": {
                            "resourceVersion": store.rv.to_string(),
                            "annotations": { "k8s.io/initial-events-end": "true" },
                        },
                    });
                    lines.push(watch_line("BOOKMARK", &bookmark));
                }
                (lines, store.rv, false)
            }
        }
    };

    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    if ended {
        for line in first {
            let _ = tx.try_send(line);
        }
        drop(tx);
    } else {
        tokio::spawn(stream_events(
            shared, filter, first, cursor, changes, paused, tx, deadline,
        ));
    }
    let frames = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|line| line.map(|l| Ok::<_, Infallible>(Frame::data(l))))
    });
    let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

/// Feeds one watch response until the client goes away, the deadline
/// passes, watches are paused or the server stops; dropping `tx` ends the
/// chunked body. A watcher that falls behind the kept history (its next
/// events were dropped before it read them) gets the 410 ERROR event and
/// its stream ends, as the API server ends a watch it cannot continue.
#[allow(clippy::too_many_arguments)]
async fn stream_events(
    shared: Arc<Shared>,
    filter: Filter,
    first: Vec<Bytes>,
    mut cursor: u64,
    mut changes: watch::Receiver<u64>,
    mut paused: watch::Receiver<bool>,
    tx: mpsc::Sender<Bytes>,
    deadline: Option<tokio::time::Instant>,
) {
    let until_deadline = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    let until_paused = async {
        loop {
            if *paused.borrow_and_update() {
                return;
            }
            if paused.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let feed = async {
        for line in first {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
            let next = {
                let store = shared.lock();
                store.events_after(cursor, &filter)
            };
            match next {
                Ok((lines, seen)) => {
                    cursor = seen;
                    for line in lines {
                        if tx.send(line).await.is_err() {
                            return;
                        }
                    }
                }
                Err(gone) => {
                    let _ = tx.send(watch_line("ERROR", &gone.status())).await;
                    return;
                }
            }
        }
    };
    // Biased, so a stream polled after pause_watches() ends before it
    // sends anything committed after the pause.
    tokio::select! {
        biased;
        _ = until_paused => {}
        _ = until_deadline => {}
        _ = feed => {}
    }
}

fn watch_line(kind_of_event: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind_of_event, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

// ---------------------------------------------------------------------------
// Selectors
// ---------------------------------------------------------------------------

/// Which objects a list or watch is about: the resource, the namespace scope
/// and the label and field selectors.
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: Vec<LabelTerm>,
    fields: Vec<FieldTerm>,
}

enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

struct FieldTerm {
    path: &'static str,
    value: String,
    negated: bool,
}

impl Filter {
    fn from_query(
        kind: Kind,
        namespace: Option<String>,
        query: &BTreeMap<String, String>,
    ) -> Result<Filter, ApiError> {
        let labels = parse_label_selector(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|e| ApiError::bad_request(format!("unable to parse labelSelector: {e}")))?;
        let fields =
            parse_field_selector(kind, query.get("fieldSelector").map_or("", String::as_str))
                .map_err(ApiError::bad_request)?;
        Ok(Filter {
            kind,
            namespace,
            labels,
            fields,
        })
    }

    /// Whether `object` (as it is at one moment) is selected. A watch
    /// compares an event's object before and after
    /// ([`LoggedEvent::as_seen_by`]).
    fn matches(&self, object: &Value) -> bool {
        let meta = &object["metadata"];
        if let Some(ns) = &self.namespace {
            if meta["namespace"].as_str() != Some(ns) {
                return false;
            }
        }
        let label = |key: &str| meta["labels"][key].as_str();
        let labels_match = self.labels.iter().all(|term| match term {
            LabelTerm::Equals(k, v) => label(k) == Some(v),
            LabelTerm::NotEquals(k, v) => label(k) != Some(v),
            LabelTerm::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelTerm::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelTerm::Exists(k) => label(k).is_some(),
            LabelTerm::NotExists(k) => label(k).is_none(),
        });
        labels_match
            && self.fields.iter().all(|term| {
                let actual = field_value(object, term.path);
                (actual == term.value) != term.negated
            })
    }
}

/// Parses the label selector grammar: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
/// `k in (a,b)` and `k notin (a,b)`, comma-separated.
fn parse_label_selector(selector: &str) -> Result<Vec<LabelTerm>, String> {
    if selector.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut raw_terms = Vec::new();
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                raw_terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    raw_terms.push(&selector[start..]);
    for raw in raw_terms {
        let term = raw.trim();
        let term = if let Some(key) = term.strip_prefix('!') {
            LabelTerm::NotExists(label_key(key.trim())?)
        } else if let Some(open) = term.find('(') {
            let mut words = term[..open].split_whitespace();
            let (key, op) = match (words.next(), words.next(), words.next()) {
                (Some(key), Some(op), None) => (label_key(key)?, op),
                _ => return Err(format!("cannot parse {term:?}")),
            };
            let inner = term[open + 1..]
                .strip_suffix(')')
                .ok_or_else(|| format!("missing ')' in {term:?}"))?;
            let values = inner
                .split(',')
                .map(|v| label_value(v.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            match op {
                "in" => LabelTerm::In(key, values),
                "notin" => LabelTerm::NotIn(key, values),
                _ => return Err(format!("unknown operator {op:?} in {term:?}")),
            }
        } else if let Some((k, v)) = term.split_once("!=") {
            LabelTerm::NotEquals(label_key(k.trim())?, label_value(v.trim())?)
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            LabelTerm::Equals(label_key(k.trim())?, label_value(v.trim())?)
        } else {
            LabelTerm::Exists(label_key(term)?)
        };
        terms.push(term);
    }
    Ok(terms)
}

fn label_key(key: &str) -> Result<String, String> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if valid {
        Ok(key.to_string())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn label_value(value: &str) -> Result<String, String> {
    if value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Ok(value.to_string())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

/// Parses `path=v`, `path==v` and `path!=v` terms, for the fields the real
/// API server supports for each resource; any other field is a 400 there
/// too, so a test cannot come to rely on one that would fail in a cluster.
fn parse_field_selector(kind: Kind, selector: &str) -> Result<Vec<FieldTerm>, String> {
    if selector.trim().is_empty() {
        return Ok(Vec::new());
    }
    let supported: &[&'static str] = match kind {
        Kind::Node => &["metadata.name", "metadata.namespace", "spec.unschedulable"],
        Kind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Kind::Job => &["metadata.name", "metadata.namespace", "status.successful"],
        Kind::JobSet | Kind::PyTorchJob | Kind::RayJob | Kind::Event => {
            &["metadata.name", "metadata.namespace"]
        }
    };
    selector
        .split(',')
        .map(|term| {
            let term = term.trim();
            let (path, value, negated) = if let Some((p, v)) = term.split_once("!=") {
                (p, v, true)
            } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (p, v, false)
            } else {
                return Err(format!("invalid fieldSelector term {term:?}"));
            };
            let path = supported
                .iter()
                .copied()
                .find(|s| *s == path.trim())
                .ok_or_else(|| {
                    format!(
                        "field label not supported: {} (the fake knows {supported:?} for {})",
                        path.trim(),
                        kind.plural()
                    )
                })?;
            Ok(FieldTerm {
                path,
                value: value.trim().to_string(),
                negated,
            })
        })
        .collect()
}

/// A field's value as the API server's field selectors compare it: as a
/// string, with the Go zero value for a missing field.
fn field_value(object: &Value, path: &str) -> String {
    let value = path.split('.').fold(object, |v, key| &v[key]);
    match (path, value) {
        (_, Value::String(s)) => s.clone(),
        (_, Value::Bool(b)) => b.to_string(),
        (_, Value::Number(n)) => n.to_string(),
        ("spec.unschedulable" | "spec.hostNetwork", _) => "false".into(),
        ("status.successful", _) => "0".into(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// The object's `metadata`, created when absent; an error when it is
/// something other than an object, since that can only be bad client input.
fn metadata_mut(obj: &mut Map<String, Value>) -> Result<&mut Map<String, Value>, String> {
    obj.entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| "metadata must be an object".to_string())
}

/// Query parameters, percent-decoded. kube builds URLs like `jobs?&watch=...`,
/// so empty pairs are skipped; a repeated key keeps its last value.
fn parse_query(query: &str) -> Result<BTreeMap<String, String>, String> {
    let mut params = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(percent_decode(key, true)?, percent_decode(value, true)?);
    }
    Ok(params)
}

fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let byte = s
                    .get(i + 1..i + 3)
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                    .ok_or_else(|| format!("invalid percent-encoding in {s:?}"))?;
                out.push(byte);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

/// A uid shaped like the API server's (a version-4 UUID), unique within the
/// fake because it embeds the resourceVersion that created the object.
fn uid(rv: u64) -> String {
    format!("fa4e0000-0000-4000-8000-{rv:012x}")
}

/// The five-character suffix `generateName` gets, derived from a counter so
/// that runs are reproducible.
fn random_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// RFC 3339 in UTC with second precision, as Kubernetes writes timestamps.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// algorithm), to avoid a date-time dependency for one format call.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
