//! A fake Kubernetes API server for end-to-end tests of the kube-rs client.
//!
//! The agent talks to a cluster through kube's typed `Api<Node>` / `Api<Job>`
//! calls and kube-runtime's `watcher`. A real cluster (or kind) is too slow and
//! too heavy for `cargo test`, and mocking at the Rust level would skip exactly
//! the parts that break in practice: URLs, query parameters, status codes,
//! `Status` bodies and the watch stream's framing and resourceVersion
//! bookkeeping. So this fake speaks the wire protocol itself, over plain
//! HTTP/1.1 on loopback, for the two resources the agent uses, and lets a test
//! play the rest of the cluster: the node inventory ([`FakeKube::put_node`]),
//! the Job controller ([`FakeKube::set_job_status`]) and the garbage collector
//! (the delayed removal after a foreground delete).
//!
//! Where the real API server's behaviour matters to a client it is copied:
//! one global, monotonically increasing resourceVersion; 201/409/404 with
//! `Status` bodies; an immediate delete answers with a `Status` of
//! `Success` (so kube returns `Either::Right`) while a foreground delete
//! answers with the terminating object (`Either::Left`); watches replay from
//! a resourceVersion. Where it does not matter to this project it is left out:
//! no admission defaulting of Job specs, no validation of spec contents, no
//! PATCH/PUT, no finalizers other than `foregroundDeletion`, and every list
//! is served at the latest resourceVersion whatever `resourceVersionMatch`
//! asks for (the event log is never compacted, so no watch ever gets 410).
//!
//! Tests are synchronous, so the server runs on its own single-threaded tokio
//! runtime on a background thread, and the test-side methods only take a lock.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// A fake API server serving Nodes and batch/v1 Jobs on 127.0.0.1.
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
    /// Starts serving on 127.0.0.1:<ephemeral>.
    ///
    /// The socket is bound before this returns, so a client may connect at
    /// once; connections queue in the backlog until the server thread runs.
    pub fn start() -> FakeKube {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("fake kube: bind a loopback port");
        let addr = listener.local_addr().expect("fake kube: local address");
        listener
            .set_nonblocking(true)
            .expect("fake kube: non-blocking listener");
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            changed,
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

    /// Adds or replaces a Node (a full v1 Node object as JSON; metadata.name
    /// is the key). Emits ADDED or MODIFIED to watchers.
    ///
    /// A replaced Node keeps its uid and creationTimestamp, as an update on a
    /// real cluster would.
    pub fn put_node(&self, mut node: Value) {
        let name = node["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .expect("put_node: the Node needs a metadata.name");
        let obj = node
            .as_object_mut()
            .expect("put_node: the Node must be a JSON object");
        self.shared.commit(|store| {
            let rv = store.next_rv();
            let existing = store.position(Kind::Node, None, &name);
            let previous = existing.map(|i| store.nodes[i].object.clone());
            obj.insert("apiVersion".into(), json!("v1"));
            obj.insert("kind".into(), json!("Node"));
            let meta = metadata_mut(obj).expect("put_node: metadata must be an object");
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
            meta.remove("namespace");
            meta.insert("resourceVersion".into(), json!(rv.to_string()));
            let object = Value::Object(obj.clone());
            match existing {
                Some(i) => {
                    store.nodes[i].object = object.clone();
                    store.log_event(rv, Kind::Node, "MODIFIED", object);
                }
                None => {
                    let seq = store.next_seq();
                    store.nodes.push(Entry {
                        seq,
                        object: object.clone(),
                    });
                    store.log_event(rv, Kind::Node, "ADDED", object);
                }
            }
        });
    }

    /// Replaces the `status` of Job ns/name (emits MODIFIED); panics if there
    /// is no such Job.
    ///
    /// This is the test playing the Job controller, which is why it bumps the
    /// resourceVersion but not `metadata.generation`.
    pub fn set_job_status(&self, namespace: &str, name: &str, status: Value) {
        self.shared.commit(|store| {
            let i = store
                .position(Kind::Job, Some(namespace), name)
                .unwrap_or_else(|| panic!("set_job_status: no Job {namespace}/{name}"));
            let rv = store.next_rv();
            let object = &mut store.jobs[i].object;
            object["status"] = status;
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let object = object.clone();
            store.log_event(rv, Kind::Job, "MODIFIED", object);
        });
    }

    /// Every Job currently stored (with server-set fields), in creation order.
    pub fn jobs(&self) -> Vec<Value> {
        let store = self.shared.lock();
        store.jobs.iter().map(|e| e.object.clone()).collect()
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

// ---------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------

/// The two resources the fake serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Node,
    Job,
}

impl Kind {
    fn api_version(self) -> &'static str {
        match self {
            Kind::Node => "v1",
            Kind::Job => "batch/v1",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Job => "Job",
        }
    }

    fn list_kind(self) -> &'static str {
        match self {
            Kind::Node => "NodeList",
            Kind::Job => "JobList",
        }
    }

    /// The plural resource name, as `Status.details.kind` spells it.
    fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Job => "jobs",
        }
    }

    fn group(self) -> &'static str {
        match self {
            Kind::Node => "",
            Kind::Job => "batch",
        }
    }

    /// "nodes" or "jobs.batch", the way the API server names a resource in
    /// error messages.
    fn qualified(self) -> String {
        match self.group() {
            "" => self.plural().to_string(),
            group => format!("{}.{group}", self.plural()),
        }
    }
}

