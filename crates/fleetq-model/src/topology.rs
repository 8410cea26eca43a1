//! Kueue's Topology-Aware Scheduling (TAS) as data: the `Topology` object,
//! an ordered list of node-label levels from the broadest (a block) to the
//! narrowest (a host), and a pod set's topology request (all pods within
//! one rack, slices of 4 pods per host, ...).
//!
//! fleetq stores both and checks them with Kueue's rules, so manifests
//! written for Kueue's TAS import unchanged and a mistake is caught at
//! submit time. Placement honours them on clusters whose agents report
//! their nodes (`fleetq_scheduler::nodes`); a cluster reported as
//! per-flavor totals places by totals only, and [`PLACEMENT_NOTE`] says
//! so wherever a request is shown.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::kueue::syntax::qualified_name_error;

/// The node label of one host; Kueue allows it only as the last level.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Kueue's CRD limit on `spec.levels`.
pub const MAX_TOPOLOGY_LEVELS: usize = 16;
/// The longest level a pod set's request may name: a label key (a
/// 253-character prefix, `/`, a 63-character name). Kueue's v1beta2 CRD
/// allows 63 in a Workload's `topologyRequest` (checked where manifests
/// enter, `kueue/versions.rs`); v1beta1 and Jobs' annotations allow any
/// label key.
pub const MAX_REQUESTED_LEVEL: usize = 317;
/// What every display of a topology request adds, so that nobody takes a
/// stored request for a placement guarantee.
pub const PLACEMENT_NOTE: &str =
    "honoured on clusters that report their nodes; by totals on the others";

/// A Kueue `Topology` (cluster-scoped, `kueue.x-k8s.io/v1beta1|v1beta2`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub name: String,
    #[serde(default)]
    pub spec: TopologySpec,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologySpec {
    /// Broadest first; the order is what "at or below a level" means.
    #[serde(default)]
    pub levels: Vec<TopologyLevel>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyLevel {
    /// Defaulted so that a level without one is a validation error at
    /// `spec.levels[i].nodeLabel` rather than a decoding error one level up.
    #[serde(default)]
    pub node_label: String,
}

impl Topology {
    /// The levels' node labels, broadest first.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.spec.levels.iter().map(|l| l.node_label.as_str())
    }

    /// Position of `label` among the levels (0 is the broadest).
    pub fn level_index(&self, label: &str) -> Option<usize> {
        self.labels().position(|l| l == label)
    }

    /// Kueue's rules for `spec.levels` (its CRD schema and CEL rules), as
    /// (field path, message): at least one and at most 16 levels, each a
    /// valid label key, no level twice, and the hostname label only as the
    /// last level (a host cannot contain anything below it).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let levels = &self.spec.levels;
        if levels.is_empty() {
            out.push((
                "spec.levels".to_string(),
                "must list at least one level (a node label such as cloud.provider.com/topology-rack)"
                    .to_string(),
            ));
        }
        if levels.len() > MAX_TOPOLOGY_LEVELS {
            out.push((
                "spec.levels".to_string(),
                format!(
                    "has {} levels; Kueue allows at most {MAX_TOPOLOGY_LEVELS}",
                    levels.len()
                ),
            ));
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, level) in levels.iter().enumerate() {
            let path = format!("spec.levels[{i}].nodeLabel");
            let label = level.node_label.as_str();
            if label.is_empty() {
                out.push((
                    path,
                    "is required: the node label of this level".to_string(),
                ));
                continue;
            }
            if let Some(problem) = qualified_name_error(label) {
                out.push((path.clone(), format!("node label {problem}")));
            }
            if let Some(first) = seen.insert(label, i) {
                // Keep the first position, so a third copy names it too.
                seen.insert(label, first);
                out.push((
                    path.clone(),
                    format!("{label:?} is already spec.levels[{first}]; levels must be unique"),
                ));
            }
            if label == HOSTNAME_LABEL && i + 1 != levels.len() {
                out.push((
                    path,
                    format!(
                        "{HOSTNAME_LABEL} can only be the last (lowest) level: nothing lies within one host"
                    ),
                ));
            }
        }
        out
    }

    /// Why Kueue (v1beta2's CEL transition rule) refuses to replace `self`
    /// by `new`, if it does: levels may change only when both the old and
    /// the new list end with the hostname level, because Kueue's placement
    /// of running pods is recorded per level.
    pub fn update_problem(&self, new: &Topology) -> Option<String> {
        if self.spec.levels == new.spec.levels {
            return None;
        }
        let ends_with_host = |t: &Topology| t.labels().last() == Some(HOSTNAME_LABEL);
        if ends_with_host(self) && ends_with_host(new) {
            return None;
        }
        Some(format!(
            "levels can change only when {HOSTNAME_LABEL} is the last level both before and after the change; delete the Topology (after the flavors that use it) and create it again"
        ))
    }
}

