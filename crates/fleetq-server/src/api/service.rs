//! The client API (proto/fleetq/v1/api.proto). Writes go through the
//! [`Proposer`]; reads first pass the read barrier so that any node answers
//! linearizably.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use fleetq_ledger::store::{Change, LedgerHandle};
use fleetq_ledger::{Command, Ledger, Outcome, Response, Submission, SubmitResult, WorkloadRecord};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::SUBMITTED_BY_LABEL;
use fleetq_model::{FieldError, Workload};
use fleetq_proto::v1 as pb;
use fleetq_proto::v1::fleet_q_server::FleetQ;
use futures::Stream;
use openraft::error::{ClientWriteError, RaftError};
use openraft::BasicNode;
use tokio::sync::broadcast;
use tonic::{Request, Status};

use crate::agents::logs::Question;
use crate::api::visibility;
use crate::guard::auth::{Action, Authorizer, Caller};
use crate::guard::limits::WriteGate;
use crate::raft::batcher::SubmitBatcher;
use crate::raft::proposer::Proposer;
use crate::status;

pub struct ApiService {
    pub node_id: u64,
    pub proposer: Arc<Proposer>,
    pub handle: LedgerHandle,
    pub batcher: SubmitBatcher,
    pub debug_endpoints: bool,
    /// The write rate per client, and the count of refusals.
    pub writes: WriteGate,
    /// Who may do what (crate::guard::auth).
    pub auth: Authorizer,
    /// `fleetq logs`: asks the agents' sessions (on the leader).
    pub logs: crate::agents::logs::LogRelay,
    /// What this node proposes while it leads (retention is named when a
    /// workload is not found).
    pub policies: crate::leader::LeaderPolicies,
}

type Reply<T> = Result<tonic::Response<T>, Status>;

fn refused(errors: &[FieldError]) -> Status {
    Status::invalid_argument(status::describe_errors(errors))
}

/// Kueue kinds and the short names the CLI accepts.
pub fn canonical_kind(kind: &str) -> Option<&'static str> {
    Some(match kind.to_ascii_lowercase().as_str() {
        "resourceflavor" | "resourceflavors" | "flavor" | "flavors" | "rf" => "ResourceFlavor",
        "cohort" | "cohorts" => "Cohort",
        "clusterqueue" | "clusterqueues" | "cq" | "cqs" => "ClusterQueue",
        "localqueue" | "localqueues" | "lq" | "lqs" | "queue" | "queues" => "LocalQueue",
        "workloadpriorityclass" | "workloadpriorityclasses" | "wpc" => "WorkloadPriorityClass",
        // kubectl's names for Kubernetes' PriorityClass.
        "priorityclass" | "priorityclasses" | "pc" => "PriorityClass",
        // `topo` is Kueue's short name.
        "topology" | "topologies" | "topo" => "Topology",
        _ => return None,
    })
}

/// A refused command on one workload, by the field the ledger names:
/// metadata.name when no such workload exists, status when it already
/// ended (or is being cancelled).
fn workload_refused(errors: &[FieldError]) -> Status {
    let text = status::describe_errors(errors);
    match errors.first().map(|e| e.path.as_str()) {
        Some("metadata.name") => Status::not_found(text),
        Some("status") => Status::failed_precondition(text),
        _ => refused(errors),
    }
}

/// What `fleetq logs` shows without `--tail-bytes`.
const DEFAULT_LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The cluster a workload runs on (and the admission's epoch), or where
/// it last ran by its history (epoch 0: the agent's latest log of it).
fn where_it_ran(record: &fleetq_ledger::WorkloadRecord) -> Option<(String, u64)> {
    if let Some(r) = &record.reservation {
        return Some((r.assignment.cluster.clone(), r.epoch));
    }
    record.history.iter().rev().find_map(|e| {
        let (_, cluster) = e.message.split_once(" to cluster ")?;
        e.message
            .starts_with("admitted by ")
            .then(|| (cluster.to_string(), 0))
    })
}

/// Kinds that live outside namespaces: only admins write them.
fn cluster_scoped(kind: &str) -> bool {
    kind != "LocalQueue"
}

/// What applying or deleting `object` asks of the caller.
fn object_action(object: &Object) -> Action<'_> {
    match object {
        Object::LocalQueue(lq) => Action::ApplyNamespaced(&lq.namespace),
        Object::Workload(w) => Action::Submit(&w.namespace),
        _ => Action::Admin("apply cluster-scoped objects (ResourceFlavor, Cohort, ClusterQueue, WorkloadPriorityClass, PriorityClass, Topology, Namespace, Configuration)"),
    }
}

fn parse_kind(kind: &str) -> Result<&'static str, Status> {
    canonical_kind(kind).ok_or_else(|| {
        Status::invalid_argument(format!(
            "kind: unknown kind {kind:?}; expected ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, PriorityClass or Topology"
        ))
    })
}

/// A line diff of two YAML renderings, for `apply --dry-run`.
fn yaml_diff(before: Option<&Object>, after: &Object) -> String {
    let render = |o: &Object| serde_norway::to_string(o).unwrap_or_default();
    let old = before.map(render).unwrap_or_default();
    let new = render(after);
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .to_string()
}

impl ApiService {
    async fn propose(&self, command: Command) -> Result<Response, Status> {
        self.proposer
            .propose(command)
            .await
            .map(|w| w.response)
            .map_err(Status::from)
    }

    /// A client of the leader's API, for requests only the leader serves.
    fn leader_client(
        &self,
        addr: Option<String>,
    ) -> Result<pb::fleet_q_client::FleetQClient<tonic::transport::Channel>, Status> {
        let addr = addr.ok_or_else(|| Status::unavailable("no Raft leader is known yet; retry"))?;
        let channel = self.proposer.channel(&addr).map_err(Status::unavailable)?;
        Ok(pb::fleet_q_client::FleetQClient::new(channel))
    }

    async fn barrier(&self) -> Result<(), Status> {
        self.proposer.read_barrier().await.map_err(Status::from)
    }

