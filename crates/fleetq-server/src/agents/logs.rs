//! `fleetq logs` (and a workload's Job status, [`Question::JobStatus`])
//! through the leader: the agents' sessions live on the leader, so it asks
//! the agent of the workload's cluster in its session and waits for the
//! answer, matched by a request id. A request whose
//! agent is not connected, or does not answer in time, fails with a
//! reason; nothing waits for ever and nothing is kept for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetq_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// What a session sends its agent.
pub type Outbound = mpsc::Sender<Result<pb::ControlMessage, Status>>;

/// How long the leader waits for an agent's answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// What the leader asks an agent about one of its admissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Question {
    /// The end of its log, at most this many bytes.
    Log { tail_bytes: u64 },
    /// The status of the Kubernetes Job that runs it, as JSON.
    JobStatus,
}

/// The sessions that can be asked, and the questions in flight.
#[derive(Clone, Default)]
pub struct LogRelay {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<String, Outbound>,
    /// By request id: the cluster asked, and who waits for its answer.
    waiting: HashMap<u64, (String, oneshot::Sender<pb::LogsReply>)>,
    next_id: u64,
}

impl LogRelay {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere mid-update of plain
        // maps; what they hold is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `cluster`'s session can be asked through `tx` (the latest session
    /// of a cluster replaces an earlier one).
    pub fn attach(&self, cluster: &str, tx: Outbound) {
        self.lock().sessions.insert(cluster.to_string(), tx);
    }

    /// The session of `cluster` that sends through `tx` ended.
    pub fn detach(&self, cluster: &str, tx: &Outbound) {
        let mut inner = self.lock();
        if inner
            .sessions
            .get(cluster)
            .is_some_and(|t| t.same_channel(tx))
        {
            inner.sessions.remove(cluster);
        }
    }

    /// The answer of `cluster`'s agent. One nobody waits for any more is
    /// dropped, and so is one to a question put to another cluster: an
    /// agent cannot answer for another cluster's workloads.
    pub fn answer(&self, cluster: &str, reply: pb::LogsReply) {
        let mut inner = self.lock();
        if inner
            .waiting
            .get(&reply.request_id)
            .is_some_and(|(asked, _)| asked == cluster)
        {
            if let Some((_, waiter)) = inner.waiting.remove(&reply.request_id) {
                let _ = waiter.send(reply);
            }
        }
    }

    /// Asks the agent of `cluster` about `workload`'s admission `epoch`.
    pub async fn ask(
        &self,
        cluster: &str,
        workload: u64,
        epoch: u64,
        question: Question,
    ) -> Result<pb::LogsReply, Status> {
        let (id, tx, rx) = {
            let mut inner = self.lock();
            let tx = inner.sessions.get(cluster).cloned().ok_or_else(|| {
                Status::unavailable(format!(
                    "the agent of cluster {cluster:?} is not connected to the leader; it cannot be asked now"
                ))
            })?;
            inner.next_id += 1;
            let id = inner.next_id;
            let (answer, rx) = oneshot::channel();
            inner.waiting.insert(id, (cluster.to_string(), answer));
            (id, tx, rx)
        };
        let request = pb::ControlMessage {
            body: Some(pb::control_message::Body::Logs(pb::LogsRequest {
                request_id: id,
                workload_id: workload,
                epoch,
                tail_bytes: match question {
                    Question::Log { tail_bytes } => tail_bytes,
                    Question::JobStatus => 0,
                },
                job_status: question == Question::JobStatus,
            })),
        };
        let ended = || {
            Status::unavailable(format!(
                "the session of cluster {cluster:?} ended before its agent answered"
            ))
        };
        if tx.send(Ok(request)).await.is_err() {
            self.lock().waiting.remove(&id);
            return Err(ended());
        }
        let reply = tokio::time::timeout(ANSWER_WITHIN, rx).await;
        self.lock().waiting.remove(&id);
        match reply {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(ended()),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "the agent of cluster {cluster:?} did not answer within {ANSWER_WITHIN:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG10: Question = Question::Log { tail_bytes: 10 };

    fn reply(request_id: u64, text: &str) -> pb::LogsReply {
        pb::LogsReply {
            request_id,
            text: text.into(),
            ..pb::LogsReply::default()
        }
    }

    /// The question reaches the cluster's session; only that cluster's
    /// answer is taken; without a session the request fails at once.
    #[tokio::test]
    async fn answers_come_from_the_cluster_asked() {
        let relay = LogRelay::default();
        let err = relay
            .ask("east", 1, 0, LOG10)
            .await
            .expect_err("no session");
        assert_eq!(err.code(), tonic::Code::Unavailable);
        let (tx, mut rx) = mpsc::channel(4);
        relay.attach("east", tx.clone());
        let asking = tokio::spawn({
            let relay = relay.clone();
            async move { relay.ask("east", 7, 0, LOG10).await }
        });
        let Some(Ok(pb::ControlMessage {
            body: Some(pb::control_message::Body::Logs(req)),
        })) = rx.recv().await
        else {
            panic!("no logs request sent");
        };
        assert_eq!(
            (req.workload_id, req.tail_bytes, req.job_status),
            (7, 10, false)
        );
        relay.answer("west", reply(req.request_id, "forged"));
        relay.answer("east", reply(req.request_id, "real"));
        let got = asking.await.expect("joins").expect("an answer");
        assert_eq!(got.text, "real");
        relay.detach("east", &tx);
        assert!(relay.ask("east", 7, 0, LOG10).await.is_err());
    }
}
