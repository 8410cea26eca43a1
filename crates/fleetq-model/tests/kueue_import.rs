//! Kueue manifests import as the YAML says: the examples from Kueue's own
//! documentation (tests/testdata/kueue-docs, each naming the page it
//! reproduces) import unchanged and validate clean, and bad manifests get
//! errors that name the document, the object and the field path.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fleetq_model::cluster_queue::{
    AdmissionMode, BorrowWithinCohortPolicy, FungibilityPolicy, QueueingStrategy,
    ReclaimWithinCohort, StopPolicy, WithinClusterQueue,
};
use fleetq_model::config::Object;
use fleetq_model::fair_weight::FairWeight;
use fleetq_model::kueue::{import_manifests, ImportedDocument};
use fleetq_model::topology::TopologyPlacement;
use fleetq_model::{
    ClusterQueue, Cohort, Config, FieldError, LocalQueue, PriorityClassSource, Quantity,
    ResourceFlavor, Workload,
};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/kueue-docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn import_ok(yaml: &str) -> Vec<ImportedDocument> {
    import_manifests(yaml).unwrap_or_else(|errors| panic!("import failed:\n{}", lines(&errors)))
}

fn import_err(yaml: &str) -> Vec<FieldError> {
    match import_manifests(yaml) {
        Ok(docs) => panic!("expected errors, imported {} documents", docs.len()),
        Err(errors) => errors,
    }
}

fn lines(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The documents of a fixture without those of the given kinds (for doc
/// examples that also hold Kueue kinds fleetq does not import).
fn without_kinds(yaml: &str, kinds: &[&str]) -> String {
    yaml.split("\n---\n")
        .filter(|doc| {
            !kinds
                .iter()
                .any(|kind| doc.lines().any(|l| l.trim() == format!("kind: {kind}")))
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Config and workloads of several fixtures together.
struct Set {
    config: Config,
    workloads: Vec<Workload>,
}

fn set_of(yamls: &[String]) -> Set {
    let mut config = Config::default();
    let mut workloads = Vec::new();
    for yaml in yamls {
        for doc in import_ok(yaml) {
            if let Err(workload) = config.upsert(doc.object) {
                workloads.push(*workload);
            }
        }
    }
    Set { config, workloads }
}

fn fixtures(names: &[&str]) -> Set {
    set_of(&names.iter().map(|n| fixture(n)).collect::<Vec<_>>())
}

fn assert_valid(set: &Set) {
    let errors = set.config.validate();
    assert!(errors.is_empty(), "validation errors:\n{}", lines(&errors));
}

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}

fn cq<'a>(set: &'a Set, name: &str) -> &'a ClusterQueue {
    &set.config.cluster_queues[name]
}

/// nominal, borrowing and lending limit of one quota cell.
fn quota(
    cq: &ClusterQueue,
    flavor: &str,
    resource: &str,
) -> (Quantity, Option<Quantity>, Option<Quantity>) {
    cq.spec
        .resource_groups
        .iter()
        .flat_map(|g| &g.flavors)
        .filter(|f| f.name == flavor)
        .flat_map(|f| &f.resources)
        .find(|r| r.name == resource)
        .map(|r| (r.nominal_quota, r.borrowing_limit, r.lending_limit))
        .unwrap_or_else(|| panic!("{} has no {resource} in {flavor}", cq.name))
}

// ---------------------------------------------------------------------------
// Kueue's documentation examples

const IMPORTABLE_EXAMPLES: &[&str] = &[
    "tas-sample-gpu-queues.yaml",
    "admission-fair-sharing-setup.yaml",
    "borrowing-cohort.yaml",
    "cluster-queue-borrowing-limit.yaml",
    "cluster-queue-flavor-fungibility-v1beta1.yaml",
    "cluster-queue-lending-limit.yaml",
    "cluster-queue-pods-quota.yaml",
    "cluster-queue-policies.yaml",
    "cluster-queue-resource-groups.yaml",
    "cohort-hierarchical-v1alpha1.yaml",
    "cohort-hierarchical.yaml",
    "cohort-quotas-v1alpha1.yaml",
    "cohort-quotas.yaml",
    "dedicated-and-fallback-flavors.yaml",
    "kueue-pod-group.yaml",
    "kueue-pod.yaml",
    "provisioning-sample-job.yaml",
    "quick-start-job.yaml",
    "quick-start-setup.yaml",
    "ray-job-sample.yaml",
    "resource-flavor-empty.yaml",
    "resource-flavor-taints.yaml",
    "resource-flavor-tolerations.yaml",
    "sample-job-partial-admission.yaml",
    "sample-job.yaml",
    "sample-jobset-tas-combined.yaml",
    "sample-jobset-tas-required.yaml",
    "sample-pytorchjob.yaml",
    "shared-quota-sample-job.yaml",
    "shared-quota-setup.yaml",
    "single-clusterqueue-setup-v1beta1.yaml",
    "single-clusterqueue-setup.yaml",
    "workload-priority.yaml",
    "workload.yaml",
];

#[test]
fn every_doc_example_imports_unchanged() {
    for name in IMPORTABLE_EXAMPLES {
        let yaml = fixture(name);
        assert!(
            yaml.starts_with("# Reproduces "),
            "{name} must name the Kueue page it reproduces"
        );
        if let Err(errors) = import_manifests(&yaml) {
            panic!("{name}:\n{}", lines(&errors));
        }
    }
}

#[test]
fn every_fixture_is_covered() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/kueue-docs");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        // Admission checks: refused as not supported, tested below.
        let with_foreign_kinds = ["provisioning-setup.yaml", "minimal-cq.yaml"];
        assert!(
            IMPORTABLE_EXAMPLES.contains(&name.as_str())
                || with_foreign_kinds.contains(&name.as_str()),
            "{name} is not checked by any test"
        );
    }
}

#[test]
fn single_clusterqueue_setup_v1beta2_and_v1beta1() {
    for name in [
        "single-clusterqueue-setup.yaml",
        "single-clusterqueue-setup-v1beta1.yaml",
    ] {
        let set = fixtures(&[name]);
        assert_valid(&set);
        assert_eq!(
            set.config.flavors.keys().collect::<Vec<_>>(),
            ["default-flavor"]
        );
        let queue = cq(&set, "cluster-queue");
        assert_eq!(queue.spec.cohort, None);
        // `{}` selects every namespace: stored as no selector, which is
        // what fleetq's shorthand means by it.
        assert_eq!(queue.spec.namespace_selector, None, "{name}");
        assert!(set.config.admits_namespace(queue, "anywhere"), "{name}");
        assert_eq!(
            queue.spec.resource_groups[0].covered_resources,
            ["cpu", "memory"]
        );
        assert_eq!(quota(queue, "default-flavor", "cpu"), (q("9"), None, None));
        assert_eq!(
            quota(queue, "default-flavor", "memory"),
            (q("36Gi"), None, None)
        );
        let lq: &LocalQueue = &set.config.local_queues["default/user-queue"];
        assert_eq!(lq.spec.cluster_queue, "cluster-queue");
    }
}

#[test]
fn sample_job_becomes_a_three_pod_workload() {
    let set = fixtures(&["single-clusterqueue-setup.yaml", "sample-job.yaml"]);
    let [job] = &set.workloads[..] else {
        panic!("one workload expected")
    };
    assert!(
        job.name.starts_with("sample-job-") && job.name.len() == 16,
        "{}",
        job.name
    );
    assert_eq!(job.namespace, "default");
    assert_eq!(job.spec.queue_name, "user-queue");
    assert_eq!(job.spec.priority_class_name, None);
    let pods = &job.spec.pod_sets[0];
    assert_eq!(
        (pods.name.as_str(), pods.count, pods.min_count),
        ("main", 3, None)
    );
    assert_eq!(
        pods.requests,
        BTreeMap::from([("cpu".into(), q("1")), ("memory".into(), q("200Mi"))])
    );
    assert_eq!(job.spec.run.command, ["/bin/sh", "-c", "sleep 60"]);
    assert_eq!(
        job.spec.run.image.as_deref(),
        Some("registry.k8s.io/e2e-test-images/agnhost:2.53")
    );
    let template = job.spec.run.job_template.as_ref().expect("the Job is kept");
    assert_eq!(
        template["spec"]["template"]["spec"]["restartPolicy"],
        "Never"
    );
    let binding = set.config.bind_workload(job).unwrap();
    assert_eq!(
        (
            binding.local_queue.as_str(),
            binding.cluster_queue.as_str(),
            binding.priority
        ),
        ("default/user-queue", "cluster-queue", 0)
    );
}

#[test]
fn the_same_generated_name_every_time() {
    let a = import_ok(&fixture("sample-job.yaml"));
    let b = import_ok(&fixture("sample-job.yaml"));
    assert_eq!(a, b);
    assert!(a[0].source.generated_name);
    assert_eq!(a[0].source.kind, "Job");
}

#[test]
fn partial_admission_job() {
    let set = fixtures(&[
        "single-clusterqueue-setup.yaml",
        "sample-job-partial-admission.yaml",
    ]);
    let job = &set.workloads[0];
    assert_eq!(job.name, "sample-job-partial-admission");
    let pods = &job.spec.pod_sets[0];
    assert_eq!((pods.count, pods.min_count), (20, Some(5)));
    assert_eq!(pods.request("cpu"), q("1"));
    // args without command: the image's entrypoint gets them.
    assert_eq!(
        job.spec.run.command,
        ["entrypoint-tester", "hello", "world"]
    );
    assert!(set.config.bind_workload(job).is_ok());
}

#[test]
fn quick_start() {
    let set = fixtures(&["quick-start-setup.yaml", "quick-start-job.yaml"]);
    assert_valid(&set);
    assert_eq!(
        quota(cq(&set, "cluster-queue"), "default-flavor", "memory").0,
        q("9Gi")
    );
    let job = &set.workloads[0];
    assert_eq!(job.name, "sample-job");
    assert_eq!(job.spec.pod_sets[0].count, 3);
    assert!(set.config.bind_workload(job).is_ok());
}

#[test]
fn shared_quota_credits() {
    let set = fixtures(&["shared-quota-setup.yaml", "shared-quota-sample-job.yaml"]);
    assert_valid(&set);
    let queue = cq(&set, "team-cluster-queue");
    assert_eq!(queue.spec.resource_groups.len(), 2);
    assert_eq!(quota(queue, "on-demand", "cpu").0, q("9"));
    assert_eq!(quota(queue, "spot", "cpu").0, q("9"));
    assert_eq!(quota(queue, "credits", "cpu_credits").0, q("14"));
    let spot: &ResourceFlavor = &set.config.flavors["spot"];
    assert_eq!(spot.spec.node_labels["node-type"], "spot");
    let job = &set.workloads[0];
    assert_eq!(job.spec.pod_sets[0].request("cpu"), q("3"));
    assert_eq!(
        set.config.bind_workload(job).unwrap().cluster_queue,
        "team-cluster-queue"
    );
}

#[test]
fn admission_fair_sharing_setup() {
    let set = fixtures(&["admission-fair-sharing-setup.yaml"]);
    assert_valid(&set);
    let queue = cq(&set, "cluster-queue");
    assert_eq!(queue.spec.queueing_strategy, QueueingStrategy::StrictFIFO);
    assert_eq!(
        queue.spec.admission_scope.map(|s| s.admission_mode),
        Some(AdmissionMode::UsageBasedAdmissionFairSharing)
    );
    assert!(queue.uses_admission_fair_sharing());
    for lq in ["default/lq-a", "default/lq-b"] {
        let weight = set.config.local_queues[lq]
            .spec
            .fair_sharing
            .and_then(|f| f.weight);
        assert_eq!(weight, Some(FairWeight::ONE), "{lq}");
    }
}

