//! The agent's session with the control plane (docs/architecture.md §7): register the
//! cluster, reconcile what really runs, then keep one bidirectional stream
//! to the leader: heartbeats, status reports and inventory up;
//! assignments and stops down. It follows redirects to the leader,
//! reconnects with capped exponential backoff and jitter, and fences
//! itself: when no heartbeat was acknowledged for `lease_ttl - margin`, it
//! stops its workloads (policy `fence`) before the leader could give their
//! quota away.

use std::collections::HashMap;
use std::time::Duration;

use fleetq_model::assignment::Assignment;
use fleetq_model::Workload;
use fleetq_proto::transport::{endpoint, SharedConnector, Timeouts};
use fleetq_proto::v1 as pb;
use fleetq_proto::v1::agent_client::AgentClient;
use pb::agent_message::Body as Up;
use pb::control_message::Body as Down;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::config::{AgentConfig, ExecutorKind};
use crate::delivery::ReportDelivery;
use crate::executor::devices_needed;
use crate::executor::kubernetes::KubernetesExecutor;
use crate::executor::logs::Tail;
use crate::executor::process::ProcessExecutor;
use crate::executor::simulated::SimulatedExecutor;
use crate::executor::{JournalSink, Report};
use crate::inventory::{InventoryFeed, InventoryReport};

/// Time between SIGTERM and SIGKILL when the workload sets none.
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Failures counted for a refusal (permission denied, unauthenticated):
/// the backoff starts at its cap.
const REFUSED_FAILURES: u32 = 6;

/// Longest wait between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Longest time connecting and opening a session may take.
const SESSION_OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// The agent: its configuration, executor and what it still has to say.
pub struct Agent {
    config: AgentConfig,
    inventory: InventoryFeed,
    executor: Executor,
    events: mpsc::UnboundedReceiver<Report>,
    /// Reports not yet known to be written: queued, or handed to a
    /// session that has not confirmed them (kept across reconnects; every
    /// report is idempotent upstream).
    reports: ReportDelivery,
    /// When this agent sent the last heartbeat a leader acknowledged: the
    /// lease runs from there (the leader heard it later still).
    last_ack: Option<Instant>,
    lease_ttl: Option<Duration>,
    /// What heartbeats' `sent_at_ms` counts from.
    clock_origin: Instant,
    fenced: bool,
    /// Assignments received while this cluster's lease was not live
    /// (fenced, or no acknowledgement yet): started on the next fresh ack
    /// in this session, dropped when a stop withdraws them or the session
    /// ends (the next session's leader pushes again what it still holds).
    /// A fence keeps them: fencing does not mean the leader expired the
    /// cluster, and if the lease comes back in this session nobody would
    /// push them again (the live chaos run found one stranded so). If the
    /// leader did expire it, the session ends on the next heartbeat.
    deferred: Vec<(u64, u64, Workload, Assignment)>,
    /// The highest epoch this agent started of each workload. An admission
    /// runs at most once: a repeated assignment (pushed again after a
    /// reconnect or a reconcile, or both started and deferred) of one that
    /// already ran, or one older than what already ran, is ignored. One
    /// entry per workload this process has run.
    started: HashMap<u64, u64>,
    /// How sessions reach a server: fresh TCP by default; the simulator
    /// supplies its own network.
    connector: Option<SharedConnector>,
    /// Mutual TLS for fresh connections (`None`: plaintext, --insecure).
    tls: Option<fleetq_proto::tls::Tls>,
    /// Reconnect jitter (seeded in the simulator, so runs replay).
    rng: StdRng,
    /// The cluster's API server, for the front door (`watch_queued_jobs`).
    front_door: Option<kube::Client>,
}

/// A session's outbound queue, in messages.
const OUTBOUND: usize = 1024;

fn status_message(cluster: &str, r: &Report) -> pb::AgentMessage {
    up(
        cluster,
        Up::Status(pb::StatusReport {
            workload_id: r.workload,
            epoch: r.epoch,
            phase: r.event.phase().into(),
            message: r.message.clone(),
        }),
    )
}

