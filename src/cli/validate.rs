//! `fleetq validate`: checks manifests offline, with no server, the way the
//! control plane would check them on `apply`: every document imports, the
//! configuration set passes Kueue's rules as a whole, and every Workload or
//! Job binds to a LocalQueue, a ClusterQueue and a priority class in it.
//!
//! Every problem is reported at once, one line each, naming the file, the
//! document, the object and the field, so a platform team can fix a whole
//! manifest set in one pass.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fleetq_model::kueue::{import_manifests, ImportedDocument};
use fleetq_model::{Config, FieldError};

use super::input::{read_sources, Source};

/// Arguments of `fleetq validate` (its help text is on `Command::Validate`).
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Manifest file, directory (its .yaml, .yml and .json files) or `-`
    /// for standard input. Repeat to check several together.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// The outcome of checking a set of manifests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Objects per kind as written (`Job` stays `Job`), in a fixed order.
    pub counts: Vec<(String, usize)>,
    /// One line per problem, in file and document order.
    pub errors: Vec<String>,
}

impl Report {
    /// `ok: 2 ResourceFlavor, 1 ClusterQueue`.
    pub fn summary(&self) -> String {
        if self.counts.is_empty() {
            return "ok: no objects".to_string();
        }
        let counts: Vec<String> = self
            .counts
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        format!("ok: {}", counts.join(", "))
    }
}

/// Kinds in the order the summary lists them: what others depend on first.
const KIND_ORDER: [&str; 11] = [
    "Topology",
    "ResourceFlavor",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "WorkloadPriorityClass",
    "PriorityClass",
    "Workload",
    "Job",
    "JobSet",
    "Pod",
];

pub fn run(args: &ValidateArgs) -> ExitCode {
    let sources = read_sources(&args.files);
    let mut report = check(&sources.read);
    // Unreadable files first: nothing else can be said about them.
    let mut errors = sources.errors;
    errors.append(&mut report.errors);
    if errors.is_empty() {
        let mut out = std::io::stdout().lock();
        // A closed stdout (`| head -0`) is not worth a panic.
        let _ = writeln!(out, "{}", report.summary());
        ExitCode::SUCCESS
    } else {
        let mut err = std::io::stderr().lock();
        for line in &errors {
            let _ = writeln!(err, "{line}");
        }
        let n = errors.len();
        let _ = writeln!(err, "{n} error{}", if n == 1 { "" } else { "s" });
        ExitCode::FAILURE
    }
}

/// One imported document and the file it came from.
struct Entry<'a> {
    file: usize,
    source: &'a Source,
    doc: ImportedDocument,
}

/// An error line with the position it sorts by.
struct Problem {
    file: usize,
    document: usize,
    line: String,
}

impl Problem {
    fn at(file: usize, source: &Source, error: FieldError) -> Problem {
        Problem {
            file,
            document: error.document.unwrap_or(0),
            line: format!("{}: {error}", source.name),
        }
    }
}

/// Checks all sources as one set.
pub fn check(sources: &[Source]) -> Report {
    let mut problems = Vec::new();
    let mut entries = Vec::new();
    for (file, source) in sources.iter().enumerate() {
        match import_manifests(&source.text) {
            Ok(docs) => entries.extend(docs.into_iter().map(|doc| Entry { file, source, doc })),
            Err(errors) => problems.extend(
                errors
                    .into_iter()
                    .map(|error| Problem::at(file, source, error)),
            ),
        }
    }

    // The first definition of each object wins; later ones are errors
    // that name both places.
    let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
    let mut config = Config::default();
    let mut workloads = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let name = entry.doc.object.display_name();
        if let Some(&first) = by_name.get(&name) {
            if !entry.doc.source.generated_name {
                let first = &entries[first];
                let message = format!(
                    "duplicate: {} is also defined in {} document {}",
                    first.doc.source.name, first.source.name, first.doc.document
                );
                let error = FieldError::new("", "", message);
                problems.push(Problem::at(
                    entry.file,
                    entry.source,
                    entry.doc.locate(error),
                ));
                continue;
            }
        } else {
            by_name.insert(name, index);
        }
        *counts.entry(entry.doc.source.kind.clone()).or_default() += 1;
        match config.upsert(entry.doc.object.clone()) {
            Ok(()) => {}
            Err(workload) => workloads.push((index, workload)),
        }
    }

    for error in config.validate() {
        match by_name.get(&error.object).map(|&i| &entries[i]) {
            Some(entry) => problems.push(Problem::at(
                entry.file,
                entry.source,
                entry.doc.locate(error),
            )),
            None => problems.push(Problem {
                file: usize::MAX,
                document: 0,
                line: error.to_string(),
            }),
        }
    }
    for (index, workload) in &workloads {
        let entry = &entries[*index];
        if let Err(errors) = config.bind_workload(workload) {
            problems.extend(
                errors
                    .into_iter()
                    .map(|error| Problem::at(entry.file, entry.source, entry.doc.locate(error))),
            );
        }
    }

    // Stable: within one document, import, set and binding errors keep
    // their order.
    problems.sort_by_key(|p| (p.file, p.document));
    Report {
        counts: ordered_counts(counts),
        errors: problems.into_iter().map(|p| p.line).collect(),
    }
}

fn ordered_counts(mut counts: BTreeMap<String, usize>) -> Vec<(String, usize)> {
    let mut ordered: Vec<(String, usize)> = KIND_ORDER
        .iter()
        .filter_map(|kind| counts.remove(*kind).map(|n| (kind.to_string(), n)))
        .collect();
    ordered.extend(counts);
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(name: &str, text: &str) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }

    const FLAVOR: &str =
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: gpu}\n";

    #[test]
    fn duplicates_name_both_documents() {
        let report = check(&[
            source("a.yaml", FLAVOR),
            // A leading `---` opens document 1; it does not add an empty one.
            source("b.yaml", &format!("---\n{FLAVOR}---\n{FLAVOR}")),
        ]);
        assert_eq!(
            report.errors,
            [
                "b.yaml: document 1: ResourceFlavor/gpu: duplicate: ResourceFlavor/gpu is also defined in a.yaml document 1",
                "b.yaml: document 2: ResourceFlavor/gpu: duplicate: ResourceFlavor/gpu is also defined in a.yaml document 1",
            ]
        );
    }

    #[test]
    fn summary_lists_kinds_in_dependency_order() {
        let report = check(&[source("a.yaml", FLAVOR)]);
        assert!(report.errors.is_empty());
        assert_eq!(report.summary(), "ok: 1 ResourceFlavor");
        assert_eq!(
            check(&[source("empty.yaml", "")]).summary(),
            "ok: no objects"
        );
    }

    #[test]
    fn errors_sort_by_file_then_document() {
        let lq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\nspec: {clusterQueue: missing}\n";
        let report = check(&[
            source("1.yaml", &format!("{FLAVOR}---\n{lq}")),
            source("0.yaml", "kind: [\n"),
        ]);
        assert_eq!(report.errors.len(), 2);
        assert!(report.errors[0]
            .starts_with("1.yaml: document 2: LocalQueue/default/q: spec.clusterQueue:"));
        assert!(report.errors[1].starts_with("0.yaml: document 1: malformed YAML"));
    }
}
