//! The queueing configuration as one validated set: flavors, the cohort
//! tree, ClusterQueues, LocalQueues and priority classes, checked together
//! with Kueue's rules. Every error names the object and the field path.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster_queue::{BorrowWithinCohortPolicy, ReclaimWithinCohort, ResourceGroup};
use crate::error::FieldError;
use crate::kueue::join_path;
use crate::kueue::rules::Checker;
use crate::kueue::syntax::{dns_label_error, qualified_name_error};
use crate::namespace::{selector_matches, Namespace, NAME_LABEL};
use crate::settings::SchedulingSettings;
use crate::{
    ClusterQueue, Cohort, LocalQueue, PriorityClass, PriorityClassSource, Quantity, ResourceFlavor,
    Topology, Workload, WorkloadPriorityClass,
};

/// Any object fleetq stores, tagged by its Kueue kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum Object {
    ResourceFlavor(ResourceFlavor),
    Cohort(Cohort),
    ClusterQueue(ClusterQueue),
    LocalQueue(LocalQueue),
    WorkloadPriorityClass(WorkloadPriorityClass),
    /// Kubernetes' `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass(PriorityClass),
    Workload(Workload),
    /// Kueue's Configuration (its scheduling part), one per ledger.
    Configuration(SchedulingSettings),
    /// A `v1/Namespace`, for its labels (namespace selectors).
    Namespace(Namespace),
    /// Kueue's Topology (TAS levels), named by ResourceFlavors.
    Topology(Topology),
}

/// The one name a Configuration is stored under.
pub const CONFIGURATION_NAME: &str = "default";

impl Object {
    /// The key the configuration stores it under (`namespace/name` for a
    /// LocalQueue, else its name).
    pub fn key(&self) -> String {
        match self {
            Object::ResourceFlavor(o) => o.name.clone(),
            Object::Cohort(o) => o.name.clone(),
            Object::ClusterQueue(o) => o.name.clone(),
            Object::LocalQueue(o) => o.key(),
            Object::WorkloadPriorityClass(o) => o.name.clone(),
            Object::PriorityClass(o) => o.name.clone(),
            Object::Workload(o) => o.key(),
            Object::Configuration(_) => CONFIGURATION_NAME.to_string(),
            Object::Namespace(o) => o.name.clone(),
            Object::Topology(o) => o.name.clone(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Object::ResourceFlavor(_) => "ResourceFlavor",
            Object::Cohort(_) => "Cohort",
            Object::ClusterQueue(_) => "ClusterQueue",
            Object::LocalQueue(_) => "LocalQueue",
            Object::WorkloadPriorityClass(_) => "WorkloadPriorityClass",
            Object::PriorityClass(_) => "PriorityClass",
            Object::Workload(_) => "Workload",
            Object::Configuration(_) => "Configuration",
            Object::Namespace(_) => "Namespace",
            Object::Topology(_) => "Topology",
        }
    }

    /// `Kind/name` or `Kind/namespace/name`, as errors print it.
    pub fn display_name(&self) -> String {
        match self {
            Object::ResourceFlavor(o) => format!("ResourceFlavor/{}", o.name),
            Object::Cohort(o) => format!("Cohort/{}", o.name),
            Object::ClusterQueue(o) => format!("ClusterQueue/{}", o.name),
            Object::LocalQueue(o) => format!("LocalQueue/{}/{}", o.namespace, o.name),
            Object::WorkloadPriorityClass(o) => format!("WorkloadPriorityClass/{}", o.name),
            Object::PriorityClass(o) => format!("PriorityClass/{}", o.name),
            Object::Workload(o) => format!("Workload/{}/{}", o.namespace, o.name),
            Object::Configuration(_) => "Configuration".to_string(),
            Object::Namespace(o) => format!("Namespace/{}", o.name),
            Object::Topology(o) => format!("Topology/{}", o.name),
        }
    }
}

/// The configuration objects, keyed by name (LocalQueues by `namespace/name`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub flavors: BTreeMap<String, ResourceFlavor>,
    pub cohorts: BTreeMap<String, Cohort>,
    pub cluster_queues: BTreeMap<String, ClusterQueue>,
    pub local_queues: BTreeMap<String, LocalQueue>,
    pub priority_classes: BTreeMap<String, WorkloadPriorityClass>,
    /// Kubernetes PriorityClasses. Absent from the serialised state (and
    /// the hash) while there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_priority_classes: BTreeMap<String, PriorityClass>,
    /// Kueue's Configuration, if one was applied. Absent from the
    /// serialised state (and the hash) until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<SchedulingSettings>,
    /// Namespaces applied as `v1/Namespace` objects, for their labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub namespaces: BTreeMap<String, Namespace>,
    /// Kueue Topologies, named by flavors' `spec.topologyName`. Absent from
    /// the serialised state (and the hash) while there are none, so a
    /// ledger written before they existed hashes the same.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topologies: BTreeMap<String, Topology>,
}

