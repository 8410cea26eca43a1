//! The `command_apply` target's interpreter: fuzz input -> a sequence of
//! ledger commands on a realistic setup, with the invariants checked after
//! every command (docs/architecture.md §6: 1 and 2 through `Ledger::violations`, the
//! record/snapshot agreement of the property tests, and 6: a second
//! replica fed the same log through JSON, as Raft carries it, holds the
//! same state after every command and the same state hash every 8
//! commands; at the end a fresh replay of the whole log and an
//! export/import agree on the hash).
//!
//! # Input layout
//!
//! Byte 0 picks the setup: bit 0 fair sharing, bit 1 wait-for-ready (with
//! a requeue limit), bit 2 the configuration ([`CONFIG_POOL`], the property
//! tests', or [`CONFIG_TREE`], a cohort tree with limits, a budget, two
//! flavors and StrictFIFO). Then ops until the input ends (at most
//! [`MAX_OPS`]): one byte `b` picks the op (`b % OPS`, the constants in
//! [`op`]), followed by that op's argument bytes, read by [`Input`] (zeros
//! past the end). Arguments pick among realistic values (workload names,
//! queues, clusters) so that most commands mean something; [`op::RAW`]
//! embeds any JSON-encoded [`Command`] (u16 length, then the bytes), and
//! [`op::MUTATE`] forges an admission cycle by mutating a real one.

use std::collections::BTreeMap;
use std::time::Duration;

use fleetq_ledger::{
    AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Outcome, Phase, Request, Response,
    RunningWorkload, StatusReport, Submission, WorkloadState,
};
use fleetq_model::cluster_queue::{
    AdmissionMode, AdmissionScope, FlavorQuotas, QueueingStrategy, ResourceQuota, StopPolicy,
};
use fleetq_model::cohort::{Cohort, CohortSpec};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::local_queue::{GpuBudget, LocalQueue, LocalQueueSpec};
use fleetq_model::quantity::MAX_MILLI;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp, Workload, WorkloadPriorityClass};
use fleetq_ledger::{LedgerConfig, WaitForReady};
use fleetq_scheduler::{schedule, Preemption, PreemptionReason, SchedulerConfig};

use crate::input::Input;

/// The ledger's property tests' configuration too: two ClusterQueues
/// sharing cohort `pool`, both preempting lower priority.
pub const CONFIG_POOL: &str = fleetq_testkit::kueue::POOL;

/// The ledger tests' cohort tree (ledger_apply.rs `COHORTS`) with more
/// knobs: lending and borrowing limits, borrowWithinCohort, a StrictFIFO
/// queue with two flavors, and a LocalQueue with a GPU-second budget.
pub const CONFIG_TREE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-80gb}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: shared}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: sub}
spec: {parentName: shared}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohortName: shared
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu", "cpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 8}
      - {name: cpu, nominalQuota: 16}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  cohortName: sub
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    reclaimWithinCohort: LowerPriority
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 4, lendingLimit: 2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-c}
spec:
  namespaceSelector: {}
  cohortName: sub
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 4}
    - name: h100-80gb
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 2}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team-b}
spec: {clusterQueue: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: team-c}
spec: {clusterQueue: team-c}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: budgeted}
spec:
  clusterQueue: team-a
  gpuBudget: {gpuSecondsPerHour: 3600, burstGpuSeconds: 7200}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
"#;

pub const FLAVOR: &str = "h100-80gb";
pub const GPU: &str = "nvidia.com/gpu";

/// At most this many ops per input (keeps one execution short).
pub const MAX_OPS: usize = 64;

/// Op codes: the first byte of every op, modulo [`OPS`].
pub mod op {
    /// name, gpus, queue, class, request id, pods, extras, queue limit
    pub const SUBMIT: u8 = 0;
    /// (none): the scheduler's cycle over the ledger's snapshot, applied;
    /// every admission it makes must be accepted.
    pub const CYCLE: u8 = 1;
    /// count, then (kind, arg, arg) per mutation: a forged cycle.
    pub const MUTATE: u8 = 2;
    /// pick, fresh: an earlier batch again.
    pub const REPLAY: u8 = 3;
    /// pick, flags, phase, epoch offset, message
    pub const REPORT: u8 = 4;
    /// pick
    pub const CANCEL: u8 = 5;
    /// cluster
    pub const EXPIRE: u8 = 6;
    /// cluster, keep_every
    pub const RECONCILE: u8 = 7;
    /// cluster, gpus, flags
    pub const REGISTER: u8 = 8;
    /// cluster
    pub const DRAIN: u8 = 9;
    /// pick, epoch offset
    pub const EVICT: u8 = 10;
    /// kind, name
    pub const DELETE: u8 = 11;
    /// kind, target, value, value
    pub const RECONFIGURE: u8 = 12;
    /// u16 seconds
    pub const ADVANCE: u8 = 13;
    /// u16 length, then a JSON `Command`
    pub const RAW: u8 = 14;
    /// clock step back (seconds): a new leader (term + 1)
    pub const TERM: u8 = 15;
    /// (none): the second replica is replaced by an import of the first's
    /// export (a follower installing a snapshot).
    pub const SNAPSHOT: u8 = 16;
    /// retention (seconds), max: remove finished workloads (retention)
    pub const REMOVE: u8 = 17;
}
pub const OPS: u8 = 18;