fn up(cluster: &str, body: Up) -> pb::AgentMessage {
    pb::AgentMessage {
        cluster: cluster.to_string(),
        body: Some(body),
    }
}

impl Agent {
    /// An agent for `config`; reads the inventory first, so a node whose
    /// inventory cannot be read never registers.
    pub async fn new(config: AgentConfig) -> Result<Agent, String> {
        let client = match config.uses_kubernetes() {
            true => Some(crate::kubernetes::client(&config.kubernetes).await?),
            false => None,
        };
        let (inventory, pool) = config.open_inventory(client.as_ref()).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let front_door = client.clone().filter(|_| config.watch_queued_jobs);
        let executor = match (config.executor, &config.state_dir, client) {
            (ExecutorKind::Process, Some(dir), _) => {
                Executor::Process(ProcessExecutor::new(dir, config.run_as()?, pool, tx)?)
            }
            (ExecutorKind::Process, None, _) => {
                return Err("state_dir: the process executor needs a directory".into())
            }
            (ExecutorKind::Kubernetes, _, Some(client)) => Executor::Kubernetes(
                KubernetesExecutor::new(client, &config.cluster, config.flavor_mapping(), tx)
                    .await?
                    .with_finished_job_ttl(config.finished_job_ttl()?),
            ),
            (ExecutorKind::Kubernetes, _, None) => {
                return Err("executor: kubernetes needs a client".into())
            }
            (ExecutorKind::Simulated, _, _) => Executor::Simulated(
                SimulatedExecutor::new(tx)
                    .with_stop_delay(Duration::from_millis(config.simulated_stop_ms)),
            ),
        };
        Ok(Agent {
            inventory,
            config,
            executor,
            events: rx,
            reports: ReportDelivery::default(),
            last_ack: None,
            lease_ttl: None,
            clock_origin: Instant::now(),
            fenced: false,
            deferred: Vec::new(),
            started: HashMap::new(),
            connector: None,
            tls: None,
            rng: StdRng::from_entropy(),
            front_door,
        })
    }

    /// The inventory from `feed` instead of the configured source: a
    /// simulation drives it (nodes that leave and return).
    pub fn with_inventory(mut self, feed: InventoryFeed) -> Agent {
        self.inventory = feed;
        self
    }

    /// Sessions through `connector` instead of fresh TCP connections.
    pub fn with_connector(mut self, connector: SharedConnector) -> Agent {
        self.connector = Some(connector);
        self
    }

    /// Sessions over mutual TLS with `tls` (its certificate must name this
    /// agent's cluster, or the servers refuse it).
    pub fn with_tls(mut self, tls: fleetq_proto::tls::Tls) -> Agent {
        self.tls = Some(tls);
        self
    }

    /// Reconnect jitter drawn from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Agent {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    /// The simulated executor keeps its account of starts and ends in
    /// `journal` (other executors keep their own).
    pub fn with_journal(mut self, journal: JournalSink) -> Agent {
        if let Executor::Simulated(e) = &mut self.executor {
            e.set_journal(journal);
        }
        self
    }

    fn registration(&self, report: InventoryReport) -> pb::RegisterRequest {
        let InventoryReport {
            totals: inventory,
            nodes,
        } = report;
        pb::RegisterRequest {
            cluster: self.config.cluster.clone(),
            labels: self.config.labels.clone().into_iter().collect(),
            inventory: inventory
                .into_iter()
                .map(|(flavor, resources)| pb::FlavorInventory {
                    flavor,
                    resources: resources
                        .into_iter()
                        .map(|(resource, q)| pb::Quantity {
                            resource,
                            value: q.to_string(),
                        })
                        .collect(),
                })
                .collect(),
            lease_policy: self.config.lease_policy.clone(),
            nodes: nodes
                .into_iter()
                .map(|n| pb::NodeInventory {
                    name: n.name,
                    labels: n.labels.into_iter().collect(),
                    flavor: n.flavor,
                    allocatable: n
                        .allocatable
                        .into_iter()
                        .map(|(resource, q)| pb::Quantity {
                            resource,
                            value: q.to_string(),
                        })
                        .collect(),
                    unschedulable: n.unschedulable,
                })
                .collect(),
        }
    }

