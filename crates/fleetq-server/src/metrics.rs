//! Prometheus metrics (docs/metrics.md), served at `/metrics` by [`crate::http`].
//!
//! Series named after Kueue's (`kueue_*`) keep Kueue's names, labels and
//! buckets so that existing dashboards work; fleetq's own are `fleetq_*`.
//!
//! Most series are computed from the replicated ledger at scrape time by
//! [`NodeCollector`](crate::http::scrape::NodeCollector), so every replica at the same applied index reports
//! the same values for them (scrape any node, or take `max by` over all):
//! gauges from the ledger's records and scheduler snapshot, counters and
//! the admission-wait histogram from the ledger's own [`Counters`](fleetq_ledger::Counters), which
//! apply() keeps and snapshots carry. Only what happens outside the state
//! machine is counted per process in [`ServerMetrics`]: the leader's
//! admission attempts and the Raft write latency (a follower reports them
//! as zero), the lease ages the leader keeps in memory, and the requests
//! this node refused under its limits (`fleetq_requests_refused_total`,
//! counted by the node that answered the client: sum over nodes).
//!
//! ## Where this deviates from Kueue
//!
//! - `kueue_pending_workloads{status}`: fleetq looks at every pending
//!   workload in every cycle, so there is no "inadmissible set". A pending
//!   workload counts as `inadmissible` when the last cycle gave it (or its
//!   ClusterQueue) a reason that holds it back (WaitingForQuota,
//!   ExceedsMaxQuota, NoClusterCapacity, Misconfigured, Suspended,
//!   BackingOff, BudgetExhausted, BlockedByHead), as `active` otherwise
//!   (not examined yet, NotYetConsidered, Preempting, freshly Evicted).
//!   Workloads whose LocalQueue binds to no ClusterQueue are in neither.
//! - `kueue_cluster_queue_resource_reservation` and
//!   `kueue_cluster_queue_resource_usage` are equal: fleetq has no
//!   admission checks, so a quota reservation is an admission. Quota is
//!   charged until the executor confirms a stop (stopping workloads count).
//! - `kueue_cluster_queue_borrowing_limit` / `_lending_limit` appear only
//!   for cells that set the limit (for "unlimited" Kueue v0.14 reports 0,
//!   Kueue main +Inf).
//! - `kueue_cluster_queue_weighted_share` / `kueue_cohort_weighted_share`:
//!   Kueue's scale (per mille of what the cohort tree can lend, divided by
//!   the weight; 9223372036854775807 for a borrowing node of weight 0), but
//!   computed per (flavor, resource) cell, as fleetq's scheduler does,
//!   where Kueue sums a resource over its flavors; not truncated to an
//!   integer.
//! - `kueue_evicted_workloads_total{reason}`: `Preempted` and
//!   `PodsReadyTimeout` as in Kueue (a deactivation past the requeue limit
//!   counts as `PodsReadyTimeout`), plus fleetq's own `ClusterLost` (the
//!   cluster's lease expired and its agent fenced the workload) and
//!   `NotRunningOnCluster` (after a reconnect the agent no longer ran it).
//!   Cancellations are not evictions.
//! - `kueue_admission_attempts_total` / `_duration_seconds`: one attempt per
//!   scheduling cycle of the leader that proposed something (admissions,
//!   preemptions or new pending reasons; a cycle that finds the ledger
//!   already says it all is not counted, as Kueue does not retry an
//!   inadmissible workload until something changes), and one per
//!   submission entry that carried a plan of admissions on submit;
//!   `success` when apply() admitted at least one of its decisions. The
//!   duration is the cycle's (or the plan's) computation, without the Raft
//!   commit (that is `fleetq_raft_append_latency_seconds`).
//! - Resource values are in Kueue's units: counts, cores, bytes.
//! - Labels: Kueue v0.14's. Kueue main adds `replica_role` (leader,
//!   follower) to every series; fleetq's ledger series are the same on
//!   every replica, so they have none. Kueue's `priority_class` on the
//!   admission counters and histograms is missing: apply() keeps them per
//!   ClusterQueue only (`fleetq_ledger::Counters`).
//! - `kueue_admitted_workloads_total` and `kueue_quota_reserved_workloads_total`
//!   are the count of `kueue_admission_wait_time_seconds` (Kueue counts and
//!   observes in one call), and `kueue_quota_reserved_wait_time_seconds` is
//!   the same histogram: a reservation is an admission.
//!   `kueue_admission_checks_wait_time_seconds` observes 0 for every
//!   admission (no checks to wait for).
//! - `kueue_cluster_queue_status`: `pending` while the queue's stopPolicy
//!   is Hold (Kueue's other causes, missing flavors or admission checks,
//!   cannot occur: validation refuses them), `active` otherwise; never
//!   `terminating` (a ClusterQueue is deleted only once nothing holds its
//!   quota). `kueue_local_queue_status{active}`: False while the
//!   LocalQueue or its ClusterQueue is stopped.
//! - `kueue_finished_workloads` / `kueue_local_queue_finished_workloads`:
//!   finished workloads the ledger still keeps (until
//!   `--finished-retention`), by the queues their LocalQueue names now.
//! - `kueue_cohort_subtree_admitted_workloads_total`: the sum of
//!   `kueue_admitted_workloads_total` over the ClusterQueues now in the
//!   subtree, so it drops (a counter reset) when a queue leaves it.
//! - `kueue_build_info`: `git_version` is fleetq's version, `compiler`
//!   `rustc`, `go_version` empty; `git_commit` and `build_date` come from
//!   `FLEETQ_GIT_COMMIT` and `FLEETQ_BUILD_DATE` at build time, else
//!   `unknown`.
//!
//! docs/metrics.md lists Kueue's series fleetq does not report, and why.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// Settings of the metrics that take one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `fleetq_quota_reserved_not_running` counts reservations older than
    /// this that their agent has not reported running.
    pub reserved_not_running_after: Duration,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            reserved_not_running_after: Duration::from_secs(60),
        }
    }
}

