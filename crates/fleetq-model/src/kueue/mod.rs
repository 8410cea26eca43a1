//! Import of Kueue manifests (multi-document YAML) into fleetq objects.
//!
//! A platform team should be able to hand fleetq the manifests it already
//! applies to Kueue. [`import_manifests`] reads a YAML stream (`---`
//! separated, or a `v1 List` as `kubectl get -o yaml` writes it), dispatches
//! each document on `apiVersion` and `kind`, and turns it into an
//! [`Object`]:
//!
//! | apiVersion | kinds |
//! |---|---|
//! | `kueue.x-k8s.io/v1beta1`, `v1beta2` | ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload, Cohort, Topology |
//! | `kueue.x-k8s.io/v1alpha1` | Cohort |
//! | `batch/v1` | Job (becomes a Workload, as Kueue's job integration does) |
//! | `jobset.x-k8s.io/v1alpha2` | JobSet (becomes a Workload of a pod set per replicated Job, as Kueue's JobSet integration does) |
//! | `ray.io/v1` | RayJob (becomes a Workload of pod sets `head`, one per worker group, and `submitter`, as Kueue's RayJob integration does) |
//! | `kubeflow.org/v1` | PyTorchJob (becomes a Workload of a pod set per replica type, `master` then `worker`, as Kueue's Kubeflow integration does) |
//! | `v1` | Pod (a plain Pod becomes a Workload of one pod; the pods of a `kueue.x-k8s.io/pod-group-name` group become one Workload of a pod set per role, as Kueue's pod integration does) |
//!
//! Kueue kinds are decoded strictly: an unknown field anywhere in `spec` is
//! an error with its path, because a misspelt `lendingLimit` that is silently
//! dropped changes who gets GPUs. A kind or field Kueue has and fleetq does
//! not support (admission checks, MultiKueue, ...) is refused as
//! `not supported by fleetq: <field> (<why>)` ([`unsupported`]). `status`
//! and server-populated metadata are ignored. Jobs are strict only where
//! fleetq interprets them (see [`pod`]).
//! Every error carries the document number, the object and the field path.

mod annotations;
mod config_kinds;
mod documents;
pub mod export;
pub mod guard;
mod job;
mod jobset;
mod meta;
mod pod;
mod pod_group;
mod pytorchjob;
mod rayjob;
pub(crate) mod rules;
pub(crate) mod syntax;
mod topology;
mod unsupported;
mod versions;
mod workload;

use serde_json::Value;

use crate::config::Object;
use crate::FieldError;
pub use job::{job_template_problem, MAX_JOB_TEMPLATE_BYTES};
pub(crate) use meta::join as join_path;
use meta::Location;
pub use pod_group::{pod_role, POD_GROUP_NAME_LABEL, POD_GROUP_TOTAL_COUNT_ANNOTATION};
pub use topology::{
    JOB_COMPLETION_INDEX_LABEL, PREFERRED_ANNOTATION, REQUIRED_ANNOTATION,
    SLICE_REQUIRED_ANNOTATION, SLICE_SIZE_ANNOTATION, UNCONSTRAINED_ANNOTATION,
};

/// Kueue's API group.
pub const KUEUE_GROUP: &str = "kueue.x-k8s.io";
/// Label that names a Job's LocalQueue.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Label that names a Job's WorkloadPriorityClass.
pub const PRIORITY_CLASS_LABEL: &str = "kueue.x-k8s.io/priority-class";
/// Label with a Job's maximum execution time in seconds.
pub const MAX_EXEC_TIME_LABEL: &str = "kueue.x-k8s.io/max-exec-time-seconds";
/// Annotation that enables partial admission of a Job down to this many pods.
pub const MIN_PARALLELISM_ANNOTATION: &str = "kueue.x-k8s.io/job-min-parallelism";
/// The pod set name Kueue gives a Job's pods.
pub const DEFAULT_POD_SET: &str = "main";
/// Namespace of a namespaced object that does not name one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// One object read from a manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedDocument {
    /// 1-based document number in the YAML stream.
    pub document: usize,
    pub object: Object,
    /// What the manifest said, for error messages that point back at it.
    pub source: Source,
}

