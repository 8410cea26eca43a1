//! The agent service (proto/fleetq/v1/agent.proto): registration,
//! one-shot status reports, and the long-lived session with the leader
//! (docs/architecture.md §7): heartbeats keep the cluster's lease, inventory changes,
//! status reports and reconcile go up; assignments and stops are pushed
//! down as the ledger changes. A follower answers a session with a
//! redirect to the leader.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use fleetq_ledger::{Command, LeasePolicy, Outcome, Phase, StatusReport};
use fleetq_model::{Cluster, ClusterState, FieldError, Quantity, ResourceList};
use fleetq_proto::v1 as pb;
use fleetq_proto::v1::agent_server::Agent;
use futures::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::agents::leases::{LeaseConfig, LeaseTable};
use crate::guard::auth::client_key;
use crate::guard::auth::Authorizer;
use crate::guard::limits::{size, SessionSlot, SessionSlots};
use crate::metrics::reason;
use crate::metrics::ServerMetrics;
use crate::raft::proposer::Proposer;
use crate::status;
use fleetq_ledger::store::{Change, LedgerHandle};
use fleetq_ledger::{RunningWorkload, WorkloadState};
use openraft::ServerState;
use pb::agent_message::Body as Up;
use pb::control_message::Body as Down;
use std::collections::BTreeSet;
use tokio::sync::{broadcast, mpsc};

pub struct AgentService {
    pub proposer: Arc<Proposer>,
    pub handle: LedgerHandle,
    pub leases: LeaseTable,
    pub lease: LeaseConfig,
    /// At most `max_agent_sessions` clusters with a session at once.
    pub sessions: Arc<SessionSlots>,
    pub metrics: ServerMetrics,
    /// Agents speak only for the cluster their certificate names.
    pub auth: Authorizer,
    /// `fleetq logs`: the sessions the API asks for a workload's output.
    pub logs: crate::agents::logs::LogRelay,
}