type ResultLabel = [(&'static str, &'static str); 1];
type HistogramFamily = Family<ResultLabel, Histogram, fn() -> Histogram>;

/// Kueue's `admission_attempt_duration_seconds` buckets (the Prometheus
/// client's defaults).
const ATTEMPT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn attempt_histogram() -> Histogram {
    Histogram::new(ATTEMPT_BUCKETS)
}

/// Instruments fed by this process's own events (cheap to clone: they
/// share their values).
#[derive(Clone, Debug)]
pub struct ServerMetrics {
    admission_attempts: Family<ResultLabel, Counter>,
    admission_attempt_duration: HistogramFamily,
    append_latency: Histogram,
    requests_refused: Family<ResultLabel, Counter>,
    /// Scheduled backups of this node (`fleetq server --backup-dir`).
    pub backups: BackupStatus,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        let metrics = ServerMetrics {
            admission_attempts: Family::default(),
            admission_attempt_duration: Family::new_with_constructor(
                attempt_histogram as fn() -> Histogram,
            ),
            // 0.5 ms to about 16 s.
            append_latency: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            requests_refused: Family::default(),
            backups: BackupStatus::default(),
        };
        // Every reason from the start, at 0, so that a rate() over it
        // works before the first refusal.
        for reason in reason::ALL {
            drop(
                metrics
                    .requests_refused
                    .get_or_create(&[("reason", reason)]),
            );
        }
        metrics
    }
}

impl ServerMetrics {
    /// One admission attempt (a scheduling cycle that proposed something)
    /// of the leader: `admitted` when apply() accepted at least one
    /// admission.
    pub fn admission_attempt(&self, admitted: bool, took: Duration) {
        let label = [("result", if admitted { "success" } else { "inadmissible" })];
        self.admission_attempts.get_or_create(&label).inc();
        self.admission_attempt_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// A command proposed on this node (the leader) was committed and
    /// applied after `took`.
    pub fn appended(&self, took: Duration) {
        self.append_latency.observe(took.as_secs_f64());
    }

    /// A request this node refused under one of its limits
    /// ([`reason`]).
    pub fn refused(&self, reason: &'static str) {
        self.requests_refused
            .get_or_create(&[("reason", reason)])
            .inc();
    }

    /// Requests refused so far for `reason`.
    pub fn refused_count(&self, reason: &'static str) -> u64 {
        self.requests_refused
            .get_or_create(&[("reason", reason)])
            .get()
    }

    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "fleetq_requests_refused",
            "Requests this node refused under its limits against abuse or its authorization; reason: request_too_large (max_request_bytes), rate_limit (client_write_rate), pending_limit (max_pending_per_local_queue), agent_sessions (max_agent_sessions), unauthenticated (no certificate or token), forbidden (outside the caller's rights), foreign_cluster (an agent speaking for another cluster), tls_handshake (a connection that failed TLS)",
            self.requests_refused.clone(),
        );
        registry.register(
            "kueue_admission_attempts",
            "The total number of admission attempts (scheduling cycles of this node as leader that proposed admissions, preemptions or new pending reasons); result: success (at least one workload admitted) or inadmissible",
            self.admission_attempts.clone(),
        );
        registry.register(
            "kueue_admission_attempt_duration_seconds",
            "The latency of an admission attempt (the scheduling cycle's computation, without the Raft commit); result: success or inadmissible",
            self.admission_attempt_duration.clone(),
        );
        registry.register(
            "fleetq_raft_append_latency_seconds",
            "Time from proposing a command on this node as leader until it was committed by a quorum and applied here",
            self.append_latency.clone(),
        );
        registry.register_collector(Box::new(BackupAge(self.backups.clone())));
        registry.register_collector(Box::new(BuildInfo));
    }
}

