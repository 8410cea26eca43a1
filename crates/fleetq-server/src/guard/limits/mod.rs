//! Limits against abuse: request size, write rate per client, pending
//! workloads per LocalQueue, and agent sessions. Every refusal is logged
//! (`warn`, with its reason) and counted in
//! `fleetq_requests_refused_total{reason}` ([`reason`]).
//!
//! - [`size`]: every gRPC service decodes at most `max_request_bytes` per
//!   message (the Raft peer service more, see [`Limits::raft_message_bytes`]);
//!   tonic refuses a larger one with `OUT_OF_RANGE`, and [`size`] names
//!   the setting in that error, logs and counts it.
//! - [`rate`]: a token bucket per client for the API's writes (Submit,
//!   Cancel, Apply, Delete; a batch counts each workload). The client is
//!   its tenant by name, or its source IP address ([`client_key`](crate::guard::auth::client_key)) when
//!   it has none (`--insecure`, a node).
//! - Pending workloads per LocalQueue: enforced by the ledger's apply()
//!   (see `fleetq_ledger::Command::SubmitWorkloads`), with the limit that
//!   the leader stamps into the command ([`crate::raft::proposer::Proposer`]):
//!   deterministic on every replica and on replay, whatever each node's
//!   own setting.
//! - [`sessions`]: at most `max_agent_sessions` clusters hold a session
//!   with a node at once (a second session of a cluster already counted,
//!   such as a reconnect racing the old session's end, is let in).
//!
//! Limits are per node: a client that spreads its writes over three nodes
//! gets three times the rate.

pub mod rate;
pub mod sessions;
pub mod size;

use tonic::{Request, Status};

use crate::metrics::{reason, ServerMetrics};
pub use rate::RateLimiter;
pub use sessions::{SessionSlot, SessionSlots};
pub use size::RequestSizeLayer;

/// A node's limits (`fleetq server` and `fleetq dev` flags and TOML keys
/// of the same names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Largest message the API and agent services decode.
    pub max_request_bytes: usize,
    /// Writes per second per client; 0: unlimited.
    pub client_write_rate: f64,
    /// Writes a client may make at once before the rate applies; 0: one
    /// second's worth (at least 1).
    pub client_write_burst: u32,
    /// Most pending workloads in one LocalQueue (the leader's setting is
    /// the one that counts); 0: unlimited.
    pub max_pending_per_local_queue: u64,
    /// Most clusters with a session open to this node at once.
    pub max_agent_sessions: usize,
    /// HTTP/2 streams one connection may have open at once.
    pub max_concurrent_streams: u32,
    /// Requests one connection may have in flight at once (more wait).
    pub concurrency_per_connection: usize,
}

/// The smallest `max_request_bytes` accepted.
pub const MIN_REQUEST_BYTES: usize = 1024;
/// The largest `max_request_bytes` accepted (gRPC lengths are 32-bit).
pub const MAX_REQUEST_BYTES: usize = 2 << 30;
/// What a Raft peer message may always be (snapshot chunks and batches of
/// log entries travel as JSON, several times their binary size).
const RAFT_MESSAGE_FLOOR: usize = 256 << 20;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: 16 << 20,
            client_write_rate: 0.0,
            client_write_burst: 0,
            max_pending_per_local_queue: 100_000,
            max_agent_sessions: 1024,
            max_concurrent_streams: 1024,
            concurrency_per_connection: 1024,
        }
    }
}

impl Limits {
    /// Largest message the Raft peer service decodes: a follower forwards
    /// a client's write as JSON (larger than the request it came in), and
    /// openraft's snapshot chunks (3 MiB) and batches of up to 512 entries
    /// grow several-fold as JSON; so four times `max_request_bytes`, and
    /// never less than 256 MiB. Peers are not clients: this is no
    /// defence, only room.
    pub fn raft_message_bytes(&self) -> usize {
        self.max_request_bytes
            .saturating_mul(4)
            .max(RAFT_MESSAGE_FLOOR)
    }

    /// The pending limit as the ledger command carries it.
    pub fn pending_limit(&self) -> Option<u64> {
        (self.max_pending_per_local_queue > 0).then_some(self.max_pending_per_local_queue)
    }

    /// Checks the settings; the error names the setting.
    pub fn check(&self) -> Result<(), String> {
        if !(MIN_REQUEST_BYTES..=MAX_REQUEST_BYTES).contains(&self.max_request_bytes) {
            return Err(format!(
                "max_request_bytes: {} is outside {MIN_REQUEST_BYTES} (1Ki) to {MAX_REQUEST_BYTES} (2Gi)",
                self.max_request_bytes
            ));
        }
        rate::check_rate(self.client_write_rate)?;
        if self.max_agent_sessions == 0 {
            return Err("max_agent_sessions: must be at least 1".into());
        }
        if self.max_concurrent_streams == 0 || self.concurrency_per_connection == 0 {
            return Err(
                "max_concurrent_streams and concurrency_per_connection must be at least 1".into(),
            );
        }
        Ok(())
    }
}

/// The API's write limits: a client over its rate is refused with
/// `RESOURCE_EXHAUSTED` before anything is proposed.
#[derive(Clone)]
pub struct WriteGate {
    limiter: Option<std::sync::Arc<RateLimiter>>,
    metrics: ServerMetrics,
}

