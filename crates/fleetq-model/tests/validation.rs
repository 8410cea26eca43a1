//! Kueue's validation rules, one row per rule: each row is a small manifest
//! set with exactly one mistake, and the exact errors it must produce
//! (object, field path, and a piece of the message). A valid base set is
//! checked clean first, so every error below is caused by its row.

use fleetq_model::cluster_queue::{FlavorQuotas, ResourceGroup, ResourceQuota};
use fleetq_model::config::{
    Object, MAX_FLAVORS_PER_GROUP, MAX_FLAVOR_RESOURCES_PER_GROUP, MAX_POD_SETS,
    MAX_RESOURCES_PER_FLAVOR, MAX_RESOURCE_GROUPS, MAX_TOTAL_COVERED_RESOURCES, MAX_TOTAL_FLAVORS,
};
use fleetq_model::kueue::import_manifests;
use fleetq_model::{ClusterQueue, Config, FieldError, PodSet, Quantity, ResourceFlavor, Workload};

/// Flavors, a cohort tree, two queues in it, a LocalQueue and a priority
/// class: all valid.
const BASE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {gpu.example.com/model: h100}
  nodeTaints: [{key: nvidia.com/gpu, value: "present", effect: NoSchedule}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: root}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 2, lendingLimit: 6, borrowingLimit: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: org
  namespaceSelector:
    matchLabels: {team: a}
    matchExpressions: [{key: tier, operator: In, values: [prod, dev]}]
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 8, lendingLimit: 4}
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 4}
  preemption:
    reclaimWithinCohort: LowerPriority
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  placement:
    clusters: [us-east, eu-west]
    clusterSelector: {region: us}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: org
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 16}
      - {name: nvidia.com/gpu, nominalQuota: 0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: ml}
spec:
  clusterQueue: team-a
  gpuBudget: {gpuSecondsPerHour: 3600, burstGpuSeconds: 7200}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"#;

