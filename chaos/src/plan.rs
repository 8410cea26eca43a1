//! What one simulated run does, decided before it starts: the Kueue
//! configuration, the workloads the client submits, what it does between
//! submissions (cancel, change a quota), and the faults. A random plan is
//! drawn from a seed ([`Plan::from_seed`]); a regression scenario
//! ([`crate::regressions`]) builds one by hand around one mechanism, with
//! the seed only jittering its timing.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::agents::AgentFault;

/// Workloads the random client submits.
pub const WORKLOADS: usize = 30;
/// Mixed into the seed for the stream that draws stops and resumes
/// ([`Plan::add_stops`]), so the plan's other draws stay as they were.
const STOP_STREAM: u64 = 0x5709_ac71_7e00;
/// Mixed into the seed for the stream that decides whether the agents
/// report nodes ([`Plan::agent_nodes`]), so the other draws stay.
const NODES_STREAM: u64 = 0x6e0d_e500_0000;
/// Mixed into the seed for the racks' own stream: whether a plan whose
/// clusters report nodes puts them in racks under a Topology, and which
/// workloads become gangs with a topology request.
const TOPOLOGY_STREAM: u64 = 0x7090_1a3c_0000;
/// The Topology of a plan with racks, and its levels.
pub const TOPOLOGY: &str = "racks";
pub const RACK_LABEL: &str = "rack";
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The flavor's node label in a plan with racks (Kueue requires one
/// beside a topologyName); every node carries it.
pub const FLAVOR_LABEL: &str = "chaos.fleetq.dev/gpu";
/// Quota cuts each random plan races against a submission once the
/// workloads above have all ended ([`Race`]).
pub const RACES: usize = 3;
/// Mixed into the seed for the races' own random stream, so that drawing
/// them leaves every earlier draw of a seed as it was.
const RACE_STREAM: u64 = 0x7ace_5eed_f2e5;

/// The Kueue configuration of a random run: one ClusterQueue with 8 GPUs
/// of flavor h100-80gb and a LocalQueue default/team-a.
pub fn base_config() -> String {
    fleetq_testkit::kueue::one_queue("h100-80gb", "team-a", "team-a", 8)
}

/// `yaml` with the Topology of a plan with racks, named by the flavor:
/// levels rack, then host.
pub fn with_racks(yaml: &str) -> String {
    let flavor = "kind: ResourceFlavor\nmetadata:\n  name: h100-80gb\n";
    debug_assert!(yaml.contains(flavor), "no flavor in:\n{yaml}");
    let named = yaml.replacen(
        flavor,
        &format!(
            "{flavor}spec:\n  nodeLabels:\n    {FLAVOR_LABEL}: h100-80gb\n  topologyName: {TOPOLOGY}\n"
        ),
        1,
    );
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: {TOPOLOGY}\nspec:\n  levels:\n  - nodeLabel: {RACK_LABEL}\n  - nodeLabel: {HOSTNAME_LABEL}\n---\n{}",
        named.trim_start_matches('\n')
    )
}

/// [`base_config`] with the ClusterQueue's quota set to `gpus`.
pub fn config_with_quota(gpus: u32) -> String {
    fleetq_testkit::kueue::one_queue("h100-80gb", "team-a", "team-a", u64::from(gpus))
}

/// A fault in the control plane (or its network).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Cut the leader (whoever leads at `at`) off from the other nodes,
    /// heal after `heal_after`. The client can still reach every node.
    PartitionLeader {
        at: Duration,
        heal_after: Duration,
    },
    /// Crash `target` (chosen among the nodes as they stand at `at`): its
    /// software stops and its disk loses every write not yet synced; after
    /// `restart_after` it starts again from that disk.
    CrashNode {
        at: Duration,
        target: CrashTarget,
        restart_after: Duration,
    },
    /// Split the nodes in two at `at`, heal after `heal_after`.
    Split {
        at: Duration,
        heal_after: Duration,
        kind: SplitKind,
    },
    /// Drop the messages one way only between the leader and every other
    /// node (requests arrive, answers do not; or the reverse).
    OneWay {
        at: Duration,
        heal_after: Duration,
        direction: OneWayDirection,
    },
    /// A power cut of the whole control plane: every node crashes at
    /// once, losing what it had not synced, and all restart together.
    CrashAll {
        at: Duration,
        restart_after: Duration,
    },
    /// From `at`, wait until the leader has appended an admission batch
    /// it has not applied yet (its decisions are in flight), then
    /// `strike` it.
    LeaderMidBatch {
        at: Duration,
        strike: MidBatch,
    },
    /// Network weather on every link from `at` for `lasting`.
    Network {
        at: Duration,
        lasting: Duration,
        weather: Weather,
    },
}

/// Which node a [`Fault::CrashNode`] takes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashTarget {
    /// Whoever leads at the time.
    Leader,
    /// The `n`th of the other nodes, by id.
    Follower(usize),
}

