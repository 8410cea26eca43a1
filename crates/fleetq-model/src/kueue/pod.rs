//! The part of a Kubernetes pod template that admission needs: per-pod
//! resource requests, computed with Kubernetes' effective-request rules.
//!
//! A full PodSpec has hundreds of fields and changes every release, so these
//! types are strict only about the fields fleetq interprets (their types and
//! values); every other field passes through untouched, because the whole
//! template is kept verbatim for the executor that runs it.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Quantity, ResourceList};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodTemplate {
    /// Read only for Kueue's pod-set annotations (kueue/topology.rs), and
    /// kept untyped: the rest is the executor's and passes through.
    #[serde(default)]
    pub metadata: serde_json::Value,
    #[serde(default)]
    pub spec: PodSpec,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PodSpec {
    #[serde(default)]
    pub containers: Vec<Container>,
    #[serde(default)]
    pub init_containers: Vec<Container>,
    /// RuntimeClass overhead, charged on top of the containers' requests.
    #[serde(default)]
    pub overhead: ResourceList,
    /// Pod-level resources (Kubernetes 1.32+): when set, they replace the sum
    /// over containers for the resources they name.
    #[serde(default)]
    pub resources: Option<Resources>,
    /// A Kubernetes PriorityClass; Kueue takes the workload's priority
    /// from it when no WorkloadPriorityClass is named.
    #[serde(default)]
    pub priority_class_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Container {
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<EnvVar>,
    #[serde(default)]
    pub resources: Resources,
    /// `Always` on an init container makes it a sidecar that keeps running
    /// next to the main containers.
    #[serde(default)]
    pub restart_policy: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Resources {
    #[serde(default)]
    pub requests: ResourceList,
    #[serde(default)]
    pub limits: ResourceList,
}

/// An environment variable; only literal values are read (`valueFrom`
/// refers to cluster objects that only the Kubernetes executor can resolve).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct EnvVar {
    pub name: String,
    #[serde(default)]
    pub value: Option<String>,
}

impl Resources {
    /// Requests, with a limit standing in for a missing request as the API
    /// server defaults it.
    fn effective_requests(&self) -> ResourceList {
        let mut effective = self.requests.clone();
        for (name, limit) in &self.limits {
            effective.entry(name.clone()).or_insert(*limit);
        }
        effective
    }
}

impl PodSpec {
    /// Where the reserved resource name `pods` is written: in a
    /// container's, an init container's or the pod's own requests or
    /// limits (paths relative to the pod spec).
    pub fn reserved_pods_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut look = |prefix: String, r: &Resources| {
            for (kind, list) in [("requests", &r.requests), ("limits", &r.limits)] {
                if list.contains_key("pods") {
                    out.push(format!("{prefix}resources.{kind}.pods"));
                }
            }
        };
        for (i, c) in self.containers.iter().enumerate() {
            look(format!("containers[{i}]."), &c.resources);
        }
        for (i, c) in self.init_containers.iter().enumerate() {
            look(format!("initContainers[{i}]."), &c.resources);
        }
        if let Some(r) = &self.resources {
            look(String::new(), r);
        }
        out
    }

    /// What one pod requests, by Kubernetes' rule: the larger of (sum over
    /// containers plus sidecars) and (each init container plus the sidecars
    /// started before it), then pod-level resources, then overhead.
    /// Zero amounts are dropped. `None` when a sum overflows.
    pub fn effective_requests(&self) -> Option<ResourceList> {
        let mut running = ResourceList::new();
        for container in &self.containers {
            add_into(&mut running, &container.resources.effective_requests())?;
        }
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for init in &self.init_containers {
            let requests = init.resources.effective_requests();
            let during_init = if init.restart_policy.as_deref() == Some("Always") {
                add_into(&mut sidecars, &requests)?;
                sidecars.clone()
            } else {
                let mut with_sidecars = sidecars.clone();
                add_into(&mut with_sidecars, &requests)?;
                with_sidecars
            };
            max_into(&mut init_peak, &during_init);
        }
        add_into(&mut running, &sidecars)?;
        max_into(&mut running, &init_peak);
        if let Some(pod_level) = &self.resources {
            for (name, amount) in pod_level.effective_requests() {
                running.insert(name, amount);
            }
        }
        add_into(&mut running, &self.overhead)?;
        running.retain(|_, amount| !amount.is_zero());
        Some(running)
    }

    /// Every fraction of an extended resource the spec asks for, as
    /// (path below the pod spec, message): Kubernetes counts devices in
    /// whole units, in requests and in limits alike.
    pub fn whole_device_problems(&self) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let mut check = |path: String, list: &ResourceList| {
            for (name, amount) in list {
                if let Some(problem) = crate::resources::whole_device_problem(name, *amount) {
                    problems.push((super::meta::join(&path, name), problem));
                }
            }
        };
        for (field, containers) in [
            ("containers", &self.containers),
            ("initContainers", &self.init_containers),
        ] {
            for (i, container) in containers.iter().enumerate() {
                let path = format!("{field}[{i}].resources");
                check(format!("{path}.requests"), &container.resources.requests);
                check(format!("{path}.limits"), &container.resources.limits);
            }
        }
        if let Some(pod_level) = &self.resources {
            check("resources.requests".into(), &pod_level.requests);
            check("resources.limits".into(), &pod_level.limits);
        }
        check("overhead".into(), &self.overhead);
        problems
    }

    /// `command` followed by `args` of the first container: what a process
    /// executor runs.
    pub fn first_command(&self) -> Vec<String> {
        self.containers
            .first()
            .map(|c| c.command.iter().chain(&c.args).cloned().collect())
            .unwrap_or_default()
    }

    pub fn first_image(&self) -> Option<String> {
        self.containers.first().and_then(|c| c.image.clone())
    }

    /// The run of a workload whose first pod is `pod` (none where the
    /// object has no pod template): its first container's command,
    /// image and literal environment, with `job_template` and
    /// `duration` as given.
    pub fn run_of(
        pod: Option<&PodSpec>,
        job_template: Option<serde_json::Value>,
        duration: Option<std::time::Duration>,
    ) -> crate::workload::RunSpec {
        crate::workload::RunSpec {
            command: pod.map(PodSpec::first_command).unwrap_or_default(),
            image: pod.and_then(PodSpec::first_image),
            env: pod.map(PodSpec::first_env).unwrap_or_default(),
            job_template,
            duration,
        }
    }

    /// Literal environment variables of the first container.
    pub fn first_env(&self) -> BTreeMap<String, String> {
        self.containers
            .first()
            .map(|c| {
                c.env
                    .iter()
                    .filter_map(|e| e.value.clone().map(|v| (e.name.clone(), v)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn add_into(total: &mut ResourceList, more: &ResourceList) -> Option<()> {
    for (name, amount) in more {
        let entry = total.entry(name.clone()).or_insert(Quantity::ZERO);
        *entry = entry.checked_add(*amount)?;
    }
    Some(())
}

fn max_into(total: &mut ResourceList, other: &ResourceList) {
    for (name, amount) in other {
        let entry = total.entry(name.clone()).or_insert(Quantity::ZERO);
        *entry = (*entry).max(*amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).unwrap()
    }

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn sums_containers_and_falls_back_to_limits() {
        let pod = spec(serde_json::json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "nvidia.com/gpu": 2}}}
            ]
        }));
        let requests = pod.effective_requests().unwrap();
        assert_eq!(requests["cpu"], q("1500m"));
        assert_eq!(requests["memory"], q("1Gi"));
        assert_eq!(requests["nvidia.com/gpu"], q("2"));
    }

    #[test]
    fn init_containers_count_by_their_peak() {
        let pod = spec(serde_json::json!({
            "initContainers": [
                {"name": "big-init", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
                {"name": "small-init", "resources": {"requests": {"cpu": "1"}}}
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]
        }));
        let requests = pod.effective_requests().unwrap();
        assert_eq!(requests["cpu"], q("4"));
        assert_eq!(requests["memory"], q("4Gi"));
    }

    #[test]
    fn sidecars_add_to_the_main_containers_and_later_inits() {
        let pod = spec(serde_json::json!({
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "3"}}}
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]
        }));
        // max(main 2 + proxy 1, setup 3 + proxy 1) = 4
        assert_eq!(pod.effective_requests().unwrap()["cpu"], q("4"));
    }

    #[test]
    fn overhead_and_pod_level_resources() {
        let pod = spec(serde_json::json!({
            "resources": {"requests": {"memory": "8Gi"}},
            "overhead": {"cpu": "250m"},
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 0}}}]
        }));
        let requests = pod.effective_requests().unwrap();
        assert_eq!(requests["cpu"], q("1250m"));
        assert_eq!(requests["memory"], q("8Gi"));
        assert!(
            !requests.contains_key("nvidia.com/gpu"),
            "zero amounts are dropped"
        );
    }

    #[test]
    fn overflow_is_reported() {
        let huge = "5000000000000000";
        let pod = spec(serde_json::json!({
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": huge}}},
                {"name": "b", "resources": {"requests": {"cpu": huge}}}
            ]
        }));
        assert!(pod.effective_requests().is_none());
    }

    #[test]
    fn command_image_and_env_of_the_first_container() {
        let pod = spec(serde_json::json!({
            "containers": [{"name": "main", "image": "img:1", "command": ["/bin/sh"], "args": ["-c", "true"],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}]
        }));
        assert_eq!(pod.first_command(), ["/bin/sh", "-c", "true"]);
        assert_eq!(pod.first_image().as_deref(), Some("img:1"));
        assert_eq!(
            pod.first_env(),
            BTreeMap::from([("A".to_string(), "1".to_string())])
        );
    }
}
