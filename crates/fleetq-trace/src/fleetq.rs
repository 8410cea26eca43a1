//! Feeding the stream to fleetq's real admission path: arrivals are
//! submitted in batches (`batch` pending at most), and each batch is
//! settled by `schedule` + `apply` cycles, as the ledger runs them.
//!
//! Order: the queues are StrictFIFO, so a cycle admits arrivals in order
//! until the oldest pending one does not fit; that one was examined at its
//! turn and failed, and since nothing ever ends it never would fit in the
//! paper's method. It is withdrawn (skipped) and the next cycle goes on
//! behind it. A batch holds consecutive arrivals of one ClusterQueue
//! only: with two queues pending, a cycle would go on admitting younger
//! arrivals of one queue while the other waits behind its failed head,
//! out of arrival order. The two trace files have one queue each (no task
//! names a model), so their batches are all full.
//!
//! Every admission is checked against this crate's own books
//! ([`crate::books`]), not fleetq's: with nodes, the pod must name one
//! node of its cluster, of its flavor, of a model the task accepts, with
//! the room; for a bag of GPUs (clusters reported as totals), the pod is
//! put best-fit on a node of the admitted cluster and flavor, and counts
//! as unplaceable when none has the room.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fleetq_model::Timestamp;
use fleetq_scheduler::{schedule, Admission, PendingReason, SchedulerConfig, Snapshot};

use crate::arrivals::Stream;
use crate::baselines::best_fit;
use crate::books::Books;
use crate::clusters::{Fleet, FleetError, GPU};
use crate::replay::{Outcome, Replay};
use crate::workloads::{pending, QueueError, Queues};

/// How fleetq sees the clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The clusters report their nodes: fleetq places pods on nodes.
    Nodes,
    /// As `Nodes`, with every GPU model in one flavor
    /// ([`Fleet::one_flavor`]): node placement without a flavor chosen
    /// first by totals. A diagnostic, for streams whose tasks all accept
    /// any model.
    OneFlavor,
    /// The same clusters as totals only: a bag of GPUs.
    Bag,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Nodes => "fleetq (nodes)",
            Mode::OneFlavor => "fleetq (nodes), all models one flavor",
            Mode::Bag => "fleetq, bag of GPUs (totals only)",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FleetqError {
    #[error(transparent)]
    Queues(#[from] QueueError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("{0}")]
    Submit(String),
    #[error("apply() rejected fleetq's own decision for workload {0}: {1}")]
    Rejected(u64, String),
    #[error("a cycle admitted nothing and examined nothing with {0} pending: {1}")]
    Stalled(usize, String),
}

/// Replays `stream` on `fleet` through fleetq in `mode`, submitting at
/// most `batch` arrivals at a time.
pub fn replay(
    fleet: &Fleet,
    stream: &Stream,
    mode: Mode,
    batch: usize,
) -> Result<Replay, FleetqError> {
    let merged;
    let fleet = if mode == Mode::OneFlavor {
        merged = fleet.one_flavor();
        &merged
    } else {
        fleet
    };
    let queues = Queues::new(fleet, &stream.tasks)?;
    let clusters = fleet.to_fleetq(mode != Mode::Bag)?;
    let mut feed = Feed {
        fleet,
        stream,
        mode,
        snap: Snapshot::new(queues.config.clone(), &clusters),
        cfg: SchedulerConfig::default(),
        books: Books::new(fleet),
        node_index: fleet
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect(),
        outcomes: vec![None; stream.tasks.len()],
        // After every arrival's creation time (its id, in ms).
        now: Timestamp(stream.tasks.len() as u64 + 1),
        deciding: Duration::ZERO,
        admissions: 0,
        cycles: 0,
        log: Log::default(),
    };
    for range in batches(fleet, &queues, stream, batch) {
        feed.submit(&queues, range)?;
        feed.settle()?;
    }
    Ok(feed.finish())
}

/// Runs of consecutive arrivals bound for one queue, `batch` at most each
/// (arrivals without a queue join any run: they are never submitted).
fn batches(
    fleet: &Fleet,
    queues: &Queues,
    stream: &Stream,
    batch: usize,
) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut queue: Option<&str> = None;
    for (i, task) in stream.tasks.iter().enumerate() {
        let this = queues.local_queue(fleet, task);
        let other_queue = this.is_some() && queue.is_some() && this != queue;
        if i > start && (other_queue || i - start >= batch.max(1)) {
            out.push(start..i);
            start = i;
            queue = None;
        }
        queue = queue.or(this);
    }
    if start < stream.tasks.len() {
        out.push(start..stream.tasks.len());
    }
    out
}

