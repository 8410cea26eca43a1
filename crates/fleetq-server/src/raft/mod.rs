//! Writing to the replicated log and serving it: the write path (the
//! leader stamps commands, followers forward, submissions are
//! group-committed) and linearizable reads ([`proposer`], [`batcher`]),
//! the Raft gRPC service between nodes ([`service`]) and openraft's
//! network over gRPC channels ([`network`]).

pub mod batcher;
pub mod network;
pub mod proposer;
pub mod service;