const CLUSTERS: [&str; 3] = ["east", "west", "north"];
const QUEUES: [&str; 5] = ["team-a", "team-b", "team-c", "budgeted", "missing"];
const CLUSTER_QUEUES: [&str; 4] = ["team-a", "team-b", "team-c", "missing"];
const COHORTS: [Option<&str>; 6] = [
    None,
    Some("pool"),
    Some("shared"),
    Some("sub"),
    Some("other"),
    Some("loop"),
];

pub fn ledger_config(flags: u8) -> LedgerConfig {
    LedgerConfig {
        scheduler: SchedulerConfig {
            fair_sharing: flags & 1 == 1,
            ..SchedulerConfig::default()
        },
        wait_for_ready: (flags & 2 == 2).then_some(WaitForReady {
            timeout: Duration::from_secs(60),
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(600),
            backoff_limit_count: Some(2),
        }),
    }
}

pub fn setup_objects(flags: u8) -> Vec<Object> {
    let yaml = if flags & 4 == 4 {
        CONFIG_TREE
    } else {
        CONFIG_POOL
    };
    import_manifests(yaml)
        .expect("the setup manifests import")
        .into_iter()
        .map(|d| d.object)
        .collect()
}

fn capacity(entries: &[(&str, &str, u64)]) -> BTreeMap<String, BTreeMap<String, Quantity>> {
    let mut out: BTreeMap<String, BTreeMap<String, Quantity>> = BTreeMap::new();
    for (flavor, resource, units) in entries {
        out.entry(flavor.to_string())
            .or_default()
            .insert(resource.to_string(), Quantity::units(*units));
    }
    out
}

/// `east` (8 H100, fence) and `west` (8 H100 and 4 A100, keep).
pub fn setup_clusters() -> Vec<(Cluster, LeasePolicy)> {
    vec![
        (
            Cluster {
                nodes: Vec::new(),
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity: capacity(&[(FLAVOR, GPU, 8)]),
                state: ClusterState::Ready,
            },
            LeasePolicy::Fence,
        ),
        (
            Cluster {
                nodes: Vec::new(),
                name: "west".into(),
                labels: BTreeMap::from([("region".into(), "west".into())]),
                capacity: capacity(&[(FLAVOR, GPU, 8), ("a100", GPU, 4)]),
                state: ClusterState::Ready,
            },
            LeasePolicy::Keep,
        ),
    ]
}

/// Two replicas fed the same log, plus the leader's view.
pub struct Harness {
    pub a: Ledger,
    pub b: Ledger,
    pub config: LedgerConfig,
    pub setup: Vec<Object>,
    /// Every request applied, with the term of its log entry.
    pub log: Vec<(Request, Option<u64>)>,
    pub now: u64,
    pub term: u64,
    pub batches: Vec<AdmitBatch>,
    /// Print every command and response (the `replay` example).
    pub verbose: bool,
}

impl Harness {
    pub fn new(flags: u8) -> Harness {
        let config = ledger_config(flags);
        let mut h = Harness {
            a: Ledger::new(config.clone()),
            b: Ledger::new(config.clone()),
            config,
            setup: setup_objects(flags),
            log: Vec::new(),
            now: 1_000_000,
            term: 1,
            batches: Vec::new(),
            verbose: std::env::var_os("FLEETQ_FUZZ_VERBOSE").is_some(),
        };
        // The invariant assertion inside apply() is part of what is tested
        // (it is on in debug builds; cargo fuzz builds with debug
        // assertions, but say so).
        h.a.set_invariant_checks(true);
        h.b.set_invariant_checks(true);
        let r = h.apply(Command::ApplyObjects {
            objects: h.setup.clone(),
        });
        assert!(r.is_ok(), "{r:?}");
        for (cluster, lease_policy) in setup_clusters() {
            let r = h.apply(Command::RegisterCluster {
                cluster,
                lease_policy,
            });
            assert!(r.is_ok(), "{r:?}");
        }
        h
    }

    /// Runs the whole input: setup byte, then ops, then the end checks.
    pub fn run(data: &[u8]) -> Harness {
        let mut input = Input::new(data);
        let mut h = Harness::new(input.byte());
        let mut ops = 0;
        while !input.is_empty() && ops < MAX_OPS {
            h.step(&mut input);
            ops += 1;
        }
        h.finish();
        h
    }