/// The manifest an object came from: its kind as written (a `Job` becomes a
/// `Workload`) and how fleetq's field paths map back onto it.
#[derive(Clone, Debug, PartialEq)]
pub struct Source {
    pub api_version: String,
    pub kind: String,
    /// `Kind/name` or `Kind/namespace/name`, as written: `Job/default/train`.
    pub name: String,
    /// The name was generated from `metadata.generateName`, so two documents
    /// with the same prefix are distinct objects, not duplicates.
    pub generated_name: bool,
    /// `items[i].` inside a `v1 List`, empty otherwise.
    path_prefix: String,
    /// (fleetq path, manifest path) pairs, most specific first.
    rewrites: Vec<(String, String)>,
}

impl ImportedDocument {
    /// Re-points an error about [`Self::object`] (as [`Config::validate`] or
    /// [`Config::bind_workload`] report it) at the manifest as written: its
    /// document, its kind and name, and the field the user actually wrote
    /// (`metadata.labels["kueue.x-k8s.io/queue-name"]` rather than a Job's
    /// non-existent `spec.queueName`).
    ///
    /// [`Config::validate`]: crate::Config::validate
    /// [`Config::bind_workload`]: crate::Config::bind_workload
    pub fn locate(&self, error: FieldError) -> FieldError {
        let path = self
            .source
            .rewrites
            .iter()
            .find_map(|(ours, theirs)| {
                let rest = error.path.strip_prefix(ours.as_str())?;
                let at_boundary = rest.is_empty() || rest.starts_with(['.', '[']);
                at_boundary.then(|| format!("{theirs}{rest}"))
            })
            .unwrap_or_else(|| error.path.clone());
        let at = Location {
            document: self.document,
            object: self.source.name.clone(),
            path_prefix: self.source.path_prefix.clone(),
        };
        at.error(path, error.message)
    }
}

/// The kinds fleetq imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ResourceFlavor,
    Cohort,
    ClusterQueue,
    LocalQueue,
    WorkloadPriorityClass,
    PriorityClass,
    Workload,
    Job,
    JobSet,
    PyTorchJob,
    RayJob,
    Pod,
    Configuration,
    Namespace,
    Topology,
}

const KUEUE_V1BETA: &[&str] = &["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"];
const KUEUE_COHORT: &[&str] = &[
    "kueue.x-k8s.io/v1alpha1",
    "kueue.x-k8s.io/v1beta1",
    "kueue.x-k8s.io/v1beta2",
];
const BATCH_V1: &[&str] = &["batch/v1"];
const JOBSET_V1ALPHA2: &[&str] = &["jobset.x-k8s.io/v1alpha2"];
const KUBEFLOW_V1: &[&str] = &["kubeflow.org/v1"];
const RAY_V1: &[&str] = &["ray.io/v1"];
const SCHEDULING_V1: &[&str] = &["scheduling.k8s.io/v1"];
const CORE_V1: &[&str] = &["v1"];
const KUEUE_CONFIG: &[&str] = &[
    "config.kueue.x-k8s.io/v1beta1",
    "config.kueue.x-k8s.io/v1beta2",
];

const SUPPORTED: &str = "fleetq imports kueue.x-k8s.io/v1beta1 and v1beta2 ResourceFlavor, \
    ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload and Topology; Cohort in \
    kueue.x-k8s.io/v1alpha1, v1beta1 and v1beta2; batch/v1 Job; jobset.x-k8s.io/v1alpha2 JobSet; kubeflow.org/v1 PyTorchJob; ray.io/v1 RayJob; v1 Pod; \
    config.kueue.x-k8s.io/v1beta1 and v1beta2 Configuration; scheduling.k8s.io/v1 PriorityClass; \
    v1 Namespace; and v1 List of those";

impl Kind {
    fn from_name(kind: &str) -> Option<Kind> {
        Some(match kind {
            "ResourceFlavor" => Kind::ResourceFlavor,
            "Cohort" => Kind::Cohort,
            "ClusterQueue" => Kind::ClusterQueue,
            "LocalQueue" => Kind::LocalQueue,
            "WorkloadPriorityClass" => Kind::WorkloadPriorityClass,
            "PriorityClass" => Kind::PriorityClass,
            "Workload" => Kind::Workload,
            "Job" => Kind::Job,
            "JobSet" => Kind::JobSet,
            "PyTorchJob" => Kind::PyTorchJob,
            "RayJob" => Kind::RayJob,
            "Pod" => Kind::Pod,
            "Configuration" => Kind::Configuration,
            "Namespace" => Kind::Namespace,
            "Topology" => Kind::Topology,
            _ => return None,
        })
    }