#[test]
fn two_teams_borrowing_in_a_cohort() {
    let set = fixtures(&["borrowing-cohort.yaml"]);
    assert_valid(&set);
    let team_a = cq(&set, "team-a-cq");
    let team_b = cq(&set, "team-b-cq");
    assert_eq!(team_a.spec.cohort.as_deref(), Some("team-ab"));
    assert_eq!(team_b.spec.cohort.as_deref(), Some("team-ab"));
    assert_eq!(
        quota(team_a, "default-flavor", "cpu"),
        (q("9"), Some(q("6")), None)
    );
    assert_eq!(
        quota(team_a, "default-flavor", "memory"),
        (q("36Gi"), Some(q("24Gi")), None)
    );
    assert_eq!(
        quota(team_b, "default-flavor", "cpu"),
        (q("12"), None, None)
    );
    assert_eq!(
        quota(team_b, "default-flavor", "memory"),
        (q("48Gi"), None, None)
    );
}

#[test]
fn dedicated_and_fallback_flavors() {
    let set = fixtures(&["dedicated-and-fallback-flavors.yaml"]);
    assert_valid(&set);
    assert_eq!(
        set.config.flavors["x86"].spec.node_labels["cpu-arch"],
        "x86"
    );
    let team_a = cq(&set, "team-a-cq");
    assert_eq!(
        quota(team_a, "arm", "cpu"),
        (q("9"), Some(Quantity::ZERO), None)
    );
    assert_eq!(quota(team_a, "x86", "cpu"), (Quantity::ZERO, None, None));
    assert_eq!(quota(cq(&set, "team-b-cq"), "arm", "cpu").0, q("12"));
    let shared = cq(&set, "shared-cq");
    assert_eq!(quota(shared, "x86", "cpu").0, q("6"));
    assert_eq!(quota(shared, "default-flavor", "memory").0, q("24Gi"));
}

#[test]
fn lending_limit_example() {
    let set = fixtures(&[
        "resource-flavor-empty.yaml",
        "cluster-queue-lending-limit.yaml",
    ]);
    assert_valid(&set);
    assert_eq!(
        quota(cq(&set, "team-b-cq"), "default-flavor", "cpu"),
        (q("12"), None, Some(q("1")))
    );
    assert_eq!(
        quota(cq(&set, "team-a-cq"), "default-flavor", "cpu").0,
        q("9")
    );
}

/// Kueue's own BorrowingLimit doc example covers cpu and memory but lists
/// only cpu: Kueue's CRD rule ("flavors must have the same number of
/// resources as the coveredResources") rejects it, and so does fleetq.
#[test]
fn borrowing_limit_example_is_caught_like_kueue_catches_it() {
    let set = fixtures(&[
        "resource-flavor-empty.yaml",
        "cluster-queue-borrowing-limit.yaml",
    ]);
    assert_eq!(
        quota(cq(&set, "team-a-cq"), "default-flavor", "cpu"),
        (q("9"), Some(q("1")), None)
    );
    let errors = set.config.validate();
    let text = lines(&errors);
    assert_eq!(errors.len(), 2, "{text}");
    for queue in ["team-a-cq", "team-b-cq"] {
        assert!(
            text.contains(&format!(
                "ClusterQueue/{queue}: spec.resourceGroups[0].flavors[0].resources: must list exactly the covered resources"
            )),
            "{text}"
        );
    }
}

#[test]
fn queue_policies() {
    let docs = import_ok(&fixture("cluster-queue-policies.yaml"));
    let queues: Vec<&ClusterQueue> = docs
        .iter()
        .map(|d| match &d.object {
            Object::ClusterQueue(cq) => cq,
            other => panic!("{other:?}"),
        })
        .collect();
    let preemption = queues[0].spec.preemption;
    assert_eq!(preemption.reclaim_within_cohort, ReclaimWithinCohort::Any);
    assert_eq!(
        preemption.borrow_within_cohort.policy,
        BorrowWithinCohortPolicy::LowerPriority
    );
    assert_eq!(
        preemption.borrow_within_cohort.max_priority_threshold,
        Some(100)
    );
    assert_eq!(
        preemption.within_cluster_queue,
        WithinClusterQueue::LowerPriority
    );
    let fungibility = queues[1].spec.flavor_fungibility;
    assert_eq!(
        fungibility.when_can_borrow,
        FungibilityPolicy::TryNextFlavor
    );
    assert_eq!(
        fungibility.when_can_preempt,
        FungibilityPolicy::MayStopSearch
    );
    assert_eq!(queues[2].spec.stop_policy, StopPolicy::Hold);
    for queue in queues {
        let mut config = Config::default();
        config.upsert(Object::ClusterQueue(queue.clone())).unwrap();
        assert!(config.validate().is_empty(), "{:?}", config.validate());
    }
    // v1beta1 spelled "may stop" as Preempt.
    let v1beta1 = fixtures(&["cluster-queue-flavor-fungibility-v1beta1.yaml"]);
    let fungibility = cq(&v1beta1, "team-a-cq").spec.flavor_fungibility;
    assert_eq!(
        fungibility.when_can_borrow,
        FungibilityPolicy::TryNextFlavor
    );
    assert_eq!(
        fungibility.when_can_preempt,
        FungibilityPolicy::MayStopSearch
    );
}

#[test]
fn cohort_with_its_own_quota() {
    for (name, api) in [
        ("cohort-quotas.yaml", "v1beta2"),
        (
            "cohort-quotas-v1alpha1.yaml",
            "v1alpha1 + v1beta1 spec.cohort",
        ),
    ] {
        let set = fixtures(&["resource-flavor-empty.yaml", name]);
        assert_valid(&set);
        let cohort: &Cohort = &set.config.cohorts["hello-cohort"];
        let cell = &cohort.spec.resource_groups[0].flavors[0].resources[0];
        assert_eq!(
            (cell.name.as_str(), cell.nominal_quota),
            ("cpu", q("12")),
            "{api}"
        );
        let queue = cq(&set, "my-cluster-queue");
        assert_eq!(queue.spec.cohort.as_deref(), Some("hello-cohort"), "{api}");
        assert_eq!(quota(queue, "default-flavor", "cpu").0, Quantity::ZERO);
    }
}

#[test]
fn hierarchical_cohorts() {
    for name in [
        "cohort-hierarchical.yaml",
        "cohort-hierarchical-v1alpha1.yaml",
    ] {
        let set = fixtures(&[name]);
        assert_valid(&set);
        let cohorts = &set.config.cohorts;
        assert_eq!(cohorts["root-cohort"].spec.parent, None);
        for (child, weight) in [("important-org", "750m"), ("regular-org", "250m")] {
            assert_eq!(
                cohorts[child].spec.parent.as_deref(),
                Some("root-cohort"),
                "{name}"
            );
            let got = cohorts[child].spec.fair_sharing.and_then(|f| f.weight);
            assert_eq!(got, Some(weight.parse().expect("weight")), "{name} {child}");
        }
    }
}

#[test]
fn workload_priority_class_job_and_workload() {
    let set = set_of(&[
        fixture("single-clusterqueue-setup.yaml"),
        fixture("workload-priority.yaml"),
    ]);
    assert_valid(&set);
    let class = &set.config.priority_classes["sample-priority"];
    assert_eq!(
        (class.value, class.description.as_str()),
        (10000, "Sample priority")
    );
    let [job, workload] = &set.workloads[..] else {
        panic!("a Job and a Workload expected")
    };
    assert_eq!(job.name, "sample-job");
    assert_eq!(
        job.spec.priority_class_name.as_deref(),
        Some("sample-priority")
    );
    assert_eq!(job.spec.pod_sets[0].count, 3);
    assert!(job.spec.pod_sets[0].requests.is_empty());
    assert_eq!(job.spec.run.command, ["pause"]);
    assert_eq!(workload.name, "job-sample-job-7f173");
    assert_eq!(
        workload.spec.priority_class_name.as_deref(),
        Some("sample-priority")
    );
    assert_eq!(workload.spec.queue_name, "user-queue");
    assert_eq!(
        (
            workload.spec.pod_sets[0].name.as_str(),
            workload.spec.pod_sets[0].count
        ),
        ("dummy-job", 3)
    );
    for w in [job, workload] {
        assert_eq!(
            set.config.bind_workload(w).unwrap().priority,
            10000,
            "{}",
            w.name
        );
    }
}

#[test]
fn kueue_workload_example() {
    let docs = import_ok(&fixture("workload.yaml"));
    let Object::Workload(workload) = &docs[0].object else {
        panic!("{:?}", docs[0].object)
    };
    assert_eq!(
        (workload.namespace.as_str(), workload.name.as_str()),
        ("team-a", "sample-job")
    );
    assert_eq!(workload.spec.queue_name, "team-a-queue");
    let pods = &workload.spec.pod_sets[0];
    assert_eq!((pods.name.as_str(), pods.count), ("main", 3));
    assert_eq!(
        pods.requests,
        BTreeMap::from([("cpu".into(), q("1")), ("memory".into(), q("200Mi"))])
    );
    assert_eq!(docs[0].source.name, "Workload/team-a/sample-job");
}

#[test]
fn gpu_job_on_the_provisioning_queue() {
    // AdmissionCheck and ProvisioningRequestConfig are Kueue kinds fleetq
    // does not support, nor the queue's admission checks; they are named
    // in errors, and without them the rest imports.
    let setup = fixture("provisioning-setup.yaml");
    let errors = import_err(&setup);
    let text = lines(&errors);
    assert_eq!(errors.len(), 3, "{text}");
    assert!(text.contains("document 2: ClusterQueue/cluster-queue: spec.admissionChecksStrategy: not supported by fleetq: spec.admissionChecksStrategy (fleetq has no admission checks"), "{text}");
    assert!(text.contains("document 4: AdmissionCheck/sample-prov: kind: not supported by fleetq: AdmissionCheck (fleetq has no admission checks"), "{text}");
    assert!(
        text.contains("document 5: ProvisioningRequestConfig/prov-test-config: kind: not supported by fleetq: ProvisioningRequestConfig ("),
        "{text}"
    );

    let checks = setup
        .find("  admissionChecksStrategy:")
        .expect("the queue has admission checks");
    let end = checks + setup[checks..].find("---").expect("more documents");
    let without_checks = format!("{}{}", &setup[..checks], &setup[end..]);
    let set = set_of(&[
        without_kinds(
            &without_checks,
            &["AdmissionCheck", "ProvisioningRequestConfig"],
        ),
        fixture("provisioning-sample-job.yaml"),
    ]);
    assert_valid(&set);
    assert_eq!(
        quota(
            cq(&set, "cluster-queue"),
            "default-flavor",
            "nvidia.com/gpu"
        )
        .0,
        q("9")
    );
    let job = &set.workloads[0];
    assert_eq!(
        job.spec.pod_sets[0].requests,
        BTreeMap::from([
            ("cpu".into(), q("100m")),
            ("memory".into(), q("100Mi")),
            ("nvidia.com/gpu".into(), q("1")),
        ])
    );
    assert_eq!(job.spec.total_gpus(), 3);
    assert!(set.config.bind_workload(job).is_ok());
}

#[test]
fn topology_aware_gpu_queues() {
    let yaml = fixture("tas-sample-gpu-queues.yaml");
    let set = set_of(&[yaml]);
    assert_valid(&set);
    let topology = &set.config.topologies["default"];
    assert!(topology.labels().count() >= 2, "{topology:?}");
    assert_eq!(topology.labels().last(), Some("kubernetes.io/hostname"));
    let flavor = &set.config.flavors["tas-flavor"];
    assert_eq!(flavor.spec.topology_name.as_deref(), Some("default"));
    assert_eq!(flavor.spec.tolerations[0]["key"], "nvidia.com/gpu");
    assert_eq!(
        quota(
            cq(&set, "tas-cluster-queue"),
            "tas-flavor",
            "nvidia.com/gpu"
        )
        .0,
        q("16")
    );
}

#[test]
fn resource_flavor_examples() {
    let taints = fixtures(&["resource-flavor-taints.yaml"]);
    assert_valid(&taints);
    let spot = &taints.config.flavors["spot"];
    assert_eq!(spot.spec.node_labels["instance-type"], "spot");
    assert_eq!(
        spot.spec.node_taints,
        [serde_json::json!({"effect": "NoSchedule", "key": "spot", "value": "true"})]
    );
    let tolerations = fixtures(&["resource-flavor-tolerations.yaml"]);
    assert_valid(&tolerations);
    assert_eq!(
        tolerations.config.flavors["spot"].spec.tolerations[0]["operator"],
        "Exists"
    );
    assert_valid(&fixtures(&["resource-flavor-empty.yaml"]));
}