/// A pod set's topology request (Kueue's `PodSetTopologyRequest`). At most
/// one of required, preferred and unconstrained is possible by
/// construction ([`TopologyPlacement`]), and a slice has both its level
/// and its size or is absent ([`TopologySlice`]). Stored in Kueue's own
/// field spelling, so a stored workload reads like the Workload it came
/// from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RequestFields", into = "RequestFields")]
pub struct PodSetTopologyRequest {
    pub placement: Option<TopologyPlacement>,
    pub slice: Option<TopologySlice>,
    /// The label that numbers the pods (a Job's completion index).
    pub pod_index_label: Option<String>,
    /// The label that numbers replicated groups within the pod set.
    pub sub_group_index_label: Option<String>,
    pub sub_group_count: Option<u32>,
}

/// Where a pod set's pods must or should be, by topology level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyPlacement {
    /// All pods within one domain of this level, or not admitted.
    Required(String),
    /// One domain of this level if they fit, else the next level up, and
    /// at the top spread over several.
    Preferred(String),
    /// Anywhere with room (still topology-aware: placed on nodes of a
    /// flavor with a Topology).
    Unconstrained,
}

/// Pods placed in slices of `size`, each slice within one domain of
/// `level` (Kueue's `podSetSliceRequiredTopology` and `podSetSliceSize`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologySlice {
    pub level: String,
    pub size: u32,
}

impl TopologyPlacement {
    /// The level it names (none for unconstrained).
    pub fn level(&self) -> Option<&str> {
        match self {
            TopologyPlacement::Required(level) | TopologyPlacement::Preferred(level) => Some(level),
            TopologyPlacement::Unconstrained => None,
        }
    }

    /// Its field in Kueue's `topologyRequest`.
    pub fn field(&self) -> &'static str {
        match self {
            TopologyPlacement::Required(_) => "required",
            TopologyPlacement::Preferred(_) => "preferred",
            TopologyPlacement::Unconstrained => "unconstrained",
        }
    }
}

impl PodSetTopologyRequest {
    /// Whether it asks for topology-aware placement at all (Kueue's
    /// "explicitly requesting TAS"); index labels alone do not.
    pub fn requests_topology(&self) -> bool {
        self.placement.is_some() || self.slice.is_some()
    }

    /// Kueue's rules on the values, for a pod set of `count` pods, as
    /// (field under `topologyRequest`, message): levels are label keys of
    /// at most 63 characters, and a slice holds 1 to `count` pods and
    /// divides `count`.
    pub fn problems(&self, count: u32) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let mut level = |field: &'static str, label: &str| {
            if let Some(problem) = level_error(label) {
                out.push((field, problem));
            }
        };
        if let Some(placement) = &self.placement {
            if let Some(label) = placement.level() {
                level(placement.field(), label);
            }
        }
        if let Some(slice) = &self.slice {
            level("podSetSliceRequiredTopology", &slice.level);
            if slice.size == 0 {
                out.push(("podSetSliceSize", "must be at least 1".to_string()));
            } else if slice.size > count {
                out.push((
                    "podSetSliceSize",
                    format!(
                        "{} must not be greater than the pod set's count {count}",
                        slice.size
                    ),
                ));
            } else if count % slice.size != 0 {
                // Kueue's TAS design (KEP-2724): "It has to evenly divide
                // the size of a PodSet"; placement takes whole slices only.
                out.push((
                    "podSetSliceSize",
                    format!(
                        "{} must divide the pod set's count {count} (whole slices only)",
                        slice.size
                    ),
                ));
            }
        }
        out
    }
}

