//! The simulated user: applies the configuration, submits the planned
//! workloads through the public API (to any node, retrying when a node is
//! unreachable or has no leader), then waits for quiescence and checks what
//! the API reports.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use fleetq_proto::v1 as pb;
use fleetq_proto::v1::fleet_q_client::FleetQClient;
use fleetq_server::transport::{Connector, Timeouts};
use serde_json::Value;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::net::SimConnector;
use crate::plan::{config_with_quota, Action, Plan, PlannedTopology, PlannedWorkload, Race};
use crate::sim::{node_addr, Violation};

/// How long one API call may take before the client tries another node.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a single write (apply, one submission) may keep failing.
const WRITE_LIMIT: Duration = Duration::from_secs(60);
/// How long the workloads may take to all succeed after the last
/// submission.
const QUIET_LIMIT: Duration = Duration::from_secs(180);
/// How long the replicas may take to agree once the workloads are done.
const CONVERGE_LIMIT: Duration = Duration::from_secs(30);

/// What the client saw in a passing run.
#[derive(Clone, Debug, Default)]
pub struct ClientSummary {
    /// Acknowledged submissions: name -> workload id.
    pub acknowledged: BTreeMap<String, u64>,
    /// Where the replicas converged.
    pub last_applied: u64,
    pub state_hash: String,
    /// Submissions that needed more than one try.
    pub retried_writes: usize,
    /// `EvictNotReady` commands the replicas applied (wait-for-ready
    /// timeouts that evicted and requeued an admission).
    pub evict_not_ready: u64,
    /// Finished workloads the replicas removed (retention).
    pub finished_removed: u64,
    /// Workloads the client tried to cancel: each may have been cancelled
    /// (even when the answer was lost) or may have succeeded first.
    pub cancelled: std::collections::BTreeSet<String>,
}

fn violation(check: &'static str, detail: impl Into<String>) -> Violation {
    Violation {
        check,
        detail: detail.into(),
    }
}

/// Codes after which the same call may succeed on another node or later.
fn retryable(status: &Status) -> bool {
    // tonic reports a connection the server closed mid-call (GOAWAY) as
    // Internal with the h2 error: the call never reached a verdict.
    let transport =
        status.code() == Code::Internal && status.message().starts_with("h2 protocol error");
    transport
        || matches!(
            status.code(),
            Code::Unavailable
                | Code::Unknown
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Aborted
        )
}

struct Api {
    clients: Vec<FleetQClient<Channel>>,
}

impl Api {
    fn new(nodes: u64) -> Result<Api, Violation> {
        let connector = SimConnector::new(Timeouts {
            request: REQUEST_TIMEOUT,
            ..Timeouts::default()
        });
        let clients = (1..=nodes)
            .map(|id| connector.channel(&node_addr(id)).map(FleetQClient::new))
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| violation("client setup", e))?;
        Ok(Api { clients })
    }

    /// Calls `call` on node `first` and then the others in turn until it
    /// succeeds; gives up on an error that is not transient or after
    /// `limit`. Returns the reply and the number of failed tries.
    async fn retry<T, F, Fut>(
        &self,
        what: &str,
        first: usize,
        limit: Duration,
        mut call: F,
    ) -> Result<(T, usize), Violation>
    where
        F: FnMut(FleetQClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let started = Instant::now();
        let mut node = first;
        let mut failures = 0;
        loop {
            let client = self.clients[node % self.clients.len()].clone();
            match call(client).await {
                Ok(reply) => return Ok((reply.into_inner(), failures)),
                Err(status) if retryable(&status) => {
                    failures += 1;
                    if started.elapsed() >= limit {
                        return Err(violation(
                            "liveness",
                            format!(
                                "{what}: no success within {limit:?} ({failures} tries); last error from n{}: {status}",
                                node % self.clients.len() + 1
                            ),
                        ));
                    }
                    node += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(status) => {
                    return Err(violation(
                        "API refusal",
                        format!(
                            "{what}: n{} answered {status}",
                            node % self.clients.len() + 1
                        ),
                    ))
                }
            }
        }
    }
}

/// Kueue's `topologyRequest` of a pod set.
fn topology_request(topology: PlannedTopology) -> Value {
    match topology {
        PlannedTopology::Required(level) => serde_json::json!({"required": level}),
        PlannedTopology::Preferred(level) => serde_json::json!({"preferred": level}),
        PlannedTopology::Slices { level, size } => serde_json::json!({
            "podSetSliceRequiredTopology": level,
            "podSetSliceSize": size,
        }),
    }
}