#[test]
fn pods_quota_and_multiple_resource_groups() {
    let set = fixtures(&[
        "resource-flavor-empty.yaml",
        "cluster-queue-pods-quota.yaml",
    ]);
    assert_valid(&set);
    assert_eq!(
        quota(cq(&set, "cluster-queue"), "default-flavor", "pods").0,
        q("5")
    );

    let groups = fixtures(&["cluster-queue-resource-groups.yaml"]);
    let queue = cq(&groups, "cluster-queue");
    assert_eq!(quota(queue, "on-demand", "foo.com/gpu").0, q("100"));
    assert_eq!(quota(queue, "pool2", "bar.com/license").0, q("10"));
    // The page does not define its four flavors: that is all that is wrong.
    let errors = groups.config.validate();
    assert_eq!(errors.len(), 4, "{}", lines(&errors));
    assert!(errors.iter().all(|e| e.message.contains("does not exist")));
}

/// Kueue's page on admission checks: fleetq has none, and says so rather
/// than admitting without them.
#[test]
fn minimal_cq_admission_checks_are_not_supported() {
    let errors = import_err(&fixture("minimal-cq.yaml"));
    assert_eq!(errors.len(), 1, "{}", lines(&errors));
    assert_eq!(errors[0].path, "spec.admissionChecksStrategy");
    assert_eq!(
        errors[0].message,
        "not supported by fleetq: spec.admissionChecksStrategy (fleetq has no admission checks: a workload is admitted as soon as its quota is reserved on a cluster)"
    );
}

// ---------------------------------------------------------------------------
// Errors name the document, the object and the field

const QUEUES: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: org
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - name: nvidia.com/gpu
        nominalQuot: 8
"#;

#[test]
fn unknown_field_names_document_object_and_path() {
    let errors = import_err(QUEUES);
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    assert!(
        text.starts_with("document 3: ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuot: unknown field `nominalQuot`"),
        "{text}"
    );
}

#[test]
fn every_bad_document_is_reported() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1
kind: Cohort
metadata: {name: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: -4}
---
kind: LocalQueue
metadata: {name: q}
---
- just
- a list
"#;
    let errors = import_err(yaml);
    let text = lines(&errors);
    assert_eq!(errors.len(), 5, "{text}");
    assert!(text.contains("document 1: AdmissionCheck/default: kind: not supported by fleetq: AdmissionCheck (fleetq has no admission checks"), "{text}");
    assert!(text.contains(r#"document 2: Cohort/org: apiVersion: "kueue.x-k8s.io/v1" is not a supported apiVersion for Cohort; use kueue.x-k8s.io/v1alpha1 or kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"#), "{text}");
    assert!(text.contains("document 3: ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: quantity \"-4\" is negative"), "{text}");
    assert!(
        text.contains("document 4: apiVersion: is required"),
        "{text}"
    );
    assert!(
        text.contains("document 5: a document must be a mapping"),
        "{text}"
    );
}

#[test]
fn negative_amounts_are_rejected_everywhere() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec: {fairSharing: {weight: \"-0.5\"}}\n";
    let text = import_err(yaml)[0].to_string();
    assert!(
        text.starts_with(
            "document 1: Cohort/c: spec.fairSharing.weight: quantity \"-0.5\" is negative"
        ),
        "{text}"
    );
}

#[test]
fn malformed_yaml_names_its_document() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: a}\n---\nkind: [unclosed\n";
    let errors = import_err(yaml);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].document, Some(2));
    assert!(
        errors[0].message.starts_with("malformed YAML"),
        "{}",
        errors[0]
    );
}

#[test]
fn type_errors_have_paths() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: "a lot"
"#;
    let text = import_err(yaml)[0].to_string();
    assert!(
        text.starts_with("document 1: WorkloadPriorityClass/high: value: invalid type"),
        "{text}"
    );

    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: q}
spec:
  queueingStrategy: Fifo
"#;
    let text = import_err(yaml)[0].to_string();
    assert!(
        text.contains("ClusterQueue/q: spec.queueingStrategy: unknown variant `Fifo`"),
        "{text}"
    );
}

#[test]
fn metadata_server_fields_and_status_are_ignored_but_typos_are_not() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: user-queue
  namespace: team-a
  uid: 0b6c6d3e-1111-2222-3333-444455556666
  resourceVersion: "12345"
  generation: 3
  creationTimestamp: "2025-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
  finalizers: [kueue.x-k8s.io/resource-in-use]
  labels: {team: a}
  annotations: {note: hi}
spec:
  clusterQueue: cluster-queue
  stopPolicy: None
status:
  pendingWorkloads: 3
"#;
    let docs = import_ok(yaml);
    let Object::LocalQueue(lq) = &docs[0].object else {
        panic!()
    };
    assert_eq!(lq.key(), "team-a/user-queue");

    let typo = yaml.replace("  labels:", "  lables:");
    let text = import_err(&typo)[0].to_string();
    assert!(
        text.contains("LocalQueue/team-a/user-queue: metadata.lables: unknown field `lables`"),
        "{text}"
    );
}

#[test]
fn namespaced_kinds_default_to_the_default_namespace() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q}\nspec: {clusterQueue: cq}\n";
    let Object::LocalQueue(lq) = &import_ok(yaml)[0].object else {
        panic!()
    };
    assert_eq!(lq.namespace, "default");
}

#[test]
fn config_objects_need_a_fixed_name() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {generateName: gpu-}\n";
    let text = import_err(yaml)[0].to_string();
    assert!(
        text.contains("metadata.name: is required: generateName is only for Jobs"),
        "{text}"
    );
}

#[test]
fn cohort_and_cohort_name_are_one_field() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: q}\nspec: {cohort: a, cohortName: b}\n";
    let text = import_err(yaml)[0].to_string();
    assert!(text.contains("duplicate field"), "{text}");
    let parent = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: c}\nspec: {parent: root}\n";
    let Object::Cohort(cohort) = &import_ok(parent)[0].object else {
        panic!()
    };
    assert_eq!(cohort.spec.parent.as_deref(), Some("root"));
}

#[test]
fn fleetq_extensions_import() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu}
spec:
  placement:
    clusters: [us-east, eu-west]
    clusterSelector: {tier: prod}
    strategy: Spread
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: ml}
spec:
  clusterQueue: gpu
  gpuBudget: {gpuSecondsPerHour: 36000, burstGpuSeconds: 72000}
"#;
    let docs = import_ok(yaml);
    let Object::ClusterQueue(queue) = &docs[0].object else {
        panic!()
    };
    assert_eq!(queue.spec.placement.clusters, ["us-east", "eu-west"]);
    assert_eq!(queue.spec.placement.cluster_selector["tier"], "prod");
    let Object::LocalQueue(lq) = &docs[1].object else {
        panic!()
    };
    let budget = lq.spec.gpu_budget.expect("gpuBudget");
    assert_eq!(
        (budget.gpu_seconds_per_hour, budget.burst_gpu_seconds),
        (36000, 72000)
    );
}

#[test]
fn v1_list_items_import_with_prefixed_paths() {
    let yaml = r#"
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: a}
- apiVersion: kueue.x-k8s.io/v1beta2
  kind: ResourceFlavor
  metadata: {name: b}
  spec: {nodeLabel: {x: y}}
"#;
    let errors = import_err(yaml);
    assert_eq!(errors[0].to_string(), "document 1: ResourceFlavor/b: items[1].spec.nodeLabel: unknown field `nodeLabel`, expected one of `nodeLabels`, `nodeTaints`, `tolerations`, `topologyName`");
    let fixed = yaml.replace("nodeLabel:", "nodeLabels:");
    let docs = import_ok(&fixed);
    assert_eq!(docs.len(), 2);
    assert!(docs.iter().all(|d| d.document == 1));
}

// ---------------------------------------------------------------------------
// Jobs

fn job(labels: &str, annotations: &str, spec: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  namespace: ml\n  labels: {labels}\n  annotations: {annotations}\nspec:\n{spec}"
    )
}

const GPU_POD: &str = r#"  parallelism: 4
  template:
    spec:
      initContainers:
      - name: fetch
        image: busybox
        resources: {requests: {cpu: "6", memory: 1Gi}}
      containers:
      - name: trainer
        image: ghcr.io/acme/train:1
        command: [python, train.py]
        args: [--epochs, "3"]
        env: [{name: EPOCHS, value: "3"}]
        resources:
          requests: {cpu: "4", memory: 32Gi}
          limits: {nvidia.com/gpu: 2, nvidia.com/mig-1g.10gb: 1}
      - name: sidecar
        image: busybox
        resources: {requests: {cpu: 500m}}
      restartPolicy: Never
"#;

#[test]
fn job_requests_follow_kubernetes_rules() {
    let yaml = job(
        "{kueue.x-k8s.io/queue-name: research, kueue.x-k8s.io/priority-class: high}",
        "{}",
        GPU_POD,
    );
    let docs = import_ok(&yaml);
    let Object::Workload(w) = &docs[0].object else {
        panic!()
    };
    assert_eq!((w.namespace.as_str(), w.name.as_str()), ("ml", "train"));
    assert_eq!(w.spec.priority_class_name.as_deref(), Some("high"));
    let pods = &w.spec.pod_sets[0];
    assert_eq!(pods.count, 4);
    assert_eq!(
        pods.requests,
        BTreeMap::from([
            // max(4 + 0.5, init 6)
            ("cpu".into(), q("6")),
            ("memory".into(), q("32Gi")),
            // limits stand in for missing requests
            ("nvidia.com/gpu".into(), q("2")),
            ("nvidia.com/mig-1g.10gb".into(), q("1")),
        ])
    );
    assert_eq!(w.spec.run.command, ["python", "train.py", "--epochs", "3"]);
    assert_eq!(w.spec.run.env["EPOCHS"], "3");
    assert_eq!(docs[0].source.name, "Job/ml/train");
}

#[test]
fn job_without_a_queue_label() {
    let errors = import_err(&job("{team: a}", "{}", GPU_POD));
    assert_eq!(
        errors[0].to_string(),
        r#"document 1: Job/ml/train: metadata.labels["kueue.x-k8s.io/queue-name"]: is required: it names the LocalQueue the Job is submitted to"#
    );
}

#[test]
fn job_quantity_errors_name_the_container() {
    let spec = GPU_POD.replace("cpu: \"4\"", "cpu: four");
    let errors = import_err(&job("{kueue.x-k8s.io/queue-name: q}", "{}", &spec));
    assert_eq!(
        errors[0].path,
        "spec.template.spec.containers[0].resources.requests.cpu"
    );
    let spec = GPU_POD.replace("nvidia.com/gpu: 2", "nvidia.com/gpu: -2");
    let errors = import_err(&job("{kueue.x-k8s.io/queue-name: q}", "{}", &spec));
    assert_eq!(
        errors[0].path,
        r#"spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]"#
    );
}

#[test]
fn job_fields_fleetq_does_not_read_pass_through() {
    let spec = GPU_POD.replace(
        "      restartPolicy: Never\n",
        "      restartPolicy: Never\n      nodeSelector: {pool: gpu}\n      someFutureField: {x: 1}\n  backoffLimit: 2\n  ttlSecondsAfterFinished: 60\n",
    );
    let docs = import_ok(&job("{kueue.x-k8s.io/queue-name: q}", "{}", &spec));
    let Object::Workload(w) = &docs[0].object else {
        panic!()
    };
    let template = w.spec.run.job_template.as_ref().unwrap();
    assert_eq!(template["spec"]["backoffLimit"], 2);
    assert_eq!(
        template["spec"]["template"]["spec"]["someFutureField"]["x"],
        1
    );
}

