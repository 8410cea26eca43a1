//! fleetq's replicated quota ledger (DESIGN.md §4, §6, §7).
//!
//! - [`command`]: the commands and their responses; every command is
//!   stamped with the leader's time.
//! - [`ledger`]: [`Ledger::apply`], which re-validates every decision and,
//!   in debug builds, checks invariants 1 and 2 after every command.
//! - [`record`]: the replicated records of workloads and clusters.
//! - [`raft`]: the openraft type configuration.
//! - [`store`]: openraft storage: sled on disk, or in memory with an
//!   explicit fsync model for the simulator.
//!
//! ```
//! use fleetq_ledger::{Command, Ledger, Request};
//! use fleetq_model::Timestamp;
//!
//! let mut ledger = Ledger::default();
//! let before = ledger.state_hash();
//! // A command that refers to a missing cluster is refused and changes nothing.
//! let response = ledger.apply(&Request {
//!     at: Timestamp::from_secs(1),
//!     command: Command::DrainCluster { cluster: "nowhere".into() },
//! });
//! assert!(!response.is_ok());
//! assert_eq!(ledger.state_hash(), before);
//! ```

pub mod command;
pub mod hash;
pub mod ledger;
pub mod raft;
pub mod record;
pub mod store;

pub use command::{
    AdmitBatch, AdmitOutcome, Command, CycleId, Epoch, Outcome, Phase, Request, Response,
    RunningWorkload, StatusReport, Submission, SubmitResult,
};
pub use ledger::{Ledger, LedgerState};
pub use record::{
    ClusterRecord, Counters, LeasePolicy, Reservation, WorkloadRecord, WorkloadState,
};