    /// Applies one command to both replicas (the second gets it through
    /// its JSON encoding) and checks what must hold after every command.
    pub fn apply_in_term(&mut self, command: Command, term: Option<u64>) -> Response {
        self.now += 1_000;
        let request = Request {
            at: Timestamp(self.now),
            command,
        };
        let ra = self.a.apply_in_term(&request, term);
        let decoded = crate::json_round_trip(&request);
        let rb = self.b.apply_in_term(&decoded, term);
        assert_eq!(ra, rb, "replicas answer {} alike", request.command.name());
        // The replicated state, field by field after every command (cheap),
        // and its hash, as replicas compare it, every few commands and at
        // the end.
        assert!(
            self.a.state() == self.b.state()
                && self.a.snapshot().local_queue_states() == self.b.snapshot().local_queue_states(),
            "replicas agree after {}",
            request.command.name()
        );
        if self.log.len() % 8 == 7 {
            assert_eq!(
                self.a.state_hash(),
                self.b.state_hash(),
                "replicas agree after {}",
                request.command.name()
            );
        }
        check(&self.a);
        if self.verbose {
            println!(
                "#{} term {term:?} {}\n  -> {}",
                self.log.len(),
                serde_json::to_string(&request).unwrap_or_default(),
                serde_json::to_string(&ra).unwrap_or_default()
            );
            let bytes = self.a.export().expect("export");
            match Ledger::import(&bytes, self.config.clone()) {
                Ok(l) if l.state_hash() == self.a.state_hash() => {}
                Ok(l) => {
                    println!("  !! export/import changes the hash here");
                    let x =
                        serde_json::to_string_pretty(&self.a.exported_state()).unwrap_or_default();
                    let y = serde_json::to_string_pretty(&l.exported_state()).unwrap_or_default();
                    for (i, (p, q)) in x.lines().zip(y.lines()).enumerate() {
                        if p != q {
                            println!("  line {i}: {p}  vs  {q}");
                        }
                    }
                }
                Err(e) => println!("  !! import fails here: {e}"),
            }
        }
        self.log.push((request, term));
        ra
    }

    pub fn apply(&mut self, command: Command) -> Response {
        self.apply_in_term(command, None)
    }

    /// The end of an input: a fresh replica replaying the whole log agrees,
    /// and export/import keeps the hash.
    pub fn finish(&mut self) {
        let mut c = Ledger::new(self.config.clone());
        c.set_invariant_checks(true);
        for (request, term) in &self.log {
            c.apply_in_term(request, *term);
        }
        let hash = self.a.state_hash();
        assert_eq!(self.b.state_hash(), hash, "the replicas agree");
        assert_eq!(c.state_hash(), hash, "a replay agrees");
        let bytes = self.a.export().expect("export");
        let imported = Ledger::import(&bytes, self.config.clone()).expect("import");
        assert_eq!(imported.state_hash(), hash, "import keeps the hash");
        assert_eq!(imported.counters(), self.a.counters());
        assert!(imported.violations().is_empty());
    }

    fn ids(&self) -> Vec<u64> {
        self.a.state().workloads.keys().copied().collect()
    }

    fn pick_any(&self, pick: u8) -> Option<u64> {
        let ids = self.ids();
        (!ids.is_empty()).then(|| ids[usize::from(pick) % ids.len()])
    }

    fn pick_reserved(&self, pick: u8) -> Option<u64> {
        let ids: Vec<u64> = self
            .a
            .state()
            .workloads
            .values()
            .filter(|w| w.reservation.is_some())
            .map(|w| w.id)
            .collect();
        (!ids.is_empty())
            .then(|| ids[usize::from(pick) % ids.len()])
            .or_else(|| self.pick_any(pick))
    }

    fn pick_pending(&self, pick: u8) -> Option<u64> {
        let ids: Vec<u64> = self.a.snapshot().pending().map(|p| p.id).collect();
        (!ids.is_empty())
            .then(|| ids[usize::from(pick) % ids.len()])
            .or_else(|| self.pick_any(pick))
    }

    /// The next cycle id the ledger accepts in this term, if any.
    fn next_cycle(&mut self) -> Option<CycleId> {
        let last = self.a.state().last_cycle;
        if last.term > self.term {
            self.term = last.term;
        }
        if last.term < self.term {
            return Some(CycleId {
                term: self.term,
                seq: 1,
            });
        }
        match last.seq.checked_add(1) {
            Some(seq) => Some(CycleId {
                term: self.term,
                seq,
            }),
            None => {
                self.term = self.term.checked_add(1)?;
                Some(CycleId {
                    term: self.term,
                    seq: 1,
                })
            }
        }
    }

    fn decide(&mut self) -> Option<AdmitBatch> {
        let cycle = self.next_cycle()?;
        let decisions = schedule(
            self.a.snapshot(),
            Timestamp(self.now),
            self.a.scheduler_config(),
        );
        Some(AdmitBatch {
            cycle,
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        })
    }

    pub fn step(&mut self, input: &mut Input) {
        match input.byte() % OPS {
            op::SUBMIT => self.submit(input),
            op::CYCLE => self.cycle(),
            op::MUTATE => self.mutated_cycle(input),
            op::REPLAY => self.replay(input),
            op::REPORT => self.report(input),
            op::CANCEL => self.cancel(input),
            op::EXPIRE => {
                let cluster = input.pick(&CLUSTERS).to_string();
                let known = self.a.state().clusters.contains_key(&cluster);
                let r = self.apply(Command::ExpireCluster { cluster });
                assert_eq!(r.is_ok(), known, "{r:?}");
            }
            op::RECONCILE => self.reconcile(input),
            op::REGISTER => self.register(input),
            op::DRAIN => {
                let cluster = input.pick(&CLUSTERS).to_string();
                // Half the time the drain is taken back.
                if input.u16() % 2 == 0 {
                    self.apply(Command::DrainCluster { cluster });
                } else {
                    self.apply(Command::UncordonCluster { cluster });
                }
            }
            op::EVICT => self.evict(input),
            op::DELETE => self.delete(input),
            op::RECONFIGURE => self.reconfigure(input),
            op::ADVANCE => self.now += u64::from(input.u16()) * 1_000,
            op::RAW => {
                let len = usize::from(input.u16());
                let bytes = input.bytes(len);
                if let Ok(command) = serde_json::from_slice::<Command>(bytes) {
                    self.apply_in_term(command, Some(self.term));
                }
            }
            op::TERM => {
                // A new leader, whose clock may be behind the old one's.
                self.term = self.term.saturating_add(1);
                self.now = self.now.saturating_sub(u64::from(input.byte()) * 1_000);
            }
            op::SNAPSHOT => {
                let bytes = self.a.export().expect("export");
                self.b = Ledger::import(&bytes, self.config.clone()).expect("import");
                self.b.set_invariant_checks(true);
                assert_eq!(self.a.state_hash(), self.b.state_hash());
            }
            op::REMOVE => self.remove_finished(input),
            _ => unreachable!("op codes are below OPS"),
        }
    }

