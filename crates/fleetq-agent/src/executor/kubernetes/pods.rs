//! Plain Pods and pod groups (Kueue's pod integration) on the Kubernetes
//! executor: a workload imported from a Pod, or from the pods of a
//! `kueue.x-k8s.io/pod-group-name` group (its `run.jobTemplate` is the Pod
//! or a `v1 List` of them), becomes those pods in the assigned cluster,
//! each labelled with the admission, pinned to the GPUs and nodes its own
//! pod set (its role) was charged, and without Kueue's admission
//! scheduling gate. No controller owns them, so the executor reads the
//! group's state from its pods, as Kueue's pod-group reconciler does:
//! Running once every pod runs or has succeeded, Succeeded once all have,
//! Failed as soon as one fails or is deleted behind fleetq's back.
//!
//! Pods the front door queued from this very cluster (created by their
//! user with Kueue's `kueue.x-k8s.io/admission` scheduling gate) are not
//! made again: they are *adopted* ([`adopted_pods`],
//! [`pod_adoption_patch`]), as Kueue admits a gated pod, by one patch per
//! pod that labels it for the admission, removes the gate and pins it to
//! the node and GPUs the ledger charged. Kubernetes lets a gated pod's
//! spec change only that way (gates removed, node selector added to,
//! required node affinity narrowed); a stop deletes the pods, since a pod
//! cannot be suspended (Kueue stops plain pods the same way).

use std::collections::{BTreeMap, HashMap};

use fleetq_model::assignment::{Assignment, PodSetAssignment};
use fleetq_model::workload::{ADOPT_CLUSTER_ANNOTATION, ADOPT_UID_ANNOTATION};
use fleetq_model::Workload;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Map, Value};

use super::{
    admission_labels, job_name, object_at, pin_pods, products_for, require_nodes, require_products,
    take_metadata, LABEL_ADOPTED,
};
use crate::executor::Event;
use crate::inventory::FlavorMapping;
use crate::kubernetes::PRODUCT_LABEL;

/// On each pod fleetq starts for a pod workload: how many pods the
/// admission runs, so that a restarted agent knows when all are running.
pub const LABEL_POD_COUNT: &str = "fleetq.dev/pods";

/// Kueue's scheduling gate, which its webhook puts on the pods it queues
/// and removes on admission.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// Kueue's pod-group keys: a Kueue in the target cluster would hold pods
/// carrying them, so fleetq's pods drop them (as they drop the queue label).
const KUEUE_GROUP_KEYS: [&str; 2] = [
    fleetq_model::kueue::POD_GROUP_NAME_LABEL,
    fleetq_model::kueue::POD_GROUP_TOTAL_COUNT_ANNOTATION,
];

/// Whether the workload runs as plain pods.
pub fn runs_as_pods(workload: &Workload) -> bool {
    matches!(super::template_kind(workload), Some("Pod" | "List"))
}