    fn api_versions(self) -> &'static [&'static str] {
        match self {
            Kind::Cohort => KUEUE_COHORT,
            Kind::Job => BATCH_V1,
            Kind::JobSet => JOBSET_V1ALPHA2,
            Kind::PyTorchJob => KUBEFLOW_V1,
            Kind::RayJob => RAY_V1,
            Kind::PriorityClass => SCHEDULING_V1,
            Kind::Configuration => KUEUE_CONFIG,
            Kind::Namespace | Kind::Pod => CORE_V1,
            _ => KUEUE_V1BETA,
        }
    }

    fn is_namespaced(self) -> bool {
        matches!(
            self,
            Kind::LocalQueue
                | Kind::Workload
                | Kind::Job
                | Kind::JobSet
                | Kind::PyTorchJob
                | Kind::RayJob
                | Kind::Pod
        )
    }
}

/// Imports every document of a YAML stream.
///
/// All documents are checked and every error is returned, each naming its
/// document number, object and field path; nothing is returned unless the
/// whole stream is valid. Empty and comment-only documents are skipped (but
/// counted, so numbers match what a reader counts).
pub fn import_manifests(yaml: &str) -> Result<Vec<ImportedDocument>, Vec<FieldError>> {
    guard::check(yaml).map_err(|e| vec![e])?;
    let (documents, syntax_error) = documents::split_documents(yaml);
    let mut imported = Vec::new();
    let mut errors = Vec::new();
    // A pod group's pods may sit in several documents: each is read on
    // its own, the group becomes a Workload once all are read.
    let mut pod_groups = pod_group::PodGroups::default();
    for document in documents {
        import_value(
            document.value,
            document.number,
            "",
            &mut Sink {
                imported: &mut imported,
                errors: &mut errors,
                pod_groups: &mut pod_groups,
            },
        );
    }
    pod_groups.finish(&mut imported, &mut errors);
    errors.extend(syntax_error);
    if errors.is_empty() {
        Ok(imported)
    } else {
        Err(errors)
    }
}

/// The `apiVersion`, `kind` and names of a document, read before decoding
/// so that even a document that fails to decode is named in its errors.
struct Header {
    api_version: String,
    kind: String,
    name: Option<String>,
    namespace: Option<String>,
}

/// Where imported objects, errors and pods of groups go.
struct Sink<'a> {
    imported: &'a mut Vec<ImportedDocument>,
    errors: &'a mut Vec<FieldError>,
    pod_groups: &'a mut pod_group::PodGroups,
}

