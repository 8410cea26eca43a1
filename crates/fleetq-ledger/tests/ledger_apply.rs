//! Behaviour of `Ledger::apply` (docs/architecture.md §3-6): configuration, idempotent
//! submission, re-validated admission batches, status reports and their
//! epochs, cancellation, preemption, leases, reconciliation, snapshots.
//!
//! Admissions come from the real scheduler run over the ledger's own
//! snapshot, exactly as the leader's admission cycle produces them.

use std::collections::BTreeMap;

use fleetq_ledger::{
    AdmitBatch, AdmitOutcome, Command, CycleId, Epoch, LeasePolicy, Ledger, LedgerConfig, Outcome,
    Phase, Request, Response, RunningWorkload, StatusReport, Submission, SubmitResult,
    WorkloadState,
};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{Cluster, ClusterState, FieldError, FlavorResource, Quantity, Timestamp};
use fleetq_scheduler::decision::PodSetAssignment;
use fleetq_scheduler::{
    schedule, Admission, Assignment, PendingReason, Preemption, PreemptionReason, ReasonKind,
    WorkloadId,
};

const FLAVOR: &str = "h100-80gb";
const GPU: &str = "nvidia.com/gpu";

/// One 8-GPU ClusterQueue that preempts lower priority, its LocalQueue in
/// namespace `default`, and two priority classes.
const CONFIG: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100-80gb
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: team-a
spec:
  clusterQueue: team-a
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: low
value: 10
"#;

fn objects(yaml: &str) -> Vec<Object> {
    import_manifests(yaml)
        .unwrap_or_else(|e| panic!("test manifests import: {e:?}"))
        .into_iter()
        .map(|d| d.object)
        .collect()
}

fn cluster(name: &str, gpus: u64) -> Cluster {
    let mut capacity = BTreeMap::new();
    capacity.insert(
        FLAVOR.to_string(),
        BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
    );
    Cluster {
        nodes: Vec::new(),
        name: name.to_string(),
        labels: BTreeMap::new(),
        capacity,
        state: ClusterState::Ready,
    }
}

fn workload(name: &str, gpus: u64, priority_class: Option<&str>) -> fleetq_model::Workload {
    fleetq_model::Workload {
        namespace: "default".into(),
        name: name.into(),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: "team-a".into(),
            priority_class_name: priority_class.map(str::to_string),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                min_count: None,
                requests: BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
                topology_request: None,
            }],
            ..WorkloadSpec::default()
        },
    }
}

/// A ledger driven the way the leader drives it: stamped commands, cycles
/// from the real scheduler, and the invariants checked after every step.
struct Harness {
    ledger: Ledger,
    /// Leader clock, milliseconds.
    now: u64,
    term: u64,
    seq: u64,
}

impl Harness {
    fn empty() -> Harness {
        Harness {
            ledger: Ledger::default(),
            now: 1_000_000,
            term: 1,
            seq: 0,
        }
    }

    /// The standard configuration and one 16-GPU cluster `east`.
    fn new() -> Harness {
        Harness::with_cluster(LeasePolicy::Fence)
    }

    fn with_cluster(policy: LeasePolicy) -> Harness {
        let mut h = Harness::empty();
        let r = h.apply(Command::ApplyObjects {
            objects: objects(CONFIG),
        });
        assert!(r.is_ok(), "{r:?}");
        let r = h.apply(Command::RegisterCluster {
            cluster: cluster("east", 16),
            lease_policy: policy,
        });
        assert!(r.is_ok(), "{r:?}");
        h
    }

    fn apply(&mut self, command: Command) -> Response {
        self.now += 1_000;
        let response = self.ledger.apply(&Request {
            at: Timestamp(self.now),
            command,
        });
        let violations = self.ledger.violations();
        assert!(violations.is_empty(), "{violations:?}");
        response
    }

    fn hash(&self) -> String {
        self.ledger.state_hash()
    }

    fn submit(&mut self, name: &str, gpus: u64, pc: Option<&str>) -> WorkloadId {
        match self
            .submit_all(vec![Submission {
                request_id: None,
                workload: workload(name, gpus, pc).into(),
            }])
            .as_slice()
        {
            [SubmitResult::Created { id }] => *id,
            other => panic!("submission of {name} not created: {other:?}"),
        }
    }

    fn submit_all(&mut self, submissions: Vec<Submission>) -> Vec<SubmitResult> {
        let r = self.apply(Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        });
        assert!(r.is_ok(), "{r:?}");
        match r.outcome {
            Outcome::Submitted { results, .. } => results,
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// Runs the scheduler over the ledger's snapshot; the batch it would
    /// propose with the next cycle id.
    fn decide(&mut self) -> AdmitBatch {
        let decisions = schedule(
            self.ledger.snapshot(),
            Timestamp(self.now),
            self.ledger.scheduler_config(),
        );
        self.seq += 1;
        AdmitBatch {
            cycle: CycleId {
                term: self.term,
                seq: self.seq,
            },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        }
    }

    fn admit(&mut self, batch: AdmitBatch) -> AdmitOutcome {
        let r = self.apply(Command::AdmitBatch(batch));
        assert!(r.is_ok(), "{r:?}");
        match r.outcome {
            Outcome::Admitted(o) => o,
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// One admission cycle, decided and applied.
    fn cycle(&mut self) -> (AdmitBatch, AdmitOutcome) {
        let batch = self.decide();
        let outcome = self.admit(batch.clone());
        (batch, outcome)
    }

    fn state_of(&self, id: WorkloadId) -> WorkloadState {
        self.ledger.workload(id).expect("workload exists").state
    }

    fn epoch(&self, id: WorkloadId) -> Epoch {
        self.ledger
            .workload(id)
            .and_then(|w| w.reservation.as_ref())
            .map(|r| r.epoch)
            .unwrap_or_else(|| panic!("workload {id} holds no reservation"))
    }

    fn cluster_of(&self, id: WorkloadId) -> String {
        self.ledger
            .workload(id)
            .and_then(|w| w.reservation.as_ref())
            .map(|r| r.assignment.cluster.clone())
            .unwrap_or_else(|| panic!("workload {id} holds no reservation"))
    }

    fn report(&mut self, id: WorkloadId, phase: Phase) -> (u32, u32) {
        let report = StatusReport {
            cluster: self.cluster_of(id),
            workload: id,
            epoch: self.epoch(id),
            phase,
            message: String::new(),
        };
        self.report_raw(report)
    }

    fn report_raw(&mut self, report: StatusReport) -> (u32, u32) {
        let r = self.apply(Command::ReportStatus {
            reports: vec![report],
        });
        assert!(r.is_ok(), "{r:?}");
        match r.outcome {
            Outcome::Reported { applied, stale } => (applied, stale),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// GPUs charged to ClusterQueue team-a, in whole units.
    fn used(&self) -> u64 {
        let snap = self.ledger.snapshot();
        let tree = snap.tree();
        let node = tree.cluster_queue("team-a").expect("team-a exists");
        let fr = tree
            .cell(&FlavorResource::new(FLAVOR, GPU))
            .expect("quota cell");
        Quantity::from_milli(snap.usage().get(node, fr)).units_ceil()
    }

    /// GPUs assigned on a cluster, in whole units.
    fn on_cluster(&self, name: &str) -> u64 {
        let snap = self.ledger.snapshot();
        let fr = snap
            .tree()
            .cell(&FlavorResource::new(FLAVOR, GPU))
            .expect("quota cell");
        let c = snap.cluster_table().index_of(name).expect("cluster");
        Quantity::from_milli(snap.cluster_usage().get(c, fr)).units_ceil()
    }

    fn pending(&self, id: WorkloadId) -> bool {
        self.ledger.snapshot().get_pending(id).is_some()
    }
}

fn admitted_ids(batch: &AdmitBatch) -> Vec<WorkloadId> {
    batch.admissions.iter().map(|a| a.workload).collect()
}

fn paths(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.path.as_str()).collect()
}

fn changes(r: &Response) -> BTreeMap<String, String> {
    match &r.outcome {
        Outcome::Applied { changes } => changes.iter().cloned().collect(),
        other => panic!("expected Applied, got {other:?} ({:?})", r.errors),
    }
}

// ----- ApplyObjects / DeleteObject ------------------------------------------

#[test]
fn apply_objects_reports_created_unchanged_and_configured() {
    let mut h = Harness::empty();
    let r = h.apply(Command::ApplyObjects {
        objects: objects(CONFIG),
    });
    let c = changes(&r);
    assert_eq!(c.len(), 5, "{c:?}");
    assert!(c.values().all(|v| v == "created"), "{c:?}");
    assert_eq!(c["ClusterQueue/team-a"], "created");
    assert_eq!(c["LocalQueue/default/team-a"], "created");
    let hash = h.hash();

    // The same manifests again change nothing.
    let r = h.apply(Command::ApplyObjects {
        objects: objects(CONFIG),
    });
    assert!(changes(&r).values().all(|v| v == "unchanged"), "{r:?}");
    assert_eq!(h.hash(), hash);

    // A larger quota: the ClusterQueue is configured, the rest unchanged.
    let bigger = CONFIG.replace("nominalQuota: 8", "nominalQuota: 16");
    let r = h.apply(Command::ApplyObjects {
        objects: objects(&bigger),
    });
    let c = changes(&r);
    assert_eq!(c["ClusterQueue/team-a"], "configured");
    assert_eq!(c["ResourceFlavor/h100-80gb"], "unchanged");
    assert_eq!(c["WorkloadPriorityClass/high"], "unchanged");
    assert_ne!(h.hash(), hash);
    assert_eq!(
        h.ledger.state().config.cluster_queues["team-a"]
            .spec
            .resource_groups[0]
            .flavors[0]
            .resources[0]
            .nominal_quota,
        Quantity::units(16)
    );
}

#[test]
fn a_local_queue_pointing_at_a_missing_cluster_queue_is_refused_and_changes_nothing() {
    let mut h = Harness::new();
    let before = h.hash();
    let refused_before = h.ledger.counters().refused_commands;
    let r = h.apply(Command::ApplyObjects {
        objects: objects(
            r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: orphan}
spec: {clusterQueue: nowhere}
"#,
        ),
    });
    assert!(!r.is_ok());
    assert_eq!(r.outcome, Outcome::None);
    assert_eq!(paths(&r.errors), ["spec.clusterQueue"], "{:?}", r.errors);
    assert_eq!(r.errors[0].object, "LocalQueue/default/orphan");
    assert!(r.errors[0].message.contains("nowhere"), "{:?}", r.errors);
    assert_eq!(h.hash(), before);
    assert!(!h
        .ledger
        .state()
        .config
        .local_queues
        .contains_key("default/orphan"));
    assert_eq!(h.ledger.counters().refused_commands, refused_before + 1);
}

#[test]
fn a_borrowing_limit_without_a_cohort_is_refused_all_or_nothing() {
    let mut h = Harness::new();
    let before = h.hash();
    // One valid new object and one invalid change in the same command:
    // nothing of it is applied.
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: medium}
value: 500
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
        borrowingLimit: 4
"#;
    let r = h.apply(Command::ApplyObjects {
        objects: objects(yaml),
    });
    assert!(!r.is_ok());
    assert_eq!(
        paths(&r.errors),
        ["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"],
        "{:?}",
        r.errors
    );
    assert_eq!(r.errors[0].object, "ClusterQueue/team-a");
    assert_eq!(h.hash(), before);
    assert!(!h
        .ledger
        .state()
        .config
        .priority_classes
        .contains_key("medium"));
}

#[test]
fn a_workload_is_not_configuration() {
    let mut h = Harness::new();
    let before = h.hash();
    let r = h.apply(Command::ApplyObjects {
        objects: vec![Object::Workload(workload("w", 1, None))],
    });
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["kind"]);
    assert_eq!(r.errors[0].object, "Workload/default/w");
    assert_eq!(h.hash(), before);
    assert!(h.ledger.state().workloads.is_empty());
}

#[test]
fn quota_is_never_taken_from_under_admitted_work() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    h.cycle();
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
    let before = h.hash();
    let smaller = CONFIG.replace("nominalQuota: 8", "nominalQuota: 4");
    let r = h.apply(Command::ApplyObjects {
        objects: objects(&smaller),
    });
    assert!(!r.is_ok());
    assert!(
        r.errors.iter().all(|e| e.path == "spec.resourceGroups"),
        "{:?}",
        r.errors
    );
    assert_eq!(h.hash(), before);
    assert_eq!(h.used(), 8);
}

