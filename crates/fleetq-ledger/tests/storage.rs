//! The openraft storage (docs/architecture.md §8): sled on disk and the in-memory
//! store with its fsync model, driven through openraft itself (a real
//! single-node `Raft`, restarted from the same storage) and through
//! openraft's storage traits directly.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fleetq_ledger::raft::{Entry, LogId, Raft, TypeConfig, Vote};
use fleetq_ledger::store::{
    open_sled, LedgerHandle, MemDisk, MemLogStore, MemSnapshotStore, SledLogStore,
    SledSnapshotStore, SnapshotStore, StateMachineStore,
};
use fleetq_ledger::{
    AdmitBatch, Command, CycleId, Outcome, Phase, Request, Response, StatusReport, Submission,
    WorkloadState,
};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp};
use fleetq_scheduler::{schedule, SchedulerConfig, WorkloadId};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, Membership, RaftLogReader, RaftSnapshotBuilder,
    SnapshotPolicy,
};
use tempfile::TempDir;

fn config() -> String {
    fleetq_testkit::kueue::one_queue("h100-80gb", "team-a", "team-a", 8)
}

const NODE: u64 = 1;
const WAIT: Option<Duration> = Some(Duration::from_secs(10));

// ----- commands -------------------------------------------------------------

fn objects() -> Vec<Object> {
    import_manifests(&config())
        .expect("test manifests import")
        .into_iter()
        .map(|d| d.object)
        .collect()
}

fn cluster() -> Cluster {
    Cluster {
        nodes: Vec::new(),
        name: "east".into(),
        labels: BTreeMap::new(),
        capacity: BTreeMap::from([(
            "h100-80gb".to_string(),
            BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity::units(16))]),
        )]),
        state: ClusterState::Ready,
    }
}

fn submission(name: &str, gpus: u64) -> Submission {
    Submission {
        request_id: Some(format!("req-{name}")),
        workload: std::sync::Arc::new(fleetq_model::Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: "team-a".into(),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests: BTreeMap::from([(
                        "nvidia.com/gpu".to_string(),
                        Quantity::units(gpus),
                    )]),
                    topology_request: None,
                }],
                ..WorkloadSpec::default()
            },
        }),
    }
}

fn request(at_secs: u64, command: Command) -> Request {
    Request {
        at: Timestamp::from_secs(at_secs),
        command,
    }
}

/// The configuration, a cluster and three submissions.
fn setup_commands() -> Vec<Request> {
    vec![
        request(10, Command::ApplyObjects { objects: objects() }),
        request(
            11,
            Command::RegisterCluster {
                cluster: cluster(),
                lease_policy: Default::default(),
            },
        ),
        request(
            12,
            Command::SubmitWorkloads {
                submissions: vec![submission("a", 4), submission("b", 4), submission("c", 4)],
                max_pending_per_local_queue: None,
                admit: Vec::new(),
            },
        ),
    ]
}

/// The batch the leader of `term`'s admission cycle would propose now (the
/// ledger accepts it only in a log entry of that term).
fn admission_cycle(handle: &LedgerHandle, term: u64, at_secs: u64, seq: u64) -> Request {
    let batch = {
        let sm = handle.read();
        let decisions = schedule(
            sm.ledger.snapshot(),
            Timestamp::from_secs(at_secs),
            sm.ledger.scheduler_config(),
        );
        AdmitBatch {
            cycle: CycleId { term, seq },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        }
    };
    request(at_secs, Command::AdmitBatch(batch))
}

fn running(handle: &LedgerHandle, id: WorkloadId, phase: Phase, at_secs: u64) -> Request {
    let report = {
        let sm = handle.read();
        let r = sm
            .ledger
            .workload(id)
            .and_then(|w| w.reservation.clone())
            .unwrap_or_else(|| panic!("workload {id} holds no reservation"));
        StatusReport {
            cluster: r.assignment.cluster,
            workload: id,
            epoch: r.epoch,
            phase,
            message: String::new(),
        }
    };
    request(
        at_secs,
        Command::ReportStatus {
            reports: vec![report],
        },
    )
}

