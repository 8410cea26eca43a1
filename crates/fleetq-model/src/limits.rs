//! Size limits on what a tenant sends, checked before anything else looks
//! at it: at the API before a request is proposed, and again first thing
//! in apply() (which must stay deterministic, and bounded whatever reached
//! the log). Kubernetes' and Kueue's own limits where they have one.
//!
//! A violation is one error naming the field and the size, never a copy
//! of the oversized text: a 280 KB workload with thousands of requests
//! once produced one error per request, each carrying its long name,
//! inside the replicated apply on every node (5 GB, 20 s stalled).

use crate::config::MAX_POD_SETS;
use crate::{FieldError, Workload};

/// A DNS subdomain (names of workloads, queues, priority classes).
pub const MAX_NAME: usize = 253;
/// A DNS label (namespaces, pod set names).
pub const MAX_LABEL: usize = 63;
/// A qualified name with its prefix (resource names, label keys).
pub const MAX_QUALIFIED_NAME: usize = 317;
/// Kubernetes: a label value.
pub const MAX_LABEL_VALUE: usize = 63;
pub const MAX_LABELS: usize = 64;
/// Distinct resources one pod asks for.
pub const MAX_REQUESTS_PER_POD_SET: usize = 64;
pub const MAX_COMMAND_ARGS: usize = 1024;
pub const MAX_ENV: usize = 1024;
/// Any one string of the run spec (an argument, an image, a value).
pub const MAX_RUN_STRING: usize = 32 * 1024;
/// Most errors one object reports; the rest are counted.
pub const MAX_ERRORS: usize = 20;

/// `Kind/namespace/name` for an error, the name cut to 64 characters.
pub fn object_name(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{}/{}", cut(namespace), cut(name))
}

fn cut(s: &str) -> String {
    if s.chars().count() <= 64 {
        s.to_string()
    } else {
        let head: String = s.chars().take(64).collect();
        format!("{head}...({} bytes)", s.len())
    }
}

fn too_long(object: &str, path: &str, len: usize, max: usize) -> FieldError {
    FieldError::new(object, path, format!("is {len} bytes long; at most {max}"))
}

impl Workload {
    /// Whether its `run.jobTemplate` asks for no more than it is charged
    /// ([`crate::kueue::job_template_problem`]). At the API only, not in
    /// apply(): see there.
    pub fn check_job_template(&self) -> Result<(), FieldError> {
        match crate::kueue::job_template_problem(&self.spec) {
            None => Ok(()),
            Some((path, message)) => Err(FieldError::new(
                object_name("Workload", &self.namespace, &self.name),
                format!("spec.{path}"),
                message,
            )),
        }
    }