#[test]
fn a_flavor_still_charged_by_admitted_work_cannot_be_dropped_from_its_queue() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    h.cycle();
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
    assert_eq!(h.on_cluster("east"), 8);
    let before = h.hash();
    // team-a's quota moves to another flavor while a runs on h100-80gb.
    let moved = CONFIG.replace("    - name: h100-80gb\n", "    - name: a100-40gb\n")
        + r#"---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: a100-40gb
"#;
    let r = h.apply(Command::ApplyObjects {
        objects: objects(&moved),
    });
    assert!(
        !r.is_ok(),
        "a's 8 GPUs would be charged nowhere, and the queue could admit 8 more: {r:?}"
    );
    assert_eq!(paths(&r.errors), ["spec.resourceGroups"], "{:?}", r.errors);
    assert_eq!(r.errors[0].object, "ClusterQueue/team-a");
    assert!(r.errors[0].message.contains("default/a"), "{:?}", r.errors);
    assert_eq!(h.hash(), before);
    assert_eq!(h.used(), 8);
    assert_eq!(h.on_cluster("east"), 8);

    // Once a has finished, the quota can move.
    h.report(a, Phase::Succeeded);
    let r = h.apply(Command::ApplyObjects {
        objects: objects(&moved),
    });
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn delete_object_refuses_missing_objects_and_queues_in_use() {
    let mut h = Harness::new();
    let before = h.hash();
    let r = h.apply(Command::DeleteObject {
        kind: "ClusterQueue".into(),
        name: "nowhere".into(),
    });
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["metadata.name"]);
    assert_eq!(h.hash(), before);

    let a = h.submit("a", 4, None);
    h.cycle();
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
    // Remove the LocalQueue first so that only the reservation stands in
    // the way of deleting the ClusterQueue.
    let r = h.apply(Command::DeleteObject {
        kind: "LocalQueue".into(),
        name: "default/team-a".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    let before = h.hash();
    let r = h.apply(Command::DeleteObject {
        kind: "ClusterQueue".into(),
        name: "team-a".into(),
    });
    assert!(!r.is_ok());
    assert!(r.errors[0].message.contains("still hold quota"), "{r:?}");
    assert_eq!(h.hash(), before);

    // Once it finished, the queue can go.
    h.report(a, Phase::Succeeded);
    let r = h.apply(Command::DeleteObject {
        kind: "ClusterQueue".into(),
        name: "team-a".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        r.outcome,
        Outcome::Deleted {
            object: "ClusterQueue/team-a".into()
        }
    );
}

#[test]
fn a_pending_workload_whose_local_queue_vanishes_is_misconfigured_until_it_returns() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let r = h.apply(Command::DeleteObject {
        kind: "LocalQueue".into(),
        name: "default/team-a".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.state_of(a), WorkloadState::Pending);
    assert!(!h.pending(a));
    let reason = h.ledger.workload(a).and_then(|w| w.reason.clone());
    assert_eq!(reason.map(|r| r.kind), Some(ReasonKind::Misconfigured));
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());

    let r = h.apply(Command::ApplyObjects {
        objects: objects(CONFIG),
    });
    assert!(r.is_ok(), "{r:?}");
    assert!(h.pending(a));
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a]);
}

// ----- SubmitWorkloads ------------------------------------------------------

#[test]
fn submission_is_idempotent_by_request_id_and_by_name() {
    let mut h = Harness::new();
    let results = h.submit_all(vec![Submission {
        request_id: Some("req-1".into()),
        workload: workload("a", 4, None).into(),
    }]);
    let [SubmitResult::Created { id }] = results.as_slice() else {
        panic!("{results:?}");
    };
    let id = *id;
    let hash = h.hash();

    // A retry with the same request id (even with another name) is the same.
    let results = h.submit_all(vec![Submission {
        request_id: Some("req-1".into()),
        workload: workload("a-retry", 4, None).into(),
    }]);
    assert_eq!(results, [SubmitResult::Existing { id }]);
    // The same namespace/name under a new request id is the same too.
    let results = h.submit_all(vec![Submission {
        request_id: Some("req-2".into()),
        workload: workload("a", 4, None).into(),
    }]);
    assert_eq!(results, [SubmitResult::Existing { id }]);
    assert_eq!(h.hash(), hash);
    assert_eq!(h.ledger.state().workloads.len(), 1);

    // Within one command: the second of two equal names is the first.
    let results = h.submit_all(vec![
        Submission {
            request_id: None,
            workload: workload("b", 1, None).into(),
        },
        Submission {
            request_id: None,
            workload: workload("b", 1, None).into(),
        },
    ]);
    let [SubmitResult::Created { id: b }, SubmitResult::Existing { id: b2 }] = results.as_slice()
    else {
        panic!("{results:?}");
    };
    assert_eq!(b, b2);
    assert!(*b > id, "ids increase in submission order");
    let record = h.ledger.workload_by_name("default", "b").expect("b exists");
    assert_eq!(record.id, *b);
    assert_eq!(record.state, WorkloadState::Pending);
}

#[test]
fn a_taken_name_with_another_spec_is_refused_naming_the_field() {
    let mut h = Harness::new();
    let results = h.submit_all(vec![Submission {
        request_id: Some("req-1".into()),
        workload: workload("a", 4, None).into(),
    }]);
    let [SubmitResult::Created { id }] = results.as_slice() else {
        panic!("{results:?}");
    };
    let id = *id;
    let hash = h.hash();

    // 8 GPUs under the name that holds 4: refused, naming the field and
    // both values; nothing changes.
    let results = h.submit_all(vec![Submission {
        request_id: Some("req-2".into()),
        workload: workload("a", 8, None).into(),
    }]);
    let [SubmitResult::Refused { errors }] = results.as_slice() else {
        panic!("{results:?}");
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].object, "Workload/default/a");
    assert_eq!(errors[0].path, "spec.podSets[0].requests[nvidia.com/gpu]");
    let message = &errors[0].message;
    assert!(message.contains("already exists"), "{message}");
    assert!(message.contains("\"4\" there, \"8\" in this"), "{message}");
    assert_eq!(
        h.hash(),
        hash,
        "a conflicting submission changed the ledger"
    );
    assert!(!h.ledger.state().by_request.contains_key("req-2"));

    // A label of its own is a difference too.
    let mut labelled = workload("a", 4, None);
    labelled.labels.insert("team".into(), "x".into());
    let results = h.submit_all(vec![Submission {
        request_id: None,
        workload: labelled.into(),
    }]);
    let [SubmitResult::Refused { errors }] = results.as_slice() else {
        panic!("{results:?}");
    };
    assert_eq!(errors[0].path, "metadata.labels.team");

    // A retry of the first request (its id) and the same spec under a new
    // id are still the workload it made.
    for request_id in ["req-1", "req-3"] {
        let results = h.submit_all(vec![Submission {
            request_id: Some(request_id.into()),
            workload: workload("a", 4, None).into(),
        }]);
        assert_eq!(results, [SubmitResult::Existing { id }], "{request_id}");
    }
    assert_eq!(h.hash(), hash);
}

#[test]
fn an_unknown_priority_class_or_local_queue_is_refused_naming_the_field() {
    let mut h = Harness::new();
    let before = h.hash();
    let mut no_queue = workload("no-queue", 1, None);
    no_queue.spec.queue_name = "missing".into();
    let results = h.submit_all(vec![
        Submission {
            request_id: Some("r-pc".into()),
            workload: workload("no-class", 1, Some("urgent")).into(),
        },
        Submission {
            request_id: Some("r-q".into()),
            workload: no_queue.into(),
        },
    ]);
    let [SubmitResult::Refused { errors: e1 }, SubmitResult::Refused { errors: e2 }] =
        results.as_slice()
    else {
        panic!("{results:?}");
    };
    assert_eq!(paths(e1), ["spec.priorityClassName"], "{e1:?}");
    assert!(e1[0].message.contains("urgent"), "{e1:?}");
    assert_eq!(e1[0].object, "Workload/default/no-class");
    assert_eq!(paths(e2), ["spec.queueName"], "{e2:?}");
    assert!(e2[0].message.contains("missing"), "{e2:?}");
    // Nothing was recorded, not even the request ids.
    assert_eq!(h.hash(), before);
    assert!(h.ledger.state().workloads.is_empty());
    assert!(h.ledger.state().by_request.is_empty());

    // A refused request id is free to be used by a correct retry.
    let results = h.submit_all(vec![Submission {
        request_id: Some("r-pc".into()),
        workload: workload("no-class", 1, Some("high")).into(),
    }]);
    assert!(
        matches!(results.as_slice(), [SubmitResult::Created { .. }]),
        "{results:?}"
    );
}

#[test]
fn a_refused_submission_does_not_block_the_others_of_its_command() {
    let mut h = Harness::new();
    let results = h.submit_all(vec![
        Submission {
            request_id: None,
            workload: workload("bad", 1, Some("urgent")).into(),
        },
        Submission {
            request_id: None,
            workload: workload("good", 1, Some("high")).into(),
        },
    ]);
    assert!(matches!(results[0], SubmitResult::Refused { .. }));
    let SubmitResult::Created { id } = results[1] else {
        panic!("{results:?}");
    };
    assert!(h.pending(id));
    assert_eq!(
        h.ledger.snapshot().get_pending(id).map(|p| p.priority),
        Some(1000)
    );
}

