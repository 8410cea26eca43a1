//! A handful of simulated runs, by the first fault their seed draws: none,
//! a leader partition, and a crash (of a follower, of the leader) with a
//! restart from the same disk; some draw a second fault or an agent
//! fault too. Each must pass every check, and every planned fault must
//! strike. (`fleetq-chaos sim --seeds N` runs many more.)

use fleetq_chaos::{run_seed, CrashTarget, Fault, Plan};

/// The fault a seed is expected to draw.
#[derive(Debug, PartialEq)]
enum Kind {
    NoFault,
    Partition,
    CrashLeader,
    CrashFollower,
}

fn kind(fault: Option<&Fault>) -> Kind {
    match fault {
        None | Some(Fault::None) => Kind::NoFault,
        Some(other) => kind_of(other),
    }
}

fn kind_of(fault: &Fault) -> Kind {
    match fault {
        Fault::PartitionLeader { .. } => Kind::Partition,
        Fault::CrashNode {
            target: CrashTarget::Leader,
            ..
        } => Kind::CrashLeader,
        Fault::CrashNode {
            target: CrashTarget::Follower(_),
            ..
        } => Kind::CrashFollower,
        // Only a fault of the second draw: the first drew none.
        _ => Kind::NoFault,
    }
}

fn passes(seed: u64, expected: Kind) {
    let plan = Plan::from_seed(seed, 3);
    assert_eq!(
        kind(plan.faults.first()),
        expected,
        "seed {seed} no longer draws the fault this test is about: {}",
        plan.describe()
    );
    match run_seed(seed) {
        Ok(report) => {
            println!("{report}");
            assert_eq!(
                report.injected.len(),
                plan.faults.len() + plan.agent_faults.len() + plan.node_faults.len(),
                "seed {seed}: a planned fault was never injected"
            );
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
