//! What only the leader does with the ledger: admission (the scheduling
//! loop, and admission on submit handed to the write path) and the
//! retention of finished workloads. Lease expiry is the agents' room
//! ([`crate::agents::leases`]).

pub mod admission;
pub mod retention;