/// Submits under a pending limit stamped into the command.
fn submit_limited(h: &mut Harness, limit: Option<u64>, names: &[&str]) -> Vec<SubmitResult> {
    let submissions = names
        .iter()
        .map(|n| Submission {
            request_id: Some(format!("req-{n}")),
            workload: workload(n, 4, None).into(),
        })
        .collect();
    let r = h.apply(Command::SubmitWorkloads {
        submissions,
        max_pending_per_local_queue: limit,
        admit: Vec::new(),
    });
    assert!(r.is_ok(), "{r:?}");
    match r.outcome {
        Outcome::Submitted { results, .. } => results,
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn created(results: &[SubmitResult]) -> Vec<WorkloadId> {
    results
        .iter()
        .filter_map(|r| match r {
            SubmitResult::Created { id } => Some(*id),
            _ => None,
        })
        .collect()
}

#[test]
fn a_full_local_queue_refuses_submissions_naming_it_and_the_limit() {
    let mut h = Harness::new();
    // Three pending fill a limit of 3 (one command may fill it up).
    let results = submit_limited(&mut h, Some(3), &["a", "b", "c"]);
    let ids = created(&results);
    assert_eq!(ids.len(), 3, "{results:?}");
    let before = h.hash();

    // The fourth is refused, naming the LocalQueue and the limit; nothing
    // is recorded, not even its request id.
    let results = submit_limited(&mut h, Some(3), &["d"]);
    let [SubmitResult::QueueFull { errors }] = results.as_slice() else {
        panic!("{results:?}");
    };
    assert_eq!(paths(errors), ["spec.queueName"], "{errors:?}");
    assert_eq!(errors[0].object, "Workload/default/d");
    let message = &errors[0].message;
    assert!(message.contains("\"default/team-a\""), "{message}");
    assert!(message.contains("limit is 3"), "{message}");
    assert!(message.contains("max_pending_per_local_queue"), "{message}");
    assert_eq!(h.hash(), before, "a refused submission changed the ledger");
    assert!(h.ledger.workload_by_name("default", "d").is_none());
    assert!(!h.ledger.state().by_request.contains_key("req-d"));

    // A retry of one already queued is answered as before, not refused.
    let results = submit_limited(&mut h, Some(3), &["a"]);
    assert_eq!(results, [SubmitResult::Existing { id: ids[0] }]);

    // Commands without a limit (or with 0) are not limited.
    let results = submit_limited(&mut h, None, &["e"]);
    assert_eq!(created(&results).len(), 1, "{results:?}");
    let results = submit_limited(&mut h, Some(0), &["f"]);
    assert_eq!(created(&results).len(), 1, "{results:?}");
    assert_eq!(
        h.ledger.snapshot().pending_in_local_queue("default/team-a"),
        5
    );

    // Admission and cancellation make room: the queue's 8 GPUs admit the
    // two oldest 4-GPU workloads.
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch).len(), 2, "{batch:?}");
    assert_eq!(
        h.ledger.snapshot().pending_in_local_queue("default/team-a"),
        3
    );
    let r = h.apply(Command::CancelWorkload {
        namespace: "default".into(),
        name: "f".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        h.ledger.snapshot().pending_in_local_queue("default/team-a"),
        2
    );
    // One slot under a limit of 3: of two in one command, the first fits.
    let results = submit_limited(&mut h, Some(3), &["g", "h"]);
    assert!(
        matches!(
            results.as_slice(),
            [SubmitResult::Created { .. }, SubmitResult::QueueFull { .. }]
        ),
        "{results:?}"
    );
    assert_eq!(
        h.ledger.snapshot().pending_in_local_queue("default/team-a"),
        3
    );
}

// ----- AdmitBatch -----------------------------------------------------------

#[test]
fn a_cycle_admits_within_quota_and_says_why_the_rest_waits() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    let c = h.submit("c", 4, None);
    let (batch, outcome) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    assert_eq!(outcome.admitted, 2);
    assert!(outcome.rejected.is_empty(), "{outcome:?}");
    assert!(!outcome.stale_batch);
    assert_eq!(h.used(), 8);
    assert_eq!(h.on_cluster("east"), 8);
    for id in [a, b] {
        assert_eq!(h.state_of(id), WorkloadState::Admitted);
        assert!(!h.pending(id));
    }
    assert_ne!(h.epoch(a), h.epoch(b), "every admission has its own epoch");
    assert_eq!(h.state_of(c), WorkloadState::Pending);
    let record = h.ledger.workload(c).expect("c");
    let reason = h.ledger.reason_of(record).expect("c has a reason");
    assert_eq!(reason.kind, ReasonKind::WaitingForQuota, "{reason}");
    assert_eq!(h.ledger.counters().admissions, 2);
}

#[test]
fn a_replayed_batch_is_stale_and_changes_nothing() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a]);
    let before = h.hash();
    let counters = h.ledger.counters().clone();

    let outcome = h.admit(batch.clone());
    assert!(outcome.stale_batch);
    assert_eq!(outcome.admitted, 0);
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(outcome.rejected[0].0, a);
    assert_eq!(h.hash(), before);
    assert_eq!(h.used(), 4);
    let now = h.ledger.counters();
    assert_eq!(now.stale_batches, counters.stale_batches + 1);
    assert_eq!(now.admissions_rejected, counters.admissions_rejected + 1);
    assert_eq!(now.admissions, counters.admissions);

    // An older cycle id is stale as well.
    let mut older = batch;
    older.cycle = CycleId { term: 0, seq: 99 };
    assert!(h.admit(older).stale_batch);
    assert_eq!(h.hash(), before);
}

#[test]
fn the_same_admissions_under_a_new_cycle_id_are_rejected_one_by_one() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    let c = h.submit("c", 4, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    let before = h.hash();
    let last_cycle = h.ledger.state().last_cycle;
    let c_reason = h.ledger.workload(c).and_then(|w| w.reason.clone());
    assert_eq!(
        c_reason.as_ref().map(|r| r.kind),
        Some(ReasonKind::WaitingForQuota)
    );
    let rejected_before = h.ledger.counters().admissions_rejected;

    // The same decisions proposed again under a new cycle id (a retried
    // proposal), carrying a reason computed from a state that is gone.
    let mut again = batch;
    again.cycle.seq += 10;
    again.reasons = vec![(
        c,
        PendingReason::new(ReasonKind::NoClusterCapacity, "from a stale view"),
    )];
    let outcome = h.admit(again.clone());
    assert!(!outcome.stale_batch);
    assert_eq!(outcome.admitted, 0);
    let rejected: Vec<WorkloadId> = outcome.rejected.iter().map(|(id, _)| *id).collect();
    assert_eq!(rejected, [a, b]);
    assert!(
        outcome
            .rejected
            .iter()
            .all(|(_, why)| why.contains("not pending")),
        "{outcome:?}"
    );
    assert_eq!(h.ledger.counters().admissions_rejected, rejected_before + 2);
    assert_eq!(h.used(), 8);

    // A batch whose every decision is refused changes nothing: not the
    // cycle fence, not the reasons it carries.
    assert_eq!(h.hash(), before);
    assert_eq!(h.ledger.state().last_cycle, last_cycle);
    assert_eq!(
        h.ledger.workload(c).and_then(|w| w.reason.clone()),
        c_reason
    );
    // So the same cycle id is still usable by a batch that decides
    // something.
    let mut next = h.decide();
    next.cycle = again.cycle;
    assert!(!h.admit(next).stale_batch);
}

#[test]
fn a_batch_in_a_log_entry_of_another_term_is_stale() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let batch = h.decide();
    assert_eq!(batch.cycle.term, 1);
    assert_eq!(admitted_ids(&batch), [a]);
    let before = h.hash();
    let request = Request {
        at: Timestamp(h.now + 1),
        command: Command::AdmitBatch(batch),
    };
    // A deposed leader's batch that made it into the log of term 2.
    let r = h.ledger.apply_in_term(&request, Some(2));
    let Outcome::Admitted(outcome) = r.outcome else {
        panic!("{r:?}");
    };
    assert!(outcome.stale_batch);
    assert_eq!(outcome.admitted, 0);
    assert_eq!(h.hash(), before);
    assert!(h.ledger.violations().is_empty());
    // The same batch in an entry of its own term is accepted.
    let r = h.ledger.apply_in_term(&request, Some(1));
    let Outcome::Admitted(outcome) = r.outcome else {
        panic!("{r:?}");
    };
    assert_eq!(outcome.admitted, 1);
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
}

#[test]
fn a_forged_admission_over_quota_is_rejected() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    let c = h.submit("c", 4, None);
    let before = h.hash();

    // c given a's admission (same shape): the queue is full.
    let mut forged = batch.admissions[0].clone();
    forged.workload = c;
    let mut bogus = h.decide();
    assert!(bogus.admissions.is_empty(), "the scheduler admits nothing");
    bogus.admissions = vec![forged];
    bogus.reasons.clear();
    bogus.queue_reasons.clear();
    let outcome = h.admit(bogus);
    assert_eq!(outcome.admitted, 0);
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(outcome.rejected[0].0, c);
    assert!(
        outcome.rejected[0].1.contains("no longer fits"),
        "{outcome:?}"
    );
    assert_eq!(h.state_of(c), WorkloadState::Pending);
    assert!(h.pending(c));
    assert_eq!(h.used(), 8);
    // A batch whose every decision is refused changes nothing.
    assert_eq!(h.hash(), before);
}

#[test]
fn a_forged_admission_that_undercharges_or_targets_the_wrong_queue_is_rejected() {
    let mut h = Harness::new();
    let a = h.submit("a", 12, None);
    // 12 GPUs never fit an 8-GPU queue: the scheduler does not admit it.
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());

    let assignment = |gpus: u64| Assignment {
        cluster: "east".into(),
        pod_sets: vec![PodSetAssignment {
            name: "main".into(),
            count: 1,
            flavors: BTreeMap::from([(GPU.to_string(), FLAVOR.to_string())]),
            nodes: Vec::new(),
        }],
        usage: BTreeMap::from([(FlavorResource::new(FLAVOR, GPU), Quantity::units(gpus))]),
    };
    let forge = |h: &mut Harness, admission: Admission| {
        let mut batch = h.decide();
        batch.admissions = vec![admission];
        h.admit(batch)
    };
    // Charging exactly what it requests: over quota.
    let outcome = forge(
        &mut h,
        Admission {
            workload: a,
            cluster_queue: "team-a".into(),
            assignment: assignment(12),
            budget_charge: 0,
            afs_penalty: 0,
        },
    );
    assert_eq!(outcome.admitted, 0);
    assert!(
        outcome.rejected[0].1.contains("no longer fits"),
        "{outcome:?}"
    );
    // Charging less than it requests.
    let outcome = forge(
        &mut h,
        Admission {
            workload: a,
            cluster_queue: "team-a".into(),
            assignment: assignment(4),
            budget_charge: 0,
            afs_penalty: 0,
        },
    );
    assert_eq!(outcome.admitted, 0);
    assert!(
        outcome.rejected[0].1.contains("does not match"),
        "{outcome:?}"
    );
    // Another ClusterQueue than the one it is bound to.
    let outcome = forge(
        &mut h,
        Admission {
            workload: a,
            cluster_queue: "team-b".into(),
            assignment: assignment(12),
            budget_charge: 0,
            afs_penalty: 0,
        },
    );
    assert_eq!(outcome.admitted, 0);
    // A cluster that does not exist.
    let mut elsewhere = assignment(12);
    elsewhere.cluster = "west".into();
    let outcome = forge(
        &mut h,
        Admission {
            workload: a,
            cluster_queue: "team-a".into(),
            assignment: elsewhere,
            budget_charge: 0,
            afs_penalty: 0,
        },
    );
    assert_eq!(outcome.admitted, 0);
    assert_eq!(h.state_of(a), WorkloadState::Pending);
    assert_eq!(h.used(), 0);
    assert_eq!(h.ledger.counters().admissions_rejected, 4);
}