    /// The caller of a request about one workload, if it may do
    /// `action` there. An agent may read or cancel a workload only if its
    /// own cluster's front door made it (`Action::FrontDoor`), looked up
    /// after the barrier so one it has just submitted through another
    /// node is seen; one that does not exist is refused the same way,
    /// naming nothing.
    async fn allow_on_workload<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        action: Action<'_>,
        namespace: &str,
        name: &str,
    ) -> Result<crate::guard::auth::Caller, Status> {
        let caller = self.auth.identify(request, rpc)?;
        if !matches!(caller, crate::guard::auth::Caller::Agent(_)) {
            self.auth.allow(request, rpc, &caller, action)?;
            return Ok(caller);
        }
        self.barrier().await?;
        let owner = {
            let sm = self.handle.read();
            sm.ledger
                .workload_by_name(namespace, name)
                .and_then(|r| r.workload.adopting_cluster().map(str::to_string))
        };
        self.auth
            .allow(request, rpc, &caller, Action::FrontDoor(owner.as_deref()))?;
        Ok(caller)
    }

    /// May the caller ask the agent running workload ns/name about it
    /// (`rpc`: its logs or its Job's status)? A member node relays a
    /// request it authorized itself; anyone else is counted as a write per
    /// client, since each question costs the agent an API read and its
    /// session a message.
    async fn allow_agent_question<T>(
        &self,
        request: &Request<T>,
        rpc: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), Status> {
        let relayed = matches!(
            self.auth.identify(request, rpc)?,
            crate::guard::auth::Caller::Node(_)
        );
        let action = match relayed {
            true => Action::Membership("relay a question for an agent to the leader"),
            false => Action::Read(namespace),
        };
        let caller = self
            .allow_on_workload(request, rpc, action, namespace, name)
            .await?;
        if !relayed {
            self.writes.admit(rpc, request, &caller)?;
        }
        Ok(())
    }

    /// The leader's client API when this node is not the leader (the
    /// agents' sessions, which answer questions, are the leader's).
    fn leader_for_agents(
        &self,
    ) -> Result<Option<pb::fleet_q_client::FleetQClient<tonic::transport::Channel>>, Status> {
        if self.proposer.is_leader() {
            return Ok(None);
        }
        let metrics = self.proposer.raft().metrics().borrow().clone();
        let addr = metrics.current_leader.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
        });
        self.leader_client(addr).map(Some)
    }

    /// Asks the agent of the cluster where workload ns/name last ran; its
    /// answer, with the cluster's name. An answer that is an error is
    /// NotFound naming the cluster.
    async fn ask_agent(
        &self,
        namespace: &str,
        name: &str,
        question: Question,
    ) -> Result<(String, pb::LogsReply), Status> {
        self.barrier().await?;
        let (id, cluster, epoch) = {
            let sm = self.handle.read();
            let record = sm.ledger.workload_by_name(namespace, name).ok_or_else(|| {
                Status::not_found(format!(
                    "workload {name:?} does not exist in namespace {namespace:?}"
                ))
            })?;
            let (cluster, epoch) = where_it_ran(record).ok_or_else(|| {
                Status::failed_precondition(format!(
                    "workload {name:?} has not run yet: it has no {} ({})",
                    match question {
                        Question::Log { .. } => "logs",
                        Question::JobStatus => "Job",
                    },
                    record.state.as_str()
                ))
            })?;
            (record.id, cluster, epoch)
        };
        let reply = self.logs.ask(&cluster, id, epoch, question).await?;
        if !reply.error.is_empty() {
            return Err(Status::not_found(format!(
                "cluster {cluster:?}: {}",
                reply.error
            )));
        }
        Ok((cluster, reply))
    }

    async fn submit_many(
        &self,
        request_id: &str,
        caller: &Caller,
        mut workloads: Vec<Workload>,
    ) -> Result<Vec<pb::SubmitResult>, Status> {
        // Who submitted it is the server's word, not the client's.
        let submitter = caller.submitter();
        for w in &mut workloads {
            w.labels.remove(SUBMITTED_BY_LABEL);
            if let Some(user) = &submitter {
                w.labels
                    .insert(SUBMITTED_BY_LABEL.to_string(), user.clone());
            }
        }
        let names: Vec<(String, String)> = workloads
            .iter()
            .map(|w| (w.namespace.clone(), w.name.clone()))
            .collect();
        // One workload keeps the caller's request id; several get theirs
        // numbered, so that each can be told apart on a retry.
        let single = workloads.len() == 1;
        let submissions = workloads
            .into_iter()
            .enumerate()
            .map(|(i, workload)| Submission {
                request_id: (!request_id.is_empty()).then(|| {
                    if single {
                        request_id.to_string()
                    } else {
                        format!("{request_id}-{i}")
                    }
                }),
                workload: Arc::new(workload),
            })
            .collect();
        let results = self
            .batcher
            .submit(submissions)
            .await
            .map_err(Status::from)?
            .results;
        Ok(results
            .into_iter()
            .zip(names)
            .map(|(r, (namespace, name))| {
                let mut out = pb::SubmitResult {
                    namespace,
                    name,
                    ..Default::default()
                };
                match r {
                    SubmitResult::Created { id } => out.id = id,
                    SubmitResult::Existing { id } => {
                        out.id = id;
                        out.existing = true;
                    }
                    SubmitResult::Refused { errors } => out.errors = status::field_errors(&errors),
                    SubmitResult::QueueFull { errors } => {
                        let text = status::describe_errors(&errors);
                        self.writes.pending_limit_refused(
                            &format!("{}/{}", out.namespace, out.name),
                            &text,
                        );
                        out.errors = status::field_errors(&errors);
                    }
                }
                out
            })
            .collect())
    }

    /// Proposes a drain or uncordon of `cluster` and answers with its
    /// status after.
    async fn cluster_command(&self, command: Command, cluster: &str) -> Reply<pb::ClusterStatus> {
        let response = self.propose(command).await?;
        if !response.is_ok() {
            return Err(refused(&response.errors));
        }
        let sm = self.handle.read();
        status::cluster_status(&sm.ledger, cluster)
            .map(tonic::Response::new)
            .ok_or_else(|| Status::not_found(format!("cluster {cluster:?} is not registered")))
    }

    fn list_workloads(&self, req: &pb::ListWorkloadsRequest) -> pb::WorkloadList {
        // A pass over every workload, on a copy: a list over a deep queue
        // must not hold apply back.
        let (ledger, _) = self.handle.view();
        let ledger = &ledger;
        let mut workloads = Vec::new();
        let mut total = 0;
        // Only what is returned is rendered: a count (limit 1, as `fleetq
        // bench` polls it) over a deep queue costs a filter per workload,
        // not a status.
        for record in ledger.state().workloads.values() {
            if !selects(ledger, req, record) {
                continue;
            }
            total += 1;
            if req.limit == 0 || workloads.len() < req.limit as usize {
                let mut s = status::workload_status(ledger, record);
                if req.with_spec {
                    s.workload_json = status::workload_json(record);
                }
                workloads.push(s);
            }
        }
        pb::WorkloadList { workloads, total }
    }
}