// ----- a single-node Raft ---------------------------------------------------

/// A network that is never used: a single voter never sends anything.
struct NoNetwork;

fn unreachable_node() -> NetworkError {
    NetworkError::new(&std::io::Error::other("single-node test: no peers"))
}

impl RaftNetworkFactory<TypeConfig> for NoNetwork {
    type Network = NoNetwork;

    async fn new_client(&mut self, _target: u64, _node: &BasicNode) -> NoNetwork {
        NoNetwork
    }
}

impl RaftNetwork<TypeConfig> for NoNetwork {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(RPCError::Network(unreachable_node()))
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(RPCError::Network(unreachable_node()))
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        Err(RPCError::Network(unreachable_node()))
    }
}

fn raft_config() -> Arc<openraft::Config> {
    let config = openraft::Config {
        cluster_name: "fleetq-storage-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        // Snapshots only when a test asks; then every log entry it covers
        // is purged, so a restart must come back from the snapshot.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        ..Default::default()
    };
    Arc::new(config.validate().expect("valid raft config"))
}

struct Node {
    raft: Raft,
    handle: LedgerHandle,
}

impl Node {
    /// Starts node 1 over the given storage; a fresh storage is initialised
    /// as a one-voter cluster. Returns once it leads.
    async fn start<LS, S>(log: LS, sm: StateMachineStore<S>, fresh: bool) -> Node
    where
        LS: RaftLogStorage<TypeConfig>,
        S: SnapshotStore,
    {
        let handle = sm.handle();
        let raft = Raft::new(NODE, raft_config(), NoNetwork, log, sm)
            .await
            .expect("raft starts");
        if fresh {
            raft.initialize(BTreeMap::from([(NODE, BasicNode::default())]))
                .await
                .expect("initialise a one-voter cluster");
        }
        raft.wait(WAIT)
            .current_leader(NODE, "node 1 leads")
            .await
            .expect("node 1 becomes leader");
        Node { raft, handle }
    }

    async fn write(&self, request: Request) -> (u64, Response) {
        let command = request.command.name();
        let written = self
            .raft
            .client_write(std::sync::Arc::new(request))
            .await
            .unwrap_or_else(|e| panic!("{command} is committed: {e}"));
        (written.log_id.index, written.data)
    }

    fn hash(&self) -> String {
        self.handle.read().ledger.state_hash()
    }

    fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    fn last_applied(&self) -> u64 {
        self.handle
            .read()
            .last_applied
            .map(|l| l.index)
            .unwrap_or(0)
    }

    async fn wait_applied(&self, index: u64) {
        tokio::time::timeout(Duration::from_secs(10), self.handle.wait_applied(index))
            .await
            .unwrap_or_else(|_| panic!("index {index} applied after a restart"));
    }

