//! Who may call, and how much: authentication and authorization
//! ([`auth`]: client certificates, bearer tokens, the policy) and limits
//! against abuse ([`limits`]: request size, write rate per client,
//! pending workloads per LocalQueue, agent sessions).

pub mod auth;
pub mod limits;