fn workload_json(w: &PlannedWorkload) -> String {
    let pod_sets: Vec<Value> = w
        .pod_sets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut requests = serde_json::Map::new();
            if p.gpus > 0 {
                requests.insert(crate::agents::GPU.into(), p.gpus.to_string().into());
            }
            if p.mig > 0 {
                requests.insert(crate::agents::MIG.into(), p.mig.to_string().into());
            }
            let mut pod_set =
                serde_json::json!({"name": format!("ps{i}"), "count": p.count, "requests": requests});
            if let Some(topology) = p.topology {
                pod_set["topologyRequest"] = topology_request(topology);
            }
            pod_set
        })
        .collect();
    let mut run = serde_json::json!({"duration": format!("{}s", w.duration_s)});
    if w.exit != 0 {
        run["env"] = serde_json::json!({
            fleetq_agent::executor::simulated::SIM_EXIT_ENV: w.exit.to_string()
        });
    }
    let mut spec = serde_json::json!({
        "queueName": w.queue,
        "podSets": pod_sets,
        "run": run,
    });
    if let Some(class) = &w.priority_class {
        spec["priorityClassName"] = Value::String(class.clone());
    }
    serde_json::json!({"namespace": "default", "name": w.name, "spec": spec}).to_string()
}

/// The client's whole run. A violated check comes back as the error.
pub async fn drive(plan: &Plan) -> Result<ClientSummary, Violation> {
    let api = Api::new(plan.nodes)?;
    let mut summary = ClientSummary::default();

    let (applied, _) = api
        .retry("apply the configuration", 0, WRITE_LIMIT, |mut c| {
            let request = pb::ApplyRequest {
                manifests: plan.config.clone(),
                dry_run: false,
            };
            async move { c.apply(request).await }
        })
        .await?;
    if !applied.errors.is_empty() {
        return Err(violation(
            "API refusal",
            format!("the configuration was refused: {:?}", applied.errors),
        ));
    }

    for (i, w) in plan.workloads.iter().enumerate() {
        if plan.is_racing(i) {
            continue;
        }
        tokio::time::sleep(Duration::from_millis(w.delay_ms)).await;
        let (id, failures) = submit(&api, plan, i, i).await?;
        record(&mut summary, w, id, failures);
        for (_, action) in plan.after.iter().filter(|(after, _)| *after == i) {
            act(&api, plan, action, &mut summary).await?;
        }
    }
    for action in &plan.at_end {
        act(&api, plan, action, &mut summary).await?;
    }

    wait_all_ended(&api, plan, &summary).await?;
    for race in &plan.races {
        run_race(&api, plan, race, &mut summary).await?;
        wait_all_ended(&api, plan, &summary).await?;
    }
    // A workload cancelled while pending is never admitted.
    let must_admit = summary.acknowledged.len() - summary.cancelled.len();
    let converged = wait_converged(&api, must_admit, plan.may_preempt).await?;
    summary.last_applied = converged.last_applied;
    summary.state_hash = converged.state_hash;
    summary.evict_not_ready = commands_applied(&converged.counters, "EvictNotReady");
    summary.finished_removed = counter(&converged.counters, "finished_removed");
    Ok(summary)
}

/// Submits the workload at `index` of the plan, trying node `first`
/// first: its id and how many tries failed.
async fn submit(
    api: &Api,
    plan: &Plan,
    index: usize,
    first: usize,
) -> Result<(u64, usize), Violation> {
    let w = &plan.workloads[index];
    let request_id = format!("sim-{}-{index}", plan.seed);
    let json = workload_json(w);
    let what = format!("submit {}", w.name);
    let (reply, failures) = api
        .retry(&what, first, WRITE_LIMIT, |mut c| {
            let request = pb::SubmitRequest {
                request_id: request_id.clone(),
                workload_json: json.clone(),
                workloads_json: Vec::new(),
            };
            async move { c.submit(request).await }
        })
        .await?;
    let Some(result) = reply.results.first() else {
        return Err(violation("API refusal", format!("{what}: no result")));
    };
    if !result.errors.is_empty() || result.id == 0 {
        return Err(violation(
            "API refusal",
            format!("{what}: refused: {:?}", result.errors),
        ));
    }
    Ok((result.id, failures))
}

/// Records that `w` was acknowledged with `id` after `failures` failed
/// tries.
fn record(summary: &mut ClientSummary, w: &PlannedWorkload, id: u64, failures: usize) {
    if failures > 0 {
        summary.retried_writes += 1;
    }
    summary.acknowledged.insert(w.name.clone(), id);
}

