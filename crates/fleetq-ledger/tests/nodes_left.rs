//! A node that leaves under running pods (issue 26, item 4): handled like
//! a lost cluster for the workloads on it, by the cluster's lease policy,
//! and never refused or silent.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetq_ledger::{
    AdmitBatch, Command, CycleId, LeasePolicy, Ledger, Phase, Request, Response, StatusReport,
    Submission, WorkloadState,
};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, Node, Quantity, Timestamp};
use fleetq_scheduler::schedule;

const GPU: &str = "nvidia.com/gpu";

fn queue() -> String {
    fleetq_testkit::kueue::one_queue("h100", "team", "q", 16)
}

fn node(name: &str, unschedulable: bool) -> Node {
    Node {
        name: name.into(),
        labels: BTreeMap::from([("kubernetes.io/hostname".into(), name.into())]),
        flavor: "h100".into(),
        allocatable: BTreeMap::from([(GPU.into(), Quantity::units(4))]),
        unschedulable,
    }
}

/// Cluster east with `nodes` of 4 GPUs; its totals count the schedulable.
fn east(nodes: Vec<Node>) -> Cluster {
    let gpus = 4 * nodes.iter().filter(|n| !n.unschedulable).count() as u64;
    Cluster {
        name: "east".into(),
        labels: BTreeMap::new(),
        capacity: BTreeMap::from([(
            "h100".into(),
            BTreeMap::from([(GPU.into(), Quantity::units(gpus))]),
        )]),
        state: ClusterState::Ready,
        nodes,
    }
}

struct Driver {
    ledger: Ledger,
    now: u64,
    seq: u64,
    policy: LeasePolicy,
}

impl Driver {
    fn new(policy: LeasePolicy) -> Driver {
        let mut ledger = Ledger::default();
        ledger.set_invariant_checks(true);
        let mut d = Driver {
            ledger,
            now: 1_000,
            seq: 0,
            policy,
        };
        let objects: Vec<Object> = import_manifests(&queue())
            .expect("manifests import")
            .into_iter()
            .map(|doc| doc.object)
            .collect();
        assert!(d.apply(Command::ApplyObjects { objects }).is_ok());
        d.register(vec![node("a", false), node("b", false)]);
        d
    }

    fn apply(&mut self, command: Command) -> Response {
        self.now += 10;
        let response = self.ledger.apply(&Request {
            at: Timestamp(self.now),
            command,
        });
        let violations = self.ledger.violations();
        assert!(violations.is_empty(), "{violations:?}");
        response
    }

    fn register(&mut self, nodes: Vec<Node>) {
        let response = self.apply(Command::RegisterCluster {
            cluster: east(nodes),
            lease_policy: self.policy,
        });
        assert!(response.is_ok(), "{response:?}");
    }

    /// Submits `name` (one pod of 4 GPUs), admits what fits and starts it
    /// if it was.
    fn run(&mut self, name: &str) {
        let workload = fleetq_model::Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: "q".into(),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests: BTreeMap::from([(GPU.to_string(), Quantity::units(4))]),
                    topology_request: None,
                }],
                ..WorkloadSpec::default()
            },
        };
        self.apply(Command::SubmitWorkloads {
            submissions: vec![Submission {
                request_id: None,
                workload: Arc::new(workload),
            }],
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        });
        self.cycle();
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("exists");
        if record.reservation.is_none() {
            return; // it waits
        }
        self.report(name, Phase::Running);
    }

    fn cycle(&mut self) {
        let d = schedule(
            self.ledger.snapshot(),
            Timestamp(self.now),
            self.ledger.scheduler_config(),
        );
        self.seq += 1;
        let batch = AdmitBatch {
            cycle: CycleId {
                term: 1,
                seq: self.seq,
            },
            admissions: d.admissions,
            preemptions: d.preemptions,
            reasons: d.pending.into_iter().collect(),
            queue_reasons: d.queue_reasons.into_iter().collect(),
        };
        assert!(self.apply(Command::AdmitBatch(batch)).is_ok());
    }

    fn report(&mut self, name: &str, phase: Phase) {
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("exists");
        let r = record.reservation.as_ref().expect("reserved");
        let report = StatusReport {
            cluster: r.assignment.cluster.clone(),
            workload: record.id,
            epoch: r.epoch,
            phase,
            message: String::new(),
        };
        assert!(self
            .apply(Command::ReportStatus {
                reports: vec![report]
            })
            .is_ok());
    }

    fn node_of(&self, name: &str) -> String {
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("exists");
        let r = record.reservation.as_ref().expect("reserved");
        r.assignment.pod_sets[0].nodes[0].node.clone()
    }

    fn state(&self, name: &str) -> WorkloadState {
        self.ledger
            .workload_by_name("default", name)
            .expect("exists")
            .state
    }

    fn last_event(&self, name: &str) -> String {
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("exists");
        record.history.last().expect("history").message.clone()
    }

    fn stopping(&self, name: &str) -> bool {
        let record = self
            .ledger
            .workload_by_name("default", name)
            .expect("exists");
        record
            .reservation
            .as_ref()
            .is_some_and(|r| r.stopping.is_some())
    }

    fn nodes(&self) -> Vec<(String, bool)> {
        self.ledger.state().clusters["east"]
            .cluster
            .nodes
            .iter()
            .map(|n| (n.name.clone(), n.unschedulable))
            .collect()
    }
}