    /// The first size limit the workload breaks.
    pub fn check_limits(&self) -> Result<(), FieldError> {
        let object = object_name("Workload", &self.namespace, &self.name);
        let fail = |path: &str, len: usize, max: usize| Err(too_long(&object, path, len, max));
        if self.name.len() > MAX_NAME {
            return fail("metadata.name", self.name.len(), MAX_NAME);
        }
        if self.namespace.len() > MAX_LABEL {
            return fail("metadata.namespace", self.namespace.len(), MAX_LABEL);
        }
        if self.labels.len() > MAX_LABELS {
            return Err(FieldError::new(
                &object,
                "metadata.labels",
                format!("has {} labels; at most {MAX_LABELS}", self.labels.len()),
            ));
        }
        for (k, v) in &self.labels {
            if k.len() > MAX_QUALIFIED_NAME {
                return fail("metadata.labels", k.len(), MAX_QUALIFIED_NAME);
            }
            if v.len() > MAX_LABEL_VALUE {
                return fail(
                    &crate::kueue::join_path("metadata.labels", &cut(k)),
                    v.len(),
                    MAX_LABEL_VALUE,
                );
            }
        }
        let spec = &self.spec;
        if spec.queue_name.len() > MAX_NAME {
            return fail("spec.queueName", spec.queue_name.len(), MAX_NAME);
        }
        if let Some(pc) = &spec.priority_class_name {
            if pc.len() > MAX_NAME {
                return fail("spec.priorityClassName", pc.len(), MAX_NAME);
            }
        }
        if spec.pod_sets.len() > MAX_POD_SETS {
            return Err(FieldError::new(
                &object,
                "spec.podSets",
                format!(
                    "has {} pod sets; Kueue allows at most {MAX_POD_SETS}",
                    spec.pod_sets.len()
                ),
            ));
        }
        for (i, ps) in spec.pod_sets.iter().enumerate() {
            if ps.name.len() > MAX_LABEL {
                return fail(&format!("spec.podSets[{i}].name"), ps.name.len(), MAX_LABEL);
            }
            if ps.requests.len() > MAX_REQUESTS_PER_POD_SET {
                return Err(FieldError::new(
                    &object,
                    format!("spec.podSets[{i}].requests"),
                    format!(
                        "has {} resources; at most {MAX_REQUESTS_PER_POD_SET}",
                        ps.requests.len()
                    ),
                ));
            }
            for r in ps.requests.keys() {
                if r.len() > MAX_QUALIFIED_NAME {
                    return fail(
                        &format!("spec.podSets[{i}].requests"),
                        r.len(),
                        MAX_QUALIFIED_NAME,
                    );
                }
            }
        }
        let run = &spec.run;
        if run.command.len() > MAX_COMMAND_ARGS {
            return Err(FieldError::new(
                &object,
                "spec.run.command",
                format!(
                    "has {} arguments; at most {MAX_COMMAND_ARGS}",
                    run.command.len()
                ),
            ));
        }
        if run.env.len() > MAX_ENV {
            return Err(FieldError::new(
                &object,
                "spec.run.env",
                format!("has {} variables; at most {MAX_ENV}", run.env.len()),
            ));
        }
        let strings = run
            .command
            .iter()
            .map(|s| ("spec.run.command", s))
            .chain(run.image.iter().map(|s| ("spec.run.image", s)))
            .chain(
                run.env
                    .iter()
                    .flat_map(|(k, v)| [("spec.run.env", k), ("spec.run.env", v)]),
            );
        for (path, s) in strings {
            if s.len() > MAX_RUN_STRING {
                return fail(path, s.len(), MAX_RUN_STRING);
            }
        }
        Ok(())
    }
}

/// At most [`MAX_ERRORS`] of `errors`, the rest counted in a last one.
pub fn capped(mut errors: Vec<FieldError>) -> Vec<FieldError> {
    if errors.len() > MAX_ERRORS {
        let more = errors.len() - MAX_ERRORS;
        let last = FieldError::new(
            errors[0].object.clone(),
            "",
            format!("... and {more} more errors"),
        );
        errors.truncate(MAX_ERRORS);
        errors.push(last);
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{PodSet, WorkloadSpec};
    use crate::Quantity;
    use std::collections::BTreeMap;

    fn workload(name: &str, requests: usize) -> Workload {
        Workload {
            namespace: "default".into(),
            name: name.into(),
            labels: BTreeMap::new(),
            spec: WorkloadSpec {
                queue_name: "q".into(),
                pod_sets: vec![PodSet {
                    name: "main".into(),
                    count: 1,
                    min_count: None,
                    requests: (0..requests)
                        .map(|i| (format!("example.com/r{i}"), Quantity::units(1)))
                        .collect(),
                    topology_request: None,
                }],
                ..WorkloadSpec::default()
            },
        }
    }

    #[test]
    fn one_short_error_for_a_huge_workload() {
        let w = workload(&"x".repeat(280_000), 5000);
        let e = w.check_limits().unwrap_err();
        assert_eq!(e.path, "metadata.name");
        assert!(e.message.contains("280000 bytes"), "{e}");
        assert!(e.object.len() < 120, "{}", e.object);
        let w = workload("ok", 5000);
        let e = w.check_limits().unwrap_err();
        assert_eq!(e.path, "spec.podSets[0].requests");
        assert!(workload("ok", 10).check_limits().is_ok());
    }

    #[test]
    fn errors_are_capped() {
        let errors = (0..100)
            .map(|i| FieldError::new("Workload/a/b", format!("p{i}"), "bad"))
            .collect();
        let capped = capped(errors);
        assert_eq!(capped.len(), MAX_ERRORS + 1);
        assert!(capped[MAX_ERRORS].message.contains("80 more"));
    }
}