/// The two sides of a [`Fault::Split`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitKind {
    /// The leader with fewer than half of the nodes (alone, of three):
    /// the majority elects a new leader while the old one keeps trying.
    LeaderInMinority,
    /// A minority of followers cut off: the leader keeps its quorum; the
    /// cut-off ones call elections that must not disturb it once healed.
    FollowersInMinority,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OneWayDirection {
    /// The leader's messages are lost; it still hears the others.
    LeaderCannotSend,
    /// The others' messages to the leader are lost; it still sends.
    LeaderCannotHear,
}

/// What [`Fault::LeaderMidBatch`] does to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MidBatch {
    /// Power cut (unsynced entries lost), restart after the duration.
    Crash(Duration),
    /// Cut it off from the other nodes, heal after the duration.
    Isolate(Duration),
}

/// Network weather for [`Fault::Network`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weather {
    /// Each message sent breaks its link with probability `fail` per
    /// mille (what is in flight on it is lost), and each later send on a
    /// broken link mends it with probability `repair` per mille. TCP does
    /// not retransmit in the simulation, so a lost segment stalls its
    /// connection until HTTP/2 keep-alive gives up on it (within 3 s):
    /// loss as RPCs see it.
    Loss { fail: u32, repair: u32 },
    /// Every message takes up to this long: messages on different
    /// connections overtake each other (reordering).
    Slow { max_latency: Duration },
}

/// Per-mille probabilities are kept as integers so plans compare exactly.
pub const PER_MILLE: f64 = 1000.0;

fn secs(d: &Duration) -> f64 {
    d.as_secs_f64()
}

/// Every kind of fault a random plan can draw, by name: the coverage a
/// run reports and a long run must strike ([`Fault::kind`],
/// [`AgentFault::kind`]).
pub const FAULT_KINDS: [&str; 18] = [
    "partition-leader",
    "crash-leader",
    "crash-follower",
    "split-leader-minority",
    "split-followers-minority",
    "one-way-leader-cannot-send",
    "one-way-leader-cannot-hear",
    "mid-batch-crash",
    "mid-batch-isolate",
    "crash-all",
    "lossy-links",
    "slow-links",
    "agent-partition",
    "agent-crash",
    "node-gone",
    "node-cordoned",
    // Not faults of their own: a node fault that struck a node with
    // running pods, on a cluster that fences them or keeps them running
    // (the oracle counts them), so both lease policies are exercised.
    "node-left-under-fence",
    "node-left-under-keep",
];

impl Fault {
    /// The kind's name, one of [`FAULT_KINDS`].
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::PartitionLeader { .. } => "partition-leader",
            Fault::CrashNode {
                target: CrashTarget::Leader,
                ..
            } => "crash-leader",
            Fault::CrashNode { .. } => "crash-follower",
            Fault::Split {
                kind: SplitKind::LeaderInMinority,
                ..
            } => "split-leader-minority",
            Fault::Split { .. } => "split-followers-minority",
            Fault::OneWay {
                direction: OneWayDirection::LeaderCannotSend,
                ..
            } => "one-way-leader-cannot-send",
            Fault::OneWay { .. } => "one-way-leader-cannot-hear",
            Fault::LeaderMidBatch {
                strike: MidBatch::Crash(_),
                ..
            } => "mid-batch-crash",
            Fault::LeaderMidBatch { .. } => "mid-batch-isolate",
            Fault::CrashAll { .. } => "crash-all",
            Fault::Network {
                weather: Weather::Loss { .. },
                ..
            } => "lossy-links",
            Fault::Network { .. } => "slow-links",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::None => write!(f, "no fault"),
            Fault::PartitionLeader { at, heal_after } => write!(
                f,
                "partition the leader at {:.1}s for {:.1}s",
                secs(at),
                secs(heal_after)
            ),
            Fault::CrashNode {
                at,
                target,
                restart_after,
            } => write!(
                f,
                "crash {} at {:.1}s, restart after {:.1}s",
                match target {
                    CrashTarget::Leader => "the leader",
                    CrashTarget::Follower(_) => "a follower",
                },
                secs(at),
                secs(restart_after)
            ),
            Fault::Split {
                at,
                heal_after,
                kind,
            } => write!(
                f,
                "split ({}) at {:.1}s for {:.1}s",
                match kind {
                    SplitKind::LeaderInMinority => "leader in the minority",
                    SplitKind::FollowersInMinority => "followers in the minority",
                },
                secs(at),
                secs(heal_after)
            ),
            Fault::OneWay {
                at,
                heal_after,
                direction,
            } => write!(
                f,
                "one-way loss ({}) at {:.1}s for {:.1}s",
                match direction {
                    OneWayDirection::LeaderCannotSend => "leader cannot send",
                    OneWayDirection::LeaderCannotHear => "leader cannot hear",
                },
                secs(at),
                secs(heal_after)
            ),
            Fault::CrashAll { at, restart_after } => write!(
                f,
                "crash every node at {:.1}s, restart after {:.1}s",
                secs(at),
                secs(restart_after)
            ),
            Fault::LeaderMidBatch { at, strike } => match strike {
                MidBatch::Crash(d) => write!(
                    f,
                    "crash the leader mid-batch after {:.1}s, restart after {:.1}s",
                    secs(at),
                    secs(d)
                ),
                MidBatch::Isolate(d) => write!(
                    f,
                    "isolate the leader mid-batch after {:.1}s for {:.1}s",
                    secs(at),
                    secs(d)
                ),
            },
            Fault::Network {
                at,
                lasting,
                weather,
            } => match weather {
                Weather::Loss { fail, repair } => write!(
                    f,
                    "lossy links (break {:.1}%, mend {:.0}% per message) at {:.1}s for {:.1}s",
                    f64::from(*fail) / 10.0,
                    f64::from(*repair) / 10.0,
                    secs(at),
                    secs(lasting)
                ),
                Weather::Slow { max_latency } => write!(
                    f,
                    "slow links (up to {} ms) at {:.1}s for {:.1}s",
                    max_latency.as_millis(),
                    secs(at),
                    secs(lasting)
                ),
            },
        }
    }
}