/// A stored object and its creation sequence number; the sequence number
/// orders lists and serves as the continue token, so pagination stays stable
/// while objects come and go.
struct Entry {
    seq: u64,
    object: Value,
}

/// One watch event as it was emitted; the log is what lets a watch resume
/// from any resourceVersion.
struct LoggedEvent {
    rv: u64,
    kind: Kind,
    kind_of_event: &'static str,
    object: Value,
}

#[derive(Default)]
struct Store {
    /// The last resourceVersion handed out (one counter for everything, like
    /// etcd's revision).
    rv: u64,
    seq: u64,
    nodes: Vec<Entry>,
    jobs: Vec<Entry>,
    log: Vec<LoggedEvent>,
    deletes: Vec<(String, String, Value)>,
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
            Kind::Job => &self.jobs,
        }
    }

    fn position(&self, kind: Kind, namespace: Option<&str>, name: &str) -> Option<usize> {
        self.entries(kind).iter().position(|e| {
            e.object["metadata"]["name"].as_str() == Some(name)
                && namespace.is_none_or(|ns| e.object["metadata"]["namespace"].as_str() == Some(ns))
        })
    }

    fn log_event(&mut self, rv: u64, kind: Kind, kind_of_event: &'static str, object: Value) {
        self.log.push(LoggedEvent {
            rv,
            kind,
            kind_of_event,
            object,
        });
    }

    /// Watch lines for the logged events after `after` that pass `filter`,
    /// and the resourceVersion the watcher has now seen up to.
    fn events_after(&self, after: u64, filter: &Filter) -> (Vec<Bytes>, u64) {
        let start = self.log.partition_point(|e| e.rv <= after);
        let lines = self.log[start..]
            .iter()
            .filter(|e| e.kind == filter.kind && filter.matches(&e.object))
            .map(|e| watch_line(e.kind_of_event, &e.object))
            .collect();
        (lines, self.rv.max(after))
    }
}

struct Shared {
    store: Mutex<Store>,
    /// Carries the latest resourceVersion; watch streams wait on it instead
    /// of polling.
    changed: watch::Sender<u64>,
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