#[test]
fn a_cluster_without_room_rejects_an_admission_that_quota_allows() {
    let mut h = Harness::empty();
    let big = CONFIG.replace("nominalQuota: 8", "nominalQuota: 32");
    assert!(h
        .apply(Command::ApplyObjects {
            objects: objects(&big)
        })
        .is_ok());
    for name in ["east", "west"] {
        assert!(h
            .apply(Command::RegisterCluster {
                cluster: cluster(name, 8),
                lease_policy: LeasePolicy::Fence,
            })
            .is_ok());
    }
    let a = h.submit("a", 8, None);
    let b = h.submit("b", 8, None);
    let c = h.submit("c", 8, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    assert_ne!(h.cluster_of(a), h.cluster_of(b), "a whole cluster each");
    // Forge c onto a's cluster: quota has room (16 of 32), the cluster none.
    let mut forged = batch.admissions[0].clone();
    forged.workload = c;
    let mut next = h.decide();
    next.admissions = vec![forged];
    let outcome = h.admit(next);
    assert_eq!(outcome.admitted, 0);
    assert!(outcome.rejected[0].1.contains("no room"), "{outcome:?}");
    assert_eq!(h.on_cluster("east"), 8);
    assert_eq!(h.on_cluster("west"), 8);
}

// ----- ReportStatus ---------------------------------------------------------

#[test]
fn running_then_succeeded_releases_quota_for_the_next_workload() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    let b = h.submit("b", 8, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a]);
    assert_eq!(h.report(a, Phase::Running), (1, 0));
    assert_eq!(h.state_of(a), WorkloadState::Running);
    // A repeated report is a no-op.
    let hash = h.hash();
    assert_eq!(h.report(a, Phase::Running), (0, 1));
    assert_eq!(h.hash(), hash);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "quota is still held");

    assert_eq!(h.report(a, Phase::Succeeded), (1, 0));
    assert_eq!(h.state_of(a), WorkloadState::Succeeded);
    assert!(h.ledger.workload(a).expect("a").reservation.is_none());
    assert_eq!(h.used(), 0);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [b]);
    assert_eq!(h.used(), 8);
    // Reporting on the finished workload again is stale.
    let report = StatusReport {
        cluster: "east".into(),
        workload: a,
        epoch: 1,
        phase: Phase::Succeeded,
        message: String::new(),
    };
    let hash = h.hash();
    assert_eq!(h.report_raw(report), (0, 1));
    assert_eq!(h.hash(), hash);
}

#[test]
fn failed_releases_quota_and_keeps_the_message() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    h.cycle();
    let report = StatusReport {
        cluster: "east".into(),
        workload: a,
        epoch: h.epoch(a),
        phase: Phase::Failed,
        message: "exit code 3".into(),
    };
    assert_eq!(h.report_raw(report), (1, 0));
    let record = h.ledger.workload(a).expect("a");
    assert_eq!(record.state, WorkloadState::Failed);
    assert_eq!(
        record.history.last().map(|e| e.message.as_str()),
        Some("exit code 3")
    );
    assert_eq!(h.used(), 0);
}

#[test]
fn a_report_with_a_stale_epoch_or_the_wrong_cluster_is_a_no_op() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    h.cycle();
    let epoch = h.epoch(a);
    let hash = h.hash();
    let stale_before = h.ledger.counters().stale_reports;
    let r = h.apply(Command::ReportStatus {
        reports: vec![
            StatusReport {
                cluster: "east".into(),
                workload: a,
                epoch: epoch + 1,
                phase: Phase::Succeeded,
                message: String::new(),
            },
            StatusReport {
                cluster: "west".into(),
                workload: a,
                epoch,
                phase: Phase::Succeeded,
                message: String::new(),
            },
            StatusReport {
                cluster: "east".into(),
                workload: 4242,
                epoch,
                phase: Phase::Running,
                message: String::new(),
            },
        ],
    });
    assert_eq!(
        r.outcome,
        Outcome::Reported {
            applied: 0,
            stale: 3
        }
    );
    assert_eq!(h.hash(), hash);
    assert_eq!(h.ledger.counters().stale_reports, stale_before + 3);
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
    assert_eq!(h.used(), 8);
}

// ----- CancelWorkload -------------------------------------------------------

fn cancel(h: &mut Harness, name: &str) -> Response {
    h.apply(Command::CancelWorkload {
        namespace: "default".into(),
        name: name.into(),
    })
}

#[test]
fn cancelling_a_pending_workload_ends_it_at_once() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let r = cancel(&mut h, "a");
    assert_eq!(
        r.outcome,
        Outcome::Cancelled {
            id: a,
            state: WorkloadState::Cancelled
        }
    );
    assert_eq!(h.state_of(a), WorkloadState::Cancelled);
    assert!(!h.pending(a));
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());
    // Cancelling again is refused, naming the status; nothing changes.
    let hash = h.hash();
    let r = cancel(&mut h, "a");
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["status"]);
    assert_eq!(h.hash(), hash);
    // An unknown workload is refused naming it.
    let r = cancel(&mut h, "ghost");
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["metadata.name"]);
    assert_eq!(r.errors[0].object, "Workload/default/ghost");
    assert_eq!(h.hash(), hash);
}

#[test]
fn cancelling_a_running_workload_holds_quota_until_the_executor_confirms() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    let b = h.submit("b", 8, None);
    h.cycle();
    h.report(a, Phase::Running);

    let r = cancel(&mut h, "a");
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        r.outcome,
        Outcome::Cancelled {
            id: a,
            state: WorkloadState::Running
        }
    );
    let record = h.ledger.workload(a).expect("a");
    assert_eq!(record.state, WorkloadState::Running);
    assert!(record.cancel_requested);
    assert!(record
        .reservation
        .as_ref()
        .is_some_and(|r| r.stopping.is_some()));
    assert_eq!(h.used(), 8, "quota follows physical truth");
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "b must wait: {batch:?}");

    assert_eq!(h.report(a, Phase::Stopped), (1, 0));
    assert_eq!(h.state_of(a), WorkloadState::Cancelled);
    assert!(h.ledger.workload(a).expect("a").reservation.is_none());
    assert!(!h.pending(a), "a cancelled workload is not requeued");
    assert_eq!(h.used(), 0);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [b]);
}

#[test]
fn cancelling_an_admitted_workload_that_never_started_waits_for_the_stop_as_well() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    h.cycle();
    let r = cancel(&mut h, "a");
    assert_eq!(
        r.outcome,
        Outcome::Cancelled {
            id: a,
            state: WorkloadState::Admitted
        }
    );
    assert_eq!(h.used(), 8);
    h.report(a, Phase::Stopped);
    assert_eq!(h.state_of(a), WorkloadState::Cancelled);
    assert_eq!(h.used(), 0);
}

#[test]
fn cancelling_an_admitted_or_running_workload_twice_changes_nothing_the_second_time() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    h.report(b, Phase::Running);

    for (name, id, state) in [
        ("a", a, WorkloadState::Admitted),
        ("b", b, WorkloadState::Running),
    ] {
        let first = cancel(&mut h, name);
        assert!(first.is_ok(), "{first:?}");
        assert_eq!(first.outcome, Outcome::Cancelled { id, state });
        let before = h.ledger.workload(id).expect("workload").clone();
        assert!(before.cancel_requested);
        let hash = h.hash();
        let refused = h.ledger.counters().refused_commands;

        // Asking again answers the same and records nothing new.
        let second = cancel(&mut h, name);
        assert!(second.is_ok(), "{name}: {second:?}");
        assert_eq!(second.outcome, Outcome::Cancelled { id, state }, "{name}");
        assert_eq!(
            h.hash(),
            hash,
            "{name}: a repeated cancel changed the state"
        );
        let after = h.ledger.workload(id).expect("workload");
        assert_eq!(after.history.len(), before.history.len(), "{name}");
        assert_eq!(after, &before, "{name}");
        assert_eq!(h.ledger.counters().refused_commands, refused);
    }
    assert_eq!(
        h.used(),
        8,
        "quota stays charged until the stops are confirmed"
    );

    // Each ends Cancelled exactly once when its executor confirms the stop.
    for id in [a, b] {
        assert_eq!(h.report(id, Phase::Stopped), (1, 0));
        let record = h.ledger.workload(id).expect("workload");
        assert_eq!(record.state, WorkloadState::Cancelled);
        assert_eq!(
            record
                .history
                .iter()
                .filter(|e| e.state == WorkloadState::Cancelled)
                .count(),
            1,
            "{:?}",
            record.history
        );
    }
    assert_eq!(h.used(), 0);
    // Once ended, a cancel is refused.
    let r = cancel(&mut h, "b");
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["status"]);
}

// ----- Preemption -----------------------------------------------------------

// ----- SetWorkloadActive (Kueue's spec.active) -------------------------------

fn set_active(h: &mut Harness, name: &str, active: bool) -> Response {
    h.apply(Command::SetWorkloadActive {
        namespace: "default".into(),
        name: name.into(),
        active,
    })
}

fn activation(id: WorkloadId, state: WorkloadState, changed: bool) -> Outcome {
    Outcome::Activation { id, state, changed }
}

#[test]
fn a_stopped_pending_workload_is_kept_out_of_its_queue_until_resumed() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    let r = set_active(&mut h, "a", false);
    assert_eq!(r.outcome, activation(a, WorkloadState::Pending, true));
    assert!(!h.pending(a));
    let record = h.ledger.workload(a).expect("a");
    assert!(record.workload.spec.inactive);
    let reason = record.reason.as_ref().expect("a reason");
    assert_eq!(reason.kind, ReasonKind::Suspended);
    assert!(
        reason
            .message
            .contains("fleetq resume workload a -n default"),
        "{reason:?}"
    );
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "{batch:?}");
    // Stopping again changes nothing, not even the hash.
    let hash = h.hash();
    let r = set_active(&mut h, "a", false);
    assert_eq!(r.outcome, activation(a, WorkloadState::Pending, false));
    assert_eq!(h.hash(), hash);
    // Submitting the same spec again is a retry, whatever its activation.
    let again = h.submit_all(vec![Submission {
        request_id: None,
        workload: workload("a", 8, None).into(),
    }]);
    assert_eq!(again, [SubmitResult::Existing { id: a }]);

    let r = set_active(&mut h, "a", true);
    assert_eq!(r.outcome, activation(a, WorkloadState::Pending, true));
    assert!(h.pending(a));
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a]);
}

#[test]
fn a_stopped_running_workload_holds_quota_until_it_stops_and_is_not_requeued() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    let b = h.submit("b", 8, None);
    h.cycle();
    h.report(a, Phase::Running);
    let r = set_active(&mut h, "a", false);
    assert_eq!(r.outcome, activation(a, WorkloadState::Running, true));
    assert_eq!(h.used(), 8, "quota follows physical truth");
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "b must wait: {batch:?}");
    assert_eq!(h.report(a, Phase::Stopped), (1, 0));
    assert_eq!(h.state_of(a), WorkloadState::Pending);
    assert!(!h.pending(a), "a stopped workload is not requeued");
    assert_eq!(h.used(), 0);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [b]);
    // Resumed, it queues behind b; cancelled while stopped, it ends.
    set_active(&mut h, "a", true);
    assert!(h.pending(a));
    let r = cancel(&mut h, "a");
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.state_of(a), WorkloadState::Cancelled);
}

