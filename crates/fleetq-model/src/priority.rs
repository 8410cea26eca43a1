//! WorkloadPriorityClass: a name for a priority value.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadPriorityClass {
    pub name: String,
    pub value: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}