    pub fn cluster(&self) -> &str {
        &self.config.cluster
    }

    /// Runs until `shutdown` turns true.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        if let Some(client) = self.front_door.take() {
            let door = crate::front_door::FrontDoor::new(
                client,
                &self.config.cluster,
                self.config.servers.clone(),
                self.tls.clone(),
                self.config.source_address,
            )
            .suspending_unsuspended(self.config.suspend_queued_jobs);
            tokio::spawn(door.run(shutdown.clone()));
        }
        let mut next = 0usize;
        let mut redirect: Option<String> = None;
        let mut failures = 0u32;
        while !*shutdown.borrow() {
            let addr = redirect.take().unwrap_or_else(|| {
                let a = self.config.servers[next % self.config.servers.len()].clone();
                next += 1;
                a
            });
            let ended = self.session(&addr, &mut shutdown).await;
            // What the session did not confirm goes out again, first.
            self.reports.session_ended();
            match ended {
                Ok(Some(leader)) => {
                    failures = 0;
                    if !leader.is_empty() {
                        tracing::info!(leader = %leader, "following the leader");
                        redirect = Some(leader);
                    }
                    continue;
                }
                Ok(None) => return,
                Err(e) => {
                    failures = failures.saturating_add(1);
                    // Refused for who it is: retrying soon cannot help,
                    // and a refused agent must not knock ten times a
                    // second; wait long, whatever came before.
                    let lower = e.to_ascii_lowercase();
                    if lower.contains("permission") || lower.contains("unauthenticated") {
                        failures = failures.max(REFUSED_FAILURES);
                        tracing::error!(server = %addr, error = %e, "the server refused this agent");
                    } else {
                        tracing::warn!(server = %addr, error = %e, "session ended");
                    }
                }
            }
            // Capped exponential backoff, fencing on the way: equal
            // jitter (half the cap, plus up to half) once refused, full
            // jitter otherwise.
            let cap = Duration::from_millis(100)
                .saturating_mul(1 << failures.min(6))
                .min(MAX_BACKOFF);
            let floor = if failures >= REFUSED_FAILURES {
                cap / 2
            } else {
                Duration::ZERO
            };
            let wait = self.rng.gen_range(floor..=cap);
            let until = Instant::now() + wait;
            while Instant::now() < until {
                self.check_fence();
                self.collect_events();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100).min(wait)) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    }

    fn collect_events(&mut self) {
        while let Ok(r) = self.events.try_recv() {
            self.reports.queue(r);
        }
    }

    /// When this agent must have stopped its workloads: a quarter lease
    /// before the leader may expire the cluster (the leader counts from
    /// the last heartbeat it received, which precedes our last ack).
    /// `None` when nothing is to be fenced.
    fn fence_deadline(&self) -> Option<Instant> {
        let (Some(ack), Some(ttl)) = (self.last_ack, self.lease_ttl) else {
            return None;
        };
        if fleetq_model::mutants::active(fleetq_model::mutants::Mutant::AgentIgnoresFence) {
            return None;
        }
        if self.fenced || self.config.lease_policy != "fence" {
            return None;
        }
        Some(ack + ttl.saturating_sub(ttl / 4))
    }

    /// A heartbeat stamped with when it is sent, in milliseconds since
    /// this agent started, plus one (0 means "not stamped"), floored so
    /// the stamp never postdates the send.
    fn heartbeat(&self) -> pb::Heartbeat {
        pb::Heartbeat {
            sent_at_ms: self.clock_origin.elapsed().as_millis() as u64 + 1,
        }
    }

    /// Whether this agent may start work now: under policy `fence`, only
    /// with a lease a leader acknowledged and that is not about to run
    /// out. An assignment started after the leader may have expired the
    /// cluster would run beside the same workload's next admission.
    fn lease_live(&self) -> bool {
        if self.config.lease_policy != "fence"
            || fleetq_model::mutants::active(fleetq_model::mutants::Mutant::AgentIgnoresFence)
        {
            return true;
        }
        !self.fenced && self.fence_deadline().is_some_and(|at| Instant::now() < at)
    }

    /// Fences when the lease is about to run out: stop everything before
    /// the leader may hand the quota to someone else.
    fn check_fence(&mut self) {
        if self.fence_deadline().is_some_and(|at| Instant::now() >= at) {
            let n = self.executor.stop_all();
            self.fenced = true;
            tracing::warn!(
                stopped = n,
                "no heartbeat acknowledged in time: fenced this cluster's workloads"
            );
        }
    }

    /// One session. `Ok(Some(addr))`: go to the leader at `addr` (empty:
    /// the next server). `Ok(None)`: shut down. `Err`: reconnect later.
    async fn session(
        &mut self,
        addr: &str,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<String>, String> {
        let cluster = self.config.cluster.clone();
        let (tx, rx) = mpsc::channel::<pb::AgentMessage>(OUTBOUND);
        self.deferred.clear();
        for m in self.opening() {
            tx.try_send(m).map_err(|e| format!("outbound queue: {e}"))?;
        }
        // A black-holed server must not hold the agent here past its fence
        // deadline: opening is bounded by it.
        let open_by = Instant::now() + SESSION_OPEN_TIMEOUT;
        let open_by = self.fence_deadline().map_or(open_by, |f| f.min(open_by));
        let connector = self.connector.clone();
        let tls = self.tls.clone();
        let source = self.config.source_address;
        // A session lives as long as the agent does.
        let timeouts = Timeouts {
            request: Duration::from_secs(3600 * 24 * 365),
            ..Timeouts::default()
        };
        let open = async {
            let channel = match (connector, tls) {
                (Some(c), _) => c.channel(addr)?,
                (None, Some(tls)) => fleetq_proto::tls::tls_channel(addr, &timeouts, &tls, source)?,
                (None, None) => endpoint(addr, &timeouts)?
                    .local_address(source)
                    .connect()
                    .await
                    .map_err(|e| format!("cannot reach {addr}: {e}"))?,
            };
            AgentClient::new(channel)
                .session(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .map_err(|s| format!("session refused: {}", s.message()))
        };
        let mut inbound = tokio::time::timeout_at(open_by, open)
            .await
            .map_err(|_| format!("{addr}: no session within {SESSION_OPEN_TIMEOUT:?}"))??
            .into_inner();
        let mut beat = tokio::time::interval(Duration::from_millis(self.config.heartbeat_ms));
        loop {
            self.reports
                .hand_over_while(|r| tx.try_send(status_message(&cluster, r)).is_ok());
            tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(pb::ControlMessage { body: Some(Down::Logs(req)) })) => {
                        match self.executor.logs_reply(&req) {
                            LogsAnswer::Now(reply) => {
                                if tx.try_send(up(&cluster, Up::Logs(reply))).is_err() {
                                    return Err("outbound queue full".into());
                                }
                            }
                            // Off the session loop: an API server's answer
                            // must not hold heartbeats back.
                            LogsAnswer::Later(reading) => {
                                let (tx, cluster) = (tx.clone(), cluster.clone());
                                tokio::spawn(async move {
                                    let reply = reading.await;
                                    let _ = tx.send(up(&cluster, Up::Logs(reply))).await;
                                });
                            }
                        }
                    }
                    Ok(Some(m)) => {
                        if let Some(leader) = self.on_control(m) {
                            return Ok(Some(leader));
                        }
                    }
                    Ok(None) => return Err("the server closed the session".into()),
                    Err(s) => return Err(format!("session: {}", s.message())),
                },
                event = self.events.recv() => {
                    if let Some(r) = event {
                        self.reports.queue(r);
                    }
                }
                _ = beat.tick() => {
                    self.check_fence();
                    let beat = self.heartbeat();
                    let stamp = beat.sent_at_ms;
                    if tx.try_send(up(&cluster, Up::Heartbeat(beat))).is_err() {
                        return Err("outbound queue full".into());
                    }
                    self.reports.beat_sent(stamp);
                }
                _ = self.inventory.changed() => {
                    let inventory = self.inventory.current();
                    tracing::info!(?inventory, "inventory changed; registering it");
                    let registration = up(&cluster, Up::Inventory(self.registration(inventory)));
                    if tx.try_send(registration).is_err() {
                        return Err("outbound queue full".into());
                    }
                }
                _ = shutdown.changed() => return Ok(None),
            }
        }
    }

    /// A session's first messages: the registration; the reports not yet
    /// confirmed, before the reconcile, so the ledger hears what ran and
    /// ended before it judges what runs now; the reconcile; a heartbeat.
    /// Reports that do not fit follow in the session.
    fn opening(&mut self) -> Vec<pb::AgentMessage> {
        let cluster = self.config.cluster.clone();
        self.collect_events();
        let running: Vec<pb::RunningWorkload> = self
            .executor
            .running()
            .into_iter()
            .map(|(workload_id, epoch)| pb::RunningWorkload { workload_id, epoch })
            .collect();
        let inventory = self.inventory.current();
        let mut out = vec![up(&cluster, Up::Inventory(self.registration(inventory)))];
        self.reports.hand_over_while(|r| {
            let room = out.len() < OUTBOUND - 2;
            if room {
                out.push(status_message(&cluster, r));
            }
            room
        });
        out.push(up(&cluster, Up::Reconcile(pb::Reconcile { running })));
        let beat = self.heartbeat();
        self.reports.beat_sent(beat.sent_at_ms);
        out.push(up(&cluster, Up::Heartbeat(beat)));
        out
    }

    /// Starts an admission unless this agent already started it, or a
    /// later admission of the same workload.
    fn start(&mut self, workload: u64, epoch: u64, spec: &Workload, assignment: &Assignment) {
        match self.started.get(&workload) {
            Some(&done) if done >= epoch => {
                tracing::debug!(
                    workload,
                    epoch,
                    started = done,
                    "assignment already started"
                );
            }
            _ => {
                self.started.insert(workload, epoch);
                self.executor.start(workload, epoch, spec, assignment);
            }
        }
    }

    /// Acts on one message from the leader; returns a leader address to
    /// move to.
    fn on_control(&mut self, m: pb::ControlMessage) -> Option<String> {
        let body = m.body?;
        if let Down::Stop(s) = &body {
            // A deferred assignment that is stopped never starts.
            self.deferred
                .retain(|(w, e, ..)| (*w, *e) != (s.workload_id, s.epoch));
        }
        match body {
            Down::Ack(ack) => {
                // From the send of the acknowledged heartbeat: an ack that
                // sat in a slow stream must not stretch the lease past the
                // leader's view of it. (An ack without the echo, from an
                // older server, counts from now.)
                let sent = match ack.heartbeat_sent_at_ms {
                    0 => Instant::now(),
                    ms => (self.clock_origin + Duration::from_millis(ms - 1)).min(Instant::now()),
                };
                self.last_ack = Some(self.last_ack.map_or(sent, |prev| prev.max(sent)));
                self.reports.acked(ack.heartbeat_sent_at_ms);
                self.lease_ttl = Some(Duration::from_millis(ack.lease_ttl_ms));
                // A stale ack (its heartbeat sent too long ago) renews
                // nothing: stay fenced, keep the deferred work waiting.
                let ttl = Duration::from_millis(ack.lease_ttl_ms);
                tracing::debug!(
                    heartbeat_age_ms =
                        Instant::now().saturating_duration_since(sent).as_millis() as u64,
                    deferred = self.deferred.len(),
                    term = ack.leader_term,
                    "ack"
                );
                if sent + ttl.saturating_sub(ttl / 4) > Instant::now() {
                    self.fenced = false;
                    for (workload, epoch, w, asg) in std::mem::take(&mut self.deferred) {
                        self.start(workload, epoch, &w, &asg);
                    }
                }
            }
            Down::Assign(a) => {
                let parsed = serde_json::from_str::<Workload>(&a.workload_json).and_then(|w| {
                    serde_json::from_str::<Assignment>(&a.assignment_json).map(|asg| (w, asg))
                });
                tracing::debug!(
                    workload = a.workload_id,
                    epoch = a.epoch,
                    live = self.lease_live(),
                    fenced = self.fenced,
                    "assignment"
                );
                match parsed {
                    Ok((w, asg)) if self.lease_live() => {
                        self.start(a.workload_id, a.epoch, &w, &asg)
                    }
                    Ok(_)
                        if self
                            .deferred
                            .iter()
                            .any(|(id, e, ..)| (*id, *e) == (a.workload_id, a.epoch)) => {}
                    Ok((w, asg)) => self.deferred.push((a.workload_id, a.epoch, w, asg)),
                    Err(e) => {
                        tracing::error!(workload = a.workload_id, error = %e, "unreadable assignment")
                    }
                }
            }
            Down::Stop(s)
                if s.withdrawn && !self.executor.running().contains(&(s.workload_id, s.epoch)) =>
            {
                // Nothing of that admission runs here; nothing to report.
            }
            Down::Stop(s) => {
                // Without a grace period of its own, a workload gets
                // DEFAULT_GRACE between SIGTERM and SIGKILL.
                let grace = match s.grace_period_ms {
                    0 => DEFAULT_GRACE,
                    ms => Duration::from_millis(ms),
                };
                self.executor.stop(s.workload_id, s.epoch, grace)
            }
            // Behind a proxy or NAT the leader's own address may be the
            // wrong one to dial: then try the configured servers in turn.
            Down::RedirectLeader(addr) if self.config.follow_redirects => return Some(addr),
            Down::RedirectLeader(_) => return Some(String::new()),
            // Answered in the session loop, which holds the outbound queue.
            Down::Logs(_) => {}
        }
        None
    }
}

