//! One control-plane node: Raft, the client, agent and peer services on
//! one gRPC server, the leader's admission loop and the simulated
//! clusters. The caller chooses the transport (incoming connections and a
//! [`crate::transport::Connector`]), the storage and the clock, so the same
//! code runs over TCP with sled and inside the simulator.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::raft::{NodeId, Raft};
use fleetq_ledger::store::{LedgerHandle, SnapshotStore, StateMachineStore};
use fleetq_ledger::{Ledger, LedgerConfig};
use fleetq_proto::v1::agent_server::AgentServer;
use fleetq_proto::v1::fleet_q_server::FleetQServer;
use fleetq_proto::v1::raft_server::RaftServer;
use futures::Stream;
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, SnapshotPolicy};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tonic::transport::server::Connected;

use crate::agents::leases::{LeadershipConfirmation, LeaseConfig, LeaseExpiry, LeaseTable};
use crate::agents::service::AgentService;
use crate::agents::simulated::{self, SimulatedCluster};
use crate::api::leader_hint::LeaderHintLayer;
use crate::api::service::ApiService;
use crate::clock::SharedClock;
use crate::guard::auth::gate::GateLayer;
use crate::guard::auth::Authorizer;
use crate::guard::limits::{Limits, RequestSizeLayer, SessionSlots, WriteGate};
use crate::leader::admission::{self, AdmissionStats};
use crate::leader::retention::Retention;
use crate::leader::{task, LeaderPolicies};
use crate::metrics::ServerMetrics;
use crate::raft::batcher::SubmitBatcher;
use crate::raft::network::PeerNetwork;
use crate::raft::proposer::Proposer;
use crate::raft::service::RaftService;
use crate::transport::SharedConnector;
use tower::Layer;

/// Raft timing and log compaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaftTiming {
    pub heartbeat: Duration,
    pub election_min: Duration,
    pub election_max: Duration,
    /// Build a snapshot after this many applied entries (etcd's default
    /// is 100,000; a snapshot of a large ledger costs a few hundred ms of
    /// CPU on every replica).
    pub snapshot_every: u64,
    /// Entries kept in the log behind the last snapshot (a follower further
    /// behind catches up from the snapshot).
    pub keep_logs: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat: Duration::from_millis(100),
            election_min: Duration::from_millis(400),
            election_max: Duration::from_millis(800),
            snapshot_every: 50_000,
            keep_logs: 5_000,
        }
    }
}

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub id: NodeId,
    /// The address peers and clients reach this node at.
    pub advertise: String,
    /// The initial voters (id -> address), this node included. Used only
    /// when the node's storage is empty; a node not in the list starts as
    /// an empty learner-to-be.
    pub initial_members: BTreeMap<NodeId, String>,
    pub timing: RaftTiming,
    /// What the ledger runs under; every replica the same.
    pub ledger: LedgerConfig,
    /// What this node proposes while it leads.
    pub leader: LeaderPolicies,
    pub simulated_clusters: Vec<SimulatedCluster>,
    pub debug_endpoints: bool,
    /// Agent leases: how long a silent cluster keeps its workloads.
    pub lease: LeaseConfig,
    /// Who may call this node ([`Authorizer::insecure`] without TLS).
    pub auth: Authorizer,
}

