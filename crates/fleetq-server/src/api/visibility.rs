//! Visibility of pending workloads (docs/cli.md, `get pending`): the pending workloads
//! of a ClusterQueue or of a LocalQueue, in the order the ClusterQueue
//! would admit them, with their positions and why they wait.
//!
//! Two front ends share [`pending_page`]:
//!
//! - gRPC `PendingWorkloads` ([`crate::api::service`]): positions are
//!   1-based (`position` in the ClusterQueue, `local_queue_position` in the
//!   LocalQueue), `limit` 0 means no limit.
//! - HTTP, shaped like Kueue's on-demand visibility API
//!   (`visibility.kueue.x-k8s.io`, served for `v1beta1` and, with the same
//!   shape, `v1alpha1` and `v1beta2`):
//!
//!   ```text
//!   GET /apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{name}/pendingworkloads?limit=N&offset=M
//!   GET /apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues/{name}/pendingworkloads?limit=N&offset=M
//!   ```
//!
//!   The answer is a `PendingWorkloadsSummary` as Kueue writes it:
//!
//!   ```json
//!   {"kind": "PendingWorkloadsSummary",
//!    "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
//!    "metadata": {"creationTimestamp": null},
//!    "items": [{"metadata": {"name": "train-1", "namespace": "default",
//!                            "creationTimestamp": "2025-01-02T03:04:05Z"},
//!               "priority": 1000, "localQueueName": "team-a",
//!               "positionInClusterQueue": 0, "positionInLocalQueue": 0,
//!               "clusterQueueName": "team-a",
//!               "reasonKind": "WaitingForQuota", "reason": "..."}],
//!    "total": 1}
//!   ```
//!
//!   As in Kueue, positions count from 0, `limit` defaults to 1000 (0
//!   also means 1000) and `offset` to 0; both page over the selected
//!   workloads (a LocalQueue's own, for the LocalQueue URL) while the
//!   positions stay those in the whole ClusterQueue and LocalQueue.
//!   fleetq adds `clusterQueueName`, `reasonKind` and `reason` to each
//!   item and `total` (the selected workloads before paging) to the
//!   summary; Kubernetes clients ignore fields they do not know.
//!   Errors are Kubernetes `Status` objects: 400 for a bad `limit` or
//!   `offset` (the message names the parameter), 404 for an unknown
//!   queue or path, 405 for methods other than GET and HEAD, 503 when the
//!   read barrier cannot be passed (no leader reachable).
//!
//! Reads are linearizable on both front ends: the handler first passes
//! the node's read barrier ([`Proposer::read_barrier`]: the leader
//! confirms its leadership, this node waits until it has applied the
//! leader's commit index), then reads its own replica. Any node answers
//! with what every node would.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use fleetq_ledger::store::LedgerHandle;
use fleetq_ledger::Ledger;
use fleetq_proto::v1 as pb;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode, Uri};
use serde::Serialize;

use crate::raft::proposer::Proposer;
use crate::status;

/// The API group of Kueue's visibility API.
pub const GROUP: &str = "visibility.kueue.x-k8s.io";
/// Where the HTTP server hands requests to [`respond`].
pub const PREFIX: &str = "/apis/visibility.kueue.x-k8s.io/";
/// Versions served (Kueue's `PendingWorkloadsSummary` has the same shape
/// in all three).
pub const VERSIONS: [&str; 3] = ["v1beta1", "v1beta2", "v1alpha1"];
/// Kueue's default page size.
pub const DEFAULT_LIMIT: u64 = 1000;

/// Which pending workloads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    ClusterQueue(String),
    LocalQueue { namespace: String, name: String },
}

impl Selector {
    /// The selector of a gRPC request: exactly one of `cluster_queue` or
    /// `namespace` + `local_queue`. The error names the field(s).
    pub fn from_request(req: &pb::PendingWorkloadsRequest) -> Result<Selector, String> {
        let cq = req.cluster_queue.as_str();
        let ns = req.namespace.as_str();
        let lq = req.local_queue.as_str();
        match (cq.is_empty(), ns.is_empty(), lq.is_empty()) {
            (false, true, true) => Ok(Selector::ClusterQueue(cq.to_string())),
            (true, false, false) => Ok(Selector::LocalQueue {
                namespace: ns.to_string(),
                name: lq.to_string(),
            }),
            (false, _, _) => Err(format!(
                "cluster_queue: give either cluster_queue ({cq:?}) or namespace and local_queue, not both"
            )),
            (true, true, true) => Err(
                "cluster_queue: one selector is required: cluster_queue, or namespace and local_queue"
                    .into(),
            ),
            (true, true, false) => Err(format!(
                "namespace: required with local_queue ({lq:?})"
            )),
            (true, false, true) => Err(format!(
                "local_queue: required with namespace ({ns:?})"
            )),
        }
    }
}