/// Where a valid workload goes and at what priority.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadBinding {
    /// `namespace/name` of its LocalQueue.
    pub local_queue: String,
    pub cluster_queue: String,
    pub priority: i32,
}

/// Kueue's size limits (CRD schema and webhooks). They keep one object's
/// quota table small enough to check on every admission.
pub const MAX_RESOURCE_GROUPS: usize = 16;
pub const MAX_COVERED_RESOURCES_PER_GROUP: usize = 64;
pub const MAX_FLAVORS_PER_GROUP: usize = 64;
pub const MAX_RESOURCES_PER_FLAVOR: usize = 64;
pub const MAX_TOTAL_FLAVORS: usize = 256;
pub const MAX_TOTAL_COVERED_RESOURCES: usize = 256;
pub const MAX_FLAVOR_RESOURCES_PER_GROUP: usize = 512;
pub const MAX_NODE_LABELS: usize = 8;
pub const MAX_POD_SETS: usize = 18;

/// Who owns a quota table: the lending and borrowing rules differ.
#[derive(Clone, Copy)]
enum QuotaOwner {
    ClusterQueue { in_cohort: bool },
    Cohort { has_parent: bool },
}

impl QuotaOwner {
    /// Whether there is anyone to lend to or borrow from.
    fn can_share(self) -> bool {
        match self {
            QuotaOwner::ClusterQueue { in_cohort } => in_cohort,
            QuotaOwner::Cohort { has_parent } => has_parent,
        }
    }

    fn missing_partner(self) -> &'static str {
        match self {
            QuotaOwner::ClusterQueue { .. } => {
                "requires spec.cohortName: without a cohort there is nobody to share with"
            }
            QuotaOwner::Cohort { .. } => {
                "requires spec.parentName: a root cohort has nobody to share with"
            }
        }
    }
}

impl Config {
    /// Inserts or replaces a configuration object. Workloads are not
    /// configuration; they are returned unchanged as `Err`.
    pub fn upsert(&mut self, object: Object) -> Result<(), Box<Workload>> {
        match object {
            Object::ResourceFlavor(o) => {
                self.flavors.insert(o.name.clone(), o);
            }
            Object::Cohort(o) => {
                self.cohorts.insert(o.name.clone(), o);
            }
            Object::ClusterQueue(o) => {
                self.cluster_queues.insert(o.name.clone(), o);
            }
            Object::LocalQueue(o) => {
                self.local_queues.insert(o.key(), o);
            }
            Object::WorkloadPriorityClass(o) => {
                self.priority_classes.insert(o.name.clone(), o);
            }
            Object::PriorityClass(o) => {
                self.pod_priority_classes.insert(o.name.clone(), o);
            }
            Object::Configuration(o) => self.settings = Some(o),
            Object::Namespace(o) => {
                self.namespaces.insert(o.name.clone(), o);
            }
            Object::Topology(o) => {
                self.topologies.insert(o.name.clone(), o);
            }
            Object::Workload(w) => return Err(Box::new(w)),
        }
        Ok(())
    }

    /// The stored object of this kind and name (`namespace/name` for a
    /// LocalQueue), if any. `kind` is the Kueue kind, e.g. `ClusterQueue`.
    pub fn get(&self, kind: &str, name: &str) -> Option<Object> {
        match kind {
            "ResourceFlavor" => self.flavors.get(name).cloned().map(Object::ResourceFlavor),
            "Cohort" => self.cohorts.get(name).cloned().map(Object::Cohort),
            "ClusterQueue" => self
                .cluster_queues
                .get(name)
                .cloned()
                .map(Object::ClusterQueue),
            "LocalQueue" => self.local_queues.get(name).cloned().map(Object::LocalQueue),
            "WorkloadPriorityClass" => self
                .priority_classes
                .get(name)
                .cloned()
                .map(Object::WorkloadPriorityClass),
            "PriorityClass" => self
                .pod_priority_classes
                .get(name)
                .cloned()
                .map(Object::PriorityClass),
            "Configuration" => self.settings.clone().map(Object::Configuration),
            "Namespace" => self.namespaces.get(name).cloned().map(Object::Namespace),
            "Topology" => self.topologies.get(name).cloned().map(Object::Topology),
            _ => None,
        }
    }