#[test]
fn job_min_parallelism_and_deadlines() {
    let spec = format!("  activeDeadlineSeconds: 7200\n{GPU_POD}");
    let docs = import_ok(&job(
        "{kueue.x-k8s.io/queue-name: q, kueue.x-k8s.io/max-exec-time-seconds: \"3600\"}",
        "{kueue.x-k8s.io/job-min-parallelism: \"2\"}",
        &spec,
    ));
    let Object::Workload(w) = &docs[0].object else {
        panic!()
    };
    assert_eq!(w.spec.pod_sets[0].min_count, Some(2));
    assert_eq!(
        w.spec.maximum_execution_time,
        Some(Duration::from_secs(3600))
    );

    let errors = import_err(&job(
        "{kueue.x-k8s.io/queue-name: q}",
        "{kueue.x-k8s.io/job-min-parallelism: \"4\"}",
        GPU_POD,
    ));
    assert_eq!(
        errors[0].path,
        r#"metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]"#
    );
    let errors = import_err(&job(
        "{kueue.x-k8s.io/queue-name: q}",
        "{}",
        &GPU_POD.replace("parallelism: 4", "parallelism: -1"),
    ));
    assert_eq!(errors[0].path, "spec.parallelism");
}

#[test]
fn completions_below_parallelism_cap_the_pod_count() {
    let spec = GPU_POD.replace("parallelism: 4", "parallelism: 4\n  completions: 2");
    let Object::Workload(w) =
        &import_ok(&job("{kueue.x-k8s.io/queue-name: q}", "{}", &spec))[0].object
    else {
        panic!()
    };
    assert_eq!(w.spec.pod_sets[0].count, 2);
}

#[test]
fn workload_errors_point_back_at_the_job() {
    let set = set_of(&[
        fixture("single-clusterqueue-setup.yaml"),
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: user-queue, kueue.x-k8s.io/priority-class: missing}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        resources: {requests: {nvidia.com/gpu: 1}}\n".to_string(),
    ]);
    let docs = import_ok("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: user-queue, kueue.x-k8s.io/priority-class: missing}\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        resources: {requests: {nvidia.com/gpu: 1}}\n");
    let errors: Vec<String> = set
        .config
        .bind_workload(&set.workloads[0])
        .unwrap_err()
        .into_iter()
        .map(|e| docs[0].locate(e).to_string())
        .collect();
    assert_eq!(
        errors,
        [
            r#"document 1: Job/default/j: metadata.labels["kueue.x-k8s.io/priority-class"]: WorkloadPriorityClass "missing" does not exist"#,
            r#"document 1: Job/default/j: spec.template.spec.containers[*].resources.requests["nvidia.com/gpu"]: Misconfigured: ClusterQueue "cluster-queue" has no flavor that covers "nvidia.com/gpu""#,
        ]
    );
}

/// Kubernetes PriorityClasses, read as Kueue reads them: a Job's
/// WorkloadPriorityClass label first, else its pod template's
/// `priorityClassName`, else the `globalDefault` PriorityClass, else 0.
#[test]
fn pod_priority_classes_give_jobs_their_priority() {
    let classes = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 5000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: base}
value: 7
globalDefault: true
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 90
"#;
    let job = |labels: &str, class: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {{kueue.x-k8s.io/queue-name: user-queue{labels}}}\nspec:\n  template:\n    spec:\n      {class}containers:\n      - name: c\n        resources: {{requests: {{cpu: 1}}}}\n"
        )
    };
    let cases = [
        // The pod template's PriorityClass.
        (
            job("", "priorityClassName: high\n      "),
            5000,
            PriorityClassSource::PriorityClass,
        ),
        // A WorkloadPriorityClass of the same name wins.
        (
            job(
                ", kueue.x-k8s.io/priority-class: high",
                "priorityClassName: high\n      ",
            ),
            90,
            PriorityClassSource::WorkloadPriorityClass,
        ),
        // Neither: the global default.
        (job("", ""), 7, PriorityClassSource::WorkloadPriorityClass),
    ];
    for (manifest, priority, source) in cases {
        let set = set_of(&[
            fixture("single-clusterqueue-setup.yaml"),
            classes.to_string(),
            manifest.clone(),
        ]);
        assert_valid(&set);
        let w = &set.workloads[0];
        assert_eq!(w.spec.priority_class_source, source, "{manifest}");
        let bound = set.config.bind_workload(w).expect("binds");
        assert_eq!(bound.priority, priority, "{manifest}");
    }
    // Without a global default, a workload naming no class has priority 0.
    let set = set_of(&[
        fixture("single-clusterqueue-setup.yaml"),
        classes.replace("globalDefault: true", "globalDefault: false"),
        job("", ""),
    ]);
    assert_eq!(
        set.config
            .bind_workload(&set.workloads[0])
            .unwrap()
            .priority,
        0
    );
    // A missing PriorityClass is named where the Job names it.
    let missing = job("", "priorityClassName: urgent\n      ");
    let set = set_of(&[fixture("single-clusterqueue-setup.yaml"), missing.clone()]);
    let docs = import_ok(&missing);
    let errors: Vec<String> = set
        .config
        .bind_workload(&set.workloads[0])
        .unwrap_err()
        .into_iter()
        .map(|e| docs[0].locate(e).to_string())
        .collect();
    assert_eq!(
        errors,
        [
            r#"document 1: Job/default/j: spec.template.spec.priorityClassName: PriorityClass "urgent" does not exist"#
        ]
    );
}

/// Kubernetes' own rules for a PriorityClass (`ValidatePriorityClass`
/// and the Priority admission plugin), each naming the field.
#[test]
fn pod_priority_classes_are_refused_as_kubernetes_refuses_them() {
    let class = |name: &str, rest: &str| {
        format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\n{rest}\n")
    };
    let refused = |yaml: String| {
        let set = set_of(&[yaml]);
        lines(&set.config.validate())
    };
    let text = refused(class("huge", "value: 1000000001"));
    assert!(text.contains("PriorityClass/huge: value: 1000000001 exceeds the maximum allowed value of a user defined priority, 1000000000"), "{text}");
    let text = refused(class("system-mine", "value: 10"));
    assert!(text.contains("PriorityClass/system-mine: metadata.name: priority class names with 'system-' prefix are reserved"), "{text}");
    // Kubernetes' own system classes, at their values, are accepted.
    assert_valid(&set_of(&[class(
        "system-node-critical",
        "value: 2000001000",
    )]));
    let text = refused(class("p", "value: 1\npreemptionPolicy: Sometimes"));
    assert!(
        text.contains("PriorityClass/p: preemptionPolicy: \"Sometimes\" is not supported"),
        "{text}"
    );
    let text = refused(format!(
        "{}---\n{}",
        class("a", "value: 1\nglobalDefault: true"),
        class("b", "value: 2\nglobalDefault: true")
    ));
    assert!(
        text.contains(
            "PriorityClass/b: globalDefault: PriorityClass a is already marked as default"
        ),
        "{text}"
    );
    let text = refused(class("Bad_Name", "value: 1"));
    assert!(
        text.contains("PriorityClass/Bad_Name: metadata.name"),
        "{text}"
    );
    // An unknown field is named.
    let text = lines(&import_err(&class("p", "value: 1\nglobaldefault: true")));
    assert!(text.contains("globaldefault"), "{text}");
    // The kind lives in scheduling.k8s.io/v1 only.
    let text = lines(&import_err(
        &class("p", "value: 1").replace("scheduling.k8s.io/v1", "kueue.x-k8s.io/v1beta2"),
    ));
    assert!(text.contains("use scheduling.k8s.io/v1"), "{text}");
}

// ---------------------------------------------------------------------------
// Kueue Workloads