/// One pod set of a planned workload: `count` pods of `gpus` GPUs and
/// `mig` MIG slices (`nvidia.com/mig-1g.10gb`) each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedPodSet {
    pub count: u32,
    pub gpus: u32,
    pub mig: u32,
    /// Its topology request (plans with racks only).
    pub topology: Option<PlannedTopology>,
}

/// A pod set's topology request, in Kueue's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannedTopology {
    /// Every pod within one domain of the level.
    Required(&'static str),
    /// One domain of the level if they fit, else wider.
    Preferred(&'static str),
    /// Slices of `size` pods, each within one domain of `level`.
    Slices { level: &'static str, size: u32 },
}

impl PlannedPodSet {
    /// `count` pods of `gpus` GPUs.
    pub fn gpu(count: u32, gpus: u32) -> PlannedPodSet {
        PlannedPodSet {
            count,
            gpus,
            mig: 0,
            topology: None,
        }
    }
}

/// One workload the client submits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedWorkload {
    pub name: String,
    pub queue: String,
    pub priority_class: Option<String>,
    pub pod_sets: Vec<PlannedPodSet>,
    pub duration_s: u64,
    /// Exit status of every run (non-zero: the run fails).
    pub exit: i32,
    /// Pause before submitting it.
    pub delay_ms: u64,
}

impl PlannedWorkload {
    /// One pod of `gpus` GPUs in LocalQueue team-a, priority 0, exit 0.
    pub fn simple(name: String, gpus: u32, duration_s: u64, delay_ms: u64) -> PlannedWorkload {
        PlannedWorkload {
            name,
            queue: "team-a".into(),
            priority_class: None,
            pod_sets: vec![PlannedPodSet::gpu(1, gpus)],
            duration_s,
            exit: 0,
            delay_ms,
        }
    }

    /// GPUs of all its pods together.
    pub fn gpus(&self) -> u64 {
        self.pod_sets
            .iter()
            .map(|p| u64::from(p.count) * u64::from(p.gpus))
            .sum()
    }

    /// MIG slices of all its pods together.
    pub fn mig_slices(&self) -> u64 {
        self.pod_sets
            .iter()
            .map(|p| u64::from(p.count) * u64::from(p.mig))
            .sum()
    }
}

/// Something the client does right after a submission (or at the end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Cancel the workload with this index in [`Plan::workloads`].
    Cancel(usize),
    /// Apply these manifests (a quota change, say). A change the ledger
    /// refuses (it would over-commit what is admitted) is fine.
    Apply(String),
    /// Stop the workload with this index (Kueue's `spec.active: false`):
    /// evicted if it holds quota, kept out of its queue.
    Stop(usize),
    /// Queue a stopped workload again (`spec.active: true`); it must then
    /// end as planned.
    Resume(usize),
}

/// A quota cut raced against a submission, with nothing else queued or
/// running: the client sends the cut, then after `lead` submits
/// `workload`, which fits the quota before the cut but not after it. The
/// leader plans an admission for a submission into the entry that queues
/// it (admission on submit) from the state it has applied, so when the
/// cut is appended but not yet applied the plan is stale by the time it
/// applies, and apply() must refuse it (the workload then waits until the
/// client restores the quota). Either order of the two is fine; what must
/// never happen is the workload admitted over the cut quota.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// Index in [`Plan::workloads`] of the workload submitted during the
    /// cut; the client submits it only in its race.
    pub workload: usize,
    /// The ClusterQueue's quota while the cut holds (fewer GPUs than the
    /// workload asks for).
    pub cut_to: u32,
    /// How long after sending the cut the submission goes out.
    pub lead: Duration,
    /// The node both calls go to first.
    pub node: usize,
}