/// The configured executor.
enum Executor {
    Simulated(SimulatedExecutor),
    Process(ProcessExecutor),
    Kubernetes(KubernetesExecutor),
}

impl Executor {
    fn start(&mut self, workload: u64, epoch: u64, spec: &Workload, assignment: &Assignment) {
        match self {
            Executor::Simulated(e) => e.start(workload, epoch, spec),
            Executor::Process(e) => {
                e.start(workload, epoch, spec, &devices_needed(spec, assignment))
            }
            Executor::Kubernetes(e) => e.start(workload, epoch, spec, assignment),
        }
    }

    fn stop(&mut self, workload: u64, epoch: u64, grace: Duration) {
        match self {
            Executor::Simulated(e) => e.stop(workload, epoch),
            Executor::Process(e) => e.stop(workload, epoch, grace),
            Executor::Kubernetes(e) => e.stop(workload, epoch, grace),
        }
    }

    fn stop_all(&mut self) -> usize {
        match self {
            Executor::Simulated(e) => e.stop_all(),
            Executor::Process(e) => e.stop_all(),
            Executor::Kubernetes(e) => e.stop_all(),
        }
    }

    fn running(&mut self) -> Vec<(u64, u64)> {
        match self {
            Executor::Simulated(e) => e.running(),
            Executor::Process(e) => e.running(),
            Executor::Kubernetes(e) => e.running(),
        }
    }

