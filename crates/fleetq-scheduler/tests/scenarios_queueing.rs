//! Scenario tests for who waits and why: queueing strategies, stopped
//! queues, priority classes, misconfiguration, GPU-second budgets and
//! admission fair sharing between LocalQueues.

mod common;

use common::{set, Sim};
use fleetq_model::Timestamp;
use fleetq_scheduler::ReasonKind;

/// Two independent 8-GPU queues that differ only in queueingStrategy.
const STRATEGIES: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: strict
  spec:
    queueingStrategy: StrictFIFO
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: ClusterQueue
  name: best-effort
  spec:
    queueingStrategy: BestEffortFIFO
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: strict
  spec: {clusterQueue: strict}
- kind: LocalQueue
  namespace: ns
  name: best-effort
  spec: {clusterQueue: best-effort}
"#;

#[test]
fn strict_fifo_blocks_behind_an_inadmissible_head_best_effort_does_not() {
    let mut s = Sim::new(STRATEGIES, &["east: h100/nvidia.com/gpu=16"]);
    for q in ["strict", "best-effort"] {
        s.submit(&format!("{q}-running q={q} gpu=6"));
    }
    s.cycle();
    for q in ["strict", "best-effort"] {
        s.submit(&format!("{q}-head q={q} gpu=4"));
        s.submit(&format!("{q}-small q={q} gpu=2"));
        s.submit(&format!("{q}-small2 q={q} gpu=1"));
    }
    s.cycle();
    // Both heads wait for quota: 2 of 8 left, 4 wanted.
    for q in ["strict", "best-effort"] {
        s.assert_waits(
            &format!("{q}-head"),
            ReasonKind::WaitingForQuota,
            &["2 more needed (requested 4, available 2)"],
        );
    }
    // BestEffortFIFO lets the small one behind the head through ...
    assert_eq!(s.admitted_now(), set(&["best-effort-small"]));
    assert_eq!(
        s.reason_kind("best-effort-small2"),
        ReasonKind::WaitingForQuota
    );
    // ... StrictFIFO keeps everything behind its head waiting, and says so.
    for name in ["strict-small", "strict-small2"] {
        s.assert_waits(
            name,
            ReasonKind::BlockedByHead,
            &["waiting behind ns/strict-head", "2 more needed"],
        );
    }
    // When the head fits, the strict queue moves in order.
    s.finish("strict-running");
    s.cycle();
    assert_eq!(
        s.admitted_now(),
        set(&["strict-head", "strict-small", "strict-small2"])
    );
}

#[test]
fn strict_fifo_lets_higher_priority_work_ahead_of_its_head() {
    let yaml = format!(
        "{STRATEGIES}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
"
    );
    let mut s = Sim::new(&yaml, &["east: h100/nvidia.com/gpu=16"]);
    s.submit("running q=strict gpu=6");
    s.cycle();
    s.submit("head q=strict gpu=4");
    s.submit("urgent q=strict gpu=2 pc=high");
    s.cycle();
    // Priority orders the queue first; FIFO only among equals.
    assert_eq!(s.admitted_now(), set(&["urgent"]));
    assert_eq!(s.reason_kind("head"), ReasonKind::WaitingForQuota);
}

/// One 8-GPU queue with two LocalQueues; `{cq_stop}` and `{lq_stop}` are
/// the stopPolicy of the ClusterQueue and of LocalQueue `paused`.
const STOPPABLE: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    stopPolicy: CQ_STOP
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
- kind: LocalQueue
  namespace: ns
  name: paused
  spec: {clusterQueue: team, stopPolicy: LQ_STOP}
"#;

fn stoppable(cq: &str, lq: &str) -> String {
    STOPPABLE.replace("CQ_STOP", cq).replace("LQ_STOP", lq)
}

#[test]
fn stop_policy_hold_suspends_new_admissions_and_keeps_running_work() {
    let mut s = Sim::new(&stoppable("None", "None"), &["east: h100/nvidia.com/gpu=8"]);
    s.submit("running q=q gpu=4");
    s.cycle();
    s.reconfigure(&stoppable("Hold", "None"));
    s.submit("new q=q gpu=2");
    s.cycle();
    assert!(s.last.admissions.is_empty());
    s.assert_waits(
        "new",
        ReasonKind::Suspended,
        &["ClusterQueue \"team\" is stopped (stopPolicy Hold)"],
    );
    assert_eq!(s.running(), set(&["running"]));
    // Back to None: admitted.
    s.reconfigure(&stoppable("None", "None"));
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["new"]));
}