/// `kueue_build_info`: 1, labelled with what this binary is.
#[derive(Debug)]
struct BuildInfo;

/// Go's name for this platform (`linux/amd64`), as Kueue reports it.
fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

impl Collector for BuildInfo {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let version = concat!("v", env!("CARGO_PKG_VERSION"));
        let platform = platform();
        gauges(
            &mut encoder,
            "kueue_build_info",
            "fleetq build information: 1, labelled by git version, git commit, build date, go version (empty: fleetq is not Go), compiler and platform",
            std::iter::once((
                vec![
                    ("git_version", version),
                    ("git_commit", option_env!("FLEETQ_GIT_COMMIT").unwrap_or("unknown")),
                    ("build_date", option_env!("FLEETQ_BUILD_DATE").unwrap_or("unknown")),
                    ("go_version", ""),
                    ("compiler", "rustc"),
                    ("platform", platform.as_str()),
                ],
                1.0,
            )),
        )
    }
}

/// `fleetq_backup_last_success_age_seconds`, computed at scrape time; only
/// on a node with scheduled backups.
#[derive(Debug)]
struct BackupAge(BackupStatus);

impl Collector for BackupAge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        match self.0.age() {
            Some(age) => gauges(
                &mut encoder,
                "fleetq_backup_last_success_age_seconds",
                "Seconds since this node last wrote a good scheduled backup (--backup-dir); before the first, since the schedule started",
                std::iter::once((Vec::new(), age.as_secs_f64())),
            ),
            None => Ok(()),
        }
    }
}

/// When this node last wrote a good scheduled backup, for
/// `fleetq_backup_last_success_age_seconds`; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct BackupStatus {
    times: Arc<Mutex<BackupTimes>>,
}

#[derive(Debug, Default)]
struct BackupTimes {
    /// When the schedule started (None: no schedule on this node).
    scheduled: Option<SystemTime>,
    last_success: Option<SystemTime>,
}

impl BackupStatus {
    fn lock(&self) -> std::sync::MutexGuard<'_, BackupTimes> {
        self.times.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn started(&self) {
        self.lock().scheduled = Some(SystemTime::now());
    }

    pub(crate) fn succeeded(&self) {
        self.lock().last_success = Some(SystemTime::now());
    }

    /// Time since the last good scheduled backup; before the first one,
    /// since the schedule started (so that an alert on the age fires when
    /// backups never succeed). None without a schedule.
    pub fn age(&self) -> Option<Duration> {
        let t = self.lock();
        t.scheduled?;
        t.last_success
            .or(t.scheduled)
            .map(|at| at.elapsed().unwrap_or_default())
    }
}

/// The `reason` label of `fleetq_requests_refused_total`.
pub mod reason {
    /// A message over `max_request_bytes`.
    pub const REQUEST_TOO_LARGE: &str = "request_too_large";
    /// A write over `client_write_rate`.
    pub const RATE_LIMIT: &str = "rate_limit";
    /// A submission to a LocalQueue at `max_pending_per_local_queue`.
    pub const PENDING_LIMIT: &str = "pending_limit";
    /// An agent session over `max_agent_sessions`.
    pub const AGENT_SESSIONS: &str = "agent_sessions";
    /// A request with neither a trusted client certificate nor a known
    /// bearer token (crate::guard::auth).
    pub const UNAUTHENTICATED: &str = "unauthenticated";
    /// A caller asking for what its identity or tenant may not do.
    pub const FORBIDDEN: &str = "forbidden";
    /// An agent speaking for a cluster its certificate does not name.
    pub const FOREIGN_CLUSTER: &str = "foreign_cluster";
    /// A connection whose TLS handshake failed (no certificate a server
    /// needs, a certificate from another CA, plaintext).
    pub const TLS_HANDSHAKE: &str = "tls_handshake";
    pub const ALL: [&str; 8] = [
        REQUEST_TOO_LARGE,
        RATE_LIMIT,
        PENDING_LIMIT,
        AGENT_SESSIONS,
        UNAUTHENTICATED,
        FORBIDDEN,
        FOREIGN_CLUSTER,
        TLS_HANDSHAKE,
    ];
}

/// A gauge family from (labels, value) rows.
pub(crate) fn gauges<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (Vec<(&'a str, &'a str)>, f64)>,
) -> Result<(), fmt::Error> {
    let mut me = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(value).encode(me.encode_family(&labels)?)?;
    }
    Ok(())
}

pub(crate) fn gauges_owned(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (Vec<(&'static str, String)>, f64)>,
) -> Result<(), fmt::Error> {
    let mut me = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(value).encode(me.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A counter family (`_total` is appended to `name`).
pub(crate) fn counters<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl Iterator<Item = (Vec<(&'a str, &'a str)>, u64)>,
) -> Result<(), fmt::Error> {
    let mut me = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        ConstCounter::new(value).encode(me.encode_family(&labels)?)?;
    }
    Ok(())
}