    fn invalid(kind: Kind, name: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            code: 422,
            reason: "Invalid",
            message: message.into(),
            details: Some(details(kind, name)),
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
                      (the fake serves GET, list/watch, POST of Jobs and DELETE of Jobs only)"
                .into(),
            details: None,
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

    fn into_response(self) -> Response<Body> {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = self.details {
            status["details"] = details;
        }
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &status)
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
    /// Jobs across namespaces).
    Collection {
        kind: Kind,
        namespace: Option<String>,
    },
    Item {
        kind: Kind,
        namespace: Option<String>,
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
    let owned = |s: &str| s.to_string();
    match segments.as_slice() {
        ["version"] => Ok(Route::Version),
        ["api", "v1", "nodes"] => Ok(Route::Collection {
            kind: Kind::Node,
            namespace: None,
        }),
        ["api", "v1", "nodes", name] if !name.is_empty() => Ok(Route::Item {
            kind: Kind::Node,
            namespace: None,
            name: owned(name),
        }),
        ["apis", "batch", "v1", "jobs"] => Ok(Route::Collection {
            kind: Kind::Job,
            namespace: None,
        }),
        ["apis", "batch", "v1", "namespaces", ns, "jobs"] if !ns.is_empty() => {
            Ok(Route::Collection {
                kind: Kind::Job,
                namespace: Some(owned(ns)),
            })
        }
        ["apis", "batch", "v1", "namespaces", ns, "jobs", name]
            if !ns.is_empty() && !name.is_empty() =>
        {
            Ok(Route::Item {
                kind: Kind::Job,
                namespace: Some(owned(ns)),
                name: owned(name),
            })
        }
        _ => Err(ApiError::unknown_path(path)),
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    match dispatch(shared, req).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

async fn dispatch(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let route = route(req.uri().path())?;
    let query = parse_query(req.uri().query().unwrap_or("")).map_err(ApiError::bad_request)?;
    let method = req.method().clone();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?
        .to_bytes();
    match (route, method) {
        (Route::Version, Method::GET) => Ok(json_response(StatusCode::OK, &version())),
        (Route::Collection { kind, namespace }, Method::GET) => {
            let filter = Filter::from_query(kind, namespace, &query)?;
            if is_watch(&query)? {
                watch_collection(shared, filter, &query)
            } else {
                list(&shared, &filter, &query)
            }
        }
        (
            Route::Collection {
                kind: Kind::Job,
                namespace: Some(namespace),
            },
            Method::POST,
        ) => create_job(&shared, &namespace, &query, &body),
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
            Method::DELETE,
        ) => delete_job(&shared, &namespace, &name, &query, &body),
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

/// Lists at the latest resourceVersion. `limit`/`continue` are honoured
/// (the watcher asks for pages of 500); `resourceVersion` and
/// `resourceVersionMatch` are accepted and ignored, which is a valid answer
/// to "any" and "not older than" since nothing here is ever stale.
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
    let after = match query.get("continue").map(String::as_str) {
        None | Some("") => 0,
        Some(s) => s
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid continue token {s:?}")))?,
    };
    let store = shared.lock();
    let matching: Vec<&Entry> = store
        .entries(filter.kind)
        .iter()
        .filter(|e| e.seq > after && filter.matches(&e.object))
        .collect();
    let take = limit.unwrap_or(matching.len()).min(matching.len());
    let items: Vec<Value> = matching[..take].iter().map(|e| e.object.clone()).collect();
    let mut metadata = json!({ "resourceVersion": store.rv.to_string() });
    if take < matching.len() {
        metadata["continue"] = json!(matching[take - 1].seq.to_string());
        metadata["remainingItemCount"] = json!(matching.len() - take);
    }
    let list = json!({
        "apiVersion": filter.kind.api_version(),
        "kind": filter.kind.list_kind(),
        "metadata": metadata,
        "items": items,
    });
    Ok(json_response(StatusCode::OK, &list))
}

fn create_job(
    shared: &Shared,
    namespace: &str,
    query: &BTreeMap<String, String>,
    body: &[u8],
) -> Result<Response<Body>, ApiError> {
    let mut job: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not a JSON Job: {e}")))?;
    let obj = job
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body is not a JSON object"))?;
    for (field, expected) in [("apiVersion", "batch/v1"), ("kind", "Job")] {
        match obj.get(field) {
            None => {}
            Some(Value::String(s)) if s == expected => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "{field} is {other}, expected {expected:?} when creating a Job"
                )))
            }
        }
        obj.insert(field.into(), json!(expected));
    }
    if !matches!(obj.get("spec"), None | Some(Value::Object(_))) {
        return Err(ApiError::bad_request("spec must be an object"));
    }
    let dry_run = query.contains_key("dryRun");
    let meta = metadata_mut(obj).map_err(ApiError::bad_request)?;
    match meta.get("namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(ns)) if ns.is_empty() || ns == namespace => {}
        Some(_) => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
    meta.insert("namespace".into(), json!(namespace));
    let given_name = match meta.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::bad_request("metadata.name must be a string")),
    };
    let generate_name = meta
        .get("generateName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if given_name.is_none() && generate_name.is_none() {
        return Err(ApiError::invalid(
            Kind::Job,
            "",
            "Job.batch \"\" is invalid: metadata.name: Required value: name or generateName is required",
        ));
    }
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

    let job = shared.commit(|store| {
        let name = match &given_name {
            Some(name) => name.clone(),
            None => format!(
                "{}{}",
                generate_name.as_deref().unwrap_or_default(),
                random_suffix(store.seq + 1)
            ),
        };
        if store.position(Kind::Job, Some(namespace), &name).is_some() {
            return Err(ApiError::already_exists(Kind::Job, &name));
        }
        let (rv, seq) = if dry_run {
            (store.rv, store.seq)
        } else {
            (store.next_rv(), store.next_seq())
        };
        let mut job = job.clone();
        let meta = &mut job["metadata"];
        meta["name"] = json!(name);
        meta["uid"] = json!(uid(rv));
        meta["resourceVersion"] = json!(rv.to_string());
        meta["creationTimestamp"] = json!(rfc3339(SystemTime::now()));
        meta["generation"] = json!(1);
        // The API server resets status on create; only the controller
        // (here: set_job_status) writes it.
        job["status"] = json!({});
        if !dry_run {
            store.jobs.push(Entry {
                seq,
                object: job.clone(),
            });
            store.log_event(rv, Kind::Job, "ADDED", job.clone());
        }
        Ok(job)
    })?;
    Ok(json_response(StatusCode::CREATED, &job))
}