    async fn stop(self) {
        self.raft.shutdown().await.expect("raft shuts down");
        drop(self.raft);
        // Let the state-machine worker notice and drop its storage.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Writes the setup and, with `admissions`, an admission cycle and status
/// reports; returns the last log index written.
async fn write_script(node: &Node, admissions: bool) -> u64 {
    let mut last = 0;
    for r in setup_commands() {
        let (index, response) = node.write(r).await;
        assert!(response.is_ok(), "{response:?}");
        last = index;
    }
    if admissions {
        let (_, response) = node
            .write(admission_cycle(&node.handle, node.term(), 20, 1))
            .await;
        let Outcome::Admitted(outcome) = response.outcome else {
            panic!("{response:?}");
        };
        assert_eq!(outcome.admitted, 2, "{outcome:?}");
        let (_, response) = node
            .write(running(&node.handle, 1, Phase::Running, 21))
            .await;
        assert_eq!(
            response.outcome,
            Outcome::Reported {
                applied: 1,
                stale: 0
            }
        );
        let (index, _) = node
            .write(running(&node.handle, 2, Phase::Succeeded, 22))
            .await;
        last = index;
    }
    last
}

/// What a restarted node must have: the same state, and it keeps working.
async fn check_restarted(node: &Node, last: u64, hash: &str, admissions: bool) {
    node.wait_applied(last).await;
    assert_eq!(node.hash(), hash, "the state after a restart");
    let sm = node.handle.read();
    assert_eq!(sm.ledger.state().workloads.len(), 3);
    assert!(sm.ledger.violations().is_empty());
    if admissions {
        assert_eq!(
            sm.ledger.workload(1).map(|w| w.state),
            Some(WorkloadState::Running)
        );
        assert_eq!(
            sm.ledger.workload(2).map(|w| w.state),
            Some(WorkloadState::Succeeded)
        );
    }
}

/// After the restart the ledger still admits: c fits where b was.
async fn check_keeps_working(node: &Node) {
    let (_, response) = node
        .write(admission_cycle(&node.handle, node.term(), 100, 50))
        .await;
    let Outcome::Admitted(outcome) = response.outcome else {
        panic!("{response:?}");
    };
    assert_eq!(outcome.admitted, 1, "{outcome:?}");
    assert_eq!(
        node.handle.read().ledger.workload(3).map(|w| w.state),
        Some(WorkloadState::Admitted)
    );
}

/// sled keeps a lock on its directory until every handle is gone; the
/// stopped node's tasks and sled's own flusher thread may still hold one
/// for a moment after the last handle is dropped.
async fn reopen_sled(dir: &Path) -> (SledLogStore, StateMachineStore<SledSnapshotStore>) {
    let mut last_error = String::new();
    for _ in 0..100 {
        match open_sled(dir, SchedulerConfig::default()) {
            Ok(stores) => return stores,
            Err(e) => last_error = e,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot reopen {}: {last_error}", dir.display());
}

async fn sled_restart(admissions: bool) {
    let dir = TempDir::new().expect("temp dir");
    let (log, sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open sled");
    let node = Node::start(log, sm, true).await;
    let last = write_script(&node, admissions).await;
    let hash = node.hash();
    assert_eq!(node.last_applied(), last);
    node.stop().await;

    let (log, sm) = reopen_sled(dir.path()).await;
    let node = Node::start(log, sm, false).await;
    check_restarted(&node, last, &hash, admissions).await;
    if admissions {
        check_keeps_working(&node).await;
    }
    node.stop().await;
}

#[tokio::test]
async fn raft_over_sled_restarts_with_the_same_state() {
    sled_restart(true).await;
}

#[tokio::test]
async fn raft_over_sled_restarts_with_the_same_configuration_and_queue() {
    sled_restart(false).await;
}

/// A log entry over a quarter of sled's 512 KiB segment is stored as a
/// file of its own under `blobs/`, which sled writes without a sync; the
/// log store syncs it before acknowledging. Here: one submission batch of
/// 2,000 workloads (about 700 KiB), committed, then read back after a
/// restart.
#[tokio::test]
async fn raft_over_sled_keeps_an_entry_too_big_for_sleds_log_file() {
    let dir = TempDir::new().expect("temp dir");
    let (log, sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open sled");
    let node = Node::start(log, sm, true).await;
    let mut last = 0;
    for r in setup_commands() {
        last = node.write(r).await.0;
    }
    let submissions: Vec<Submission> = (0..2000)
        .map(|i| submission(&format!("big-batch-{i:05}"), 1))
        .collect();
    let (index, response) = node
        .write(request(
            30,
            Command::SubmitWorkloads {
                submissions,
                max_pending_per_local_queue: None,
                admit: Vec::new(),
            },
        ))
        .await;
    assert!(response.is_ok(), "{response:?}");
    assert!(index > last);
    let blobs = std::fs::read_dir(dir.path().join("blobs"))
        .expect("sled's blobs directory")
        .count();
    assert!(blobs > 0, "the batch was expected to be a sled blob");
    let hash = node.hash();
    node.stop().await;

    let (log, sm) = reopen_sled(dir.path()).await;
    let node = Node::start(log, sm, false).await;
    node.wait_applied(index).await;
    assert_eq!(node.hash(), hash);
    let found = node
        .handle
        .read()
        .ledger
        .workload_by_name("default", "big-batch-01999")
        .is_some();
    assert!(found, "the last workload of the big batch is back");
    node.stop().await;
}

#[tokio::test]
async fn raft_over_mem_restarts_after_a_crash_with_every_acknowledged_write() {
    let disk = MemDisk::new(Duration::from_millis(1));
    let open = |disk: &MemDisk| {
        let sm = StateMachineStore::open(
            MemSnapshotStore::new(disk.clone()),
            SchedulerConfig::default(),
        )
        .expect("open state machine");
        (MemLogStore::new(disk.clone()), sm)
    };
    let (log, sm) = open(&disk);
    let node = Node::start(log, sm, true).await;
    let last = write_script(&node, true).await;
    let hash = node.hash();
    node.stop().await;
    // A power cut: what was acknowledged was synced and survives.
    disk.crash();
    assert!(disk.durable_last_index() >= Some(last));

    let (log, sm) = open(&disk);
    let node = Node::start(log, sm, false).await;
    check_restarted(&node, last, &hash, true).await;
    check_keeps_working(&node).await;
    node.stop().await;
}

/// A view is a copy: what is applied after it is taken does not reach it,
/// and it hashes as the ledger did when it was taken. Every hold of the
/// lock is timed, the longest reported once.
#[tokio::test]
async fn a_view_is_a_copy_and_the_lock_holds_are_timed() {
    let disk = MemDisk::new(Duration::ZERO);
    let sm = StateMachineStore::open(
        MemSnapshotStore::new(disk.clone()),
        SchedulerConfig::default(),
    )
    .expect("open state machine");
    let node = Node::start(MemLogStore::new(disk), sm, true).await;
    write_script(&node, true).await;
    let (view, index) = node.handle.view();
    assert_eq!(index, node.last_applied());
    let hash = node.hash();
    let workloads = view.state().workloads.len();
    let (after, _) = node
        .write(request(
            500,
            Command::SubmitWorkloads {
                submissions: vec![submission("after-the-view", 1)],
                max_pending_per_local_queue: None,
                admit: Vec::new(),
            },
        ))
        .await;
    assert!(after > index);
    assert_ne!(node.hash(), hash, "the ledger moved on");
    assert_eq!(view.state_hash(), hash, "the view did not");
    assert_eq!(view.state().workloads.len(), workloads);
    assert!(view.workload_by_name("default", "after-the-view").is_none());

    node.handle.take_longest_holds();
    {
        let _held = node.handle.read();
        std::thread::sleep(Duration::from_millis(30));
    }
    let holds = node.handle.take_longest_holds();
    assert!(holds.read >= Duration::from_millis(30), "{holds:?}");
    assert!(node.handle.take_longest_holds().read < Duration::from_millis(30));
    node.stop().await;
}

/// Builds a snapshot through Raft, lets Raft purge the log it covers,
/// writes one more command, and restarts: the state comes back from the
/// snapshot plus the log after it.
async fn restart_from_snapshot<LS, S>(
    first: (LS, StateMachineStore<S>),
    reopen: impl std::future::Future<Output = (LS, StateMachineStore<S>)>,
    before_reopen: impl FnOnce(),
) where
    LS: RaftLogStorage<TypeConfig>,
    S: SnapshotStore,
{
    let node = Node::start(first.0, first.1, true).await;
    let last = write_script(&node, true).await;
    node.raft.trigger().snapshot().await.expect("trigger");
    node.raft
        .wait(WAIT)
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= last),
            "snapshot covers the script",
        )
        .await
        .expect("snapshot built");
    node.raft
        .wait(WAIT)
        .metrics(
            |m| m.purged.is_some_and(|p| p.index >= last),
            "log purged up to the snapshot",
        )
        .await
        .expect("log purged");
    // One more command after the snapshot, only in the log.
    let (last, _) = node
        .write(running(&node.handle, 1, Phase::Succeeded, 30))
        .await;
    let hash = node.hash();
    node.stop().await;
    before_reopen();

    let (log, sm) = reopen.await;
    let node = Node::start(log, sm, false).await;
    node.wait_applied(last).await;
    assert_eq!(node.hash(), hash);
    assert_eq!(
        node.handle.read().ledger.workload(1).map(|w| w.state),
        Some(WorkloadState::Succeeded)
    );
    node.stop().await;
}

#[tokio::test]
async fn raft_over_sled_restarts_from_a_snapshot_and_the_log_after_it() {
    let dir = TempDir::new().expect("temp dir");
    let first = open_sled(dir.path(), SchedulerConfig::default()).expect("open sled");
    restart_from_snapshot(first, reopen_sled(dir.path()), || {}).await;
}

#[tokio::test]
async fn raft_over_mem_restarts_from_a_snapshot_after_a_crash() {
    let disk = MemDisk::new(Duration::ZERO);
    let open = |disk: &MemDisk| {
        let sm = StateMachineStore::open(
            MemSnapshotStore::new(disk.clone()),
            SchedulerConfig::default(),
        )
        .expect("open state machine");
        (MemLogStore::new(disk.clone()), sm)
    };
    let first = open(&disk);
    let crash = disk.clone();
    let again = disk.clone();
    restart_from_snapshot(first, async move { open(&again) }, move || crash.crash()).await;
}

// ----- the storage traits directly ------------------------------------------

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, NODE), index)
}

fn normal(term: u64, index: u64, request: Request) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(std::sync::Arc::new(request)),
    }
}