#[test]
fn under_fence_a_node_gone_evicts_its_workloads_then_is_forgotten() {
    let mut d = Driver::new(LeasePolicy::Fence);
    d.run("one");
    d.run("two");
    let (gone, stays) = (d.node_of("one"), d.node_of("two"));
    assert_ne!(gone, stays);
    // The agent stops reporting `one`'s node: 4 GPUs in total, 8 assigned.
    // Refused before, as "capacity below what is already assigned".
    d.register(vec![node(&stays, false)]);
    assert!(d.stopping("one"), "{}", d.last_event("one"));
    assert!(!d.stopping("two"));
    let event = d.last_event("one");
    assert!(
        event.contains(&format!(
            "node {gone} of cluster east is no longer reported under it"
        )) && event.contains("evicted (lease policy Fence)"),
        "{event}"
    );
    assert!(d.nodes().contains(&(gone.clone(), true)), "{:?}", d.nodes());
    // Nothing new goes there meanwhile.
    d.run("three");
    assert_eq!(d.state("three"), WorkloadState::Pending);
    // Its executor confirms the stop: requeued, and the ghost is forgotten
    // at the agent's next report.
    d.report("one", Phase::Stopped);
    assert_eq!(d.state("one"), WorkloadState::Pending);
    d.register(vec![node(&stays, false)]);
    assert_eq!(d.nodes(), vec![(stays.clone(), false)]);
    // The node comes back: the queue runs again.
    d.register(vec![node("a", false), node("b", false)]);
    d.cycle();
    let admitted = ["one", "three"]
        .iter()
        .filter(|n| d.state(n) == WorkloadState::Admitted)
        .count();
    assert_eq!(admitted, 1);
    let evictions = &d.ledger.counters().evictions;
    assert_eq!(evictions["team"]["NodeLost"], 1, "{evictions:?}");
}

#[test]
fn under_keep_a_cordoned_node_keeps_its_workloads_running_and_says_so() {
    let mut d = Driver::new(LeasePolicy::Keep);
    d.run("one");
    let on = d.node_of("one");
    let other = if on == "a" { "b" } else { "a" };
    d.register(vec![node(&on, true), node(other, false)]);
    assert!(!d.stopping("one"));
    assert_eq!(d.state("one"), WorkloadState::Running);
    let event = d.last_event("one");
    assert!(
        event.contains(&format!(
            "node {on} of cluster east was cordoned or went NotReady under it; kept running (lease policy Keep)"
        )),
        "{event}"
    );
    // Said once, not at every report.
    d.register(vec![node(&on, true), node(other, false)]);
    assert_eq!(d.last_event("one"), event);
    // The cordoned node takes nothing new.
    d.run("two");
    assert_eq!(d.node_of("two"), other);
    d.run("three");
    assert_eq!(d.state("three"), WorkloadState::Pending);
}
