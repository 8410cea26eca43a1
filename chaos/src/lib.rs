//! fleetq's simulator: the real control-plane node code
//! ([`fleetq_server::Node`]) running unchanged inside
//! [turmoil](https://docs.rs/turmoil), with simulated TCP, a simulated
//! clock ([`fleetq_server::clock::TokioClock`] reads turmoil's time) and
//! in-memory Raft storage with an fsync model
//! ([`fleetq_ledger::store::MemDisk`]).
//!
//! - [`plan`]: what a run does, drawn from a seed: 30 workloads, cancels,
//!   quota changes during contention, and faults: a leader partition, a
//!   crash of the leader or a follower (its unsynced writes lost) and a
//!   restart from the same disk; in about half the seeds a second fault
//!   of the rarer kinds (a split with the leader or followers in the
//!   minority, one-way loss around the leader, the leader crashed or cut
//!   off while an admission batch is in flight, a power cut of every
//!   node, lossy or slow links); and an agent fault (cut off, or crashed
//!   and restarted).
//! - [`regressions`]: hand-built plans that replay the mechanisms of
//!   real Kueue quota bugs.
//! - [`sim`]: one run of a plan: three or five nodes `n1`.., two agents
//!   `a1`, `a2` (the real agent code, simulated executor, 6 GPUs each),
//!   one client that applies the configuration and submits through the
//!   public gRPC API; then the checks of docs/architecture.md §6 (5 and 6 through
//!   the API; 1 and 2 inside the ledger's apply in debug builds and again
//!   from outside on every replica; 3 from every replica at the end; 1, 3
//!   and 4 from the executors' own journals; no panics anywhere).
//! - [`inject`]: the fault injectors.
//! - [`agents`]: the agents in the simulation.
//! - [`oracle`]: the independent checker: each replica's applied stream
//!   and the executors' journals against a model written apart.
//! - [`client`]: the simulated user.
//! - [`net`]: tonic over turmoil's TCP.
//! - [`live`]: `fleetq-chaos live`, the real binaries under faults.
//! - [`proxy`]: the TCP fault proxy `live` and the end-to-end tests use.
//!
//! A failed run reports the check, the seed and the command that replays
//! it (`fleetq-chaos sim --seed N`, with `--nodes` and `--scenario` where
//! they differ from the default).
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
pub mod draw;
pub mod inject;
pub mod live;
pub mod net;
pub mod node_faults;
pub mod oracle;
pub mod plan;
pub mod proxy;
pub mod regressions;
pub mod sim;

pub use plan::{CrashTarget, Fault, Plan};
pub use sim::{replay_command, run, run_seed, RunReport};