/// What listing or watching workloads asks of the caller.
fn list_action(req: &pb::ListWorkloadsRequest) -> Action<'_> {
    if req.all_namespaces {
        Action::ReadAllNamespaces
    } else {
        Action::Read(namespace_of(req))
    }
}

/// Whether a listing or watch asks for `record`: its namespace, state and
/// ClusterQueue, read in place (no status rendered).
fn selects(ledger: &Ledger, req: &pb::ListWorkloadsRequest, record: &WorkloadRecord) -> bool {
    (req.all_namespaces || record.workload.namespace == namespace_of(req))
        && status::matches_state(record, &req.state)
        && (req.cluster_queue.is_empty()
            || status::binding_of(ledger, record).0 == req.cluster_queue.as_str())
        && (req.submitted_by.is_empty()
            || record.workload.labels.get(SUBMITTED_BY_LABEL) == Some(&req.submitted_by))
}

/// The namespace a workload listing means: `default` unless given.
fn namespace_of(req: &pb::ListWorkloadsRequest) -> &str {
    if req.namespace.is_empty() {
        "default"
    } else {
        &req.namespace
    }
}

/// How long parsing one request's manifests may take. The guard of
/// The manifest each applied workload came from, so that an error the
/// ledger or the configuration finds in the Workload (`spec.queueName`)
/// names what the user wrote: the document, the Job, JobSet or Pod, and
/// its field (`metadata.labels["kueue.x-k8s.io/queue-name"]`).
struct Origins(std::collections::HashMap<String, fleetq_model::kueue::ImportedDocument>);

impl Origins {
    fn from_documents(documents: &[fleetq_model::kueue::ImportedDocument]) -> Origins {
        Origins(
            documents
                .iter()
                .filter_map(|d| match &d.object {
                    Object::Workload(w) => Some((format!("Workload/{}", w.key()), d.clone())),
                    _ => None,
                })
                .collect(),
        )
    }

    fn relocate(&self, errors: Vec<pb::FieldError>) -> Vec<pb::FieldError> {
        errors
            .into_iter()
            .map(|e| match self.0.get(&e.object) {
                Some(doc) => status::field_error(&doc.locate(FieldError {
                    document: None,
                    object: e.object,
                    path: e.path,
                    message: e.message,
                })),
                None => e,
            })
            .collect()
    }
}

/// `import_manifests` bounds the work by the request's size; this bounds
/// what is left, off the async workers (a parse that hogs one would
/// stall every call and heartbeat it serves).
const PARSE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Manifests up to this size parse inline: tens of microseconds, less
/// than the hop to a blocking thread. It also keeps the simulator
/// deterministic: a blocking thread finishes in real time, so its result
/// landed at a different simulated moment on every run of one seed (the
/// chaos client's quota changes; `chaos/tests/determinism.rs`).
const INLINE_PARSE_BYTES: usize = 64 * 1024;

/// Large parses at once in this process. A parse past its deadline is
/// answered but not stopped (a blocking thread cannot be cancelled), so
/// without a bound a few callers could fill the blocking pool that the
/// store and the status hash also use; a caller beyond it is refused at
/// once instead. Two: a real manifest parses in milliseconds.
const LARGE_PARSES_AT_ONCE: usize = 2;
static LARGE_PARSES: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(LARGE_PARSES_AT_ONCE);

async fn parse_manifests(
    text: String,
) -> Result<Vec<fleetq_model::kueue::ImportedDocument>, Vec<FieldError>> {
    parse_manifests_bounded(text, &LARGE_PARSES, PARSE_DEADLINE).await
}

async fn parse_manifests_bounded(
    text: String,
    large_parses: &'static tokio::sync::Semaphore,
    deadline: std::time::Duration,
) -> Result<Vec<fleetq_model::kueue::ImportedDocument>, Vec<FieldError>> {
    if text.len() <= INLINE_PARSE_BYTES {
        return import_manifests(&text);
    }
    let one = |message: String| Err(vec![FieldError::new("", "", message)]);
    // The permit moves into the blocking task: it is given back when the
    // parse really ends, not when the deadline answers the caller.
    let Ok(permit) = large_parses.try_acquire() else {
        return one(format!(
            "this node is already parsing {LARGE_PARSES_AT_ONCE} manifests over {} KiB; retry shortly or send smaller ones",
            INLINE_PARSE_BYTES / 1024
        ));
    };
    let parse = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        import_manifests(&text)
    });
    match tokio::time::timeout(deadline, parse).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => one(format!("parsing failed: {e}")),
        Err(_) => one(format!(
            "the manifests took longer than {} s to parse; send fewer or smaller documents",
            deadline.as_secs()
        )),
    }
}

fn parse_workload(json: &str, index: usize) -> Result<Workload, FieldError> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        FieldError::new("Workload", e.path().to_string(), e.inner().to_string())
            .in_document(index + 1)
    })
}