fn import_value(value: Value, document: usize, path_prefix: &str, sink: &mut Sink<'_>) {
    let bare = Location {
        document,
        object: String::new(),
        path_prefix: path_prefix.to_string(),
    };
    let header = match read_header(&value, &bare) {
        Ok(header) => header,
        Err(error) => return sink.errors.push(error),
    };
    if header.api_version == "v1" && header.kind == "List" {
        return import_list(value, document, path_prefix, sink);
    }
    let kind = Kind::from_name(&header.kind);
    let at = Location {
        object: display_name(&header, kind.is_some_and(Kind::is_namespaced)),
        ..bare
    };
    let kind = match kind {
        Some(kind) if kind.api_versions().contains(&header.api_version.as_str()) => kind,
        Some(kind) => {
            return sink.errors.push(at.error(
                "apiVersion",
                format!(
                    "{:?} is not a supported apiVersion for {}; use {}",
                    header.api_version,
                    header.kind,
                    kind.api_versions().join(" or ")
                ),
            ))
        }
        None => {
            let kueue = header
                .api_version
                .strip_prefix(KUEUE_GROUP)
                .is_some_and(|version| version.starts_with('/'));
            let message = match unsupported::kind(&header.kind) {
                Some(why) if kueue => unsupported::message(&header.kind, why),
                _ => format!(
                    "{} {} is not supported: {SUPPORTED}",
                    header.api_version, header.kind
                ),
            };
            return sink.errors.push(at.error("kind", message));
        }
    };
    let mut value = value;
    let mut refused = if KUEUE_V1BETA.contains(&header.api_version.as_str()) {
        unsupported::take(&mut value, &header.kind, &at)
    } else {
        Vec::new()
    };
    refused.extend(versions::check(
        &header.kind,
        &header.api_version,
        &value,
        &at,
    ));
    let result = match kind {
        Kind::ResourceFlavor => config_kinds::resource_flavor(value, &at),
        Kind::Cohort => config_kinds::cohort(value, &at),
        Kind::ClusterQueue => config_kinds::cluster_queue(value, &at),
        Kind::LocalQueue => config_kinds::local_queue(value, &at),
        Kind::WorkloadPriorityClass => config_kinds::priority_class(value, &at),
        Kind::PriorityClass => config_kinds::pod_priority_class(value, &at),
        Kind::Workload => workload::kueue_workload(value, &at),
        Kind::Job => job::job(value, &at),
        Kind::JobSet => jobset::jobset(value, &at),
        Kind::PyTorchJob => pytorchjob::pytorchjob(value, &at),
        Kind::RayJob => rayjob::rayjob(value, &at),
        Kind::Pod => match pod_group::pod(value, &at) {
            Ok(pod_group::Read::Single(converted)) => Ok(*converted),
            Ok(pod_group::Read::Grouped(member)) => {
                if refused.is_empty() {
                    sink.pod_groups.add(*member);
                } else {
                    sink.errors.append(&mut refused);
                }
                return;
            }
            Err(more) => Err(more),
        },
        Kind::Configuration => config_kinds::configuration(value, &at),
        Kind::Namespace => config_kinds::namespace(value, &at),
        Kind::Topology => topology::topology(value, &at),
    };
    match result {
        Ok(_) if !refused.is_empty() => sink.errors.append(&mut refused),
        Ok(mut converted) => {
            converted
                .rewrites
                .extend(versions::rewrites(&header.kind, &header.api_version));
            sink.imported.push(ImportedDocument {
                document,
                object: converted.object,
                source: Source {
                    api_version: header.api_version,
                    kind: header.kind,
                    name: converted.source_name,
                    generated_name: converted.generated_name,
                    path_prefix: path_prefix.to_string(),
                    rewrites: converted.rewrites,
                },
            })
        }
        Err(mut more) => {
            sink.errors.append(&mut refused);
            sink.errors.append(&mut more);
        }
    }
}

/// A `v1 List`: each of `items` is imported as if it were its own document,
/// with paths prefixed by `items[i].`.
fn import_list(value: Value, document: usize, path_prefix: &str, sink: &mut Sink<'_>) {
    let at = Location {
        document,
        object: "List".into(),
        path_prefix: path_prefix.to_string(),
    };
    match value {
        Value::Object(mut map) => match map.remove("items") {
            Some(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    let prefix = format!("{path_prefix}items[{i}].");
                    import_value(item, document, &prefix, sink);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => sink
                .errors
                .push(at.error("items", "must be a list of objects")),
        },
        _ => sink.errors.push(at.error("", "must be a mapping")),
    }
}

fn read_header(value: &Value, at: &Location) -> Result<Header, FieldError> {
    let Value::Object(map) = value else {
        return Err(at.error(
            "",
            format!(
                "a document must be a mapping with apiVersion, kind and metadata, not {}",
                json_type(value)
            ),
        ));
    };
    let string_field = |field: &str| match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        None | Some(Value::Null) => Err(at.error(field, "is required")),
        Some(Value::String(_)) => Err(at.error(field, "must not be empty")),
        Some(other) => Err(at.error(field, format!("must be a string, not {}", json_type(other)))),
    };
    let api_version = string_field("apiVersion")?;
    let kind = string_field("kind")?;
    let metadata = map.get("metadata");
    let text = |field: &str| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Header {
        api_version,
        kind,
        name: text("name").or_else(|| text("generateName")),
        namespace: text("namespace"),
    })
}

/// `Kind/name`, or `Kind/namespace/name` for namespaced kinds, as errors
/// name an object before it has been decoded.
fn display_name(header: &Header, namespaced: bool) -> String {
    let name = header.name.as_deref().unwrap_or("<unnamed>");
    if namespaced {
        let namespace = header.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        format!("{}/{namespace}/{name}", header.kind)
    } else {
        format!("{}/{name}", header.kind)
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// What each kind's converter hands back.
struct Converted {
    object: Object,
    /// `Kind/name` or `Kind/namespace/name` with the final name.
    source_name: String,
    generated_name: bool,
    rewrites: Vec<(String, String)>,
}

impl Converted {
    fn plain(object: Object) -> Converted {
        Converted {
            source_name: object.display_name(),
            object,
            generated_name: false,
            rewrites: Vec::new(),
        }
    }
}
