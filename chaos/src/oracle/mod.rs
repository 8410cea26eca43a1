//! The independent checker (docs/testing.md, "The oracle"): a model of
//! fleetq's promises written apart from the code it checks. It shares no
//! quota, charging or placement code with `fleetq-scheduler` or
//! `fleetq-ledger`; it reads their data (records, commands, outcomes)
//! and does its own arithmetic.
//!
//! - [`quota`]: Kueue's quota rules over plain maps.
//! - [`replica`]: the checks on one replica's stream of applied commands.
//! - [`journal`]: what the executors really ran, against the quota in
//!   force at each moment and the clusters' devices.
//!
//! [`Oracle::observer`] hands each simulated node a hook that its state
//! machine calls after every applied entry
//! ([`fleetq_ledger::store::ApplyObserver`]); the verdict is read after
//! the run with [`Oracle::violations`].

pub mod journal;
pub mod quota;
pub mod replica;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fleetq_ledger::command::Command;
use fleetq_ledger::store::{Applied, ApplyObserver};
use fleetq_model::Config;

use replica::{Held, ReplicaBooks};

/// The checks the oracle reports under, by name (the mutant test asserts
/// which one caught each planted bug).
pub const CHECK_TRANSITIONS: &str = "oracle: every reservation change has a cause";
pub const CHECK_QUOTA: &str = "oracle: no over-admission of quota (invariant 1)";
pub const CHECK_DEVICES: &str = "oracle: no over-admission of devices (invariant 1)";
pub const CHECK_BOOKS: &str = "oracle: the replica's books agree (invariant 2)";
pub const CHECK_NODE_LEFT: &str = "oracle: a node that left is fenced or kept by policy";
pub const CHECK_TOPOLOGY: &str = "oracle: placements keep their topology requests";

/// Which check a problem line belongs to.
fn check_of(problem: &str) -> &'static str {
    if problem.starts_with("over-admission of devices") {
        CHECK_DEVICES
    } else if problem.starts_with("over-admission") {
        CHECK_QUOTA
    } else if problem.starts_with("books disagree") {
        CHECK_BOOKS
    } else if problem.starts_with("node left:") {
        CHECK_NODE_LEFT
    } else if problem.starts_with("topology broken:") {
        CHECK_TOPOLOGY
    } else {
        CHECK_TRANSITIONS
    }
}

/// A problem the oracle found: the check, and a line naming the replica,
/// the entry, the object and the figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub check: &'static str,
    pub detail: String,
}

/// At most this many findings are kept (the first ones tell the story).
const KEEP: usize = 20;

#[derive(Default)]
struct Inner {
    replicas: BTreeMap<u64, ReplicaBooks>,
    findings: Vec<Finding>,
    /// Accepted configuration changes: (simulated ms of the earliest
    /// apply, log index, the configuration from then on).
    timeline: Vec<(u64, u64, Arc<Config>)>,
    /// Every reservation any replica granted: (workload, epoch).
    granted: BTreeMap<(u64, u64), Held>,
    entries: u64,
    /// Log indices already counted for progress (each once, whichever
    /// replica applies it first).
    counted: std::collections::BTreeSet<u64>,
    progress: replica::Progress,
    /// (log index, workload) a node left under, with the lease policy:
    /// once per entry, whichever replica applied it.
    left_under: BTreeMap<(u64, u64), fleetq_ledger::LeasePolicy>,
}

/// Shared by every replica of one run.
#[derive(Clone, Default)]
pub struct Oracle {
    inner: Arc<Mutex<Inner>>,
    /// The simulated clock, in ms since the run began.
    clock: Option<fn() -> u64>,
}

impl Oracle {
    /// An oracle that dates configuration changes by `clock`.
    pub fn new(clock: fn() -> u64) -> Oracle {
        Oracle {
            inner: Arc::default(),
            clock: Some(clock),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hook for node `node`'s state machine. A restarted node gets a
    /// new one; its books start again from the state it opens with.
    pub fn observer(&self, node: u64) -> ApplyObserver {
        let oracle = self.clone();
        Arc::new(move |applied: Applied<'_>| oracle.observe(node, applied))
    }

    fn observe(&self, node: u64, applied: Applied<'_>) {
        let now = self.clock.map_or(0, |c| c());
        let mut inner = self.lock();
        let inner = &mut *inner;
        let books = inner
            .replicas
            .entry(node)
            .or_insert_with(|| ReplicaBooks::new(node));
        let (index, what, problems) = match applied {
            Applied::Reset { index, ledger } => {
                let problems = books.reset(index, ledger);
                (index, "the state it opened with".to_string(), problems)
            }
            Applied::Entry {
                index,
                request,
                response,
                ledger,
            } => {
                inner.entries += 1;
                let problems = books.entry(index, request, response, ledger);
                for (workload, policy) in &books.left_under {
                    inner.left_under.insert((index, *workload), *policy);
                }
                if inner.counted.insert(index) {
                    inner.progress.count(&request.command, response);
                }
                let config_change = matches!(
                    request.command,
                    Command::ApplyObjects { .. } | Command::DeleteObject { .. }
                );
                if config_change
                    && response.is_ok()
                    && !inner.timeline.iter().any(|(_, i, _)| *i == index)
                {
                    inner
                        .timeline
                        .push((now, index, Arc::new(ledger.state().config.clone())));
                    inner.timeline.sort_by_key(|(_, i, _)| *i);
                }
                (index, request.command.name().to_string(), problems)
            }
        };
        for (key, held) in &books.granted {
            inner.granted.entry(*key).or_insert_with(|| held.clone());
        }
        for p in problems {
            if inner.findings.len() < KEEP {
                inner.findings.push(Finding {
                    check: check_of(&p),
                    detail: format!("n{node} entry #{index} ({what}): {p}"),
                });
            }
        }
    }

    /// What the oracle found, in order.
    pub fn findings(&self) -> Vec<Finding> {
        self.lock().findings.clone()
    }

    /// How often a node left under a running workload: (under the Keep
    /// policy, under Fence), each entry and workload once.
    pub fn left_under(&self) -> (u64, u64) {
        let inner = self.lock();
        let kept = inner
            .left_under
            .values()
            .filter(|p| **p == fleetq_ledger::LeasePolicy::Keep)
            .count() as u64;
        (kept, inner.left_under.len() as u64 - kept)
    }

    /// Entries checked, over all replicas.
    pub fn entries_checked(&self) -> u64 {
        self.lock().entries
    }

    /// The accepted configurations, with when each came into force.
    pub fn timeline(&self) -> Vec<(u64, u64, Arc<Config>)> {
        self.lock().timeline.clone()
    }

    /// Every reservation granted, by (workload, epoch).
    pub fn granted(&self) -> BTreeMap<(u64, u64), Held> {
        self.lock().granted.clone()
    }

    /// Preemptions and refusals over the log (each entry counted once).
    pub fn progress(&self) -> replica::Progress {
        self.lock().progress.clone()
    }
}
