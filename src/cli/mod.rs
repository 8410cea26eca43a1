//! Subcommands of the `fleetq` binary.

pub mod input;
pub mod validate;
