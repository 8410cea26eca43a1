//! Writes the seed corpora under fuzz/corpus/<target>/ from the tests'
//! fixtures (README, "Fuzzing"):
//!
//! - kueue_import: the Kueue documentation manifests of
//!   crates/fleetq-model/tests/testdata, deploy/dev/sample.yaml, and every
//!   raw string literal holding a manifest in the tests (`r#"..."#` with
//!   `apiVersion` or `kind:`);
//! - quantity_parse: quantity strings and numbers as manifests write them;
//! - command_decode: every log entry (`Request`) and bare `Command` the
//!   scripted ledger scenarios below apply, as JSON;
//! - command_apply: the scripted scenarios themselves (the byte layout of
//!   `fleetq_fuzz::apply`), and each JSON command of command_decode
//!   embedded as a RAW op after a few submissions.
//!
//! Run from the repository root:
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds`
//! (files are named by a hash of their contents; existing ones are kept).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fleetq_fuzz::apply::{op, Harness};
use fleetq_fuzz::input::Writer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/ has a parent")
        .to_path_buf()
}

/// FNV-1a, for stable file names.
fn name(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("seed-{h:016x}")
}

fn write(target: &str, items: &BTreeSet<Vec<u8>>) {
    let dir = root().join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    for item in items {
        std::fs::write(dir.join(name(item)), item).expect("write seed");
    }
    println!("{target}: {} seeds", items.len());
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The contents of `r#"..."#` and `r"..."` literals.
fn raw_strings(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (open, close) in [("r#\"", "\"#"), ("r\"", "\"")] {
        let mut rest = source;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len()..];
            let Some(end) = after.find(close) else { break };
            out.push(after[..end].to_string());
            rest = &after[end + close.len()..];
        }
    }
    out
}

fn yaml_seeds() -> BTreeSet<Vec<u8>> {
    let root = root();
    let mut seeds = BTreeSet::new();
    for path in files(
        &root.join("crates/fleetq-model/tests/testdata/kueue-docs"),
        "yaml",
    ) {
        seeds.insert(std::fs::read(path).expect("read testdata"));
    }
    seeds.insert(std::fs::read(root.join("deploy/dev/sample.yaml")).expect("sample.yaml"));
    for dir in [
        "tests",
        "crates/fleetq-model/tests",
        "crates/fleetq-ledger/tests",
        "crates/fleetq-scheduler/tests",
    ] {
        for path in files(&root.join(dir), "rs") {
            let source = std::fs::read_to_string(path).expect("read test");
            for s in raw_strings(&source) {
                if s.contains("apiVersion") || s.contains("kind:") {
                    seeds.insert(s.into_bytes());
                }
            }
        }
    }
    seeds.insert(fleetq_fuzz::apply::CONFIG_POOL.as_bytes().to_vec());
    seeds.insert(fleetq_fuzz::apply::CONFIG_TREE.as_bytes().to_vec());
    seeds
}

