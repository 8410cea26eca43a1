//! Kueue's `Configuration` (config.kueue.x-k8s.io), the part fleetq
//! schedules by: fair sharing and admission fair sharing. Kueue reads it from its controller's
//! configuration file; fleetq keeps it in the replicated configuration,
//! applied like any other object (`fleetq apply -f kueue-config.yaml`), so
//! every replica that becomes leader schedules alike.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time::parse_duration;

/// Kueue's fair-sharing preemption strategies, by their Kueue names.
pub const FAIR_SHARING_STRATEGIES: [&str; 2] =
    ["LessThanOrEqualToFinalShare", "LessThanInitialShare"];

/// The scheduling part of Kueue's Configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulingSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing: Option<AdmissionFairSharingSettings>,
}

/// Kueue's `admissionFairSharing`: how LocalQueue usage decays and what
/// it counts, for ClusterQueues whose `admissionScope` turns it on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionFairSharingSettings {
    /// Usage halves after this long (`0s`: usage is forgotten at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_half_life_time: Option<String>,
    /// Kueue samples running workloads' usage this often. fleetq charges
    /// a workload's usage exactly when its reservation ends (and an entry
    /// penalty at admission), so the interval is checked and kept for a
    /// round trip but changes nothing (docs/architecture.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_sampling_interval: Option<String>,
    /// Weight per resource in a LocalQueue's usage. Unlisted resources:
    /// 1 for `nvidia.com/gpu`, 0 for the rest (Kueue weighs every
    /// resource 1; fleetq counts GPU time unless told otherwise).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_weights: BTreeMap<String, Weight>,
}

/// A non-negative resource weight, kept in thousandths so that every
/// replica computes the same integer usage. Read and written as Kueue's
/// float64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weight {
    /// Thousandths; `None` when the number was negative, not finite or
    /// too large (reported by [`SchedulingSettings::problems`]).
    pub milli: Option<u64>,
    written: OrderedF64,
}

/// The number as written, for the error message and the round trip.
#[derive(Clone, Copy, Debug)]
struct OrderedF64(f64);

impl PartialEq for OrderedF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for OrderedF64 {}

/// Weights above this are refused: a million times a GPU is plenty, and
/// usage stays far from u64's end.
const MAX_WEIGHT: f64 = 1e6;

impl Weight {
    pub fn new(value: f64) -> Weight {
        let milli = (value.is_finite() && (0.0..=MAX_WEIGHT).contains(&value))
            .then(|| (value * 1000.0).round() as u64);
        Weight {
            milli,
            written: OrderedF64(value),
        }
    }
}

impl Serialize for Weight {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.written.0)
    }
}

impl<'de> Deserialize<'de> for Weight {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Weight::new)
    }
}

impl AdmissionFairSharingSettings {
    /// The half-life in force, if one is set and valid.
    pub fn half_life(&self) -> Option<Duration> {
        self.usage_half_life_time
            .as_deref()
            .and_then(|d| parse_duration(d).ok())
    }

    /// Weights finer than a thousandth, which fleetq would round: refused
    /// where manifests enter (not by `Config::validate`, so a ledger that
    /// accepted one before this check replays the same).
    fn precision_problems(&self, out: &mut Vec<(String, String)>) {
        for (resource, w) in &self.resource_weights {
            let scaled = w.written.0 * 1000.0;
            if w.milli.is_some() && (scaled - scaled.round()).abs() > 1e-6 {
                out.push((
                    format!("admissionFairSharing.resourceWeights[{resource}]"),
                    format!(
                        "{} is finer than 0.001, the precision fleetq keeps weights in; it would be rounded to {}",
                        w.written.0,
                        scaled.round() / 1000.0
                    ),
                ));
            }
        }
    }

    /// Weights in thousandths, for the resources listed with a valid one.
    pub fn weights_milli(&self) -> BTreeMap<String, u64> {
        self.resource_weights
            .iter()
            .filter_map(|(r, w)| Some((r.clone(), w.milli?)))
            .collect()
    }

    fn problems(&self, out: &mut Vec<(String, String)>) {
        let base = "admissionFairSharing";
        if let Some(d) = &self.usage_half_life_time {
            if parse_duration(d).is_err() {
                out.push((
                    format!("{base}.usageHalfLifeTime"),
                    format!("{d:?} is not a duration >= 0 (e.g. 168h, 30m, 0s)"),
                ));
            }
        }
        if let Some(d) = &self.usage_sampling_interval {
            match parse_duration(d) {
                Ok(i) if !i.is_zero() => {}
                _ => out.push((
                    format!("{base}.usageSamplingInterval"),
                    format!("{d:?} is not a duration > 0 (e.g. 5m)"),
                )),
            }
        }
        for (resource, w) in &self.resource_weights {
            if w.milli.is_none() {
                out.push((
                    format!("{base}.resourceWeights[{resource}]"),
                    format!(
                        "{} is not a weight: a number from 0 to {MAX_WEIGHT}",
                        w.written.0
                    ),
                ));
            }
        }
    }
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
    /// Precision fleetq cannot keep, checked on import only
    /// ([`AdmissionFairSharingSettings`]'s weights).
    pub fn precision_problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(a) = &self.admission_fair_sharing {
            a.precision_problems(&mut out);
        }
        out
    }

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
        if let Some(afs) = &self.admission_fair_sharing {
            afs.problems(&mut out);
        }
        out
    }
}
