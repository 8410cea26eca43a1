//! One scheduling cycle over deep queues: 1k, 10k and 100k pending
//! workloads spread over 10, 100 and 1,000 ClusterQueues (cohorts of 10),
//! 8 clusters of 128 GPUs. Quota admits 1,000 one-GPU workloads per cycle,
//! so the cost per admitted workload shows whether a cycle rescans the
//! queue per decision (it must not).
//!
//! `cargo bench -p fleetq-scheduler` runs criterion and then prints a table
//! of cycle time and cost per admission for the README. The table also has
//! rows at 1,000,000 pending (issue 6, scale of state), which criterion
//! leaves out to keep `cargo bench` short; `FLEETQ_BENCH_SUMMARY_ONLY=1`
//! skips criterion and prints only the table; `FLEETQ_BENCH_NODES_ONLY=1`
//! with it prints only the table of placement on nodes against totals.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion};
use fleetq_model::cluster_queue::{ClusterQueueSpec, FlavorQuotas, ResourceGroup, ResourceQuota};
use fleetq_model::flavor::ResourceFlavorSpec;
use fleetq_model::local_queue::LocalQueueSpec;
use fleetq_model::{
    Cluster, ClusterQueue, ClusterState, Config, LocalQueue, Quantity, ResourceFlavor, Timestamp,
};
use fleetq_scheduler::{schedule, PendingWorkload, SchedulerConfig, Snapshot};

const GPU: &str = "nvidia.com/gpu";
const ADMITTABLE: u64 = 1_000;
const CLUSTERS: usize = 8;

fn snapshot(pending: usize, queues: usize) -> Snapshot {
    snapshot_on(pending, queues, &flat_clusters(CLUSTERS, 128))
}

/// `n` clusters of `gpus` GPUs each, reported as totals.
fn flat_clusters(n: usize, gpus: u64) -> Vec<Cluster> {
    (0..n)
        .map(|c| Cluster {
            nodes: Vec::new(),
            name: format!("cluster-{c}"),
            labels: BTreeMap::new(),
            capacity: [(
                "h100".to_string(),
                [(GPU.to_string(), Quantity::units(gpus))].into(),
            )]
            .into(),
            state: ClusterState::Ready,
        })
        .collect()
}

/// The same clusters, each reporting `nodes` nodes of 8 GPUs in racks of
/// 16 (issue 26, item 9: placement's cost per admission).
fn node_clusters(n: usize, nodes: usize) -> Vec<Cluster> {
    flat_clusters(n, nodes as u64 * 8)
        .into_iter()
        .map(|mut c| {
            c.nodes = (0..nodes)
                .map(|i| fleetq_model::Node {
                    name: format!("{}-n{i}", c.name),
                    labels: [
                        ("rack".to_string(), format!("r{}", i / 16)),
                        (
                            "kubernetes.io/hostname".to_string(),
                            format!("{}-n{i}", c.name),
                        ),
                    ]
                    .into(),
                    flavor: "h100".into(),
                    allocatable: [(GPU.to_string(), Quantity::units(8))].into(),
                    unschedulable: false,
                })
                .collect();
            c
        })
        .collect()
}

fn snapshot_on(pending: usize, queues: usize, clusters: &[Cluster]) -> Snapshot {
    let mut config = Config::default();
    config.flavors.insert(
        "h100".into(),
        ResourceFlavor {
            name: "h100".into(),
            spec: ResourceFlavorSpec::default(),
        },
    );
    let per_queue = ADMITTABLE / queues as u64;
    for q in 0..queues {
        let name = format!("cq-{q}");
        let spec = ClusterQueueSpec {
            cohort: Some(format!("cohort-{}", q / 10)),
            resource_groups: vec![ResourceGroup {
                covered_resources: vec![GPU.into(), "cpu".into()],
                flavors: vec![FlavorQuotas {
                    name: "h100".into(),
                    resources: vec![
                        ResourceQuota {
                            name: GPU.into(),
                            nominal_quota: Quantity::units(per_queue),
                            borrowing_limit: Some(Quantity::ZERO),
                            lending_limit: None,
                        },
                        ResourceQuota {
                            name: "cpu".into(),
                            nominal_quota: Quantity::units(per_queue * 16),
                            borrowing_limit: None,
                            lending_limit: None,
                        },
                    ],
                }],
            }],
            ..ClusterQueueSpec::default()
        };
        config.cluster_queues.insert(
            name.clone(),
            ClusterQueue {
                name: name.clone(),
                spec,
            },
        );
        let lq = LocalQueue {
            namespace: format!("team-{q}"),
            name: "default".into(),
            spec: LocalQueueSpec {
                cluster_queue: name,
                ..LocalQueueSpec::default()
            },
        };
        config.local_queues.insert(lq.key(), lq);
    }
    let mut snap = Snapshot::new(config, clusters);
    for i in 0..pending {
        let q = i % queues;
        let workload = fleetq_testkit::scale::workload(i, queues);
        snap.add_pending(PendingWorkload {
            id: i as u64 + 1,
            workload: Arc::new(workload),
            local_queue: format!("team-{q}/default"),
            cluster_queue: format!("cq-{q}"),
            priority: (i % 3) as i32 * 100,
            created_at: Timestamp(i as u64),
            not_before: None,
            nominated: false,
            borrow_preemptions: 0,
            reclaimed: 0,
            reclaimed_for: None,
        })
        .expect("fresh id");
    }
    snap
}