    /// Removes an object by kind and name; returns what was removed.
    pub fn remove(&mut self, kind: &str, name: &str) -> Option<Object> {
        match kind {
            "ResourceFlavor" => self.flavors.remove(name).map(Object::ResourceFlavor),
            "Cohort" => self.cohorts.remove(name).map(Object::Cohort),
            "ClusterQueue" => self.cluster_queues.remove(name).map(Object::ClusterQueue),
            "LocalQueue" => self.local_queues.remove(name).map(Object::LocalQueue),
            "WorkloadPriorityClass" => self
                .priority_classes
                .remove(name)
                .map(Object::WorkloadPriorityClass),
            "PriorityClass" => self
                .pod_priority_classes
                .remove(name)
                .map(Object::PriorityClass),
            "Configuration" => self.settings.take().map(Object::Configuration),
            "Namespace" => self.namespaces.remove(name).map(Object::Namespace),
            "Topology" => self.topologies.remove(name).map(Object::Topology),
            _ => None,
        }
    }

    /// Every configuration object, in kind order.
    pub fn objects(&self) -> Vec<Object> {
        let mut out: Vec<Object> = Vec::new();
        // Topologies first: flavors name them.
        out.extend(self.topologies.values().cloned().map(Object::Topology));
        out.extend(self.flavors.values().cloned().map(Object::ResourceFlavor));
        out.extend(self.cohorts.values().cloned().map(Object::Cohort));
        out.extend(
            self.cluster_queues
                .values()
                .cloned()
                .map(Object::ClusterQueue),
        );
        out.extend(self.local_queues.values().cloned().map(Object::LocalQueue));
        out.extend(
            self.priority_classes
                .values()
                .cloned()
                .map(Object::WorkloadPriorityClass),
        );
        out.extend(
            self.pod_priority_classes
                .values()
                .cloned()
                .map(Object::PriorityClass),
        );
        out.extend(self.settings.clone().map(Object::Configuration));
        out.extend(self.namespaces.values().cloned().map(Object::Namespace));
        out
    }

