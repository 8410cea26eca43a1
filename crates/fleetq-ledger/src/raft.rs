//! openraft's type configuration for the ledger, and the runtime it runs
//! on.
//!
//! [`FleetqRuntime`] is tokio, except that the one source of randomness
//! openraft uses (the election timeout) can be seeded per thread with
//! [`seed_election_rng`], so the deterministic simulator gets the same
//! elections from the same seed. Production never seeds it and draws from
//! the OS.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::async_runtime::AsyncRuntime;
use openraft::{OptionalSend, TokioInstant, TokioRuntime};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::command::{Request, Response};

pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The ledger's Raft types: log entries carry stamped [`Request`]s,
    /// shared: openraft clones an entry for every follower it replicates
    /// to and again to apply it, and a submission entry of thousands of
    /// workloads cost a deep copy each time (6-9% of the CPU at 8
    /// clients x 50). An `Arc` serialises as the request itself, so the
    /// log's and the wire's JSON are unchanged.
    pub TypeConfig:
        D = std::sync::Arc<Request>,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = FleetqRuntime,
);

pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::BasicNode>;
pub type StoredMembership = openraft::StoredMembership<NodeId, openraft::BasicNode>;
pub type StorageError = openraft::StorageError<NodeId>;

thread_local! {
    static ELECTION_RNG: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// Makes this thread's election timeouts a deterministic function of
/// `seed` (simulation only).
pub fn seed_election_rng(seed: u64) {
    ELECTION_RNG.with(|r| *r.borrow_mut() = Some(StdRng::seed_from_u64(seed)));
}

/// tokio, with a seedable election-timeout RNG.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FleetqRuntime;

impl AsyncRuntime for FleetqRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = StdRng;
    type OneshotSender<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiver<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotReceiver<T>;
    type OneshotReceiverError = <TokioRuntime as AsyncRuntime>::OneshotReceiverError;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ELECTION_RNG.with(|r| match r.borrow_mut().as_mut() {
            Some(seeded) => StdRng::seed_from_u64(seeded.gen()),
            None => StdRng::from_entropy(),
        })
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        TokioRuntime::oneshot()
    }
}