#[test]
fn stopping_is_refused_for_unknown_ended_or_cancelled_workloads() {
    let mut h = Harness::new();
    let a = h.submit("a", 8, None);
    let b = h.submit("b", 8, None);
    h.cycle();
    h.report(a, Phase::Running);
    h.report(a, Phase::Succeeded);
    h.cycle();
    h.report(b, Phase::Running);
    cancel(&mut h, "b");
    let hash = h.hash();
    for (name, path) in [("ghost", "metadata.name"), ("a", "status"), ("b", "status")] {
        let r = set_active(&mut h, name, false);
        assert!(!r.is_ok(), "{name}: {r:?}");
        assert_eq!(paths(&r.errors), [path], "{name}");
    }
    assert_eq!(h.hash(), hash);
}

#[test]
fn a_workload_submitted_inactive_is_kept_and_never_admitted_on_submit() {
    let mut h = Harness::new();
    let mut w = workload("parked", 4, None);
    w.spec.inactive = true;
    let plan = h.ledger.plan_on_submit(
        &[Submission {
            request_id: None,
            workload: w.clone().into(),
        }],
        Timestamp(h.now),
    );
    assert!(plan.is_empty(), "{plan:?}");
    let results = h.submit_all(vec![Submission {
        request_id: None,
        workload: w.into(),
    }]);
    let [SubmitResult::Created { id }] = results.as_slice() else {
        panic!("{results:?}");
    };
    assert!(!h.pending(*id));
    assert_eq!(h.state_of(*id), WorkloadState::Pending);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "{batch:?}");
}

#[test]
fn a_higher_priority_workload_preempts_and_the_victim_is_requeued_once_stopped() {
    let mut h = Harness::new();
    let low = h.submit("low", 8, Some("low"));
    h.cycle();
    h.report(low, Phase::Running);
    let low_epoch = h.epoch(low);

    let high = h.submit("high", 8, Some("high"));
    let (batch, outcome) = h.cycle();
    assert!(batch.admissions.is_empty());
    assert_eq!(batch.preemptions.len(), 1, "{batch:?}");
    assert_eq!(batch.preemptions[0].victim, low);
    assert_eq!(batch.preemptions[0].preemptor, high);
    assert_eq!(outcome.preempted, 1);
    let record = h.ledger.workload(low).expect("low");
    assert_eq!(record.state, WorkloadState::Running);
    assert!(record
        .reservation
        .as_ref()
        .is_some_and(|r| r.stopping.is_some()));
    assert!(h
        .ledger
        .snapshot()
        .get_admitted(low)
        .is_some_and(|a| a.evicting));
    assert_eq!(h.used(), 8, "the victim keeps its quota until it stops");
    let reason = h.ledger.reason_of(h.ledger.workload(high).expect("high"));
    assert_eq!(reason.map(|r| r.kind), Some(ReasonKind::Preempting));

    // The next cycle does not preempt it a second time.
    let (batch, _) = h.cycle();
    assert!(
        batch.admissions.is_empty() && batch.preemptions.is_empty(),
        "{batch:?}"
    );

    assert_eq!(h.report(low, Phase::Stopped), (1, 0));
    let record = h.ledger.workload(low).expect("low");
    assert_eq!(record.state, WorkloadState::Pending);
    assert!(record.reservation.is_none());
    assert_eq!(
        record.reason.as_ref().map(|r| r.kind),
        Some(ReasonKind::Evicted)
    );
    assert!(h.pending(low));
    assert_eq!(h.used(), 0);

    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [high]);
    assert!(h.pending(low));
    // The victim's old epoch is dead: a late report of it changes nothing.
    let hash = h.hash();
    let late = StatusReport {
        cluster: "east".into(),
        workload: low,
        epoch: low_epoch,
        phase: Phase::Succeeded,
        message: String::new(),
    };
    assert_eq!(h.report_raw(late), (0, 1));
    assert_eq!(h.hash(), hash);

    // Once high finishes, low is admitted again under a new epoch.
    h.report(high, Phase::Succeeded);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [low]);
    assert!(h.epoch(low) > low_epoch);
}

#[test]
fn a_preemption_whose_preemptor_is_gone_is_rejected() {
    let mut h = Harness::new();
    let low = h.submit("low", 8, Some("low"));
    h.cycle();
    h.submit("high", 8, Some("high"));
    let batch = h.decide();
    assert_eq!(batch.preemptions.len(), 1);
    // The preemptor is cancelled before the batch is applied.
    assert!(cancel(&mut h, "high").is_ok());
    let outcome = h.admit(batch);
    assert_eq!(outcome.preempted, 0);
    assert_eq!(outcome.rejected.len(), 1);
    assert_eq!(outcome.rejected[0].0, low);
    assert!(h
        .ledger
        .workload(low)
        .and_then(|w| w.reservation.as_ref())
        .is_some_and(|r| r.stopping.is_none()));
    assert_eq!(h.ledger.counters().preemptions_rejected, 1);
}

/// Three 8-GPU ClusterQueues: team-a in cohort `shared`, team-b in cohort
/// `sub` (a child of `shared`, so the same cohort tree), team-c in cohort
/// `other` (a tree of its own); a LocalQueue of the same name for each.
const COHORTS: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100-80gb}
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
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  cohortName: sub
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-c}
spec:
  namespaceSelector: {}
  cohortName: other
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100-80gb
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 8
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
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
"#;

/// The [`COHORTS`] configuration and one 32-GPU cluster `east`.
fn cohort_harness() -> Harness {
    let mut h = Harness::empty();
    let r = h.apply(Command::ApplyObjects {
        objects: objects(COHORTS),
    });
    assert!(r.is_ok(), "{r:?}");
    let r = h.apply(Command::RegisterCluster {
        cluster: cluster("east", 32),
        lease_policy: LeasePolicy::Fence,
    });
    assert!(r.is_ok(), "{r:?}");
    h
}

fn submit_to(h: &mut Harness, name: &str, queue: &str, gpus: u64, pc: Option<&str>) -> WorkloadId {
    let mut w = workload(name, gpus, pc);
    w.spec.queue_name = queue.into();
    match h
        .submit_all(vec![Submission {
            request_id: None,
            workload: w.into(),
        }])
        .as_slice()
    {
        [SubmitResult::Created { id }] => *id,
        other => panic!("submission of {name} not created: {other:?}"),
    }
}

/// A workload admitted by a real cycle and reported running.
fn running_in(h: &mut Harness, name: &str, queue: &str, gpus: u64, pc: Option<&str>) -> WorkloadId {
    let id = submit_to(h, name, queue, gpus, pc);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [id]);
    h.report(id, Phase::Running);
    assert_eq!(h.state_of(id), WorkloadState::Running);
    id
}

/// A batch under the next cycle id that decides exactly one preemption
/// and nothing else.
fn forged_preemption(
    h: &mut Harness,
    victim: WorkloadId,
    preemptor: WorkloadId,
    reason: PreemptionReason,
) -> AdmitBatch {
    let mut batch = h.decide();
    batch.admissions.clear();
    batch.reasons.clear();
    batch.queue_reasons.clear();
    batch.preemptions = vec![Preemption {
        victim,
        preemptor,
        reason,
        grace_period: None,
        cluster: None,
    }];
    batch
}

/// Applies a batch whose only decision is a preemption that must be
/// rejected: the victim keeps running untouched and nothing changes but
/// the counters. Returns the rejection message.
fn assert_preemption_rejected(h: &mut Harness, batch: AdmitBatch) -> String {
    let victim = batch.preemptions[0].victim;
    let hash = h.hash();
    let last_cycle = h.ledger.state().last_cycle;
    let counters = h.ledger.counters().clone();
    let record = h.ledger.workload(victim).expect("victim").clone();

    let outcome = h.admit(batch);
    assert!(!outcome.stale_batch, "{outcome:?}");
    assert_eq!(outcome.preempted, 0, "{outcome:?}");
    assert_eq!(outcome.admitted, 0, "{outcome:?}");
    assert_eq!(outcome.rejected.len(), 1, "{outcome:?}");
    assert_eq!(outcome.rejected[0].0, victim);
    let now = h.ledger.counters();
    assert_eq!(now.preemptions_rejected, counters.preemptions_rejected + 1);
    assert_eq!(now.preemptions, counters.preemptions);

    let after = h.ledger.workload(victim).expect("victim");
    assert_eq!(after.state, WorkloadState::Running);
    assert!(
        after
            .reservation
            .as_ref()
            .is_some_and(|r| r.stopping.is_none()),
        "{after:?}"
    );
    assert_eq!(after, &record, "the victim's record changed");
    assert!(h
        .ledger
        .snapshot()
        .get_admitted(victim)
        .is_some_and(|a| !a.evicting));
    assert_eq!(
        h.hash(),
        hash,
        "a batch of only rejected decisions changed the state"
    );
    assert_eq!(h.ledger.state().last_cycle, last_cycle);
    outcome.rejected[0].1.clone()
}

#[test]
fn an_in_cluster_queue_preemption_of_another_queues_workload_is_rejected() {
    let mut h = cohort_harness();
    // Victims in a sibling queue of the same cohort tree and in a queue of
    // another tree: neither is in the preemptor's ClusterQueue.
    let sibling = running_in(&mut h, "sibling", "team-b", 8, Some("low"));
    let stranger = running_in(&mut h, "stranger", "team-c", 8, Some("low"));
    let high = submit_to(&mut h, "high", "team-a", 8, Some("high"));
    for victim in [sibling, stranger] {
        let batch = forged_preemption(&mut h, victim, high, PreemptionReason::InClusterQueue);
        let why = assert_preemption_rejected(&mut h, batch);
        assert!(why.contains("InClusterQueue"), "{why}");
        assert!(why.contains(&format!("victim {victim}")), "{why}");
    }
    assert_eq!(h.ledger.counters().preemptions_rejected, 2);
    // The preemptor is still pending and is admitted on its own quota.
    assert!(h.pending(high));
    let (batch, outcome) = h.cycle();
    assert_eq!(admitted_ids(&batch), [high]);
    assert_eq!(outcome.admitted, 1);
    for victim in [sibling, stranger] {
        assert_eq!(h.state_of(victim), WorkloadState::Running);
    }
}

#[test]
fn an_in_cluster_queue_preemption_of_equal_or_higher_priority_is_rejected() {
    let mut h = Harness::new();
    let victim = h.submit("victim", 8, Some("high"));
    h.cycle();
    h.report(victim, Phase::Running);
    // Same priority, then lower priority than the victim, same queue.
    let peer = h.submit("peer", 8, Some("high"));
    let low = h.submit("low", 8, Some("low"));
    let plain = h.submit("plain", 8, None);
    let (batch, _) = h.cycle();
    assert!(
        batch.preemptions.is_empty() && batch.admissions.is_empty(),
        "the scheduler itself preempts nothing here: {batch:?}"
    );
    for preemptor in [peer, low, plain] {
        let batch = forged_preemption(&mut h, victim, preemptor, PreemptionReason::InClusterQueue);
        let why = assert_preemption_rejected(&mut h, batch);
        assert!(why.contains("at priority 1000"), "{why}");
        assert!(h.pending(preemptor));
    }
    assert_eq!(h.ledger.counters().preemptions_rejected, 3);
    assert_eq!(h.used(), 8);
}