#[tonic::async_trait]
impl FleetQ for ApiService {
    async fn apply(&self, request: Request<pb::ApplyRequest>) -> Reply<pb::ApplyResponse> {
        let caller = self.auth.identify(&request, "Apply")?;
        // Before reading a byte of the manifests: a caller that may write
        // nothing at all is refused without parsing them.
        self.auth
            .allow(&request, "Apply", &caller, Action::WriteAny)?;
        self.writes.admit("Apply", &request, &caller)?;
        let documents = match parse_manifests(request.get_ref().manifests.clone()).await {
            Ok(d) => d,
            Err(errors) => {
                return Ok(tonic::Response::new(pb::ApplyResponse {
                    changes: Vec::new(),
                    errors: status::field_errors(&fleetq_model::limits::capped(errors)),
                }))
            }
        };
        let origins = Origins::from_documents(&documents);
        for doc in &documents {
            if let Object::Workload(w) = &doc.object {
                if let Err(e) = w.check_limits().and_then(|()| w.check_job_template()) {
                    return Ok(tonic::Response::new(pb::ApplyResponse {
                        changes: Vec::new(),
                        errors: status::field_errors(&[doc.locate(e)]),
                    }));
                }
            }
        }
        // All or nothing: one object the caller may not write refuses the
        // whole request before anything is proposed.
        for doc in &documents {
            self.auth
                .allow(&request, "Apply", &caller, object_action(&doc.object))?;
        }
        // Each workload past the first is one more write, as in Submit.
        let extra = documents
            .iter()
            .filter(|d| matches!(d.object, Object::Workload(_)))
            .count()
            .saturating_sub(1);
        let more = u32::try_from(extra).unwrap_or(u32::MAX);
        self.writes.admit_more("Apply", &request, &caller, more)?;
        let req = request.into_inner();
        let mut objects = Vec::new();
        let mut workloads = Vec::new();
        for doc in documents {
            match doc.object {
                Object::Workload(w) => workloads.push(w),
                other => objects.push(other),
            }
        }
        if req.dry_run {
            self.barrier().await?;
            let sm = self.handle.read();
            let mut config = sm.ledger.state().config.clone();
            let mut changes = Vec::new();
            for object in &objects {
                let before = config.get(object.kind(), &object.key());
                let change = match &before {
                    None => "created",
                    Some(b) if b == object => "unchanged",
                    Some(_) => "configured",
                };
                changes.push(pb::ObjectChange {
                    object: object.display_name(),
                    change: format!("{change} (dry run)"),
                    diff: yaml_diff(before.as_ref(), object),
                });
                let _ = config.upsert(object.clone());
            }
            let mut errors = config.validate();
            for w in &workloads {
                match config.bind_workload(w) {
                    Ok(_) => changes.push(pb::ObjectChange {
                        object: format!("Workload/{}", w.key()),
                        change: "submitted (dry run)".into(),
                        diff: String::new(),
                    }),
                    Err(e) => errors.extend(e),
                }
            }
            return Ok(tonic::Response::new(pb::ApplyResponse {
                changes,
                errors: origins.relocate(status::field_errors(&errors)),
            }));
        }
        let mut changes = Vec::new();
        if !objects.is_empty() {
            let response = self.propose(Command::ApplyObjects { objects }).await?;
            if !response.is_ok() {
                return Ok(tonic::Response::new(pb::ApplyResponse {
                    changes: Vec::new(),
                    errors: status::field_errors(&response.errors),
                }));
            }
            if let Outcome::Applied { changes: c } = response.outcome {
                changes.extend(c.into_iter().map(|(object, change)| pb::ObjectChange {
                    object,
                    change,
                    diff: String::new(),
                }));
            }
        }
        let mut errors = Vec::new();
        if !workloads.is_empty() {
            for r in self.submit_many("", &caller, workloads).await? {
                if r.errors.is_empty() {
                    changes.push(pb::ObjectChange {
                        object: format!("Workload/{}/{}", r.namespace, r.name),
                        change: if r.existing { "unchanged" } else { "submitted" }.into(),
                        diff: String::new(),
                    });
                } else {
                    errors.extend(r.errors);
                }
            }
        }
        Ok(tonic::Response::new(pb::ApplyResponse {
            changes,
            errors: origins.relocate(errors),
        }))
    }

    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Reply<pb::DeleteResponse> {
        let kind = parse_kind(&request.get_ref().kind)?;
        let name = &request.get_ref().name;
        let action = if cluster_scoped(kind) {
            Action::Admin("delete cluster-scoped objects")
        } else {
            Action::ApplyNamespaced(name.split_once('/').map_or("default", |(ns, _)| ns))
        };
        let caller = self.auth.api(&request, "Delete", action)?;
        self.writes.admit("Delete", &request, &caller)?;
        let req = request.into_inner();
        let response = self
            .propose(Command::DeleteObject {
                kind: kind.to_string(),
                name: req.name,
            })
            .await?;
        if !response.is_ok() {
            return Err(refused(&response.errors));
        }
        match response.outcome {
            Outcome::Deleted { object } => Ok(tonic::Response::new(pb::DeleteResponse { object })),
            _ => Err(Status::internal("unexpected ledger response")),
        }
    }