/// The selected queue does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unknown {
    ClusterQueue(String),
    LocalQueue { namespace: String, name: String },
}

impl Unknown {
    /// As the gRPC API says it: the request field first.
    pub fn grpc_message(&self) -> String {
        match self {
            Unknown::ClusterQueue(name) => {
                format!("cluster_queue: ClusterQueue {name:?} does not exist")
            }
            Unknown::LocalQueue { namespace, name } => format!(
                "local_queue: LocalQueue {name:?} does not exist in namespace {namespace:?}"
            ),
        }
    }
}

/// One page of pending workloads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// In admission order, `position` and `local_queue_position` set
    /// (1-based).
    pub items: Vec<pb::WorkloadStatus>,
    /// The selected pending workloads before paging.
    pub total: u64,
}

/// The pending workloads `selector` picks, in the ClusterQueue's
/// admission order, `offset` of them skipped and at most `limit` (None:
/// all) returned.
pub fn pending_page(
    ledger: &Ledger,
    selector: &Selector,
    offset: u64,
    limit: Option<u64>,
) -> Result<Page, Unknown> {
    let config = &ledger.state().config;
    let (cluster_queue, local_queue) = match selector {
        Selector::ClusterQueue(name) => {
            if !config.cluster_queues.contains_key(name) {
                return Err(Unknown::ClusterQueue(name.clone()));
            }
            (name.clone(), None)
        }
        Selector::LocalQueue { namespace, name } => {
            let key = format!("{namespace}/{name}");
            let lq = config
                .local_queues
                .get(&key)
                .ok_or_else(|| Unknown::LocalQueue {
                    namespace: namespace.clone(),
                    name: name.clone(),
                })?;
            (lq.spec.cluster_queue.clone(), Some(key))
        }
    };
    let snapshot = ledger.snapshot();
    let mut per_local_queue: HashMap<&str, u64> = HashMap::new();
    let mut page = Page::default();
    for (index, id) in status::pending_order(ledger, &cluster_queue)
        .into_iter()
        .enumerate()
    {
        let Some(pending) = snapshot.get_pending(id) else {
            continue;
        };
        let in_local_queue = per_local_queue
            .entry(pending.local_queue.as_str())
            .or_insert(0);
        *in_local_queue += 1;
        let in_local_queue = *in_local_queue;
        if local_queue
            .as_ref()
            .is_some_and(|key| *key != pending.local_queue)
        {
            continue;
        }
        page.total += 1;
        let full = limit.is_some_and(|l| page.items.len() as u64 >= l);
        if page.total <= offset || full {
            continue;
        }
        if let Some(record) = ledger.workload(id) {
            let mut s = status::workload_status(ledger, record);
            s.position = index as u64 + 1;
            s.local_queue_position = in_local_queue;
            page.items.push(s);
        }
    }
    Ok(page)
}

// ---------------------------------------------------------------- HTTP

/// What the HTTP handler needs of its node.
#[derive(Clone)]
pub struct Visibility {
    proposer: Arc<Proposer>,
    handle: LedgerHandle,
}

impl Visibility {
    /// Served from `handle`, after a read barrier through `proposer`.
    pub fn new(proposer: Arc<Proposer>, handle: LedgerHandle) -> Visibility {
        Visibility { proposer, handle }
    }
}

/// A parsed visibility request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub version: &'static str,
    pub selector: Selector,
    pub offset: u64,
    pub limit: u64,
}

/// An HTTP error, answered as a Kubernetes `Status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    pub code: StatusCode,
    /// Kubernetes' reason: BadRequest, NotFound, ...
    pub reason: &'static str,
    pub message: String,
    /// (kind, name) of what was not found.
    pub details: Option<(&'static str, String)>,
}

impl HttpError {
    fn bad_request(message: String) -> HttpError {
        HttpError {
            code: StatusCode::BAD_REQUEST,
            reason: "BadRequest",
            message,
            details: None,
        }
    }