fn membership(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([NODE])], ())),
    }
}

fn blank(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Blank,
    }
}

/// A membership entry, then the setup commands.
fn setup_entries() -> Vec<Entry> {
    let mut entries = vec![membership(1, 1)];
    for (i, r) in setup_commands().into_iter().enumerate() {
        entries.push(normal(1, 2 + i as u64, r));
    }
    entries
}

fn same_entries(a: &[Entry], b: &[Entry]) {
    let json = |e: &[Entry]| serde_json::to_string(e).expect("entries serialise");
    assert_eq!(json(a), json(b));
}

#[tokio::test]
async fn sled_keeps_log_vote_and_committed_across_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let entries = setup_entries();
    let vote = Vote::new_committed(3, NODE);
    {
        let (mut log, _sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open");
        assert_eq!(log.read_vote().await.expect("vote"), None);
        let state = log.get_log_state().await.expect("log state");
        assert_eq!(state.last_log_id, None);
        log.blocking_append(entries.clone()).await.expect("append");
        log.save_committed(Some(log_id(1, 3)))
            .await
            .expect("committed");
        // Saving the vote flushes: the committed index is on disk too.
        log.save_vote(&vote).await.expect("vote");
    }
    let (mut log, mut sm) = reopen_sled(dir.path()).await;
    assert_eq!(log.read_vote().await.expect("vote"), Some(vote));
    assert_eq!(
        log.read_committed().await.expect("committed"),
        Some(log_id(1, 3))
    );
    let state = log.get_log_state().await.expect("log state");
    assert_eq!(state.last_log_id, Some(log_id(1, 4)));
    assert_eq!(state.last_purged_log_id, None);
    let read = log.try_get_log_entries(1..=4).await.expect("read");
    same_entries(&read, &entries);
    let read = log.try_get_log_entries(2..4).await.expect("read");
    same_entries(&read, &entries[1..3]);
    let mut reader = log.get_log_reader().await;
    let read = reader.try_get_log_entries(3..).await.expect("read");
    same_entries(&read, &entries[2..]);
    // Nothing was applied or snapshotted: the state machine starts empty.
    let (applied, _) = sm.applied_state().await.expect("applied");
    assert_eq!(applied, None);
}