/// The nodes an agent reports, each field checked and named.
fn nodes_of(
    req: &pb::RegisterRequest,
    object: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<fleetq_model::Node> {
    let mut nodes = Vec::new();
    for (i, n) in req.nodes.iter().enumerate() {
        if n.name.is_empty() {
            errors.push(FieldError::new(
                object,
                format!("nodes[{i}].name"),
                "must not be empty",
            ));
        }
        let mut allocatable = ResourceList::new();
        for (j, q) in n.allocatable.iter().enumerate() {
            match q.value.parse::<Quantity>() {
                Ok(v) => {
                    allocatable.insert(q.resource.clone(), v);
                }
                Err(e) => errors.push(FieldError::new(
                    object,
                    format!("nodes[{i}].allocatable[{j}].value"),
                    e.to_string(),
                )),
            }
        }
        nodes.push(fleetq_model::Node {
            name: n.name.clone(),
            labels: n.labels.clone().into_iter().collect(),
            flavor: n.flavor.clone(),
            allocatable,
            unschedulable: n.unschedulable,
        });
    }
    nodes
}

fn cluster_of(req: &pb::RegisterRequest) -> Result<(Cluster, LeasePolicy), Vec<FieldError>> {
    let object = format!("Cluster/{}", req.cluster);
    let mut errors = Vec::new();
    let mut capacity: BTreeMap<String, ResourceList> = BTreeMap::new();
    for (i, inv) in req.inventory.iter().enumerate() {
        if inv.flavor.is_empty() {
            errors.push(FieldError::new(
                &object,
                format!("inventory[{i}].flavor"),
                "must not be empty",
            ));
        }
        for (j, q) in inv.resources.iter().enumerate() {
            match q.value.parse::<Quantity>() {
                Ok(v) => {
                    capacity
                        .entry(inv.flavor.clone())
                        .or_default()
                        .insert(q.resource.clone(), v);
                }
                Err(e) => errors.push(FieldError::new(
                    &object,
                    format!("inventory[{i}].resources[{j}].value"),
                    e.to_string(),
                )),
            }
        }
    }
    let nodes = nodes_of(req, &object, &mut errors);
    let policy = match req.lease_policy.to_ascii_lowercase().as_str() {
        "" | "fence" => LeasePolicy::Fence,
        "keep" => LeasePolicy::Keep,
        other => {
            errors.push(FieldError::new(
                &object,
                "lease_policy",
                format!("{other:?} is not fence or keep"),
            ));
            LeasePolicy::Fence
        }
    };
    if req.cluster.is_empty() {
        errors.push(FieldError::new(&object, "cluster", "must not be empty"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((
        Cluster {
            nodes,
            name: req.cluster.clone(),
            labels: req.labels.clone().into_iter().collect(),
            capacity,
            state: ClusterState::Ready,
        },
        policy,
    ))
}

fn phase_of(text: &str) -> Option<Phase> {
    Some(match text {
        "Running" => Phase::Running,
        "Succeeded" => Phase::Succeeded,
        "Failed" => Phase::Failed,
        "Stopped" => Phase::Stopped,
        "Waiting" => Phase::Waiting,
        _ => return None,
    })
}

#[tonic::async_trait]
impl Agent for AgentService {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        let allowed = self.auth.agent(&request, "Register")?;
        let client = client_key(&request);
        let req = request.into_inner();
        self.auth
            .agent_cluster(&allowed, &req.cluster, &client, "Register")?;
        let (cluster, lease_policy) =
            cluster_of(&req).map_err(|e| Status::invalid_argument(status::describe_errors(&e)))?;
        let written = self
            .proposer
            .propose(Command::RegisterCluster {
                cluster,
                lease_policy,
            })
            .await
            .map_err(Status::from)?;
        if !written.response.is_ok() {
            return Err(Status::invalid_argument(status::describe_errors(
                &written.response.errors,
            )));
        }
        Ok(Response::new(pb::RegisterResponse {
            cluster: req.cluster,
            lease_ttl_ms: 0,
            leader_addr: String::new(),
        }))
    }

    type SessionStream =
        Pin<Box<dyn Stream<Item = Result<pb::ControlMessage, Status>> + Send + 'static>>;

    async fn session(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let client = client_key(&request);
        let allowed = self.auth.agent(&request, "Session")?;
        let slot = self.sessions.open().map_err(|refusal| {
            tracing::warn!(client = %client, reason = reason::AGENT_SESSIONS, "refused: {refusal}");
            self.metrics.refused(reason::AGENT_SESSIONS);
            Status::resource_exhausted(refusal)
        })?;
        let inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(1024);
        let session = Session {
            proposer: Arc::clone(&self.proposer),
            handle: self.handle.clone(),
            leases: self.leases.clone(),
            lease: self.lease,
            slot,
            client,
            metrics: self.metrics.clone(),
            auth: self.auth.clone(),
            logs: self.logs.clone(),
            allowed,
            tx,
            cluster: None,
            assigned: BTreeSet::new(),
            stopped: BTreeSet::new(),
        };
        tokio::spawn(session.run(inbound));
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn report(
        &self,
        request: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        let allowed = self.auth.agent(&request, "Report")?;
        let client = client_key(&request);
        let req = request.into_inner();
        self.auth
            .agent_cluster(&allowed, &req.cluster, &client, "Report")?;
        let mut reports = Vec::new();
        for (i, r) in req.reports.iter().enumerate() {
            let phase = phase_of(&r.phase).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "reports[{i}].phase: {:?} is not Running, Succeeded, Failed, Stopped or Waiting",
                    r.phase
                ))
            })?;
            reports.push(StatusReport {
                cluster: req.cluster.clone(),
                workload: r.workload_id,
                epoch: r.epoch,
                phase,
                message: r.message.clone(),
            });
        }
        let written = self
            .proposer
            .propose(Command::ReportStatus { reports })
            .await
            .map_err(Status::from)?;
        match written.response.outcome {
            Outcome::Reported { applied, stale } => {
                Ok(Response::new(pb::ReportResponse { applied, stale }))
            }
            _ => Err(Status::invalid_argument(status::describe_errors(
                &written.response.errors,
            ))),
        }
    }
}

type Outbound = mpsc::Sender<Result<pb::ControlMessage, Status>>;

/// One agent's session with this (leader) node.
struct Session {
    proposer: Arc<Proposer>,
    handle: LedgerHandle,
    leases: LeaseTable,
    lease: LeaseConfig,
    /// This session's place under `max_agent_sessions` (given back when
    /// the session ends).
    slot: SessionSlot,
    /// The agent's source address, for the log.
    client: String,
    metrics: ServerMetrics,
    auth: Authorizer,
    logs: crate::agents::logs::LogRelay,
    /// The one cluster this agent's certificate lets it speak for (`None`
    /// without TLS).
    allowed: Option<String>,
    tx: Outbound,
    cluster: Option<String>,
    /// Assignments and stops already pushed, by (workload, epoch).
    // Ordered sets: the stops a push sends come out in the same order on
    // every run (the simulator replays a seed exactly).
    assigned: BTreeSet<(u64, u64)>,
    stopped: BTreeSet<(u64, u64)>,
}

