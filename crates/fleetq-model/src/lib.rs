//! fleetq's domain model: pure data and pure functions, no I/O, no async.
//!
//! Objects follow Kueue's `kueue.x-k8s.io` API so teams can bring the
//! manifests they already have; [`kueue`] imports them and [`config`]
//! validates a set of them together with Kueue's rules.

pub mod assignment;
pub mod cluster;
pub mod cluster_queue;
pub mod cohort;
pub mod config;
pub mod error;
pub mod fair_weight;
pub mod flavor;
pub mod kueue;
pub mod limits;
pub mod local_queue;
pub mod mutants;
pub mod namespace;
pub mod priority;
pub mod quantity;
pub mod resources;
pub mod settings;
pub mod time;
pub mod topology;
pub mod workload;

pub use cluster::{Cluster, ClusterState, Node};
pub use cluster_queue::ClusterQueue;
pub use cohort::Cohort;
pub use config::Config;
pub use error::{FieldError, FieldErrors};
pub use flavor::ResourceFlavor;
pub use local_queue::LocalQueue;
pub use priority::{PriorityClass, PriorityClassSource, WorkloadPriorityClass};
pub use quantity::{Quantity, QuantityError};
pub use resources::{FlavorName, FlavorResource, FlavorUsage, ResourceList, ResourceName};
pub use time::Timestamp;
pub use topology::{PodSetTopologyRequest, Topology};
pub use workload::{PodSet, Workload};