impl WriteGate {
    pub fn new(limits: &Limits, metrics: ServerMetrics) -> Result<WriteGate, String> {
        let limiter = if limits.client_write_rate > 0.0 {
            Some(std::sync::Arc::new(RateLimiter::new(
                limits.client_write_rate,
                limits.client_write_burst,
            )?))
        } else {
            None
        };
        Ok(WriteGate { limiter, metrics })
    }

    /// Lets the write `rpc` through, or refuses it (logged and counted).
    /// Authenticated tenants are limited per tenant (across every address
    /// they call from); everyone else per source address.
    pub fn admit<T>(
        &self,
        rpc: &str,
        request: &Request<T>,
        caller: &crate::guard::auth::Caller,
    ) -> Result<(), Status> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let client = match caller {
            crate::guard::auth::Caller::Tenant(t) => format!("tenant {}", t.name),
            _ => crate::guard::auth::client_key(request),
        };
        limiter.check(&client).map_err(|refusal| {
            tracing::warn!(rpc, client = %client, reason = reason::RATE_LIMIT, "refused: {refusal}");
            self.metrics.refused(reason::RATE_LIMIT);
            Status::resource_exhausted(refusal)
        })
    }

    /// Charges a batch's further workloads (beyond the one [`admit`]
    /// charged) to the caller's write rate: a batch of a thousand
    /// workloads is a thousand writes.
    ///
    /// [`admit`]: WriteGate::admit
    pub fn admit_more<T>(
        &self,
        rpc: &str,
        request: &Request<T>,
        caller: &crate::guard::auth::Caller,
        more: u32,
    ) -> Result<(), Status> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let client = match caller {
            crate::guard::auth::Caller::Tenant(t) => format!("tenant {}", t.name),
            _ => crate::guard::auth::client_key(request),
        };
        limiter.check_n(&client, more).map_err(|refusal| {
            tracing::warn!(rpc, client = %client, reason = reason::RATE_LIMIT, "refused: {refusal}");
            self.metrics.refused(reason::RATE_LIMIT);
            Status::resource_exhausted(refusal)
        })
    }

    /// Counts and logs a submission the ledger refused because its
    /// LocalQueue was full.
    pub fn pending_limit_refused(&self, workload: &str, message: &str) {
        tracing::warn!(
            workload,
            reason = reason::PENDING_LIMIT,
            "refused: {message}"
        );
        self.metrics.refused(reason::PENDING_LIMIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_raft_gets_room() {
        let l = Limits::default();
        assert_eq!(l.check(), Ok(()));
        assert_eq!(l.max_request_bytes, 16 << 20);
        assert_eq!(l.raft_message_bytes(), 256 << 20);
        let big = Limits {
            max_request_bytes: 128 << 20,
            ..l
        };
        assert_eq!(big.raft_message_bytes(), 512 << 20);
        assert_eq!(l.pending_limit(), Some(100_000));
        let off = Limits {
            max_pending_per_local_queue: 0,
            ..l
        };
        assert_eq!(off.pending_limit(), None);
    }

    #[test]
    fn bad_settings_name_themselves() {
        let l = Limits::default();
        let e = Limits {
            max_request_bytes: 10,
            ..l
        }
        .check();
        assert!(e.is_err_and(|e| e.starts_with("max_request_bytes")));
        let e = Limits {
            client_write_rate: -1.0,
            ..l
        }
        .check();
        assert!(e.is_err_and(|e| e.starts_with("client_write_rate")));
        let e = Limits {
            max_agent_sessions: 0,
            ..l
        }
        .check();
        assert!(e.is_err_and(|e| e.starts_with("max_agent_sessions")));
    }

    #[test]
    fn the_write_gate_refuses_over_the_rate_and_counts_it() {
        let metrics = ServerMetrics::default();
        let limits = Limits {
            client_write_rate: 0.001,
            client_write_burst: 2,
            ..Limits::default()
        };
        let gate = WriteGate::new(&limits, metrics.clone()).expect("valid limits");
        let request = Request::new(());
        let anyone = crate::guard::auth::Caller::Insecure;
        assert!(gate.admit("Submit", &request, &anyone).is_ok());
        assert!(gate.admit("Submit", &request, &anyone).is_ok());
        let refused = gate
            .admit("Submit", &request, &anyone)
            .expect_err("third is over");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused
                .message()
                .starts_with("rate limit: 0.001 writes/s per client (source unknown)"),
            "{}",
            refused.message()
        );
        assert_eq!(metrics.refused_count(reason::RATE_LIMIT), 1);
        // Unlimited by default.
        let open = WriteGate::new(&Limits::default(), metrics.clone()).expect("valid");
        for _ in 0..100 {
            assert!(open.admit("Submit", &request, &anyone).is_ok());
        }
        assert_eq!(metrics.refused_count(reason::RATE_LIMIT), 1);
        // Tenants have a bucket each, whatever address they call from.
        let tenant = |name: &str| {
            crate::guard::auth::Caller::Tenant(crate::guard::auth::Tenant {
                name: name.into(),
                admin: false,
                namespaces: vec![name.into()],
                verbs: Vec::new(),
                tokens: Vec::new(),
            })
        };
        assert!(gate.admit("Submit", &request, &tenant("a")).is_ok());
        assert!(gate.admit("Submit", &request, &tenant("a")).is_ok());
        let refused = gate
            .admit("Submit", &request, &tenant("a"))
            .expect_err("a is over");
        assert!(
            refused.message().contains("tenant a"),
            "{}",
            refused.message()
        );
        assert!(gate.admit("Submit", &request, &tenant("b")).is_ok());
    }
}
