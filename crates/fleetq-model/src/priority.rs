//! Priority classes: Kueue's WorkloadPriorityClass and Kubernetes'
//! `scheduling.k8s.io/v1` PriorityClass, each a name for a priority
//! value, and which of the two a workload names.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadPriorityClass {
    pub name: String,
    pub value: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// Kubernetes' PriorityClass, read as Kueue reads it: a workload whose
/// pod template names one (and no WorkloadPriorityClass) takes its value,
/// and a workload that names neither takes the value of the one marked
/// `globalDefault`, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityClass {
    pub name: String,
    pub value: i32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub global_default: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `PreemptLowerPriority` or `Never`: what kube-scheduler does for the
    /// pods; kept for the round trip, fleetq's preemption follows the
    /// ClusterQueue's policy as Kueue's does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
}

/// Kubernetes' `HighestUserDefinablePriority`: a PriorityClass not named
/// `system-...` may not be higher.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i32 = 1_000_000_000;

/// The PriorityClasses Kubernetes itself defines: the only names with the
/// reserved `system-` prefix, each with its fixed value.
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// Kubernetes' values of `preemptionPolicy`.
pub const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// Which kind of class a workload's `priority_class_name` names (Kueue's
/// `priorityClassSource`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PriorityClassSource {
    /// Kueue's `kueue.x-k8s.io/workloadpriorityclass`.
    #[default]
    WorkloadPriorityClass,
    /// Kubernetes' `scheduling.k8s.io/priorityclass`, from the pod
    /// template's `priorityClassName`.
    PriorityClass,
}

impl PriorityClassSource {
    pub fn is_workload_priority_class(&self) -> bool {
        *self == PriorityClassSource::WorkloadPriorityClass
    }

    /// The kind's name, as errors and `describe` print it.
    pub fn kind(self) -> &'static str {
        match self {
            PriorityClassSource::WorkloadPriorityClass => "WorkloadPriorityClass",
            PriorityClassSource::PriorityClass => "PriorityClass",
        }
    }
}