/// Why `label` cannot name a topology level in a request, if it cannot.
fn level_error(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("must name a topology level (a node label)".to_string());
    }
    if label.len() > MAX_REQUESTED_LEVEL {
        return Some(format!(
            "is {} characters long; Kueue allows at most {MAX_REQUESTED_LEVEL}",
            label.len()
        ));
    }
    qualified_name_error(label).map(|problem| format!("level {problem}"))
}

impl fmt::Display for PodSetTopologyRequest {
    /// `required cloud.provider.com/topology-rack, slices of 4 pods within
    /// kubernetes.io/hostname`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match &self.placement {
            Some(TopologyPlacement::Required(level)) => parts.push(format!("required {level}")),
            Some(TopologyPlacement::Preferred(level)) => parts.push(format!("preferred {level}")),
            Some(TopologyPlacement::Unconstrained) => parts.push("unconstrained".to_string()),
            None => {}
        }
        if let Some(slice) = &self.slice {
            let pods = if slice.size == 1 { "pod" } else { "pods" };
            parts.push(format!(
                "slices of {} {pods} within {}",
                slice.size, slice.level
            ));
        }
        if parts.is_empty() {
            if let Some(label) = &self.pod_index_label {
                parts.push(format!("pod index label {label}"));
            }
        }
        f.write_str(&parts.join(", "))
    }
}

/// Kueue's `PodSetTopologyRequest` fields as stored: what
/// [`PodSetTopologyRequest`] serialises to and reads back from. Reading
/// refuses what the type cannot hold (two placements, half a slice), so a
/// hand-written submission cannot smuggle one in.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RequestFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    required: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preferred: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unconstrained: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod_index_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sub_group_index_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sub_group_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod_set_slice_required_topology: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod_set_slice_size: Option<u32>,
}

impl TryFrom<RequestFields> for PodSetTopologyRequest {
    type Error = String;

    fn try_from(f: RequestFields) -> Result<Self, String> {
        let placement = placement_of(f.required, f.preferred, f.unconstrained)?;
        let slice = slice_of(f.pod_set_slice_required_topology, f.pod_set_slice_size)?;
        Ok(PodSetTopologyRequest {
            placement,
            slice,
            pod_index_label: f.pod_index_label,
            sub_group_index_label: f.sub_group_index_label,
            sub_group_count: f.sub_group_count,
        })
    }
}

impl From<PodSetTopologyRequest> for RequestFields {
    fn from(r: PodSetTopologyRequest) -> Self {
        let (required, preferred, unconstrained) = match r.placement {
            Some(TopologyPlacement::Required(level)) => (Some(level), None, None),
            Some(TopologyPlacement::Preferred(level)) => (None, Some(level), None),
            Some(TopologyPlacement::Unconstrained) => (None, None, Some(true)),
            None => (None, None, None),
        };
        let (slice_level, slice_size) = match r.slice {
            Some(s) => (Some(s.level), Some(s.size)),
            None => (None, None),
        };
        RequestFields {
            required,
            preferred,
            unconstrained,
            pod_index_label: r.pod_index_label,
            sub_group_index_label: r.sub_group_index_label,
            sub_group_count: r.sub_group_count,
            pod_set_slice_required_topology: slice_level,
            pod_set_slice_size: slice_size,
        }
    }
}

/// The placement of Kueue's three optional fields: at most one may be set.
/// `unconstrained: false` asks for nothing and is read as absent.
pub(crate) fn placement_of(
    required: Option<String>,
    preferred: Option<String>,
    unconstrained: Option<bool>,
) -> Result<Option<TopologyPlacement>, String> {
    match (required, preferred, unconstrained) {
        (Some(level), None, None | Some(false)) => Ok(Some(TopologyPlacement::Required(level))),
        (None, Some(level), None | Some(false)) => Ok(Some(TopologyPlacement::Preferred(level))),
        (None, None, Some(true)) => Ok(Some(TopologyPlacement::Unconstrained)),
        (None, None, None | Some(false)) => Ok(None),
        _ => Err("set at most one of required, preferred and unconstrained: true".to_string()),
    }
}

