//! Scale of state (issue 6): what N pending workloads cost the ledger in
//! memory, in snapshot size, and in time to snapshot, install and restart.
//!
//! ```sh
//! cargo bench -p fleetq-ledger --bench scale                # 1,000,000 pending
//! cargo bench -p fleetq-ledger --bench scale -- 250000      # another N
//! cargo bench -p fleetq-ledger --bench scale -- --quick     # 100,000 pending
//! FLEETQ_SCALE_PENDING=100000 cargo bench -p fleetq-ledger --bench scale
//! ```
//!
//! The ledger gets 100 ClusterQueues (cohorts of 10, 10 GPUs each), one
//! LocalQueue each, and no cluster, so every submission stays pending. N
//! one-GPU workloads are submitted in `SubmitWorkloads` commands of 10,000,
//! with request ids the way the server stamps a CLI batch
//! (`cli-<32 hex>-<i>`), spread over the LocalQueues. The allocator is
//! mimalloc, as in the `fleetq` binary, so the RSS figure is the server's.
//!
//! Then, at N pending: the snapshot build (`exported()` + `to_bytes()`, what
//! the Raft snapshot builder does), its install (`Ledger::import`, what a
//! follower does), a restart from disk (the snapshot saved through the sled
//! snapshot store, everything dropped, then `open_sled`, which opens sled,
//! loads the snapshot and imports it) and, last, the cost of registering a
//! 1,000-GPU cluster and of one scheduling cycle over the ledger's own
//! snapshot. Each restored state is checked against the original state hash.
//!
//! Progress goes to stderr; the table and a machine-readable last line to
//! stdout.

use std::time::{Duration, Instant};

use fleetq_ledger::raft::{LogId, SnapshotMeta, StoredMembership};
use fleetq_ledger::store::{open_sled, SledSnapshotStore, SnapshotStore, StoredSnapshot};
use fleetq_ledger::{Command, LeasePolicy, Ledger, Outcome, Request, Submission, SubmitResult};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::{Cluster, Timestamp, Workload};
use fleetq_scheduler::{schedule, SchedulerConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DEFAULT_PENDING: usize = 1_000_000;
const QUICK_PENDING: usize = 100_000;
const QUEUES: usize = 100;
const COHORT_SIZE: usize = 10;
const GPUS_PER_QUEUE: u64 = 10;
const BATCH: usize = 10_000;
const FLAVOR: &str = "h100";

/// N from the first non-flag argument, else `--quick`, else
/// `FLEETQ_SCALE_PENDING`, else 1,000,000. (`cargo bench` passes `--bench`
/// to the binary; flags other than `--quick` are ignored.)
fn pending_count() -> usize {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(n) = args.iter().find(|a| !a.starts_with('-')) {
        return parse_count(n).unwrap_or_else(|| panic!("not a count of workloads: {n:?}"));
    }
    if args.iter().any(|a| a == "--quick") {
        return QUICK_PENDING;
    }
    match std::env::var("FLEETQ_SCALE_PENDING") {
        Ok(n) => parse_count(&n)
            .unwrap_or_else(|| panic!("FLEETQ_SCALE_PENDING is not a count of workloads: {n:?}")),
        Err(_) => DEFAULT_PENDING,
    }
}

fn parse_count(text: &str) -> Option<usize> {
    text.replace(['_', ','], "").parse().ok()
}

/// Resident set size from /proc/self/statm (resident pages * page size).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let resident: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages in /proc/self/statm");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    resident * u64::try_from(page).expect("page size")
}

/// Peak RSS so far (VmHWM), bytes.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// 100 ClusterQueues in cohorts of 10 (10 GPUs, 160 CPUs each), a
/// LocalQueue `team-<q>/default` for each.
fn config_yaml() -> String {
    fleetq_testkit::kueue::scale(FLAVOR, QUEUES, COHORT_SIZE, GPUS_PER_QUEUE)
}

fn objects(yaml: &str) -> Vec<Object> {
    import_manifests(yaml)
        .unwrap_or_else(|e| panic!("bench manifests import: {e:?}"))
        .into_iter()
        .map(|d| d.object)
        .collect()
}

fn workload(i: usize) -> Workload {
    fleetq_testkit::scale::workload(i, QUEUES)
}

fn cluster(name: &str, gpus: u64) -> Cluster {
    fleetq_testkit::scale::cluster(name, FLAVOR, gpus)
}

/// Leader clock for the bench: one millisecond per command.
struct Clock(u64);

