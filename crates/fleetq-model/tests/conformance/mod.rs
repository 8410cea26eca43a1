//! The harness of the Kueue validation conformance tests (issue 28, items
//! 1 and 8): each case is one of Kueue's validation rules, the Kueue
//! source that enforces it and the Kueue test it is derived from, an
//! input, and the verdict with the field path Kueue reports. A case runs
//! the input through what `fleetq validate` and `fleetq apply` run
//! (import, the configuration's checks, workload binding) and compares.
//!
//! The case tables are the rule -> Kueue source -> fleetq test table the
//! issue asks for; `docs/kueue-conformance.md` points at them.

use fleetq_model::kueue::import_manifests;
use fleetq_model::{Config, FieldError};

/// What Kueue does with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Accepted.
    Accept,
    /// Refused, with an error at this field path (fleetq's spelling: the
    /// path of the input as written, `spec.resourceGroups[0].flavors`).
    Refuse(&'static str),
}

pub struct Case {
    /// The rule's id in the research table (`CQ-33`), and a
    /// suffix when one rule has several cases.
    pub rule: &'static str,
    /// Where Kueue enforces it (main at ff69552e; `a2/` is
    /// apis/kueue/v1beta2, `wh/` pkg/webhooks, `jf/`
    /// pkg/controller/jobframework).
    pub kueue: &'static str,
    /// The Kueue test case it is derived from, or "none".
    pub kueue_test: &'static str,
    /// Manifests applied on top of the table's base.
    pub yaml: &'static str,
    pub expect: Expect,
}

/// Every error `fleetq apply -f` would report for `base` and `yaml`
/// together: import (decoding, names, per-kind checks), the
/// configuration's checks, then each workload's binding.
pub fn errors(base: &str, yaml: &str) -> Vec<FieldError> {
    let text = format!("{base}\n---\n{yaml}");
    let docs = match import_manifests(&text) {
        Ok(docs) => docs,
        Err(errors) => return errors,
    };
    let mut config = Config::default();
    let mut workloads = Vec::new();
    let mut by_object = std::collections::BTreeMap::new();
    for doc in docs {
        by_object.insert(doc.object.display_name(), doc.clone());
        if let Err(w) = config.upsert(doc.object.clone()) {
            workloads.push((doc, *w));
        }
    }
    // Paths as the user wrote them (v1beta1's `spec.cohort`), as
    // `fleetq validate` prints them.
    let mut out: Vec<FieldError> = config
        .validate()
        .into_iter()
        .map(|e| match by_object.get(&e.object) {
            Some(doc) => doc.locate(e),
            None => e,
        })
        .collect();
    if out.is_empty() {
        for (doc, w) in workloads {
            if let Err(errors) = config.bind_workload(&w) {
                // Paths as the user wrote them (a Job's label, not the
                // Workload field it becomes).
                out.extend(errors.into_iter().map(|e| doc.locate(e)));
            }
        }
    }
    out
}

/// Whether fleetq's verdict (and path) for `case` is Kueue's.
// Not every test binary that includes this harness uses all of it.
#[allow(dead_code)]
pub fn agrees(base: &str, case: &Case) -> bool {
    let errors = errors(base, case.yaml);
    match case.expect {
        Expect::Accept => errors.is_empty(),
        Expect::Refuse(path) => errors.iter().any(|e| e.path == path),
    }
}

/// Runs every case; fails listing each disagreement with Kueue.
pub fn run<'a>(base: &str, cases: impl IntoIterator<Item = &'a Case>) {
    let cases: Vec<&Case> = cases.into_iter().collect();
    let mut disagreements = Vec::new();
    for case in cases.iter().copied() {
        let errors = errors(base, case.yaml);
        let paths: Vec<String> = errors.iter().map(|e| e.path.clone()).collect();
        let agrees = match case.expect {
            Expect::Accept => errors.is_empty(),
            Expect::Refuse(path) => paths.iter().any(|p| p == path),
        };
        if !agrees {
            let got = if errors.is_empty() {
                "accepted".to_string()
            } else {
                errors
                    .iter()
                    .map(|e| format!("{}: {}", e.path, e.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            disagreements.push(format!(
                "{} ({}; Kueue test: {}): expected {:?}, fleetq: {got}",
                case.rule, case.kueue, case.kueue_test, case.expect
            ));
        }
    }
    eprintln!(
        "{} cases, {} agree with Kueue",
        cases.len(),
        cases.len() - disagreements.len()
    );
    assert!(
        disagreements.is_empty(),
        "{} of {} cases disagree with Kueue:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements.join("\n")
    );
}
