//! The clusters' side: the gRPC service agents hold their sessions on
//! ([`service`]), their leases and the leader's expiry of silent clusters
//! ([`leases`]), the relay of workload logs ([`logs`]), and the simulated
//! clusters `fleetq dev` and tests run inside the control plane
//! ([`simulated`]).

pub mod leases;
pub mod logs;
pub mod service;
pub mod simulated;
