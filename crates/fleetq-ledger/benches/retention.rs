//! What retention costs apply(): one `RemoveFinished` of 1,000 finished
//! workloads, on a ledger that holds 1,000 or 100,000 of them (the cost
//! per removal should not grow with what is kept). Every replica pays it,
//! under the state machine's lock, which is why the leader removes at most
//! `fleetq_server::leader::retention::REMOVE_PER_COMMAND` (500) a command.
//!
//! ```sh
//! cargo bench -p fleetq-ledger --bench retention
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use fleetq_ledger::{AdmitBatch, Submission};
use fleetq_ledger::{Command, CycleId, LeasePolicy, Ledger, Phase, Request, StatusReport};
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp, Workload};
use fleetq_scheduler::{schedule, SchedulerConfig};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const GPU: &str = "nvidia.com/gpu";
const FLAVOR: &str = "h100";
/// Admitted, run and finished in rounds of this many (the cluster's GPUs).
const ROUND: usize = 5_000;

fn manifests() -> String {
    fleetq_testkit::kueue::one_queue(FLAVOR, "team-a", "team-a", ROUND as u64)
}

struct Leader {
    ledger: Ledger,
    now: u64,
    seq: u64,
}

impl Leader {
    fn apply(&mut self, command: Command) {
        self.now += 1;
        let r = self.ledger.apply(&Request {
            at: Timestamp(self.now),
            command,
        });
        assert!(r.is_ok(), "{r:?}");
    }
}

fn workload(i: usize) -> Workload {
    Workload {
        namespace: "default".into(),
        name: format!("w-{i}"),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: "team-a".into(),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                min_count: None,
                requests: BTreeMap::from([(GPU.to_string(), Quantity::units(1))]),
                topology_request: None,
            }],
            ..WorkloadSpec::default()
        },
    }
}

/// A ledger in which `finished` workloads ran on cluster `east` and
/// succeeded, with request ids as the CLI stamps them.
fn ledger_with_finished(finished: usize) -> Ledger {
    let config = SchedulerConfig {
        max_admissions_per_cycle: ROUND,
        ..SchedulerConfig::default()
    };
    let mut l = Leader {
        ledger: Ledger::new(config),
        now: 1_000_000,
        seq: 0,
    };
    l.ledger.set_invariant_checks(false);
    let objects = import_manifests(&manifests())
        .expect("bench manifests import")
        .into_iter()
        .map(|d| d.object)
        .collect();
    l.apply(Command::ApplyObjects { objects });
    l.apply(Command::RegisterCluster {
        cluster: Cluster {
            nodes: Vec::new(),
            name: "east".into(),
            labels: BTreeMap::new(),
            capacity: BTreeMap::from([(
                FLAVOR.to_string(),
                BTreeMap::from([(GPU.to_string(), Quantity::units(ROUND as u64))]),
            )]),
            state: ClusterState::Ready,
        },
        lease_policy: LeasePolicy::Fence,
    });
    for start in (0..finished).step_by(ROUND) {
        let end = (start + ROUND).min(finished);
        let submissions = (start..end)
            .map(|i| Submission {
                request_id: Some(format!("cli-0123456789abcdef0123456789abcdef-{i}")),
                workload: Arc::new(workload(i)),
            })
            .collect();
        l.apply(Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        });
        let decisions = schedule(
            l.ledger.snapshot(),
            Timestamp(l.now),
            l.ledger.scheduler_config(),
        );
        l.seq += 1;
        let admitted: Vec<u64> = decisions.admissions.iter().map(|a| a.workload).collect();
        assert_eq!(admitted.len(), end - start);
        l.apply(Command::AdmitBatch(AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: l.seq,
            },
            admissions: decisions.admissions,
            ..AdmitBatch::default()
        }));
        for phase in [Phase::Running, Phase::Succeeded] {
            let reports = admitted
                .iter()
                .map(|&id| StatusReport {
                    cluster: "east".into(),
                    workload: id,
                    epoch: l
                        .ledger
                        .workload(id)
                        .and_then(|w| w.reservation.as_ref())
                        .map(|r| r.epoch)
                        .unwrap_or_default(),
                    phase,
                    message: String::new(),
                })
                .collect();
            l.apply(Command::ReportStatus { reports });
        }
    }
    assert_eq!(l.ledger.finished().len(), finished);
    l.ledger
}

fn remove_finished(c: &mut Criterion) {
    let mut group = c.benchmark_group("RemoveFinished");
    group.sample_size(20);
    for held in [1_000usize, 100_000] {
        let ledger = ledger_with_finished(held);
        let at = Timestamp(ledger.state().now.millis() + 1);
        group.bench_function(format!("1000 of {held} finished"), |b| {
            b.iter_batched(
                || ledger.clone(),
                |mut ledger| {
                    ledger.apply(&Request {
                        at,
                        command: Command::RemoveFinished {
                            retention_ms: 0,
                            max: 1_000,
                        },
                    });
                    ledger
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, remove_finished);
criterion_main!(benches);