/// Everything a run does, decided before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub seed: u64,
    /// Control-plane nodes (3 or 5).
    pub nodes: u64,
    /// The regression scenario this plan was built for (None: random).
    pub scenario: Option<&'static str>,
    /// The Kueue configuration applied first.
    pub config: String,
    pub workloads: Vec<PlannedWorkload>,
    /// What to do after the submission of the workload at each index.
    pub after: Vec<(usize, Action)>,
    /// What to do after the last submission.
    pub at_end: Vec<Action>,
    /// Quota cuts raced against submissions, one after another once
    /// everything above has ended.
    pub races: Vec<Race>,
    pub faults: Vec<Fault>,
    pub agent_faults: Vec<AgentFault>,
    /// The configuration drawn for a random plan (None: hand-built).
    pub drawn: Option<crate::draw::DrawnConfig>,
    /// Whether the configuration lets workloads preempt one another.
    pub may_preempt: bool,
    /// Only the basic faults were kept ([`Plan::basic_faults`]).
    pub basic: bool,
    /// Whether the ledger runs wait-for-ready (Kueue's waitForPodsReady,
    /// 2 s). On in random plans; it evicts an admission never reported
    /// running, which also hides an agent protocol that loses that
    /// report, so a regression turns it off (the server's default).
    pub wait_for_ready: bool,
    /// Retention of finished workloads (`RemoveFinished`), or None to keep
    /// them all. On ([`SIM_RETENTION`]) in the random plans of odd seeds,
    /// so that workloads are removed while faults strike; off in the
    /// others, whose client then still sees how every workload ended.
    pub finished_retention: Option<Duration>,
    /// Whether the agents report their clusters' nodes
    /// ([`crate::agents::agent_config`]), so admission places pods on
    /// nodes and the oracle checks each node's books. In one random plan
    /// in two; off in the regressions.
    pub agent_nodes: bool,
    /// Nodes that leave and return mid-run (in one plan with nodes in
    /// two).
    pub node_faults: Vec<crate::node_faults::NodeFault>,
    /// The agent whose cluster's lease policy is `keep` (the others
    /// fence): a node that leaves, or an agent lost, under its workloads
    /// leaves them running. In one plan with nodes in three.
    pub keep_agent: Option<usize>,
    /// The clusters' nodes stand in racks under Topology [`TOPOLOGY`]
    /// (the flavor names it), and some workloads are gangs that ask for a
    /// rack, a host or slices of one ([`PlannedTopology`]). In one plan
    /// with nodes in two.
    pub racks: bool,
}

/// The retention of finished workloads in random plans that have one:
/// shorter than most runs, longer than the client's polling interval, and
/// longer than a submission can be held up by a fault and still arrive
/// (a partition of up to 8 s): a copy that arrives after its workload was
/// removed is a new submission. At 3 s, seed 19 on five nodes applied a
/// copy held by a partitioned leader after the first had run and gone.
pub const SIM_RETENTION: Duration = Duration::from_secs(10);

impl Plan {
    /// A plan with `config`, no workloads and no faults.
    pub fn empty(seed: u64, nodes: u64, config: String) -> Plan {
        Plan {
            seed,
            nodes,
            scenario: None,
            config,
            workloads: Vec::new(),
            after: Vec::new(),
            at_end: Vec::new(),
            races: Vec::new(),
            faults: Vec::new(),
            agent_faults: Vec::new(),
            drawn: None,
            may_preempt: false,
            basic: false,
            wait_for_ready: true,
            finished_retention: None,
            agent_nodes: false,
            node_faults: Vec::new(),
            keep_agent: None,
            racks: false,
        }
    }

    /// The same plan with only the basic control-plane faults (a leader
    /// partition, a crash of the leader or a follower) and the agent
    /// faults: the rarer second faults are dropped. The draws are the
    /// same, so the workloads, cancels and timings do not change.
    pub fn basic_faults(mut self) -> Plan {
        self.faults
            .retain(|f| matches!(f, Fault::PartitionLeader { .. } | Fault::CrashNode { .. }));
        self.basic = true;
        self
    }

    /// The random plan of `seed` on `nodes` control-plane nodes: 30
    /// workloads of 1-3 GPUs, cancels, quota changes during contention,
    /// a control-plane fault, an agent fault, (in about half the seeds) a
    /// second fault of the rarer kinds, and then three quota cuts raced
    /// against submissions ([`Race`]).
    pub fn from_seed(seed: u64, nodes: u64) -> Plan {
        Plan::drawn(seed, nodes, true)
    }