impl Clock {
    fn request(&mut self, command: Command) -> Request {
        self.0 += 1;
        Request {
            at: Timestamp(self.0),
            command,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

fn main() {
    let pending = pending_count();
    let scheduler = SchedulerConfig::default();
    let mut clock = Clock(1_000_000);
    eprintln!("scale: {pending} pending workloads over {QUEUES} ClusterQueues (mimalloc)");

    let mut ledger = Ledger::new(scheduler.clone());
    // On in debug builds, and O(state) per command.
    ledger.set_invariant_checks(false);
    let r = ledger.apply(&clock.request(Command::ApplyObjects {
        objects: objects(&config_yaml()),
    }));
    assert!(r.is_ok(), "configuration refused: {r:?}");
    let rss_before = rss_bytes();

    // Submit in commands of BATCH, each with a CLI-style request id.
    let start = Instant::now();
    let mut submitted = 0;
    let mut batch_no: u128 = 0;
    while submitted < pending {
        let n = BATCH.min(pending - submitted);
        batch_no += 1;
        let submissions: Vec<Submission> = (submitted..submitted + n)
            .enumerate()
            .map(|(j, i)| Submission {
                request_id: Some(format!("cli-{batch_no:032x}-{j}")),
                workload: workload(i).into(),
            })
            .collect();
        let r = ledger.apply(&clock.request(Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        }));
        match &r.outcome {
            Outcome::Submitted { results, .. } => {
                assert_eq!(results.len(), n);
                assert!(
                    results
                        .iter()
                        .all(|s| matches!(s, SubmitResult::Created { .. })),
                    "a submission was not created: {:?}",
                    results
                        .iter()
                        .find(|s| !matches!(s, SubmitResult::Created { .. }))
                );
            }
            other => panic!("unexpected outcome {other:?}"),
        }
        // The state machine drains the change feed after every apply.
        ledger.take_changed();
        submitted += n;
        if submitted % 100_000 == 0 || submitted == pending {
            eprintln!(
                "  submitted {submitted} ({:.1} s, RSS {:.0} MiB)",
                start.elapsed().as_secs_f64(),
                mib(rss_bytes())
            );
        }
    }
    let submit_time = start.elapsed();
    assert_eq!(ledger.snapshot().pending_count(), pending);
    let rss_after = rss_bytes();
    let per_workload = rss_after.saturating_sub(rss_before) as f64 / pending as f64;
    eprintln!(
        "  RSS {:.0} MiB -> {:.0} MiB: {per_workload:.0} bytes per pending workload",
        mib(rss_before),
        mib(rss_after)
    );

    let (hash, hash_time) = timed(|| ledger.state_hash());
    eprintln!("  state hash in {:.0} ms", ms(hash_time));

    // Snapshot build, as the Raft snapshot builder does it: the copy under
    // the lock, then the serialisation.
    let (exported, export_time) = timed(|| ledger.exported());
    let (bytes, serialise_time) = timed(|| exported.to_bytes().expect("serialise the snapshot"));
    drop(exported);
    let build_time = export_time + serialise_time;
    eprintln!(
        "  snapshot: {:.0} MiB, copy {:.0} ms + serialise {:.0} ms",
        mib(bytes.len() as u64),
        ms(export_time),
        ms(serialise_time)
    );

    // Install, as a follower does.
    let (imported, install_time) =
        timed(|| Ledger::import(&bytes, scheduler.clone()).expect("import the snapshot"));
    assert_eq!(imported.state_hash(), hash, "installed state differs");
    drop(imported);
    eprintln!("  install {:.0} ms (state hash matches)", ms(install_time));

    // Restart from disk: the snapshot through the real sled store, then
    // everything dropped and the node's storage opened again.
    let dir = tempfile::tempdir().expect("temporary directory");
    let (save_time, snapshot_bytes) = {
        let db = sled::Config::new()
            .path(dir.path())
            .mode(sled::Mode::HighThroughput)
            .open()
            .expect("open sled");
        let store = SledSnapshotStore::new(&db).expect("open the snapshot store");
        let snapshot_bytes = bytes.len();
        let stored = StoredSnapshot {
            meta: SnapshotMeta {
                last_log_id: Some(LogId::new(
                    openraft::CommittedLeaderId::new(1, 1),
                    batch_no as u64 + 1,
                )),
                last_membership: StoredMembership::default(),
                snapshot_id: format!("1-1-{}-0", batch_no + 1),
            },
            data: bytes,
        };
        let ((), save_time) = timed(|| store.save(&stored).expect("save the snapshot"));
        (save_time, snapshot_bytes)
    };
    eprintln!(
        "  saved to sled in {:.0} ms; on disk {:.0} MiB",
        ms(save_time),
        mib(dir_size(dir.path()))
    );
    let ((log, sm), restart_time) =
        timed(|| open_sled(dir.path(), scheduler.clone()).expect("restart from disk"));
    {
        let state = sm.handle();
        let sm_state = state.read();
        assert_eq!(sm_state.ledger.state_hash(), hash, "restored state differs");
        assert_eq!(sm_state.ledger.snapshot().pending_count(), pending);
    }
    drop((log, sm));
    eprintln!(
        "  restart from disk {:.0} ms (state hash matches)",
        ms(restart_time)
    );
    let disk_bytes = dir_size(dir.path());
    drop(dir);

    // The scheduler over the ledger's own snapshot: a 1,000-GPU cluster
    // (the 100 queues' quota), then one admission cycle.
    let (r, register_time) = timed(|| {
        ledger.apply(&clock.request(Command::RegisterCluster {
            cluster: cluster("east", QUEUES as u64 * GPUS_PER_QUEUE),
            lease_policy: LeasePolicy::Fence,
        }))
    });
    assert!(r.is_ok(), "cluster refused: {r:?}");
    let mut cycles = Vec::new();
    let mut admitted = 0;
    for _ in 0..5 {
        let (d, t) = timed(|| {
            schedule(
                ledger.snapshot(),
                Timestamp(clock.0 + 1),
                ledger.scheduler_config(),
            )
        });
        admitted = d.admissions.len();
        cycles.push(t);
    }
    cycles.sort();
    let cycle_time = cycles[cycles.len() / 2];
    let per_admission_us = cycle_time.as_secs_f64() * 1e6 / admitted.max(1) as f64;
    let peak = peak_rss_bytes();

    println!();
    println!("| at {pending} pending ({QUEUES} ClusterQueues, mimalloc) | |");
    println!("|---|---:|");
    println!(
        "| submit ({} commands of {BATCH}) | {:.1} s ({:.1} µs per workload) |",
        pending.div_ceil(BATCH),
        submit_time.as_secs_f64(),
        submit_time.as_secs_f64() * 1e6 / pending as f64
    );
    println!(
        "| RSS before / after submitting | {:.0} MiB / {:.0} MiB |",
        mib(rss_before),
        mib(rss_after)
    );
    println!("| RSS per pending workload | {per_workload:.0} bytes |");
    println!(
        "| peak RSS of the run (ledger + snapshot + installed copy) | {:.0} MiB |",
        mib(peak)
    );
    println!(
        "| snapshot size | {:.0} MiB ({:.0} bytes per workload) |",
        mib(snapshot_bytes as u64),
        snapshot_bytes as f64 / pending as f64
    );
    println!(
        "| snapshot build (copy + serialise) | {:.0} ms ({:.0} + {:.0}) |",
        ms(build_time),
        ms(export_time),
        ms(serialise_time)
    );
    println!("| snapshot install (import) | {:.0} ms |", ms(install_time));
    println!(
        "| snapshot save to sled (with flush) | {:.0} ms ({:.0} MiB on disk) |",
        ms(save_time),
        mib(disk_bytes)
    );
    println!(
        "| restart from disk (open sled + load + import) | {:.0} ms |",
        ms(restart_time)
    );
    println!("| state hash | {:.0} ms |", ms(hash_time));
    println!(
        "| register a 1,000-GPU cluster | {:.0} ms |",
        ms(register_time)
    );
    println!(
        "| scheduling cycle (median of 5) | {:.1} ms, {admitted} admitted, {per_admission_us:.2} µs per admission |",
        ms(cycle_time)
    );
    println!();
    println!(
        "pending={pending} rss_bytes_per_workload={per_workload:.0} snapshot_bytes={snapshot_bytes} snapshot_build_ms={:.0} snapshot_install_ms={:.0} restart_ms={:.0} sled_save_ms={:.0} register_cluster_ms={:.0} cycle_ms={:.1} per_admission_us={per_admission_us:.2} peak_rss_bytes={peak}",
        ms(build_time),
        ms(install_time),
        ms(restart_time),
        ms(save_time),
        ms(register_time),
        ms(cycle_time),
    );
}

/// Bytes of all files under `dir`.
fn dir_size(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                total += dir_size(&entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}