fn quantity_seeds() -> BTreeSet<Vec<u8>> {
    [
        "8",
        "0",
        "500m",
        "1Gi",
        "64Gi",
        "80GB",
        "1.5",
        "2e3",
        "1E-3",
        "10k",
        "0.5Gi",
        ".5",
        "+3",
        "1n",
        "1500u",
        "1e-40",
        "100Ei",
        "1e300",
        "9223372036854775",
        "9223372036854775807m",
        "-1",
        "",
        " 4 ",
        "1Ki",
        "2Mi",
        "5G",
        "5T",
        "1P",
        "1E",
        "3Ti",
        "1Pi",
        "1Ei",
        "0.001",
        "12.000",
        "1e3m",
        "4 GPUs",
        "0x10",
        "8\"",
        "\"64Gi\"",
        "1.5e3",
        "99999999999999999999",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

/// `SUBMIT name gpus queue class request pods extras limit`; queue indexes
/// team-a, team-b, team-c, budgeted, missing; class none, none, low, high,
/// unknown.
fn submit(w: &mut Writer, name: u8, gpus: u8, queue: u8, class: u8) -> &mut Writer {
    w.raw(&[op::SUBMIT, name, gpus, queue, class, 0, 0, 0, 0])
}

fn scenarios() -> Vec<Vec<u8>> {
    let mut out = Vec::new();

    // Admission, preemption within a queue and across the cohort, status
    // reports, cancel, lease expiry, reconcile, re-registration.
    let mut w = Writer::default();
    w.byte(0);
    submit(&mut w, 0, 4, 0, 3);
    submit(&mut w, 1, 4, 0, 2);
    submit(&mut w, 2, 8, 1, 0);
    w.byte(op::CYCLE);
    w.raw(&[op::REPORT, 0, 0, 0, 0, 1]);
    w.raw(&[op::REPORT, 1, 0, 0, 0, 1]);
    submit(&mut w, 3, 8, 0, 3);
    w.byte(op::CYCLE);
    w.raw(&[op::REPORT, 0, 0, 4, 0, 1]);
    w.raw(&[op::REPORT, 1, 0, 4, 0, 1]);
    w.byte(op::CYCLE);
    w.raw(&[op::REPORT, 0, 0, 2, 0, 1]);
    w.raw(&[op::CANCEL, 1]);
    w.raw(&[op::EXPIRE, 0]);
    w.raw(&[op::RECONCILE, 1, 1]);
    w.raw(&[op::REGISTER, 0, 8, 0]);
    w.raw(&[op::DRAIN, 1]);
    w.byte(op::ADVANCE).u16(600);
    w.byte(op::CYCLE);
    w.raw(&[op::REPLAY, 0, 0]);
    w.raw(&[op::REPLAY, 1, 1]);
    out.push(w.bytes);

    // Wait-for-ready: admissions never reported running are evicted,
    // back off, and are deactivated past the limit.
    let mut w = Writer::default();
    w.byte(2);
    submit(&mut w, 0, 2, 0, 0);
    submit(&mut w, 1, 2, 1, 0);
    for _ in 0..3 {
        w.byte(op::CYCLE);
        w.byte(op::ADVANCE).u16(120);
        w.raw(&[op::EVICT, 0, 0]);
        w.raw(&[op::REPORT, 0, 0, 4, 0, 1]);
        w.raw(&[op::REPORT, 1, 0, 4, 0, 1]);
        w.byte(op::ADVANCE).u16(700);
    }
    w.byte(op::CYCLE);
    out.push(w.bytes);

    // The cohort tree: borrowing, lending limits, a budget, StrictFIFO;
    // configuration changes under admitted work, deletes, a snapshot
    // install and a new leader.
    let mut w = Writer::default();
    w.byte(4);
    submit(&mut w, 0, 8, 0, 2);
    submit(&mut w, 1, 6, 1, 3);
    submit(&mut w, 2, 4, 2, 0);
    w.raw(&[op::SUBMIT, 3, 2, 3, 0, 0, 0, 9, 0]);
    w.raw(&[op::SUBMIT, 4, 1, 3, 0, 130, 9, 0, 2]);
    w.byte(op::CYCLE);
    w.raw(&[op::RECONFIGURE, 0, 0, 2, 0]);
    w.raw(&[op::RECONFIGURE, 1, 1, 20, 0]);
    w.raw(&[op::RECONFIGURE, 3, 2, 1, 0]);
    w.raw(&[op::RECONFIGURE, 5, 3, 0, 1]);
    w.raw(&[op::RECONFIGURE, 7, 3, 2, 3]);
    w.raw(&[op::DELETE, 0, 2]);
    w.raw(&[op::DELETE, 1, 5]);
    w.byte(op::SNAPSHOT);
    w.raw(&[op::TERM, 5]);
    w.byte(op::CYCLE);
    w.raw(&[op::RECONFIGURE, 9, 0, 0, 0]);
    w.byte(op::CYCLE);
    out.push(w.bytes);

    // Forged cycles: every kind of mutation once, fair sharing on.
    for kind in 0..12u8 {
        let mut w = Writer::default();
        w.byte(1 | (kind & 4));
        submit(&mut w, 0, 4, 0, 3);
        submit(&mut w, 1, 4, 1, 2);
        submit(&mut w, 2, 6, 0, 2);
        w.byte(op::CYCLE);
        submit(&mut w, 3, 8, 0, 3);
        w.raw(&[op::MUTATE, 0, kind, 0, 1]);
        w.raw(&[op::MUTATE, 1, kind, 1, 2, kind.wrapping_add(4), 0, 3]);
        w.byte(op::CYCLE);
        out.push(w.bytes);
    }
    out
}

fn main() {
    write("kueue_import", &yaml_seeds());
    write("quantity_parse", &quantity_seeds());

    let scenarios = scenarios();
    let mut commands = BTreeSet::new();
    for s in &scenarios {
        let h = Harness::run(s);
        for (request, _) in &h.log {
            commands.insert(serde_json::to_vec(request).expect("encode request"));
            commands.insert(serde_json::to_vec(&request.command).expect("encode command"));
        }
    }
    write("command_decode", &commands);

    let mut apply: BTreeSet<Vec<u8>> = scenarios.into_iter().collect();
    for json in &commands {
        if serde_json::from_slice::<fleetq_ledger::Command>(json).is_err() {
            continue;
        }
        let Ok(len) = u16::try_from(json.len()) else {
            continue;
        };
        let mut w = Writer::default();
        w.byte(0);
        submit(&mut w, 0, 4, 0, 3);
        submit(&mut w, 1, 4, 1, 2);
        w.byte(op::CYCLE);
        w.byte(op::RAW).u16(len).raw(json);
        w.byte(op::CYCLE);
        apply.insert(w.bytes);
    }
    write("command_apply", &apply);
}
