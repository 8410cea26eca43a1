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