#[tokio::test]
async fn sled_truncate_and_purge_survive_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    {
        let (mut log, _sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open");
        let entries: Vec<Entry> = (1..=10).map(|i| blank(1, i)).collect();
        log.blocking_append(entries).await.expect("append");
        log.truncate(log_id(1, 8)).await.expect("truncate");
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(1, 7)));
        log.purge(log_id(1, 3)).await.expect("purge");
        // Entries that replace the truncated ones, in a new term.
        log.blocking_append([blank(2, 8)]).await.expect("append");
    }
    let (mut log, _sm) = reopen_sled(dir.path()).await;
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 3)));
    assert_eq!(state.last_log_id, Some(log_id(2, 8)));
    let read = log.try_get_log_entries(0..100).await.expect("read");
    let indexes: Vec<u64> = read.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, [4, 5, 6, 7, 8]);
    assert_eq!(read[4].log_id, log_id(2, 8));

    // Purging everything leaves the purge point as the last log id.
    log.purge(log_id(2, 8)).await.expect("purge all");
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(2, 8)));
    assert_eq!(state.last_log_id, Some(log_id(2, 8)));
}

/// Applies the setup and an admission cycle to a state machine through
/// openraft's trait; returns the hash of the resulting ledger.
async fn apply_script<S: SnapshotStore>(sm: &mut StateMachineStore<S>) -> String {
    let responses = sm.apply(setup_entries()).await.expect("apply");
    assert_eq!(responses.len(), 4);
    assert!(responses.iter().all(Response::is_ok), "{responses:?}");
    let handle = sm.handle();
    let cycle = admission_cycle(&handle, 1, 20, 1);
    let responses = sm.apply([normal(1, 5, cycle)]).await.expect("apply");
    let Outcome::Admitted(outcome) = &responses[0].outcome else {
        panic!("{responses:?}");
    };
    assert_eq!(outcome.admitted, 2);
    let (applied, membership) = sm.applied_state().await.expect("applied");
    assert_eq!(applied, Some(log_id(1, 5)));
    assert_eq!(membership.log_id(), &Some(log_id(1, 1)));
    let hash = handle.read().ledger.state_hash();
    hash
}

