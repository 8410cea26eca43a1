//! fleetq's control-plane node (docs/architecture.md §4-7).
//!
//! - [`node`]: one node: Raft, services, admission loop, simulated clusters.
//! - [`transport`], [`network`]: gRPC channels with timeouts and
//!   keep-alive; openraft's network over them.
//! - [`proposer`], [`batcher`]: the write path (leader stamps, followers
//!   forward, submissions group-committed) and linearizable reads.
//! - [`admission`]: the leader's admission loop.
//! - [`retention`]: the leader's removal of finished workloads.
//! - [`api_service`], [`agent_service`], [`raft_service`]: the gRPC services.
//! - [`simulated`]: simulated GPU clusters for `fleetq dev` and tests.
//! - [`clock`]: the only clock the ledger path reads.
//! - [`metrics`], [`http`]: Prometheus `/metrics` (Kueue's names where
//!   Kueue has the series), `/healthz` and `/readyz` over HTTP.
//! - [`visibility`]: pending workloads of a ClusterQueue or LocalQueue in
//!   admission order (gRPC, and HTTP shaped like Kueue's visibility API).
//! - [`ui`]: the web dashboard at `/ui` and its JSON, `/api/v1/overview`.
//! - [`tcp`]: helpers to run a node on real TCP with sled storage.
//! - [`limits`]: limits against abuse (request size, write rate per
//!   client, pending workloads per LocalQueue, agent sessions).
//! - [`backup`]: backups of the ledger, on demand and on a schedule.
//! - [`auth`]: who is calling (client certificate or bearer token) and
//!   what they may do; TLS itself is `fleetq_proto::tls`.

//!
//! ## Departures from the original design
//!
//! Each is recorded with its reason in docs/architecture.md §9; this crate's:
//!
//! - Agents: besides real agents (`Agent.Session`, leases in [`leases`]),
//!   simulated clusters ([`simulated`]) run inside the control plane, on
//!   the leader, and report through the ledger exactly as an agent would;
//!   they hold no lease.
//! - Configuration objects cross the API as Kueue YAML/JSON text rather
//!   than one protobuf message per kind: that is the form users have them
//!   in, and the model's importer gives field-path errors for it.
//! - Raft RPCs carry openraft's own types as JSON (`raft.proto`).

pub mod admission;
pub mod agent_service;
pub mod api_service;
pub mod auth;
pub mod backup;
pub mod batcher;
pub mod clock;
pub mod http;
pub mod leases;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod network;
pub mod node;
pub mod proposer;
pub mod raft_service;
pub mod retention;
pub mod simulated;
pub mod status;
pub mod tcp;
pub mod ui;
pub mod visibility;
/// Channels with timeouts and keep-alive (shared with the agent).
pub use fleetq_proto::transport;

pub use limits::Limits;
pub use node::{Node, NodeConfig, RaftTiming};