    /// The answer to a leader's [`pb::LogsRequest`]: at once, or (the
    /// Kubernetes executor asks its API server) later.
    fn logs_reply(&self, req: &pb::LogsRequest) -> LogsAnswer {
        let answer = |result| logs_answer(req.request_id, req.epoch, result);
        if req.job_status {
            return self.job_status_reply(req);
        }
        match self {
            Executor::Process(e) => {
                LogsAnswer::Now(answer(e.logs(req.workload_id, req.epoch, req.tail_bytes)))
            }
            Executor::Simulated(_) => LogsAnswer::Now(answer(Err(
                "the simulated executor runs no processes: there is no output to show".into(),
            ))),
            Executor::Kubernetes(e) => {
                let read = e.logs(req.workload_id, req.epoch, req.tail_bytes);
                let (request_id, epoch) = (req.request_id, req.epoch);
                LogsAnswer::Later(Box::pin(async move {
                    logs_answer(request_id, epoch, read.await)
                }))
            }
        }
    }

    /// The answer to a leader's question about an admission's Kubernetes
    /// Job ([`pb::LogsRequest::job_status`]).
    fn job_status_reply(&self, req: &pb::LogsRequest) -> LogsAnswer {
        let (request_id, epoch) = (req.request_id, req.epoch);
        match self {
            Executor::Kubernetes(e) => {
                let read = e.job_status(req.workload_id, req.epoch);
                LogsAnswer::Later(Box::pin(async move {
                    job_status_answer(request_id, epoch, read.await)
                }))
            }
            _ => LogsAnswer::Now(job_status_answer(
                request_id,
                epoch,
                Err("this agent's executor runs no Kubernetes Jobs: there is no Job status".into()),
            )),
        }
    }
}