/// Plays `race`: sends the quota cut, submits the race's workload `lead`
/// later while the cut may still be in flight, then restores the quota
/// so that a workload the cut kept waiting is admitted after all.
async fn run_race(
    api: &Api,
    plan: &Plan,
    race: &Race,
    summary: &mut ClientSummary,
) -> Result<(), Violation> {
    let cut = plan.shaped(&config_with_quota(race.cut_to));
    let submitting = async {
        tokio::time::sleep(race.lead).await;
        submit(api, plan, race.workload, race.node).await
    };
    let (cut, submitted) = tokio::join!(apply(api, race.node, &cut), submitting);
    cut?;
    let (id, failures) = submitted?;
    record(summary, &plan.workloads[race.workload], id, failures);
    apply(api, 0, &plan.shaped(&config_with_quota(8))).await
}

async fn act(
    api: &Api,
    plan: &Plan,
    action: &Action,
    summary: &mut ClientSummary,
) -> Result<(), Violation> {
    match action {
        Action::Cancel(victim) => {
            let removals = plan.finished_retention.is_some();
            cancel(api, &plan.workloads[*victim].name, removals, summary).await
        }
        Action::Apply(manifests) => apply(api, 0, manifests).await,
        Action::Stop(i) | Action::Resume(i) => {
            let active = matches!(action, Action::Resume(_));
            let removals = plan.finished_retention.is_some();
            set_active(api, &plan.workloads[*i].name, active, removals).await
        }
    }
}