#[test]
fn an_in_cohort_reclamation_outside_the_cohort_tree_is_rejected() {
    let mut h = cohort_harness();
    let stranger = running_in(&mut h, "stranger", "team-c", 8, Some("low"));
    let nested = running_in(&mut h, "nested", "team-b", 8, Some("low"));
    let owner = submit_to(&mut h, "owner", "team-a", 8, Some("high"));

    // team-c is in cohort `other`, not under `shared`.
    let batch = forged_preemption(
        &mut h,
        stranger,
        owner,
        PreemptionReason::InCohortReclamation,
    );
    let why = assert_preemption_rejected(&mut h, batch);
    assert!(why.contains("InCohortReclamation"), "{why}");
    assert!(why.contains("team-c"), "{why}");
    assert_eq!(h.ledger.counters().preemptions_rejected, 1);

    // team-b sits in `sub`, a child cohort of `shared`: the same tree, so
    // the scope check lets it through.
    let hash = h.hash();
    let batch = forged_preemption(&mut h, nested, owner, PreemptionReason::InCohortReclamation);
    let outcome = h.admit(batch);
    assert_eq!(outcome.preempted, 1, "{outcome:?}");
    assert!(outcome.rejected.is_empty(), "{outcome:?}");
    assert_eq!(h.ledger.counters().preemptions_rejected, 1);
    assert!(h
        .ledger
        .workload(nested)
        .and_then(|w| w.reservation.as_ref())
        .is_some_and(|r| r.stopping.is_some()));
    assert_ne!(h.hash(), hash);
    // The stranger was never touched.
    assert!(h
        .ledger
        .workload(stranger)
        .and_then(|w| w.reservation.as_ref())
        .is_some_and(|r| r.stopping.is_none()));
}

#[test]
fn a_valid_in_cluster_queue_preemption_is_still_accepted() {
    let mut h = Harness::new();
    let low = h.submit("low", 8, Some("low"));
    h.cycle();
    h.report(low, Phase::Running);
    let high = h.submit("high", 8, Some("high"));
    let hash = h.hash();

    let batch = h.decide();
    assert_eq!(batch.preemptions.len(), 1, "{batch:?}");
    assert_eq!(batch.preemptions[0].victim, low);
    assert_eq!(batch.preemptions[0].preemptor, high);
    assert_eq!(
        batch.preemptions[0].reason,
        PreemptionReason::InClusterQueue
    );
    let outcome = h.admit(batch);
    assert_eq!(outcome.preempted, 1, "{outcome:?}");
    assert!(outcome.rejected.is_empty(), "{outcome:?}");
    assert_eq!(h.ledger.counters().preemptions, 1);
    assert_eq!(h.ledger.counters().preemptions_rejected, 0);
    assert!(h
        .ledger
        .workload(low)
        .and_then(|w| w.reservation.as_ref())
        .is_some_and(|r| r.stopping.is_some()));
    assert_ne!(h.hash(), hash);
}

// ----- Leases, expiry, reconciliation ---------------------------------------

#[test]
fn expiring_a_fenced_cluster_releases_and_requeues_its_workloads() {
    let mut h = Harness::with_cluster(LeasePolicy::Fence);
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    h.cycle();
    h.report(a, Phase::Running);
    let old_epoch = h.epoch(a);
    let r = h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        r.outcome,
        Outcome::Expired {
            requeued: vec![a, b],
            kept: vec![]
        }
    );
    for id in [a, b] {
        let record = h.ledger.workload(id).expect("workload");
        assert_eq!(record.state, WorkloadState::Pending);
        assert!(record.reservation.is_none());
        assert_eq!(
            record.reason.as_ref().map(|r| r.kind),
            Some(ReasonKind::Evicted)
        );
        assert!(h.pending(id));
    }
    assert_eq!(h.used(), 0);
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Lost
    );
    // Nothing is placed on a lost cluster.
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());
    // Expiring it again releases nothing twice.
    let hash = h.hash();
    let r = h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    assert_eq!(
        r.outcome,
        Outcome::Expired {
            requeued: vec![],
            kept: vec![]
        }
    );
    assert_eq!(h.hash(), hash);

    // The agent comes back; the workloads run again under new epochs.
    let r = h.apply(Command::RegisterCluster {
        cluster: cluster("east", 16),
        lease_policy: LeasePolicy::Fence,
    });
    assert!(r.is_ok(), "{r:?}");
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a, b]);
    assert!(h.epoch(a) > old_epoch);
    // A report from the fenced incarnation is stale.
    let late = StatusReport {
        cluster: "east".into(),
        workload: a,
        epoch: old_epoch,
        phase: Phase::Succeeded,
        message: String::new(),
    };
    assert_eq!(h.report_raw(late), (0, 1));
    assert_eq!(h.state_of(a), WorkloadState::Admitted);
}

#[test]
fn expiring_a_keep_cluster_keeps_quota_charged_until_it_returns() {
    let mut h = Harness::with_cluster(LeasePolicy::Keep);
    let a = h.submit("a", 8, None);
    h.cycle();
    h.report(a, Phase::Running);
    let r = h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    assert_eq!(
        r.outcome,
        Outcome::Expired {
            requeued: vec![],
            kept: vec![a]
        }
    );
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Unreachable
    );
    assert_eq!(h.state_of(a), WorkloadState::Running);
    assert_eq!(h.used(), 8);
    let b = h.submit("b", 4, None);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());

    // The agent reconnects and reports a still running.
    let r = h.apply(Command::ReconcileCluster {
        cluster: "east".into(),
        running: vec![RunningWorkload {
            workload: a,
            epoch: h.epoch(a),
        }],
    });
    assert_eq!(
        r.outcome,
        Outcome::Reconciled {
            stop: vec![],
            requeued: vec![]
        }
    );
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Ready
    );
    assert_eq!(h.state_of(a), WorkloadState::Running);
    h.report(a, Phase::Succeeded);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [b]);
}

#[test]
fn reconcile_stops_unknown_work_and_requeues_work_that_is_gone() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 2, None);
    let c = h.submit("c", 2, None);
    h.cycle();
    h.report(a, Phase::Running);
    h.report(b, Phase::Running);
    // c is admitted but has not started yet.
    assert_eq!(h.state_of(c), WorkloadState::Admitted);

    let ghost = RunningWorkload {
        workload: 4242,
        epoch: 7,
    };
    let b_wrong_epoch = RunningWorkload {
        workload: b,
        epoch: h.epoch(b) + 100,
    };
    let a_right = RunningWorkload {
        workload: a,
        epoch: h.epoch(a),
    };
    let r = h.apply(Command::ReconcileCluster {
        cluster: "east".into(),
        running: vec![a_right, ghost.clone(), b_wrong_epoch.clone()],
    });
    assert!(r.is_ok(), "{r:?}");
    let Outcome::Reconciled { stop, requeued } = r.outcome else {
        panic!("{r:?}");
    };
    assert_eq!(stop, [ghost, b_wrong_epoch]);
    assert_eq!(requeued, [b], "b ran there under its epoch and is gone");
    assert_eq!(h.state_of(a), WorkloadState::Running);
    assert_eq!(h.state_of(b), WorkloadState::Pending);
    assert!(h.pending(b));
    assert_eq!(
        h.ledger
            .workload(b)
            .and_then(|w| w.reason.as_ref())
            .map(|r| r.kind),
        Some(ReasonKind::Evicted)
    );
    // An admitted workload may still be starting: it keeps its reservation.
    assert_eq!(h.state_of(c), WorkloadState::Admitted);
    assert_eq!(h.used(), 6);

    // Reconciling an unknown cluster is refused.
    let hash = h.hash();
    let r = h.apply(Command::ReconcileCluster {
        cluster: "nowhere".into(),
        running: vec![],
    });
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["cluster"]);
    assert_eq!(h.hash(), hash);
}

#[test]
fn reconcile_reporting_an_admitted_workload_marks_it_running() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    h.cycle();
    let r = h.apply(Command::ReconcileCluster {
        cluster: "east".into(),
        running: vec![RunningWorkload {
            workload: a,
            epoch: h.epoch(a),
        }],
    });
    assert!(r.is_ok());
    assert_eq!(h.state_of(a), WorkloadState::Running);
}

#[test]
fn a_drained_cluster_gets_no_new_work() {
    let mut h = Harness::new();
    let r = h.apply(Command::DrainCluster {
        cluster: "east".into(),
    });
    assert_eq!(
        r.outcome,
        Outcome::Drained {
            cluster: "east".into()
        }
    );
    h.submit("a", 4, None);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty());
    let hash = h.hash();
    let r = h.apply(Command::DrainCluster {
        cluster: "nowhere".into(),
    });
    assert!(!r.is_ok());
    assert_eq!(h.hash(), hash);
}