/// A running node.
pub struct Node {
    pub id: NodeId,
    /// Who may do what (also on the HTTP listener).
    pub auth: Authorizer,
    pub raft: Raft,
    pub handle: LedgerHandle,
    pub proposer: Arc<Proposer>,
    pub admission_stats: watch::Receiver<AdmissionStats>,
    /// Last heartbeat per cluster (meaningful on the leader).
    pub leases: LeaseTable,
    pub clock: SharedClock,
    /// This process's own instruments (the rest of `/metrics` is read
    /// from the ledger at scrape time).
    pub metrics: ServerMetrics,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Node {
    /// Starts a node serving on `incoming`, with the default [`Limits`].
    pub async fn start<LS, SS, I, IO, IE>(
        config: NodeConfig,
        log_store: LS,
        state_machine: StateMachineStore<SS>,
        incoming: I,
        connector: SharedConnector,
        clock: SharedClock,
    ) -> Result<Node, String>
    where
        LS: RaftLogStorage<fleetq_ledger::raft::TypeConfig>,
        SS: SnapshotStore,
        I: Stream<Item = Result<IO, IE>> + Send + 'static,
        IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        Node::start_with_limits(
            config,
            Limits::default(),
            log_store,
            state_machine,
            incoming,
            connector,
            clock,
        )
        .await
    }