#[test]
fn a_held_local_queue_waits_while_its_cluster_queue_serves_the_others() {
    let mut s = Sim::new(&stoppable("None", "Hold"), &["east: h100/nvidia.com/gpu=8"]);
    s.submit("held q=paused gpu=2");
    s.submit("free q=q gpu=2");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["free"]));
    s.assert_waits(
        "held",
        ReasonKind::Suspended,
        &["LocalQueue ns/paused is stopped"],
    );
}

/// One 8-GPU queue that covers GPUs only, and a priority class.
const GPU_ONLY: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu, cpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
        - {name: cpu, nominalQuota: 64}
- kind: LocalQueue
  namespace: ns
  name: q
  spec: {clusterQueue: team}
- kind: WorkloadPriorityClass
  name: high
  value: 1000
"#;

#[test]
fn a_missing_priority_class_is_rejected_naming_the_field() {
    let mut s = Sim::new(GPU_ONLY, &["east: h100/nvidia.com/gpu=8"]);
    let errors = s.try_submit("w q=q gpu=1 pc=urgent").unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].object, "Workload/ns/w");
    assert_eq!(errors[0].path, "spec.priorityClassName");
    assert!(
        errors[0]
            .to_string()
            .contains("WorkloadPriorityClass \"urgent\" does not exist"),
        "{}",
        errors[0]
    );
    // Nothing was queued (no silent fallback to priority 0) ...
    assert_eq!(s.snap.pending_count(), 0);
    // ... while an existing class binds with its value.
    let id = s.submit("w2 q=q gpu=1 pc=high");
    assert_eq!(s.snap.get_pending(id).unwrap().priority, 1000);
}

#[test]
fn a_resource_the_cluster_queue_does_not_cover_is_misconfigured() {
    // At submission: refused, naming the request.
    let mut s = Sim::new(GPU_ONLY, &["east: h100/nvidia.com/gpu=8"]);
    let errors = s.try_submit("mig q=q mig=1").unwrap_err();
    assert_eq!(
        errors[0].path,
        "spec.podSets[0].requests[\"nvidia.com/mig-1g.10gb\"]"
    );
    // Queued while the ClusterQueue still covered cpu, then cpu was taken
    // out of it: the workload waits as Misconfigured; the rest is served.
    s.submit("needs-cpu q=q gpu=1 cpu=4");
    s.submit("gpu-only q=q gpu=1");
    let orphans = s.reconfigure(
        &GPU_ONLY
            .replace("[nvidia.com/gpu, cpu]", "[nvidia.com/gpu]")
            .replace("        - {name: cpu, nominalQuota: 64}\n", ""),
    );
    assert!(orphans.is_empty());
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["gpu-only"]));
    s.assert_waits(
        "needs-cpu",
        ReasonKind::Misconfigured,
        &["requests \"cpu\"", "ClusterQueue \"team\""],
    );
}

/// One 16-GPU queue shared by two tenants with the same GPU-second budget:
/// 3600 GPU-seconds per hour (one GPU-second per second), bursts of 7200.
const BUDGETS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 16}
- kind: LocalQueue
  namespace: ns
  name: burst
  spec:
    clusterQueue: team
    gpuBudget: {gpuSecondsPerHour: 3600, burstGpuSeconds: 7200}
- kind: LocalQueue
  namespace: ns
  name: quiet
  spec:
    clusterQueue: team
    gpuBudget: {gpuSecondsPerHour: 3600, burstGpuSeconds: 7200}
"#;

fn at_plus(t: Timestamp, millis: u64) -> Timestamp {
    Timestamp(t.0 + millis)
}

