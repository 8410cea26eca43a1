//! fleetq's control-plane node (DESIGN.md §3-5, §8).
//!
//! - [`node`]: one node: Raft, services, admission loop, simulated clusters.
//! - [`transport`], [`network`]: gRPC channels with timeouts and
//!   keep-alive; openraft's network over them.
//! - [`proposer`], [`batcher`]: the write path (leader stamps, followers
//!   forward, submissions group-committed) and linearizable reads.
//! - [`admission`]: the leader's admission loop.
//! - [`api_service`], [`agent_service`], [`raft_service`]: the gRPC services.
//! - [`simulated`]: simulated GPU clusters for `fleetq dev` and tests.
//! - [`clock`]: the only clock the ledger path reads.
//! - [`tcp`]: helpers to run a node on real TCP with sled storage.

pub mod admission;
pub mod agent_service;
pub mod api_service;
pub mod batcher;
pub mod clock;
pub mod network;
pub mod node;
pub mod proposer;
pub mod raft_service;
pub mod simulated;
pub mod status;
pub mod tcp;
pub mod transport;

pub use node::{Node, NodeConfig, RaftTiming};