const SIZES: [(usize, usize); 9] = [
    (1_000, 10),
    (1_000, 100),
    (1_000, 1_000),
    (10_000, 10),
    (10_000, 100),
    (10_000, 1_000),
    (100_000, 10),
    (100_000, 100),
    (100_000, 1_000),
];

/// Printed by [`summary`] only: building each snapshot takes seconds and
/// about a GiB.
const SUMMARY_ONLY_SIZES: [(usize, usize); 3] =
    [(1_000_000, 10), (1_000_000, 100), (1_000_000, 1_000)];

fn cycle(c: &mut Criterion) {
    let cfg = SchedulerConfig::default();
    let mut group = c.benchmark_group("cycle");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for (pending, queues) in SIZES {
        let snap = snapshot(pending, queues);
        group.bench_with_input(
            BenchmarkId::new(format!("{queues}cq"), pending),
            &snap,
            |b, snap| b.iter(|| schedule(black_box(snap), Timestamp(1_000_000), &cfg)),
        );
    }
    group.finish();
}

/// Median of 15 timed cycles, and what the last one admitted.
fn median_cycle(snap: &Snapshot, cfg: &SchedulerConfig) -> (Duration, usize) {
    let mut times = Vec::new();
    let mut admitted = 0;
    for _ in 0..15 {
        let start = Instant::now();
        let d = schedule(snap, Timestamp(1_000_000), cfg);
        times.push(start.elapsed());
        admitted = d.admissions.len();
    }
    times.sort();
    (times[times.len() / 2], admitted)
}

/// The cost of node placement per admission: the same queues and
/// workloads on clusters reported as totals and as nodes of 8 GPUs, side
/// by side in one run (issue 26, item 9: at most 2x).
fn nodes_summary() {
    let cfg = SchedulerConfig::default();
    println!("\n| pending | clusters x nodes | flat, per admission | nodes, per admission | nodes / flat |");
    println!("|---:|---:|---:|---:|---:|");
    for (pending, clusters, nodes) in [(100_000, 8, 16), (100_000, 10, 1_000)] {
        let flat = snapshot_on(pending, 100, &flat_clusters(clusters, nodes as u64 * 8));
        let (flat_t, flat_n) = median_cycle(&flat, &cfg);
        drop(flat);
        let placed = snapshot_on(pending, 100, &node_clusters(clusters, nodes));
        let (node_t, node_n) = median_cycle(&placed, &cfg);
        let per = |t: Duration, n: usize| t.as_secs_f64() * 1e6 / n.max(1) as f64;
        println!(
            "| {pending} | {clusters} x {nodes} | {:.2} µs ({flat_n}) | {:.2} µs ({node_n}) | {:.1}x |",
            per(flat_t, flat_n),
            per(node_t, node_n),
            per(node_t, node_n) / per(flat_t, flat_n)
        );
    }
}

/// Median of a few timed cycles per size, printed as the README table;
/// then the same cycles with fair sharing on (Kueue's head tournament per
/// cohort), side by side.
fn summary() {
    if std::env::var_os("FLEETQ_BENCH_NODES_ONLY").is_some() {
        nodes_summary();
        return;
    }
    let cfg = SchedulerConfig::default();
    println!(
        "\n| pending | ClusterQueues | admitted | cycle (median) | per admission | vs 1k pending |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut base: BTreeMap<usize, f64> = BTreeMap::new();
    for (pending, queues) in SIZES.into_iter().chain(SUMMARY_ONLY_SIZES) {
        let snap = snapshot(pending, queues);
        let (median, admitted) = median_cycle(&snap, &cfg);
        let per = median.as_secs_f64() * 1e6 / admitted.max(1) as f64;
        let ratio = per / *base.entry(queues).or_insert(per);
        println!(
            "| {pending} | {queues} | {admitted} | {:.2} ms | {per:.2} µs | {ratio:.2}x |",
            median.as_secs_f64() * 1e3
        );
    }
    let fair = SchedulerConfig {
        fair_sharing: true,
        ..SchedulerConfig::default()
    };
    println!("\n| pending | ClusterQueues | fair sharing off | on | on / off |");
    println!("|---:|---:|---:|---:|---:|");
    for (pending, queues) in SIZES {
        let snap = snapshot(pending, queues);
        let (off, _) = median_cycle(&snap, &cfg);
        let (on, _) = median_cycle(&snap, &fair);
        println!(
            "| {pending} | {queues} | {:.2} ms | {:.2} ms | {:.2}x |",
            off.as_secs_f64() * 1e3,
            on.as_secs_f64() * 1e3,
            on.as_secs_f64() / off.as_secs_f64()
        );
    }
    nodes_summary();
}

criterion_group!(benches, cycle);

fn main() {
    if std::env::var_os("FLEETQ_BENCH_SUMMARY_ONLY").is_none_or(|v| v.is_empty() || v == "0") {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    summary();
}