/// The pods of one admission, from the workload's Pod or List template.
pub fn pod_manifests(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    assignment: &Assignment,
    mapping: &FlavorMapping,
) -> Result<Vec<Pod>, String> {
    let template = super::checked_template(workload, "Pod")?;
    let (pods, single) = template_pods(&template);
    let count = pods.len().to_string();
    let mut ours = admission_labels(id, epoch, cluster, workload).to_vec();
    ours.push((LABEL_POD_COUNT, count));
    let mut names = std::collections::BTreeSet::new();
    pods.into_iter()
        .enumerate()
        .map(|(i, mut pod)| {
            let path = if single {
                "run.jobTemplate".to_string()
            } else {
                format!("run.jobTemplate.items[{i}]")
            };
            let role = fleetq_model::kueue::pod_role(&pod);
            let pod_set = if single {
                assignment.pod_sets.first()
            } else {
                assignment.pod_sets.iter().find(|p| p.name == role)
            }
            .ok_or_else(|| format!("{path}: no pod set {role:?} in the assignment"))?;
            // A pod made with generateName (Kueue's own group example)
            // is named by its place in the group.
            let base = match (
                pod["metadata"]["name"].as_str(),
                pod["metadata"]["generateName"].as_str(),
            ) {
                (Some(name), _) if !name.is_empty() => name.to_string(),
                (_, Some(prefix)) => format!("{prefix}{i}"),
                _ => format!("pod-{i}"),
            };
            let name = job_name(&base, id, epoch);
            if !names.insert(name.clone()) {
                return Err(format!("{path}: a second pod named {name:?}"));
            }
            take_metadata(&mut pod, name, workload, &ours);
            drop_kueue_group_keys(&mut pod);
            pod["apiVersion"] = json!("v1");
            pod["kind"] = json!("Pod");
            let spec = object_at(&mut pod, "spec");
            drop_admission_gate(spec);
            // A pod bound to a node by name skips the scheduler, and with
            // it the pinning below.
            spec.remove("nodeName");
            pin_pods(spec, std::slice::from_ref(pod_set), mapping)?;
            serde_json::from_value(pod).map_err(|e| format!("{path}: not a valid v1 Pod: {e}"))
        })
        .collect()
}

/// The pods of a template: the Pod, or a `v1 List`'s items; whether it
/// is a single Pod.
fn template_pods(template: &Value) -> (Vec<Value>, bool) {
    match template["kind"].as_str() {
        Some("List") => (
            template["items"].as_array().cloned().unwrap_or_default(),
            false,
        ),
        _ => (vec![template.clone()], true),
    }
}

/// One of the user's pods that an admission adopts in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdoptedPod {
    pub name: String,
    pub uid: String,
    /// The pod set it counts in (its role in a group).
    pub pod_set: String,
}

/// The user's pods the agent of `cluster` adopts for this workload, when
/// the front door of this cluster queued them: every pod of the template
/// carries `fleetq.dev/adopt-cluster` naming it, and its uid.
pub fn adopted_pods(workload: &Workload, cluster: &str) -> Option<Vec<AdoptedPod>> {
    let template = workload.spec.run.job_template.as_ref()?;
    let (pods, single) = template_pods(template);
    if pods.is_empty() {
        return None;
    }
    pods.iter()
        .map(|pod| {
            let annotations = &pod["metadata"]["annotations"];
            if annotations[ADOPT_CLUSTER_ANNOTATION].as_str()? != cluster {
                return None;
            }
            let pod_set = match single {
                true => workload.spec.pod_sets.first()?.name.clone(),
                false => fleetq_model::kueue::pod_role(pod),
            };
            Some(AdoptedPod {
                name: pod["metadata"]["name"].as_str()?.to_string(),
                uid: annotations[ADOPT_UID_ANNOTATION].as_str()?.to_string(),
                pod_set,
            })
        })
        .collect()
}

/// The node each adopted pod is pinned to (`None` on a cluster reported
/// as totals): a pod set's pods take its placement's nodes in order,
/// each node as many pods as the ledger charged there.
pub fn nodes_for(pods: &[AdoptedPod], assignment: &Assignment) -> Vec<Option<String>> {
    let mut free: HashMap<&str, Vec<String>> = assignment
        .pod_sets
        .iter()
        .map(|p| {
            let nodes = p
                .nodes
                .iter()
                .rev()
                .flat_map(|n| std::iter::repeat_n(n.node.clone(), n.count as usize))
                .collect();
            (p.name.as_str(), nodes)
        })
        .collect();
    pods.iter()
        .map(|pod| free.get_mut(pod.pod_set.as_str())?.pop())
        .collect()
}