fn delete_job(
    shared: &Arc<Shared>,
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
    shared.commit(|store| {
        store
            .deletes
            .push((namespace.to_string(), name.to_string(), options.clone()))
    });

    let invalid = |message: String| ApiError::invalid(Kind::Job, name, message);
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
    let foreground = match options.get("propagationPolicy") {
        None | Some(Value::Null) => false,
        Some(Value::String(p)) if p == "Foreground" => true,
        Some(Value::String(p)) if p == "Background" || p == "Orphan" => false,
        Some(other) => {
            return Err(invalid(format!(
                "propagationPolicy: Unsupported value: {other}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )))
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
            .position(Kind::Job, Some(namespace), name)
            .ok_or_else(|| ApiError::not_found(Kind::Job, name))?;
        let current = &store.jobs[i].object;
        for (field, wanted) in [("uid", &want_uid), ("resourceVersion", &want_rv)] {
            let actual = current["metadata"][field].as_str().unwrap_or_default();
            if let Some(wanted) = wanted.as_deref().filter(|w| *w != actual) {
                return Err(ApiError::conflict(
                    Kind::Job,
                    name,
                    format!(
                        "Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                    ),
                ));
            }
        }
        // A Job already being deleted stays as it is: repeating the delete
        // just reports the terminating object, as the API server does.
        if dry_run || !current["metadata"]["deletionTimestamp"].is_null() {
            return Ok(Deleted::Pending(current.clone()));
        }
        let rv = store.next_rv();
        if foreground {
            let job = &mut store.jobs[i].object;
            let meta = &mut job["metadata"];
            meta["resourceVersion"] = json!(rv.to_string());
            meta["deletionTimestamp"] = json!(rfc3339(SystemTime::now()));
            meta["deletionGracePeriodSeconds"] = json!(0);
            let mut finalizers: Vec<Value> = meta["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !finalizers.iter().any(|f| f == "foregroundDeletion") {
                finalizers.push(json!("foregroundDeletion"));
            }
            meta["finalizers"] = Value::Array(finalizers);
            let job = job.clone();
            store.log_event(rv, Kind::Job, "MODIFIED", job.clone());
            Ok(Deleted::Foreground(job))
        } else {
            let mut job = store.jobs.remove(i).object;
            job["metadata"]["resourceVersion"] = json!(rv.to_string());
            store.log_event(rv, Kind::Job, "DELETED", job.clone());
            Ok(Deleted::Now(job))
        }
    })?;

    match outcome {
        Deleted::Pending(job) => Ok(json_response(StatusCode::OK, &job)),
        Deleted::Foreground(job) => {
            let uid = job["metadata"]["uid"].clone();
            let shared = shared.clone();
            let (namespace, name) = (namespace.to_string(), name.to_string());
            tokio::spawn(async move {
                tokio::time::sleep(FOREGROUND_GC_DELAY).await;
                collect_garbage(&shared, &namespace, &name, &uid);
            });
            Ok(json_response(StatusCode::OK, &job))
        }
        Deleted::Now(job) => {
            // The Job registry does not set ReturnDeletedObject, so an
            // immediate delete answers with a Success Status, which kube
            // reports as `Either::Right`.
            let mut details = details(Kind::Job, name);
            details["uid"] = job["metadata"]["uid"].clone();
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
    /// Nothing changed (a dry run, or the Job was already terminating).
    Pending(Value),
    /// Marked for foreground deletion; removal follows later.
    Foreground(Value),
    /// Removed at once.
    Now(Value),
}

/// The garbage collector's half of a foreground delete: once the (imagined)
/// pods are gone, the Job goes. The uid check keeps a Job recreated under
/// the same name in the meantime from being removed in its place.
fn collect_garbage(shared: &Shared, namespace: &str, name: &str, uid: &Value) {
    shared.commit(|store| {
        let Some(i) = store.position(Kind::Job, Some(namespace), name) else {
            return;
        };
        if store.jobs[i].object["metadata"]["uid"] != *uid {
            return;
        }
        let rv = store.next_rv();
        let mut job = store.jobs.remove(i).object;
        job["metadata"]["resourceVersion"] = json!(rv.to_string());
        job["metadata"]["finalizers"] = json!([]);
        store.log_event(rv, Kind::Job, "DELETED", job);
    });
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
///   when it reconnects.
/// * no `resourceVersion`, or `"0"`: synthetic ADDED events for the current
///   state, then follows, like the API server's "start at most recent".
/// * `sendInitialEvents=true` (kube's streaming-list mode): the same
///   synthetic ADDED events, then a BOOKMARK annotated
///   `k8s.io/initial-events-end`, which is how the client learns the initial
///   state is complete.
/// * `timeoutSeconds`: the response ends after that long and the client is
///   expected to reconnect, as with the real server.
/// * `allowWatchBookmarks` is accepted and ignored: bookmarks only save a
///   client work when the server's history is bounded, and ours is not.
fn watch_collection(
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
    let deadline = match query.get("timeoutSeconds").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(s) => {
            let secs = s
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {s:?}")))?;
            Some(tokio::time::Instant::now() + Duration::from_secs(secs))
        }
    };

    // Subscribe before reading the log: anything committed after this point
    // wakes the stream, anything before it is in what we read below.
    let changes = shared.changed.subscribe();
    let (first, cursor) = {
        let store = shared.lock();
        match since {
            Some(rv) if !initial_events => store.events_after(rv, &filter),
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
                (lines, store.rv)
            }
        }
    };

    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(stream_events(
        shared, filter, first, cursor, changes, tx, deadline,
    ));
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
/// passes or the server stops; dropping `tx` ends the chunked body.
async fn stream_events(
    shared: Arc<Shared>,
    filter: Filter,
    first: Vec<Bytes>,
    mut cursor: u64,
    mut changes: watch::Receiver<u64>,
    tx: mpsc::Sender<Bytes>,
    deadline: Option<tokio::time::Instant>,
) {
    let until_deadline = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
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
            let lines = {
                let store = shared.lock();
                let (lines, seen) = store.events_after(cursor, &filter);
                cursor = seen;
                lines
            };
            for line in lines {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    };
    tokio::select! {
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

    /// Evaluated against the object as it is in the event, so a watch with a
    /// selector sees only events whose object matches at that moment (the
    /// real server also sends a DELETED when an object stops matching; the
    /// fake does not).
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
        Kind::Node => &["metadata.name", "spec.unschedulable"],
        Kind::Job => &["metadata.name", "metadata.namespace", "status.successful"],
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
        ("spec.unschedulable", _) => "false".into(),
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
