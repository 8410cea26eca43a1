//! Any bytes decoded as a Raft log entry (`Request`) or a bare `Command`:
//! decoding never panics, and whatever decodes re-encodes to something
//! that decodes equal (and encodes the same again), so every replica reads
//! the same command the leader proposed.
#![no_main]

use fleetq_ledger::{Command, Request, Response};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(request) = serde_json::from_slice::<Request>(data) {
        fleetq_fuzz::json_round_trip(&request);
    }
    if let Ok(command) = serde_json::from_slice::<Command>(data) {
        fleetq_fuzz::json_round_trip(&command);
        let _ = command.name();
    }
    // Responses travel back to the proposer (and the CLI) as JSON too.
    if let Ok(response) = serde_json::from_slice::<Response>(data) {
        fleetq_fuzz::json_round_trip(&response);
    }
});