/// The reply to a status question `request_id`: the Job's status as JSON
/// in `text`, in the shape of a logs reply.
fn job_status_answer(
    request_id: u64,
    epoch: u64,
    result: Result<(u64, serde_json::Value), String>,
) -> pb::LogsReply {
    let status = result.map(|(epoch, status)| Tail {
        text: status.to_string(),
        truncated: false,
        epoch,
    });
    logs_answer(request_id, epoch, status)
}

/// The reply to logs request `request_id` (for `epoch`, 0: the latest).
fn logs_answer(request_id: u64, epoch: u64, result: Result<Tail, String>) -> pb::LogsReply {
    match result {
        Ok(tail) => pb::LogsReply {
            request_id,
            text: tail.text,
            error: String::new(),
            truncated: tail.truncated,
            epoch: tail.epoch,
        },
        Err(error) => pb::LogsReply {
            request_id,
            error,
            epoch,
            ..pb::LogsReply::default()
        },
    }
}

/// [`Executor::logs_reply`]'s answer.
enum LogsAnswer {
    Now(pb::LogsReply),
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = pb::LogsReply> + Send>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Event;

    fn agent_config() -> AgentConfig {
        toml::from_str(
            r#"cluster = "east"
servers = ["127.0.0.1:1"]
[[inventory]]
flavor = "h100-80gb"
resources = { "nvidia.com/gpu" = "8" }
"#,
        )
        .expect("config")
    }