    async fn get_object(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::ObjectList> {
        let kind = parse_kind(&request.get_ref().kind)?;
        let name = &request.get_ref().name;
        let action = if cluster_scoped(kind) {
            Action::ReadCluster
        } else {
            Action::Read(name.split_once('/').map_or("default", |(ns, _)| ns))
        };
        self.auth.api(&request, "GetObject", action)?;
        let req = request.into_inner();
        self.barrier().await?;
        let sm = self.handle.read();
        match sm.ledger.state().config.get(kind, &req.name) {
            Some(o) => Ok(tonic::Response::new(pb::ObjectList {
                objects_json: vec![serde_json::to_string(&o).unwrap_or_default()],
            })),
            None => Err(Status::not_found(format!(
                "{kind} {:?} does not exist",
                req.name
            ))),
        }
    }

    async fn list_objects(
        &self,
        request: Request<pb::ListObjectsRequest>,
    ) -> Reply<pb::ObjectList> {
        let caller = self
            .auth
            .api(&request, "ListObjects", Action::ReadCluster)?;
        if !request.get_ref().namespace.is_empty() {
            self.auth.allow(
                &request,
                "ListObjects",
                &caller,
                Action::Read(&request.get_ref().namespace),
            )?;
        }
        let req = request.into_inner();
        let kind = if req.kind.is_empty() {
            None
        } else {
            Some(parse_kind(&req.kind)?)
        };
        self.barrier().await?;
        let sm = self.handle.read();
        let objects_json = sm
            .ledger
            .state()
            .config
            .objects()
            .into_iter()
            .filter(|o| kind.is_none_or(|k| o.kind() == k))
            .filter(|o| match o {
                // A tenant listing every namespace sees its own LocalQueues.
                Object::LocalQueue(lq) => {
                    (req.namespace.is_empty() || lq.namespace == req.namespace)
                        && crate::guard::auth::permits(&caller, Action::Read(&lq.namespace)).is_ok()
                }
                _ => true,
            })
            .map(|o| serde_json::to_string(&o).unwrap_or_default())
            .collect();
        Ok(tonic::Response::new(pb::ObjectList { objects_json }))
    }

    async fn submit(&self, request: Request<pb::SubmitRequest>) -> Reply<pb::SubmitResponse> {
        let caller = self.auth.identify(&request, "Submit")?;
        // As for Apply: a caller that may write nothing costs no parsing.
        self.auth
            .allow(&request, "Submit", &caller, Action::WriteAny)?;
        self.writes.admit("Submit", &request, &caller)?;
        let req = request.get_ref();
        let mut texts: Vec<&str> = req.workloads_json.iter().map(String::as_str).collect();
        if !req.workload_json.is_empty() {
            texts.insert(0, &req.workload_json);
        }
        if texts.is_empty() {
            return Err(Status::invalid_argument("workload_json: no workload given"));
        }
        let mut workloads = Vec::new();
        let mut errors = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            // Every limit apply() enforces on a workload's size is checked
            // here too, so an oversized one never reaches the log.
            match parse_workload(text, i).and_then(|w| {
                w.check_limits().map_err(|e| e.in_document(i + 1))?;
                w.check_job_template().map_err(|e| e.in_document(i + 1))?;
                // Devices are whole, as the importer and `submit` say;
                // checked here, not in apply(), so old entries replay.
                if let Some(e) = fleetq_model::config::whole_device_errors(&w)
                    .into_iter()
                    .next()
                {
                    return Err(e.in_document(i + 1));
                }
                Ok(w)
            }) {
                Ok(w) => workloads.push(w),
                Err(e) => errors.push(e),
            }
            if errors.len() >= fleetq_model::limits::MAX_ERRORS {
                break;
            }
        }
        if !errors.is_empty() {
            return Err(refused(&errors));
        }
        for w in &workloads {
            let action = Action::on_workload(&caller, Action::Submit(&w.namespace), w);
            self.auth.allow(&request, "Submit", &caller, action)?;
        }
        let more = u32::try_from(workloads.len().saturating_sub(1)).unwrap_or(u32::MAX);
        self.writes.admit_more("Submit", &request, &caller, more)?;
        let results = self
            .submit_many(&req.request_id, &caller, workloads)
            .await?;
        Ok(tonic::Response::new(pb::SubmitResponse { results }))
    }

    async fn cancel(&self, request: Request<pb::CancelRequest>) -> Reply<pb::CancelResponse> {
        let (namespace, name) = (&request.get_ref().namespace, &request.get_ref().name);
        let caller = self
            .allow_on_workload(
                &request,
                "Cancel",
                Action::Cancel(namespace),
                namespace,
                name,
            )
            .await?;
        self.writes.admit("Cancel", &request, &caller)?;
        let req = request.into_inner();
        let response = self
            .propose(Command::CancelWorkload {
                namespace: req.namespace,
                name: req.name,
            })
            .await?;
        if !response.is_ok() {
            return Err(workload_refused(&response.errors));
        }
        match response.outcome {
            Outcome::Cancelled { id, state } => Ok(tonic::Response::new(pb::CancelResponse {
                id,
                state: state.as_str().to_string(),
            })),
            _ => Err(Status::internal("unexpected ledger response")),
        }
    }

    async fn set_workload_active(
        &self,
        request: Request<pb::SetWorkloadActiveRequest>,
    ) -> Reply<pb::SetWorkloadActiveResponse> {
        let (namespace, name) = (&request.get_ref().namespace, &request.get_ref().name);
        // Who may cancel a workload may stop and resume it.
        let caller = self
            .allow_on_workload(
                &request,
                "SetWorkloadActive",
                Action::Cancel(namespace),
                namespace,
                name,
            )
            .await?;
        self.writes.admit("SetWorkloadActive", &request, &caller)?;
        let req = request.into_inner();
        let response = self
            .propose(Command::SetWorkloadActive {
                namespace: req.namespace,
                name: req.name,
                active: req.active,
            })
            .await?;
        if !response.is_ok() {
            return Err(workload_refused(&response.errors));
        }
        match response.outcome {
            Outcome::Activation { id, state, changed } => {
                Ok(tonic::Response::new(pb::SetWorkloadActiveResponse {
                    id,
                    state: state.as_str().to_string(),
                    changed,
                }))
            }
            _ => Err(Status::internal("unexpected ledger response")),
        }
    }

