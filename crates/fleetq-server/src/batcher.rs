//! Group commit for submissions: concurrent `Submit` calls that reach one
//! node are folded into one `SubmitWorkloads` command, so a burst of
//! clients costs a few Raft entries instead of one each. No timer is
//! involved: a batch is whatever queued up while the previous one was in
//! flight, so a lone submission goes out at once.

use std::sync::Arc;

use fleetq_ledger::{Command, Outcome, Submission, SubmitResult};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::proposer::{ProposeError, Proposer};

/// Most submissions in one ledger command.
pub const MAX_BATCH: usize = 4096;
/// Batches in flight at once (more pipelining, fewer, larger entries).
const IN_FLIGHT: usize = 4;

type Reply = oneshot::Sender<Result<SubmitResult, ProposeError>>;

#[derive(Clone)]
pub struct SubmitBatcher {
    tx: mpsc::Sender<(Submission, Reply)>,
}

impl SubmitBatcher {
    pub fn start(proposer: Arc<Proposer>) -> SubmitBatcher {
        let (tx, rx) = mpsc::channel(MAX_BATCH * 4);
        tokio::spawn(run(proposer, rx));
        SubmitBatcher { tx }
    }

    pub async fn submit(&self, submission: Submission) -> Result<SubmitResult, ProposeError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send((submission, reply))
            .await
            .map_err(|_| ProposeError::Raft("the node is shutting down".into()))?;
        rx.await
            .map_err(|_| ProposeError::Raft("the node is shutting down".into()))?
    }
}

async fn run(proposer: Arc<Proposer>, mut rx: mpsc::Receiver<(Submission, Reply)>) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let proposer = Arc::clone(&proposer);
        tokio::spawn(async move {
            let (submissions, replies): (Vec<Submission>, Vec<Reply>) = batch.into_iter().unzip();
            let result = proposer
                .propose(Command::SubmitWorkloads {
                    submissions,
                    // The leader stamps its limit (Proposer::write_local).
                    max_pending_per_local_queue: None,
                })
                .await;
            drop(permit);
            match result {
                Ok(written) => {
                    let results = match written.response.outcome {
                        Outcome::Submitted { results } => results,
                        _ => Vec::new(),
                    };
                    let mut results = results.into_iter();
                    for reply in replies {
                        let r = results.next().ok_or_else(|| {
                            ProposeError::Raft(
                                "the ledger answered fewer results than asked".into(),
                            )
                        });
                        let _ = reply.send(r);
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        });
    }
}