/// Why an agent must stop what it reports running but the ledger does
/// not hold there.
const NOT_ASSIGNED: &str = "not assigned to this cluster with this epoch";

/// A Stop for an admission the ledger does not hold (any more): the agent
/// stops it if it runs, drops it if deferred, and reports nothing otherwise.
fn withdrawn_stop(workload: u64, epoch: u64, reason: &str) -> Down {
    Down::Stop(pb::Stop {
        workload_id: workload,
        epoch,
        reason: reason.into(),
        grace_period_ms: 0,
        withdrawn: true,
    })
}

/// Whether `ledger` holds an admission of `workload` with `epoch` on
/// `cluster` (reserved there, running or not).
fn holds(ledger: &fleetq_ledger::Ledger, cluster: &str, workload: u64, epoch: u64) -> bool {
    ledger
        .workload(workload)
        .and_then(|r| r.reservation.as_ref())
        .is_some_and(|res| res.epoch == epoch && res.assignment.cluster == cluster)
}

fn down(body: Down) -> Result<pb::ControlMessage, Status> {
    Ok(pb::ControlMessage { body: Some(body) })
}

impl Session {
    async fn send(&self, body: Down) -> bool {
        self.tx.send(down(body)).await.is_ok()
    }

    /// Writes a command of this session on this node, which leads (a
    /// session lives on the leader), and never forwards or retries it
    /// elsewhere: what an agent said in a session must not be applied
    /// after that session's node lost the leadership. Otherwise a
    /// reconcile sent before a partition, held by a deposed leader and
    /// forwarded after the heal, would release work the agent started
    /// since, in a newer session (simulator seed 21819: a workload ran on
    /// two clusters). On failure the session ends and the agent
    /// reconnects to the leader with what it runs now.
    async fn write(&self, command: Command) -> Result<crate::raft::proposer::Written, Status> {
        self.proposer
            .write_local(command)
            .await
            .written()
            .map_err(|e| {
                Status::unavailable(format!("agent session: {e}; reconnect to the leader"))
            })
    }

    fn leader(&self) -> (bool, String, u64) {
        let m = self.proposer.raft().metrics().borrow().clone();
        let addr = m
            .current_leader
            .and_then(|l| {
                m.membership_config
                    .membership()
                    .get_node(&l)
                    .map(|n| n.addr.clone())
            })
            .unwrap_or_default();
        (m.state == ServerState::Leader, addr, m.current_term)
    }

    async fn run(mut self, inbound: Streaming<pb::AgentMessage>) {
        self.serve(inbound).await;
        if let Some(cluster) = &self.cluster {
            self.logs.detach(cluster, &self.tx);
        }
    }