    async fn workload_logs(
        &self,
        request: Request<pb::WorkloadLogsRequest>,
    ) -> Reply<pb::WorkloadLogsResponse> {
        let (namespace, name) = (
            request.get_ref().namespace.clone(),
            request.get_ref().name.clone(),
        );
        self.allow_agent_question(&request, "WorkloadLogs", &namespace, &name)
            .await?;
        if let Some(mut leader) = self.leader_for_agents()? {
            return leader.workload_logs(request.into_inner()).await;
        }
        let tail_bytes = match request.get_ref().tail_bytes {
            0 => DEFAULT_LOG_TAIL_BYTES,
            n => n,
        };
        let (cluster, reply) = self
            .ask_agent(&namespace, &name, Question::Log { tail_bytes })
            .await?;
        Ok(tonic::Response::new(pb::WorkloadLogsResponse {
            cluster,
            epoch: reply.epoch,
            text: reply.text,
            truncated: reply.truncated,
        }))
    }

    async fn workload_job_status(
        &self,
        request: Request<pb::WorkloadRef>,
    ) -> Reply<pb::WorkloadJobStatusResponse> {
        let (namespace, name) = (
            request.get_ref().namespace.clone(),
            request.get_ref().name.clone(),
        );
        self.allow_agent_question(&request, "WorkloadJobStatus", &namespace, &name)
            .await?;
        if let Some(mut leader) = self.leader_for_agents()? {
            return leader.workload_job_status(request.into_inner()).await;
        }
        let (cluster, reply) = self
            .ask_agent(&namespace, &name, Question::JobStatus)
            .await?;
        Ok(tonic::Response::new(pb::WorkloadJobStatusResponse {
            cluster,
            epoch: reply.epoch,
            status_json: reply.text,
        }))
    }

    async fn get_workload(&self, request: Request<pb::WorkloadRef>) -> Reply<pb::WorkloadStatus> {
        let (namespace, name) = (&request.get_ref().namespace, &request.get_ref().name);
        self.allow_on_workload(
            &request,
            "GetWorkload",
            Action::Read(namespace),
            namespace,
            name,
        )
        .await?;
        let req = request.into_inner();
        self.barrier().await?;
        let sm = self.handle.read();
        let ledger = &sm.ledger;
        let record = ledger
            .workload_by_name(&req.namespace, &req.name)
            .ok_or_else(|| {
                // A finished workload may have been removed: say so.
                let retention = match self.policies.finished_retention {
                    Some(d) => format!(
                        " (finished workloads are removed {} after they end)",
                        fleetq_model::time::format_duration(d)
                    ),
                    None => String::new(),
                };
                Status::not_found(format!(
                    "workload {:?} does not exist in namespace {:?}{retention}",
                    req.name, req.namespace
                ))
            })?;
        let mut s = status::workload_status(ledger, record);
        if req.with_spec {
            s.workload_json = status::workload_json(record);
        }
        s.position = status::position(ledger, record.id);
        s.local_queue_position = status::local_queue_position(ledger, record.id);
        Ok(tonic::Response::new(s))
    }

    async fn list_workloads(
        &self,
        request: Request<pb::ListWorkloadsRequest>,
    ) -> Reply<pb::WorkloadList> {
        self.auth
            .api(&request, "ListWorkloads", list_action(request.get_ref()))?;
        let req = request.into_inner();
        self.barrier().await?;
        Ok(tonic::Response::new(self.list_workloads(&req)))
    }

    type WatchWorkloadsStream =
        Pin<Box<dyn Stream<Item = Result<pb::WorkloadStatus, Status>> + Send + 'static>>;

