//! Any text imported as Kueue manifests: import never panics and every
//! error names its document. What imports is applied to a fresh ledger as
//! the CLI does (configuration through ApplyObjects, Workloads and Jobs
//! through SubmitWorkloads) on a cluster reporting every flavor, and one
//! admission cycle is scheduled and applied: the ledger's invariants hold
//! and apply() accepts every admission the scheduler made.
#![no_main]

use std::collections::BTreeMap;

use fleetq_ledger::{AdmitBatch, Command, CycleId, Ledger, Outcome, Request, Submission};
use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::{Cluster, ClusterState, Quantity, Timestamp};

fn apply(ledger: &mut Ledger, at: u64, command: Command) -> fleetq_ledger::Response {
    let request = Request {
        at: Timestamp(at),
        command,
    };
    // What goes into the Raft log must come out the same.
    let request = fleetq_fuzz::json_round_trip(&request);
    let response = ledger.apply_in_term(&request, Some(1));
    fleetq_fuzz::apply::check(ledger);
    response
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(yaml) = std::str::from_utf8(data) else {
        return;
    };
    let documents = match import_manifests(yaml) {
        Ok(documents) => documents,
        Err(errors) => {
            assert!(!errors.is_empty(), "a refused import says why");
            for e in &errors {
                let _ = e.to_string();
            }
            return;
        }
    };
    let mut config = Vec::new();
    let mut submissions = Vec::new();
    for d in &documents {
        let _ = d.locate(fleetq_model::FieldError::new("", "spec", "probe"));
        match &d.object {
            Object::Workload(w) => submissions.push(Submission {
                request_id: None,
                workload: std::sync::Arc::new(w.clone()),
            }),
            other => config.push(other.clone()),
        }
    }
    let mut ledger = Ledger::default();
    ledger.set_invariant_checks(true);
    let mut capacity: BTreeMap<String, BTreeMap<String, Quantity>> = BTreeMap::new();
    for cq in config.iter().filter_map(|o| match o {
        Object::ClusterQueue(cq) => Some(cq),
        _ => None,
    }) {
        for g in &cq.spec.resource_groups {
            for f in &g.flavors {
                for r in &f.resources {
                    capacity
                        .entry(f.name.clone())
                        .or_default()
                        .insert(r.name.clone(), Quantity::units(64));
                }
            }
        }
    }
    let r = apply(
        &mut ledger,
        1_000,
        Command::RegisterCluster {
            cluster: Cluster {
                nodes: Vec::new(),
                name: "east".into(),
                labels: BTreeMap::new(),
                capacity,
                state: ClusterState::Ready,
            },
            lease_policy: Default::default(),
        },
    );
    assert!(r.is_ok(), "{r:?}");
    if !config.is_empty() {
        apply(
            &mut ledger,
            2_000,
            Command::ApplyObjects { objects: config },
        );
    }
    if submissions.is_empty() {
        return;
    }
    let r = apply(
        &mut ledger,
        3_000,
        Command::SubmitWorkloads {
            submissions,
            max_pending_per_local_queue: None,
            admit: Vec::new(),
        },
    );
    assert!(r.is_ok(), "{r:?}");
    let decisions = fleetq_scheduler::schedule(
        ledger.snapshot(),
        Timestamp(4_000),
        ledger.scheduler_config(),
    );
    let wanted = decisions.admissions.len() as u32;
    let r = apply(
        &mut ledger,
        4_000,
        Command::AdmitBatch(AdmitBatch {
            cycle: CycleId { term: 1, seq: 1 },
            admissions: decisions.admissions,
            preemptions: decisions.preemptions,
            reasons: decisions.pending.into_iter().collect(),
            queue_reasons: decisions.queue_reasons.into_iter().collect(),
        }),
    );
    let Outcome::Admitted(outcome) = r.outcome else {
        panic!("{r:?}");
    };
    assert_eq!(outcome.admitted, wanted, "{outcome:?}");
});