/// A slice needs both its level and its size.
pub(crate) fn slice_of(
    level: Option<String>,
    size: Option<u32>,
) -> Result<Option<TopologySlice>, String> {
    match (level, size) {
        (Some(level), Some(size)) => Ok(Some(TopologySlice { level, size })),
        (None, None) => Ok(None),
        (Some(_), None) => {
            Err("podSetSliceSize must be set when podSetSliceRequiredTopology is".to_string())
        }
        (None, Some(_)) => {
            Err("podSetSliceSize may not be set without podSetSliceRequiredTopology".to_string())
        }
    }
}

/// The cross-object checks: flavors name Topologies that exist, and a pod
/// set asks only for levels that a flavor its ClusterQueue could give it
/// has. Kept here, beside the types, so `config.rs` only calls them.
impl crate::Config {
    /// The flavors whose `spec.topologyName` is `topology`, by name.
    pub fn flavors_using_topology(&self, topology: &str) -> Vec<&str> {
        self.flavors
            .values()
            .filter(|f| f.spec.topology_name.as_deref() == Some(topology))
            .map(|f| f.name.as_str())
            .collect()
    }

    /// A flavor's `spec.topologyName` must name a Topology of this
    /// configuration (Kueue's TAS cannot place on a flavor whose levels it
    /// does not know).
    pub(crate) fn check_flavor_topology(
        &self,
        flavor: &crate::ResourceFlavor,
        errors: &mut Vec<crate::FieldError>,
    ) {
        let Some(name) = &flavor.spec.topology_name else {
            return;
        };
        if !self.topologies.contains_key(name) {
            errors.push(crate::FieldError::new(
                format!("ResourceFlavor/{}", flavor.name),
                "spec.topologyName",
                format!("Topology {name:?} does not exist; apply it with the flavor"),
            ));
        }
    }