    fn control(body: Down) -> pb::ControlMessage {
        pb::ControlMessage { body: Some(body) }
    }

    fn assign(workload: u64, epoch: u64) -> pb::ControlMessage {
        let w: Workload = serde_json::from_value(serde_json::json!({
            "namespace": "default",
            "name": format!("w{workload}"),
            "spec": {
                "queueName": "team-a",
                "podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "1"}}],
                "run": {"duration": "20ms"}
            }
        }))
        .expect("workload");
        let asg = Assignment {
            cluster: "east".into(),
            pod_sets: Vec::new(),
            usage: Default::default(),
        };
        control(Down::Assign(pb::Assignment {
            workload_id: workload,
            epoch,
            workload_json: serde_json::to_string(&w).expect("json"),
            assignment_json: serde_json::to_string(&asg).expect("json"),
        }))
    }

    /// An admission runs at most once, however often it is assigned: a
    /// repeat after it ended (pushed again after a reconcile), a repeat
    /// while deferred, and an older epoch after a newer one all start
    /// nothing. Found by the simulator (seeds 20503, 20509, 20705).
    #[tokio::test]
    async fn an_admission_runs_at_most_once() {
        let journal = JournalSink::new(|| 0);
        let mut agent = Agent::new(agent_config())
            .await
            .expect("agent")
            .with_journal(journal.clone());
        // No ack yet: deferred, and a repeat is not deferred twice.
        agent.on_control(assign(1, 5));
        agent.on_control(assign(1, 5));
        assert!(starts(&journal).is_empty());
        agent.on_control(ack(60_000, 0));
        assert_eq!(starts(&journal), vec![(1, 5)]);
        // It ends; the same admission assigned again starts nothing.
        tokio::time::sleep(Duration::from_millis(100)).await;
        agent.on_control(assign(1, 5));
        // A newer admission of the workload runs; an older one never.
        agent.on_control(assign(1, 7));
        agent.on_control(assign(1, 6));
        assert_eq!(starts(&journal), vec![(1, 5), (1, 7)]);
    }

