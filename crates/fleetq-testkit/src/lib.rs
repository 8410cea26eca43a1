//! Fixtures that more than one of fleetq's test suites use: the crates'
//! tests and benches, the fuzz targets and the chaos suite take them from
//! here rather than each keeping a copy that drifts. A fixture one test
//! alone needs stays beside that test; the end-to-end tests' process
//! guards and test API server are in `tests/common/`, the one place the
//! root crate's tests share.
//!
//! ```
//! let yaml = fleetq_testkit::kueue::one_queue("h100", "team-a", "team-a", 8);
//! assert!(yaml.contains("nominalQuota: 8"));
//! ```

pub mod kueue;
pub mod scale;