    fn not_found(message: String, details: Option<(&'static str, String)>) -> HttpError {
        HttpError {
            code: StatusCode::NOT_FOUND,
            reason: "NotFound",
            message,
            details,
        }
    }

    fn of_unknown(unknown: &Unknown) -> HttpError {
        match unknown {
            Unknown::ClusterQueue(name) => HttpError::not_found(
                format!("clusterqueues.{GROUP} {name:?} not found: no ClusterQueue {name:?}"),
                Some(("clusterqueues", name.clone())),
            ),
            Unknown::LocalQueue { namespace, name } => HttpError::not_found(
                format!(
                    "localqueues.{GROUP} {name:?} not found: no LocalQueue {name:?} in namespace {namespace:?}"
                ),
                Some(("localqueues", name.clone())),
            ),
        }
    }
}

/// Parses the path (below [`PREFIX`]) and the query of a visibility URL.
pub fn parse(path: &str, query: Option<&str>) -> Result<Query, HttpError> {
    let not_found = || {
        HttpError::not_found(
            format!(
                "{path}: not found; try {PREFIX}v1beta1/clusterqueues/NAME/pendingworkloads or {PREFIX}v1beta1/namespaces/NS/localqueues/NAME/pendingworkloads"
            ),
            None,
        )
    };
    let rest = path.strip_prefix(PREFIX).ok_or_else(not_found)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let segments: Vec<&str> = rest.split('/').collect();
    let version = segments.first().copied().unwrap_or_default();
    let version = VERSIONS
        .iter()
        .copied()
        .find(|v| *v == version)
        .ok_or_else(|| {
            HttpError::not_found(
                format!(
                    "{path}: version {version:?} of {GROUP} is not served; use {}",
                    VERSIONS.join(", ")
                ),
                None,
            )
        })?;
    let named = |s: &str| !s.is_empty();
    let selector = match segments[1..] {
        ["clusterqueues", name, "pendingworkloads"] if named(name) => {
            Selector::ClusterQueue(name.to_string())
        }
        ["namespaces", namespace, "localqueues", name, "pendingworkloads"]
            if named(namespace) && named(name) =>
        {
            Selector::LocalQueue {
                namespace: namespace.to_string(),
                name: name.to_string(),
            }
        }
        _ => return Err(not_found()),
    };
    let (offset, limit) = parse_paging(query)?;
    Ok(Query {
        version,
        selector,
        offset,
        limit,
    })
}

/// `offset` and `limit` of a query string, with Kueue's defaults (0 and
/// 1000; a limit of 0 is the default too). Other parameters are ignored,
/// as Kubernetes does.
pub fn parse_paging(query: Option<&str>) -> Result<(u64, u64), HttpError> {
    let mut offset = None;
    let mut limit = None;
    for pair in query.unwrap_or_default().split('&') {
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match key {
            "offset" => &mut offset,
            "limit" => &mut limit,
            _ => continue,
        };
        if slot.is_some() {
            return Err(HttpError::bad_request(format!(
                "{key}: given more than once"
            )));
        }
        *slot = Some(parse_count(key, value)?);
    }
    let offset = offset.flatten().unwrap_or(0);
    let limit = match limit.flatten() {
        None | Some(0) => DEFAULT_LIMIT,
        Some(n) => n,
    };
    Ok((offset, limit))
}

/// A non-negative integer query value; empty means absent.
fn parse_count(key: &str, value: &str) -> Result<Option<u64>, HttpError> {
    if value.is_empty() {
        return Ok(None);
    }
    match value.parse::<i64>() {
        Ok(n) if n < 0 => Err(HttpError::bad_request(format!(
            "{key}: must not be negative, got {n}"
        ))),
        Ok(n) => Ok(Some(n.unsigned_abs())),
        Err(_) => Err(HttpError::bad_request(format!(
            "{key}: {value:?} is not an integer"
        ))),
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    kind: &'static str,
    api_version: String,
    metadata: SummaryMeta,
    items: Vec<Item>,
    /// fleetq: the selected workloads before paging.
    total: u64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SummaryMeta {
    creation_timestamp: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    metadata: ItemMeta,
    priority: i32,
    local_queue_name: String,
    position_in_cluster_queue: u64,
    position_in_local_queue: u64,
    // fleetq's additions.
    cluster_queue_name: String,
    reason_kind: String,
    reason: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ItemMeta {
    name: String,
    namespace: String,
    creation_timestamp: String,
}

impl Item {
    fn from_status(s: pb::WorkloadStatus) -> Item {
        Item {
            metadata: ItemMeta {
                creation_timestamp: rfc3339(s.created_at_ms),
                name: s.name,
                namespace: s.namespace,
            },
            priority: s.priority,
            local_queue_name: s.queue,
            position_in_cluster_queue: s.position.saturating_sub(1),
            position_in_local_queue: s.local_queue_position.saturating_sub(1),
            cluster_queue_name: s.cluster_queue,
            reason_kind: s.reason_kind,
            reason: s.reason,
        }
    }
}

/// Milliseconds since the epoch as RFC 3339 in UTC, to the second (as
/// Kubernetes writes `creationTimestamp`).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days >= 0.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn json(code: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A Kubernetes `Status` (the body of every error answer).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct K8sStatus<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: serde_json::Map<String, serde_json::Value>,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<StatusDetails<'a>>,
    code: u16,
}

#[derive(Serialize)]
struct StatusDetails<'a> {
    name: &'a str,
    group: &'static str,
    kind: &'static str,
}

fn status_response(e: &HttpError) -> Response<Full<Bytes>> {
    let status = K8sStatus {
        kind: "Status",
        api_version: "v1",
        metadata: serde_json::Map::new(),
        status: "Failure",
        message: &e.message,
        reason: e.reason,
        details: e.details.as_ref().map(|(kind, name)| StatusDetails {
            name,
            group: GROUP,
            kind,
        }),
        code: e.code.as_u16(),
    };
    let mut text = serde_json::to_vec(&status).unwrap_or_default();
    text.push(b'\n');
    json(e.code, text)
}

/// The summary of one page, for `query`, from `ledger`.
fn summary(ledger: &Ledger, query: &Query) -> Result<Summary, HttpError> {
    let page = pending_page(ledger, &query.selector, query.offset, Some(query.limit))
        .map_err(|u| HttpError::of_unknown(&u))?;
    Ok(Summary {
        kind: "PendingWorkloadsSummary",
        api_version: format!("{GROUP}/{}", query.version),
        metadata: SummaryMeta {
            creation_timestamp: None,
        },
        items: page.items.into_iter().map(Item::from_status).collect(),
        total: page.total,
    })
}

/// Answers a request below [`PREFIX`]; None for any other path (the HTTP
/// server's other routes).
pub async fn respond(
    visibility: &Visibility,
    method: &Method,
    uri: &Uri,
    viewer: &crate::guard::auth::Viewer,
) -> Option<Response<Full<Bytes>>> {
    let path = uri.path();
    if !path.starts_with(PREFIX) {
        return None;
    }
    if *viewer == crate::guard::auth::Viewer::Anonymous {
        let mut r = status_response(&HttpError {
            code: StatusCode::UNAUTHORIZED,
            reason: "Unauthorized",
            message: "pending workloads are shown to callers with a bearer token (Authorization: Bearer TOKEN) the authorization policy names".into(),
            details: None,
        });
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return Some(r);
    }
    let head = method == Method::HEAD;
    if method != Method::GET && !head {
        let mut r = status_response(&HttpError {
            code: StatusCode::METHOD_NOT_ALLOWED,
            reason: "MethodNotAllowed",
            message: format!("{method} is not supported; only GET and HEAD are served"),
            details: None,
        });
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    let mut response = match answer(visibility, path, uri.query(), viewer).await {
        Ok(summary) => match serde_json::to_vec_pretty(&summary) {
            Ok(mut text) => {
                text.push(b'\n');
                json(StatusCode::OK, text)
            }
            Err(e) => status_response(&HttpError {
                code: StatusCode::INTERNAL_SERVER_ERROR,
                reason: "InternalError",
                message: format!("the summary could not be encoded: {e}"),
                details: None,
            }),
        },
        Err(e) => status_response(&e),
    };
    if head {
        *response.body_mut() = Full::new(Bytes::new());
    }
    Some(response)
}

async fn answer(
    visibility: &Visibility,
    path: &str,
    query: Option<&str>,
    viewer: &crate::guard::auth::Viewer,
) -> Result<Summary, HttpError> {
    // Bad requests are refused before waiting for the barrier.
    let query = parse(path, query)?;
    visibility
        .proposer
        .read_barrier()
        .await
        .map_err(|e| HttpError {
            code: StatusCode::SERVICE_UNAVAILABLE,
            reason: "ServiceUnavailable",
            message: format!("cannot read the ledger linearizably: {e}"),
            details: None,
        })?;
    // On a copy: a summary walks the whole queue.
    let (ledger, _) = visibility.handle.view();
    let mut summary = summary(&ledger, &query)?;
    // A tenant sees its own namespaces' workloads; positions still count
    // everyone's, as the queue really is.
    summary.items.retain(|i| viewer.sees(&i.metadata.namespace));
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use fleetq_ledger::{Command, Request, Submission};
    use fleetq_model::kueue::import_manifests;
    use fleetq_model::time::Timestamp;
    use fleetq_model::workload::{PodSet, WorkloadSpec};
    use fleetq_model::Quantity;

    use super::*;

    fn parsed(path: &str, query: Option<&str>) -> Query {
        parse(path, query).unwrap_or_else(|e| panic!("{path}?{query:?}: {e:?}"))
    }

    fn refused(path: &str, query: Option<&str>) -> HttpError {
        match parse(path, query) {
            Ok(q) => panic!("{path}?{query:?} parsed as {q:?}"),
            Err(e) => e,
        }
    }

    const CQ: &str =
        "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/team-a/pendingworkloads";
    const LQ: &str =
        "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/research/localqueues/beta/pendingworkloads";

    #[test]
    fn urls_select_a_cluster_queue_or_a_local_queue_with_kueue_defaults() {
        let q = parsed(CQ, None);
        assert_eq!(q.selector, Selector::ClusterQueue("team-a".into()));
        assert_eq!((q.version, q.offset, q.limit), ("v1beta1", 0, 1000));
        let q = parsed(LQ, Some("limit=5&offset=7"));
        assert_eq!(
            q.selector,
            Selector::LocalQueue {
                namespace: "research".into(),
                name: "beta".into()
            }
        );
        assert_eq!((q.offset, q.limit), (7, 5));
        // A trailing slash, other versions, other parameters, empty values
        // and limit=0 (Kueue's default) are accepted.
        let q = parsed(
            "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/x/pendingworkloads/",
            Some("pretty=true&limit=0&offset="),
        );
        assert_eq!((q.version, q.offset, q.limit), ("v1beta2", 0, 1000));
        assert_eq!(q.selector, Selector::ClusterQueue("x".into()));
    }

    #[test]
    fn bad_paging_values_are_refused_naming_the_parameter() {
        for (query, field) in [
            ("limit=abc", "limit"),
            ("limit=-1", "limit"),
            ("offset=-3", "offset"),
            ("offset=1.5", "offset"),
            ("limit=99999999999999999999", "limit"),
            ("limit=1&limit=2", "limit"),
        ] {
            let e = refused(CQ, Some(query));
            assert_eq!(e.code, StatusCode::BAD_REQUEST, "{query}");
            assert_eq!(e.reason, "BadRequest");
            assert!(
                e.message.starts_with(&format!("{field}: ")),
                "{query}: {e:?}"
            );
        }
    }

    #[test]
    fn unknown_paths_and_versions_are_not_found() {
        for path in [
            "/apis/visibility.kueue.x-k8s.io/",
            "/apis/visibility.kueue.x-k8s.io/v1beta1",
            "/apis/visibility.kueue.x-k8s.io/v9/clusterqueues/a/pendingworkloads",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues//pendingworkloads",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/a",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/a/pendingworkloads/extra",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/localqueues/a/pendingworkloads",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces//localqueues/a/pendingworkloads",
        ] {
            let e = refused(path, None);
            assert_eq!(e.code, StatusCode::NOT_FOUND, "{path}");
        }
        // The path is checked before the query.
        let e = refused(
            "/apis/visibility.kueue.x-k8s.io/v1beta1/nope",
            Some("limit=x"),
        );
        assert_eq!(e.code, StatusCode::NOT_FOUND);
    }

    #[test]
    fn grpc_selectors_need_exactly_one_queue() {
        let req = |cq: &str, ns: &str, lq: &str| pb::PendingWorkloadsRequest {
            cluster_queue: cq.into(),
            namespace: ns.into(),
            local_queue: lq.into(),
            ..Default::default()
        };
        assert_eq!(
            Selector::from_request(&req("a", "", "")),
            Ok(Selector::ClusterQueue("a".into()))
        );
        assert_eq!(
            Selector::from_request(&req("", "ns", "q")),
            Ok(Selector::LocalQueue {
                namespace: "ns".into(),
                name: "q".into()
            })
        );
        for (r, field) in [
            (req("a", "ns", "q"), "cluster_queue"),
            (req("a", "", "q"), "cluster_queue"),
            (req("a", "ns", ""), "cluster_queue"),
            (req("", "", ""), "cluster_queue"),
            (req("", "", "q"), "namespace"),
            (req("", "ns", ""), "local_queue"),
        ] {
            let e = Selector::from_request(&r).expect_err("refused");
            assert!(e.starts_with(&format!("{field}: ")), "{r:?}: {e}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_701_790_923_456), "2023-12-05T15:42:03Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(4_102_444_799_000), "2099-12-31T23:59:59Z");
    }

    /// ClusterQueue q (no cluster, so nothing is ever admitted) with
    /// LocalQueues default/alpha and research/beta, priority classes high
    /// (1000) and low (10); an empty ClusterQueue other.
    const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: q
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 4
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: other
spec:
  namespaceSelector: {}
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
metadata:
  namespace: default
  name: alpha
spec:
  clusterQueue: q
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: research
  name: beta
spec:
  clusterQueue: q
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: low
value: 10
"#;

    /// Submitted in this order: expected admission order b-high, a-high,
    /// a-low, b-low, a-none, b-none.
    fn ledger() -> Ledger {
        let mut ledger = Ledger::default();
        let mut now = 1_700_000_000_000;
        let mut apply = |ledger: &mut Ledger, command: Command| {
            now += 1_000;
            let r = ledger.apply(&Request {
                at: Timestamp(now),
                command,
            });
            assert!(r.is_ok(), "{r:?}");
        };
        let objects = import_manifests(CONFIG)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .map(|d| d.object)
            .collect();
        apply(&mut ledger, Command::ApplyObjects { objects });
        for (ns, queue, name, class) in [
            ("default", "alpha", "a-low", Some("low")),
            ("research", "beta", "b-high", Some("high")),
            ("default", "alpha", "a-none", None),
            ("research", "beta", "b-low", Some("low")),
            ("default", "alpha", "a-high", Some("high")),
            ("research", "beta", "b-none", None),
        ] {
            let workload = fleetq_model::Workload {
                namespace: ns.into(),
                name: name.into(),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: queue.into(),
                    priority_class_name: class.map(String::from),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1,
                        min_count: None,
                        requests: BTreeMap::from([(
                            "nvidia.com/gpu".to_string(),
                            Quantity::units(4),
                        )]),
                        topology_request: None,
                    }],
                    ..WorkloadSpec::default()
                },
            };
            apply(
                &mut ledger,
                Command::SubmitWorkloads {
                    submissions: vec![Submission {
                        request_id: None,
                        workload: workload.into(),
                    }],
                    max_pending_per_local_queue: None,
                    admit: Vec::new(),
                },
            );
        }
        ledger
    }

    fn rows(page: &Page) -> Vec<(&str, u64, u64)> {
        page.items
            .iter()
            .map(|s| (s.name.as_str(), s.position, s.local_queue_position))
            .collect()
    }

    fn cq(name: &str) -> Selector {
        Selector::ClusterQueue(name.into())
    }

    fn lq(namespace: &str, name: &str) -> Selector {
        Selector::LocalQueue {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_cluster_queue_lists_by_priority_then_age_with_both_positions() {
        let ledger = ledger();
        let page = pending_page(&ledger, &cq("q"), 0, None).expect("q exists");
        assert_eq!(page.total, 6);
        assert_eq!(
            rows(&page),
            [
                ("b-high", 1, 1),
                ("a-high", 2, 1),
                ("a-low", 3, 2),
                ("b-low", 4, 2),
                ("a-none", 5, 3),
                ("b-none", 6, 3),
            ]
        );
        assert!(page.items.iter().all(|s| s.state == "Pending"));
        assert_eq!(page.items[0].priority, 1000);
        assert_eq!(page.items[0].queue, "beta");
        assert_eq!(page.items[0].cluster_queue, "q");
        // They agree with the single-workload positions, and with those
        // worked out a queue at a time (as a watch renders them).
        let mut positions = status::QueuePositions::new(&ledger);
        for s in &page.items {
            assert_eq!(status::position(&ledger, s.id), s.position);
            assert_eq!(positions.of(s.id), s.position);
        }

        let page = pending_page(&ledger, &cq("q"), 2, Some(3)).expect("q exists");
        assert_eq!(page.total, 6);
        assert_eq!(
            rows(&page),
            [("a-low", 3, 2), ("b-low", 4, 2), ("a-none", 5, 3)]
        );
        let page = pending_page(&ledger, &cq("q"), 6, Some(3)).expect("q exists");
        assert_eq!((page.total, page.items.len()), (6, 0));
        let page = pending_page(&ledger, &cq("q"), 0, Some(0)).expect("q exists");
        assert_eq!((page.total, page.items.len()), (6, 0));
        let page = pending_page(&ledger, &cq("other"), 0, None).expect("other exists");
        assert_eq!(page, Page::default());
    }

    #[test]
    fn a_local_queue_pages_over_its_own_workloads_keeping_cluster_queue_positions() {
        let ledger = ledger();
        let page = pending_page(&ledger, &lq("default", "alpha"), 0, None).expect("alpha");
        assert_eq!(page.total, 3);
        assert_eq!(
            rows(&page),
            [("a-high", 2, 1), ("a-low", 3, 2), ("a-none", 5, 3)]
        );
        let page = pending_page(&ledger, &lq("research", "beta"), 1, Some(1)).expect("beta");
        assert_eq!(page.total, 3);
        assert_eq!(rows(&page), [("b-low", 4, 2)]);
        assert_eq!(page.items[0].namespace, "research");
    }

    #[test]
    fn unknown_queues_are_named() {
        let ledger = ledger();
        assert_eq!(
            pending_page(&ledger, &cq("nope"), 0, None),
            Err(Unknown::ClusterQueue("nope".into()))
        );
        // alpha exists in default, not in research.
        let e = pending_page(&ledger, &lq("research", "alpha"), 0, None).expect_err("unknown");
        assert!(e.grpc_message().starts_with("local_queue: "), "{e:?}");
        assert!(e.grpc_message().contains("\"research\""), "{e:?}");
        let http = HttpError::of_unknown(&e);
        assert_eq!(http.code, StatusCode::NOT_FOUND);
        assert_eq!(http.details, Some(("localqueues", "alpha".to_string())));
    }

    #[test]
    fn the_summary_has_kueues_shape_and_zero_based_positions() {
        let ledger = ledger();
        let body = summary(&ledger, &parsed(LQ, Some("offset=1"))).expect("summary");
        let text = serde_json::to_string(&body).expect("encodes");
        // Kueue's field order.
        assert!(
            text.starts_with(r#"{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/v1beta1","metadata":{"creationTimestamp":null},"items":[{"metadata":{"name":"b-low","namespace":"research","creationTimestamp":"#),
            "{text}"
        );
        let body = serde_json::to_value(&body).expect("encodes");
        assert_eq!(body["kind"], "PendingWorkloadsSummary");
        assert_eq!(body["apiVersion"], "visibility.kueue.x-k8s.io/v1beta1");
        assert_eq!(
            body["metadata"],
            serde_json::json!({"creationTimestamp": null})
        );
        assert_eq!(body["total"], 3);
        let items = body["items"].as_array().expect("items");
        assert_eq!(items.len(), 2);
        let first = &items[0];
        assert_eq!(first["metadata"]["name"], "b-low");
        assert_eq!(first["metadata"]["namespace"], "research");
        let created = first["metadata"]["creationTimestamp"]
            .as_str()
            .expect("a timestamp");
        assert!(created.starts_with("2023-11-14T22:1"), "{created}");
        assert_eq!(first["priority"], 10);
        assert_eq!(first["localQueueName"], "beta");
        assert_eq!(first["positionInClusterQueue"], 3);
        assert_eq!(first["positionInLocalQueue"], 1);
        assert_eq!(first["clusterQueueName"], "q");
        assert!(first.get("reason").is_some() && first.get("reasonKind").is_some());
        assert_eq!(items[1]["metadata"]["name"], "b-none");
        assert_eq!(items[1]["positionInClusterQueue"], 5);

        let e = summary(
            &ledger,
            &parsed(
                "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/nope/pendingworkloads",
                None,
            ),
        )
        .expect_err("unknown");
        assert_eq!(e.code, StatusCode::NOT_FOUND);
    }
}
