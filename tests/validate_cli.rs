//! `fleetq validate` as a user runs it: the real binary, real files, exit
//! codes, stdout and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const QUEUES: &str = r#"# Two teams share an H100 pool and spill onto A100s.
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohortName: gpu-pool
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 4}
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  cohort: gpu-pool
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: gpu-pool}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: team-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: team-b}
spec: {clusterQueue: team-b}
"#;

const PRIORITIES: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: normal}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10000
description: production training
"#;

const WORKLOAD: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: finetune, namespace: team-a}
spec:
  queueName: research
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  priority: 10000
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - name: trainer
          image: ghcr.io/acme/finetune:1
          resources:
            requests: {cpu: "8", nvidia.com/gpu: 4}
"#;

const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: eval
  namespace: team-b
  labels:
    kueue.x-k8s.io/queue-name: research
    kueue.x-k8s.io/priority-class: low
spec:
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: eval
        image: ghcr.io/acme/eval:1
        resources:
          limits: {nvidia.com/gpu: 1}
"#;

fn fleetq(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fleetq"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("fleetq runs")
}

fn write_files(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write manifest");
    }
    dir
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn kueue_docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fleetq-model/tests/testdata/kueue-docs")
}

#[test]
fn valid_set_prints_counts_and_exits_zero() {
    let dir = write_files(&[
        ("queues.yaml", QUEUES),
        ("priorities.yaml", PRIORITIES),
        ("workload.yaml", WORKLOAD),
    ]);
    let args = [
        "validate",
        "-f",
        "queues.yaml",
        "-f",
        "priorities.yaml",
        "--filename",
        "workload.yaml",
    ];
    let output = fleetq(&args, dir.path());
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "ok: 2 ResourceFlavor, 1 Cohort, 2 ClusterQueue, 2 LocalQueue, 3 WorkloadPriorityClass, 1 Workload\n"
    );
    assert_eq!(stderr(&output), "");
}

#[test]
fn a_directory_and_jobs() {
    let dir = write_files(&[
        ("1-queues.yaml", QUEUES),
        ("2-priorities.yml", PRIORITIES),
        ("3-job.yaml", JOB),
        ("README.md", "not a manifest"),
    ]);
    let output = fleetq(&["validate", "-f", "."], dir.path());
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "ok: 2 ResourceFlavor, 1 Cohort, 2 ClusterQueue, 2 LocalQueue, 3 WorkloadPriorityClass, 1 Job\n"
    );
}