#[tokio::test]
async fn sled_state_machine_comes_back_from_its_snapshot() {
    let dir = TempDir::new().expect("temp dir");
    let (hash, meta) = {
        let (_log, mut sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open");
        assert!(sm.get_current_snapshot().await.expect("current").is_none());
        let hash = apply_script(&mut sm).await;
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("snapshot builds");
        assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 5)));
        let current = sm
            .get_current_snapshot()
            .await
            .expect("current")
            .expect("a snapshot is stored");
        assert_eq!(current.meta, snapshot.meta);
        assert_eq!(
            current.snapshot.into_inner(),
            snapshot.snapshot.into_inner()
        );
        (hash, snapshot.meta)
    };
    let (_log, mut sm) = reopen_sled(dir.path()).await;
    let (applied, membership) = sm.applied_state().await.expect("applied");
    assert_eq!(applied, meta.last_log_id);
    assert_eq!(membership, meta.last_membership);
    assert_eq!(sm.handle().read().ledger.state_hash(), hash);
    let current = sm
        .get_current_snapshot()
        .await
        .expect("current")
        .expect("stored snapshot");
    assert_eq!(current.meta, meta);
}

#[tokio::test]
async fn a_snapshot_installed_on_another_node_gives_the_same_state() {
    let disk = MemDisk::new(Duration::ZERO);
    let mut leader =
        StateMachineStore::open(MemSnapshotStore::new(disk), SchedulerConfig::default())
            .expect("open");
    let hash = apply_script(&mut leader).await;
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("snapshot");

    let dir = TempDir::new().expect("temp dir");
    let (_log, mut follower) =
        open_sled(dir.path(), SchedulerConfig::default()).expect("open sled");
    let mut receiving = follower.begin_receiving_snapshot().await.expect("begin");
    *receiving = Cursor::new(snapshot.snapshot.into_inner());
    follower
        .install_snapshot(&snapshot.meta, receiving)
        .await
        .expect("install");
    let handle = follower.handle();
    assert_eq!(handle.read().ledger.state_hash(), hash);
    assert_eq!(
        follower.applied_state().await.expect("applied").0,
        snapshot.meta.last_log_id
    );
    // The watch the server waits on has moved to the snapshot's index.
    assert_eq!(*handle.applied().borrow(), 5);

    // A corrupt snapshot is refused and leaves the state alone.
    let mut receiving = follower.begin_receiving_snapshot().await.expect("begin");
    *receiving = Cursor::new(b"{not a ledger".to_vec());
    let mut meta = snapshot.meta.clone();
    meta.last_log_id = Some(log_id(1, 9));
    assert!(follower.install_snapshot(&meta, receiving).await.is_err());
    assert_eq!(handle.read().ledger.state_hash(), hash);
    assert_eq!(
        follower.applied_state().await.expect("applied").0,
        snapshot.meta.last_log_id
    );
}