/// kubectl's uncordon: a drained cluster takes new work again; a cluster
/// that is not draining is left as it is; an unknown one is refused and
/// changes nothing.
#[test]
fn an_uncordoned_cluster_takes_new_work_again() {
    let mut h = Harness::new();
    let r = h.apply(Command::DrainCluster {
        cluster: "east".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    h.submit("a", 4, None);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "drained");
    let r = h.apply(Command::UncordonCluster {
        cluster: "east".into(),
    });
    assert_eq!(
        r.outcome,
        Outcome::Uncordoned {
            cluster: "east".into()
        }
    );
    let (batch, _) = h.cycle();
    assert_eq!(batch.admissions.len(), 1, "admitted after the uncordon");
    // Again: a no-op that still answers.
    let hash = h.hash();
    let r = h.apply(Command::UncordonCluster {
        cluster: "east".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.hash(), hash);
    let r = h.apply(Command::UncordonCluster {
        cluster: "nowhere".into(),
    });
    assert!(!r.is_ok());
    assert_eq!(h.hash(), hash);
}

#[test]
fn re_registering_a_drained_cluster_keeps_it_draining() {
    let mut h = Harness::new();
    let r = h.apply(Command::DrainCluster {
        cluster: "east".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    // The agent restarts and registers again, saying Ready, once with the
    // same inventory and once with more.
    for gpus in [16, 24] {
        let registration = cluster("east", gpus);
        assert_eq!(registration.state, ClusterState::Ready);
        let r = h.apply(Command::RegisterCluster {
            cluster: registration,
            lease_policy: LeasePolicy::Fence,
        });
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(
            r.outcome,
            Outcome::ClusterRegistered {
                cluster: "east".into()
            }
        );
        let record = &h.ledger.state().clusters["east"];
        assert_eq!(record.cluster.state, ClusterState::Draining, "{gpus} GPUs");
        assert_eq!(
            record.cluster.capacity[FLAVOR][GPU],
            Quantity::units(gpus),
            "the new inventory is recorded"
        );
    }
    // Still nothing new is placed there.
    let a = h.submit("a", 4, None);
    let (batch, _) = h.cycle();
    assert!(batch.admissions.is_empty(), "{batch:?}");
    assert!(h.pending(a));
}

#[test]
fn a_cluster_that_was_never_drained_re_registers_ready() {
    let mut h = Harness::with_cluster(LeasePolicy::Keep);
    let r = h.apply(Command::RegisterCluster {
        cluster: cluster("east", 16),
        lease_policy: LeasePolicy::Keep,
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Ready
    );
    // Unreachable after its lease expired, then back: Ready, whatever state
    // the registration carries short of Draining.
    let r = h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Unreachable
    );
    let mut registration = cluster("east", 16);
    registration.state = ClusterState::Unreachable;
    let r = h.apply(Command::RegisterCluster {
        cluster: registration,
        lease_policy: LeasePolicy::Keep,
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        h.ledger.state().clusters["east"].cluster.state,
        ClusterState::Ready
    );
    // And it takes new work.
    let a = h.submit("a", 4, None);
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [a]);
    assert_eq!(h.cluster_of(a), "east");
}

#[test]
fn a_cluster_cannot_shrink_below_what_is_assigned_to_it() {
    let mut h = Harness::new();
    h.submit("a", 8, None);
    h.cycle();
    let hash = h.hash();
    let r = h.apply(Command::RegisterCluster {
        cluster: cluster("east", 4),
        lease_policy: LeasePolicy::Fence,
    });
    assert!(!r.is_ok());
    assert!(r.errors.iter().all(|e| e.path == "capacity"), "{r:?}");
    assert_eq!(h.hash(), hash);
    let r = h.apply(Command::RegisterCluster {
        cluster: cluster("", 4),
        lease_policy: LeasePolicy::Fence,
    });
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["name"]);
}

// ----- State hash, export and import ----------------------------------------

#[test]
fn the_state_hash_covers_reservations() {
    let mut h = Harness::new();
    let a = h.submit("a", 4, None);
    let b = h.submit("b", 4, None);
    let batch = h.decide();
    assert_eq!(admitted_ids(&batch), [a, b]);
    let mut only_a = batch.clone();
    only_a.admissions.truncate(1);
    let mut h2 = Harness::new();
    h2.submit("a", 4, None);
    h2.submit("b", 4, None);
    h2.seq = h.seq;
    h.admit(batch);
    h2.admit(only_a);
    assert_eq!(h.used(), 8);
    assert_eq!(h2.used(), 4);
    // Same command count, same stamps: only the reservations differ.
    assert_ne!(
        h.hash(),
        h2.hash(),
        "two ledgers with different reservations must not hash alike"
    );
}

#[test]
fn export_holds_reservations() {
    let mut h = Harness::new();
    h.submit("a", 4, None);
    h.cycle();
    let exported = h.ledger.export();
    assert!(
        exported.is_ok(),
        "a ledger holding a reservation must export: {exported:?}"
    );
}

/// A ledger in every interesting state: pending, admitted, running,
/// stopping (preempted and cancel-requested), kept on an unreachable
/// cluster, finished.
fn busy_ledger() -> Harness {
    let mut h = Harness::empty();
    let big = CONFIG.replace("nominalQuota: 8", "nominalQuota: 24");
    assert!(h
        .apply(Command::ApplyObjects {
            objects: objects(&big)
        })
        .is_ok());
    assert!(h
        .apply(Command::RegisterCluster {
            cluster: cluster("east", 16),
            lease_policy: LeasePolicy::Fence,
        })
        .is_ok());
    assert!(h
        .apply(Command::RegisterCluster {
            cluster: cluster("west", 8),
            lease_policy: LeasePolicy::Keep,
        })
        .is_ok());
    let done = h.submit("done", 4, None);
    let run = h.submit("run", 4, Some("low"));
    let cancelled = h.submit("cancelled", 4, None);
    let started = h.submit("started", 4, Some("low"));
    h.submit("more", 4, Some("low"));
    h.submit("queued", 8, None);
    h.cycle();
    for id in [done, run, cancelled, started] {
        if h.ledger
            .workload(id)
            .is_some_and(|w| w.reservation.is_some())
        {
            h.report(id, Phase::Running);
        }
    }
    h.report(done, Phase::Succeeded);
    assert!(cancel(&mut h, "cancelled").is_ok());
    h.submit("urgent", 8, Some("high"));
    h.cycle();
    assert!(h
        .apply(Command::ExpireCluster {
            cluster: "west".into()
        })
        .is_ok());
    h
}

#[test]
fn export_then_import_gives_the_same_hash_and_the_same_behaviour() {
    let mut h = busy_ledger();
    let bytes = h.ledger.export().expect("export");
    let imported = Ledger::import(&bytes, h.ledger.config().clone()).expect("import");
    assert_eq!(imported.state_hash(), h.hash());
    assert!(imported.violations().is_empty());
    assert_eq!(imported.counters(), h.ledger.counters());
    assert_eq!(
        imported.snapshot().pending_count(),
        h.ledger.snapshot().pending_count()
    );
    // The scheduler sees the same world.
    let now = Timestamp(h.now + 1);
    assert_eq!(
        schedule(h.ledger.snapshot(), now, h.ledger.scheduler_config()),
        schedule(imported.snapshot(), now, imported.scheduler_config())
    );

    // Both ledgers respond alike to the same further commands.
    let mut twin = Harness {
        ledger: imported,
        now: h.now,
        term: h.term,
        seq: h.seq,
    };
    let mut ids: Vec<WorkloadId> = h.ledger.state().workloads.keys().copied().collect();
    ids.sort_unstable();
    for step in 0..6 {
        let (b1, o1) = h.cycle();
        let (b2, o2) = twin.cycle();
        assert_eq!(b1, b2, "step {step}");
        assert_eq!(o1, o2, "step {step}");
        for &id in &ids {
            let w = h.ledger.workload(id).expect("workload");
            if let Some(r) = &w.reservation {
                let phase = if r.stopping.is_some() {
                    Phase::Stopped
                } else if w.state == WorkloadState::Admitted {
                    Phase::Running
                } else {
                    Phase::Succeeded
                };
                let report = StatusReport {
                    cluster: r.assignment.cluster.clone(),
                    workload: id,
                    epoch: r.epoch,
                    phase,
                    message: String::new(),
                };
                assert_eq!(h.report_raw(report.clone()), twin.report_raw(report));
            }
        }
        assert_eq!(h.hash(), twin.hash(), "step {step}");
    }
    let bytes_again = twin.ledger.export().expect("export");
    assert_eq!(
        Ledger::import(&bytes_again, LedgerConfig::default())
            .expect("import")
            .state_hash(),
        h.hash()
    );
}

#[test]
fn import_refuses_garbage() {
    let Err(e) = Ledger::import(b"not json", LedgerConfig::default()) else {
        panic!("garbage imported");
    };
    assert!(e.contains("unreadable"), "{e}");
}

#[test]
fn apply_uses_the_stamp_and_time_never_goes_backwards() {
    let mut h = Harness::new();
    h.submit("a", 1, None);
    let now = h.ledger.state().now;
    assert_eq!(now, Timestamp(h.now));
    // A command stamped in the past (a new leader with a slower clock).
    let r = h.ledger.apply(&Request {
        at: Timestamp(5),
        command: Command::SubmitWorkloads {
            submissions: vec![Submission {
                request_id: None,
                workload: workload("b", 1, None).into(),
            }],
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        },
    });
    assert!(r.is_ok());
    assert_eq!(h.ledger.state().now, now);
    let b = h.ledger.workload_by_name("default", "b").expect("b");
    assert_eq!(b.created_at, now, "created at the ledger's clock, not 5");
}

#[test]
fn two_ledgers_fed_the_same_commands_agree() {
    let run = || {
        let mut h = busy_ledger();
        h.cycle();
        h.hash()
    };
    assert_eq!(run(), run());
}

// ----- metric counters -------------------------------------------------------

/// The counters behind Kueue's eviction, preemption and wait-time series
/// and fleetq's rejected-decision counter: kept by apply(), so every
/// replica has the same values, and carried through export/import.
#[test]
fn counters_record_evictions_preemptions_wait_times_and_rejections() {
    let mut h = Harness::new();
    let low = h.submit("low", 8, Some("low"));
    // Admitted in the cycle right after submission: one wait observation
    // of one command's stamp step (1 s), within the first bucket.
    let (batch, _) = h.cycle();
    assert_eq!(admitted_ids(&batch), [low]);
    h.report(low, Phase::Running);
    let wait = h.ledger.counters().admission_wait["team-a"].clone();
    assert_eq!((wait.count, wait.sum_ms), (1, 1_000));
    assert_eq!(wait.buckets[0], 1, "{wait:?}");

    // The same batch again: one admission refused as stale.
    h.admit(batch);
    assert_eq!(h.ledger.counters().rejected_decisions["StaleBatch"], 1);

    // A higher priority workload preempts it: one eviction of team-a
    // (Kueue's reason Preempted) and one preemption by team-a.
    let high = h.submit("high", 8, Some("high"));
    let (batch, outcome) = h.cycle();
    assert_eq!(outcome.preempted, 1, "{batch:?}");
    let c = h.ledger.counters();
    assert_eq!(c.evictions["team-a"]["Preempted"], 1);
    assert_eq!(c.preemptions_by["team-a"]["InClusterQueue"], 1);
    // Preempting it again is refused with its own reason.
    let mut again = batch.clone();
    again.cycle.seq += 10;
    h.admit(again);
    assert_eq!(
        h.ledger.counters().rejected_decisions["VictimAlreadyStopping"],
        1
    );

    h.report(low, Phase::Stopped);
    h.cycle();
    assert_eq!(h.state_of(high), WorkloadState::Admitted);
    // high waited from its submission (3 commands earlier at least).
    let wait = &h.ledger.counters().admission_wait["team-a"];
    assert_eq!(wait.count, 2);
    assert!(wait.sum_ms >= 1_000 + 3_000, "{wait:?}");

    // The cluster's lease expires: high (not stopping) counts as
    // ClusterLost; nothing else is counted twice.
    h.apply(Command::ExpireCluster {
        cluster: "east".into(),
    });
    let c = h.ledger.counters();
    assert_eq!(c.evictions["team-a"]["ClusterLost"], 1);
    assert_eq!(c.evictions["team-a"]["Preempted"], 1);

    // Snapshots carry the counters.
    let bytes = h.ledger.export().expect("export");
    let back = Ledger::import(&bytes, h.ledger.config().clone()).expect("import");
    assert_eq!(back.counters(), h.ledger.counters());
}

// ----- admission on submit ---------------------------------------------------

fn submissions(specs: &[(&str, u64)]) -> Vec<Submission> {
    specs
        .iter()
        .map(|(name, gpus)| Submission {
            request_id: None,
            workload: workload(name, *gpus, None).into(),
        })
        .collect()
}

impl Harness {
    /// The submissions with the plan the leader would make for them now.
    fn planned(&self, specs: &[(&str, u64)]) -> Command {
        let submissions = submissions(specs);
        let admit = self
            .ledger
            .plan_on_submit(&submissions, Timestamp(self.now + 1_000));
        Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: None,
            admit,
        }
    }

    fn id_of(&self, name: &str) -> WorkloadId {
        self.ledger
            .workload_by_name("default", name)
            .unwrap_or_else(|| panic!("{name} exists"))
            .id
    }

    fn on_submit(&self) -> (u64, u64) {
        let c = self.ledger.counters();
        (c.admissions_on_submit, c.rejected_on_submit)
    }
}

fn plan_len(command: &Command) -> usize {
    match command {
        Command::SubmitWorkloads { admit, .. } => admit.len(),
        _ => 0,
    }
}

#[test]
fn a_planned_submission_is_admitted_by_the_entry_that_queues_it() {
    let mut h = Harness::new();
    // 8 GPUs of quota: a and b fit, c does not, and team-a may preempt:
    // a cycle would look for victims for c, which a plan does not see, so
    // there is no plan and the cycle decides all three.
    assert_eq!(plan_len(&h.planned(&[("a", 4), ("b", 4), ("c", 4)])), 0);
    let command = h.planned(&[("a", 4), ("b", 4)]);
    assert_eq!(plan_len(&command), 2);
    let r = h.apply(command);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.state_of(h.id_of("a")), WorkloadState::Admitted);
    assert_eq!(h.state_of(h.id_of("b")), WorkloadState::Admitted);
    assert_eq!(h.on_submit(), (2, 0));
    assert_eq!(h.ledger.counters().admissions, 2);
    // Queued and admitted at the same stamp, in that order.
    let record = h.ledger.workload(h.id_of("a")).expect("a");
    let states: Vec<_> = record.history.iter().map(|e| (e.state, e.at)).collect();
    assert_eq!(
        states,
        [
            (WorkloadState::Pending, Timestamp(h.now)),
            (WorkloadState::Admitted, Timestamp(h.now))
        ]
    );
}

#[test]
fn a_plan_is_made_only_when_nothing_waits() {
    let mut h = Harness::new();
    // 10 GPUs never fit the 8 of quota: it waits.
    h.submit("big", 10, None);
    assert_eq!(plan_len(&h.planned(&[("a", 2)])), 0);
}

#[test]
fn a_plan_applied_after_something_began_waiting_admits_nothing() {
    let mut h = Harness::new();
    let command = h.planned(&[("a", 2)]);
    assert_eq!(plan_len(&command), 1);
    h.submit("big", 10, None);
    let r = h.apply(command);
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.state_of(h.id_of("a")), WorkloadState::Pending);
    assert_eq!(h.on_submit(), (0, 1));
    // The cycle orders it with what waited before it, and admits it.
    let (_, outcome) = h.cycle();
    assert_eq!(outcome.admitted, 1);
    assert_eq!(h.state_of(h.id_of("a")), WorkloadState::Admitted);
}