    /// [`Plan::from_seed`], or without `racks` the plan the seed drew
    /// before racks were drawn (a seed that once failed replays as it
    /// did).
    pub fn drawn(seed: u64, nodes: u64, racks: bool) -> Plan {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut plan = Plan::empty(seed, nodes, base_config());
        // From the seed itself, not a draw: every other draw of a seed
        // stays as it was before retention existed.
        plan.finished_retention = (seed % 2 == 1).then_some(SIM_RETENTION);
        plan.workloads = (0..WORKLOADS)
            .map(|i| {
                let gpus = rng.gen_range(1..=3);
                let duration_s = rng.gen_range(1..=4);
                let delay_ms = rng.gen_range(0..300);
                PlannedWorkload::simple(format!("w-{i:02}"), gpus, duration_s, delay_ms)
            })
            .collect();
        // The order of the draws below is kept as it was when each kind
        // of fault was added, so older seeds still draw the same.
        let first = if rng.gen_bool(0.5) {
            Fault::PartitionLeader {
                at: Duration::from_millis(rng.gen_range(1_500..6_000)),
                heal_after: Duration::from_millis(rng.gen_range(1_000..8_000)),
            }
        } else if rng.gen_bool(0.5) {
            Fault::CrashNode {
                at: Duration::from_millis(rng.gen_range(1_500..6_000)),
                target: if rng.gen_bool(0.5) {
                    CrashTarget::Leader
                } else {
                    CrashTarget::Follower(rng.gen_range(0..2))
                },
                restart_after: Duration::from_millis(rng.gen_range(500..6_000)),
            }
        } else {
            Fault::None
        };
        if first != Fault::None {
            plan.faults.push(first);
        }
        let agent_fault = AgentFault::draw(&mut rng);
        if agent_fault != AgentFault::None {
            plan.agent_faults.push(agent_fault);
        }
        let cancels: Vec<usize> = (0..WORKLOADS).filter(|_| rng.gen_ratio(1, 8)).collect();
        if let Some(second) = draw_second_fault(&mut rng) {
            plan.faults.push(second);
        }
        // Cancel each planned victim right after the submission three
        // places later (or at the end); every fifth submission the quota
        // drops to 6 GPUs or returns to 8, so admission decisions computed
        // just before a drop reach apply() just after it.
        for i in 0..WORKLOADS {
            if let Some(victim) = i.checked_sub(3).filter(|v| cancels.contains(v)) {
                plan.after.push((i, Action::Cancel(victim)));
            }
            if i % 5 == 4 {
                let gpus = if (i / 5) % 2 == 0 { 6 } else { 8 };
                plan.after.push((i, Action::Apply(config_with_quota(gpus))));
            }
        }
        plan.at_end.push(Action::Apply(config_with_quota(8)));
        for &victim in cancels.iter().filter(|&&v| v + 3 >= WORKLOADS) {
            plan.at_end.push(Action::Cancel(victim));
        }
        plan.draw_config();
        plan.add_races();
        plan.add_stops();
        let mut nodes_rng = StdRng::seed_from_u64(seed ^ NODES_STREAM);
        plan.agent_nodes = nodes_rng.gen_ratio(1, 2);
        if plan.agent_nodes {
            plan.node_faults
                .extend(crate::node_faults::NodeFault::draw(&mut nodes_rng));
            // Drawn last, so every earlier draw of the seed stays.
            if nodes_rng.gen_ratio(1, 3) {
                plan.keep_agent = Some(nodes_rng.gen_range(1..=crate::agents::AGENTS));
            }
            let mut topology_rng = StdRng::seed_from_u64(seed ^ TOPOLOGY_STREAM);
            if topology_rng.gen_ratio(1, 2) && racks {
                plan.add_racks(&mut topology_rng);
            }
        }
        plan
    }

    /// Puts the nodes in racks ([`Plan::racks`]): every configuration
    /// the plan applies names the Topology, and about half the GPU
    /// workloads of two or more GPUs (racing ones aside) become gangs
    /// with a topology request. A gang asks for no more GPUs than the
    /// workload did, and each request fits a node or rack of one agent
    /// ([`crate::agents::AGENT_NODES`]), so every workload can still run.
    fn add_racks(&mut self, rng: &mut StdRng) {
        self.racks = true;
        self.config = with_racks(&self.config);
        for action in self
            .after
            .iter_mut()
            .map(|(_, a)| a)
            .chain(&mut self.at_end)
        {
            if let Action::Apply(yaml) = action {
                *yaml = with_racks(yaml);
            }
        }
        for i in 0..self.workloads.len() {
            if self.is_racing(i) {
                continue;
            }
            let w = &mut self.workloads[i];
            let [ps] = w.pod_sets.as_mut_slice() else {
                continue;
            };
            if ps.gpus < 2 || ps.count != 1 || !rng.gen_ratio(1, 2) {
                continue;
            }
            let gpus = ps.gpus;
            *ps = match (gpus, rng.gen_range(0..4)) {
                (4, 0) => PlannedPodSet {
                    topology: Some(PlannedTopology::Slices {
                        level: HOSTNAME_LABEL,
                        size: 2,
                    }),
                    ..PlannedPodSet::gpu(4, 1)
                },
                (_, pick) => PlannedPodSet {
                    topology: Some(match pick {
                        0 | 1 => PlannedTopology::Required(RACK_LABEL),
                        2 => PlannedTopology::Preferred(RACK_LABEL),
                        _ => PlannedTopology::Required(HOSTNAME_LABEL),
                    }),
                    ..PlannedPodSet::gpu(2, gpus / 2)
                },
            };
        }
    }

