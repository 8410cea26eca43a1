//! fleetq's replicated quota ledger (docs/architecture.md §5, §6, §8).
//!
//! - [`command`]: the commands and their responses; every command is
//!   stamped with the leader's time.
//! - [`config`]: what a ledger runs under (scheduler settings,
//!   wait-for-ready).
//! - [`ledger`]: [`Ledger::apply`], which re-validates every decision and,
//!   in debug builds, checks invariants 1 and 2 after every command.
//! - [`record`]: the replicated records of workloads and clusters.
//! - [`retention`]: which finished workloads are due for removal, and the
//!   ids removed so far.
//! - [`raft`]: the openraft type configuration.
//! - [`store`]: openraft storage: sled on disk, or in memory with an
//!   explicit fsync model for the simulator.
//! - [`backup`]: backup files of the ledger, and data directories of a
//!   new group seeded from one.
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

//! ## Departures from the original design
//!
//! Each is recorded with its reason in docs/architecture.md §9; this crate's:
//!
//! - `AdmitBatch` carries a [`CycleId`] (Raft term, sequence). apply()
//!   accepts a batch only in a log entry of that same term and only if it
//!   is newer than the last accepted one; a batch whose every decision is
//!   refused changes nothing (not even its reasons). Pending reasons travel
//!   in the batch (only those that changed), so every replica can show them.
//! - A configuration change that would leave admitted work over its new
//!   quota, or remove a quota cell a reservation is charged to, is refused
//!   (Kueue lets usage exceed a shrunk quota). A cluster registration whose
//!   capacity is below what is already assigned there is refused too; the
//!   agents issue will evict instead.
//! - The state hash leaves out the leader's clock (`now`) and the counters:
//!   a refused or stale command must leave it unchanged.
//! - The openraft runtime is one type, [`raft::FleetqRuntime`] (tokio with a
//!   per-thread seedable election RNG), instead of a type parameter threaded
//!   through every crate: the simulator picks determinism by seeding it.
//! - Log entries, snapshots and Raft RPC payloads are JSON.
//! - Decisions travel in `AdmitBatch`, and also in the `SubmitWorkloads`
//!   entry that queues the workloads (admission on submit, §3 has only
//!   the former): the leader plans admissions for the workloads it is
//!   about to queue and writes them in the same entry, so a workload that
//!   finds room is admitted with one commit instead of two. apply()
//!   re-validates each one as it does a batch's, after all the entry's
//!   submissions, only if nothing waited before the entry, and stops at
//!   the first that no longer holds; the rest wait for the cycle.
//! - §4's vocabulary gains `RemoveFinished` (retention of finished
//!   workloads, Kueue's `objectRetentionPolicies.workloads.afterFinished`,
//!   24 h by default): the ledger otherwise kept every workload forever,
//!   so memory, snapshots and a restart's import grew with history, not
//!   with what is live. apply() picks what to remove from its own state
//!   (ended at least the stamped retention before the command's stamp,
//!   holding no quota) and records every removed id
//!   ([`LedgerState::removed`], compact ranges), so invariant 5 reads:
//!   every acknowledged submission survives, as a record or as an id
//!   removed after it finished. A name (and a request id) is free again
//!   once its workload is removed, as after deleting a Kueue Workload.

pub mod backup;
pub mod command;
pub mod config;
pub mod format;
pub mod hash;
pub mod ledger;
mod nodes_left;
pub mod raft;
pub mod record;
pub mod retention;
pub mod store;

pub use command::{
    AdmissionOnSubmit, AdmitBatch, AdmitOutcome, Command, CycleId, Epoch, Outcome, Phase, Request,
    Response, RunningWorkload, StatusReport, Submission, SubmitResult,
};
pub use config::{LedgerConfig, WaitForReady};
pub use ledger::{invariant_checks_default, Ledger, LedgerState, INVARIANT_CHECKS_ENV};
pub use record::{
    ClusterRecord, Counters, LeasePolicy, Reservation, WaitHistogram, WorkloadRecord,
    WorkloadState, WAIT_BUCKETS_MS,
};
