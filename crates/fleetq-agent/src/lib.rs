//! fleetq's per-cluster agent (DESIGN.md §5).
//!
//! Built so far: [`inventory`], the pure conversion from what NVML reports
//! about a node's GPUs to the flavors and resources the ledger charges.
//! The NVML binding itself, the Kubernetes and static sources, the
//! executors, the session with the leader, leases and reconcile are still
//! to come (issue 4).

pub mod inventory;
