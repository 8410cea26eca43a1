//! Kueue's `Configuration` (config.kueue.x-k8s.io), the part fleetq
//! schedules by: fair sharing. Kueue reads it from its controller's
//! configuration file; fleetq keeps it in the replicated configuration,
//! applied like any other object (`fleetq apply -f kueue-config.yaml`), so
//! every replica that becomes leader schedules alike.

use serde::{Deserialize, Serialize};

/// Kueue's fair-sharing preemption strategies, by their Kueue names.
pub const FAIR_SHARING_STRATEGIES: [&str; 2] =
    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"];

/// The scheduling part of Kueue's Configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulingSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingSettings>,
}

/// Kueue's `fairSharing`: order ClusterQueues of a cohort by dominant
/// resource share and let it drive preemption between them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairSharingSettings {
    #[serde(default)]
    pub enable: bool,
    /// Kueue's default when empty: both, in the order above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_strategies: Vec<String>,
}

impl SchedulingSettings {
    /// Whether fair sharing is on.
    pub fn fair_sharing_enabled(&self) -> bool {
        self.fair_sharing.as_ref().is_some_and(|f| f.enable)
    }

    /// The preemption strategies in force (Kueue's default when none are
    /// given).
    pub fn strategies(&self) -> Vec<String> {
        match &self.fair_sharing {
            Some(f) if !f.preemption_strategies.is_empty() => f.preemption_strategies.clone(),
            _ => FAIR_SHARING_STRATEGIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// Field errors, as `(path, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(f) = &self.fair_sharing {
            for (i, s) in f.preemption_strategies.iter().enumerate() {
                if !FAIR_SHARING_STRATEGIES.contains(&s.as_str()) {
                    out.push((
                        format!("fairSharing.preemptionStrategies[{i}]"),
                        format!(
                            "{s:?} is not a strategy: {}",
                            FAIR_SHARING_STRATEGIES.join(" or ")
                        ),
                    ));
                } else if f.preemption_strategies[..i].contains(s) {
                    out.push((
                        format!("fairSharing.preemptionStrategies[{i}]"),
                        format!("{s:?} is listed twice"),
                    ));
                }
            }
        }
        out
    }
}