/// Stops (`active: false`) or resumes `name`. Retries are safe: setting
/// what already holds changes nothing. A workload that ended first is
/// refused, which is fine (under retention it may be gone already).
async fn set_active(api: &Api, name: &str, active: bool, removals: bool) -> Result<(), Violation> {
    let what = format!("{} {name}", if active { "resume" } else { "stop" });
    let result = api
        .retry(&what, 0, WRITE_LIMIT, |mut c| {
            let request = pb::SetWorkloadActiveRequest {
                namespace: "default".into(),
                name: name.to_string(),
                active,
            };
            async move { c.set_workload_active(request).await }
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(v)
            if v.detail.contains("already ended")
                || (removals && v.detail.contains("does not exist")) =>
        {
            Ok(())
        }
        Err(v) => Err(v),
    }
}

/// Applies `manifests` (a quota change, say), trying node `first` first.
/// A cut below what is admitted at that moment is refused (it would
/// over-commit), which is fine: the quota then stays as it was.
async fn apply(api: &Api, first: usize, manifests: &str) -> Result<(), Violation> {
    let manifests = manifests.to_string();
    api.retry("change the quota", first, WRITE_LIMIT, |mut c| {
        let request = pb::ApplyRequest {
            manifests: manifests.clone(),
            dry_run: false,
        };
        async move { c.apply(request).await }
    })
    .await?;
    Ok(())
}

/// Cancels `name`; a workload that already ended refuses, which is fine.
async fn cancel(
    api: &Api,
    name: &str,
    removals: bool,
    summary: &mut ClientSummary,
) -> Result<(), Violation> {
    let what = format!("cancel {name}");
    let result = api
        .retry(&what, 0, WRITE_LIMIT, |mut c| {
            let request = pb::CancelRequest {
                namespace: "default".into(),
                name: name.to_string(),
            };
            async move { c.cancel(request).await }
        })
        .await;
    match result {
        Ok(_) => {
            summary.cancelled.insert(name.to_string());
            Ok(())
        }
        // It ended before the cancel, or an earlier try whose answer was
        // lost did cancel it: either way it may be Cancelled now. Under
        // retention it may have ended and been removed already (whether it
        // was is checked by id against the replicas at the end).
        Err(v)
            if v.detail.contains("already ended")
                || (removals && v.detail.contains("does not exist")) =>
        {
            summary.cancelled.insert(name.to_string());
            Ok(())
        }
        Err(v) => Err(v),
    }
}

/// Polls the (linearizable) workload list until every acknowledged
/// workload has ended as planned: succeeded, failed where its runs exit
/// non-zero, or cancelled where the client cancelled it. A missing
/// acknowledged workload is a lost write; one that ended any other way
/// breaks the run. Under retention an acknowledged workload that is not
/// listed may have ended and been removed: the harness checks that by id
/// on every replica once the run is over (`sim::check_replicas`).
async fn wait_all_ended(api: &Api, plan: &Plan, summary: &ClientSummary) -> Result<(), Violation> {
    let (acknowledged, cancelled) = (&summary.acknowledged, &summary.cancelled);
    let failing: std::collections::BTreeSet<&str> = plan
        .workloads
        .iter()
        .filter(|w| w.exit != 0)
        .map(|w| w.name.as_str())
        .collect();
    let started = Instant::now();
    let mut node = 0;
    let mut last = String::from("no answer yet");
    while started.elapsed() < QUIET_LIMIT {
        let (list, _) = api
            .retry("list workloads", node, WRITE_LIMIT, |mut c| async move {
                c.list_workloads(pb::ListWorkloadsRequest {
                    namespace: "default".into(),
                    ..Default::default()
                })
                .await
            })
            .await?;
        node += 1;
        let listed: BTreeMap<&str, &pb::WorkloadStatus> = list
            .workloads
            .iter()
            .map(|w| (w.name.as_str(), w))
            .collect();
        let mut unfinished = Vec::new();
        for (name, id) in acknowledged {
            let Some(w) = listed.get(name.as_str()) else {
                if plan.finished_retention.is_some() {
                    continue;
                }
                return Err(violation(
                    "no lost writes (invariant 5)",
                    format!("acknowledged workload {name} (id {id}) is not listed"),
                ));
            };
            if w.id != *id {
                return Err(violation(
                    "no lost writes (invariant 5)",
                    format!(
                        "acknowledged workload {name} had id {id}, is listed with id {}",
                        w.id
                    ),
                ));
            }
            match w.state.as_str() {
                "Succeeded" if !failing.contains(name.as_str()) => {}
                "Failed" if failing.contains(name.as_str()) => {}
                "Cancelled" if cancelled.contains(name) => {}
                "Failed" | "Cancelled" => {
                    return Err(violation(
                        "every workload succeeds",
                        format!("{name} ended {}: {}", w.state, w.reason),
                    ))
                }
                other => unfinished.push(format!("{name}={other}")),
            }
        }
        if unfinished.is_empty() {
            return Ok(());
        }
        last = unfinished.join(" ");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(violation(
        "every workload succeeds",
        format!("not all done after {QUIET_LIMIT:?}: {last}"),
    ))
}

/// Where the replicas agreed.
struct Converged {
    last_applied: u64,
    state_hash: String,
    /// The ledger's counters (the same on every replica).
    counters: Value,
}

/// Polls every node's status until all report the same applied index and
/// state hash (invariant 6); two nodes at the same index with different
/// hashes fail at once. Then checks the ledger's counters.
async fn wait_converged(
    api: &Api,
    workloads: usize,
    may_preempt: bool,
) -> Result<Converged, Violation> {
    let started = Instant::now();
    let mut last = String::from("no answer yet");
    while started.elapsed() < CONVERGE_LIMIT {
        let mut statuses = Vec::new();
        for client in &api.clients {
            let mut c = client.clone();
            match c.node_status(pb::NodeStatusRequest::default()).await {
                Ok(s) => statuses.push(s.into_inner()),
                Err(status) => last = format!("a node did not answer: {status}"),
            }
        }
        for (i, a) in statuses.iter().enumerate() {
            for b in &statuses[i + 1..] {
                if a.last_applied == b.last_applied && a.state_hash != b.state_hash {
                    return Err(violation(
                        "convergence (invariant 6)",
                        format!(
                            "n{} and n{} both applied {} but hash {} vs {}",
                            a.node_id, b.node_id, a.last_applied, a.state_hash, b.state_hash
                        ),
                    ));
                }
            }
        }
        if statuses.len() == api.clients.len() {
            let agreed = statuses
                .windows(2)
                .all(|w| w[0].last_applied == w[1].last_applied);
            if agreed {
                let counters = check_counters(&statuses, workloads, may_preempt)?;
                let s = &statuses[0];
                return Ok(Converged {
                    last_applied: s.last_applied,
                    state_hash: s.state_hash.clone(),
                    counters,
                });
            }
            last = statuses
                .iter()
                .map(|s| format!("n{} applied {}", s.node_id, s.last_applied))
                .collect::<Vec<_>>()
                .join(", ");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(violation(
        "convergence (invariant 6)",
        format!("replicas did not agree within {CONVERGE_LIMIT:?}: {last}"),
    ))
}

fn counter(counters: &Value, name: &str) -> u64 {
    counters.get(name).and_then(Value::as_u64).unwrap_or(0)
}

/// How many commands named `command` were applied (the counters'
/// `by_command`).
fn commands_applied(counters: &Value, command: &str) -> u64 {
    counters
        .get("by_command")
        .map_or(0, |by_command| counter(by_command, command))
}

/// Replicas at the same index applied the same commands, so their counters
/// agree; every workload was admitted at least once; nothing was preempted
/// unless the plan lets workloads preempt; an admission the ledger
/// refused must come from a stale batch (a deposed leader's), never from a
/// current leader's decision that broke quota. Returns the agreed counters.
fn check_counters(
    statuses: &[pb::NodeStatusResponse],
    workloads: usize,
    may_preempt: bool,
) -> Result<Value, Violation> {
    let mut parsed = Vec::new();
    for s in statuses {
        let counters: Value = serde_json::from_str(&s.counters_json).map_err(|e| {
            violation(
                "counters",
                format!(
                    "n{}: unreadable counters {:?}: {e}",
                    s.node_id, s.counters_json
                ),
            )
        })?;
        parsed.push((s.node_id, counters));
    }
    for (id, c) in &parsed {
        if *c != parsed[0].1 {
            return Err(violation(
                "counters",
                format!(
                    "n{id} and n{} applied the same index with different counters: {c} vs {}",
                    parsed[0].0, parsed[0].1
                ),
            ));
        }
    }
    let (id, c) = &parsed[0];
    if counter(c, "admissions") < workloads as u64 {
        return Err(violation(
            "counters",
            format!("n{id}: fewer admissions than the {workloads} workloads: {c}"),
        ));
    }
    if !may_preempt && (counter(c, "preemptions") > 0 || counter(c, "preemptions_rejected") > 0) {
        return Err(violation(
            "counters",
            format!("n{id}: preemptions without any priority: {c}"),
        ));
    }
    // A refused admission is the ledger doing its job (a decision computed
    // on a state that moved on, e.g. by a new leader that had not applied
    // everything yet); refusing more decisions than there are workloads
    // would mean the scheduler keeps proposing what cannot hold.
    // Preemption makes more decisions per workload (and more of them
    // stale when the leader changes), so it gets a looser bound.
    let per_workload = if may_preempt { 4 } else { 1 };
    if counter(c, "admissions_rejected") > per_workload * workloads as u64 {
        return Err(violation(
            "counters",
            format!("n{id}: more refused admissions than workloads: {c}"),
        ));
    }
    Ok(c.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(node_id: u64, counters: &str) -> pb::NodeStatusResponse {
        pb::NodeStatusResponse {
            node_id,
            counters_json: counters.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn counters_must_agree_and_bound_refused_admissions() {
        let good = r#"{"admissions":3,"admissions_rejected":0,"stale_batches":0}"#;
        assert!(check_counters(&[status(1, good), status(2, good)], 3, false).is_ok());

        let other = r#"{"admissions":4,"admissions_rejected":0,"stale_batches":0}"#;
        let err = check_counters(&[status(1, good), status(2, other)], 3, false).unwrap_err();
        assert!(err.detail.contains("different counters"), "{err:?}");

        assert!(check_counters(&[status(1, good)], 4, false).is_err());

        let refused = r#"{"admissions":3,"admissions_rejected":1,"stale_batches":0}"#;
        assert!(check_counters(&[status(1, refused)], 3, false).is_ok());
        let looping = r#"{"admissions":3,"admissions_rejected":4,"stale_batches":0}"#;
        assert!(check_counters(&[status(1, looping)], 3, false).is_err());

        let preempted = r#"{"admissions":3,"preemptions":1}"#;
        assert!(check_counters(&[status(1, preempted)], 3, false).is_err());
        assert!(check_counters(&[status(1, "not json")], 3, false).is_err());
    }

    #[test]
    fn counts_commands_by_name() {
        let c: Value = serde_json::from_str(
            r#"{"admissions":3,"by_command":{"AdmitBatch":4,"EvictNotReady":2}}"#,
        )
        .unwrap();
        assert_eq!(commands_applied(&c, "EvictNotReady"), 2);
        assert_eq!(commands_applied(&c, "CancelWorkload"), 0);
        let agreed = check_counters(&[status(1, &c.to_string())], 3, false).unwrap();
        assert_eq!(commands_applied(&agreed, "EvictNotReady"), 2);
        assert_eq!(commands_applied(&serde_json::json!({}), "EvictNotReady"), 0);
    }
}