#[test]
fn workload_priority_sources() {
    let base = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\nspec:\n  queueName: q\n  priority: 5\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n";
    let with = |extra: &str| format!("{base}  {extra}\n");
    let Object::Workload(w) = &import_ok(&with(
        "priorityClassName: high\n  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass",
    ))[0]
        .object
    else {
        panic!()
    };
    assert_eq!(w.spec.priority_class_name.as_deref(), Some("high"));
    // A Kubernetes PriorityClass, by v1beta1's source and v1beta2's ref.
    for extra in [
        "priorityClassName: high\n  priorityClassSource: scheduling.k8s.io/priorityclass",
        "priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: high}",
    ] {
        let Object::Workload(w) = &import_ok(&with(extra))[0].object else {
            panic!()
        };
        assert_eq!(w.spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(
            w.spec.priority_class_source,
            PriorityClassSource::PriorityClass
        );
    }
    let text = lines(&import_err(&with(
        "priorityClassRef: {group: example.com, kind: PriorityClass, name: high}",
    )));
    assert!(
        text.contains("spec.priorityClassRef: example.com/PriorityClass is not a priority class"),
        "{text}"
    );
    let text = lines(&import_err(&base.replace("  queueName: q\n", "")));
    assert!(
        text.contains("Workload/default/w: spec.queueName: is required"),
        "{text}"
    );
    let text = lines(&import_err(&with("podSet: []")));
    assert!(
        text.contains("spec.podSet: unknown field `podSet`"),
        "{text}"
    );
}

#[test]
fn kueue_configuration_imports_its_fair_sharing() {
    let docs = import_ok(
        "apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
manageJobsWithoutQueueName: true
waitForPodsReady:
  enable: false
integrations:
  frameworks: [batch/job]
fairSharing:
  enable: true
  preemptionStrategies: [LessThanOrEqualToFinalShare]
",
    );
    let fleetq_model::config::Object::Configuration(settings) = &docs[0].object else {
        panic!("{:?}", docs[0].object);
    };
    assert!(settings.fair_sharing_enabled());
    assert_eq!(settings.strategies(), ["LessThanOrEqualToFinalShare"]);
    let mut config = fleetq_model::Config::default();
    config
        .upsert(docs[0].object.clone())
        .expect("configuration");
    assert!(config.settings.is_some());
    assert!(config.validate().is_empty());

    let errors = import_err(
        "apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
fairSharing:
  enable: true
  preemptionStrategies: [LessThanInitialShare, Sometimes]
",
    );
    assert!(
        lines(&errors).contains("fairSharing.preemptionStrategies[1]"),
        "{}",
        lines(&errors)
    );
    let errors = import_err("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairShare: {enable: true}\n");
    assert!(lines(&errors).contains("fairShare"), "{}", lines(&errors));
}

/// Kueue's `admissionFairSharing` section: half-life and weights are read
/// (and replicated); bad values are refused naming the field.
#[test]
fn kueue_configuration_imports_its_admission_fair_sharing() {
    let docs = import_ok(
        "apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
  resourceWeights:
    cpu: 2.0
    nvidia.com/gpu: 1
",
    );
    let fleetq_model::config::Object::Configuration(settings) = &docs[0].object else {
        panic!("{:?}", docs[0].object);
    };
    let afs = settings.admission_fair_sharing.as_ref().expect("read");
    assert_eq!(
        afs.half_life(),
        Some(std::time::Duration::from_secs(168 * 3600))
    );
    assert_eq!(
        afs.weights_milli(),
        [
            ("cpu".to_string(), 2000),
            ("nvidia.com/gpu".to_string(), 1000)
        ]
        .into()
    );
    // It round-trips through the replicated form.
    let json = serde_json::to_string(settings).expect("serialize");
    let back: fleetq_model::settings::SchedulingSettings =
        serde_json::from_str(&json).expect("deserialize");
    assert_eq!(&back, settings);

    for (field, line, named) in [
        (
            "usageHalfLifeTime",
            "usageHalfLifeTime: soon",
            "admissionFairSharing.usageHalfLifeTime",
        ),
        (
            "usageSamplingInterval",
            "usageSamplingInterval: 0s",
            "admissionFairSharing.usageSamplingInterval",
        ),
        (
            "resourceWeights",
            "resourceWeights: {cpu: -1}",
            "admissionFairSharing.resourceWeights[cpu]",
        ),
        (
            "unknown",
            "usageHalfLifeDecayTime: 1h",
            "usageHalfLifeDecayTime",
        ),
        // Finer than fleetq keeps: refused rather than rounded (issue 28,
        // item 3).
        (
            "precision",
            "resourceWeights: {cpu: 0.0005}",
            "admissionFairSharing.resourceWeights[cpu]: 0.0005 is finer than 0.001",
        ),
    ] {
        let errors = import_err(&format!(
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nadmissionFairSharing:\n  {line}\n"
        ));
        assert!(
            lines(&errors).contains(named),
            "{field}: {}",
            lines(&errors)
        );
    }
}

/// A Job's template asks Kubernetes for exactly what its pod set is
/// charged; a template edited afterwards (by hand, in an annotation or a
/// JSON submission) to ask for more is refused, naming the field.
#[test]
fn a_job_template_asks_for_no_more_than_its_charge() {
    let yaml = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  parallelism: 2
  completions: 4
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: pytorch:2
        resources:
          limits: {nvidia.com/gpu: "1"}
          requests: {cpu: "2"}
"#;
    let workload = match import_ok(yaml).remove(0).object {
        Object::Workload(w) => w,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        fleetq_model::kueue::job_template_problem(&workload.spec),
        None
    );
    assert!(workload.check_job_template().is_ok());

    // Eight GPUs per pod while charged one.
    let mut greedy = workload.clone();
    let template = greedy
        .spec
        .run
        .job_template
        .as_mut()
        .expect("a Job keeps its template");
    template["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        ["nvidia.com/gpu"] = "8".into();
    let (path, message) = fleetq_model::kueue::job_template_problem(&greedy.spec).expect("refused");
    assert_eq!(path, "run.jobTemplate.spec.template.spec");
    assert!(
        message.contains("nvidia.com/gpu=8") && message.contains("nvidia.com/gpu=1"),
        "{message}"
    );
    let error = greedy.check_job_template().unwrap_err();
    assert_eq!(error.object, "Workload/team-a/train");
    assert_eq!(error.path, "spec.run.jobTemplate.spec.template.spec");

    // More pods at once than the pod set's count.
    let mut wide = workload.clone();
    let template = wide.spec.run.job_template.as_mut().expect("template");
    template["spec"]["parallelism"] = 4.into();
    let (path, message) = fleetq_model::kueue::job_template_problem(&wide.spec).expect("refused");
    assert_eq!(path, "run.jobTemplate.spec.parallelism");
    assert!(message.contains("runs 4 pods at once"), "{message}");
    // min(parallelism, completions) is what runs: 4 and 2 is 2 pods.
    let template = wide.spec.run.job_template.as_mut().expect("template");
    template["spec"]["completions"] = 2.into();
    assert_eq!(fleetq_model::kueue::job_template_problem(&wide.spec), None);

    // A second pod set, and a huge template.
    let mut two = workload.clone();
    two.spec.pod_sets.push(two.spec.pod_sets[0].clone());
    assert!(fleetq_model::kueue::job_template_problem(&two.spec)
        .is_some_and(|(_, m)| m.contains("2 pod sets")));
    let mut huge = workload;
    let template = huge.spec.run.job_template.as_mut().expect("template");
    template["metadata"] = serde_json::json!({"annotations": {"x": "y".repeat(200_000)}});
    assert!(fleetq_model::kueue::job_template_problem(&huge.spec)
        .is_some_and(|(p, m)| p == "run.jobTemplate" && m.contains("at most 131072")));
}

// ---------------------------------------------------------------------------
// JobSets

#[test]
fn kueue_jobset_examples_become_one_pod_set_per_replicated_job() {
    let set = fixtures(&[
        "single-clusterqueue-setup.yaml",
        "sample-jobset-tas-required.yaml",
        "sample-jobset-tas-combined.yaml",
    ]);
    let [required, combined] = &set.workloads[..] else {
        panic!("two workloads expected, got {:?}", set.workloads)
    };
    assert_eq!(
        (required.namespace.as_str(), required.name.as_str()),
        ("default", "jobset-tas-required")
    );
    assert_eq!(required.spec.queue_name, "user-queue");
    let [workers] = &required.spec.pod_sets[..] else {
        panic!("one pod set per replicated Job")
    };
    assert_eq!((workers.name.as_str(), workers.count), ("workers", 4));
    assert_eq!(
        workers.requests,
        BTreeMap::from([("cpu".into(), q("1")), ("memory".into(), q("200Mi"))])
    );
    let request = workers
        .topology_request
        .as_ref()
        .expect("a topology request");
    assert_eq!(
        request.placement,
        Some(TopologyPlacement::Required(
            "cloud.provider.com/topology-rack".into()
        ))
    );
    // Kueue's JobSet integration: each Job of a replicated Job is a
    // sub-group, numbered by the JobSet controller's label.
    assert_eq!(
        request.sub_group_index_label.as_deref(),
        Some("jobset.sigs.k8s.io/job-index")
    );
    assert_eq!(request.sub_group_count, Some(1));
    let slice = combined.spec.pod_sets[0]
        .topology_request
        .as_ref()
        .and_then(|r| r.slice.as_ref())
        .expect("a slice");
    assert_eq!(
        (slice.level.as_str(), slice.size),
        ("cloud.provider.com/topology-rack", 4)
    );
    let template = required.spec.run.job_template.as_ref().expect("kept");
    assert_eq!(template["kind"], "JobSet");
    assert_eq!(
        fleetq_model::kueue::job_template_problem(&required.spec),
        None
    );
    let docs = import_ok(&fixture("sample-jobset-tas-required.yaml"));
    assert_eq!(
        (docs[0].source.kind.as_str(), docs[0].source.name.as_str()),
        ("JobSet", "JobSet/default/jobset-tas-required")
    );
}

// ---------------------------------------------------------------------------
// RayJobs

/// Kueue's RayJob integration: `head`, a pod set per worker group, and
/// (KubeRay's default K8sJobMode) `submitter` with KubeRay's default
/// submitter pod, written into the kept template.
#[test]
fn kueue_rayjob_example_becomes_head_workers_and_submitter() {
    let docs = import_ok(&fixture("ray-job-sample.yaml"));
    let Object::Workload(w) = &docs[0].object else {
        panic!("a workload: {:?}", docs[0].object)
    };
    assert_eq!(w.name, "rayjob-sample");
    let sets: Vec<(&str, u32)> = w
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("head", 1), ("small-group", 1), ("submitter", 1)]);
    assert_eq!(
        w.spec.pod_sets[0].requests,
        BTreeMap::from([("cpu".into(), q("1")), ("memory".into(), q("2Gi"))])
    );
    assert_eq!(
        w.spec.pod_sets[2].requests,
        BTreeMap::from([("cpu".into(), q("500m")), ("memory".into(), q("200Mi"))])
    );
    let template = w.spec.run.job_template.as_ref().expect("kept");
    assert_eq!(template["kind"], "RayJob");
    assert_eq!(
        template["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"],
        "rayproject/ray:2.52.0"
    );
    assert_eq!(fleetq_model::kueue::job_template_problem(&w.spec), None);
}

/// Kueue's RayJob webhook rules, refused at the field; HTTP submission
/// has no submitter pod set; multi-host groups count replicas x hosts.
#[test]
fn a_rayjob_is_refused_where_kueue_would_refuse_it() {
    let base = fixture("ray-job-sample.yaml");
    let with = |from: &str, to: &str| {
        assert!(base.contains(from), "{from}");
        base.replacen(from, to, 1)
    };
    let refused = |yaml: String, path: &str| {
        let errors = import_err(&yaml);
        assert!(lines(&errors).contains(path), "{path}: {}", lines(&errors));
    };
    refused(
        with(
            "shutdownAfterJobFinishes: true",
            "shutdownAfterJobFinishes: false",
        ),
        "spec.shutdownAfterJobFinishes",
    );
    refused(
        with(
            "shutdownAfterJobFinishes: true",
            "shutdownAfterJobFinishes: true\n  clusterSelector: {ray.io/cluster: c}",
        ),
        "spec.clusterSelector",
    );
    refused(
        with(
            "rayVersion: '2.52.0'",
            "rayVersion: '2.52.0'\n    enableInTreeAutoscaling: true",
        ),
        "spec.rayClusterSpec.enableInTreeAutoscaling",
    );
    refused(
        with("groupName: small-group", "groupName: Head"),
        "spec.rayClusterSpec.workerGroupSpecs[0].groupName",
    );
    let http = import_ok(&with(
        "shutdownAfterJobFinishes: true",
        "shutdownAfterJobFinishes: true\n  submissionMode: HTTPMode",
    ));
    let Object::Workload(w) = &http[0].object else {
        panic!()
    };
    assert_eq!(w.spec.pod_sets.len(), 2, "no submitter");
    let hosts = import_ok(&with(
        "      - replicas: 1\n",
        "      - replicas: 2\n        numOfHosts: 4\n",
    ));
    let Object::Workload(w) = &hosts[0].object else {
        panic!()
    };
    assert_eq!(w.spec.pod_sets[1].count, 8);
}

// ---------------------------------------------------------------------------
// PyTorchJobs

/// Kueue's Kubeflow integration: a pod set per replica type, `master`
/// then `worker`, of `replicas` pods; the template kept for the executor.
#[test]
fn kueue_pytorchjob_example_becomes_a_pod_set_per_replica_type() {
    let docs = import_ok(&fixture("sample-pytorchjob.yaml"));
    assert_eq!(
        (docs[0].source.kind.as_str(), docs[0].source.name.as_str()),
        ("PyTorchJob", "PyTorchJob/default/pytorch-simple")
    );
    let Object::Workload(w) = &docs[0].object else {
        panic!("a workload: {:?}", docs[0].object)
    };
    assert_eq!(
        (w.namespace.as_str(), w.name.as_str()),
        ("default", "pytorch-simple")
    );
    assert_eq!(w.spec.queue_name, "main");
    let sets: Vec<(&str, u32)> = w
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count))
        .collect();
    assert_eq!(sets, [("master", 1), ("worker", 1)]);
    assert_eq!(
        w.spec.pod_sets[1].requests,
        BTreeMap::from([("cpu".into(), q("1")), ("memory".into(), q("200Mi"))])
    );
    assert_eq!(
        w.spec.run.job_template.as_ref().expect("kept")["kind"],
        "PyTorchJob"
    );
    assert_eq!(fleetq_model::kueue::job_template_problem(&w.spec), None);
}

/// The Training Operator's rules, refused at the field: an unknown
/// replica type, a second Master, replicas below zero; Workers alone are
/// a PyTorchJob too.
#[test]
fn a_pytorchjob_is_refused_where_the_training_operator_would_refuse_it() {
    let job = |specs: &str| {
        format!(
            "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: p\n  labels: {{kueue.x-k8s.io/queue-name: q}}\nspec:\n  pytorchReplicaSpecs:\n{specs}"
        )
    };
    let replica = |kind: &str, n: i64| {
        format!("    {kind}:\n      replicas: {n}\n      template:\n        spec:\n          containers: [{{name: c, image: i, resources: {{limits: {{nvidia.com/gpu: \"1\"}}}}}}]\n")
    };
    let errors = import_err(&job(&replica("Chief", 1)));
    assert!(
        lines(&errors).contains("spec.pytorchReplicaSpecs.Chief"),
        "{}",
        lines(&errors)
    );
    let errors = import_err(&job(&replica("Master", 2)));
    assert!(
        lines(&errors).contains("spec.pytorchReplicaSpecs.Master.replicas"),
        "{}",
        lines(&errors)
    );
    let errors = import_err(&job(&replica("Worker", -1)));
    assert!(
        lines(&errors).contains("spec.pytorchReplicaSpecs.Worker.replicas"),
        "{}",
        lines(&errors)
    );
    let docs = import_ok(&job(&replica("Worker", 4)));
    let Object::Workload(w) = &docs[0].object else {
        panic!("a workload")
    };
    assert_eq!(
        (w.spec.pod_sets[0].name.as_str(), w.spec.pod_sets[0].count),
        ("worker", 4)
    );
    let errors =
        import_err(&job(&replica("Worker", 4)).replace("kubeflow.org/v1", "kubeflow.org/v2"));
    assert!(lines(&errors).contains("apiVersion"), "{}", lines(&errors));
}

