//! fleetq's per-cluster agent (DESIGN.md §5).
//!
//! - [`config`]: the agent's TOML configuration, checked field by field.
//! - [`inventory`]: what the cluster has; [`inventory::gpu`] is the pure
//!   conversion from NVML's view of the GPUs to flavors and resources.
//! - [`executor`]: what runs the admitted workloads; [`executor::simulated`]
//!   so far.
//! - [`session`]: the session with the leader, leases and self-fencing.
//!
//! Still to come (issue 4): the NVML binding and the Kubernetes inventory
//! source, the process and Kubernetes executors, re-adopting running
//! children after an agent restart.

pub mod config;
pub mod executor;
pub mod inventory;
pub mod kubernetes;
pub mod session;

pub use config::AgentConfig;
pub use session::Agent;
