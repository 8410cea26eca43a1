//! Group commit for submissions: concurrent `Submit` calls that reach one
//! node, and on the leader the batches its followers forward, are folded
//! into one `SubmitWorkloads` command, so a burst of clients costs a few
//! Raft entries instead of one each. No timer is involved: a batch is
//! whatever queued up while the previous one was in flight, so a lone
//! submission goes out at once.
//!
//! A small batch waits while two other batches of the node's are in
//! flight, gathering what arrives meanwhile; a batch of at least [`EAGER_SIZE`]
//! submissions goes out at once, up to [`IN_FLIGHT`] at a time. Each Raft
//! entry costs every node an append, a flush round, a replication round
//! and an apply whatever its size, so with one workload per call fewer,
//! larger entries win over pipelining; with large calls pipelining wins.
//! Measured with `fleetq bench` side by side (two runs each): with up to
//! four batches in flight and no waiting, 32 clients x 1 admitted about
//! 2,600 workloads/s (the leader's Raft writes took 6-7 ms on average);
//! with one batch in flight, about 3,600/s (writes about 4 ms) but 8
//! clients x 50 lost 11%; with this rule, both. Only the leader waits
//! (a follower's batches join the leader's batcher): with followers
//! waiting too, 32 x 1 admitted 3,409 and 3,521/s, without 3,964 and
//! 3,881/s (side by side, 1 Dec). Waiting behind two batches instead of
//! one (2 Dec evening, quiet machine, 3 pairs of 32 x 1): 4,386/4,582,
//! 4,468/4,641, 4,400/4,704 admissions/s; 8 x 50 (2 pairs) 24,676/27,100,
//! 25,284/25,284: a second entry in flight overlaps one replication
//! round with the next.

use std::sync::Arc;

use fleetq_ledger::{Command, Outcome, Submission, SubmitResult};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::raft::proposer::{ProposeError, Proposer};

/// Most submissions in one ledger command (a caller's group is never
/// split, so a larger group goes out alone).
pub const MAX_BATCH: usize = 4096;
/// Most batches in flight at once.
pub const IN_FLIGHT: usize = 4;
/// A batch smaller than this waits while two others are in flight, gathering
/// what arrives meanwhile (see the module's documentation); a larger one
/// goes out at once.
pub const EAGER_SIZE: usize = 32;

/// One caller's share of a batched entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Submitted {
    /// The log index of the entry that carried the submissions.
    pub index: u64,
    /// One result per submission, in the caller's order.
    pub results: Vec<SubmitResult>,
}

type Reply = oneshot::Sender<Result<Submitted, ProposeError>>;

/// One caller's submissions and where to send their results.
struct Group {
    submissions: Vec<Submission>,
    reply: Reply,
}

#[derive(Clone)]
pub struct SubmitBatcher {
    tx: mpsc::Sender<Group>,
}

impl SubmitBatcher {
    pub fn start(proposer: Arc<Proposer>) -> SubmitBatcher {
        let (tx, rx) = mpsc::channel(MAX_BATCH);
        tokio::spawn(run(proposer, rx));
        SubmitBatcher { tx }
    }

    /// Submits `submissions` in one entry with whatever else is waiting,
    /// and returns their results once the entry is applied.
    pub async fn submit(&self, submissions: Vec<Submission>) -> Result<Submitted, ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Group { submissions, reply })
            .await
            .map_err(|_| ProposeError::Raft("the node is shutting down".into()))?;
        rx.await
            .map_err(|_| ProposeError::Raft("the node is shutting down".into()))?
    }
}

