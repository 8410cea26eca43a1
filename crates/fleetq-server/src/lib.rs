//! fleetq's control-plane node (docs/architecture.md §4-7).
//!
//! The crate is grouped by role; arrows run one way (api, agents and
//! http use raft and guard; everything may use the floor):
//!
//! - [`node`]: one node, wired from the rooms below; [`bootstrap`]: a node
//!   on real TCP with sled storage (the production entry).
//! - [`raft`]: the write path, linearizable reads, the Raft service and
//!   network.
//! - [`leader`]: admission (the loop, and admission on submit) and
//!   retention of finished workloads; the one shape of every leader job.
//! - [`api`]: the client API, visibility, backups.
//! - [`agents`]: agent sessions, leases and their expiry, log relay,
//!   simulated clusters for `fleetq dev` and tests.
//! - [`http`]: `/metrics`, `/healthz`, `/readyz`, the dashboard at `/ui`.
//! - [`guard`]: who is calling and what they may do; limits against abuse.
//!   TLS itself is `fleetq_proto::tls`.
//! - The floor: [`clock`] (the only clock the ledger path reads),
//!   [`metrics`] (the node's instruments, Kueue's names where Kueue has
//!   the series, and the refusal reasons), [`status`] (read models: the
//!   ledger's records as the wire's messages, for the API, the agents'
//!   service and the dashboard), [`census`] (workloads counted by queue,
//!   for the dashboard and `/metrics` alike), [`transport`].
//!
//! ## Departures from the original design
//!
//! Each is recorded with its reason in docs/architecture.md §9; this crate's:
//!
//! - Agents: besides real agents (`Agent.Session`, leases in
//!   [`agents::leases`]), simulated clusters ([`agents::simulated`]) run inside the control plane, on
//!   the leader, and report through the ledger exactly as an agent would;
//!   they hold no lease.
//! - Configuration objects cross the API as Kueue YAML/JSON text rather
//!   than one protobuf message per kind: that is the form users have them
//!   in, and the model's importer gives field-path errors for it.
//! - Raft RPCs carry openraft's own types as JSON (`raft.proto`).

pub mod agents;
pub mod api;
pub mod bootstrap;
pub mod census;
pub mod clock;
pub mod guard;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod node;
pub mod raft;
pub mod status;

/// Channels with timeouts and keep-alive (shared with the agent).
pub use fleetq_proto::transport;

pub use guard::limits::Limits;
pub use node::{Node, NodeConfig, RaftTiming};