    async fn watch_workloads(
        &self,
        request: Request<pb::ListWorkloadsRequest>,
    ) -> Reply<Self::WatchWorkloadsStream> {
        self.auth
            .api(&request, "WatchWorkloads", list_action(request.get_ref()))?;
        let req = request.into_inner();
        self.barrier().await?;
        let handle = self.handle.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        // Subscribe before the first look so no change falls in between.
        let mut changes = handle.changes();
        tokio::spawn(async move {
            let mut seen = BTreeMap::new();
            // None: look at every workload (first time, or after falling
            // behind the change feed).
            let mut ids: Option<Vec<u64>> = None;
            loop {
                let changed: Vec<pb::WorkloadStatus> = {
                    // On a copy: the first pass (and queue positions)
                    // walk every workload.
                    let (view, _) = handle.view();
                    let ledger = &view;
                    let records: Vec<_> = match ids.take() {
                        None => ledger.state().workloads.values().collect(),
                        // A changed id with no record was removed after it
                        // finished (retention): forget it here too, so a
                        // long watch holds only what the ledger holds.
                        Some(ids) => ids
                            .iter()
                            .filter_map(|id| {
                                let record = ledger.workload(*id);
                                if record.is_none() {
                                    seen.remove(id);
                                }
                                record
                            })
                            .collect(),
                    };
                    let mut positions = status::QueuePositions::new(ledger);
                    records
                        .into_iter()
                        .filter(|r| selects(ledger, &req, r))
                        .filter(|r| {
                            seen.insert(r.id, status::fingerprint(r))
                                != Some(status::fingerprint(r))
                        })
                        .map(|r| {
                            let mut s = status::workload_status(ledger, r);
                            s.position = positions.of(r.id);
                            s
                        })
                        .collect()
                };
                for s in changed {
                    if tx.send(Ok(s)).await.is_err() {
                        return;
                    }
                }
                match changes.recv().await {
                    Ok(Change::Workloads(changed)) => ids = Some(changed.to_vec()),
                    Ok(Change::All) | Err(broadcast::error::RecvError::Lagged(_)) => ids = None,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(tonic::Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn pending_workloads(
        &self,
        request: Request<pb::PendingWorkloadsRequest>,
    ) -> Reply<pb::WorkloadList> {
        // By LocalQueue: that namespace; by ClusterQueue: every namespace
        // queued there.
        let action = if request.get_ref().local_queue.is_empty() {
            Action::ReadAllNamespaces
        } else {
            Action::Read(&request.get_ref().namespace)
        };
        self.auth.api(&request, "PendingWorkloads", action)?;
        let req = request.into_inner();
        let selector =
            visibility::Selector::from_request(&req).map_err(Status::invalid_argument)?;
        self.barrier().await?;
        let (ledger, _) = self.handle.view();
        let limit = (req.limit != 0).then_some(u64::from(req.limit));
        let page = visibility::pending_page(&ledger, &selector, u64::from(req.offset), limit)
            .map_err(|u| Status::not_found(u.grpc_message()))?;
        Ok(tonic::Response::new(pb::WorkloadList {
            workloads: page.items,
            total: page.total,
        }))
    }

    async fn describe_cluster_queue(
        &self,
        request: Request<pb::ClusterQueueRef>,
    ) -> Reply<pb::ClusterQueueStatus> {
        self.auth
            .api(&request, "DescribeClusterQueue", Action::ReadCluster)?;
        let req = request.into_inner();
        self.barrier().await?;
        let sm = self.handle.read();
        status::cluster_queue_status(&sm.ledger, &req.name)
            .map(tonic::Response::new)
            .ok_or_else(|| Status::not_found(format!("ClusterQueue {:?} does not exist", req.name)))
    }

    async fn list_clusters(
        &self,
        request: Request<pb::ListClustersRequest>,
    ) -> Reply<pb::ClusterList> {
        self.auth
            .api(&request, "ListClusters", Action::ReadCluster)?;
        self.barrier().await?;
        let sm = self.handle.read();
        let clusters = sm
            .ledger
            .state()
            .clusters
            .keys()
            .filter_map(|name| status::cluster_status(&sm.ledger, name))
            .collect();
        Ok(tonic::Response::new(pb::ClusterList { clusters }))
    }

    async fn get_cluster(&self, request: Request<pb::ClusterRef>) -> Reply<pb::ClusterStatus> {
        self.auth.api(&request, "GetCluster", Action::ReadCluster)?;
        let req = request.into_inner();
        self.barrier().await?;
        let sm = self.handle.read();
        status::cluster_status(&sm.ledger, &req.name)
            .map(tonic::Response::new)
            .ok_or_else(|| Status::not_found(format!("cluster {:?} is not registered", req.name)))
    }

    async fn drain_cluster(&self, request: Request<pb::ClusterRef>) -> Reply<pb::ClusterStatus> {
        self.auth
            .api(&request, "DrainCluster", Action::Admin("drain clusters"))?;
        let cluster = request.into_inner().name;
        self.cluster_command(
            Command::DrainCluster {
                cluster: cluster.clone(),
            },
            &cluster,
        )
        .await
    }

    async fn uncordon_cluster(&self, request: Request<pb::ClusterRef>) -> Reply<pb::ClusterStatus> {
        self.auth.api(
            &request,
            "UncordonCluster",
            Action::Admin("uncordon clusters"),
        )?;
        let cluster = request.into_inner().name;
        self.cluster_command(
            Command::UncordonCluster {
                cluster: cluster.clone(),
            },
            &cluster,
        )
        .await
    }

    async fn node_status(
        &self,
        request: Request<pb::NodeStatusRequest>,
    ) -> Reply<pb::NodeStatusResponse> {
        let caller = self.auth.api(&request, "NodeStatus", Action::ReadCluster)?;
        // The full state hash costs seconds of CPU on a large ledger:
        // admins and member nodes only, not every tenant.
        let may_hash = matches!(caller, crate::guard::auth::Caller::Node(_))
            || crate::guard::auth::permits(&caller, Action::Admin("compute the state hash"))
                .is_ok();
        let hash = if request.get_ref().skip_state_hash || !may_hash {
            StateHash::Skip
        } else {
            StateHash::Compute
        };
        Ok(tonic::Response::new(
            node_status(self.node_id, &self.proposer, &self.handle, hash).await,
        ))
    }

    async fn add_learner(
        &self,
        request: Request<pb::AddLearnerRequest>,
    ) -> Reply<pb::NodeStatusResponse> {
        self.auth.api(
            &request,
            "AddLearner",
            Action::Membership("change the Raft group"),
        )?;
        let req = request.into_inner();
        if req.addr.is_empty() {
            return Err(Status::invalid_argument(
                "addr: the learner's address is empty",
            ));
        }
        let result = self
            .proposer
            .raft()
            .add_learner(
                req.node_id,
                BasicNode {
                    addr: req.addr.clone(),
                },
                true,
            )
            .await;
        match result {
            Ok(_) => {}
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                let mut leader = self.leader_client(f.leader_node.map(|n| n.addr))?;
                return leader.add_learner(req).await;
            }
            Err(e) => return Err(Status::failed_precondition(e.to_string())),
        }
        Ok(tonic::Response::new(
            node_status(self.node_id, &self.proposer, &self.handle, StateHash::Skip).await,
        ))
    }

    async fn change_membership(
        &self,
        request: Request<pb::ChangeMembershipRequest>,
    ) -> Reply<pb::NodeStatusResponse> {
        self.auth.api(
            &request,
            "ChangeMembership",
            Action::Membership("change the Raft group"),
        )?;
        let req = request.into_inner();
        if req.voters.is_empty() {
            return Err(Status::invalid_argument(
                "voters: at least one voter is required",
            ));
        }
        let voters: std::collections::BTreeSet<u64> = req.voters.iter().copied().collect();
        match self.proposer.raft().change_membership(voters, false).await {
            Ok(_) => {}
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                let mut leader = self.leader_client(f.leader_node.map(|n| n.addr))?;
                return leader.change_membership(req).await;
            }
            Err(e) => return Err(Status::failed_precondition(e.to_string())),
        }
        Ok(tonic::Response::new(
            node_status(self.node_id, &self.proposer, &self.handle, StateHash::Skip).await,
        ))
    }

    type BackupStream =
        Pin<Box<dyn Stream<Item = Result<pb::BackupChunk, Status>> + Send + 'static>>;

    async fn backup(&self, request: Request<pb::BackupRequest>) -> Reply<Self::BackupStream> {
        self.auth.api(
            &request,
            "Backup",
            Action::Admin("take backups of the ledger"),
        )?;
        self.barrier().await?;
        let (header, bytes) = crate::api::backup::take_encoded(self.node_id, &self.handle)
            .await
            .map_err(Status::unavailable)?;
        let bytes = Arc::new(bytes);
        tracing::info!(
            index = header.index,
            term = header.term,
            bytes = bytes.len(),
            state_hash = %header.state_hash,
            "backup taken"
        );
        let total = bytes.len() as u64;
        let chunks = bytes.len().div_ceil(BACKUP_CHUNK);
        let stream = futures::stream::iter((0..chunks).map(move |i| {
            let end = bytes.len().min((i + 1) * BACKUP_CHUNK);
            Ok(pb::BackupChunk {
                data: bytes[i * BACKUP_CHUNK..end].to_vec(),
                total_bytes: if i == 0 { total } else { 0 },
            })
        }));
        Ok(tonic::Response::new(Box::pin(stream)))
    }

    async fn debug_propose(
        &self,
        request: Request<pb::DebugProposeRequest>,
    ) -> Reply<pb::DebugProposeResponse> {
        self.auth.api(
            &request,
            "DebugPropose",
            Action::Admin("use debug endpoints"),
        )?;
        if !self.debug_endpoints {
            return Err(Status::permission_denied(
                "debug endpoints are off; start the server with --debug-endpoints",
            ));
        }
        let req = request.into_inner();
        let command: Command = serde_json::from_str(&req.command_json)
            .map_err(|e| Status::invalid_argument(format!("command_json: {e}")))?;
        let written = self.proposer.propose(command).await.map_err(Status::from)?;
        Ok(tonic::Response::new(pb::DebugProposeResponse {
            response_json: serde_json::to_string(&written.response).unwrap_or_default(),
            log_index: written.index,
        }))
    }
}

/// Bytes of a backup per streamed message.
const BACKUP_CHUNK: usize = 1 << 20;

/// Whether a status answer carries the ledger's state hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateHash {
    Compute,
    Skip,
}

/// This node's view of the Raft group and its ledger. The state hash, when
/// asked for, is computed off the state machine's lock and off the async
/// workers: only the copy of the state is taken under the lock, so a
/// status call on a large ledger delays apply by the copy, not the hash.
pub async fn node_status(
    node_id: u64,
    proposer: &Proposer,
    handle: &LedgerHandle,
    hash: StateHash,
) -> pb::NodeStatusResponse {
    let metrics = proposer.raft().metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    let voter_ids: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    let mut voters = std::collections::HashMap::new();
    let mut learners = std::collections::HashMap::new();
    for (id, node) in membership.nodes() {
        if voter_ids.contains(id) {
            voters.insert(*id, node.addr.clone());
        } else {
            learners.insert(*id, node.addr.clone());
        }
    }
    let leader_addr = metrics
        .current_leader
        .and_then(|l| membership.get_node(&l).map(|n| n.addr.clone()))
        .unwrap_or_default();
    let (last_applied, counters_json, scheduling_json, state) = {
        let sm = handle.read();
        let config = sm.ledger.scheduler_config();
        let effective = config.with_settings(&sm.ledger.state().config);
        let strategies: Vec<String> = effective
            .fair_sharing_strategies
            .iter()
            .map(|s| format!("{s:?}"))
            .collect();
        let scheduling = serde_json::json!({
            "fairSharing": {
                "enable": effective.fair_sharing,
                "preemptionStrategies": strategies,
                "from": if sm.ledger.state().config.settings.is_some() {
                    "Configuration"
                } else {
                    "server settings"
                },
            },
            "admissionFairSharing": {
                "usageHalfLifeTime": fleetq_model::time::format_duration(effective.afs_half_life),
                // Thousandths, as the scheduler charges them; empty: GPUs only.
                "resourceWeightsMilli": effective.afs_resource_weights,
                "clusterQueues": sm
                    .ledger
                    .state()
                    .config
                    .cluster_queues
                    .values()
                    .filter(|cq| cq.uses_admission_fair_sharing())
                    .count(),
            },
            "admitOnSubmit": proposer.plans_on_submit(),
        });
        (
            sm.last_applied.map(|l| l.index).unwrap_or(0),
            serde_json::to_string(sm.ledger.counters()).unwrap_or_default(),
            scheduling.to_string(),
            (hash == StateHash::Compute).then(|| sm.ledger.exported_state()),
        )
    };
    let state_hash = match state {
        None => String::new(),
        Some(state) => tokio::task::spawn_blocking(move || Ledger::hash_of(state))
            .await
            .unwrap_or_default(),
    };
    pb::NodeStatusResponse {
        node_id,
        leader_id: metrics.current_leader.unwrap_or(0),
        leader_addr,
        term: metrics.current_term,
        last_applied,
        last_log_index: metrics.last_log_index.unwrap_or(0),
        state_hash,
        server_state: format!("{:?}", metrics.state),
        voters,
        learners,
        counters_json,
        scheduling_json,
        snapshot_index: metrics.snapshot.map(|l| l.index).unwrap_or(0),
        purged_index: metrics.purged.map(|l| l.index).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large manifest beyond the bound is refused at once; the bound is
    /// given back when a parse ends.
    #[tokio::test]
    async fn large_parses_are_bounded() {
        static BOUND: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
        let big = format!(
            "# {}\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: big}}\n",
            "x".repeat(INLINE_PARSE_BYTES)
        );
        let deadline = std::time::Duration::from_secs(30);
        let held = BOUND.try_acquire().expect("a permit");
        let errors = parse_manifests_bounded(big.clone(), &BOUND, deadline)
            .await
            .expect_err("refused while the bound is taken");
        assert!(
            errors[0].message.contains("already parsing 2 manifests"),
            "{errors:?}"
        );
        drop(held);
        let parsed = parse_manifests_bounded(big, &BOUND, deadline)
            .await
            .expect("parses once the bound is free");
        assert_eq!(parsed.len(), 1);
        assert_eq!(BOUND.available_permits(), 1);
    }
}
