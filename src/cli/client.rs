//! Talking to a fleetq server from the CLI: one channel with timeouts, and
//! server errors turned into one clear line.

use std::time::Duration;

use fleetq_proto::v1::fleet_q_client::FleetQClient;
use fleetq_proto::v1::FieldError;
use fleetq_server::transport::{endpoint, Timeouts};
use tonic::transport::Channel;

/// Where the CLI finds a server unless told otherwise.
pub const DEFAULT_SERVER: &str = "127.0.0.1:7400";

pub type Client = FleetQClient<Channel>;

/// Connects to `addr`; the error is one line naming the address.
pub async fn connect(addr: &str) -> Result<Client, String> {
    let timeouts = Timeouts {
        request: Duration::from_secs(30),
        ..Timeouts::default()
    };
    let channel = endpoint(addr, &timeouts)?
        .connect()
        .await
        .map_err(|e| {
            format!("cannot reach the fleetq server at {addr}: {}. Is `fleetq dev` or `fleetq server` running? (--server ADDR or FLEETQ_SERVER choose another)", source_text(&e))
        })?;
    Ok(FleetQClient::new(channel)
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(64 << 20))
}

fn source_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        // Error chains often repeat their cause's text; say it once.
        let part = s.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        source = s.source();
    }
    text
}

/// Waits until the node behind `c` knows a Raft leader; returns its id.
pub async fn wait_for_leader(c: &mut Client, timeout: Duration) -> Result<u64, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(s) = c.node_status(fleetq_proto::v1::NodeStatusRequest {}).await {
            let leader = s.into_inner().leader_id;
            if leader != 0 {
                return Ok(leader);
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("no Raft leader was elected within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A gRPC error as one line.
pub fn status_line(status: &tonic::Status) -> String {
    let code = match status.code() {
        tonic::Code::InvalidArgument => "invalid",
        tonic::Code::NotFound => "not found",
        tonic::Code::Unavailable => "unavailable",
        tonic::Code::Unknown => "outcome unknown",
        tonic::Code::FailedPrecondition => "refused",
        tonic::Code::PermissionDenied => "denied",
        tonic::Code::DeadlineExceeded => "timed out",
        tonic::Code::ResourceExhausted => "limit exceeded",
        tonic::Code::OutOfRange => "out of range",
        _ => "error",
    };
    format!("{code}: {}", status.message())
}

/// One line per field error, kubectl style.
pub fn field_error_line(e: &FieldError) -> String {
    let mut line = String::new();
    if e.document > 0 {
        line.push_str(&format!("document {}: ", e.document));
    }
    if !e.object.is_empty() {
        line.push_str(&format!("{}: ", e.object));
    }
    if !e.path.is_empty() {
        line.push_str(&format!("{}: ", e.path));
    }
    line.push_str(&e.message);
    line
}

/// A fresh id that makes a retried submission a no-op.
pub fn request_id() -> String {
    use rand::Rng;
    let n: u128 = rand::thread_rng().gen();
    format!("cli-{n:032x}")
}

/// Runs an async CLI command on a small runtime.
pub fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    Ok(runtime.block_on(future))
}