/// The merge patch that admits one of the user's gated pods in place
/// (`current`, as the API server has it): the admission's labels (and
/// `fleetq.dev/adopted`), Kueue's admission gate removed, the assigned
/// flavor's product as a node selector (a required node affinity with
/// several), and the pod pinned to `node` by name. Only what Kubernetes
/// lets change on a gated pod is touched; a node selector that asks for
/// another product is an error. The uid and resourceVersion are
/// preconditions.
#[allow(clippy::too_many_arguments)]
pub fn pod_adoption_patch(
    id: u64,
    epoch: u64,
    cluster: &str,
    workload: &Workload,
    pods: usize,
    pod_set: &PodSetAssignment,
    node: Option<&str>,
    mapping: &FlavorMapping,
    current: &Value,
) -> Result<Value, String> {
    let mut labels = Map::new();
    for (k, v) in admission_labels(id, epoch, cluster, workload) {
        labels.insert(k.to_string(), json!(v));
    }
    labels.insert(LABEL_POD_COUNT.into(), json!(pods.to_string()));
    labels.insert(LABEL_ADOPTED.into(), json!("true"));
    let name = current["metadata"]["name"].as_str().unwrap_or_default();
    let mut spec = Map::new();
    let gates = current["spec"]["schedulingGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kept: Vec<Value> = gates
        .iter()
        .filter(|g| g["name"] != KUEUE_ADMISSION_GATE)
        .cloned()
        .collect();
    if kept.len() != gates.len() {
        spec.insert(
            "schedulingGates".into(),
            if kept.is_empty() {
                Value::Null
            } else {
                json!(kept)
            },
        );
    }
    let products = products_for(std::slice::from_ref(pod_set), mapping)?;
    if let [one] = products.as_slice() {
        match current["spec"]["nodeSelector"][PRODUCT_LABEL].as_str() {
            None => {
                spec.insert("nodeSelector".into(), json!({ PRODUCT_LABEL: one }));
            }
            Some(theirs) if theirs == one => {}
            Some(theirs) => {
                return Err(format!(
                    "pod {name}: spec.nodeSelector asks for {PRODUCT_LABEL}={theirs}, but the                      assigned flavor's GPUs are {one}"
                ))
            }
        }
    }
    if products.len() > 1 || node.is_some() {
        let mut pod_spec = current["spec"].as_object().cloned().unwrap_or_default();
        if products.len() > 1 {
            require_products(&mut pod_spec, &products);
        }
        if let Some(node) = node {
            require_nodes(&mut pod_spec, &[node.to_string()]);
        }
        if let Some(affinity) = pod_spec.get("affinity") {
            spec.insert("affinity".into(), affinity.clone());
        }
    }
    Ok(json!({
        "metadata": {
            "uid": current["metadata"]["uid"],
            "resourceVersion": current["metadata"]["resourceVersion"],
            "labels": labels,
        },
        "spec": spec,
    }))
}

fn drop_kueue_group_keys(pod: &mut Value) {
    for section in ["labels", "annotations"] {
        if let Some(map) = pod["metadata"][section].as_object_mut() {
            for key in KUEUE_GROUP_KEYS {
                map.remove(key);
            }
        }
    }
}

fn drop_admission_gate(spec: &mut serde_json::Map<String, Value>) {
    if let Some(gates) = spec
        .get_mut("schedulingGates")
        .and_then(Value::as_array_mut)
    {
        gates.retain(|g| g["name"] != KUEUE_ADMISSION_GATE);
        if gates.is_empty() {
            spec.remove("schedulingGates");
        }
    }
}

/// What one pod of a group is, as far as the group's state goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    pub phase: String,
    /// Why it failed, if it did.
    pub why: String,
}

impl PodState {
    pub fn from_pod(pod: &Pod) -> PodState {
        let status = pod.status.as_ref();
        let phase = status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into());
        let why = [
            status.and_then(|s| s.reason.clone()),
            status.and_then(|s| s.message.clone()),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": ");
        PodState { phase, why }
    }
}