    /// `yaml` as this plan applies it: with its Topology where it has
    /// racks.
    pub fn shaped(&self, yaml: &str) -> String {
        if self.racks {
            with_racks(yaml)
        } else {
            yaml.to_string()
        }
    }

    /// In one seed in three, from the seed's own stream (every other draw
    /// stays as it was): some workloads are stopped right after the next
    /// submission and resumed three submissions later, so a stop meets a
    /// workload pending, admitted, running or stopping, under the plan's
    /// faults. Cancelled and racing workloads are left alone.
    fn add_stops(&mut self) {
        let mut rng = StdRng::seed_from_u64(self.seed ^ STOP_STREAM);
        if !rng.gen_ratio(1, 3) {
            return;
        }
        let cancels = self.cancels();
        // The main sequence: racing workloads come after it, and actions
        // "after" one of them would never run.
        let n = (0..self.workloads.len())
            .take_while(|&i| !self.is_racing(i))
            .count();
        for v in 0..n {
            if cancels.contains(&v) || !rng.gen_ratio(1, 6) {
                continue;
            }
            for (after, action) in [(v + 1, Action::Stop(v)), (v + 4, Action::Resume(v))] {
                if after < n {
                    self.after.push((after, action));
                } else {
                    self.at_end.push(action);
                }
            }
        }
    }