    /// A namespace's labels: its Namespace object's, plus
    /// `kubernetes.io/metadata.name`, which every namespace has.
    pub fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        let mut labels = self
            .namespaces
            .get(namespace)
            .map(|n| n.labels.clone())
            .unwrap_or_default();
        labels.insert(NAME_LABEL.to_string(), namespace.to_string());
        labels
    }

    /// Whether `cq`'s namespaceSelector admits workloads from `namespace`.
    pub fn admits_namespace(&self, cq: &ClusterQueue, namespace: &str) -> bool {
        match &cq.spec.namespace_selector {
            None => true,
            Some(selector) => selector_matches(selector, &self.namespace_labels(namespace)),
        }
    }

    /// Every rule violation in the whole set; empty when valid.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for ns in self.namespaces.values() {
            let object = format!("Namespace/{}", ns.name);
            if let Some(problem) = dns_label_error(&ns.name) {
                errors.push(FieldError::new(&object, "metadata.name", problem));
            }
            let mut check = Checker {
                object: &object,
                errors: &mut errors,
            };
            check.labels("metadata.labels", &ns.labels);
        }
        if let Some(settings) = &self.settings {
            for (path, message) in settings.problems() {
                errors.push(FieldError::new("Configuration", path, message));
            }
        }
        for topology in self.topologies.values() {
            let object = format!("Topology/{}", topology.name);
            check_name(&mut errors, &object, "metadata.name", &topology.name);
            for (path, message) in topology.problems() {
                errors.push(FieldError::new(&object, path, message));
            }
        }
        for flavor in self.flavors.values() {
            validate_flavor(flavor, &mut errors);
            self.check_flavor_topology(flavor, &mut errors);
        }
        for cohort in self.cohorts.values() {
            self.validate_cohort(cohort, &mut errors);
        }
        // Fair-sharing weights, one rule for the three kinds that carry one.
        let weights = self
            .cohorts
            .values()
            .map(|c| (format!("Cohort/{}", c.name), c.spec.fair_sharing))
            .chain(
                self.cluster_queues
                    .values()
                    .map(|cq| (format!("ClusterQueue/{}", cq.name), cq.spec.fair_sharing)),
            )
            .chain(self.local_queues.values().map(|lq| {
                (
                    format!("LocalQueue/{}/{}", lq.namespace, lq.name),
                    lq.spec.fair_sharing,
                )
            }));
        for (object, fair_sharing) in weights {
            if let Some(problem) = fair_sharing
                .and_then(|f| f.weight)
                .and_then(|w| w.problem())
            {
                errors.push(FieldError::new(object, "spec.fairSharing.weight", problem));
            }
        }
        for cq in self.cluster_queues.values() {
            self.validate_cluster_queue(cq, &mut errors);
        }
        for lq in self.local_queues.values() {
            let object = format!("LocalQueue/{}/{}", lq.namespace, lq.name);
            check_name(&mut errors, &object, "metadata.name", &lq.name);
            check_name(&mut errors, &object, "metadata.namespace", &lq.namespace);
            if !self.cluster_queues.contains_key(&lq.spec.cluster_queue) {
                errors.push(FieldError::new(
                    object.clone(),
                    "spec.clusterQueue",
                    format!("ClusterQueue {:?} does not exist", lq.spec.cluster_queue),
                ));
            }
            if let Some(budget) = lq.spec.gpu_budget {
                if budget.burst_gpu_seconds == 0 {
                    errors.push(FieldError::new(
                        object.clone(),
                        "spec.gpuBudget.burstGpuSeconds",
                        "must be > 0: a budget of 0 GPU-seconds can never admit a GPU workload",
                    ));
                }
            }
        }
        for pc in self.priority_classes.values() {
            check_name(
                &mut errors,
                &format!("WorkloadPriorityClass/{}", pc.name),
                "metadata.name",
                &pc.name,
            );
        }
        self.validate_pod_priority_classes(&mut errors);
        errors
    }

    /// Kubernetes' rules for PriorityClasses (`ValidatePriorityClass` and
    /// the `Priority` admission plugin's one global default).
    fn validate_pod_priority_classes(&self, errors: &mut Vec<FieldError>) {
        use crate::priority::{
            HIGHEST_USER_DEFINABLE_PRIORITY, PREEMPTION_POLICIES, SYSTEM_PRIORITY_CLASSES,
        };
        let mut default: Option<&str> = None;
        for pc in self.pod_priority_classes.values() {
            let object = format!("PriorityClass/{}", pc.name);
            check_name(errors, &object, "metadata.name", &pc.name);
            if pc.name.starts_with("system-") {
                if !SYSTEM_PRIORITY_CLASSES.contains(&(pc.name.as_str(), pc.value))
                    || pc.global_default
                {
                    errors.push(FieldError::new(
                        &object,
                        "metadata.name",
                        "priority class names with 'system-' prefix are reserved for system use only (system-cluster-critical 2000000000, system-node-critical 2000001000, not globalDefault)",
                    ));
                }
            } else if pc.value > HIGHEST_USER_DEFINABLE_PRIORITY {
                errors.push(FieldError::new(
                    &object,
                    "value",
                    format!(
                        "{} exceeds the maximum allowed value of a user defined priority, {HIGHEST_USER_DEFINABLE_PRIORITY}",
                        pc.value
                    ),
                ));
            }
            if let Some(policy) = &pc.preemption_policy {
                if !PREEMPTION_POLICIES.contains(&policy.as_str()) {
                    errors.push(FieldError::new(
                        &object,
                        "preemptionPolicy",
                        format!("{policy:?} is not supported; supported values: {PREEMPTION_POLICIES:?}"),
                    ));
                }
            }
            if pc.global_default {
                if let Some(first) = default {
                    errors.push(FieldError::new(
                        &object,
                        "globalDefault",
                        format!("PriorityClass {first} is already marked as default; only one default can exist"),
                    ));
                } else {
                    default = Some(&pc.name);
                }
            }
        }
    }

    /// The value a workload without a priority class gets: the
    /// `globalDefault` PriorityClass's, or 0 (Kueue's `getDefaultPriority`).
    pub fn default_priority(&self) -> i32 {
        self.default_priority_class().map_or(0, |pc| pc.value)
    }

    /// The PriorityClass marked `globalDefault`, if any.
    pub fn default_priority_class(&self) -> Option<&PriorityClass> {
        self.pod_priority_classes
            .values()
            .find(|pc| pc.global_default)
    }

    /// The priority a workload's class gives it, or why it gives none.
    fn priority_of(&self, spec: &crate::workload::WorkloadSpec) -> Result<i32, String> {
        let Some(name) = &spec.priority_class_name else {
            return Ok(self.default_priority());
        };
        let value = match spec.priority_class_source {
            PriorityClassSource::WorkloadPriorityClass => {
                self.priority_classes.get(name).map(|pc| pc.value)
            }
            PriorityClassSource::PriorityClass => {
                self.pod_priority_classes.get(name).map(|pc| pc.value)
            }
        };
        value.ok_or_else(|| {
            format!(
                "{} {name:?} does not exist",
                spec.priority_class_source.kind()
            )
        })
    }

    fn validate_cohort(&self, cohort: &Cohort, errors: &mut Vec<FieldError>) {
        let object = format!("Cohort/{}", cohort.name);
        check_name(errors, &object, "metadata.name", &cohort.name);
        // A parent without a Cohort object exists implicitly, with no
        // quota of its own, as in Kueue.
        if let Some(parent) = &cohort.spec.parent {
            check_name(errors, &object, "spec.parentName", parent);
            if parent == &cohort.name {
                errors.push(FieldError::new(
                    &object,
                    "spec.parentName",
                    "a cohort cannot be its own parent",
                ));
            } else if let Some(cycle) = self.cohort_cycle(&cohort.name) {
                errors.push(FieldError::new(
                    &object,
                    "spec.parentName",
                    format!("cohort tree has a cycle: {}", cycle.join(" -> ")),
                ));
            }
        }
        let owner = QuotaOwner::Cohort {
            has_parent: cohort.spec.parent.is_some(),
        };
        self.validate_resource_groups(&object, &cohort.spec.resource_groups, owner, errors);
    }

    /// The cycle through `start`'s ancestors, if any (`a -> b -> a`).
    fn cohort_cycle(&self, start: &str) -> Option<Vec<String>> {
        let mut seen = vec![start.to_string()];
        let mut current = start;
        while let Some(parent) = self
            .cohorts
            .get(current)
            .and_then(|c| c.spec.parent.as_deref())
        {
            if parent == start {
                seen.push(parent.to_string());
                return Some(seen);
            }
            if seen.iter().any(|s| s == parent) {
                // A cycle above us, reported on its own members.
                return None;
            }
            seen.push(parent.to_string());
            current = parent;
        }
        None
    }

    fn validate_cluster_queue(&self, cq: &ClusterQueue, errors: &mut Vec<FieldError>) {
        let object = format!("ClusterQueue/{}", cq.name);
        check_name(errors, &object, "metadata.name", &cq.name);
        let spec = &cq.spec;
        let owner = QuotaOwner::ClusterQueue {
            in_cohort: spec.cohort.is_some(),
        };
        self.validate_resource_groups(&object, &spec.resource_groups, owner, errors);
        let preemption = &spec.preemption;
        if preemption.borrow_within_cohort.policy != BorrowWithinCohortPolicy::Never
            && preemption.reclaim_within_cohort == ReclaimWithinCohort::Never
        {
            errors.push(FieldError::new(
                &object,
                "spec.preemption.borrowWithinCohort.policy",
                "requires spec.preemption.reclaimWithinCohort other than Never",
            ));
        }
        if preemption.borrow_within_cohort.policy == BorrowWithinCohortPolicy::Never
            && preemption
                .borrow_within_cohort
                .max_priority_threshold
                .is_some()
        {
            errors.push(FieldError::new(
                &object,
                "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                "is only meaningful with policy LowerPriority",
            ));
        }
        if let Some(cohort) = &spec.cohort {
            check_name(errors, &object, "spec.cohortName", cohort);
        }
        let queue_flavors: BTreeSet<&str> = spec
            .resource_groups
            .iter()
            .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
            .collect();
        let mut check = Checker {
            object: &object,
            errors,
        };
        if let Some(selector) = &spec.namespace_selector {
            check.label_selector("spec.namespaceSelector", selector);
        }
        if let Some(strategy) = &spec.admission_checks_strategy {
            check.admission_checks_strategy(
                "spec.admissionChecksStrategy",
                strategy,
                &queue_flavors,
            );
            if !spec.admission_checks.is_empty() {
                check.push(
                    "spec.admissionChecks",
                    "cannot be used together with spec.admissionChecksStrategy; list the checks in the strategy",
                );
            }
        }
        for (i, name) in spec.admission_checks.iter().enumerate() {
            check_name(
                check.errors,
                &object,
                &format!("spec.admissionChecks[{i}]"),
                name,
            );
        }
        let mut clusters = BTreeSet::new();
        for (i, cluster) in spec.placement.clusters.iter().enumerate() {
            let path = format!("spec.placement.clusters[{i}]");
            check_name(check.errors, &object, &path, cluster);
            if !clusters.insert(cluster) {
                check.push(path, format!("cluster {cluster:?} is listed twice"));
            }
        }
        check.labels(
            "spec.placement.clusterSelector",
            &spec.placement.cluster_selector,
        );
    }

    /// Kueue's resource-group rules, shared by ClusterQueues and Cohorts.
    fn validate_resource_groups(
        &self,
        object: &str,
        groups: &[ResourceGroup],
        owner: QuotaOwner,
        errors: &mut Vec<FieldError>,
    ) {
        let mut check = Checker { object, errors };
        check.at_most(
            "spec.resourceGroups",
            groups,
            MAX_RESOURCE_GROUPS,
            "resource groups",
        );
        let total_flavors: usize = groups.iter().map(|g| g.flavors.len()).sum();
        if total_flavors > MAX_TOTAL_FLAVORS {
            check.push(
                "spec.resourceGroups",
                format!(
                    "has {total_flavors} flavors in all; Kueue allows at most {MAX_TOTAL_FLAVORS}"
                ),
            );
        }
        let total_covered: usize = groups.iter().map(|g| g.covered_resources.len()).sum();
        if total_covered > MAX_TOTAL_COVERED_RESOURCES {
            check.push(
                "spec.resourceGroups",
                format!("covers {total_covered} resources in all; Kueue allows at most {MAX_TOTAL_COVERED_RESOURCES}"),
            );
        }
        let mut covered: BTreeMap<&str, usize> = BTreeMap::new();
        let mut flavors_seen: BTreeSet<&str> = BTreeSet::new();
        for (g, group) in groups.iter().enumerate() {
            let gpath = format!("spec.resourceGroups[{g}]");
            if group.covered_resources.is_empty() {
                check.push(
                    format!("{gpath}.coveredResources"),
                    "must list at least one resource",
                );
            }
            check.at_most(
                &format!("{gpath}.coveredResources"),
                &group.covered_resources,
                MAX_COVERED_RESOURCES_PER_GROUP,
                "resources",
            );
            let combinations: usize = group.flavors.iter().map(|f| f.resources.len()).sum();
            if combinations > MAX_FLAVOR_RESOURCES_PER_GROUP {
                check.push(
                    gpath.clone(),
                    format!("has {combinations} flavor-resource quotas; Kueue allows at most {MAX_FLAVOR_RESOURCES_PER_GROUP} in one group"),
                );
            }
            for (r, resource) in group.covered_resources.iter().enumerate() {
                let rpath = format!("{gpath}.coveredResources[{r}]");
                if let Some(problem) = qualified_name_error(resource) {
                    check.push(rpath.clone(), format!("resource name {problem}"));
                }
                if let Some(other) = covered.insert(resource, g) {
                    check.push(
                        rpath,
                        format!("resource {resource:?} is already covered by spec.resourceGroups[{other}]; a resource belongs to exactly one group"),
                    );
                }
            }
            if group.flavors.is_empty() {
                check.push(format!("{gpath}.flavors"), "must list at least one flavor");
            }
            check.at_most(
                &format!("{gpath}.flavors"),
                &group.flavors,
                MAX_FLAVORS_PER_GROUP,
                "flavors",
            );
            for (f, flavor) in group.flavors.iter().enumerate() {
                let fpath = format!("{gpath}.flavors[{f}]");
                if !flavors_seen.insert(&flavor.name) {
                    check.push(
                        format!("{fpath}.name"),
                        format!("flavor {:?} appears more than once; a flavor belongs to one resource group", flavor.name),
                    );
                }
                if !self.flavors.contains_key(&flavor.name) {
                    check.push(
                        format!("{fpath}.name"),
                        format!("ResourceFlavor {:?} does not exist", flavor.name),
                    );
                }
                check.at_most(
                    &format!("{fpath}.resources"),
                    &flavor.resources,
                    MAX_RESOURCES_PER_FLAVOR,
                    "resources",
                );
                let names: Vec<&str> = flavor.resources.iter().map(|r| r.name.as_str()).collect();
                let expected: Vec<&str> =
                    group.covered_resources.iter().map(String::as_str).collect();
                if names.len() != expected.len() {
                    check.push(
                        format!("{fpath}.resources"),
                        format!("must list exactly the covered resources in the same order: expected {expected:?}, got {names:?}"),
                    );
                } else {
                    // Kueue names each resource out of place.
                    for (r, (name, covered)) in names.iter().zip(&expected).enumerate() {
                        if name != covered {
                            check.push(
                                format!("{fpath}.resources[{r}].name"),
                                format!("{name:?} must match the name in coveredResources[{r}], {covered:?} (same resources, same order)"),
                            );
                        }
                    }
                }
                for (r, quota) in flavor.resources.iter().enumerate() {
                    let rpath = format!("{fpath}.resources[{r}]");
                    if let Some(lending) = quota.lending_limit {
                        if !owner.can_share() {
                            check.push(format!("{rpath}.lendingLimit"), owner.missing_partner());
                        }
                        // A cohort lends its whole subtree's quota to its
                        // parent, so Kueue caps only a ClusterQueue's
                        // lendingLimit by its own nominalQuota.
                        let capped = matches!(owner, QuotaOwner::ClusterQueue { .. });
                        if capped && lending > quota.nominal_quota {
                            check.push(
                                format!("{rpath}.lendingLimit"),
                                format!("{lending} exceeds nominalQuota {}", quota.nominal_quota),
                            );
                        }
                    }
                    if quota.borrowing_limit.is_some() && !owner.can_share() {
                        check.push(format!("{rpath}.borrowingLimit"), owner.missing_partner());
                    }
                }
            }
        }
    }

    /// Checks a workload against this configuration: its LocalQueue exists,
    /// its priority class exists (no silent fallback), its pod sets are sane
    /// and every resource it requests is covered by its ClusterQueue.
    pub fn bind_workload(&self, workload: &Workload) -> Result<WorkloadBinding, Vec<FieldError>> {
        // Sizes first: what breaks them gets one short error, however big.
        workload.check_limits().map_err(|e| vec![e])?;
        self.bind_checked(workload).map_err(crate::limits::capped)
    }

    fn bind_checked(&self, workload: &Workload) -> Result<WorkloadBinding, Vec<FieldError>> {
        let object = format!("Workload/{}/{}", workload.namespace, workload.name);
        let mut errors = Vec::new();
        check_name(&mut errors, &object, "metadata.name", &workload.name);
        check_name(
            &mut errors,
            &object,
            "metadata.namespace",
            &workload.namespace,
        );
        let spec = &workload.spec;
        let lq_key = format!("{}/{}", workload.namespace, spec.queue_name);
        let cq = match self.local_queues.get(&lq_key) {
            None => {
                errors.push(FieldError::new(
                    &object,
                    "spec.queueName",
                    format!(
                        "LocalQueue {:?} does not exist in namespace {:?}",
                        spec.queue_name, workload.namespace
                    ),
                ));
                None
            }
            Some(lq) => self.cluster_queues.get(&lq.spec.cluster_queue),
        };
        let priority = self.priority_of(spec).unwrap_or_else(|message| {
            errors.push(FieldError::new(&object, "spec.priorityClassName", message));
            0
        });
        if spec.pod_sets.is_empty() {
            errors.push(FieldError::new(
                &object,
                "spec.podSets",
                "must have at least one pod set",
            ));
        }
        if spec.pod_sets.len() > MAX_POD_SETS {
            errors.push(FieldError::new(
                &object,
                "spec.podSets",
                format!(
                    "has {} pod sets; Kueue allows at most {MAX_POD_SETS}",
                    spec.pod_sets.len()
                ),
            ));
        }
        let partial = spec
            .pod_sets
            .iter()
            .filter(|ps| ps.min_count.is_some())
            .count();
        if partial > 1 {
            errors.push(FieldError::new(
                &object,
                "spec.podSets",
                format!("{partial} pod sets set minCount; at most one pod set can use partial admission"),
            ));
        }
        if spec.maximum_execution_time.is_some_and(|t| t.is_zero()) {
            errors.push(FieldError::new(
                &object,
                "spec.maximumExecutionTime",
                "must be greater than zero",
            ));
        }
        let mut names = BTreeSet::new();
        for (i, ps) in spec.pod_sets.iter().enumerate() {
            let path = format!("spec.podSets[{i}]");
            if let Some(problem) = dns_label_error(&ps.name) {
                errors.push(FieldError::new(&object, format!("{path}.name"), problem));
            }
            for resource in ps.requests.keys() {
                let rpath = join_path(&format!("{path}.requests"), resource);
                if resource == "pods" {
                    errors.push(FieldError::new(
                        &object,
                        rpath,
                        "the resource name \"pods\" is reserved: Kueue counts a workload's pods itself",
                    ));
                } else if let Some(problem) = qualified_name_error(resource) {
                    errors.push(FieldError::new(
                        &object,
                        rpath,
                        format!("resource name {problem}"),
                    ));
                }
            }
            if !names.insert(&ps.name) {
                errors.push(FieldError::new(
                    &object,
                    format!("{path}.name"),
                    format!("pod set {:?} appears twice", ps.name),
                ));
            }
            if ps.count == 0 {
                errors.push(FieldError::new(
                    &object,
                    format!("{path}.count"),
                    "must be at least 1",
                ));
            }
            if let Some(min) = ps.min_count {
                if min == 0 || min > ps.count {
                    errors.push(FieldError::new(
                        &object,
                        format!("{path}.minCount"),
                        format!("must be between 1 and count ({}), got {min}", ps.count),
                    ));
                }
            }
            self.check_topology_request(&object, &path, ps, cq, &mut errors);
            if ps.total(ps.count).is_none() {
                errors.push(FieldError::new(
                    &object,
                    format!("{path}.requests"),
                    "count x requests overflows",
                ));
            }
            if let Some(cq) = cq {
                for (resource, q) in &ps.requests {
                    if *q > Quantity::ZERO && resource != "pods" && cq.group_for(resource).is_none()
                    {
                        errors.push(FieldError::new(
                            &object,
                            join_path(&format!("{path}.requests"), resource),
                            format!(
                                "Misconfigured: ClusterQueue {:?} has no flavor that covers {resource:?}",
                                cq.name
                            ),
                        ));
                    }
                }
            }
        }
        match (errors.is_empty(), cq) {
            (true, Some(cq)) => Ok(WorkloadBinding {
                local_queue: lq_key,
                cluster_queue: cq.name.clone(),
                priority,
            }),
            (true, None) => Err(vec![FieldError::new(
                &object,
                "spec.queueName",
                format!("LocalQueue {lq_key:?} points at a ClusterQueue that does not exist"),
            )]),
            (false, _) => Err(errors),
        }
    }
}

