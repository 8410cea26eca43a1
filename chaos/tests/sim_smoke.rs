//! A handful of simulated runs, with and without a leader partition; each
//! must pass every check. (`fleetq-chaos sim --seeds N` runs many more.)

use fleetq_chaos::{run_seed, Fault, Plan};

fn passes(seed: u64, partition: bool) {
    let plan = Plan::from_seed(seed);
    assert_eq!(
        matches!(plan.fault, Fault::PartitionLeader { .. }),
        partition,
        "seed {seed} no longer draws the fault this test is about: {}",
        plan.fault
    );
    match run_seed(seed) {
        Ok(report) => {
            println!("{report}");
            if partition {
                assert!(
                    report.injected.is_some(),
                    "seed {seed}: the partition was never injected"
                );
            }
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn seed_0_no_fault() {
    passes(0, false);
}

#[test]
fn seed_7_no_fault() {
    passes(7, false);
}

#[test]
fn seed_3_leader_partition() {
    passes(3, true);
}

#[test]
fn seed_4_leader_partition() {
    passes(4, true);
}

#[test]
fn seed_6_leader_partition() {
    passes(6, true);
}
