//! The state hash replicas compare (invariant 6). The state is made of
//! ordered maps, so its JSON form is canonical.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// Hex SHA-256 of the canonical JSON of `value`.
pub fn state_hash<T: Serialize>(value: &T) -> String {
    let mut hasher = Sha256::new();
    // Writing into the hasher cannot fail; a value that cannot serialise
    // (a map with non-string keys) is a programming error caught in tests.
    if let Err(e) = serde_json::to_writer(HashWriter(&mut hasher), value) {
        hasher.update(format!("unserialisable state: {e}").as_bytes());
    }
    let digest = hasher.finalize();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::state_hash;
    use crate::ledger::BigMap;

    /// The ledger's big maps replaced `BTreeMap`s: snapshots written
    /// before must read back, and replicas of either build must agree on
    /// the hash, so the serialised form must be the same, byte for byte.
    #[test]
    fn a_big_map_serialises_and_hashes_as_the_btreemap_it_replaced() {
        let pairs = [(10u64, "ten"), (9, "nine"), (100, "hundred"), (0, "zero")];
        let old: BTreeMap<u64, &str> = pairs.into_iter().collect();
        let new: BigMap<u64, &str> = pairs.into_iter().collect();
        let old_json = serde_json::to_string(&old).expect("serialise");
        assert_eq!(serde_json::to_string(&new).expect("serialise"), old_json);
        assert_eq!(state_hash(&new), state_hash(&old));
        let back: BigMap<u64, String> = serde_json::from_str(&old_json).expect("read back");
        assert_eq!(back.len(), 4);
        assert_eq!(back.get(&100).map(String::as_str), Some("hundred"));
    }
}
