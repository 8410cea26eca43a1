//! The checker can fail: with each planted bug of
//! `fleetq_model::mutants` switched on, `fleetq-chaos sim` must report a
//! violation within 200 seeds. Built only with the `chaos-mutants`
//! feature: `cargo test -p fleetq-chaos --features chaos-mutants --test
//! mutants`.

use std::process::Command;

use fleetq_model::mutants::Mutant;

/// The first seed that caught `mutant`, and the check it failed.
fn caught(mutant: Mutant) -> Option<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetq-chaos"))
        .env("FLEETQ_MUTANT", mutant.name())
        .args(["sim", "--seeds", "200", "--until-violation"])
        .output()
        .expect("fleetq-chaos runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let fail = text.lines().find(|l| l.starts_with("FAIL "))?.to_string();
    assert!(
        !out.status.success(),
        "a violation must fail the run: {text}"
    );
    Some(fail)
}

#[test]
fn every_mutant_is_caught_within_200_seeds() {
    let mut missed = Vec::new();
    for mutant in Mutant::ALL {
        match caught(mutant) {
            Some(line) => eprintln!("{}: {line}", mutant.name()),
            None => missed.push(mutant.name()),
        }
    }
    assert!(missed.is_empty(), "not caught within 200 seeds: {missed:?}");
}