    /// Retention removes only workloads that ended at least the retention
    /// before the stamp and hold nothing, at most `max`, and remembers
    /// their ids.
    fn remove_finished(&mut self, input: &mut Input) {
        let retention_ms = u64::from(input.byte()) * 1_000;
        let max = u32::from(input.byte() % 8);
        let before = self.a.state().workloads.clone();
        let r = self.apply(Command::RemoveFinished { retention_ms, max });
        assert_eq!(r.is_ok(), max > 0, "{r:?}");
        let at = self.a.state().now.millis();
        let mut gone = 0;
        for w in before.values() {
            if self.a.workload(w.id).is_some() {
                continue;
            }
            gone += 1;
            let ended = w.finished_at().map(|t| t.millis());
            assert!(
                ended.is_some_and(|e| e.saturating_add(retention_ms) <= at),
                "removed {} ({:?}, ended {ended:?}) at {at} with retention {retention_ms}",
                w.id,
                w.state
            );
            assert!(w.reservation.is_none(), "removed {} holding quota", w.id);
            assert!(self.a.state().removed.contains(w.id));
        }
        assert!(gone <= max as usize);
    }

    fn submit(&mut self, input: &mut Input) {
        let name = input.byte() % 24;
        let gpus = match input.byte() {
            255 => 1_000_000_000,
            b => u64::from(b % 13),
        };
        let queue = *input.pick(&QUEUES);
        let class = *input.pick(&[None, None, Some("low"), Some("high"), Some("unknown")]);
        let request = input.byte();
        let pods = input.byte();
        let extras = input.byte();
        let limit = input.byte();
        let mut requests = BTreeMap::new();
        if gpus > 0 || pods & 8 == 0 {
            requests.insert(GPU.to_string(), Quantity::units(gpus));
        }
        if pods & 8 == 8 {
            requests.insert(
                "cpu".to_string(),
                Quantity::from_milli(500 * (1 + u64::from(pods >> 4))),
            );
        }
        let submission = Submission {
            request_id: (request >= 128).then(|| format!("req-{}", request % 8)),
            workload: std::sync::Arc::new(Workload {
                namespace: "default".into(),
                name: format!("w{name}"),
                labels: BTreeMap::new(),
                spec: WorkloadSpec {
                    queue_name: queue.into(),
                    priority_class_name: class.map(str::to_string),
                    pod_sets: vec![PodSet {
                        name: "main".into(),
                        count: 1 + u32::from(pods & 3),
                        min_count: (pods & 4 == 4).then_some(1),
                        requests,
                        topology_request: None,
                    }],
                    maximum_execution_time: (extras & 1 == 1)
                        .then(|| Duration::from_secs(60 * (1 + u64::from(extras >> 1)))),
                    min_runtime_before_preemption: (extras & 0x40 == 0x40)
                        .then(|| Duration::from_secs(120)),
                    ..WorkloadSpec::default()
                },
            }),
        };
        let submissions = vec![submission];
        // The top bit of `extras`: the leader plans the admission into the
        // submitting entry (admission on submit), from the state it applies
        // to, so apply() makes at most the planned admissions.
        let admit = if extras & 0x80 == 0x80 {
            self.a.plan_on_submit(&submissions, Timestamp(self.now + 1_000))
        } else {
            Vec::new()
        };
        let planned = admit.len() as u32;
        let r = self.apply(Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: (limit > 0).then_some(u64::from(limit % 5)),
            admit,
        });
        assert!(r.is_ok(), "{r:?}");
        let Outcome::Submitted {
            admitted_on_submit, ..
        } = r.outcome
        else {
            panic!("{r:?}");
        };
        assert!(admitted_on_submit <= planned, "{r:?}");
    }

    fn cycle(&mut self) {
        let Some(batch) = self.decide() else { return };
        let wanted = batch.admissions.len() as u32;
        let term = batch.cycle.term;
        let r = self.apply_in_term(Command::AdmitBatch(batch.clone()), Some(term));
        let Outcome::Admitted(outcome) = r.outcome else {
            panic!("{r:?}");
        };
        // The scheduler decides over the ledger's own, current snapshot:
        // apply() accepts every admission it makes.
        assert!(!outcome.stale_batch, "{outcome:?}");
        assert_eq!(outcome.admitted, wanted, "{outcome:?}");
        self.batches.push(batch);
    }

    fn replay(&mut self, input: &mut Input) {
        let pick = input.byte();
        let fresh = input.bool();
        if self.batches.is_empty() {
            return;
        }
        let mut batch = self.batches[usize::from(pick) % self.batches.len()].clone();
        let before = replicated(&self.a);
        if fresh {
            let Some(cycle) = self.next_cycle() else {
                return;
            };
            batch.cycle = cycle;
            batch.reasons.clear();
            batch.queue_reasons.clear();
        }
        let stale = batch.cycle <= self.a.state().last_cycle;
        let term = batch.cycle.term;
        let r = self.apply_in_term(Command::AdmitBatch(batch), Some(term));
        let Outcome::Admitted(outcome) = r.outcome else {
            panic!("{r:?}");
        };
        assert_eq!(outcome.stale_batch, stale, "{outcome:?}");
        if stale {
            assert_eq!((outcome.admitted, outcome.preempted), (0, 0));
            assert_eq!(replicated(&self.a), before, "a stale batch changes nothing");
        }
    }

    /// A cycle's batch with forged decisions: a scheduler bug, a stale or
    /// lying leader. apply() must refuse whatever does not hold.
    fn mutated_cycle(&mut self, input: &mut Input) {
        let Some(mut batch) = self.decide() else {
            return;
        };
        if batch.admissions.is_empty() && !self.batches.is_empty() {
            let from = &self.batches[self.batches.len() - 1];
            batch.admissions = from.admissions.clone();
        }
        let n = 1 + input.byte() % 3;
        let mut term = Some(batch.cycle.term);
        for _ in 0..n {
            let kind = input.byte();
            let x = input.byte();
            let y = input.byte();
            let len = batch.admissions.len();
            let i = if len == 0 { 0 } else { usize::from(x) % len };
            match kind % 12 {
                0 if len > 0 => {
                    batch.admissions[i].assignment.cluster =
                        input_pick(&["east", "west", "north", ""], y).to_string();
                }
                1 if len > 0 => {
                    batch.admissions[i].cluster_queue = input_pick(&CLUSTER_QUEUES, y).to_string();
                }
                2 if len > 0 => {
                    let usage = &mut batch.admissions[i].assignment.usage;
                    if let Some(q) = usage.values_mut().nth(usize::from(y >> 3)) {
                        let m = q.milli();
                        *q = Quantity::from_milli(match y % 6 {
                            0 => 0,
                            1 => m / 2,
                            2 => m.saturating_mul(2).min(MAX_MILLI),
                            3 => m.saturating_add(1).min(MAX_MILLI),
                            4 => MAX_MILLI,
                            _ => m.saturating_sub(1),
                        });
                    }
                }
                3 if len > 0 => {
                    let to = input_pick(&[FLAVOR, "a100", "nope"], y).to_string();
                    let a = &mut batch.admissions[i];
                    a.assignment.usage = std::mem::take(&mut a.assignment.usage)
                        .into_iter()
                        .map(|(mut fr, q)| {
                            fr.flavor = to.clone();
                            (fr, q)
                        })
                        .collect();
                    for ps in &mut a.assignment.pod_sets {
                        for f in ps.flavors.values_mut() {
                            *f = to.clone();
                        }
                    }
                }
                4 if len > 0 => {
                    let a = batch.admissions[i].clone();
                    batch.admissions.push(a);
                }
                5 if len > 0 => {
                    let id = if y & 1 == 1 {
                        self.pick_pending(y >> 1)
                    } else {
                        self.pick_any(y >> 1)
                    };
                    if let Some(id) = id {
                        batch.admissions[i].workload = id;
                    }
                }
                6 if len > 0 => {
                    let a = &mut batch.admissions[i];
                    a.budget_charge = if y == 255 {
                        u64::MAX
                    } else {
                        u64::from(y) * 1_000_000
                    };
                    a.afs_penalty = if x == 255 {
                        u64::MAX
                    } else {
                        u64::from(x) * 1_000
                    };
                }
                7 if len > 0 => {
                    let usage = &mut batch.admissions[i].assignment.usage;
                    if y & 1 == 1 {
                        let key = usage.keys().nth(usize::from(y >> 1)).cloned();
                        if let Some(key) = key {
                            usage.remove(&key);
                        }
                    } else if let Some(mut fr) = usage.keys().next().cloned() {
                        fr.resource = "cpu".into();
                        usage.insert(fr, Quantity::from_milli(u64::from(y) * 250));
                    }
                }
                8 => {
                    let last = self.a.state().last_cycle;
                    batch.cycle = match y % 5 {
                        0 => last,
                        1 => CycleId {
                            term: self.term,
                            seq: 0,
                        },
                        2 => CycleId {
                            term: self.term.saturating_add(1),
                            seq: 1,
                        },
                        3 => CycleId {
                            term: u64::MAX,
                            seq: u64::MAX,
                        },
                        _ => batch.cycle,
                    };
                    term = match x % 3 {
                        0 => Some(batch.cycle.term),
                        1 => Some(self.term),
                        _ => None,
                    };
                }
                9 => {
                    let victim = self.pick_reserved(x);
                    let preemptor = self.pick_pending(y);
                    if let (Some(victim), Some(preemptor)) = (victim, preemptor) {
                        batch.preemptions.push(Preemption {
                            victim,
                            preemptor,
                            reason: *input_pick(
                                &[
                                    PreemptionReason::InClusterQueue,
                                    PreemptionReason::InCohortReclamation,
                                    PreemptionReason::InCohortReclaimWhileBorrowing,
                                    PreemptionReason::InCohortFairSharing,
                                ],
                                y >> 2,
                            ),
                            grace_period: None,
                            // Named, unknown or absent: a claim on a
                            // cluster that is not there must be harmless.
                            cluster: [Some("east"), Some("nowhere"), None][usize::from(x % 3)]
                                .map(str::to_string),
                        });
                    }
                }
                10 if len > 0 => {
                    let a = &mut batch.admissions[i];
                    if y & 1 == 1 {
                        if let Some(ps) = a.assignment.pod_sets.first_mut() {
                            ps.count = u32::from(y >> 1);
                        }
                    } else if y & 2 == 2 {
                        a.assignment.pod_sets.clear();
                    } else if let Some(ps) = a.assignment.pod_sets.first().cloned() {
                        a.assignment.pod_sets.push(ps);
                    }
                }
                11 => {
                    batch.admissions.clear();
                }
                _ => {}
            }
        }
        let before = replicated(&self.a);
        let stale =
            batch.cycle <= self.a.state().last_cycle || term.is_some_and(|t| t != batch.cycle.term);
        let r = self.apply_in_term(Command::AdmitBatch(batch.clone()), term);
        let Outcome::Admitted(outcome) = r.outcome else {
            panic!("{r:?}");
        };
        assert_eq!(outcome.stale_batch, stale, "{outcome:?}");
        if stale {
            assert_eq!(replicated(&self.a), before, "a stale batch changes nothing");
        } else {
            self.batches.push(batch);
        }
    }

    fn report(&mut self, input: &mut Input) {
        let pick = input.byte();
        let flags = input.byte();
        let phase = match input.byte() % 5 {
            0 => Phase::Running,
            1 => Phase::Waiting,
            2 => Phase::Succeeded,
            3 => Phase::Failed,
            _ => Phase::Stopped,
        };
        let epoch_off = match input.byte() {
            0..=191 => 0,
            b => u64::from(b % 3) + 1,
        };
        let message = match input.byte() % 4 {
            0 => "exit code 1".to_string(),
            _ => String::new(),
        };
        let any = flags & 1 == 1;
        let wrong_cluster = flags & 2 == 2;
        let picked = if any {
            self.pick_any(pick)
        } else {
            self.pick_reserved(pick)
        };
        let Some(id) = picked else { return };
        let Some(record) = self.a.workload(id) else {
            return;
        };
        let (cluster, epoch) = match &record.reservation {
            Some(r) => (r.assignment.cluster.clone(), r.epoch),
            None => ("east".to_string(), 1),
        };
        let reserved = record.reservation.is_some();
        let state = record.state;
        let cluster = if wrong_cluster {
            format!("{cluster}-not")
        } else {
            cluster
        };
        let before = replicated(&self.a);
        let r = self.apply(Command::ReportStatus {
            reports: vec![StatusReport {
                cluster,
                workload: id,
                epoch: epoch.wrapping_add(epoch_off),
                phase,
                message,
            }],
        });
        let Outcome::Reported { applied, stale } = r.outcome else {
            panic!("{r:?}");
        };
        if !reserved || epoch_off != 0 || wrong_cluster {
            assert_eq!((applied, stale), (0, 1));
            assert_eq!(replicated(&self.a), before, "a stale report is a no-op");
            return;
        }
        let Some(after) = self.a.workload(id) else {
            panic!("workload {id} vanished");
        };
        match phase {
            Phase::Running => {
                let expected = if state == WorkloadState::Admitted {
                    WorkloadState::Running
                } else {
                    state
                };
                assert_eq!(after.state, expected);
            }
            Phase::Succeeded => assert_eq!(after.state, WorkloadState::Succeeded),
            Phase::Failed => assert_eq!(after.state, WorkloadState::Failed),
            Phase::Stopped => assert!(
                matches!(
                    after.state,
                    WorkloadState::Pending | WorkloadState::Cancelled | WorkloadState::Failed
                ),
                "{:?}",
                after.state
            ),
            // Said in the history only.
            Phase::Waiting => assert_eq!(after.state, state),
        }
        if !matches!(phase, Phase::Running | Phase::Waiting) {
            assert!(after.reservation.is_none());
        }
    }

    fn cancel(&mut self, input: &mut Input) {
        let pick = input.byte();
        if pick >= 240 {
            let r = self.apply(Command::CancelWorkload {
                namespace: "default".into(),
                name: "never-submitted".into(),
            });
            assert!(!r.is_ok());
            return;
        }
        let Some(id) = self.pick_any(pick) else {
            return;
        };
        let Some(record) = self.a.workload(id) else {
            return;
        };
        let (namespace, name) = (
            record.workload.namespace.clone(),
            record.workload.name.clone(),
        );
        let was = record.state;
        // The name may since belong to another workload.
        let current = self.a.workload_by_name(&namespace, &name).map(|w| w.id);
        let r = self.apply(Command::CancelWorkload { namespace, name });
        if current != Some(id) {
            return;
        }
        let Some(record) = self.a.workload(id) else {
            panic!("workload {id} vanished");
        };
        match was {
            WorkloadState::Pending => assert_eq!(record.state, WorkloadState::Cancelled),
            WorkloadState::Admitted | WorkloadState::Running => {
                assert_eq!(record.state, was);
                assert!(record.cancel_requested);
                assert!(record.reservation.is_some(), "quota held until stopped");
            }
            _ => assert!(!r.is_ok()),
        }
    }

    fn reconcile(&mut self, input: &mut Input) {
        let name = input.pick(&CLUSTERS).to_string();
        let keep_every = 1 + usize::from(input.byte() % 3);
        let mut running: Vec<RunningWorkload> = self
            .a
            .state()
            .workloads
            .values()
            .filter_map(|w| w.reservation.as_ref().map(|r| (w.id, r)))
            .filter(|(_, r)| r.assignment.cluster == name)
            .enumerate()
            .filter(|(i, _)| i % keep_every == 0)
            .map(|(_, (id, r))| RunningWorkload {
                workload: id,
                epoch: r.epoch,
            })
            .collect();
        running.push(RunningWorkload {
            workload: 9_999,
            epoch: 1,
        });
        let known = self.a.state().clusters.contains_key(&name);
        let r = self.apply(Command::ReconcileCluster {
            cluster: name,
            running,
        });
        if known {
            let Outcome::Reconciled { stop, .. } = r.outcome else {
                panic!("{r:?}");
            };
            assert!(stop.iter().any(|s| s.workload == 9_999));
        } else {
            assert!(!r.is_ok());
        }
    }

    fn register(&mut self, input: &mut Input) {
        let name = *input.pick(&CLUSTERS);
        let gpus = u64::from(input.byte() % 17);
        let flags = input.byte();
        let mut entries = vec![(FLAVOR, GPU, gpus)];
        if flags & 4 == 4 {
            entries.push(("a100", GPU, 4));
        }
        if flags & 8 == 8 {
            entries.push((FLAVOR, "cpu", 64));
        }
        self.apply(Command::RegisterCluster {
            cluster: Cluster {
                nodes: Vec::new(),
                name: name.into(),
                labels: BTreeMap::new(),
                capacity: capacity(&entries),
                state: if flags & 1 == 1 {
                    ClusterState::Draining
                } else {
                    ClusterState::Ready
                },
            },
            lease_policy: if flags & 2 == 2 {
                LeasePolicy::Keep
            } else {
                LeasePolicy::Fence
            },
        });
    }

    fn evict(&mut self, input: &mut Input) {
        let pick = input.byte();
        let off = u64::from(input.byte() % 4 / 3);
        let mut workloads = Vec::new();
        for p in [pick, pick.wrapping_add(1)] {
            if let Some(id) = self.pick_reserved(p) {
                let epoch = self
                    .a
                    .workload(id)
                    .and_then(|w| w.reservation.as_ref())
                    .map_or(1, |r| r.epoch);
                workloads.push(RunningWorkload {
                    workload: id,
                    epoch: epoch.wrapping_add(off),
                });
            }
        }
        let r = self.apply(Command::EvictNotReady { workloads });
        assert_eq!(r.is_ok(), self.config.wait_for_ready.is_some(), "{r:?}");
    }

    fn delete(&mut self, input: &mut Input) {
        let kind = input
            .pick(&[
                "ClusterQueue",
                "LocalQueue",
                "ResourceFlavor",
                "Cohort",
                "WorkloadPriorityClass",
                "Workload",
                "Nope",
            ])
            .to_string();
        let name = input
            .pick(&[
                "team-a",
                "team-b",
                "team-c",
                "default/team-a",
                "default/team-b",
                "default/budgeted",
                FLAVOR,
                "a100",
                "pool",
                "shared",
                "sub",
                "low",
                "high",
                "",
            ])
            .to_string();
        let before = replicated(&self.a);
        let r = self.apply(Command::DeleteObject { kind, name });
        if !r.is_ok() {
            assert_eq!(
                replicated(&self.a),
                before,
                "a refused delete changes nothing"
            );
        }
    }

    /// An ApplyObjects that changes one object of the current
    /// configuration (or restores the setup).
    fn reconfigure(&mut self, input: &mut Input) {
        let kind = input.byte() % 10;
        let target = input.byte();
        let v = input.byte();
        let w = input.byte();
        let config = &self.a.state().config;
        let cq = {
            let cqs: Vec<_> = config.cluster_queues.values().collect();
            (!cqs.is_empty()).then(|| cqs[usize::from(target) % cqs.len()].clone())
        };
        let objects = match (kind, cq) {
            (0..=2, Some(mut cq)) => {
                let group = usize::from(w) % cq.spec.resource_groups.len().max(1);
                if let Some(g) = cq.spec.resource_groups.get_mut(group) {
                    let nf = g.flavors.len().max(1);
                    if let Some(f) = g.flavors.get_mut(usize::from(w >> 4) % nf) {
                        if let Some(r) = f.resources.first_mut() {
                            let q = Quantity::units(u64::from(v % 17));
                            match kind {
                                0 => r.nominal_quota = q,
                                1 => r.borrowing_limit = (v >= 17).then_some(q),
                                _ => r.lending_limit = (v >= 17).then_some(q),
                            }
                        }
                    }
                }
                vec![Object::ClusterQueue(cq)]
            }
            (3, Some(mut cq)) => {
                cq.spec.cohort = input_pick(&COHORTS, v).map(str::to_string);
                vec![Object::ClusterQueue(cq)]
            }
            (4, Some(mut cq)) => {
                cq.spec.stop_policy = *input_pick(
                    &[StopPolicy::None, StopPolicy::Hold, StopPolicy::HoldAndDrain],
                    v,
                );
                cq.spec.queueing_strategy = if w & 1 == 1 {
                    QueueingStrategy::StrictFIFO
                } else {
                    QueueingStrategy::BestEffortFIFO
                };
                cq.spec.admission_scope = (w & 2 == 2).then_some(AdmissionScope {
                    admission_mode: AdmissionMode::UsageBasedAdmissionFairSharing,
                });
                cq.spec.placement.clusters = match w >> 2 & 3 {
                    0 => Vec::new(),
                    1 => vec!["east".into()],
                    2 => vec!["west".into()],
                    _ => vec!["north".into()],
                };
                vec![Object::ClusterQueue(cq)]
            }
            (5, _) => vec![Object::LocalQueue(LocalQueue {
                namespace: "default".into(),
                name: input_pick(&QUEUES, target).to_string(),
                spec: LocalQueueSpec {
                    cluster_queue: input_pick(&CLUSTER_QUEUES, v).to_string(),
                    stop_policy: *input_pick(
                        &[StopPolicy::None, StopPolicy::Hold, StopPolicy::HoldAndDrain],
                        w >> 1,
                    ),
                    gpu_budget: (w & 1 == 1).then_some(GpuBudget {
                        gpu_seconds_per_hour: u64::from(v) * 100,
                        burst_gpu_seconds: u64::from(v) * 200,
                    }),
                    ..LocalQueueSpec::default()
                },
            })],
            (6, _) => vec![Object::WorkloadPriorityClass(WorkloadPriorityClass {
                name: input_pick(&["low", "high", "mid"], target).to_string(),
                value: (i32::from(v) - 128) * 10,
                description: String::new(),
            })],
            (7, _) => {
                let name = input_pick(&["pool", "shared", "sub", "loop"], target).to_string();
                let parent = input_pick(&COHORTS, v).map(str::to_string);
                let resource_groups = if w & 1 == 1 {
                    vec![fleetq_model::cluster_queue::ResourceGroup {
                        covered_resources: vec![GPU.into()],
                        flavors: vec![FlavorQuotas {
                            name: FLAVOR.into(),
                            resources: vec![ResourceQuota {
                                name: GPU.into(),
                                nominal_quota: Quantity::units(u64::from(w >> 1) % 9),
                                borrowing_limit: None,
                                lending_limit: None,
                            }],
                        }],
                    }]
                } else {
                    Vec::new()
                };
                vec![Object::Cohort(Cohort {
                    name,
                    spec: CohortSpec {
                        parent,
                        resource_groups,
                        fair_sharing: None,
                    },
                })]
            }
            (8, Some(mut cq)) => {
                if let Some(g) = cq.spec.resource_groups.first_mut() {
                    if v & 1 == 1 && g.flavors.len() > 1 {
                        g.flavors.pop();
                    } else if !g.flavors.iter().any(|f| f.name == "a100") {
                        let mut f = g.flavors.first().cloned().unwrap_or_default();
                        f.name = "a100".into();
                        for r in &mut f.resources {
                            r.nominal_quota = Quantity::units(u64::from(w % 9));
                        }
                        g.flavors.push(f);
                    }
                }
                vec![Object::ClusterQueue(cq)]
            }
            _ => self.setup.clone(),
        };
        let before = replicated(&self.a);
        let r = self.apply(Command::ApplyObjects { objects });
        if !r.is_ok() {
            assert_eq!(
                replicated(&self.a),
                before,
                "a refused change changes nothing"
            );
        }
    }
}

