//! Time as the ledger sees it: leader-stamped milliseconds, never the local
//! clock. Durations read and write as `90s`, `30m`, `1h30m`, `500ms` or a
//! plain number of seconds.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Milliseconds since the Unix epoch, as stamped by the Raft leader.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub fn from_secs(secs: u64) -> Timestamp {
        Timestamp(secs.saturating_mul(1000))
    }

    pub fn millis(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_millis().min(u64::MAX as u128) as u64),
        )
    }

    /// Time elapsed since `earlier`, zero if `earlier` is in the future.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// `2024-05-01T12:00:00Z`: UTC to the second, as Kubernetes writes a
    /// `metav1.Time` (`creationTimestamp`, a condition's
    /// `lastTransitionTime`); the milliseconds are dropped, as there.
    pub fn rfc3339(self) -> String {
        let seconds = i64::try_from(self.0 / 1000).unwrap_or(i64::MAX);
        // Past year 9999 (jiff's range) prints jiff's last instant: no
        // timestamp fleetq stamps gets there.
        jiff::Timestamp::from_second(seconds)
            .unwrap_or(jiff::Timestamp::MAX)
            .to_string()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

/// Why a duration string was refused; quotes the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("duration {0:?} is malformed: expected e.g. 90s, 30m, 1h30m, 500ms or a number of seconds")]
pub struct DurationError(pub String);

/// The longest duration fleetq holds: its text form (and so the Raft log)
/// counts milliseconds in a `u64`.
pub const MAX_DURATION_SECS: u64 = u64::MAX / 1000;

/// `secs` seconds, or `None` beyond [`MAX_DURATION_SECS`] (such a duration
/// would not survive its own text form: fuzz/ command_decode).
pub fn duration_from_secs(secs: u64) -> Option<Duration> {
    (secs <= MAX_DURATION_SECS).then(|| Duration::from_secs(secs))
}

/// Parses `1h30m`, `90s`, `500ms`, `2d` or a bare number of seconds.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    let err = || DurationError(input.to_string());
    if s.is_empty() {
        return Err(err());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u64>()
            .ok()
            .and_then(duration_from_secs)
            .ok_or_else(err);
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(err());
        }
        let value: u64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total_ms = value
            .checked_mul(unit_ms)
            .and_then(|v| total_ms.checked_add(v))
            .ok_or_else(err)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Prints a duration in the largest exact units: `1h30m`, `90ms`, `0s`.
pub fn format_duration(d: Duration) -> String {
    let mut ms = d.as_millis().min(u64::MAX as u128) as u64;
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    if ms > 0 {
        out.push_str(&format!("{ms}ms"));
    }
    out
}

/// `#[serde(with = "fleetq_model::time::duration_opt")]` for `Option<Duration>`.
pub mod duration_opt {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<Duration>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 90s, 30m or 1h30m")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                d.deserialize_any(V)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse_duration(v).map(Some).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                duration_from_secs(v).map(Some).ok_or_else(|| {
                    E::custom(format!(
                        "duration {v}s is too large (at most {MAX_DURATION_SECS}s)"
                    ))
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                if v < 0 {
                    return Err(E::custom(format!("duration {v} is negative")));
                }
                self.visit_u64(v as u64)
            }
        }
        d.deserialize_option(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_as_kubernetes_times() {
        assert_eq!(Timestamp(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(Timestamp(951_782_400_999).rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(
            Timestamp(1_714_564_800_000).rfc3339(),
            "2024-05-01T12:00:00Z"
        );
        assert_eq!(
            Timestamp(1_735_689_599_000).rfc3339(),
            "2024-12-31T23:59:59Z"
        );
        assert_eq!(
            Timestamp(4_107_542_400_000).rfc3339(),
            "2100-03-01T00:00:00Z"
        );
    }

    #[test]
    fn parses_and_formats_durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("120").unwrap(), Duration::from_secs(120));
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
        for bad in [
            "",
            "5x",
            "h",
            "1.5h",
            "-3s",
            "99999999999999999999d",
            "18446744073709552",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