const TRAINING_JOBSET: &str = r#"
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: team-a
  labels: {kueue.x-k8s.io/queue-name: team-a, kueue.x-k8s.io/max-exec-time-seconds: "600"}
spec:
  network: {enableDNSHostnames: true}
  replicatedJobs:
  - name: driver
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: driver
              image: trainer:1
              command: [python, driver.py]
              resources: {requests: {cpu: "1"}}
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 3
        completions: 2
        template:
          spec:
            priorityClassName: high
            containers:
            - name: worker
              image: trainer:1
              resources: {limits: {nvidia.com/gpu: "2"}}
"#;

fn imported_workload(yaml: &str) -> Workload {
    match import_ok(yaml).remove(0).object {
        Object::Workload(w) => w,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_jobset_counts_replicas_times_the_pods_each_job_runs() {
    let workload = imported_workload(TRAINING_JOBSET);
    let pod_sets: Vec<(&str, u32, Option<u32>)> = workload
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.as_str(), p.count, p.min_count))
        .collect();
    // workers: 2 Jobs x min(parallelism 3, completions 2).
    assert_eq!(pod_sets, [("driver", 1, None), ("workers", 4, None)]);
    assert_eq!(workload.spec.pod_sets[1].requests["nvidia.com/gpu"], q("2"));
    // No WorkloadPriorityClass label: the first pod template that names a
    // PriorityClass, as Kueue reads it.
    assert_eq!(workload.spec.priority_class_name.as_deref(), Some("high"));
    assert_eq!(
        workload.spec.priority_class_source,
        PriorityClassSource::PriorityClass
    );
    assert_eq!(
        workload.spec.maximum_execution_time,
        Some(Duration::from_secs(600))
    );
    assert_eq!(workload.spec.run.command, ["python", "driver.py"]);
    // Fields fleetq does not read pass through to the executor.
    let template = workload.spec.run.job_template.as_ref().expect("kept");
    assert_eq!(template["spec"]["network"]["enableDNSHostnames"], true);
    assert_eq!(
        fleetq_model::kueue::job_template_problem(&workload.spec),
        None
    );
}

#[test]
fn jobset_errors_name_the_replicated_job_field() {
    let bad = TRAINING_JOBSET
        .replace("  labels: {kueue.x-k8s.io/queue-name: team-a, ", "  labels: {")
        .replace("    replicas: 2\n", "    replicas: -1\n")
        .replace(
            "            priorityClassName: high\n",
            "            priorityClassName: high\n            containers: []\n            initContainers: []\n",
        )
        .replace("            containers:\n            - name: worker\n              image: trainer:1\n              resources: {limits: {nvidia.com/gpu: \"2\"}}\n", "");
    let errors = lines(&import_err(&bad));
    for expected in [
        r#"document 1: JobSet/team-a/train: metadata.labels["kueue.x-k8s.io/queue-name"]: is required: it names the LocalQueue the JobSet is submitted to"#,
        "document 1: JobSet/team-a/train: spec.replicatedJobs[1].replicas: replicas x min(parallelism, completions) must be a count of pods",
        "document 1: JobSet/team-a/train: spec.replicatedJobs[1].template.spec.template.spec.containers: must have at least one container",
    ] {
        assert!(errors.contains(expected), "{expected}\nnot in:\n{errors}");
    }

    // Topology annotations on the replicated Job's own metadata (Kueue
    // reads the pod template's), and on the JobSet.
    let misplaced = TRAINING_JOBSET
        .replace(
            "  - name: driver\n    template:\n      spec:\n",
            "  - name: driver\n    template:\n      metadata:\n        annotations: {kueue.x-k8s.io/podset-required-topology: rack}\n      spec:\n",
        )
        .replace(
            "  name: train\n",
            "  name: train\n  annotations: {kueue.x-k8s.io/podset-preferred-topology: rack, kueue.x-k8s.io/job-min-parallelism: \"1\"}\n",
        );
    let errors = lines(&import_err(&misplaced));
    for expected in [
        r#"spec.replicatedJobs[0].template.metadata.annotations["kueue.x-k8s.io/podset-required-topology"]: Kueue reads pod-set topology annotations from the pod template"#,
        r#"metadata.annotations["kueue.x-k8s.io/podset-preferred-topology"]: Kueue reads pod-set topology annotations from each replicated Job's pod template"#,
        r#"metadata.annotations["kueue.x-k8s.io/job-min-parallelism"]: not supported by fleetq"#,
    ] {
        assert!(errors.contains(expected), "{expected}\nnot in:\n{errors}");
    }

    // Names the JobSet API refuses: not a DNS-1035 label, or too long
    // for the Job and pod names derived from them.
    let errors = lines(&import_err(
        &TRAINING_JOBSET.replace("- name: workers", "- name: 2workers"),
    ));
    assert!(
        errors.contains(
            "spec.replicatedJobs[1].name: \"2workers\" must start with a lowercase letter"
        ),
        "{errors}"
    );
    let long = "w".repeat(40);
    let errors = lines(&import_err(
        &TRAINING_JOBSET.replace("- name: workers", &format!("- name: {long}")),
    ));
    assert!(
        errors.contains(&format!(
            "spec.replicatedJobs[1].name: \"{long}\" is too long"
        )),
        "{errors}"
    );
    // Overflowing counts name the multiplier.
    let errors = lines(&import_err(
        &TRAINING_JOBSET
            .replace("replicas: 2", "replicas: 2147483647")
            .replace("completions: 2", "completions: 3"),
    ));
    assert!(
        errors.contains("spec.replicatedJobs[1].replicas: replicas x min"),
        "{errors}"
    );

    // A pod set name Kueue refuses is reported at the replicated Job.
    let set = set_of(&[TRAINING_JOBSET.replace("- name: workers", "- name: workers_1")]);
    let docs = import_ok(&TRAINING_JOBSET.replace("- name: workers", "- name: workers_1"));
    let errors: Vec<String> = set
        .config
        .bind_workload(&set.workloads[0])
        .unwrap_err()
        .into_iter()
        .map(|e| docs[0].locate(e).to_string())
        .collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("JobSet/team-a/train: spec.replicatedJobs[1].name:")),
        "{errors:?}"
    );
}

#[test]
fn a_jobset_template_asks_for_no_more_than_its_charge() {
    let workload = imported_workload(TRAINING_JOBSET);
    // Three Jobs of the workers where two are charged.
    let mut more_jobs = workload.clone();
    let template = more_jobs.spec.run.job_template.as_mut().expect("kept");
    template["spec"]["replicatedJobs"][1]["replicas"] = 3.into();
    let (path, message) =
        fleetq_model::kueue::job_template_problem(&more_jobs.spec).expect("refused");
    assert_eq!(
        path,
        "run.jobTemplate.spec.replicatedJobs[1].template.spec.parallelism"
    );
    assert!(message.contains("runs 6 pods at once"), "{message}");

    // A replicated Job's pods asking for more GPUs than charged.
    let mut greedy = workload.clone();
    let template = greedy.spec.run.job_template.as_mut().expect("kept");
    template["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"]
        [0]["resources"]["limits"]["nvidia.com/gpu"] = "8".into();
    let (path, _) = fleetq_model::kueue::job_template_problem(&greedy.spec).expect("refused");
    assert_eq!(
        path,
        "run.jobTemplate.spec.replicatedJobs[1].template.spec.template.spec"
    );

    // Replicated Jobs renamed, dropped or added.
    let mut renamed = workload.clone();
    let template = renamed.spec.run.job_template.as_mut().expect("kept");
    template["spec"]["replicatedJobs"][0]["name"] = "boss".into();
    assert!(
        fleetq_model::kueue::job_template_problem(&renamed.spec)
            .is_some_and(|(p, m)| p == "run.jobTemplate.spec.replicatedJobs[0].name"
                && m.contains("\"driver\""))
    );
    let mut fewer = workload;
    fewer.spec.pod_sets.pop();
    assert!(fleetq_model::kueue::job_template_problem(&fewer.spec)
        .is_some_and(|(_, m)| m.contains("2 replicated Jobs and the workload 1 pod sets")));
}

// ---------------------------------------------------------------------------
// Devices are whole

const FRACTIONAL_QUEUES: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: org
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu, nvidia.com/mig-1g.10gb, amd.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 1.5, borrowingLimit: 500m}
      - {name: nvidia.com/gpu, nominalQuota: 7.5, borrowingLimit: 0.5, lendingLimit: 2500m}
      - {name: nvidia.com/mig-1g.10gb, nominalQuota: 4}
      - {name: amd.com/gpu, nominalQuota: "1.25"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 16.5}]
"#;

#[test]
fn quotas_of_extended_resources_are_whole() {
    let errors = import_err(FRACTIONAL_QUEUES);
    let text = lines(&errors);
    let quota = "spec.resourceGroups[0].flavors[0].resources";
    let expected = [
        format!("document 1: ClusterQueue/team-a: {quota}[1].nominalQuota: nvidia.com/gpu: 7500m is not a whole number; extended resources are counted in whole units, as in Kubernetes"),
        format!("document 1: ClusterQueue/team-a: {quota}[1].borrowingLimit: nvidia.com/gpu: 500m is not a whole number"),
        format!("document 1: ClusterQueue/team-a: {quota}[1].lendingLimit: nvidia.com/gpu: 2500m is not a whole number"),
        format!("document 1: ClusterQueue/team-a: {quota}[3].nominalQuota: amd.com/gpu: 1250m is not a whole number"),
        format!("document 2: Cohort/org: {quota}[0].nominalQuota: nvidia.com/gpu: 16500m is not a whole number"),
    ];
    assert_eq!(errors.len(), expected.len(), "{text}");
    for line in &expected {
        assert!(
            text.lines().any(|l| l.starts_with(line.as_str())),
            "missing {line:?} in\n{text}"
        );
    }
    // cpu is not a device: half a core is fine.
    assert!(!text.contains("cpu:"), "{text}");
    // Whole amounts, however written, import.
    let whole = FRACTIONAL_QUEUES
        .replace("7.5", "7")
        .replace("borrowingLimit: 0.5", "borrowingLimit: 1")
        .replace("2500m", "2000m")
        .replace("\"1.25\"", "\"1e1\"")
        .replace("16.5", "16");
    let docs = import_ok(&whole);
    let Object::ClusterQueue(cq) = &docs[0].object else {
        panic!()
    };
    assert_eq!(
        quota_of(cq, "nvidia.com/gpu"),
        (q("7"), Some(q("1")), Some(q("2")))
    );
    assert_eq!(quota_of(cq, "cpu"), (q("1500m"), Some(q("500m")), None));
}

fn quota_of(cq: &ClusterQueue, resource: &str) -> (Quantity, Option<Quantity>, Option<Quantity>) {
    quota(cq, "h100", resource)
}

const FRACTIONAL_POD: &str = r#"  parallelism: 2
  template:
    spec:
      initContainers:
      - name: warmup
        resources: {limits: {nvidia.com/mig-1g.10gb: 0.5}}
      containers:
      - name: trainer
        resources:
          requests: {cpu: 1.5, nvidia.com/gpu: 1.5}
          limits: {nvidia.com/gpu: 2}
      - name: helper
        resources: {limits: {amd.com/gpu: 250m}}
"#;

#[test]
fn job_containers_ask_for_whole_devices() {
    let errors = import_err(&job("{kueue.x-k8s.io/queue-name: q}", "{}", FRACTIONAL_POD));
    let found: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                r#"spec.template.spec.containers[0].resources.requests["nvidia.com/gpu"]"#,
                "nvidia.com/gpu: 1500m is not a whole number; extended resources are counted in whole units, as in Kubernetes"
            ),
            (
                r#"spec.template.spec.containers[1].resources.limits["amd.com/gpu"]"#,
                "amd.com/gpu: 250m is not a whole number; extended resources are counted in whole units, as in Kubernetes"
            ),
            (
                r#"spec.template.spec.initContainers[0].resources.limits["nvidia.com/mig-1g.10gb"]"#,
                "nvidia.com/mig-1g.10gb: 500m is not a whole number; extended resources are counted in whole units, as in Kubernetes"
            ),
        ],
        "{}",
        lines(&errors)
    );
    assert!(errors.iter().all(|e| e.object == "Job/ml/train"));
    // Fractions of cpu and memory are Kubernetes' own; whole devices import.
    let whole = FRACTIONAL_POD
        .replace("nvidia.com/gpu: 1.5", "nvidia.com/gpu: 2")
        .replace("0.5", "1")
        .replace("250m", "1000m");
    let docs = import_ok(&job("{kueue.x-k8s.io/queue-name: q}", "{}", &whole));
    let Object::Workload(w) = &docs[0].object else {
        panic!()
    };
    assert_eq!(w.spec.pod_sets[0].requests["cpu"], q("1500m"));
    assert_eq!(w.spec.pod_sets[0].requests["nvidia.com/gpu"], q("2"));
}

