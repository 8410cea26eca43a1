//! The client API: the gRPC service users and the CLI call ([`service`]),
//! pending workloads in admission order ([`visibility`], gRPC and HTTP
//! shaped like Kueue's visibility API), backups ([`backup`]), and the
//! leader's address on a follower's answers ([`leader_hint`]).

pub mod backup;
pub mod leader_hint;
pub mod service;
pub mod visibility;