#[test]
fn a_plan_whose_quota_went_meanwhile_stops_at_its_first_refused_decision() {
    let mut h = Harness::new();
    let command = h.planned(&[("a", 4), ("b", 2)]);
    assert_eq!(plan_len(&command), 2);
    // Another entry takes 6 of the 8 GPUs before the plan applies.
    let c = h.submit("c", 6, None);
    h.cycle();
    assert_eq!(h.state_of(c), WorkloadState::Admitted);
    let r = h.apply(command);
    assert!(r.is_ok(), "{r:?}");
    // a no longer fits; b would, but the plan assumed a was admitted, so
    // it stops there and the cycle decides both.
    assert_eq!(h.state_of(h.id_of("a")), WorkloadState::Pending);
    assert_eq!(h.state_of(h.id_of("b")), WorkloadState::Pending);
    assert_eq!(h.on_submit(), (0, 2));
    let (_, outcome) = h.cycle();
    assert_eq!(outcome.admitted, 1);
    assert_eq!(h.state_of(h.id_of("b")), WorkloadState::Admitted);
}

#[test]
fn a_planned_entry_applied_twice_admits_once() {
    let mut h = Harness::new();
    let command = h.planned(&[("a", 2)]);
    h.apply(command.clone());
    let a = h.id_of("a");
    let epoch = h.epoch(a);
    let r = h.apply(command);
    let Outcome::Submitted { results, .. } = r.outcome else {
        panic!("{r:?}")
    };
    assert_eq!(results, [SubmitResult::Existing { id: a }]);
    assert_eq!(h.epoch(a), epoch, "the reservation is the first one");
    assert_eq!(h.ledger.counters().admissions, 1);
    assert_eq!(h.on_submit(), (1, 1));
}

#[test]
fn a_plan_leaves_out_what_would_not_be_created() {
    let mut h = Harness::new();
    h.submit("known", 1, None);
    h.cycle();
    let mut subs = submissions(&[("known", 1), ("a", 1), ("a", 1), ("b", 1)]);
    std::sync::Arc::make_mut(&mut subs[3].workload)
        .spec
        .queue_name = "missing".into();
    let admit = h.ledger.plan_on_submit(&subs, Timestamp(h.now + 1_000));
    let planned: Vec<u32> = admit.iter().map(|a| a.submission).collect();
    assert_eq!(planned, [1], "only the first a is new and bound");
}

// ----- retention of finished workloads (RemoveFinished) -------------------

impl Harness {
    /// Applies `RemoveFinished` with a retention in ms: (removed, more).
    fn remove_finished(&mut self, retention_ms: u64, max: u32) -> (u32, bool) {
        let r = self.apply(Command::RemoveFinished { retention_ms, max });
        assert!(r.is_ok(), "{r:?}");
        match r.outcome {
            Outcome::RemovedFinished { removed, more } => (removed, more),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// Submits `name` (1 GPU), admits it and runs it to `end`.
    fn run_to(&mut self, name: &str, end: Phase) -> WorkloadId {
        let id = self.submit(name, 1, None);
        self.cycle();
        self.report(id, Phase::Running);
        self.report(id, end);
        id
    }
}

#[test]
fn a_finished_workload_is_removed_only_once_its_retention_has_passed() {
    let mut h = Harness::new();
    let id = h.run_to("done", Phase::Succeeded);
    // Every apply advances the clock by a second: 1 s after it ended
    // a 2 s retention has not passed yet.
    assert_eq!(h.remove_finished(2_000, 100), (0, false));
    assert_eq!(h.state_of(id), WorkloadState::Succeeded);
    assert_eq!(h.remove_finished(2_000, 100), (1, false));
    assert!(h.ledger.workload(id).is_none());
    assert!(h.ledger.workload_by_name("default", "done").is_none());
    assert!(h.ledger.state().removed.contains(id));
    assert_eq!(h.ledger.counters().finished_removed, 1);
    assert_eq!(h.used(), 0);
    // The name is free again, as after deleting a Kueue Workload: a new
    // submission creates a new workload with a new id.
    let again = h.submit("done", 1, None);
    assert!(again > id);
}

#[test]
fn running_admitted_and_pending_workloads_are_never_removed() {
    let mut h = Harness::new();
    let running = h.submit("running", 4, None);
    let admitted = h.submit("admitted", 4, None);
    h.cycle();
    h.report(running, Phase::Running);
    let pending = h.submit("pending", 16, None);
    h.cycle();
    // Cancelled while running: stopping, but its quota is held until the
    // executor confirms.
    let r = h.apply(Command::CancelWorkload {
        namespace: "default".into(),
        name: "running".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    let before = h.hash();
    assert_eq!(h.remove_finished(0, 100), (0, false));
    assert_eq!(h.hash(), before, "nothing removed, nothing changed");
    assert_eq!(h.state_of(running), WorkloadState::Running);
    assert_eq!(h.state_of(admitted), WorkloadState::Admitted);
    assert_eq!(h.state_of(pending), WorkloadState::Pending);
    assert_eq!(h.used(), 8);
    // Once the executor confirms the stop, the cancelled workload ended
    // and goes.
    h.report(running, Phase::Stopped);
    assert_eq!(h.state_of(running), WorkloadState::Cancelled);
    assert_eq!(h.remove_finished(0, 100), (1, false));
    assert!(h.ledger.workload(running).is_none());
}

#[test]
fn every_kind_of_end_is_removed_oldest_first_up_to_max() {
    let mut h = Harness::new();
    let succeeded = h.run_to("ok", Phase::Succeeded);
    let failed = h.run_to("bad", Phase::Failed);
    let cancelled = h.submit("never-ran", 64, None);
    let r = h.apply(Command::CancelWorkload {
        namespace: "default".into(),
        name: "never-ran".into(),
    });
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(h.state_of(cancelled), WorkloadState::Cancelled);
    assert_eq!(h.remove_finished(0, 2), (2, true));
    assert!(h.ledger.workload(succeeded).is_none());
    assert!(h.ledger.workload(failed).is_none());
    assert_eq!(h.state_of(cancelled), WorkloadState::Cancelled);
    assert_eq!(h.remove_finished(0, 2), (1, false));
    let removed: Vec<(u64, u64)> = h.ledger.state().removed.ranges().collect();
    assert_eq!(removed, [(succeeded, cancelled + 1)]);
}

#[test]
fn removal_with_max_zero_is_refused_and_changes_nothing() {
    let mut h = Harness::new();
    h.run_to("done", Phase::Succeeded);
    let before = h.hash();
    let r = h.apply(Command::RemoveFinished {
        retention_ms: 0,
        max: 0,
    });
    assert!(!r.is_ok());
    assert_eq!(r.errors[0].path, "max");
    assert_eq!(h.hash(), before);
}

#[test]
fn a_replica_that_installs_a_snapshot_removes_what_the_others_remove() {
    let mut h = Harness::new();
    let first = h.run_to("a", Phase::Succeeded);
    h.run_to("b", Phase::Failed);
    assert_eq!(h.remove_finished(0, 1), (1, true));
    assert!(h.ledger.workload(first).is_none());
    h.run_to("c", Phase::Succeeded);
    // A follower installs a snapshot taken now (a removal behind it, two
    // finished workloads still held), then both apply the same command.
    let bytes = h.ledger.export().expect("export");
    let mut follower = Ledger::import(&bytes, h.ledger.config().clone()).expect("import");
    assert_eq!(follower.state_hash(), h.hash());
    assert_eq!(follower.finished().len(), 2);
    let command = Request {
        at: Timestamp(h.now + 10_000),
        command: Command::RemoveFinished {
            retention_ms: 0,
            max: 1,
        },
    };
    let on_leader = h.ledger.apply(&command);
    let on_follower = follower.apply(&command);
    assert_eq!(on_leader, on_follower);
    assert_eq!(follower.state_hash(), h.ledger.state_hash());
    assert!(follower.violations().is_empty());
}

/// A cluster reporting nodes (issue 26): they must add up to its totals;
/// a refusal names `nodes` and changes nothing.
#[test]
fn nodes_that_do_not_add_up_are_refused() {
    let mut h = Harness::empty();
    let node = |name: &str, gpus: u64| fleetq_model::Node {
        name: name.into(),
        labels: BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]),
        flavor: FLAVOR.into(),
        allocatable: BTreeMap::from([(GPU.to_string(), Quantity::units(gpus))]),
        unschedulable: false,
    };
    let mut east = cluster("east", 16);
    east.nodes = vec![node("n1", 8), node("n2", 8)];
    let r = h.apply(Command::RegisterCluster {
        cluster: east.clone(),
        lease_policy: LeasePolicy::Fence,
    });
    assert!(r.is_ok(), "{r:?}");
    let before = h.ledger.state_hash();
    east.nodes.push(node("n3", 8));
    let r = h.apply(Command::RegisterCluster {
        cluster: east,
        lease_policy: LeasePolicy::Fence,
    });
    assert!(!r.is_ok());
    assert_eq!(paths(&r.errors), ["nodes"]);
    assert_eq!(h.ledger.state_hash(), before);
}