#[test]
fn workload_pod_sets_ask_for_whole_devices() {
    let yaml = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ml}
spec:
  queueName: q
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: 1}}}]}}
  - name: workers
    count: 4
    template:
      spec:
        overhead: {nvidia.com/gpu: 0.5}
        containers: [{name: c, resources: {requests: {nvidia.com/mig-1g.10gb: 1.5}}}]
"#;
    let errors = import_err(yaml);
    let text = lines(&errors);
    assert_eq!(errors.len(), 2, "{text}");
    assert!(text.contains(r#"document 1: Workload/ml/w: spec.podSets[1].template.spec.containers[0].resources.requests["nvidia.com/mig-1g.10gb"]: nvidia.com/mig-1g.10gb: 1500m is not a whole number"#), "{text}");
    assert!(text.contains(r#"Workload/ml/w: spec.podSets[1].template.spec.overhead["nvidia.com/gpu"]: nvidia.com/gpu: 500m is not a whole number"#), "{text}");
}

/// A workload that arrives as JSON (`fleetq submit`, the Submit call) is
/// checked per pod set by `whole_device_errors`, which the API runs; it
/// is no part of bind_workload, so apply() decides as before.
#[test]
fn json_workloads_are_checked_per_pod_set() {
    use fleetq_model::config::whole_device_errors;
    use fleetq_model::workload::{PodSet, WorkloadSpec};
    let workload = Workload {
        namespace: "ml".into(),
        name: "w".into(),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: "q".into(),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 2,
                min_count: None,
                requests: BTreeMap::from([
                    ("cpu".into(), q("1.5")),
                    ("nvidia.com/gpu".into(), q("1.5")),
                ]),
                topology_request: None,
            }],
            ..WorkloadSpec::default()
        },
    };
    let errors = whole_device_errors(&workload);
    assert_eq!(
        lines(&errors),
        r#"Workload/ml/w: spec.podSets[0].requests["nvidia.com/gpu"]: nvidia.com/gpu: 1500m is not a whole number; extended resources are counted in whole units, as in Kubernetes"#
    );
    let mut whole = workload.clone();
    whole.spec.pod_sets[0]
        .requests
        .insert("nvidia.com/gpu".into(), q("2"));
    assert!(whole_device_errors(&whole).is_empty());
}

// ---------------------------------------------------------------------------
// What Kueue has and fleetq does not: "not supported", never "unknown field"

fn cluster_queue_with(extra: &str) -> String {
    format!("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: q}}\nspec:\n  namespaceSelector: {{}}\n{extra}")
}

#[test]
fn unsupported_cluster_queue_fields_are_named_with_why() {
    for (extra, field, why) in [
        (
            "  admissionChecks: [prov]\n",
            "spec.admissionChecks",
            "fleetq has no admission checks",
        ),
        (
            "  admissionChecksStrategy:\n    admissionChecks: [{name: prov}]\n",
            "spec.admissionChecksStrategy",
            "fleetq has no admission checks",
        ),
        (
            "  concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}\n",
            "spec.concurrentAdmissionPolicy",
            "not migrated to another while it runs",
        ),
        (
            "  flavorFungibility: {whenCanBorrow: MayStopSearch, preference: BorrowingOverPreemption}\n",
            "spec.flavorFungibility.preference",
            "whenCanBorrow and whenCanPreempt only",
        ),
        (
            "  stopPolicy: HoldAndDrain\n",
            "spec.stopPolicy",
            "does not evict the running workloads of a stopped queue; use Hold",
        ),
    ] {
        let errors = import_err(&cluster_queue_with(extra));
        let text = lines(&errors);
        assert_eq!(errors.len(), 1, "{extra}: {text}");
        assert_eq!(errors[0].path, field, "{text}");
        assert!(
            errors[0]
                .message
                .starts_with(&format!("not supported by fleetq: {field}")),
            "{text}"
        );
        assert!(errors[0].message.contains(why), "{text}");
        assert!(!text.contains("unknown field"), "{text}");
    }
    // v1beta1 spells the checks the same; a v1 List prefixes the path.
    let v1beta1 = cluster_queue_with("  admissionChecks: [prov]\n").replace("v1beta2", "v1beta1");
    assert_eq!(import_err(&v1beta1)[0].path, "spec.admissionChecks");
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: kueue.x-k8s.io/v1beta2\n  kind: ClusterQueue\n  metadata: {name: q}\n  spec: {stopPolicy: HoldAndDrain}\n";
    assert_eq!(import_err(list)[0].path, "items[0].spec.stopPolicy");
}

#[test]
fn supported_values_and_typos_are_as_before() {
    // Hold is supported; an empty list of checks is no check at all.
    let docs = import_ok(&cluster_queue_with(
        "  stopPolicy: Hold\n  admissionChecks: []\n",
    ));
    let Object::ClusterQueue(cq) = &docs[0].object else {
        panic!()
    };
    assert_eq!(cq.spec.stop_policy, StopPolicy::Hold);
    assert!(cq.spec.admission_checks.is_empty());
    // A name Kueue does not have either is a typo.
    let text = lines(&import_err(&cluster_queue_with(
        "  admissionCheck: [prov]\n",
    )));
    assert!(
        text.contains("spec.admissionCheck: unknown field `admissionCheck`"),
        "{text}"
    );
    // Unsupported fields and the document's own mistakes are all reported.
    let text = lines(&import_err(&cluster_queue_with(
        "  admissionChecks: [prov]\n  queueingStrategy: Fifo\n",
    )));
    assert!(
        text.contains("spec.admissionChecks: not supported by fleetq"),
        "{text}"
    );
    assert!(text.contains("unknown variant `Fifo`"), "{text}");
}

#[test]
fn a_draining_local_queue_is_not_supported() {
    let yaml = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: ml}\nspec: {clusterQueue: q, stopPolicy: HoldAndDrain}\n";
    let text = lines(&import_err(yaml));
    assert!(text.starts_with("document 1: LocalQueue/ml/lq: spec.stopPolicy: not supported by fleetq: spec.stopPolicy: HoldAndDrain (fleetq does not evict"), "{text}");
    let Object::LocalQueue(lq) = &import_ok(&yaml.replace("HoldAndDrain", "Hold"))[0].object else {
        panic!()
    };
    assert_eq!(lq.spec.stop_policy, StopPolicy::Hold);
}

#[test]
fn unsupported_kueue_kinds_say_why() {
    for (kind, why) in [
        ("AdmissionCheck", "fleetq has no admission checks"),
        (
            "MultiKueueConfig",
            "fleetq is itself the multi-cluster dispatcher",
        ),
        (
            "MultiKueueCluster",
            "fleetq is itself the multi-cluster dispatcher",
        ),
        ("ProvisioningRequestConfig", "fleetq provisions no nodes"),
    ] {
        for version in ["v1beta1", "v1beta2"] {
            let yaml = format!("apiVersion: kueue.x-k8s.io/{version}\nkind: {kind}\nmetadata: {{name: x}}\nspec: {{}}\n");
            let errors = import_err(&yaml);
            assert_eq!(errors[0].path, "kind");
            assert!(
                errors[0]
                    .message
                    .starts_with(&format!("not supported by fleetq: {kind} (")),
                "{}",
                errors[0]
            );
            assert!(errors[0].message.contains(why), "{}", errors[0]);
        }
    }
    // Not Kueue's: the list of what fleetq imports.
    let text = lines(&import_err(
        "apiVersion: kubeflow.org/v1\nkind: MPIJob\nmetadata: {name: x}\n",
    ));
    assert!(
        text.contains("MPIJob is not supported: fleetq imports"),
        "{text}"
    );
}

#[test]
fn unsupported_workload_fields_say_why() {
    let base = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w}\nspec:\n  queueName: q\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]\n";
    let text = lines(&import_err(&format!(
        "{base}  preemptionGates: [{{name: example.com/gate}}]\n"
    )));
    assert!(
        text.contains("spec.preemptionGates: not supported by fleetq: spec.preemptionGates (fleetq has no preemption gates"),
        "{text}"
    );
    let text = lines(&import_err(&base.replace(
        "count: 1,",
        "count: 1, topologyRequest: {podSetGroupName: g},",
    )));
    assert!(
        text.contains("spec.podSets[0].topologyRequest.podSetGroupName: not supported by fleetq: spec.podSets[0].topologyRequest.podSetGroupName (it pairs pod sets of one workload"),
        "{text}"
    );
    assert!(import_ok(&format!("{base}  active: true\n  preemptionGates: []\n")).len() == 1);
    // Kueue's spec.active: false is an inactive workload, and round-trips.
    let inactive = import_ok(&format!("{base}  active: false\n"));
    let Object::Workload(w) = &inactive[0].object else {
        panic!("a Workload");
    };
    assert!(w.spec.inactive);
    let exported = fleetq_model::kueue::export::object(&inactive[0].object);
    assert_eq!(exported["spec"]["active"], serde_json::Value::Bool(false));
}

#[test]
fn controller_settings_of_kueues_configuration_are_accepted() {
    let docs = import_ok(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\npprofBindAddress: :8083\ntls: {minVersion: VersionTLS12}\nvisibilityServer: {}\n",
    );
    assert!(matches!(docs[0].object, Object::Configuration(_)));
}

/// Kueue's API: "namespaceSelector ... Defaults to null which is a nothing
/// selector (no namespaces eligible). If set to an empty selector `{}`,
/// then all namespaces are eligible." Both survive export and import.
#[test]
fn a_missing_namespace_selector_selects_no_namespace_as_in_kueue() {
    let queue = |selector: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: q}}\nspec:\n{selector}  resourceGroups: []\n"
        )
    };
    for (selector, admits_a, admits_b) in [
        ("", false, false),
        ("  namespaceSelector: {}\n", true, true),
        (
            "  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: a}}\n",
            true,
            false,
        ),
    ] {
        let set = set_of(&[queue(selector)]);
        let cq = cq(&set, "q");
        assert_eq!(
            (
                set.config.admits_namespace(cq, "a"),
                set.config.admits_namespace(cq, "b")
            ),
            (admits_a, admits_b),
            "{selector:?}"
        );
        // Exported as Kueue writes it, and imported back the same.
        let exported = fleetq_model::kueue::export::object(&Object::ClusterQueue(cq.clone()));
        assert_eq!(
            exported["spec"].get("namespaceSelector").is_some(),
            !selector.is_empty(),
            "{selector:?}: {exported}"
        );
        let yaml = serde_json::to_string(&exported).expect("json");
        let again = set_of(&[yaml]);
        assert_eq!(again.config.cluster_queues["q"], *cq, "{selector:?}");
    }
    // fleetq's stored form keeps "no selector" as every namespace, so
    // objects applied before the importer stored Kueue's nil replay alike.
    let shorthand: Config =
        serde_norway::from_str("- kind: ClusterQueue\n  name: q\n  spec: {resourceGroups: []}\n")
            .map(|objects: Vec<Object>| {
                let mut config = Config::default();
                for o in objects {
                    let _ = config.upsert(o);
                }
                config
            })
            .expect("shorthand");
    let q = &shorthand.cluster_queues["q"];
    assert!(shorthand.admits_namespace(q, "a"));
    let exported = fleetq_model::kueue::export::object(&Object::ClusterQueue(q.clone()));
    assert_eq!(exported["spec"]["namespaceSelector"], serde_json::json!({}));
}