#[test]
fn a_tenant_past_its_gpu_second_budget_waits_until_it_refills() {
    let mut s = Sim::new(BUDGETS, &["east: h100/nvidia.com/gpu=16"]);
    // 2 GPUs x 30 min = 3600 GPU-seconds each: two fit the burst of 7200.
    for i in 0..3 {
        s.submit(&format!("burst{i} q=burst gpu=2 maxrun=30m"));
    }
    s.submit("quiet0 q=quiet gpu=2 maxrun=30m");
    s.submit("no-limit q=burst gpu=1");
    s.cycle();
    let t0 = s.now;
    assert_eq!(s.admitted_now(), set(&["burst0", "burst1", "quiet0"]));
    s.assert_waits(
        "burst2",
        ReasonKind::BudgetExhausted,
        &["0 GPU-seconds of budget left", "needs 3600"],
    );
    // 3600 GPU-seconds at one per second: exactly an hour from now.
    assert_eq!(s.reason("burst2").retry_at, Some(at_plus(t0, 3_600_000)));
    // A budgeted GPU workload must say how long it may run.
    s.assert_waits(
        "no-limit",
        ReasonKind::Misconfigured,
        &["spec.maximumExecutionTime"],
    );
    // Half way: half refilled, same retry time.
    s.advance("30m");
    s.cycle();
    assert!(s.last.admissions.is_empty());
    s.assert_waits("burst2", ReasonKind::BudgetExhausted, &["1800 GPU-seconds"]);
    assert_eq!(s.reason("burst2").retry_at, Some(at_plus(t0, 3_600_000)));
    // At the retry time it is admitted.
    s.advance("30m");
    s.cycle();
    assert!(s.now >= at_plus(t0, 3_600_000));
    assert_eq!(s.admitted_now(), set(&["burst2"]));
}

#[test]
fn a_release_refunds_the_unused_part_of_the_budget() {
    let mut s = Sim::new(BUDGETS, &["east: h100/nvidia.com/gpu=16"]);
    // 4 GPUs x 30 min = 7200 GPU-seconds: the whole burst.
    s.submit("big q=burst gpu=4 maxrun=30m");
    s.submit("next q=burst gpu=2 maxrun=15m");
    s.cycle();
    let t0 = s.now;
    assert_eq!(s.admitted_now(), set(&["big"]));
    // next needs 1800 GPU-seconds: half an hour of refill.
    assert_eq!(s.reason("next").retry_at, Some(at_plus(t0, 1_800_000)));
    // big ends after 10 of its 30 minutes: 2/3 of 7200 come back, on top
    // of the 600 refilled meanwhile.
    s.advance("10m");
    s.finish("big");
    let budget = s.snap.local_queue_state("ns/burst").budget.unwrap();
    assert_eq!(budget.tokens, (4800 + 600) * 1000);
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["next"]));
}

/// One 8-GPU queue shared by two LocalQueues under admission fair sharing.
const AFS: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: shared
  spec:
    admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: ns
  name: t1
  spec: {clusterQueue: shared}
- kind: LocalQueue
  namespace: ns
  name: t2
  spec: {clusterQueue: shared}
"#;

/// t1 submits four 2-GPU workloads, then t2 four.
fn afs_stream(yaml: &str) -> Sim {
    let mut s = Sim::new(yaml, &["east: h100/nvidia.com/gpu=8"]);
    for i in 0..4 {
        s.submit(&format!("x{i} q=t1 gpu=2"));
    }
    for i in 0..4 {
        s.submit(&format!("y{i} q=t2 gpu=2"));
    }
    s
}

#[test]
fn admission_fair_sharing_alternates_between_local_queues() {
    let mut s = afs_stream(AFS);
    s.cycle();
    // Each admission charges its LocalQueue an entry penalty, so t2 is
    // served as soon as t1 has had one, although t1's are older.
    assert_eq!(s.admitted_now(), set(&["x0", "y0", "x1", "y1"]));
}

#[test]
fn without_admission_fair_sharing_the_first_tenant_takes_all() {
    let mut s = afs_stream(&AFS.replace(
        "    admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n",
        "",
    ));
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["x0", "x1", "x2", "x3"]));
}