    async fn serve(&mut self, mut inbound: Streaming<pb::AgentMessage>) {
        let (leading, leader, term) = self.leader();
        if !leading {
            let _ = self.send(Down::RedirectLeader(leader)).await;
            return;
        }
        let mut changes = self.handle.changes();
        let mut metrics = self.proposer.raft().metrics();
        loop {
            tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(m)) => {
                        if let Err(status) = self.on_message(m).await {
                            let _ = self.tx.send(Err(status)).await;
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(status) => {
                        if size::is_too_large(&status) {
                            let status = size::explain(&status, "/fleetq.v1.Agent/Session");
                            tracing::warn!(client = %self.client, cluster = ?self.cluster, reason = reason::REQUEST_TOO_LARGE, "refused: {}", status.message());
                            self.metrics.refused(reason::REQUEST_TOO_LARGE);
                            let _ = self.tx.send(Err(status)).await;
                        }
                        return;
                    }
                },
                change = changes.recv() => match change {
                    Ok(Change::Workloads(_) | Change::All) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if !self.push().await {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                _ = metrics.changed() => {
                    // A new term ends the session even when this node
                    // leads it again (the watch may skip the step-down in
                    // between): the agent registers afresh with the
                    // leader of the term, whose lease table is its own.
                    let (leading, leader, now_term) = self.leader();
                    if !leading || now_term != term {
                        let _ = self.send(Down::RedirectLeader(leader)).await;
                        return;
                    }
                }
            }
        }
    }

    async fn on_message(&mut self, m: pb::AgentMessage) -> Result<(), Status> {
        if m.cluster.is_empty() {
            return Err(Status::invalid_argument(
                "cluster: every message names its cluster",
            ));
        }
        match &self.cluster {
            None => {
                self.auth
                    .agent_cluster(&self.allowed, &m.cluster, &self.client, "Session")?;
                if let Err(refusal) = self.slot.name(&m.cluster) {
                    tracing::warn!(client = %self.client, cluster = %m.cluster, reason = reason::AGENT_SESSIONS, "refused: {refusal}");
                    self.metrics.refused(reason::AGENT_SESSIONS);
                    return Err(Status::resource_exhausted(refusal));
                }
                self.cluster = Some(m.cluster.clone());
                self.logs.attach(&m.cluster, self.tx.clone());
            }
            Some(c) if *c != m.cluster => {
                return Err(Status::invalid_argument(format!(
                    "cluster: this session belongs to {c:?}, not {:?}",
                    m.cluster
                )))
            }
            Some(_) => {}
        }
        let cluster = m.cluster.clone();
        let ackable = self.leases.beat(&cluster);
        match m.body {
            None => Err(Status::invalid_argument("body: empty message")),
            Some(Up::Heartbeat(heartbeat)) => {
                let lost = self
                    .handle
                    .read()
                    .ledger
                    .state()
                    .clusters
                    .get(&cluster)
                    .is_some_and(|c| c.cluster.state == fleetq_model::ClusterState::Lost);
                if lost {
                    // Its lease ran out while this session stayed open:
                    // only a new registration makes it Ready again.
                    return Err(Status::failed_precondition(format!(
                        "cluster {cluster:?}: its lease expired; register again"
                    )));
                }
                let (leading, _, term) = self.leader();
                let fresh = crate::agents::leases::ack_freshness(&self.lease);
                if !ackable || !leading || !self.leases.leadership_fresh(fresh) {
                    // Not (provably) the leader now: no ack, so a lease
                    // granted here cannot outlive this node's leadership.
                    return Ok(());
                }
                self.send(Down::Ack(pb::HeartbeatAck {
                    lease_ttl_ms: self.lease.ttl.as_millis() as u64,
                    leader_term: term,
                    heartbeat_sent_at_ms: heartbeat.sent_at_ms,
                }))
                .await;
                Ok(())
            }
            Some(Up::Inventory(mut req)) => {
                req.cluster = cluster;
                let (c, lease_policy) = cluster_of(&req)
                    .map_err(|e| Status::invalid_argument(status::describe_errors(&e)))?;
                let written = self
                    .write(Command::RegisterCluster {
                        cluster: c,
                        lease_policy,
                    })
                    .await?;
                if !written.response.is_ok() {
                    return Err(Status::invalid_argument(status::describe_errors(
                        &written.response.errors,
                    )));
                }
                self.push().await;
                Ok(())
            }
            Some(Up::Status(r)) => {
                // A phase of a newer agent is skipped, not fatal: ending
                // the session would have the agent send it first again,
                // for ever.
                let Some(phase) = phase_of(&r.phase) else {
                    tracing::warn!(cluster = %cluster, phase = %r.phase, workload = r.workload_id, "a status report of an unknown phase (a newer agent?) skipped");
                    return Ok(());
                };
                self.write(Command::ReportStatus {
                    reports: vec![StatusReport {
                        cluster: cluster.clone(),
                        workload: r.workload_id,
                        epoch: r.epoch,
                        phase,
                        message: r.message,
                    }],
                })
                .await?;
                // Running something the ledger does not hold here (an
                // assignment withdrawn while it was on its way, started
                // from an older session): stop it now, before its quota,
                // already given back, is given to someone else.
                if phase == Phase::Running
                    && self.leader().0
                    && !self.holds(&cluster, r.workload_id, r.epoch)
                {
                    self.assigned.remove(&(r.workload_id, r.epoch));
                    self.send(withdrawn_stop(r.workload_id, r.epoch, NOT_ASSIGNED))
                        .await;
                }
                Ok(())
            }
            Some(Up::Logs(reply)) => {
                self.logs.answer(&cluster, reply);
                Ok(())
            }
            Some(Up::Reconcile(rec)) => {
                let running = rec
                    .running
                    .iter()
                    .map(|r| RunningWorkload {
                        workload: r.workload_id,
                        epoch: r.epoch,
                    })
                    .collect();
                let written = self
                    .write(Command::ReconcileCluster { cluster, running })
                    .await?;
                if let Outcome::Reconciled { stop, .. } = written.response.outcome {
                    for s in stop {
                        self.send(withdrawn_stop(s.workload, s.epoch, NOT_ASSIGNED))
                            .await;
                    }
                } else if !written.response.is_ok() {
                    return Err(Status::failed_precondition(status::describe_errors(
                        &written.response.errors,
                    )));
                }
                // Assignments pushed earlier in this session that the
                // ledger no longer holds are withdrawn first: the agent may
                // still hold them, deferred until its lease is confirmed.
                // Then everything assigned here is pushed again.
                let withdrawn = self.withdrawn();
                for stop in withdrawn {
                    if !self.send(stop).await {
                        return Ok(());
                    }
                }
                self.assigned.clear();
                self.stopped.clear();
                self.push().await;
                Ok(())
            }
        }
    }

    /// Whether the ledger holds an admission of `workload` with `epoch` on
    /// `cluster` (reserved there, running or not).
    fn holds(&self, cluster: &str, workload: u64, epoch: u64) -> bool {
        holds(&self.handle.read().ledger, cluster, workload, epoch)
    }

    /// Stops for the admissions pushed in this session that the ledger no
    /// longer holds (evicted, expired or reconciled away before they were
    /// reported running): whatever the agent started, or still keeps
    /// deferred, for them must stop. A stop for an admission that already
    /// ended there is a no-op for the agent.
    fn withdrawn(&mut self) -> Vec<Down> {
        let Some(cluster) = self.cluster.clone() else {
            return Vec::new();
        };
        // A deposed leader's state may lag: it withdraws nothing.
        if !self.leader().0 {
            return Vec::new();
        }
        let gone: Vec<(u64, u64)> = {
            let sm = self.handle.read();
            self.assigned
                .iter()
                .filter(|(id, epoch)| !holds(&sm.ledger, &cluster, *id, *epoch))
                .copied()
                .collect()
        };
        gone.into_iter()
            .map(|(id, epoch)| {
                self.assigned.remove(&(id, epoch));
                withdrawn_stop(id, epoch, "admission withdrawn")
            })
            .collect()
    }

    /// Pushes every assignment and stop for this cluster not pushed yet.
    async fn push(&mut self) -> bool {
        let Some(cluster) = self.cluster.clone() else {
            return true;
        };
        // A node that lost the leadership may still be applying entries
        // it replicates as a follower: its state is not the leader's, and
        // what it would push could already be withdrawn. The session
        // redirects the agent on the next metrics change.
        if !self.leader().0 {
            return true;
        }
        let mut out = self.withdrawn();
        {
            let sm = self.handle.read();
            let ledger = &sm.ledger;
            for a in ledger.snapshot().admitted() {
                if a.assignment.cluster != cluster {
                    continue;
                }
                let Some(record) = ledger.workload(a.pending.id) else {
                    continue;
                };
                let Some(r) = &record.reservation else {
                    continue;
                };
                let key = (record.id, r.epoch);
                if let Some(reason) = &r.stopping {
                    if self.stopped.insert(key) {
                        out.push(Down::Stop(pb::Stop {
                            workload_id: record.id,
                            epoch: r.epoch,
                            reason: reason.clone(),
                            grace_period_ms: record
                                .workload
                                .spec
                                .preemption_grace_period
                                .map_or(0, |d| d.as_millis() as u64),
                            withdrawn: false,
                        }));
                    }
                } else if record.state == WorkloadState::Admitted && self.assigned.insert(key) {
                    out.push(Down::Assign(pb::Assignment {
                        workload_id: record.id,
                        epoch: r.epoch,
                        workload_json: serde_json::to_string(&*record.workload).unwrap_or_default(),
                        assignment_json: serde_json::to_string(&r.assignment).unwrap_or_default(),
                    }));
                }
            }
        }
        for body in out {
            if !self.send(body).await {
                return false;
            }
        }
        true
    }
}
