//! Shared code of fleetq's fuzz targets (see `fuzz_targets/` and the
//! README's "Fuzzing" section).
//!
//! The interesting one is [`apply`]: the `command_apply` target's
//! interpreter, which turns fuzz input into a sequence of ledger commands on
//! a realistic setup (the ledger tests' configuration or a cohort tree, two clusters)
//! and checks after every command that the invariants of docs/architecture.md §6 hold
//! and that a second replica fed the same log (through its JSON encoding,
//! as Raft carries it) agrees. `examples/seeds.rs` uses the same
//! interpreter to write the seed corpora.

pub mod apply;
pub mod input;

/// Decodes a log entry as Raft's storage and RPCs do and checks that the
/// encoding is faithful: decode(encode(x)) == x and the encoding is stable.
/// Returns the decoded value.
pub fn json_round_trip<T>(value: &T) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = serde_json::to_vec(value).expect("a decoded value encodes");
    let back: T = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "the encoding does not decode: {e}\n{}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(&back, value, "decode(encode(x)) != x");
    let again = serde_json::to_vec(&back).expect("encodes again");
    assert_eq!(
        String::from_utf8_lossy(&again),
        String::from_utf8_lossy(&bytes),
        "the encoding is not stable"
    );
    back
}
