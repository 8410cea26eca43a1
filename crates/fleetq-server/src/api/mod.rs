//! The client API: the gRPC service users and the CLI call ([`service`]),
//! pending workloads in admission order ([`visibility`], gRPC and HTTP
//! shaped like Kueue's visibility API), and backups ([`backup`]).

pub mod backup;
pub mod service;
pub mod visibility;