/// What is worth saying about a run beyond its table row.
#[derive(Default)]
struct Log {
    refused: usize,
    /// Refused while some node of an accepted model had the room.
    refused_with_room: usize,
    first_refused_with_room: Option<String>,
    /// Refusals by the start of their reason.
    reasons: BTreeMap<String, usize>,
    /// Why admissions were unplaceable (the first few).
    unplaceable: Vec<String>,
}

struct Feed<'a> {
    fleet: &'a Fleet,
    stream: &'a Stream,
    mode: Mode,
    snap: Snapshot,
    cfg: SchedulerConfig,
    books: Books,
    node_index: BTreeMap<&'a str, usize>,
    outcomes: Vec<Option<Outcome>>,
    now: Timestamp,
    deciding: Duration,
    admissions: usize,
    cycles: usize,
    log: Log,
}

impl Feed<'_> {
    /// Queues arrivals `range`; one that accepts no model of the fleet
    /// has no queue and is refused here (the trace files have none).
    fn submit(
        &mut self,
        queues: &Queues,
        range: std::ops::Range<usize>,
    ) -> Result<(), FleetqError> {
        for i in range {
            let task = &self.stream.tasks[i];
            let Some(lq) = queues.local_queue(self.fleet, task) else {
                self.outcomes[i] = Some(Outcome::Refused);
                continue;
            };
            let w = pending(&queues.config, task, i, lq).map_err(FleetqError::Submit)?;
            self.snap
                .add_pending(w)
                .map_err(|e| FleetqError::Submit(format!("{e:?}")))?;
        }
        Ok(())
    }

    /// Cycles until nothing is pending: admissions are checked and kept,
    /// every examined workload left pending is withdrawn as refused.
    fn settle(&mut self) -> Result<(), FleetqError> {
        while self.snap.pending_count() > 0 {
            self.now = Timestamp(self.now.0 + 1000);
            self.cycles += 1;
            let start = Instant::now();
            let decisions = schedule(&self.snap, self.now, &self.cfg);
            self.deciding += start.elapsed();
            if let Some((id, e)) = self.snap.apply(&decisions, self.now).into_iter().next() {
                return Err(FleetqError::Rejected(id, format!("{e:?}")));
            }
            // Admissions first: in a StrictFIFO queue they are older than
            // the head that stopped the cycle.
            for a in &decisions.admissions {
                self.admitted(a);
            }
            for (&id, reason) in &decisions.pending {
                self.snap.remove_pending(id);
                self.refused(id, reason);
            }
            if decisions.admissions.is_empty() && decisions.pending.is_empty() {
                let why: Vec<String> = decisions
                    .queue_reasons
                    .iter()
                    .map(|(q, r)| format!("{q}: {r}"))
                    .collect();
                return Err(FleetqError::Stalled(
                    self.snap.pending_count(),
                    why.join("; "),
                ));
            }
        }
        Ok(())
    }

    fn admitted(&mut self, a: &Admission) {
        self.admissions += 1;
        let i = index(a.workload);
        let placed = match self.mode {
            Mode::Nodes | Mode::OneFlavor => self.check_on_nodes(i, a),
            Mode::Bag => self.put_on_a_node(i, a),
        };
        self.outcomes[i] = Some(match placed {
            Ok(()) => Outcome::Placed,
            Err(why) => {
                if self.log.unplaceable.len() < 3 {
                    self.log.unplaceable.push(why);
                }
                Outcome::Unplaceable
            }
        });
    }

    /// fleetq placed the pod on a node: is it one the task may use, in
    /// the admitted cluster and flavor, with the room? Charged if so.
    fn check_on_nodes(&mut self, i: usize, a: &Admission) -> Result<(), String> {
        let task = &self.stream.tasks[i];
        let who = format!("task {} (arrival {})", task.name, i + 1);
        let psa = match a.assignment.pod_sets.as_slice() {
            [psa] if psa.count == 1 => psa,
            other => return Err(format!("{who}: admitted as {other:?}, not one pod")),
        };
        let [placed] = psa.nodes.as_slice() else {
            return Err(format!("{who}: placed on {:?}, not one node", psa.nodes));
        };
        let n = *self
            .node_index
            .get(placed.node.as_str())
            .ok_or_else(|| format!("{who}: placed on unknown node {:?}", placed.node))?;
        let node = &self.fleet.nodes[n];
        if placed.count != 1
            || self.fleet.clusters[node.cluster] != a.assignment.cluster
            || psa.flavors.get(GPU) != Some(&node.flavor)
        {
            return Err(format!(
                "{who}: placed on {placed:?} of {}, flavor {}, but admitted to {} with {:?}",
                self.fleet.clusters[node.cluster], node.flavor, a.assignment.cluster, psa.flavors
            ));
        }
        if !self.books.fits(self.fleet, n, task) || !self.books.charge(n, task) {
            return Err(format!(
                "{who}: node {} ({}) has {:?} free, the task needs {:?}",
                node.name,
                node.model,
                self.books.free(n),
                task.need
            ));
        }
        Ok(())
    }

    /// fleetq admitted the task to a cluster and flavor by totals: puts
    /// it best-fit on a node there, if one has the room.
    fn put_on_a_node(&mut self, i: usize, a: &Admission) -> Result<(), String> {
        let task = &self.stream.tasks[i];
        let flavor = a
            .assignment
            .pod_sets
            .first()
            .and_then(|p| p.flavors.get(GPU))
            .cloned()
            .unwrap_or_default();
        let (fleet, books) = (self.fleet, &self.books);
        let candidates = (0..fleet.nodes.len()).filter(|&n| {
            let node = &fleet.nodes[n];
            node.flavor == flavor
                && fleet.clusters[node.cluster] == a.assignment.cluster
                && books.fits(fleet, n, task)
        });
        match best_fit(candidates, books) {
            Some(n) if self.books.charge(n, task) => Ok(()),
            _ => Err(format!(
                "task {} (arrival {}, {} GPUs) admitted to {} flavor {flavor}: no node there has the room",
                task.name,
                i + 1,
                task.need.gpus,
                a.assignment.cluster
            )),
        }
    }

    fn refused(&mut self, id: u64, reason: &PendingReason) {
        let i = index(id);
        self.outcomes[i] = Some(Outcome::Refused);
        self.log.refused += 1;
        *self.log.reasons.entry(reason_class(reason)).or_default() += 1;
        let task = &self.stream.tasks[i];
        if self.books.any_fits(self.fleet, task) {
            self.log.refused_with_room += 1;
            if self.log.first_refused_with_room.is_none() {
                self.log.first_refused_with_room = Some(format!(
                    "arrival {} ({}, {} GPUs): {reason}",
                    i + 1,
                    task.name,
                    task.need.gpus
                ));
            }
        }
    }

    fn finish(self) -> Replay {
        let mut notes = vec![format!(
            "{}: {} cycles, {} admissions, {} refused",
            self.mode.name(),
            self.cycles,
            self.admissions,
            self.log.refused
        )];
        if self.log.refused_with_room > 0 {
            notes.push(format!(
                "{}: {} of the refused tasks had a node of an accepted model with the room at that moment; the first: {}",
                self.mode.name(),
                self.log.refused_with_room,
                self.log.first_refused_with_room.unwrap_or_default()
            ));
        }
        for (reason, count) in &self.log.reasons {
            notes.push(format!(
                "{}: refused {count}x with {reason}",
                self.mode.name()
            ));
        }
        for why in &self.log.unplaceable {
            notes.push(format!("{}: unplaceable: {why}", self.mode.name()));
        }
        Replay {
            policy: self.mode.name().to_string(),
            // Every arrival was submitted and settled, or refused unqueued.
            outcomes: self
                .outcomes
                .into_iter()
                .map(|o| o.unwrap_or(Outcome::Refused))
                .collect(),
            deciding: self.deciding,
            admissions: self.admissions,
            notes,
        }
    }
}

/// A reason without its details (the text after the first `:`) and with
/// its amounts as `N`, so that refusals group by cause.
fn reason_class(reason: &PendingReason) -> String {
    let head = reason.message.split(':').next().unwrap_or("");
    let words: Vec<&str> = head
        .split_whitespace()
        .map(|w| {
            if w.starts_with(|c: char| c.is_ascii_digit()) {
                "N"
            } else {
                w
            }
        })
        .collect();
    format!("{:?}: {}", reason.kind, words.join(" "))
}

/// Arrival index of workload `id` (ids are arrival index + 1).
fn index(id: u64) -> usize {
    usize::try_from(id.saturating_sub(1)).unwrap_or(usize::MAX)
}