fn config_with(extra: &str) -> Config {
    let yaml = format!("{BASE}---\n{extra}");
    let docs = import_manifests(&yaml).unwrap_or_else(|errors| {
        panic!(
            "{}",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let mut config = Config::default();
    for doc in docs {
        config.upsert(doc.object).expect("configuration only");
    }
    config
}

/// Expected errors: (object, path, part of the message).
type Expected = Vec<(&'static str, &'static str, &'static str)>;

/// Asserts `errors` are exactly `expected`, as (object, path, message part).
fn assert_errors(case: &str, errors: &[FieldError], expected: &[(&str, &str, &str)]) {
    let shown = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(errors.len(), expected.len(), "{case}: got\n{shown}");
    for (object, path, message) in expected {
        assert!(
            errors
                .iter()
                .any(|e| e.object == *object && e.path == *path && e.message.contains(message)),
            "{case}: no error {object}: {path}: ...{message}... in\n{shown}"
        );
    }
}

#[test]
fn base_set_is_valid() {
    assert_errors("base", &config_with("").validate(), &[]);
}

const CQ_HEAD: &str =
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec:\n";

fn cq(spec: &str) -> String {
    format!("{CQ_HEAD}{spec}")
}

fn one_gpu_group(cell: &str) -> String {
    format!("  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: h100\n      resources: [{{name: nvidia.com/gpu, nominalQuota: 8{cell}}}]\n")
}

#[test]
fn config_rules() {
    struct Row {
        rule: &'static str,
        extra: String,
        expect: Expected,
    }
    let q = "ClusterQueue/q";
    let rows = vec![
        Row {
            rule: "lendingLimit <= nominalQuota for a ClusterQueue",
            extra: cq(&format!("  cohortName: org\n{}", one_gpu_group(", lendingLimit: 10"))),
            expect: vec![(q, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "10 exceeds nominalQuota 8")],
        },
        Row {
            rule: "lendingLimit needs a cohort",
            extra: cq(&one_gpu_group(", lendingLimit: 2")),
            expect: vec![(q, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "requires spec.cohortName")],
        },
        Row {
            rule: "borrowingLimit needs a cohort",
            extra: cq(&one_gpu_group(", borrowingLimit: 2")),
            expect: vec![(q, "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "requires spec.cohortName")],
        },
        Row {
            rule: "a root cohort cannot lend or borrow",
            extra: format!(
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: lonely}}\nspec:\n{}",
                one_gpu_group(", lendingLimit: 2, borrowingLimit: 1")
            ),
            expect: vec![
                ("Cohort/lonely", "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "requires spec.parentName"),
                ("Cohort/lonely", "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit", "requires spec.parentName"),
            ],
        },
        Row {
            rule: "a cohort's parent is a valid name (one without a Cohort object exists implicitly, as in Kueue)",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec: {parentName: No_Where}\n".into(),
            expect: vec![("Cohort/c", "spec.parentName", "is not a valid name")],
        },
        Row {
            rule: "a cohort is not its own parent",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec: {parentName: c}\n".into(),
            expect: vec![("Cohort/c", "spec.parentName", "its own parent")],
        },
        Row {
            rule: "the cohort tree has no cycles",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: x}\nspec: {parentName: y}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: y}\nspec: {parentName: x}\n".into(),
            expect: vec![
                ("Cohort/x", "spec.parentName", "x -> y -> x"),
                ("Cohort/y", "spec.parentName", "y -> x -> y"),
            ],
        },
        Row {
            rule: "a resource belongs to one group",
            extra: cq("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: h100, resources: [{name: cpu, nominalQuota: 1}]}]\n  - coveredResources: [cpu]\n    flavors: [{name: a100, resources: [{name: cpu, nominalQuota: 1}]}]\n"),
            expect: vec![(q, "spec.resourceGroups[1].coveredResources[0]", "already covered by spec.resourceGroups[0]")],
        },
        Row {
            rule: "a flavor belongs to one group",
            extra: cq("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: h100, resources: [{name: cpu, nominalQuota: 1}]}]\n  - coveredResources: [memory]\n    flavors: [{name: h100, resources: [{name: memory, nominalQuota: 1Gi}]}]\n"),
            expect: vec![(q, "spec.resourceGroups[1].flavors[0].name", "appears more than once")],
        },
        Row {
            rule: "flavors must exist",
            extra: cq("  resourceGroups:\n  - coveredResources: [cpu]\n    flavors: [{name: b200, resources: [{name: cpu, nominalQuota: 1}]}]\n"),
            expect: vec![(q, "spec.resourceGroups[0].flavors[0].name", "ResourceFlavor \"b200\" does not exist")],
        },
        Row {
            rule: "each flavor lists the covered resources in order",
            extra: cq("  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors: [{name: h100, resources: [{name: memory, nominalQuota: 1Gi}, {name: cpu, nominalQuota: 1}]}]\n"),
            expect: vec![
                (q, "spec.resourceGroups[0].flavors[0].resources[0].name", "same order"),
                (q, "spec.resourceGroups[0].flavors[0].resources[1].name", "same order"),
            ],
        },
        Row {
            rule: "groups cover something and have flavors",
            extra: cq("  resourceGroups:\n  - coveredResources: []\n    flavors: []\n"),
            expect: vec![
                (q, "spec.resourceGroups[0].coveredResources", "at least one resource"),
                (q, "spec.resourceGroups[0].flavors", "at least one flavor"),
            ],
        },
        Row {
            rule: "resource names are qualified names",
            extra: cq("  resourceGroups:\n  - coveredResources: [Nvidia.com/GPU]\n    flavors: [{name: h100, resources: [{name: Nvidia.com/GPU, nominalQuota: 1}]}]\n"),
            expect: vec![(q, "spec.resourceGroups[0].coveredResources[0]", "invalid prefix")],
        },
        Row {
            rule: "borrowWithinCohort needs reclaimWithinCohort",
            extra: cq("  preemption:\n    borrowWithinCohort: {policy: LowerPriority}\n"),
            expect: vec![(q, "spec.preemption.borrowWithinCohort.policy", "reclaimWithinCohort")],
        },
        Row {
            rule: "maxPriorityThreshold only with policy LowerPriority",
            extra: cq("  preemption:\n    borrowWithinCohort: {policy: Never, maxPriorityThreshold: 5}\n"),
            expect: vec![(q, "spec.preemption.borrowWithinCohort.maxPriorityThreshold", "LowerPriority")],
        },
        Row {
            rule: "namespaceSelector is a valid label selector",
            extra: cq("  namespaceSelector:\n    matchLabels: {\"bad key\": x}\n    matchExpressions:\n    - {key: tier, operator: Equals, values: [a]}\n    - {key: tier, operator: In}\n    - {key: tier, operator: Exists, values: [a]}\n"),
            expect: vec![
                (q, "spec.namespaceSelector.matchLabels[\"bad key\"]", "not a valid qualified name"),
                (q, "spec.namespaceSelector.matchExpressions[0].operator", "\"Equals\" is not one of"),
                (q, "spec.namespaceSelector.matchExpressions[1].values", "must be non-empty"),
                (q, "spec.namespaceSelector.matchExpressions[2].values", "must be empty"),
            ],
        },
        Row {
            rule: "placement names each cluster once and uses valid labels",
            extra: cq("  placement:\n    clusters: [us-east, us-east, US]\n    clusterSelector: {region: \"-us\"}\n"),
            expect: vec![
                (q, "spec.placement.clusters[1]", "listed twice"),
                (q, "spec.placement.clusters[2]", "not a valid name"),
                (q, "spec.placement.clusterSelector.region", "label value"),
            ],
        },
        Row {
            rule: "names are RFC 1123 subdomains",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: Team_A}\nspec: {cohortName: Org}\n".into(),
            expect: vec![
                ("ClusterQueue/Team_A", "metadata.name", "not a valid name"),
                ("ClusterQueue/Team_A", "spec.cohortName", "not a valid name"),
            ],
        },
        Row {
            rule: "a LocalQueue points at an existing ClusterQueue",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: nowhere}\n".into(),
            expect: vec![("LocalQueue/default/lq", "spec.clusterQueue", "ClusterQueue \"nowhere\" does not exist")],
        },
        Row {
            rule: "a GPU budget can admit something",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {clusterQueue: team-a, gpuBudget: {gpuSecondsPerHour: 10, burstGpuSeconds: 0}}\n".into(),
            expect: vec![("LocalQueue/default/lq", "spec.gpuBudget.burstGpuSeconds", "must be > 0")],
        },
        Row {
            rule: "flavor node labels are valid labels",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec: {nodeLabels: {\"a/b/c\": x, ok: \"not ok\"}}\n".into(),
            expect: vec![
                ("ResourceFlavor/f", "spec.nodeLabels[\"a/b/c\"]", "label key"),
                ("ResourceFlavor/f", "spec.nodeLabels.ok", "label value"),
            ],
        },
        Row {
            rule: "at most 8 node labels",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec: {nodeLabels: {a: x, b: x, c: x, d: x, e: x, f: x, g: x, h: x, i: x}}\n".into(),
            expect: vec![("ResourceFlavor/f", "spec.nodeLabels", "at most 8")],
        },
        Row {
            rule: "topologyName needs node labels",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec: {topologyName: default}\n".into(),
            expect: vec![
                ("ResourceFlavor/f", "spec.topologyName", "at least one entry in spec.nodeLabels"),
                ("ResourceFlavor/f", "spec.topologyName", "Topology \"default\" does not exist"),
            ],
        },
        Row {
            rule: "taints have a key and a known effect, once per key and effect",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec:\n  nodeTaints:\n  - {key: spot, effect: NoSchedule}\n  - {key: spot, effect: NoSchedule}\n  - {key: spot, effect: Sometimes}\n  - {value: x, effect: NoExecute}\n  - {key: spot, effect: NoExecute, colour: red}\n".into(),
            expect: vec![
                ("ResourceFlavor/f", "spec.nodeTaints[1]", "duplicate taint spot:NoSchedule"),
                ("ResourceFlavor/f", "spec.nodeTaints[2].effect", "\"Sometimes\" is not one of"),
                ("ResourceFlavor/f", "spec.nodeTaints[3].key", "is required"),
                ("ResourceFlavor/f", "spec.nodeTaints[4].colour", "unknown field"),
            ],
        },
        Row {
            rule: "tolerations follow Kueue's CEL rules",
            extra: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\nspec:\n  tolerations:\n  - {operator: Equal, value: x}\n  - {key: spot, operator: Exists, value: x}\n  - {key: spot, tolerationSeconds: 30, effect: NoSchedule}\n  - {key: spot, operator: Maybe}\n".into(),
            expect: vec![
                ("ResourceFlavor/f", "spec.tolerations[0].operator", "must be Exists when key is empty"),
                ("ResourceFlavor/f", "spec.tolerations[1].value", "must be empty when operator is Exists"),
                ("ResourceFlavor/f", "spec.tolerations[2].effect", "must be NoExecute"),
                ("ResourceFlavor/f", "spec.tolerations[3].operator", "\"Maybe\" is not one of"),
            ],
        },
    ];
    for row in rows {
        let errors = config_with(&row.extra).validate();
        assert_errors(row.rule, &errors, &row.expect);
    }
}

/// Kueue's cohorts lend their whole subtree, so unlike a ClusterQueue a
/// cohort's lendingLimit may exceed its own nominalQuota (the base set's
/// `org` lends 6 of its own 2).
#[test]
fn cohort_lending_limit_may_exceed_its_own_nominal_quota() {
    let config = config_with("");
    let cell = &config.cohorts["org"].spec.resource_groups[0].flavors[0].resources[0];
    assert!(cell.lending_limit > Some(cell.nominal_quota));
    assert!(config.validate().is_empty());
}

// ---------------------------------------------------------------------------
// Size limits, built directly: the manifests would be thousands of lines.

fn flavors(config: &mut Config, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| {
            let name = format!("f{i}");
            config
                .upsert(Object::ResourceFlavor(ResourceFlavor {
                    name: name.clone(),
                    spec: Default::default(),
                }))
                .unwrap();
            name
        })
        .collect()
}

fn group(resources: &[String], flavors: &[String]) -> ResourceGroup {
    ResourceGroup {
        covered_resources: resources.to_vec(),
        flavors: flavors
            .iter()
            .map(|f| FlavorQuotas {
                name: f.clone(),
                resources: resources
                    .iter()
                    .map(|r| ResourceQuota {
                        name: r.clone(),
                        nominal_quota: Quantity::units(1),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn resources(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| format!("example.com/{prefix}{i}"))
        .collect()
}

fn validate_queue(config: &mut Config, groups: Vec<ResourceGroup>) -> Vec<FieldError> {
    let mut queue = ClusterQueue {
        name: "big".into(),
        spec: Default::default(),
    };
    queue.spec.resource_groups = groups;
    config.upsert(Object::ClusterQueue(queue)).unwrap();
    config.validate()
}

#[test]
fn size_limits() {
    let big = "ClusterQueue/big";

    let mut config = Config::default();
    let f = flavors(&mut config, MAX_RESOURCE_GROUPS + 1);
    let groups = (0..=MAX_RESOURCE_GROUPS)
        .map(|g| group(&resources(&format!("g{g}-"), 1), &f[g..=g]))
        .collect();
    assert_errors(
        "at most 16 resource groups",
        &validate_queue(&mut config, groups),
        &[(
            big,
            "spec.resourceGroups",
            "has 17 resource groups; Kueue allows at most 16",
        )],
    );

    let mut config = Config::default();
    let f = flavors(&mut config, MAX_FLAVORS_PER_GROUP + 1);
    assert_errors(
        "at most 64 flavors in a group",
        &validate_queue(&mut config, vec![group(&resources("r", 1), &f)]),
        &[(big, "spec.resourceGroups[0].flavors", "has 65 flavors")],
    );

    let mut config = Config::default();
    let f = flavors(&mut config, 1);
    let mut wide = group(&resources("r", MAX_RESOURCES_PER_FLAVOR + 1), &f);
    assert_errors(
        "at most 64 resources in a group",
        &validate_queue(&mut config, vec![wide.clone()]),
        &[
            (
                big,
                "spec.resourceGroups[0].coveredResources",
                "has 65 resources",
            ),
            (
                big,
                "spec.resourceGroups[0].flavors[0].resources",
                "has 65 resources",
            ),
        ],
    );
    wide.covered_resources.truncate(MAX_RESOURCES_PER_FLAVOR);
    let errors = validate_queue(&mut config, vec![wide]);
    assert!(errors
        .iter()
        .any(|e| e.path == "spec.resourceGroups[0].flavors[0].resources"
            && e.message.contains("same order")));

    // 9 flavors x 60 resources = 540 quotas in one group.
    let mut config = Config::default();
    let f = flavors(&mut config, 9);
    assert_errors(
        "at most 512 flavor-resource quotas in a group",
        &validate_queue(&mut config, vec![group(&resources("r", 60), &f)]),
        &[(
            big,
            "spec.resourceGroups[0]",
            &format!("at most {MAX_FLAVOR_RESOURCES_PER_GROUP}"),
        )],
    );

    // 16 groups x 17 flavors = 272 flavors.
    let mut config = Config::default();
    let f = flavors(&mut config, 16 * 17);
    let groups = (0..16)
        .map(|g| group(&resources(&format!("g{g}-"), 1), &f[g * 17..(g + 1) * 17]))
        .collect();
    assert_errors(
        "at most 256 flavors in all",
        &validate_queue(&mut config, groups),
        &[(
            big,
            "spec.resourceGroups",
            &format!("Kueue allows at most {MAX_TOTAL_FLAVORS}"),
        )],
    );

    // 5 groups x 60 resources = 300 covered resources.
    let mut config = Config::default();
    let f = flavors(&mut config, 5);
    let groups = (0..5)
        .map(|g| group(&resources(&format!("g{g}-"), 60), &f[g..=g]))
        .collect();
    assert_errors(
        "at most 256 covered resources in all",
        &validate_queue(&mut config, groups),
        &[(
            big,
            "spec.resourceGroups",
            &format!("Kueue allows at most {MAX_TOTAL_COVERED_RESOURCES}"),
        )],
    );
}

// ---------------------------------------------------------------------------
// Workloads against the configuration

fn workload(edit: impl FnOnce(&mut Workload)) -> Workload {
    let mut w = Workload {
        namespace: "ml".into(),
        name: "train".into(),
        labels: Default::default(),
        spec: Default::default(),
    };
    w.spec.queue_name = "research".into();
    w.spec.priority_class_name = Some("high".into());
    w.spec.pod_sets = vec![PodSet {
        name: "main".into(),
        count: 4,
        min_count: Some(2),
        requests: [
            ("cpu".to_string(), Quantity::units(8)),
            ("nvidia.com/gpu".to_string(), Quantity::units(1)),
        ]
        .into(),
        topology_request: None,
    }];
    edit(&mut w);
    w
}

fn pod_set(name: &str) -> PodSet {
    PodSet {
        name: name.into(),
        count: 1,
        min_count: None,
        requests: Default::default(),
        topology_request: None,
    }
}

#[test]
fn workload_rules() {
    let config = config_with("");
    let binding = config
        .bind_workload(&workload(|_| {}))
        .expect("valid workload");
    assert_eq!(
        (
            binding.local_queue.as_str(),
            binding.cluster_queue.as_str(),
            binding.priority
        ),
        ("ml/research", "team-a", 1000)
    );

    let w = "Workload/ml/train";
    type Edit = Box<dyn FnOnce(&mut Workload)>;
    let rows: Vec<(&str, Edit, Expected)> = vec![
        (
            "the LocalQueue exists",
            Box::new(|w| w.spec.queue_name = "nope".into()),
            vec![(
                w,
                "spec.queueName",
                "LocalQueue \"nope\" does not exist in namespace \"ml\"",
            )],
        ),
        (
            "the priority class exists",
            Box::new(|w| w.spec.priority_class_name = Some("urgent".into())),
            vec![(
                w,
                "spec.priorityClassName",
                "WorkloadPriorityClass \"urgent\" does not exist",
            )],
        ),
        (
            "at least one pod set",
            Box::new(|w| w.spec.pod_sets.clear()),
            vec![(w, "spec.podSets", "at least one pod set")],
        ),
        (
            "pod set names are unique",
            Box::new(|w| w.spec.pod_sets.push(pod_set("main"))),
            vec![(w, "spec.podSets[1].name", "appears twice")],
        ),
        (
            "pod set names are DNS labels",
            Box::new(|w| w.spec.pod_sets[0].name = "Main.Set".into()),
            vec![(w, "spec.podSets[0].name", "lowercase")],
        ),
        (
            "count is at least 1",
            Box::new(|w| {
                w.spec.pod_sets[0].count = 0;
                w.spec.pod_sets[0].min_count = None;
            }),
            vec![(w, "spec.podSets[0].count", "at least 1")],
        ),
        (
            "minCount is between 1 and count",
            Box::new(|w| w.spec.pod_sets[0].min_count = Some(5)),
            vec![(
                w,
                "spec.podSets[0].minCount",
                "between 1 and count (4), got 5",
            )],
        ),
        (
            "one pod set uses partial admission",
            Box::new(|w| {
                w.spec.pod_sets.push(PodSet {
                    min_count: Some(1),
                    ..pod_set("workers")
                })
            }),
            vec![(
                w,
                "spec.podSets",
                "at most one pod set can use partial admission",
            )],
        ),
        (
            "at most 18 pod sets",
            Box::new(|w| {
                w.spec
                    .pod_sets
                    .extend((1..=MAX_POD_SETS).map(|i| pod_set(&format!("p{i}"))))
            }),
            vec![(w, "spec.podSets", "has 19 pod sets")],
        ),
        (
            "pods is reserved",
            Box::new(|w| {
                w.spec.pod_sets[0]
                    .requests
                    .insert("pods".into(), Quantity::units(1));
            }),
            vec![(w, "spec.podSets[0].requests.pods", "reserved")],
        ),
        (
            "resource names are qualified names",
            Box::new(|w| {
                w.spec.pod_sets[0]
                    .requests
                    .insert("has space".into(), Quantity::ZERO);
            }),
            vec![(
                w,
                "spec.podSets[0].requests[\"has space\"]",
                "not a valid qualified name",
            )],
        ),
        (
            "requested resources are covered",
            Box::new(|w| {
                w.spec.pod_sets[0]
                    .requests
                    .insert("memory".into(), Quantity::units(1));
            }),
            vec![(
                w,
                "spec.podSets[0].requests.memory",
                "has no flavor that covers \"memory\"",
            )],
        ),
        (
            "a maximum execution time is positive",
            Box::new(|w| w.spec.maximum_execution_time = Some(std::time::Duration::ZERO)),
            vec![(w, "spec.maximumExecutionTime", "greater than zero")],
        ),
        (
            "names are valid",
            Box::new(|w| w.name = "Train".into()),
            vec![("Workload/ml/Train", "metadata.name", "not a valid name")],
        ),
    ];
    for (rule, edit, expected) in rows {
        let errors = config.bind_workload(&workload(edit)).expect_err(rule);
        assert_errors(rule, &errors, &expected);
    }
}

// ---------------------------------------------------------------------------
// What the importer refuses and apply() does not

/// Admission checks are refused on import ("not supported by fleetq"), but
/// a queue stored before that still meets Kueue's rules for them.
#[test]
fn admission_check_rules_still_hold_for_stored_queues() {
    let mut config = config_with("");
    let queue = config.cluster_queues.get_mut("team-a").expect("team-a");
    queue.spec.admission_checks_strategy = Some(serde_json::json!({
        "admissionChecks": [{"name": "prov", "onFlavors": ["b200"]}]
    }));
    queue.spec.admission_checks = vec!["prov".into()];
    assert_errors(
        "stored admission checks",
        &config.validate(),
        &[
            (
                "ClusterQueue/team-a",
                "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
                "not one of this ClusterQueue's flavors",
            ),
            (
                "ClusterQueue/team-a",
                "spec.admissionChecks",
                "cannot be used together",
            ),
        ],
    );
}

/// Fractions of devices are refused where manifests and submissions enter
/// (the importer, `whole_device_errors` at the API, `fleetq submit`), not
/// by `Config::validate` or `bind_workload`, which apply() runs: what a
/// ledger accepted before the check replays the same.
#[test]
fn fractional_devices_do_not_change_what_apply_decides() {
    let mut config = config_with("");
    let queue = config.cluster_queues.get_mut("team-a").expect("team-a");
    queue.spec.resource_groups[0].flavors[0].resources[1].nominal_quota = "7.5".parse().unwrap();
    assert_errors("stored fractional quota", &config.validate(), &[]);
    let half = workload(|w| {
        w.spec.pod_sets[0]
            .requests
            .insert("nvidia.com/gpu".into(), "1.5".parse().unwrap());
    });
    assert!(config.bind_workload(&half).is_ok());
    assert_eq!(
        fleetq_model::config::whole_device_errors(&half)
            .iter()
            .map(|e| e.path.as_str())
            .collect::<Vec<_>>(),
        [r#"spec.podSets[0].requests["nvidia.com/gpu"]"#]
    );
}