#[test]
fn reads_standard_input() {
    let dir = write_files(&[("priorities.yaml", PRIORITIES)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetq"))
        .args(["validate", "-f", "-", "-f", "priorities.yaml"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fleetq starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(QUEUES.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("fleetq ends");
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    assert!(stdout(&output).starts_with("ok: 2 ResourceFlavor"));
}

#[test]
fn kueue_doc_examples_validate() {
    let docs = kueue_docs();
    let file = |name: &str| docs.join(name).display().to_string();
    let (setup, job, priority) = (
        file("single-clusterqueue-setup.yaml"),
        file("sample-job.yaml"),
        file("workload-priority.yaml"),
    );
    let output = fleetq(
        &["validate", "-f", &setup, "-f", &job, "-f", &priority],
        &docs,
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr:\n{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "ok: 1 ResourceFlavor, 1 ClusterQueue, 1 LocalQueue, 1 WorkloadPriorityClass, 1 Workload, 2 Job\n"
    );
}

/// One file per kind of mistake; each error must show up on its own line
/// with file, document, object and field path.
#[test]
fn invalid_set_reports_every_error_with_its_path() {
    let lending = QUEUES.replace(
        "{name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 4}",
        "{name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 10}",
    );
    let unknown_field = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: b200}\nspec:\n  nodeLabel: {gpu: b200}\n";
    let bad_topology = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: default}\nspec: {levels: [{nodeLabel: kubernetes.io/hostname}, {nodeLabel: rack}]}\n";
    let missing_priority = JOB.replace("priority-class: low", "priority-class: urgent");
    let orphan_lq = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: orphan, namespace: team-c}\nspec: {clusterQueue: team-c}\n";
    let negative = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-n}\nspec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: -1}]\n";
    let malformed =
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: [oops\n";
    let dir = write_files(&[
        ("queues.yaml", &lending),
        ("priorities.yaml", PRIORITIES),
        ("flavor.yaml", unknown_field),
        ("topology.yaml", bad_topology),
        ("job.yaml", &missing_priority),
        ("orphan.yaml", orphan_lq),
        ("negative.yaml", negative),
        ("malformed.yaml", malformed),
    ]);
    let expected = [
        ("queues.yaml", "queues.yaml: document 3: ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: 10 exceeds nominalQuota 8"),
        ("flavor.yaml", "flavor.yaml: document 1: ResourceFlavor/b200: spec.nodeLabel: unknown field `nodeLabel`"),
        ("topology.yaml", "topology.yaml: document 1: Topology/default: spec.levels[0].nodeLabel: kubernetes.io/hostname can only be the last (lowest) level"),
        ("job.yaml", r#"job.yaml: document 1: Job/team-b/eval: metadata.labels["kueue.x-k8s.io/priority-class"]: WorkloadPriorityClass "urgent" does not exist"#),
        ("orphan.yaml", r#"orphan.yaml: document 1: LocalQueue/team-c/orphan: spec.clusterQueue: ClusterQueue "team-c" does not exist"#),
        ("negative.yaml", r#"negative.yaml: document 1: ClusterQueue/team-n: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: quantity "-1" is negative"#),
        ("malformed.yaml", "malformed.yaml: document 1: malformed YAML: "),
    ];

    // All together: every error, each on its own line, then the count.
    let mut args = vec!["validate"];
    for name in [
        "queues.yaml",
        "priorities.yaml",
        "flavor.yaml",
        "topology.yaml",
        "job.yaml",
        "orphan.yaml",
        "negative.yaml",
        "malformed.yaml",
    ] {
        args.extend(["-f", name]);
    }
    let output = fleetq(&args, dir.path());
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), expected.len() + 1, "{err}");
    for (_, line) in expected {
        assert!(
            lines.iter().any(|l| l.starts_with(line)),
            "missing {line:?} in\n{err}"
        );
    }
    assert_eq!(lines.last(), Some(&"7 errors"));

    // Each mistake alone, with the configuration it needs.
    for (file, line) in expected {
        let output = fleetq(
            &[
                "validate",
                "-f",
                "queues.yaml",
                "-f",
                "priorities.yaml",
                "-f",
                file,
            ],
            dir.path(),
        );
        assert_eq!(output.status.code(), Some(1), "{file}");
        let err = stderr(&output);
        assert!(
            err.lines().any(|l| l.starts_with(line)),
            "{file}: missing {line:?} in\n{err}"
        );
    }
}

#[test]
fn duplicate_objects_name_both_documents() {
    let dir = write_files(&[("a.yaml", QUEUES), ("b.yaml", QUEUES)]);
    let output = fleetq(&["validate", "-f", "a.yaml", "-f", "b.yaml"], dir.path());
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("b.yaml: document 3: ClusterQueue/team-a: duplicate: ClusterQueue/team-a is also defined in a.yaml document 3"),
        "{err}"
    );
    assert!(err.ends_with("7 errors\n"), "{err}");
}

#[test]
fn unreadable_file_is_one_clear_line() {
    let dir = write_files(&[("queues.yaml", QUEUES)]);
    let output = fleetq(
        &["validate", "-f", "queues.yaml", "-f", "nope.yaml"],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("nope.yaml: cannot read: "), "{err}");
    assert_eq!(lines[1], "1 error");
}

#[test]
fn usage_errors_exit_two_and_help_explains() {
    let dir = write_files(&[]);
    assert_eq!(fleetq(&["validate"], dir.path()).status.code(), Some(2));
    assert_eq!(fleetq(&["frobnicate"], dir.path()).status.code(), Some(2));

    let help = fleetq(&["--help"], dir.path());
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("validate"), "{}", stdout(&help));
    let help = fleetq(&["validate", "--help"], dir.path());
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    for needle in ["--filename <FILE>", "-f", "standard input", "offline"] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
}