    /// Checks pod set `ps` (at `path`, `spec.podSets[i]`) of a workload
    /// bound to `cq`: the request's own values, then, if it asks for
    /// topology-aware placement, that some flavor of the resource groups
    /// the pod set draws from has a Topology with the levels it names
    /// (and the slice level at or below the pod set's level), as Kueue's
    /// flavor assigner requires. Kueue finds a missing level only when it
    /// tries to schedule and leaves the workload pending; fleetq knows
    /// the configuration at submit time, so it refuses the submission, and
    /// a pending workload whose configuration later loses the level is
    /// marked Misconfigured when it is re-bound.
    pub(crate) fn check_topology_request(
        &self,
        object: &str,
        path: &str,
        ps: &crate::PodSet,
        cq: Option<&crate::ClusterQueue>,
        errors: &mut Vec<crate::FieldError>,
    ) {
        let Some(request) = &ps.topology_request else {
            return;
        };
        let at = |field: &str| format!("{path}.topologyRequest.{field}");
        let problems = request.problems(ps.count);
        let malformed = !problems.is_empty();
        for (field, message) in problems {
            errors.push(crate::FieldError::new(object, at(field), message));
        }
        let Some(cq) = cq.filter(|_| !malformed && request.requests_topology()) else {
            return;
        };
        // The flavors that could hold this pod set: those of every resource
        // group covering something it requests.
        let mut groups = std::collections::BTreeSet::new();
        for (resource, amount) in &ps.requests {
            if !amount.is_zero() {
                if let Some((g, _)) = cq.group_for(resource) {
                    groups.insert(g);
                }
            }
        }
        let candidates: Vec<&str> = groups
            .iter()
            .filter_map(|g| cq.spec.resource_groups.get(*g))
            .flat_map(|group| group.flavors.iter().map(|f| f.name.as_str()))
            .collect();
        let with_topology: Vec<(&str, &Topology)> = candidates
            .iter()
            .filter_map(|name| {
                let flavor = self.flavors.get(*name)?;
                let topology = self.topologies.get(flavor.spec.topology_name.as_deref()?)?;
                Some((*name, topology))
            })
            .collect();
        let first_field = match (&request.placement, &request.slice) {
            (Some(p), _) => p.field(),
            (None, _) => "podSetSliceRequiredTopology",
        };
        if with_topology.is_empty() {
            if !candidates.is_empty() {
                errors.push(crate::FieldError::new(
                    object,
                    at(first_field),
                    format!(
                        "ClusterQueue {:?} has no flavor with a Topology for this pod set (it could use {}); topology-aware placement needs a ResourceFlavor with spec.topologyName",
                        cq.name,
                        candidates.join(", ")
                    ),
                ));
            }
            return;
        }
        let offered = || {
            with_topology
                .iter()
                .map(|(flavor, t)| {
                    let levels: Vec<&str> = t.labels().collect();
                    format!("{flavor} (Topology {}: {})", t.name, levels.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let level = request
            .placement
            .as_ref()
            .and_then(TopologyPlacement::level);
        if let Some(level) = level {
            if !with_topology
                .iter()
                .any(|(_, t)| t.level_index(level).is_some())
            {
                errors.push(crate::FieldError::new(
                    object,
                    at(first_field),
                    format!(
                        "level {level:?} is not a level of any Topology ClusterQueue {:?} could place this pod set with: {}",
                        cq.name,
                        offered()
                    ),
                ));
                return;
            }
        }
        let Some(slice) = &request.slice else {
            return;
        };
        let slice_path = at("podSetSliceRequiredTopology");
        if !with_topology
            .iter()
            .any(|(_, t)| t.level_index(&slice.level).is_some())
        {
            errors.push(crate::FieldError::new(
                object,
                slice_path,
                format!(
                    "level {:?} is not a level of any Topology ClusterQueue {:?} could place this pod set with: {}",
                    slice.level,
                    cq.name,
                    offered()
                ),
            ));
            return;
        }
        // Kueue: a slice lies within one domain of the pod set's level, so
        // its own level cannot be broader. Without a level the pod set
        // spans the broadest level, and any slice level is below it.
        let fits = |t: &Topology| match (
            level.and_then(|l| t.level_index(l)),
            t.level_index(&slice.level),
        ) {
            (Some(outer), Some(inner)) => inner >= outer,
            (None, Some(_)) => level.is_none(),
            _ => false,
        };
        if !with_topology.iter().any(|(_, t)| fits(t)) {
            errors.push(crate::FieldError::new(
                object,
                slice_path,
                format!(
                    "no Topology ClusterQueue {:?} could place this pod set with has {:?} at or below the pod set's level {:?} ({}); a slice must lie within one domain of the pod set's level",
                    cq.name,
                    slice.level,
                    level.unwrap_or_default(),
                    offered()
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(levels: &[&str]) -> Topology {
        Topology {
            name: "default".into(),
            spec: TopologySpec {
                levels: levels
                    .iter()
                    .map(|l| TopologyLevel {
                        node_label: l.to_string(),
                    })
                    .collect(),
            },
        }
    }

    fn paths(problems: &[(String, String)]) -> Vec<&str> {
        problems.iter().map(|(p, _)| p.as_str()).collect()
    }

    #[test]
    fn kueues_sample_topology_is_valid() {
        let t = topology(&[
            "cloud.provider.com/topology-block",
            "cloud.provider.com/topology-rack",
            HOSTNAME_LABEL,
        ]);
        assert!(t.problems().is_empty(), "{:?}", t.problems());
        assert_eq!(t.level_index("cloud.provider.com/topology-rack"), Some(1));
        assert_eq!(t.level_index("zone"), None);
    }

    #[test]
    fn level_rules() {
        let empty = topology(&[]).problems();
        assert_eq!(paths(&empty), ["spec.levels"]);
        assert!(empty[0].1.contains("at least one level"), "{empty:?}");

        let many: Vec<String> = (0..17).map(|i| format!("example.com/level-{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let too_many = topology(&many).problems();
        assert_eq!(paths(&too_many), ["spec.levels"]);
        assert!(too_many[0].1.contains("at most 16"), "{too_many:?}");

        let twice = topology(&["rack", "block", "rack", "rack"]).problems();
        assert_eq!(
            paths(&twice),
            ["spec.levels[2].nodeLabel", "spec.levels[3].nodeLabel"]
        );
        assert!(twice[1].1.contains("already spec.levels[0]"), "{twice:?}");

        let bad = topology(&["Rack Label", ""]).problems();
        assert_eq!(
            paths(&bad),
            ["spec.levels[0].nodeLabel", "spec.levels[1].nodeLabel"]
        );
        assert!(bad[0].1.contains("not a valid qualified name"), "{bad:?}");
        assert!(bad[1].1.contains("is required"), "{bad:?}");

        let host_first = topology(&[HOSTNAME_LABEL, "rack"]).problems();
        assert_eq!(paths(&host_first), ["spec.levels[0].nodeLabel"]);
        assert!(
            host_first[0].1.contains("last (lowest) level"),
            "{host_first:?}"
        );
    }

    #[test]
    fn levels_change_only_above_the_hostname_level() {
        let old = topology(&["block", "rack", HOSTNAME_LABEL]);
        assert_eq!(old.update_problem(&old.clone()), None);
        assert_eq!(
            old.update_problem(&topology(&["rack", HOSTNAME_LABEL])),
            None
        );
        assert!(old.update_problem(&topology(&["block", "rack"])).is_some());
        assert!(topology(&["block"])
            .update_problem(&topology(&["block", HOSTNAME_LABEL]))
            .is_some());
    }

    #[test]
    fn at_most_one_placement_and_whole_slices() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            placement_of(s("rack"), None, None),
            Ok(Some(TopologyPlacement::Required("rack".into())))
        );
        assert_eq!(placement_of(None, None, Some(false)), Ok(None));
        assert!(placement_of(s("rack"), s("block"), None).is_err());
        assert!(placement_of(s("rack"), None, Some(true)).is_err());
        assert!(placement_of(None, s("rack"), Some(true)).is_err());
        assert!(slice_of(s("host"), None).is_err());
        assert!(slice_of(None, Some(2)).is_err());
    }

    #[test]
    fn stored_in_kueues_spelling_and_checked_when_read() {
        let request = PodSetTopologyRequest {
            placement: Some(TopologyPlacement::Required("rack".into())),
            slice: Some(TopologySlice {
                level: HOSTNAME_LABEL.into(),
                size: 4,
            }),
            pod_index_label: Some("batch.kubernetes.io/job-completion-index".into()),
            ..Default::default()
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "required": "rack",
                "podIndexLabel": "batch.kubernetes.io/job-completion-index",
                "podSetSliceRequiredTopology": HOSTNAME_LABEL,
                "podSetSliceSize": 4,
            })
        );
        let back: PodSetTopologyRequest = serde_json::from_value(json).unwrap();
        assert_eq!(back, request);
        let both = serde_json::json!({"required": "rack", "preferred": "block"});
        let error = serde_json::from_value::<PodSetTopologyRequest>(both).unwrap_err();
        assert!(error.to_string().contains("at most one"), "{error}");
    }

    #[test]
    fn request_value_rules() {
        let request = PodSetTopologyRequest {
            placement: Some(TopologyPlacement::Preferred("Not A Label".into())),
            slice: Some(TopologySlice {
                level: "x".repeat(64),
                size: 9,
            }),
            ..Default::default()
        };
        let problems = request.problems(8);
        let fields: Vec<&str> = problems.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            fields,
            [
                "preferred",
                "podSetSliceRequiredTopology",
                "podSetSliceSize"
            ]
        );
        assert!(problems[1].1.contains("at most 63"), "{problems:?}");
        assert!(
            problems[2].1.contains("greater than the pod set's count 8"),
            "{problems:?}"
        );
        let zero = PodSetTopologyRequest {
            slice: Some(TopologySlice {
                level: "rack".into(),
                size: 0,
            }),
            ..Default::default()
        };
        assert_eq!(zero.problems(8)[0].0, "podSetSliceSize");
    }

    #[test]
    fn displayed_with_what_it_asks() {
        let request = PodSetTopologyRequest {
            placement: Some(TopologyPlacement::Required(HOSTNAME_LABEL.into())),
            slice: None,
            ..Default::default()
        };
        assert_eq!(request.to_string(), "required kubernetes.io/hostname");
        let sliced = PodSetTopologyRequest {
            placement: None,
            slice: Some(TopologySlice {
                level: "rack".into(),
                size: 1,
            }),
            ..Default::default()
        };
        assert_eq!(sliced.to_string(), "slices of 1 pod within rack");
    }
}
