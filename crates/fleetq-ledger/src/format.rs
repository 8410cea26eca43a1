//! Versions of what one fleetq build writes and another must read: log
//! entries (on disk and between peers), snapshots and backups.
//!
//! Everything is JSON; a version is one more key, `"format": N`, first in
//! the object. Builds before versions ignore the key (serde skips unknown
//! fields of openraft's `Entry` and of the ledger export), so a node can
//! be rolled back across the change; what they wrote has no key and is
//! format 1. A build reads every format up to [`FORMAT`] and refuses a
//! newer one with [`NewerFormat`], which says what to do, instead of
//! failing on a variant it does not know.
//!
//! The rule for changing [`FORMAT`] (docs/operating.md, "Upgrades"): bump
//! it when a build writes something a build of the current format would
//! misread: a new command or object kind (refused), and also a new field
//! (an older build would drop it, and its replica's state would then
//! differ from the others'). Keep reading every older format. The
//! release before formats checks none, so while it still runs, what only
//! the newer build has must not be used (the runbook says which).

use std::fmt;

/// The format this build writes, and the newest it reads.
pub const FORMAT: u32 = 1;

const KEY: &[u8] = b"{\"format\":";

/// `value` as JSON with `"format"` first.
pub fn encode<T: serde::Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let json = serde_json::to_vec(value)?;
    Ok(tag(json))
}

/// JSON `bytes` of an object with `"format": FORMAT` put first; anything
/// but an object is returned as it is.
pub fn tag(json: Vec<u8>) -> Vec<u8> {
    match json.split_first() {
        Some((b'{', rest)) => {
            let mut out = Vec::with_capacity(json.len() + 16);
            out.extend_from_slice(KEY);
            out.extend_from_slice(FORMAT.to_string().as_bytes());
            if rest != b"}" {
                out.push(b',');
            }
            out.extend_from_slice(rest);
            out
        }
        _ => json,
    }
}

/// The format of JSON `bytes` written by [`encode`]; 1 when it has none
/// (written before formats were).
pub fn format_of(bytes: &[u8]) -> u32 {
    let Some(rest) = bytes.strip_prefix(KEY) else {
        return 1;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse().ok())
        // Digits past u32: newer than anything this build knows.
        .unwrap_or(u32::MAX)
}

/// Something written in a format newer than this build reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewerFormat {
    /// What it is: "log entry 42", "a snapshot", "AppendEntries from node 2".
    pub what: String,
    pub format: u32,
}

impl fmt::Display for NewerFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is in format {}, written by a newer fleetq; this build ({}) reads formats up to {FORMAT}: \
             run the newer build on this node (docs/operating.md, \"Upgrades\")",
            self.what,
            self.format,
            env!("CARGO_PKG_VERSION"),
        )
    }
}

impl std::error::Error for NewerFormat {}

/// Refuses `bytes` written in a format newer than [`FORMAT`].
pub fn check(bytes: &[u8], what: impl FnOnce() -> String) -> Result<(), NewerFormat> {
    let format = format_of(bytes);
    if format > FORMAT {
        return Err(NewerFormat {
            what: what(),
            format,
        });
    }
    Ok(())
}

/// [`check`], then decode (the `format` key is ignored by serde).
pub fn decode<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: impl FnOnce() -> String,
) -> Result<T, DecodeError> {
    check(bytes, what).map_err(DecodeError::Newer)?;
    serde_json::from_slice(bytes).map_err(DecodeError::Json)
}

/// Why bytes could not be read.
#[derive(Debug)]
pub enum DecodeError {
    Newer(NewerFormat),
    Json(serde_json::Error),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Newer(e) => e.fmt(f),
            DecodeError::Json(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Old {
        a: u32,
    }

    #[test]
    fn the_format_goes_first_and_older_readers_ignore_it() {
        let bytes = encode(&Old { a: 7 }).unwrap();
        assert_eq!(bytes, br#"{"format":1,"a":7}"#);
        assert_eq!(format_of(&bytes), 1);
        // A reader from before formats (plain serde) reads it unchanged.
        assert_eq!(serde_json::from_slice::<Old>(&bytes).unwrap(), Old { a: 7 });
        assert_eq!(decode::<Old>(&bytes, || "x".into()).unwrap(), Old { a: 7 });
        // What such a reader wrote is format 1.
        assert_eq!(format_of(br#"{"a":7}"#), 1);
        assert_eq!(tag(b"{}".to_vec()), br#"{"format":1}"#);
        assert_eq!(tag(b"[1]".to_vec()), b"[1]");
    }

    #[test]
    fn a_newer_format_is_refused_saying_what_to_do() {
        let newer = br#"{"format":2,"a":7,"b":"new"}"#;
        let e = decode::<Old>(newer, || "log entry 42".into()).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("log entry 42 is in format 2, written by a newer fleetq"),
            "{text}"
        );
        assert!(text.contains("reads formats up to 1"), "{text}");
        assert_eq!(format_of(br#"{"format":99999999999,"a":1}"#), u32::MAX);
    }
}
