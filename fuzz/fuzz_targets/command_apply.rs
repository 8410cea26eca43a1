//! Any input, read as a setup and a sequence of ledger commands (see
//! `fleetq_fuzz::apply` for the layout), must leave the invariants holding
//! after every command; a second replica fed the same log through JSON, a
//! full replay and an export/import must agree on the state hash.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    fleetq_fuzz::apply::Harness::run(data);
});
