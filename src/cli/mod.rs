//! Subcommands of the `fleetq` binary.

/// The help section of the flags every command takes (--server and the
/// TLS flags), listed after each command's own.
pub const GLOBAL_OPTIONS: &str = "Global options";

pub mod agent;
pub mod apply;
pub mod backup;
pub mod bench;
pub mod cancel;
pub mod certs;
pub mod client;
pub mod completion;
pub mod delete;
pub mod describe;
pub mod dev;
#[cfg(test)]
mod doc_commands;
pub mod drain;
pub mod examples;
pub mod get;
pub mod huge_pages;
pub mod input;
pub mod kueue_workloads;
pub mod limits;
pub mod logs;
pub mod members;
pub mod names;
pub mod pending;
pub mod pipe;
pub mod selector;
pub mod server;
pub mod status;
pub mod stop;
pub mod submit;
pub mod tls;
pub mod top;
pub mod validate;
pub mod view;