#[test]
fn admission_fair_sharing_alternates_across_cycles_too() {
    // Room for one workload per cycle: the entry penalty of the last
    // admission must still count in the next cycle, before any usage has
    // been sampled.
    let mut s = afs_stream(&AFS.replace("nominalQuota: 8", "nominalQuota: 2"));
    let mut order = Vec::new();
    for _ in 0..4 {
        s.cycle();
        let admitted: Vec<String> = s.admitted_now().into_iter().collect();
        assert_eq!(admitted.len(), 1);
        s.finish(&admitted[0]);
        order.push(admitted[0].clone());
    }
    assert_eq!(order, ["x0", "y0", "x1", "y1"]);
    // Each admission left 2 GPUs x 300 s of penalty on its LocalQueue; the
    // next usage sample folds it into the (decaying) usage.
    assert_eq!(s.snap.local_queue_state("ns/t1").afs_penalty, 1_200_000);
    let (now, half_life) = (s.now, s.cfg.afs_half_life);
    s.snap.record_local_queue_usage("ns/t1", 0, now, half_life);
    let t1 = s.snap.local_queue_state("ns/t1");
    assert_eq!((t1.afs_penalty, t1.afs.value), (0, 1_200_000));
}

#[test]
fn sampled_usage_puts_the_heavier_tenant_behind() {
    let mut s = afs_stream(&AFS.replace("nominalQuota: 8", "nominalQuota: 2"));
    // t1 has used 10 GPU-hours recently, t2 nothing.
    let now = s.now;
    let half_life = s.cfg.afs_half_life;
    s.snap
        .record_local_queue_usage("ns/t1", 36_000_000_000, now, half_life);
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["y0"]));
}

/// A ClusterQueue admits only from the namespaces its namespaceSelector
/// selects (issue 25: a tenant pointing a LocalQueue of its own namespace
/// at another team's queue must not spend its quota), and apply() refuses
/// a decision that ignores it.
#[test]
fn a_namespace_selector_keeps_other_namespaces_out() {
    const SELECTING: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    namespaceSelector:
      matchLabels: {team: a}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: ClusterQueue
  name: shared
  spec:
    namespaceSelector:
      matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: In, values: [team-b]}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: Namespace
  name: team-a
  labels: {team: a}
- kind: LocalQueue
  namespace: team-a
  name: q
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: team-b
  name: q
  spec: {clusterQueue: team-a}
- kind: LocalQueue
  namespace: team-b
  name: mine
  spec: {clusterQueue: shared}
"#;
    let mut s = Sim::new(SELECTING, &["east: h100/nvidia.com/gpu=16"]);
    s.submit_in("team-a", "own q=q gpu=2");
    s.submit_in("team-b", "intruder q=q gpu=2");
    s.submit_in("team-b", "by-name q=mine gpu=2");
    s.cycle();
    assert_eq!(s.admitted_now(), set(&["own", "by-name"]));
    let reason = s.reason("intruder");
    assert_eq!(reason.kind, ReasonKind::Misconfigured);
    assert!(
        reason
            .message
            .contains("doesn't match ClusterQueue selector")
            && reason.message.contains("\"team-b\""),
        "{}",
        reason.message
    );
}

/// Kueue's nil selector, as the importer stores it, admits no namespace,
/// and the reason says how to admit every one.
#[test]
fn a_queue_applied_without_a_selector_admits_no_namespace() {
    const NIL: &str = r#"
- kind: ResourceFlavor
  name: h100
- kind: ClusterQueue
  name: team-a
  spec:
    namespaceSelector:
      matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: DoesNotExist}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - name: h100
        resources:
        - {name: nvidia.com/gpu, nominalQuota: 8}
- kind: LocalQueue
  namespace: team-a
  name: q
  spec: {clusterQueue: team-a}
"#;
    let mut s = Sim::new(NIL, &["east: h100/nvidia.com/gpu=16"]);
    s.submit_in("team-a", "own q=q gpu=2");
    s.cycle();
    assert!(s.admitted_now().is_empty());
    let reason = s.reason("own");
    assert_eq!(reason.kind, ReasonKind::Misconfigured);
    assert!(
        reason
            .message
            .contains("`namespaceSelector: {}` selects every namespace"),
        "{}",
        reason.message
    );
}
