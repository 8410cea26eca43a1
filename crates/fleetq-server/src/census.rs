//! Workloads counted by queue: what the dashboard (`http/ui.rs`) and
//! `/metrics` (`http/scrape.rs`) both report, taken in one pass over the
//! scheduler's pending and admitted workloads, so the two cannot count
//! differently.

use std::collections::BTreeMap;

use fleetq_ledger::Ledger;
use fleetq_scheduler::ReasonKind;

/// How many workloads of one queue wait and hold quota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pending that the next cycle may admit (Kueue's `active`).
    pub pending_active: u64,
    /// Pending that the last cycle could not admit (Kueue's
    /// `inadmissible`; see [`holds_back`]).
    pub pending_inadmissible: u64,
    /// Holding a reservation of quota.
    pub admitted: u64,
}

impl Counts {
    pub fn pending(&self) -> u64 {
        self.pending_active + self.pending_inadmissible
    }
}

/// The census of one ledger state.
#[derive(Debug, Default)]
pub struct Census<'a> {
    /// By ClusterQueue name.
    pub cluster_queues: BTreeMap<&'a str, Counts>,
    /// By LocalQueue key (`namespace/name`).
    pub local_queues: BTreeMap<&'a str, Counts>,
    /// What pending workloads request, by ClusterQueue: milli-units by
    /// resource, every pod of every pod set ([`Census::with_amounts`]
    /// only).
    pub pending_requests: BTreeMap<&'a str, BTreeMap<String, u64>>,
    /// Quota reserved, by LocalQueue key: milli-units by (flavor,
    /// resource) ([`Census::with_amounts`] only).
    pub local_queue_usage: BTreeMap<&'a str, BTreeMap<(String, String), u64>>,
}

impl<'a> Census<'a> {
    /// Counts `ledger`'s pending and admitted workloads (what the
    /// dashboard shows).
    pub fn counts(ledger: &'a Ledger) -> Census<'a> {
        Census::take(ledger, false)
    }

    /// [`Census::counts`], and in the same pass the amounts pending
    /// workloads request and LocalQueues hold (what `/metrics` reports
    /// too; the dashboard does not pay for them).
    pub fn with_amounts(ledger: &'a Ledger) -> Census<'a> {
        Census::take(ledger, true)
    }

    fn take(ledger: &'a Ledger, amounts: bool) -> Census<'a> {
        let snapshot = ledger.snapshot();
        let mut census = Census::default();
        for p in snapshot.pending() {
            let held = ledger
                .workload(p.id)
                .and_then(|r| ledger.reason_of(r))
                .is_some_and(|r| holds_back(r.kind));
            for counts in [
                census
                    .cluster_queues
                    .entry(p.cluster_queue.as_str())
                    .or_default(),
                census
                    .local_queues
                    .entry(p.local_queue.as_str())
                    .or_default(),
            ] {
                if held {
                    counts.pending_inadmissible += 1;
                } else {
                    counts.pending_active += 1;
                }
            }
            if !amounts {
                continue;
            }
            let requested = census
                .pending_requests
                .entry(p.cluster_queue.as_str())
                .or_default();
            for ps in &p.workload.spec.pod_sets {
                for (resource, per_pod) in &ps.requests {
                    let total = per_pod.saturating_mul(u64::from(ps.count)).milli();
                    let e = requested.entry(resource.clone()).or_default();
                    *e = e.saturating_add(total);
                }
            }
        }
        for a in snapshot.admitted() {
            let (cq, lq) = (
                a.pending.cluster_queue.as_str(),
                a.pending.local_queue.as_str(),
            );
            census.cluster_queues.entry(cq).or_default().admitted += 1;
            census.local_queues.entry(lq).or_default().admitted += 1;
            if !amounts {
                continue;
            }
            let usage = census.local_queue_usage.entry(lq).or_default();
            for (fr, q) in &a.assignment.usage {
                let e = usage
                    .entry((fr.flavor.clone(), fr.resource.clone()))
                    .or_default();
                *e = e.saturating_add(q.milli());
            }
        }
        census
    }

    /// The counts of ClusterQueue `name` (zero if nothing is in it).
    pub fn cluster_queue(&self, name: &str) -> Counts {
        self.cluster_queues.get(name).copied().unwrap_or_default()
    }

    /// The counts of the LocalQueue keyed `key` (zero if nothing is in it).
    pub fn local_queue(&self, key: &str) -> Counts {
        self.local_queues.get(key).copied().unwrap_or_default()
    }
}

/// Whether a pending reason means the last cycle could not admit it (as
/// opposed to not having got to it yet).
pub fn holds_back(kind: ReasonKind) -> bool {
    match kind {
        ReasonKind::WaitingForQuota
        | ReasonKind::ExceedsMaxQuota
        | ReasonKind::NoClusterCapacity
        | ReasonKind::Misconfigured
        | ReasonKind::Suspended
        | ReasonKind::BackingOff
        | ReasonKind::BudgetExhausted
        | ReasonKind::BlockedByHead => true,
        ReasonKind::Preempting | ReasonKind::NotYetConsidered | ReasonKind::Evicted => false,
    }
}