/// Extended resources are counted in whole units, as in Kubernetes:
/// fractions of GPUs are refused in ClusterQueue quotas, Workload pod
/// sets, Job containers and `fleetq submit --request`, naming the field.
#[test]
fn fractional_devices_are_refused_naming_the_field() {
    let whole =
        "is not a whole number; extended resources are counted in whole units, as in Kubernetes";
    let queues = QUEUES
        .replace(
            "{name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 4}",
            "{name: nvidia.com/gpu, nominalQuota: 7.5, lendingLimit: 4}",
        )
        .replace(
            "{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 4}",
            "{name: nvidia.com/gpu, nominalQuota: 4, borrowingLimit: 500m}",
        );
    let workload = WORKLOAD.replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 1.5");
    let job = JOB.replace("{nvidia.com/gpu: 1}", "{nvidia.com/mig-1g.10gb: 0.5}");
    let dir = write_files(&[
        ("queues.yaml", &queues),
        ("good-queues.yaml", QUEUES),
        ("priorities.yaml", PRIORITIES),
        ("workload.yaml", &workload),
        ("job.yaml", &job),
    ]);
    let output = fleetq(&["validate", "-f", "queues.yaml"], dir.path());
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    for line in [
        format!("queues.yaml: document 3: ClusterQueue/team-a: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: nvidia.com/gpu: 7500m {whole}"),
        format!("queues.yaml: document 3: ClusterQueue/team-a: spec.resourceGroups[0].flavors[1].resources[1].borrowingLimit: nvidia.com/gpu: 500m {whole}"),
    ] {
        assert!(err.lines().any(|l| l == line), "missing {line:?} in\n{err}");
    }
    let output = fleetq(
        &[
            "validate",
            "-f",
            "good-queues.yaml",
            "-f",
            "priorities.yaml",
            "-f",
            "workload.yaml",
            "-f",
            "job.yaml",
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    for line in [
        format!(
            r#"workload.yaml: document 1: Workload/team-a/finetune: spec.podSets[0].template.spec.containers[0].resources.requests["nvidia.com/gpu"]: nvidia.com/gpu: 1500m {whole}"#
        ),
        format!(
            r#"job.yaml: document 1: Job/team-b/eval: spec.template.spec.containers[0].resources.limits["nvidia.com/mig-1g.10gb"]: nvidia.com/mig-1g.10gb: 500m {whole}"#
        ),
    ] {
        assert!(err.lines().any(|l| l == line), "missing {line:?} in\n{err}");
    }
    assert!(err.ends_with("2 errors\n"), "{err}");

    // `fleetq submit` refuses before it calls any server.
    let output = fleetq(
        &[
            "submit",
            "--server",
            "127.0.0.1:1",
            "--queue",
            "research",
            "--name",
            "half",
            "--request",
            "cpu=1.5",
            "--request",
            "nvidia.com/gpu=1.5",
        ],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output),
        format!("error: --request \"nvidia.com/gpu=1.5\": nvidia.com/gpu: 1500m {whole}\n")
    );
}

/// What Kueue's API has and fleetq does not is refused as "not supported
/// by fleetq", with why; "unknown field" is for typos.
#[test]
fn unsupported_kueue_fields_and_kinds_say_so() {
    let checks = QUEUES.replace(
        "  cohort: gpu-pool\n",
        "  cohort: gpu-pool\n  admissionChecks: [prov]\n  stopPolicy: HoldAndDrain\n",
    );
    let kinds = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: prov}\nspec: {controllerName: kueue.x-k8s.io/provisioning-request}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: MultiKueueConfig\nmetadata: {name: mk}\nspec: {clusters: [east]}\n";
    let typo = QUEUES.replace(
        "  cohort: gpu-pool\n",
        "  cohort: gpu-pool\n  admisionChecks: [prov]\n",
    );
    let dir = write_files(&[
        ("checks.yaml", &checks),
        ("kinds.yaml", kinds),
        ("typo.yaml", &typo),
    ]);
    let output = fleetq(
        &["validate", "-f", "checks.yaml", "-f", "kinds.yaml"],
        dir.path(),
    );
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    for line in [
        "checks.yaml: document 4: ClusterQueue/team-b: spec.admissionChecks: not supported by fleetq: spec.admissionChecks (fleetq has no admission checks: a workload is admitted as soon as its quota is reserved on a cluster)",
        "checks.yaml: document 4: ClusterQueue/team-b: spec.stopPolicy: not supported by fleetq: spec.stopPolicy: HoldAndDrain (fleetq does not evict the running workloads of a stopped queue; use Hold, and cancel the workloads that must stop)",
        "kinds.yaml: document 1: AdmissionCheck/prov: kind: not supported by fleetq: AdmissionCheck (fleetq has no admission checks: a workload is admitted as soon as its quota is reserved on a cluster)",
    ] {
        assert!(err.lines().any(|l| l == line), "missing {line:?} in\n{err}");
    }
    assert!(
        err.contains("kinds.yaml: document 2: MultiKueueConfig/mk: kind: not supported by fleetq: MultiKueueConfig (fleetq is itself the multi-cluster dispatcher"),
        "{err}"
    );
    assert!(!err.contains("unknown field"), "{err}");
    let output = fleetq(&["validate", "-f", "typo.yaml"], dir.path());
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("spec.admisionChecks: unknown field `admisionChecks`"),
        "{}",
        stderr(&output)
    );
}