// ----- the fsync model ------------------------------------------------------

#[tokio::test]
async fn mem_disk_loses_unsynced_writes_and_keeps_synced_ones() {
    let disk = MemDisk::new(Duration::ZERO);
    let mut log = MemLogStore::new(disk.clone());
    // Appends and votes are synced before they are acknowledged.
    log.blocking_append((1..=5).map(|i| blank(1, i)))
        .await
        .expect("append");
    log.save_vote(&Vote::new(1, NODE)).await.expect("vote");
    assert_eq!(disk.unsynced_writes(), 0);
    assert_eq!(disk.durable_last_index(), Some(5));
    // The committed index and a purge are written but not synced.
    log.save_committed(Some(log_id(1, 4)))
        .await
        .expect("committed");
    log.purge(log_id(1, 2)).await.expect("purge");
    assert_eq!(disk.unsynced_writes(), 2);
    // They are visible before the crash...
    assert_eq!(
        log.read_committed().await.expect("committed"),
        Some(log_id(1, 4))
    );
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));

    disk.crash();
    // ...and gone after it; the synced log and vote are intact.
    let mut log = MemLogStore::new(disk.clone());
    assert_eq!(log.read_committed().await.expect("committed"), None);
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_purged_log_id, None);
    assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    assert_eq!(log.try_get_log_entries(..).await.expect("read").len(), 5);
    assert_eq!(
        log.read_vote().await.expect("vote"),
        Some(Vote::new(1, NODE))
    );
    assert_eq!(disk.unsynced_writes(), 0);

    // An explicit sync makes the next unsynced writes durable.
    log.save_committed(Some(log_id(1, 5)))
        .await
        .expect("committed");
    disk.sync();
    disk.crash();
    let mut log = MemLogStore::new(disk.clone());
    assert_eq!(
        log.read_committed().await.expect("committed"),
        Some(log_id(1, 5))
    );
}

#[tokio::test]
async fn mem_disk_truncation_is_synced() {
    let disk = MemDisk::new(Duration::ZERO);
    let mut log = MemLogStore::new(disk.clone());
    log.blocking_append((1..=5).map(|i| blank(1, i)))
        .await
        .expect("append");
    log.truncate(log_id(1, 3)).await.expect("truncate");
    disk.crash();
    let mut log = MemLogStore::new(disk.clone());
    let state = log.get_log_state().await.expect("state");
    assert_eq!(state.last_log_id, Some(log_id(1, 2)));
}

