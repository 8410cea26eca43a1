//! The agent service (proto/fleetq/v1/agent.proto): registration and
//! one-shot status reports. The long-lived session (heartbeats, leases,
//! assignments pushed down) belongs to `fleetq agent`, which is not built
//! yet; until then `Session` answers UNIMPLEMENTED and simulated clusters
//! report through the ledger directly.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use fleetq_ledger::{Command, LeasePolicy, Outcome, Phase, StatusReport};
use fleetq_model::{Cluster, ClusterState, FieldError, Quantity, ResourceList};
use fleetq_proto::v1 as pb;
use fleetq_proto::v1::agent_server::Agent;
use futures::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::proposer::{ProposeError, Proposer};
use crate::status;

pub struct AgentService {
    pub proposer: Arc<Proposer>,
}

fn unavailable(e: ProposeError) -> Status {
    Status::unavailable(e.to_string())
}

fn cluster_of(req: &pb::RegisterRequest) -> Result<(Cluster, LeasePolicy), Vec<FieldError>> {
    let object = format!("Cluster/{}", req.cluster);
    let mut errors = Vec::new();
    let mut capacity: BTreeMap<String, ResourceList> = BTreeMap::new();
    for (i, inv) in req.inventory.iter().enumerate() {
        if inv.flavor.is_empty() {
            errors.push(FieldError::new(
                &object,
                format!("inventory[{i}].flavor"),
                "must not be empty",
            ));
        }
        for (j, q) in inv.resources.iter().enumerate() {
            match q.value.parse::<Quantity>() {
                Ok(v) => {
                    capacity
                        .entry(inv.flavor.clone())
                        .or_default()
                        .insert(q.resource.clone(), v);
                }
                Err(e) => errors.push(FieldError::new(
                    &object,
                    format!("inventory[{i}].resources[{j}].value"),
                    e.to_string(),
                )),
            }
        }
    }
    let policy = match req.lease_policy.to_ascii_lowercase().as_str() {
        "" | "fence" => LeasePolicy::Fence,
        "keep" => LeasePolicy::Keep,
        other => {
            errors.push(FieldError::new(
                &object,
                "lease_policy",
                format!("{other:?} is not fence or keep"),
            ));
            LeasePolicy::Fence
        }
    };
    if req.cluster.is_empty() {
        errors.push(FieldError::new(&object, "cluster", "must not be empty"));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok((
        Cluster {
            name: req.cluster.clone(),
            labels: req.labels.clone().into_iter().collect(),
            capacity,
            state: ClusterState::Ready,
        },
        policy,
    ))
}

fn phase_of(text: &str) -> Option<Phase> {
    Some(match text {
        "Running" => Phase::Running,
        "Succeeded" => Phase::Succeeded,
        "Failed" => Phase::Failed,
        "Stopped" => Phase::Stopped,
        _ => return None,
    })
}

#[tonic::async_trait]
impl Agent for AgentService {
    async fn register(
        &self,
        request: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        let req = request.into_inner();
        let (cluster, lease_policy) =
            cluster_of(&req).map_err(|e| Status::invalid_argument(status::describe_errors(&e)))?;
        let written = self
            .proposer
            .propose(Command::RegisterCluster {
                cluster,
                lease_policy,
            })
            .await
            .map_err(unavailable)?;
        if !written.response.is_ok() {
            return Err(Status::invalid_argument(status::describe_errors(
                &written.response.errors,
            )));
        }
        Ok(Response::new(pb::RegisterResponse {
            cluster: req.cluster,
            lease_ttl_ms: 0,
            leader_addr: String::new(),
        }))
    }

    type SessionStream =
        Pin<Box<dyn Stream<Item = Result<pb::ControlMessage, Status>> + Send + 'static>>;

    async fn session(
        &self,
        _request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        Err(Status::unimplemented(
            "agent sessions (leases, pushed assignments) are not available in this version; use Register and Report",
        ))
    }

    async fn report(
        &self,
        request: Request<pb::ReportRequest>,
    ) -> Result<Response<pb::ReportResponse>, Status> {
        let req = request.into_inner();
        let mut reports = Vec::new();
        for (i, r) in req.reports.iter().enumerate() {
            let phase = phase_of(&r.phase).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "reports[{i}].phase: {:?} is not Running, Succeeded, Failed or Stopped",
                    r.phase
                ))
            })?;
            reports.push(StatusReport {
                cluster: req.cluster.clone(),
                workload: r.workload_id,
                epoch: r.epoch,
                phase,
                message: r.message.clone(),
            });
        }
        let written = self
            .proposer
            .propose(Command::ReportStatus { reports })
            .await
            .map_err(unavailable)?;
        match written.response.outcome {
            Outcome::Reported { applied, stale } => {
                Ok(Response::new(pb::ReportResponse { applied, stale }))
            }
            _ => Err(Status::invalid_argument(status::describe_errors(
                &written.response.errors,
            ))),
        }
    }
}
