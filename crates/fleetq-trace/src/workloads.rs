//! Trace tasks as fleetq workloads, and the queues they go to.
//!
//! - A task is one pod of `num_gpu` whole GPUs plus its CPU and memory.
//!   A share of one GPU (`gpu_milli` < 1000 with `num_gpu` 1) is counted
//!   as one whole GPU: fleetq allocates whole devices (an extended
//!   resource is a count, as in Kubernetes). The trace's sharing, which
//!   the paper's simulator packs several tasks onto one GPU with, is not
//!   modelled; every policy here, baselines included, sees the rounded
//!   task, so the comparison between them is fair, but not comparable to
//!   the paper's figures.
//! - CPU-only tasks (`num_gpu` 0) are left out: they demand no GPU, so
//!   they do not move the demand axis the method reads; the node list
//!   holds the GPU nodes only, while the production cluster also had CPU
//!   nodes for them; and in fleetq a CPU-only pod in the GPU flavors'
//!   resource group would take whichever GPU flavor comes first, which
//!   would measure the flavor order rather than placement.
//! - `gpu_spec` lists the models a task accepts (empty: any). Tasks that
//!   accept the same flavors share one ClusterQueue whose single resource
//!   group (GPU, CPU and memory together, since a pod sits on one node of
//!   one flavor) lists those flavors by name. Quota is twice the fleet's
//!   total per flavor, so it never binds: the nodes are the constraint.
//!   The queues are StrictFIFO, so arrival order is kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use fleetq_model::cluster_queue::{
    ClusterQueueSpec, FlavorQuotas, QueueingStrategy, ResourceGroup, ResourceQuota,
};
use fleetq_model::flavor::ResourceFlavorSpec;
use fleetq_model::local_queue::LocalQueueSpec;
use fleetq_model::workload::{PodSet, WorkloadSpec};
use fleetq_model::{ClusterQueue, Config, LocalQueue, ResourceFlavor, Timestamp, Workload};
use fleetq_scheduler::PendingWorkload;

use crate::clusters::{Fleet, FleetError, Room, CPU, GPU, MEMORY};
use crate::parse::TaskRow;

/// The namespace every trace workload is submitted in.
pub const NAMESPACE: &str = "trace";

/// One GPU task of the trace, as every policy here sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Its name in the trace (resampled copies keep it).
    pub name: String,
    /// Whole GPUs, CPU and memory of its one pod.
    pub need: Room,
    /// GPU models it accepts; empty: any.
    pub models: Vec<String>,
    /// Asked for a share of one GPU, counted here as one whole GPU.
    pub shared: bool,
}

impl Task {
    /// The task of a trace row; `None` for a CPU-only row.
    pub fn from_row(row: &TaskRow) -> Option<Task> {
        (row.num_gpu > 0).then(|| Task {
            name: row.name.clone(),
            need: Room {
                gpus: u64::from(row.num_gpu),
                cpu_milli: row.cpu_milli,
                memory_mib: row.memory_mib,
            },
            models: row.gpu_spec.clone(),
            shared: row.num_gpu == 1 && row.gpu_milli < 1000,
        })
    }

    pub fn accepts(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|m| m == model)
    }
}

/// What a task file held and what was kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskCounts {
    pub rows: usize,
    pub cpu_only: usize,
    pub gpu_tasks: usize,
    /// GPU-share tasks, counted as one whole GPU each.
    pub shared: usize,
}

/// The GPU tasks of `rows`, in trace order, and what was left out.
pub fn gpu_tasks(rows: &[TaskRow]) -> (Vec<Task>, TaskCounts) {
    let tasks: Vec<Task> = rows.iter().filter_map(Task::from_row).collect();
    let counts = TaskCounts {
        rows: rows.len(),
        cpu_only: rows.len() - tasks.len(),
        gpu_tasks: tasks.len(),
        shared: tasks.iter().filter(|t| t.shared).count(),
    };
    (tasks, counts)
}

/// The flavors of `fleet` that `task` accepts (every model of the
/// flavor), by name. Empty when it accepts no model the fleet has: no
/// policy can place it.
pub fn accepted_flavors(fleet: &Fleet, task: &Task) -> Vec<String> {
    fleet
        .flavors
        .iter()
        .filter(|(_, models)| models.iter().all(|m| task.accepts(m)))
        .map(|(flavor, _)| flavor.clone())
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("the generated configuration is invalid: {0}")]
    Invalid(String),
}

/// The configuration the replay runs under, and the LocalQueue of each
/// set of accepted flavors.
#[derive(Clone, Debug)]
pub struct Queues {
    pub config: Config,
    by_flavors: BTreeMap<Vec<String>, String>,
}

