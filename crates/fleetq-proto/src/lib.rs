//! fleetq's wire protocols, generated from `proto/fleetq/v1`:
//! [`v1::fleet_q_client`] / [`v1::fleet_q_server`] (clients),
//! [`v1::agent_client`] / [`v1::agent_server`] (agents) and
//! [`v1::raft_client`] / [`v1::raft_server`] (peers), and [`transport`]:
//! channels with the timeouts and keep-alive every caller needs, and [`tls`]:
//! mutual TLS with certificate reload and the identities certificates name.

pub mod tls;
pub mod transport;

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    tonic::include_proto!("fleetq.v1");
}
