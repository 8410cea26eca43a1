//! The limits flags shared by `fleetq server` and `fleetq dev` (and the
//! server's TOML keys of the same names): see `fleetq_server::guard::limits`.

use clap::Args;
use fleetq_server::guard::limits::{MAX_REQUEST_BYTES, MIN_REQUEST_BYTES};
use fleetq_server::Limits;
use serde::{Deserialize, Serialize};

/// The limits flags; as the server's TOML keys (flattened into
/// `ServerArgs`), the same names with underscores.
#[derive(Clone, Debug, Default, Args, Deserialize, Serialize)]
#[serde(default)]
pub struct LimitArgs {
    /// Largest request message the API and agent services accept, in
    /// bytes or with Ki, Mi or Gi (larger ones are refused with
    /// OUT_OF_RANGE) [default: 16Mi].
    #[arg(long, value_name = "BYTES")]
    #[serde(
        deserialize_with = "bytes_as_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_request_bytes: Option<String>,
    /// Writes (Submit, Cancel, Apply, Delete) per second allowed to one
    /// client (a tenant by name; a caller without one by source IP
    /// address), per node; a batch counts each workload; more are refused with
    /// RESOURCE_EXHAUSTED. 0: unlimited [default: 0].
    #[arg(long, value_name = "PER_SECOND", allow_negative_numbers = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_write_rate: Option<f64>,
    /// Writes one client may make at once before --client-write-rate
    /// applies [default: one second's worth].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_write_burst: Option<u32>,
    /// Most pending workloads one LocalQueue may hold; a submission beyond
    /// it is refused naming the LocalQueue. The leader's setting counts.
    /// 0: unlimited [default: 100000].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pending_per_local_queue: Option<u64>,
    /// Most clusters whose agents hold a session with this node at once
    /// (a reconnecting agent's second session is let in) [default: 1024].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_agent_sessions: Option<usize>,
}

/// A byte count in a TOML file: a number, or text such as "16Mi"; kept as
/// the flag's text.
fn bytes_as_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Bytes {
        Number(u64),
        Text(String),
    }
    Ok(Option::<Bytes>::deserialize(d)?.map(|b| match b {
        Bytes::Number(n) => n.to_string(),
        Bytes::Text(t) => t,
    }))
}

/// `16777216`, `16Mi`, `512Ki`, `1Gi` (also `K`, `M`, `G`: powers of 1000).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let unit: u64 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        other => {
            return Err(format!(
                "{other:?} is not a unit (use bytes, or Ki, Mi, Gi)"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count such as 16Mi or 16777216"))?;
    n.checked_mul(unit)
        .ok_or_else(|| format!("{text:?} is too large"))
}

impl LimitArgs {
    /// The limits from these settings (flags over the file's keys, laid
    /// together by the caller) over the defaults; a bad value is refused
    /// naming its flag and key.
    pub fn resolve(&self) -> Result<Limits, String> {
        let mut limits = Limits::default();
        let bytes = match &self.max_request_bytes {
            Some(t) => Some(
                parse_bytes(t)
                    .map_err(|e| format!("--max-request-bytes (max_request_bytes) {t:?}: {e}"))?,
            ),
            None => None,
        };
        if let Some(b) = bytes {
            let b = usize::try_from(b).unwrap_or(usize::MAX);
            if !(MIN_REQUEST_BYTES..=MAX_REQUEST_BYTES).contains(&b) {
                return Err(format!(
                    "--max-request-bytes: {b} bytes is outside 1Ki to 2Gi"
                ));
            }
            limits.max_request_bytes = b;
        }
        if let Some(rate) = self.client_write_rate {
            fleetq_server::guard::limits::rate::check_rate(rate).map_err(|_| {
                format!(
                    "--client-write-rate: {rate} must be 0 (unlimited) or a number of writes per second up to {}",
                    fleetq_server::guard::limits::rate::MAX_RATE
                )
            })?;
            limits.client_write_rate = rate;
        }
        if let Some(burst) = self.client_write_burst {
            if burst == 0 {
                return Err("--client-write-burst: must be at least 1".into());
            }
            if limits.client_write_rate == 0.0 {
                return Err("--client-write-burst needs --client-write-rate above 0".into());
            }
            limits.client_write_burst = burst;
        }
        if let Some(n) = self.max_pending_per_local_queue {
            limits.max_pending_per_local_queue = n;
        }
        if let Some(n) = self.max_agent_sessions {
            if n == 0 {
                return Err("--max-agent-sessions: must be at least 1".into());
            }
            limits.max_agent_sessions = n;
        }
        limits.check()?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("16Mi"), Ok(16 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("2M"), Ok(2_000_000));
        assert!(parse_bytes("16MB").is_err());
        assert!(parse_bytes("Mi").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999Gi").is_err());
    }

    #[test]
    fn defaults_values_from_toml_and_errors_name_the_flag() {
        assert_eq!(LimitArgs::default().resolve(), Ok(Limits::default()));
        // As the server's TOML file writes them: a byte count as text or
        // as a number.
        let file: LimitArgs = toml::from_str(
            "max_request_bytes = \"1Mi\"\nclient_write_rate = 5.0\nmax_pending_per_local_queue = 7\n",
        )
        .expect("parses");
        let l = file.resolve().expect("valid");
        assert_eq!(l.max_request_bytes, 1 << 20);
        assert_eq!(l.client_write_rate, 5.0);
        assert_eq!(l.max_pending_per_local_queue, 7);
        let number: LimitArgs = toml::from_str("max_request_bytes = 4096").expect("parses");
        assert_eq!(number.resolve().map(|l| l.max_request_bytes), Ok(4096));
        let bad = |args: LimitArgs, flag: &str| {
            let e = args.resolve().expect_err("refused");
            assert!(e.contains(flag), "{e:?} does not name {flag}");
        };
        bad(
            LimitArgs {
                max_request_bytes: Some("12x".into()),
                ..LimitArgs::default()
            },
            "--max-request-bytes",
        );
        bad(
            LimitArgs {
                max_request_bytes: Some("10".into()),
                ..LimitArgs::default()
            },
            "--max-request-bytes",
        );
        bad(
            LimitArgs {
                client_write_rate: Some(-1.0),
                ..LimitArgs::default()
            },
            "--client-write-rate",
        );
        bad(
            LimitArgs {
                client_write_burst: Some(5),
                ..LimitArgs::default()
            },
            "--client-write-burst",
        );
        bad(
            LimitArgs {
                max_agent_sessions: Some(0),
                ..LimitArgs::default()
            },
            "--max-agent-sessions",
        );
    }
}
