//! Regressions found by the fuzz targets under fuzz/ (README, "Fuzzing").

use fleetq_model::config::Object;
use fleetq_model::kueue::import_manifests;
use fleetq_model::time::MAX_DURATION_SECS;
use fleetq_model::Workload;

fn workload_json(max_exec: u64) -> String {
    format!(
        r#"{{"namespace":"default","name":"w","spec":{{"queueName":"q","podSets":[],
        "maximumExecutionTime":{max_exec}}}}}"#
    )
}

/// command_decode: a duration given as whole seconds beyond what fits in
/// u64 milliseconds was accepted, but its text form (which counts
/// milliseconds) clamped it, so a log entry decoded to another value than
/// the leader proposed. Such durations are refused; the largest one kept
/// round-trips.
#[test]
fn a_duration_too_large_for_its_text_form_is_refused() {
    let err = serde_json::from_str::<Workload>(&workload_json(MAX_DURATION_SECS + 1))
        .expect_err("too large");
    assert!(err.to_string().contains("too large"), "{err}");
    assert!(fleetq_model::time::parse_duration(&(MAX_DURATION_SECS + 1).to_string()).is_err());

    let w: Workload = serde_json::from_str(&workload_json(MAX_DURATION_SECS)).expect("largest");
    let back: Workload =
        serde_json::from_str(&serde_json::to_string(&w).expect("encode")).expect("decode");
    assert_eq!(back, w);
}

fn job(deadline: &str) -> String {
    format!(
        r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {{kueue.x-k8s.io/queue-name: team-a}}
spec:
  activeDeadlineSeconds: {deadline}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources:
          requests: {{nvidia.com/gpu: 1}}
"#
    )
}

/// kueue_import: a Job's `activeDeadlineSeconds` (an int64) became a
/// maximum execution time that did not survive the JSON of the Raft log.
#[test]
fn a_job_deadline_too_large_for_fleetq_is_refused_naming_the_field() {
    let errors = import_manifests(&job("9223372036854775807")).expect_err("too large");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].path, "spec.activeDeadlineSeconds", "{errors:?}");

    let documents = import_manifests(&job(&MAX_DURATION_SECS.to_string())).expect("largest");
    let Object::Workload(w) = &documents[0].object else {
        panic!("a Job imports as a Workload: {documents:?}");
    };
    let back: Workload =
        serde_json::from_str(&serde_json::to_string(w).expect("encode")).expect("decode");
    assert_eq!(&back, w);
}