    /// Indices of the workloads the client stops (and resumes).
    pub fn stops(&self) -> BTreeSet<usize> {
        self.after
            .iter()
            .map(|(_, a)| a)
            .chain(&self.at_end)
            .filter_map(|a| match a {
                Action::Stop(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    /// Replaces the single 8-GPU queue with a drawn configuration and
    /// workload mix ([`crate::draw`]), from the configuration's own
    /// stream: quota changes cut a drawn queue's GPUs instead, and the
    /// workloads take a drawn queue, size, resource and priority, many
    /// of them in one burst. Durations, cancels and faults stay.
    fn draw_config(&mut self) {
        let mut rng = crate::draw::stream(self.seed);
        let mut drawn = crate::draw::DrawnConfig::draw(&mut rng);
        drawn.draw_fair_sharing(&mut StdRng::seed_from_u64(
            self.seed ^ crate::draw::FAIR_SHARING_STREAM,
        ));
        self.config = drawn.render(None);
        self.may_preempt = drawn.may_preempt();
        for w in &mut self.workloads {
            let Some(d) = drawn.draw_workload(&mut rng) else {
                continue;
            };
            w.queue = format!("lq-{}", d.queue + 1);
            w.priority_class = d.priority_class.map(String::from);
            w.pod_sets = vec![if d.resource == crate::agents::MIG {
                PlannedPodSet {
                    count: 1,
                    gpus: 0,
                    mig: d.amount,
                    topology: None,
                }
            } else {
                PlannedPodSet::gpu(1, d.amount)
            }];
            if d.burst {
                w.delay_ms = 0;
            }
        }
        let mut cut_next = true;
        for (_, action) in &mut self.after {
            if let Action::Apply(yaml) = action {
                let queue = rng.gen_range(0..drawn.queues.len());
                let nominal = drawn.queues[queue].gpu.nominal;
                *yaml = if cut_next {
                    drawn.render(Some((queue, nominal / 2)))
                } else {
                    drawn.render(None)
                };
                cut_next = !cut_next;
            }
        }
        for action in &mut self.at_end {
            if let Action::Apply(yaml) = action {
                *yaml = drawn.render(None);
            }
        }
        // The races cut team-a's quota, a queue of their own: create it
        // before they start (a cut racing a submission must find its
        // LocalQueue there, as in the single-queue plans).
        self.at_end.push(Action::Apply(config_with_quota(8)));
        self.drawn = Some(drawn);
    }

    /// Appends [`RACES`] races, each with a workload of its own (one run
    /// of a second, 3 or 4 GPUs against a cut to fewer), drawn from the
    /// races' own stream of the seed.
    fn add_races(&mut self) {
        let mut rng = StdRng::seed_from_u64(self.seed ^ RACE_STREAM);
        for k in 0..RACES {
            let gpus = rng.gen_range(3..=4);
            let race = Race {
                workload: self.workloads.len(),
                cut_to: rng.gen_range(1..gpus),
                lead: Duration::from_millis(rng.gen_range(0..8)),
                node: rng.gen_range(0..self.nodes as usize),
            };
            self.workloads
                .push(PlannedWorkload::simple(format!("race-{k}"), gpus, 1, 0));
            self.races.push(race);
        }
    }

    /// Whether the workload at `index` is submitted in a race, not in the
    /// main sequence.
    pub fn is_racing(&self, index: usize) -> bool {
        self.races.iter().any(|r| r.workload == index)
    }

    /// Indices of the workloads the client cancels.
    pub fn cancels(&self) -> BTreeSet<usize> {
        self.after
            .iter()
            .map(|(_, a)| a)
            .chain(&self.at_end)
            .filter_map(|a| match a {
                Action::Cancel(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    /// One line naming the scenario and every fault.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(s) = self.scenario {
            parts.push(format!("scenario {s}"));
        }
        if self.nodes != 3 {
            parts.push(format!("{} nodes", self.nodes));
        }
        if self.agent_nodes {
            parts.push("clusters report nodes".into());
        }
        if let Some(n) = self.keep_agent {
            parts.push(format!("cluster of a{n} keeps work on loss"));
        }
        if self.racks {
            let gangs = self
                .workloads
                .iter()
                .filter(|w| w.pod_sets.iter().any(|p| p.topology.is_some()))
                .count();
            parts.push(format!("nodes in racks, {gangs} gangs with topology"));
        }
        if let Some(fs) = self.drawn.as_ref().and_then(|d| d.fair_sharing.as_ref()) {
            let strategies = if fs.strategies.is_empty() {
                "default strategies".to_string()
            } else {
                fs.strategies.join("+")
            };
            parts.push(format!("fair sharing ({strategies})"));
        }
        if self.faults.is_empty() {
            parts.push("no fault".into());
        }
        parts.extend(self.faults.iter().map(ToString::to_string));
        if self.agent_faults.is_empty() {
            parts.push("no agent fault".into());
        }
        parts.extend(self.agent_faults.iter().map(ToString::to_string));
        parts.extend(self.node_faults.iter().map(ToString::to_string));
        let cancels = self.cancels();
        if !cancels.is_empty() {
            parts.push(format!("cancels {cancels:?}"));
        }
        let stops = self.stops();
        if !stops.is_empty() {
            parts.push(format!("stops and resumes {stops:?}"));
        }
        if !self.races.is_empty() {
            let races: Vec<String> = self
                .races
                .iter()
                .map(|r| {
                    format!(
                        "{} GPUs vs a cut to {} ({} ms)",
                        self.workloads[r.workload].gpus(),
                        r.cut_to,
                        r.lead.as_millis()
                    )
                })
                .collect();
            parts.push(format!("races {}", races.join(", ")));
        }
        parts.join("; ")
    }
}

/// The rarer faults, in about half the seeds, starting while or after
/// the first fault plays out.
fn draw_second_fault(rng: &mut StdRng) -> Option<Fault> {
    if !rng.gen_bool(0.5) {
        return None;
    }
    let at = Duration::from_millis(rng.gen_range(3_000..12_000));
    let length = Duration::from_millis(rng.gen_range(500..6_000));
    Some(match rng.gen_range(0..8) {
        0 => Fault::Split {
            at,
            heal_after: length,
            kind: SplitKind::LeaderInMinority,
        },
        1 => Fault::Split {
            at,
            heal_after: length,
            kind: SplitKind::FollowersInMinority,
        },
        2 => Fault::OneWay {
            at,
            heal_after: length,
            direction: if rng.gen_bool(0.5) {
                OneWayDirection::LeaderCannotSend
            } else {
                OneWayDirection::LeaderCannotHear
            },
        },
        3 => Fault::LeaderMidBatch {
            at,
            strike: MidBatch::Crash(length),
        },
        4 => Fault::LeaderMidBatch {
            at,
            strike: MidBatch::Isolate(length),
        },
        5 => Fault::CrashAll {
            at,
            restart_after: length,
        },
        6 => Fault::Network {
            at,
            lasting: length * 2,
            weather: Weather::Loss {
                fail: rng.gen_range(1..=3),
                repair: rng.gen_range(20..=200),
            },
        },
        _ => Fault::Network {
            at,
            lasting: length * 2,
            weather: Weather::Slow {
                max_latency: Duration::from_millis(rng.gen_range(50..400)),
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_follow_the_seed() {
        assert_eq!(Plan::from_seed(7, 3), Plan::from_seed(7, 3));
        assert_ne!(Plan::from_seed(7, 3), Plan::from_seed(8, 3));
        let plan = Plan::from_seed(7, 3);
        assert_eq!(plan.workloads.len(), WORKLOADS + RACES);
        assert!(plan.workloads[..WORKLOADS].iter().all(|w| {
            let size = w.gpus() + w.mig_slices();
            (1..=4).contains(&size) && (1..=4).contains(&w.duration_s)
        }));
    }

    #[test]
    fn races_come_after_the_main_sequence_and_cut_below_the_workload() {
        for seed in 0..50 {
            let plan = Plan::from_seed(seed, 3);
            assert_eq!(plan.races.len(), RACES);
            for (k, race) in plan.races.iter().enumerate() {
                assert_eq!(race.workload, WORKLOADS + k);
                assert!(plan.is_racing(race.workload));
                let gpus = plan.workloads[race.workload].gpus();
                // Fits the quota before the cut, not after it.
                assert!(u64::from(race.cut_to) < gpus && gpus <= 8);
                assert!(race.node < 3);
            }
            assert!(!plan.is_racing(0));
        }
    }

    #[test]
    fn seeds_draw_every_fault() {
        let faults: Vec<Fault> = (0..200)
            .flat_map(|s| Plan::from_seed(s, 3).faults)
            .collect();
        let has = |pred: &dyn Fn(&Fault) -> bool| faults.iter().any(pred);
        assert!((0..40).any(|s| Plan::from_seed(s, 3).faults.is_empty()));
        assert!(has(&|f| matches!(f, Fault::PartitionLeader { .. })));
        assert!(has(&|f| matches!(
            f,
            Fault::CrashNode {
                target: CrashTarget::Leader,
                ..
            }
        )));
        assert!(has(&|f| matches!(
            f,
            Fault::CrashNode {
                target: CrashTarget::Follower(_),
                ..
            }
        )));
        for kind in [SplitKind::LeaderInMinority, SplitKind::FollowersInMinority] {
            assert!(has(
                &|f| matches!(f, Fault::Split { kind: k, .. } if *k == kind)
            ));
        }
        for d in [
            OneWayDirection::LeaderCannotSend,
            OneWayDirection::LeaderCannotHear,
        ] {
            assert!(has(
                &|f| matches!(f, Fault::OneWay { direction, .. } if *direction == d)
            ));
        }
        assert!(has(&|f| matches!(
            f,
            Fault::LeaderMidBatch {
                strike: MidBatch::Crash(_),
                ..
            }
        )));
        assert!(has(&|f| matches!(
            f,
            Fault::LeaderMidBatch {
                strike: MidBatch::Isolate(_),
                ..
            }
        )));
        assert!(has(&|f| matches!(f, Fault::CrashAll { .. })));
        assert!(has(&|f| matches!(
            f,
            Fault::Network {
                weather: Weather::Loss { .. },
                ..
            }
        )));
        assert!(has(&|f| matches!(
            f,
            Fault::Network {
                weather: Weather::Slow { .. },
                ..
            }
        )));
    }

    #[test]
    fn quota_changes_and_cancels_are_planned() {
        let plan = Plan::from_seed(7, 3);
        let applies = plan
            .after
            .iter()
            .filter(|(_, a)| matches!(a, Action::Apply(_)))
            .count();
        assert_eq!(applies, WORKLOADS / 5);
        let drawn = plan
            .drawn
            .as_ref()
            .expect("random plans draw a configuration");
        assert!(matches!(plan.at_end.first(), Some(Action::Apply(c)) if *c == drawn.render(None)));
        assert!(config_with_quota(6).contains("nominalQuota: 6"));
    }

    /// About one plan in four puts its nodes in racks; every manifest it
    /// applies names the Topology and imports; gangs ask for no more GPUs
    /// than the workload drew, in requests every agent's nodes can hold.
    #[test]
    fn plans_with_racks_apply_their_topology_and_draw_gangs_that_fit() {
        let mut with_racks = 0;
        let mut kinds = BTreeSet::new();
        for seed in 0..200 {
            let plan = Plan::from_seed(seed, 3);
            if !plan.racks {
                assert!(plan
                    .workloads
                    .iter()
                    .all(|w| w.pod_sets.iter().all(|p| p.topology.is_none())));
                continue;
            }
            assert!(plan.agent_nodes, "seed {seed}");
            with_racks += 1;
            let applied = std::iter::once(&plan.config).chain(
                plan.after
                    .iter()
                    .map(|(_, a)| a)
                    .chain(&plan.at_end)
                    .filter_map(|a| match a {
                        Action::Apply(yaml) => Some(yaml),
                        _ => None,
                    }),
            );
            for yaml in applied.chain([&plan.shaped(&config_with_quota(3))]) {
                assert!(
                    yaml.contains(&format!("topologyName: {TOPOLOGY}")),
                    "seed {seed}"
                );
                assert!(crate::draw::parse(yaml).is_some(), "seed {seed}:\n{yaml}");
            }
            for w in &plan.workloads {
                for p in w.pod_sets.iter().filter(|p| p.topology.is_some()) {
                    assert!(p.count * p.gpus <= 4, "seed {seed}: {p:?}");
                    kinds.insert(match p.topology {
                        Some(PlannedTopology::Required(_)) => "required",
                        Some(PlannedTopology::Preferred(_)) => "preferred",
                        _ => "slices",
                    });
                }
            }
        }
        assert!((25..80).contains(&with_racks), "{with_racks} of 200");
        assert_eq!(kinds.len(), 3, "required, preferred and slices all drawn");
    }
}