    fn starts(j: &JournalSink) -> Vec<(u64, u64)> {
        j.entries()
            .iter()
            .filter(|e| e.event == "started")
            .map(|e| (e.workload, e.epoch))
            .collect()
    }

    fn ack(ttl_ms: u64, heartbeat_sent_at_ms: u64) -> pb::ControlMessage {
        control(Down::Ack(pb::HeartbeatAck {
            lease_ttl_ms: ttl_ms,
            leader_term: 1,
            heartbeat_sent_at_ms,
        }))
    }

    /// An assignment that arrived just as the lease ran out, deferred, is
    /// still started when the lease comes back in the same session: a
    /// fence does not mean the leader expired the cluster, and nobody
    /// would push it again (before the fix it stayed Admitted for good).
    #[tokio::test]
    async fn a_fence_keeps_what_waits_for_the_lease() {
        let journal = JournalSink::new(|| 0);
        let mut agent = Agent::new(agent_config())
            .await
            .expect("agent")
            .with_journal(journal.clone());
        agent.on_control(ack(1_000, agent.heartbeat().sent_at_ms));
        tokio::time::sleep(Duration::from_millis(800)).await;
        agent.on_control(assign(1, 5));
        agent.check_fence();
        assert!(agent.fenced);
        assert!(starts(&journal).is_empty());
        // A fresh ack: the lease is live again.
        agent.on_control(ack(1_000, agent.heartbeat().sent_at_ms));
        assert_eq!(starts(&journal), vec![(1, 5)]);
    }

    fn kinds(messages: &[pb::AgentMessage]) -> Vec<&'static str> {
        messages
            .iter()
            .map(|m| match &m.body {
                Some(Up::Inventory(_)) => "inventory",
                Some(Up::Status(_)) => "status",
                Some(Up::Reconcile(_)) => "reconcile",
                Some(Up::Heartbeat(_)) => "heartbeat",
                Some(Up::Logs(_)) => "logs",
                None => "none",
            })
            .collect()
    }

    fn stamp(messages: &[pb::AgentMessage]) -> u64 {
        messages
            .iter()
            .find_map(|m| match &m.body {
                Some(Up::Heartbeat(h)) => Some(h.sent_at_ms),
                _ => None,
            })
            .expect("a heartbeat")
    }

    /// Reports a session handed over but never saw confirmed (the
    /// connection died with them in its buffers) open the next session,
    /// before its reconcile; an ack of a later heartbeat confirms them.
    #[tokio::test]
    async fn unconfirmed_reports_open_the_next_session() {
        let mut agent = Agent::new(agent_config()).await.expect("agent");
        for event in [Event::Running, Event::Succeeded] {
            agent.reports.queue(Report {
                workload: 1,
                epoch: 5,
                event,
                message: String::new(),
            });
        }
        let first = agent.opening();
        assert_eq!(
            kinds(&first),
            ["inventory", "status", "status", "reconcile", "heartbeat"]
        );
        agent.reports.session_ended();
        let second = agent.opening();
        assert_eq!(kinds(&second), kinds(&first));
        agent.on_control(ack(60_000, stamp(&second)));
        agent.reports.session_ended();
        assert_eq!(
            kinds(&agent.opening()),
            ["inventory", "reconcile", "heartbeat"]
        );
    }
}