/// The group's state from its pods' (by name), `expected` of them: `None`
/// while not every pod runs yet.
pub fn group_phase(pods: &BTreeMap<String, PodState>, expected: usize) -> Option<(Event, String)> {
    if let Some((name, state)) = pods.iter().find(|(_, s)| s.phase == "Failed") {
        let why = if state.why.is_empty() {
            String::new()
        } else {
            format!(": {}", state.why)
        };
        return Some((Event::Failed, format!("pod {name} failed{why}")));
    }
    if pods.len() < expected {
        return None;
    }
    let succeeded = pods.values().filter(|s| s.phase == "Succeeded").count();
    if succeeded >= expected {
        return Some((Event::Succeeded, String::new()));
    }
    pods.values()
        .all(|s| s.phase == "Running" || s.phase == "Succeeded")
        .then(|| (Event::Running, String::new()))
}

/// The pods of every pod admission the watch has shown, by admission.
pub type PodGroupStore = HashMap<(u64, u64), BTreeMap<String, PodState>>;

/// How many pods a pod of an admission says the admission runs.
pub fn expected_pods(pod: &Pod) -> Option<usize> {
    pod.metadata
        .labels
        .as_ref()?
        .get(LABEL_POD_COUNT)?
        .parse()
        .ok()
}

/// Admissions of which fewer pods exist than their count says, with their
/// namespace and both numbers: at an agent's start, a group whose pods it
/// was creating when it stopped (nothing can finish it: the missing pods'
/// template is the ledger's, and the group would wait for them forever).
pub fn incomplete_groups(pods: &[Pod]) -> Vec<((u64, u64), String, usize, usize)> {
    let mut groups: BTreeMap<(u64, u64), (String, usize, usize)> = BTreeMap::new();
    for pod in pods {
        let (Some(key), Some(expected)) = (super::admission_of(&pod.metadata), expected_pods(pod))
        else {
            continue;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        groups.entry(key).or_insert((namespace, 0, expected)).1 += 1;
    }
    groups
        .into_iter()
        .filter(|(_, (_, found, expected))| found < expected)
        .map(|(key, (namespace, found, expected))| (key, namespace, found, expected))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::assignment::PodSetAssignment;

    fn group() -> Workload {
        let yaml = (0..3)
            .map(|i| {
                let (image, gpus) = if i == 0 { ("driver:1", 0) } else { ("worker:1", 1) };
                format!(
                    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ray-{i}\n  namespace: ml\n  labels: {{kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/pod-group-name: ray}}\n  annotations: {{kueue.x-k8s.io/pod-group-total-count: \"3\"}}\nspec:\n  nodeName: somewhere\n  schedulingGates: [{{name: kueue.x-k8s.io/admission}}, {{name: example.com/other}}]\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: {image}\n    resources: {{limits: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
                )
            })
            .collect::<Vec<_>>()
            .join("---\n");
        imported(&yaml)
    }

    /// The pods of admission (id, epoch) of `workload` on cluster east.
    fn pods_of(workload: &Workload, id: u64, epoch: u64) -> (Vec<Pod>, Vec<String>) {
        let pods = pod_manifests(
            id,
            epoch,
            "east",
            workload,
            &assignment(workload),
            &FlavorMapping::default(),
        )
        .expect("pods");
        let names = pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (pods, names)
    }

    /// The workload `fleetq apply` makes of `yaml`'s first object.
    fn imported(yaml: &str) -> Workload {
        let docs = fleetq_model::kueue::import_manifests(yaml).expect("imports");
        match docs.into_iter().next().map(|d| d.object) {
            Some(fleetq_model::config::Object::Workload(w)) => w,
            other => panic!("{other:?}"),
        }
    }

    fn assignment(workload: &Workload) -> Assignment {
        let pod_sets = workload
            .spec
            .pod_sets
            .iter()
            .map(|p| {
                serde_json::from_value::<PodSetAssignment>(json!({
                    "name": p.name,
                    "count": p.count,
                    "flavors": {"nvidia.com/gpu": "h100"},
                }))
                .expect("assignment")
            })
            .collect();
        Assignment {
            cluster: "east".into(),
            pod_sets,
            usage: Default::default(),
        }
    }

    #[test]
    fn a_pod_group_becomes_its_pods_labelled_ungated_and_unbound() {
        let (pods, names) = pods_of(&group(), 7, 2);
        assert_eq!(names, ["ray-0-7-2", "ray-1-7-2", "ray-2-7-2"]);
        for pod in &pods {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels.get(LABEL_POD_COUNT).map(String::as_str), Some("3"));
            assert_eq!(
                labels
                    .get(crate::kubernetes::LABEL_WORKLOAD_ID)
                    .map(String::as_str),
                Some("7")
            );
            assert!(!labels.contains_key("kueue.x-k8s.io/queue-name"));
            assert!(!labels.contains_key("kueue.x-k8s.io/pod-group-name"));
            let spec = pod.spec.as_ref().expect("spec");
            assert_eq!(spec.node_name, None);
            let gates: Vec<String> = spec
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect();
            assert_eq!(gates, ["example.com/other"]);
        }
        assert_eq!(expected_pods(&pods[0]), Some(3));
    }

    #[test]
    fn pods_made_with_generate_name_are_named_by_their_place() {
        let yaml = (0..2)
            .map(|_| "apiVersion: v1\nkind: Pod\nmetadata:\n  generateName: sample-pod-\n  labels: {kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/pod-group-name: g}\n  annotations: {kueue.x-k8s.io/pod-group-total-count: \"2\"}\nspec:\n  containers: [{name: c, image: busybox}]\n".to_string())
            .collect::<Vec<_>>()
            .join("---\n");
        let (_, names) = pods_of(&imported(&yaml), 3, 1);
        assert_eq!(names, ["sample-pod-0-3-1", "sample-pod-1-3-1"]);
    }

    #[test]
    fn a_group_left_half_created_is_found_at_start() {
        let (pods, _) = pods_of(&group(), 7, 2);
        assert!(incomplete_groups(&pods).is_empty());
        let found = incomplete_groups(&pods[..2]);
        assert_eq!(found, [((7, 2), "ml".to_string(), 2, 3)]);
    }

    #[test]
    fn a_group_runs_once_every_pod_runs_and_fails_with_its_first_failed_pod() {
        let state = |phase: &str| PodState {
            phase: phase.into(),
            why: String::new(),
        };
        let mut pods: BTreeMap<String, PodState> = [
            ("a".to_string(), state("Running")),
            ("b".to_string(), state("Pending")),
        ]
        .into();
        assert_eq!(group_phase(&pods, 2), None);
        pods.insert("b".into(), state("Running"));
        assert_eq!(group_phase(&pods, 3), None, "one pod not seen yet");
        assert_eq!(group_phase(&pods, 2).map(|p| p.0), Some(Event::Running));
        pods.insert("a".into(), state("Succeeded"));
        assert_eq!(group_phase(&pods, 2).map(|p| p.0), Some(Event::Running));
        pods.insert("b".into(), state("Succeeded"));
        assert_eq!(group_phase(&pods, 2).map(|p| p.0), Some(Event::Succeeded));
        pods.insert(
            "b".into(),
            PodState {
                phase: "Failed".into(),
                why: "OOMKilled".into(),
            },
        );
        assert_eq!(
            group_phase(&pods, 2),
            Some((Event::Failed, "pod b failed: OOMKilled".into()))
        );
    }

    /// The user's pod as the front door submits it: with the adoption
    /// marks, gated, asking for a node selector of its own.
    fn adopted_solo() -> Workload {
        imported(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: solo\n  namespace: ml\n  labels: {kueue.x-k8s.io/queue-name: q}\n  annotations: {fleetq.dev/adopt-cluster: east, fleetq.dev/adopt-uid: u-1}\nspec:\n  schedulingGates: [{name: kueue.x-k8s.io/admission}]\n  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: \"2\"}}}]\n",
        )
    }

    fn placed(workload: &Workload, nodes: &[(&str, u32)]) -> Assignment {
        let mut a = assignment(workload);
        a.pod_sets[0].nodes = nodes
            .iter()
            .map(|(n, c)| {
                serde_json::from_value(json!({"node": n, "count": c})).expect("node pods")
            })
            .collect();
        a
    }

    /// A pod the front door queued here is adopted, not made again: one
    /// patch, preconditioned on its uid, labels it, removes only Kueue's
    /// gate, adds the product to its node selector and pins it to its
    /// node by name; a selector asking for another product is refused.
    #[test]
    fn a_gated_pod_is_adopted_by_a_patch_kubernetes_allows() {
        let w = adopted_solo();
        let members = adopted_pods(&w, "east").expect("adopted here");
        assert_eq!(
            members,
            [AdoptedPod {
                name: "solo".into(),
                uid: "u-1".into(),
                pod_set: w.spec.pod_sets[0].name.clone()
            }]
        );
        assert_eq!(adopted_pods(&w, "west"), None, "a copy elsewhere");
        let a = placed(&w, &[("gpu-a", 1)]);
        assert_eq!(nodes_for(&members, &a), [Some("gpu-a".to_string())]);
        let mapping = FlavorMapping {
            products: [("H100".to_string(), "h100".to_string())].into(),
        };
        let current = json!({
            "metadata": {"name": "solo", "uid": "u-1", "resourceVersion": "7"},
            "spec": {
                "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": "x/other"}],
                "nodeSelector": {"zone": "a"},
            },
        });
        let patch = pod_adoption_patch(
            7,
            2,
            "east",
            &w,
            1,
            &a.pod_sets[0],
            Some("gpu-a"),
            &mapping,
            &current,
        )
        .expect("a patch");
        assert_eq!(patch["metadata"]["uid"], "u-1");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["metadata"]["labels"][LABEL_POD_COUNT], "1");
        assert_eq!(patch["metadata"]["labels"][LABEL_ADOPTED], "true");
        assert_eq!(
            patch["spec"]["schedulingGates"],
            json!([{"name": "x/other"}])
        );
        assert_eq!(
            patch["spec"]["nodeSelector"],
            json!({PRODUCT_LABEL: "H100"})
        );
        assert_eq!(
            patch["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}])
        );
        assert!(
            patch["spec"].get("containers").is_none(),
            "nothing else in the spec"
        );
        let mut theirs = current.clone();
        theirs["spec"]["nodeSelector"][PRODUCT_LABEL] = json!("A100");
        let e = pod_adoption_patch(7, 2, "east", &w, 1, &a.pod_sets[0], None, &mapping, &theirs)
            .expect_err("another product");
        assert!(e.contains("spec.nodeSelector") && e.contains("A100"), "{e}");
    }

    /// A group's pods take their pod set's nodes, as many on each as the
    /// ledger charged there.
    #[test]
    fn a_groups_pods_share_out_their_pod_sets_nodes() {
        let pods: Vec<AdoptedPod> = (0..3)
            .map(|i| AdoptedPod {
                name: format!("p{i}"),
                uid: format!("u{i}"),
                pod_set: "main".into(),
            })
            .collect();
        let mut w = adopted_solo();
        w.spec.pod_sets[0].name = "main".into();
        w.spec.pod_sets[0].count = 3;
        let a = placed(&w, &[("n1", 2), ("n2", 1)]);
        assert_eq!(
            nodes_for(&pods, &a),
            [
                Some("n1".to_string()),
                Some("n1".to_string()),
                Some("n2".to_string())
            ]
        );
        assert_eq!(nodes_for(&pods, &assignment(&w)), [None, None, None]);
    }
}