impl Queues {
    /// One flavor per model of `fleet`, one StrictFIFO ClusterQueue (and
    /// its LocalQueue) per distinct set of flavors that `tasks` accept.
    pub fn new(fleet: &Fleet, tasks: &[Task]) -> Result<Queues, QueueError> {
        let mut config = Config::default();
        for flavor in fleet.flavors.keys() {
            config.flavors.insert(
                flavor.clone(),
                ResourceFlavor {
                    name: flavor.clone(),
                    spec: ResourceFlavorSpec::default(),
                },
            );
        }
        let mut by_flavors = BTreeMap::new();
        for task in tasks {
            let flavors = accepted_flavors(fleet, task);
            if flavors.is_empty() || by_flavors.contains_key(&flavors) {
                continue;
            }
            let name = queue_name(fleet, &flavors, by_flavors.len());
            add_queue(&mut config, fleet, &name, &flavors)?;
            by_flavors.insert(flavors, name);
        }
        let errors = config.validate();
        if !errors.is_empty() {
            let list: Vec<String> = errors.iter().map(|e| format!("{e:?}")).collect();
            return Err(QueueError::Invalid(list.join("; ")));
        }
        Ok(Queues { config, by_flavors })
    }

    /// The LocalQueue (in [`NAMESPACE`]) for `task`, if it can be placed
    /// anywhere in `fleet`.
    pub fn local_queue(&self, fleet: &Fleet, task: &Task) -> Option<&str> {
        self.by_flavors
            .get(&accepted_flavors(fleet, task))
            .map(String::as_str)
    }
}

/// `any` for every flavor, else `only-` and the flavors (or a number
/// where that is too long for a name).
fn queue_name(fleet: &Fleet, flavors: &[String], index: usize) -> String {
    if flavors.len() == fleet.flavors.len() {
        return "any".into();
    }
    let name = format!("only-{}", flavors.join("-"));
    if name.len() <= 63 {
        name
    } else {
        format!("spec-{index}")
    }
}

fn add_queue(
    config: &mut Config,
    fleet: &Fleet,
    name: &str,
    flavors: &[String],
) -> Result<(), QueueError> {
    let quotas = flavors
        .iter()
        .map(|f| flavor_quotas(fleet, f))
        .collect::<Result<Vec<_>, _>>()?;
    let spec = ClusterQueueSpec {
        resource_groups: vec![ResourceGroup {
            // In the order of `flavor_quotas` (by name), as Kueue requires.
            covered_resources: vec![CPU.into(), MEMORY.into(), GPU.into()],
            flavors: quotas,
        }],
        queueing_strategy: QueueingStrategy::StrictFIFO,
        ..ClusterQueueSpec::default()
    };
    config.cluster_queues.insert(
        name.to_string(),
        ClusterQueue {
            name: name.to_string(),
            spec,
        },
    );
    let lq = LocalQueue {
        namespace: NAMESPACE.into(),
        name: name.to_string(),
        spec: LocalQueueSpec {
            cluster_queue: name.to_string(),
            ..LocalQueueSpec::default()
        },
    };
    config.local_queues.insert(lq.key(), lq);
    Ok(())
}

/// Twice the fleet's total of `flavor`: quota that never binds.
fn flavor_quotas(fleet: &Fleet, flavor: &str) -> Result<FlavorQuotas, FleetError> {
    let twice = fleet
        .total(None, flavor)?
        .times(2)
        .and_then(|r| r.resources())
        .ok_or_else(|| FleetError::TooLarge(format!("flavor {flavor}")))?;
    Ok(FlavorQuotas {
        name: flavor.to_string(),
        resources: twice
            .into_iter()
            .map(|(name, nominal_quota)| ResourceQuota {
                name,
                nominal_quota,
                borrowing_limit: None,
                lending_limit: None,
            })
            .collect(),
    })
}

/// Arrival `index` (0-based) of `task` as a pending workload of
/// `local_queue`: id `index + 1` and created at `index + 1` ms, so age
/// order is arrival order.
pub fn pending(
    config: &Config,
    task: &Task,
    index: usize,
    local_queue: &str,
) -> Result<PendingWorkload, String> {
    let id = index as u64 + 1;
    let requests = task
        .need
        .resources()
        .ok_or_else(|| format!("task {} asks for more than fleetq can count", task.name))?
        .into_iter()
        .filter(|(_, q)| !q.is_zero())
        .collect();
    let workload = Workload {
        namespace: NAMESPACE.into(),
        name: format!("task-{id}"),
        labels: BTreeMap::new(),
        spec: WorkloadSpec {
            queue_name: local_queue.to_string(),
            pod_sets: vec![PodSet {
                name: "main".into(),
                count: 1,
                min_count: None,
                requests,
                topology_request: None,
            }],
            ..WorkloadSpec::default()
        },
    };
    let binding = config
        .bind_workload(&workload)
        .map_err(|e| format!("task {} does not bind: {e:?}", task.name))?;
    Ok(PendingWorkload {
        id,
        workload: Arc::new(workload),
        local_queue: binding.local_queue,
        cluster_queue: binding.cluster_queue,
        priority: binding.priority,
        created_at: Timestamp(id),
        not_before: None,
        nominated: false,
        borrow_preemptions: 0,
        reclaimed: 0,
        reclaimed_for: None,
    })
}
