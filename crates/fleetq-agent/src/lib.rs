//! fleetq's per-cluster agent (docs/architecture.md §7).
//!
//! - [`config`]: the agent's TOML configuration, checked field by field.
//! - [`inventory`]: what the cluster has; [`inventory::gpu`] is the pure
//!   conversion from NVML's view of the GPUs to flavors and resources.
//! - [`executor`]: what runs the admitted workloads:
//!   [`executor::process`] (real child processes),
//!   [`executor::kubernetes`] (one `batch/v1` Job per admission) and
//!   [`executor::simulated`].
//! - [`kubernetes`]: the API-server client and the labels fleetq sets;
//!   [`inventory::kubernetes`] turns nodes into inventory.
//! - [`front_door`]: suspended, queue-labelled Jobs created with kubectl
//!   become workloads, and run in place once admitted here.
//! - [`session`]: the session with the leader, leases and self-fencing.
//! - [`delivery`]: status reports kept until the leader has provably
//!   written them.

pub mod config;
pub mod delivery;
pub mod executor;
pub mod front_door;
pub mod inventory;
pub mod kubernetes;
pub mod session;

pub use config::AgentConfig;
pub use session::Agent;