/// Fractions of extended resources (`nvidia.com/gpu: 1.5`) in a
/// workload's pod sets, one error per pod set and resource: Kubernetes
/// counts devices in whole units. Manifests are checked on import
/// (`kueue::import_manifests`, per container); a workload that arrives as
/// JSON is checked with this at the API, like
/// [`Workload::check_job_template`]. Not part of
/// [`Config::bind_workload`]: apply() runs that, and an entry accepted
/// before the check existed must replay the same.
pub fn whole_device_errors(workload: &Workload) -> Vec<FieldError> {
    let object = format!("Workload/{}/{}", workload.namespace, workload.name);
    let mut errors = Vec::new();
    for (i, ps) in workload.spec.pod_sets.iter().enumerate() {
        for (resource, amount) in &ps.requests {
            if let Some(problem) = crate::resources::whole_device_problem(resource, *amount) {
                errors.push(FieldError::new(
                    &object,
                    join_path(&format!("spec.podSets[{i}].requests"), resource),
                    problem,
                ));
            }
        }
    }
    errors
}

/// ResourceFlavor rules: a valid name and Kueue's node label, taint and
/// toleration rules.
fn validate_flavor(flavor: &ResourceFlavor, errors: &mut Vec<FieldError>) {
    let object = format!("ResourceFlavor/{}", flavor.name);
    check_name(errors, &object, "metadata.name", &flavor.name);
    let spec = &flavor.spec;
    if let Some(topology) = &spec.topology_name {
        check_name(errors, &object, "spec.topologyName", topology);
        if spec.node_labels.is_empty() {
            errors.push(FieldError::new(
                &object,
                "spec.topologyName",
                "requires at least one entry in spec.nodeLabels",
            ));
        }
    }
    let mut check = Checker {
        object: &object,
        errors,
    };
    if spec.node_labels.len() > MAX_NODE_LABELS {
        check.push(
            "spec.nodeLabels",
            format!(
                "has {} labels; Kueue allows at most {MAX_NODE_LABELS}",
                spec.node_labels.len()
            ),
        );
    }
    check.labels("spec.nodeLabels", &spec.node_labels);
    check.node_taints("spec.nodeTaints", &spec.node_taints);
    check.tolerations("spec.tolerations", &spec.tolerations);
}

/// Kubernetes object names: lowercase RFC 1123 labels joined by dots,
/// at most 253 characters.
fn check_name(errors: &mut Vec<FieldError>, object: &str, path: &str, name: &str) {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !valid {
        errors.push(FieldError::new(
            object,
            path,
            format!("{name:?} is not a valid name: lowercase letters, digits, '-' and '.', at most 253 characters"),
        ));
    }
}