#[tokio::test]
async fn an_append_cut_off_by_a_crash_is_not_acknowledged() {
    let disk = MemDisk::new(Duration::from_secs(1));
    let mut log = MemLogStore::new(disk.clone());
    let append = tokio::spawn(async move { log.blocking_append([blank(1, 1), blank(1, 2)]).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The power goes while the entries wait for their fsync.
    assert_eq!(disk.unsynced_writes(), 1);
    disk.crash();
    let acknowledged = append.await.expect("append task").is_ok();
    assert_eq!(disk.durable_last_index(), None, "the entries are lost");
    assert!(
        !acknowledged,
        "an append whose entries a crash discarded must not be acknowledged"
    );
}

#[tokio::test]
async fn a_vote_cut_off_by_a_crash_is_not_acknowledged() {
    let disk = MemDisk::new(Duration::from_secs(1));
    let mut log = MemLogStore::new(disk.clone());
    let vote = tokio::spawn(async move { log.save_vote(&Vote::new(7, NODE)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    disk.crash();
    let acknowledged = vote.await.expect("vote task").is_ok();
    let mut log = MemLogStore::new(disk.clone());
    assert_eq!(log.read_vote().await.expect("vote"), None);
    assert!(
        !acknowledged,
        "a vote a crash discarded must not be acknowledged"
    );
}

// ----- openraft's own storage suite -----------------------------------------

struct SledBuilder;

impl StoreBuilder<TypeConfig, SledLogStore, StateMachineStore<SledSnapshotStore>, TempDir>
    for SledBuilder
{
    async fn build(
        &self,
    ) -> Result<
        (TempDir, SledLogStore, StateMachineStore<SledSnapshotStore>),
        openraft::StorageError<u64>,
    > {
        let dir = TempDir::new().expect("temp dir");
        let (log, sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open sled");
        Ok((dir, log, sm))
    }
}

struct MemBuilder;

impl StoreBuilder<TypeConfig, MemLogStore, StateMachineStore<MemSnapshotStore>> for MemBuilder {
    async fn build(
        &self,
    ) -> Result<((), MemLogStore, StateMachineStore<MemSnapshotStore>), openraft::StorageError<u64>>
    {
        let disk = MemDisk::new(Duration::ZERO);
        let sm = StateMachineStore::open(
            MemSnapshotStore::new(disk.clone()),
            SchedulerConfig::default(),
        )
        .expect("open state machine");
        Ok(((), MemLogStore::new(disk), sm))
    }
}

#[test]
fn sled_storage_passes_the_openraft_suite() {
    Suite::test_all(SledBuilder).expect("openraft storage suite");
}

#[test]
fn mem_storage_passes_the_openraft_suite() {
    Suite::test_all(MemBuilder).expect("openraft storage suite");
}

/// Log formats (docs/operating.md, "Upgrades"): an entry written before
/// formats existed (no `format` key) is read as it was; one written by a
/// newer build is refused with a message naming the entry and what to
/// do, not misread and not a panic.
#[tokio::test]
async fn sled_reads_older_entries_and_refuses_newer_ones_by_name() {
    let dir = TempDir::new().expect("temp dir");
    let entries = setup_entries();
    {
        let (mut log, _sm) = open_sled(dir.path(), SchedulerConfig::default()).expect("open");
        log.blocking_append(entries.clone()).await.expect("append");
        log.save_vote(&Vote::new_committed(3, NODE))
            .await
            .expect("vote");
    }
    {
        let db = fleetq_ledger::store::open_db(dir.path()).expect("db");
        let tree = db.open_tree("raft_log").expect("tree");
        let key = 2u64.to_be_bytes();
        let tagged = tree.get(key).expect("get").expect("entry 2");
        assert!(
            tagged.starts_with(br#"{"format":1,"#),
            "written with its format"
        );
        // Entry 2 as a build before formats wrote it: the same JSON
        // without the key.
        let untagged = [b"{".as_slice(), &tagged[br#"{"format":1,"#.len()..]].concat();
        tree.insert(key, untagged).expect("insert");
        // Entry 4 as a newer build might write it.
        let newer = br#"{"format":2,"log_id":{"leader_id":{"term":1,"node_id":1},"index":4},"payload":{"Normal":{"NewThing":{}}}}"#;
        tree.insert(4u64.to_be_bytes(), newer.to_vec())
            .expect("insert");
        db.flush().expect("flush");
    }
    let (mut log, _sm) = reopen_sled(dir.path()).await;
    let read = log
        .try_get_log_entries(1..=3)
        .await
        .expect("entries 1-3 read");
    same_entries(&read, &entries[..3]);
    let e = log
        .try_get_log_entries(4..=4)
        .await
        .expect_err("entry 4 is refused");
    let text = format!("{e:?} {e}");
    assert!(
        text.contains("log entry 4 is in format 2, written by a newer fleetq"),
        "{text}"
    );
    let e = log
        .get_log_state()
        .await
        .expect_err("the last entry is refused");
    assert!(format!("{e:?} {e}").contains("run the newer build"), "{e}");
}