/// Fair-sharing weights keep Kubernetes' nano precision (issue 28): `2n`
/// is stored as 2e-9, not rounded up to 1m, and Kueue's refusal of `1n`
/// names the field.
#[test]
fn fair_sharing_weights_keep_nano_precision() {
    let manifest = |name: &str, weight: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n  namespaceSelector: {{}}\n  fairSharing: {{weight: {weight}}}\n"
        )
    };
    let docs = import_ok(&manifest("b", "2n"));
    let fleetq_model::config::Object::ClusterQueue(cq) = &docs[0].object else {
        panic!("{:?}", docs[0].object);
    };
    assert_eq!(cq.fair_sharing_weight().nanos(), 2);
    let mut config = fleetq_model::Config::default();
    config.upsert(docs[0].object.clone()).expect("upsert");
    assert!(config.validate().is_empty());

    let docs = import_ok(&manifest("a", "1n"));
    let mut config = fleetq_model::Config::default();
    config.upsert(docs[0].object.clone()).expect("upsert");
    let errors = config.validate();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("ClusterQueue/a")
                && e.to_string().contains("spec.fairSharing.weight")
                && e.to_string().contains("1e-9")),
        "{errors:?}"
    );
}

/// On `fleetq dev` the simulated executor runs a workload for its
/// `run.duration`: a Job or JobSet says how long with `fleetq.dev/duration`
/// (without it, it runs until stopped).
#[test]
fn jobs_and_jobsets_take_a_simulated_duration() {
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: q}\n  annotations: {fleetq.dev/duration: 90s}\nspec:\n  template:\n    spec:\n      containers: [{name: c}]\n";
    assert_eq!(
        imported_workload(job).spec.run.duration,
        Some(Duration::from_secs(90))
    );
    let jobset = TRAINING_JOBSET.replace(
        "  name: train\n",
        "  name: train\n  annotations: {fleetq.dev/duration: 2m}\n",
    );
    assert_eq!(
        imported_workload(&jobset).spec.run.duration,
        Some(Duration::from_secs(120))
    );
    let errors = lines(&import_err(&job.replace("90s", "soon")));
    assert!(
        errors.contains(r#"metadata.annotations["fleetq.dev/duration"]"#),
        "{errors}"
    );
}

/// A pod of Kueue's KEP-976 example: a group `ray` of one driver and
/// workers that differ only in their command.
fn group_pod(name: &str, role: &str, total: &str) -> String {
    let (image, gpus) = if role == "driver" {
        ("driver:1", "0")
    } else {
        ("worker:1", "1")
    };
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: team-a
    kueue.x-k8s.io/pod-group-name: ray
    app: {role}
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "{total}"
    fleetq.dev/duration: 30s
spec:
  restartPolicy: Never
  schedulingGates: [{{name: kueue.x-k8s.io/admission}}]
  containers:
  - name: main
    image: {image}
    command: [run, {name}]
    resources:
      requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}
      limits: {{nvidia.com/gpu: "{gpus}"}}
"#
    )
}

fn ray_group(total: &str) -> String {
    [
        group_pod("ray-driver", "driver", total),
        group_pod("ray-worker-0", "worker", total),
        group_pod("ray-worker-1", "worker", total),
    ]
    .join("---\n")
}

#[test]
fn a_plain_pod_is_a_workload_of_one_pod() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: notebook\n  namespace: team-a\n  labels: {kueue.x-k8s.io/queue-name: team-a}\nspec:\n  priorityClassName: high\n  containers:\n  - name: main\n    image: jupyter:1\n    resources: {limits: {nvidia.com/gpu: \"1\"}}\n";
    let docs = import_ok(pod);
    assert_eq!(
        (docs[0].source.kind.as_str(), docs[0].source.name.as_str()),
        ("Pod", "Pod/team-a/notebook")
    );
    let workload = imported_workload(pod);
    assert_eq!(
        (workload.namespace.as_str(), workload.name.as_str()),
        ("team-a", "notebook")
    );
    let [pod_set] = workload.spec.pod_sets.as_slice() else {
        panic!("{:?}", workload.spec.pod_sets)
    };
    assert_eq!((pod_set.name.as_str(), pod_set.count), ("main", 1));
    assert_eq!(pod_set.requests["nvidia.com/gpu"], q("1"));
    assert_eq!(workload.spec.priority_class_name.as_deref(), Some("high"));
    let template = workload.spec.run.job_template.as_ref().expect("kept");
    assert_eq!(template["kind"], "Pod");
    assert_eq!(
        fleetq_model::kueue::job_template_problem(&workload.spec),
        None
    );
}

#[test]
fn a_pod_group_is_one_workload_with_a_pod_set_per_role() {
    let workload = imported_workload(&ray_group("3"));
    assert_eq!(
        (workload.namespace.as_str(), workload.name.as_str()),
        ("team-a", "ray")
    );
    let sets: Vec<(usize, u32, Option<Quantity>)> = workload
        .spec
        .pod_sets
        .iter()
        .map(|p| {
            (
                p.name.len(),
                p.count,
                p.requests.get("nvidia.com/gpu").copied(),
            )
        })
        .collect();
    // Roles hash to 8 hex digits; the command differs between the
    // workers, but it does not make a role.
    assert_eq!(sets, [(8, 1, None), (8, 2, Some(q("1")))]);
    assert!(workload.spec.pod_sets[0]
        .name
        .chars()
        .all(|c| c.is_ascii_hexdigit()));
    assert_eq!(workload.spec.run.duration, Some(Duration::from_secs(30)));
    let template = workload.spec.run.job_template.as_ref().expect("kept");
    assert_eq!(template["kind"], "List");
    assert_eq!(template["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        fleetq_model::kueue::job_template_problem(&workload.spec),
        None
    );

    // The same pods in a v1 List, as kubectl get -o yaml writes them.
    let items: Vec<String> = ray_group("3")
        .split("---\n")
        .map(|doc| {
            let indented: Vec<String> = doc.lines().map(|l| format!("  {l}")).collect();
            format!("- {}", indented.join("\n").trim_start())
        })
        .collect();
    let list = format!("apiVersion: v1\nkind: List\nitems:\n{}\n", items.join("\n"));
    let from_list = imported_workload(&list);
    assert_eq!(from_list.spec.pod_sets, workload.spec.pod_sets);
}

#[test]
fn a_pod_group_is_refused_incomplete_or_inconsistent() {
    let two_of_three = [
        group_pod("ray-driver", "driver", "3"),
        group_pod("ray-worker-0", "worker", "3"),
    ]
    .join("---\n");
    let errors = lines(&import_err(&two_of_three));
    assert!(
        errors.contains(r#"document 2: Pod/team-a/ray-worker-0: metadata.annotations["kueue.x-k8s.io/pod-group-total-count"]: pod group team-a/ray has 2 pods in the manifest, but its total count is 3"#),
        "{errors}"
    );

    let mixed = ray_group("3")
        .replacen("pod-group-total-count: \"3\"", "pod-group-total-count: \"4\"", 1)
        .replacen(
            "kueue.x-k8s.io/queue-name: team-a\n    kueue.x-k8s.io/pod-group-name: ray\n    app: worker",
            "kueue.x-k8s.io/queue-name: team-b\n    kueue.x-k8s.io/pod-group-name: ray\n    app: worker",
            1,
        )
        .replacen("name: ray-worker-1", "name: ray-worker-0", 1);
    let errors = lines(&import_err(&mixed));
    for expected in [
        "this pod says 3 pods, its first pod (ray-driver) says 4",
        r#"metadata.labels["kueue.x-k8s.io/queue-name"]: pod group team-a/ray: this pod names LocalQueue "team-b""#,
        r#"metadata.name: pod group team-a/ray has two pods named "ray-worker-0""#,
    ] {
        assert!(errors.contains(expected), "{expected}\nnot in:\n{errors}");
    }

    let one = group_pod("p", "worker", "1");
    for (bad, expected) in [
        (
            one.replace("    kueue.x-k8s.io/pod-group-total-count: \"1\"\n", ""),
            r#"metadata.annotations["kueue.x-k8s.io/pod-group-total-count"]: is required on a pod of a group"#,
        ),
        (
            one.replace("    kueue.x-k8s.io/pod-group-name: ray\n", ""),
            "is set, but the pod has no kueue.x-k8s.io/pod-group-name label",
        ),
        (
            one.replace("total-count: \"1\"", "total-count: \"0\""),
            r#""0" must be a whole number of pods, at least 1"#,
        ),
        (
            one.replace("pod-group-name: ray", "pod-group-name: Ray_Group"),
            r#"metadata.labels["kueue.x-k8s.io/pod-group-name"]: "Ray_Group" names the group's Workload"#,
        ),
        (
            one.replace(
                "    fleetq.dev/duration: 30s\n",
                "    kueue.x-k8s.io/job-min-parallelism: \"1\"\n",
            ),
            "not supported by fleetq",
        ),
        (
            one.replace(
                "    fleetq.dev/duration: 30s\n",
                "    kueue.x-k8s.io/podset-required-topology: rack\n",
            ),
            "a plain Pod or pod group is placed without one",
        ),
        (
            one.replace("    kueue.x-k8s.io/queue-name: team-a\n", ""),
            "is required: it names the LocalQueue the Pod is submitted to",
        ),
    ] {
        let errors = lines(&import_err(&bad));
        assert!(errors.contains(expected), "{expected}\nnot in:\n{errors}");
    }

    // More roles than a workload has pod sets.
    let many: Vec<String> = (0..20)
        .map(|i| {
            group_pod(&format!("p{i}"), "worker", "20").replace("worker:1", &format!("worker:{i}"))
        })
        .collect();
    let errors = lines(&import_err(&many.join("---\n")));
    assert!(
        errors.contains("pod group team-a/ray has 20 roles"),
        "{errors}"
    );
}

#[test]
fn a_pod_group_template_asks_for_no_more_than_its_charge() {
    let workload = imported_workload(&ray_group("3"));
    let mut extra = workload.clone();
    let template = extra.spec.run.job_template.as_mut().expect("kept");
    let worker = template["items"][2].clone();
    template["items"].as_array_mut().expect("list").push(worker);
    let (path, message) = fleetq_model::kueue::job_template_problem(&extra.spec).expect("refused");
    assert_eq!(path, "run.jobTemplate.items[3]");
    assert!(message.contains("which is charged for 2"), "{message}");

    let mut greedy = workload.clone();
    let template = greedy.spec.run.job_template.as_mut().expect("kept");
    template["items"][0]["spec"]["containers"][0]["image"] = "other:1".into();
    let (path, message) = fleetq_model::kueue::job_template_problem(&greedy.spec).expect("refused");
    assert_eq!(path, "run.jobTemplate.items[0]");
    assert!(
        message.contains("not a pod set of the workload"),
        "{message}"
    );
}

/// Kueue's own examples (site/static/examples/pods-kueue): a plain Pod,
/// and a group of two identical pods made with generateName.
#[test]
fn kueue_pod_examples_import_as_kueue_builds_their_workloads() {
    let pod = imported_workload(&fixture("kueue-pod.yaml"));
    assert!(pod.name.starts_with("kueue-sleep-"), "{}", pod.name);
    assert_eq!(pod.spec.queue_name, "user-queue");
    assert_eq!(
        pod.spec
            .pod_sets
            .iter()
            .map(|p| (p.name.as_str(), p.count))
            .collect::<Vec<_>>(),
        [("main", 1)]
    );
    let group = imported_workload(&fixture("kueue-pod-group.yaml"));
    assert_eq!(group.name, "sample-group");
    let [pod_set] = group.spec.pod_sets.as_slice() else {
        panic!("one role: {:?}", group.spec.pod_sets)
    };
    assert_eq!(pod_set.count, 2);
    assert_eq!(pod_set.requests["cpu"], q("3"));
    let template = group.spec.run.job_template.as_ref().expect("kept");
    let names: Vec<&str> = template["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["generateName"].as_str())
        .collect();
    assert_eq!(names, ["sample-pod-", "sample-pod-"]);
}
