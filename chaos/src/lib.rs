//! fleetq's simulator: the real control-plane node code
//! ([`fleetq_server::Node`]) running unchanged inside
//! [turmoil](https://docs.rs/turmoil), with simulated TCP, a simulated
//! clock ([`fleetq_server::clock::TokioClock`] reads turmoil's time) and
//! in-memory Raft storage with an fsync model
//! ([`fleetq_ledger::store::MemDisk`]).
//!
//! - [`sim`]: one run for a seed: three nodes `n1`..`n3`, two agents
//!   `a1`, `a2` (the real agent code, simulated executor, 6 GPUs each),
//!   one client that applies a Kueue configuration and submits workloads
//!   through the public gRPC API; at most one control-plane fault (a
//!   leader partition, healed later; or a crash of the leader or a
//!   follower that loses the node's unsynced writes, then a restart from
//!   the same simulated disk) and at most one agent fault (cut off from
//!   the control plane, or crashed and restarted); then the checks of
//!   DESIGN.md §6 (5 and 6 through the API; 1 and 2 inside the ledger's
//!   apply in debug builds and again from outside on every replica; 1, 3
//!   and 4 from the executors' own journals; no panics anywhere).
//! - [`agents`]: the agents in the simulation and the journal checks.
//! - [`client`]: the simulated user.
//! - [`net`]: tonic over turmoil's TCP.
//! - [`live`]: `fleetq-chaos live`, the real binaries under faults.
//! - [`proxy`]: the TCP fault proxy `live` and the end-to-end tests use.
//!
//! A failed run reports the check, the seed and `fleetq-chaos sim --seed N`.
//!
//! ## Deterministic
//!
//! The workspace builds with `--cfg tokio_unstable` (.cargo/config.toml),
//! so turmoil seeds tokio's own scheduler randomness; openraft's election
//! timeouts and the agents' reconnect jitter are seeded from the seed too,
//! and the components the simulation runs keep ordered collections where
//! iteration order reaches the network. Every run reports a trace digest;
//! `fleetq-chaos sim --seed S` reproduces a run's digest exactly. Every
//! seed runs in a fresh process: when a node crashes, tokio drops its
//! tasks in an order derived from a process-wide task counter, which
//! earlier runs in the same process would have advanced.

pub mod agents;
pub mod client;
pub mod live;
pub mod net;
pub mod proxy;
pub mod sim;

pub use sim::{replay_command, run_seed, CrashTarget, Fault, Plan, RunReport};
