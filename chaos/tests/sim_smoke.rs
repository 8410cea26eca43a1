//! A handful of simulated runs: no fault, a leader partition, and a crash
//! (of a follower, of the leader) with a restart from the same disk; each
//! must pass every check. (`fleetq-chaos sim --seeds N` runs many more.)

use fleetq_chaos::{run_seed, CrashTarget, Fault, Plan};

/// The fault a seed is expected to draw.
#[derive(Debug, PartialEq)]
enum Kind {
    NoFault,
    Partition,
    CrashLeader,
    CrashFollower,
}

fn kind(fault: &Fault) -> Kind {
    match fault {
        Fault::None => Kind::NoFault,
        Fault::PartitionLeader { .. } => Kind::Partition,
        Fault::CrashNode {
            target: CrashTarget::Leader,
            ..
        } => Kind::CrashLeader,
        Fault::CrashNode {
            target: CrashTarget::Follower(_),
            ..
        } => Kind::CrashFollower,
    }
}

fn passes(seed: u64, expected: Kind) {
    let plan = Plan::from_seed(seed);
    assert_eq!(
        kind(&plan.fault),
        expected,
        "seed {seed} no longer draws the fault this test is about: {}",
        plan.fault
    );
    match run_seed(seed) {
        Ok(report) => {
            println!("{report}");
            if expected != Kind::NoFault {
                assert!(
                    report.injected.is_some(),
                    "seed {seed}: the fault was never injected"
                );
            }
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn seed_1_no_fault() {
    passes(1, Kind::NoFault);
}

#[test]
fn seed_7_no_fault() {
    passes(7, Kind::NoFault);
}

#[test]
fn seed_3_leader_partition() {
    passes(3, Kind::Partition);
}

#[test]
fn seed_4_leader_partition() {
    passes(4, Kind::Partition);
}

#[test]
fn seed_6_leader_partition() {
    passes(6, Kind::Partition);
}

#[test]
fn seed_17_leader_crash_and_restart() {
    passes(17, Kind::CrashLeader);
}

#[test]
fn seed_0_follower_crash_and_restart() {
    passes(0, Kind::CrashFollower);
}