/// What the state hash covers: the replicated state without the clock.
fn replicated(ledger: &Ledger) -> fleetq_ledger::LedgerState {
    let mut state = ledger.exported_state();
    state.now = Timestamp::default();
    state
}

fn input_pick<T>(items: &[T], b: u8) -> &T {
    &items[usize::from(b) % items.len()]
}

/// What must hold after every command, beyond `violations()` (the
/// property tests' `check`).
pub fn check(ledger: &Ledger) {
    let violations = ledger.violations();
    assert!(violations.is_empty(), "{violations:?}");
    let snapshot = ledger.snapshot();
    for record in ledger.state().workloads.values() {
        let queued = snapshot.get_pending(record.id).is_some();
        let admitted = snapshot.get_admitted(record.id).is_some();
        assert!(
            !(queued && (admitted || record.reservation.is_some())),
            "workload {} is both pending and reserved",
            record.id
        );
        assert_eq!(
            record.reservation.is_some(),
            record.state.is_reserved(),
            "workload {} is {:?}",
            record.id,
            record.state
        );
        if queued {
            assert_eq!(record.state, WorkloadState::Pending);
        }
        if record.state.is_terminal() {
            assert!(!queued && !admitted);
        }
    }
    let mut epochs: Vec<u64> = ledger
        .state()
        .workloads
        .values()
        .filter_map(|w| w.reservation.as_ref().map(|r| r.epoch))
        .collect();
    let n = epochs.len();
    epochs.sort_unstable();
    epochs.dedup();
    assert_eq!(epochs.len(), n, "epochs are unique");
}