    /// Starts a node serving on `incoming` under `limits`.
    pub async fn start_with_limits<LS, SS, I, IO, IE>(
        config: NodeConfig,
        limits: Limits,
        log_store: LS,
        state_machine: StateMachineStore<SS>,
        incoming: I,
        connector: SharedConnector,
        clock: SharedClock,
    ) -> Result<Node, String>
    where
        LS: RaftLogStorage<fleetq_ledger::raft::TypeConfig>,
        SS: SnapshotStore,
        I: Stream<Item = Result<IO, IE>> + Send + 'static,
        IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
        IE: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        limits.check()?;
        let raft_config = openraft::Config {
            cluster_name: "fleetq".into(),
            heartbeat_interval: config.timing.heartbeat.as_millis() as u64,
            election_timeout_min: config.timing.election_min.as_millis() as u64,
            election_timeout_max: config.timing.election_max.as_millis() as u64,
            install_snapshot_timeout: 10_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.timing.snapshot_every),
            max_in_snapshot_log_to_keep: config.timing.keep_logs,
            purge_batch_size: (config.timing.snapshot_every / 4).clamp(1, 256),
            max_payload_entries: 512,
            ..Default::default()
        }
        .validate()
        .map_err(|e| format!("invalid Raft settings: {e}"))?;
        let handle = state_machine.handle();
        let raft = Raft::new(
            config.id,
            Arc::new(raft_config),
            PeerNetwork::new(Arc::clone(&connector)),
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| format!("cannot start Raft: {e}"))?;

        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| format!("cannot read Raft state: {e}"))?;
        if !initialized && config.initial_members.contains_key(&config.id) {
            let members: BTreeMap<NodeId, BasicNode> = config
                .initial_members
                .iter()
                .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
                .collect();
            // Every initial member may try; all but one find it done.
            if let Err(e) = raft.initialize(members).await {
                tracing::debug!(error = %e, "initialize skipped");
            }
        }

        // The authorizer's instruments are the node's, so refusals counted
        // before a request reaches a service (TLS handshakes) show too.
        let auth = config.auth.clone();
        // Node certificates count only for members of the group.
        let membership = raft.metrics();
        auth.set_members(Arc::new(move || {
            membership
                .borrow()
                .membership_config
                .membership()
                .nodes()
                .map(|(id, _)| *id)
                .collect()
        }));
        let metrics = auth.metrics().clone();
        let mut proposer = Proposer::new(
            raft.clone(),
            Arc::clone(&clock),
            Arc::clone(&connector),
            handle.clone(),
        )
        .with_metrics(metrics.clone())
        .with_pending_limit(limits.pending_limit());
        // Admission on submit: the leader plans admissions for what a
        // submission is about to queue and writes them in the same entry,
        // one Raft commit instead of two (apply() re-validates the plan).
        if config.leader.admit_on_submit {
            proposer = proposer.with_submit_planner(Ledger::plan_on_submit);
        }
        let proposer = Arc::new(proposer);
        let batcher = SubmitBatcher::start(Arc::clone(&proposer));
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (stats_tx, stats_rx) = watch::channel(AdmissionStats::default());

        // The leader's jobs, each in the one shape of crate::leader::task.
        tokio::spawn(task::run(
            admission::AdmissionLoop::new(
                handle.clone(),
                Arc::clone(&proposer),
                Arc::clone(&clock),
                stats_tx,
                metrics.clone(),
            ),
            raft.clone(),
            shutdown_rx.clone(),
        ));
        if let Some(retention) = config.leader.finished_retention {
            tokio::spawn(task::run(
                Retention {
                    retention,
                    handle: handle.clone(),
                    proposer: Arc::clone(&proposer),
                    clock: Arc::clone(&clock),
                },
                raft.clone(),
                shutdown_rx.clone(),
            ));
        }
        tokio::spawn(simulated::run(
            config.simulated_clusters.clone(),
            handle.clone(),
            Arc::clone(&proposer),
            Arc::clone(&clock),
            shutdown_rx.clone(),
        ));

        let logs = crate::agents::logs::LogRelay::default();
        let api = ApiService {
            logs: logs.clone(),
            node_id: config.id,
            proposer: Arc::clone(&proposer),
            handle: handle.clone(),
            batcher: batcher.clone(),
            debug_endpoints: config.debug_endpoints,
            writes: WriteGate::new(&limits, metrics.clone())?,
            auth: auth.clone(),
            policies: config.leader,
        };
        let leases = LeaseTable::default();
        tokio::spawn(task::run(
            LeadershipConfirmation::new(raft.clone(), leases.clone(), &config.lease),
            raft.clone(),
            shutdown_rx.clone(),
        ));
        tokio::spawn(task::run(
            LeaseExpiry::new(
                handle.clone(),
                Arc::clone(&proposer),
                leases.clone(),
                config.lease,
            ),
            raft.clone(),
            shutdown_rx.clone(),
        ));
        let agent = AgentService {
            proposer: Arc::clone(&proposer),
            handle: handle.clone(),
            leases: leases.clone(),
            lease: config.lease,
            sessions: SessionSlots::new(limits.max_agent_sessions),
            metrics: metrics.clone(),
            auth: auth.clone(),
            logs,
        };
        let peer = RaftService {
            raft: raft.clone(),
            proposer: Arc::clone(&proposer),
            batcher,
            auth,
        };
        let mut stop = shutdown_rx.clone();
        // Limits (crate::guard::limits): message sizes per service; per
        // connection, streams open and requests in flight; oversized
        // requests explained, logged and counted.
        let raft_bytes = limits.raft_message_bytes();
        let server = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(1)))
            .http2_keepalive_timeout(Some(Duration::from_secs(2)))
            .max_concurrent_streams(limits.max_concurrent_streams)
            .concurrency_limit_per_connection(limits.concurrency_per_connection)
            .layer(RequestSizeLayer::new(metrics.clone()))
            .layer(GateLayer::new(peer.auth.clone()))
            .add_service(
                RaftServer::new(peer)
                    .max_decoding_message_size(raft_bytes)
                    .max_encoding_message_size(raft_bytes),
            )
            .add_service(
                LeaderHintLayer::new(raft.clone(), config.id).layer(
                    FleetQServer::new(api)
                        .max_decoding_message_size(limits.max_request_bytes)
                        .max_encoding_message_size(256 << 20),
                ),
            )
            .add_service(
                AgentServer::new(agent)
                    .max_decoding_message_size(limits.max_request_bytes)
                    .max_encoding_message_size(256 << 20),
            )
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = stop.wait_for(|s| *s).await;
            });
        let server = tokio::spawn(server);

        Ok(Node {
            id: config.id,
            auth: config.auth.clone(),
            raft,
            handle,
            proposer,
            admission_stats: stats_rx,
            leases,
            clock,
            metrics,
            shutdown,
            server,
        })
    }

    /// Becomes true when the node shuts down (for servers riding along,
    /// such as [`crate::http`]).
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops serving and shuts Raft down (graceful: in-flight RPCs finish).
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}