async fn run(proposer: Arc<Proposer>, mut rx: mpsc::Receiver<Group>) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    // Signalled whenever a batch completes.
    let done = Arc::new(tokio::sync::Notify::new());
    // A group taken from the queue that did not fit the last batch.
    let mut held: Option<Group> = None;
    loop {
        let first = match held.take() {
            Some(g) => g,
            None => match rx.recv().await {
                Some(g) => g,
                None => return,
            },
        };
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        // Taken after the wait for the permit: what queued meanwhile goes
        // in this batch.
        let mut size = first.submissions.len();
        let mut batch = vec![first];
        while held.is_none() && size < MAX_BATCH {
            match rx.try_recv() {
                Ok(g) => held = add(&mut batch, &mut size, g),
                Err(_) => break,
            }
        }
        // Small, and two other batches in flight: gather until one completes.
        // Only the leader waits: a follower's batch is forwarded into the
        // leader's batcher, which gathers anyway, so waiting here would
        // only add a round trip to its callers' latency.
        while held.is_none()
            && size < EAGER_SIZE
            && permits.available_permits() + 2 < IN_FLIGHT
            && proposer.is_leader()
        {
            tokio::select! {
                g = rx.recv() => match g {
                    Some(g) => held = add(&mut batch, &mut size, g),
                    None => break,
                },
                _ = done.notified() => {}
            }
        }
        let proposer = Arc::clone(&proposer);
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut submissions = Vec::with_capacity(size);
            let mut replies = Vec::with_capacity(batch.len());
            for g in batch {
                replies.push((g.submissions.len(), g.reply));
                submissions.extend(g.submissions);
            }
            let result = propose(&proposer, submissions).await;
            drop(permit);
            done.notify_one();
            answer(replies, result);
        });
    }
}

/// Adds `group` to `batch` (of `size` submissions) if it fits under
/// [`MAX_BATCH`]; otherwise hands it back, for the next batch.
fn add(batch: &mut Vec<Group>, size: &mut usize, group: Group) -> Option<Group> {
    if *size + group.submissions.len() > MAX_BATCH {
        return Some(group);
    }
    *size += group.submissions.len();
    batch.push(group);
    None
}

/// Proposes the batch's submissions as one command.
async fn propose(
    proposer: &Proposer,
    submissions: Vec<Submission>,
) -> Result<(u64, Vec<SubmitResult>), ProposeError> {
    let asked = submissions.len();
    let written = proposer
        .propose(Command::SubmitWorkloads {
            submissions,
            // The leader stamps its limit and plans the admissions
            // (Proposer::write_local).
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        })
        .await?;
    match written.response.outcome {
        Outcome::Submitted { results, .. } if results.len() == asked => {
            Ok((written.index, results))
        }
        _ => Err(ProposeError::Raft(
            "the ledger did not answer one result per submission".into(),
        )),
    }
}

/// Hands each group (its size, its reply) its share of the results, in
/// order.
fn answer(replies: Vec<(usize, Reply)>, result: Result<(u64, Vec<SubmitResult>), ProposeError>) {
    let (index, results) = match result {
        Ok(r) => r,
        Err(e) => {
            for (_, reply) in replies {
                let _ = reply.send(Err(e.clone()));
            }
            return;
        }
    };
    let mut results = results.into_iter();
    for (len, reply) in replies {
        let _ = reply.send(Ok(Submitted {
            index,
            results: results.by_ref().take(len).collect(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(id: u64) -> SubmitResult {
        SubmitResult::Created { id }
    }

    #[test]
    fn each_group_gets_its_share_of_the_results_in_order() {
        let (a, mut ra) = oneshot::channel();
        let (b, mut rb) = oneshot::channel();
        let (c, mut rc) = oneshot::channel();
        let results = (1..=4).map(created).collect();
        answer(vec![(1, a), (0, b), (3, c)], Ok((7, results)));
        let share = |r: Result<Result<Submitted, ProposeError>, _>| r.ok().and_then(Result::ok);
        assert_eq!(
            share(ra.try_recv()),
            Some(Submitted {
                index: 7,
                results: vec![created(1)]
            })
        );
        assert_eq!(
            share(rb.try_recv()),
            Some(Submitted {
                index: 7,
                results: vec![]
            })
        );
        assert_eq!(
            share(rc.try_recv()),
            Some(Submitted {
                index: 7,
                results: vec![created(2), created(3), created(4)]
            })
        );
    }

    #[test]
    fn a_failed_batch_fails_every_group() {
        let (a, mut ra) = oneshot::channel();
        let (b, mut rb) = oneshot::channel();
        let e = ProposeError::Unknown("connection lost".into());
        answer(vec![(2, a), (1, b)], Err(e.clone()));
        assert_eq!(ra.try_recv().ok(), Some(Err(e.clone())));
        assert_eq!(rb.try_recv().ok(), Some(Err(e)));
    }
}
