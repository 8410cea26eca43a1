//! `fleetq logs`: the end of what a workload printed, read from the
//! process executor's files (`<state_dir>/logs/<id>-<epoch>.log`, one per
//! admission). The leader asks in the agent's session; the answer is
//! bounded so that one request cannot fill the session.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The most one answer carries, whatever was asked.
pub const MAX_TAIL_BYTES: u64 = 1 << 20;

/// The end of one admission's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    pub text: String,
    /// The log is longer than what `text` holds.
    pub truncated: bool,
    pub epoch: u64,
}

/// The last `max` bytes (at most [`MAX_TAIL_BYTES`]) of `workload`'s log
/// for `epoch` in `dir`, or of its latest admission's where `epoch` is 0.
pub fn read_tail(dir: &Path, workload: u64, epoch: u64, max: u64) -> Result<Tail, String> {
    let epoch = match epoch {
        0 => latest_epoch(dir, workload)?,
        e => e,
    };
    let path = dir.join(format!("{workload}-{epoch}.log"));
    let mut file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!("no log of workload {workload} (admission {epoch}) on this cluster")
        }
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    let max = max.clamp(1, MAX_TAIL_BYTES);
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(Tail {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        truncated: start > 0,
        epoch,
    })
}

/// The highest epoch with a log of `workload` in `dir`.
fn latest_epoch(dir: &Path, workload: u64) -> Result<u64, String> {
    let prefix = format!("{workload}-");
    let entries = std::fs::read_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no workload has run on this cluster yet".to_string(),
        _ => format!("cannot list {}: {e}", dir.display()),
    })?;
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix(&prefix)?
                .strip_suffix(".log")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .ok_or_else(|| format!("no log of workload {workload} on this cluster"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_admission_and_the_tail_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("7-2.log"), "first run\n").expect("write");
        std::fs::write(dir.path().join("7-11.log"), "0123456789\n").expect("write");
        std::fs::write(dir.path().join("17-40.log"), "another workload\n").expect("write");
        let tail = read_tail(dir.path(), 7, 0, 64).expect("a log");
        assert_eq!(
            tail,
            Tail {
                text: "0123456789\n".into(),
                truncated: false,
                epoch: 11
            }
        );
        let tail = read_tail(dir.path(), 7, 11, 4).expect("a log");
        assert_eq!((tail.text.as_str(), tail.truncated), ("789\n", true));
        assert_eq!(
            read_tail(dir.path(), 7, 2, 64).expect("a log").text,
            "first run\n"
        );
        let missing = read_tail(dir.path(), 8, 0, 64).expect_err("none");
        assert!(missing.contains("no log of workload 8"), "{missing}");
        let missing = read_tail(dir.path(), 7, 3, 64).expect_err("none");
        assert!(missing.contains("admission 3"), "{missing}");
    }
}
