//! Talking to a fleetq server from the CLI: one channel with timeouts, and
//! server errors turned into one clear line.

use std::sync::OnceLock;
use std::time::Duration;

use fleetq_proto::tls::Tls;
use fleetq_proto::v1::fleet_q_client::FleetQClient;
use fleetq_proto::v1::FieldError;
use fleetq_server::transport::{endpoint, Timeouts};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::tls::{Role, TlsArgs};

/// Where the CLI finds a server unless told otherwise.
pub const DEFAULT_SERVER: &str = "127.0.0.1:7400";

pub type Client = FleetQClient<InterceptedService<Channel, BearerToken>>;

/// Adds `authorization: Bearer TOKEN` to every request when the CLI has a
/// token.
#[derive(Clone, Debug, Default)]
pub struct BearerToken(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for BearerToken {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

/// The CLI's TLS flags, set once by `main` before any subcommand runs.
static SECURITY: OnceLock<TlsArgs> = OnceLock::new();

/// Records the global TLS flags for [`connect`].
pub fn configure(args: TlsArgs) {
    let _ = SECURITY.set(args);
}

fn security() -> TlsArgs {
    SECURITY.get().cloned().unwrap_or_default()
}

/// Connects to `addr` with the CLI's TLS flags (mutual TLS with
/// client.pem from the TLS directory, or a bearer token, or --insecure
/// plaintext); the error is one line naming the address.
pub async fn connect(addr: &str) -> Result<Client, String> {
    let args = security();
    let tls = args.resolve(&Role::Client)?;
    connect_with(addr, tls.as_ref(), args.token.as_deref()).await
}

/// Connects to `addr` with the given TLS and bearer token.
pub async fn connect_with(
    addr: &str,
    tls: Option<&Tls>,
    token: Option<&str>,
) -> Result<Client, String> {
    let timeouts = Timeouts {
        request: Duration::from_secs(30),
        ..Timeouts::default()
    };
    let endpoint = endpoint(addr, &timeouts)?;
    let connected = match tls {
        None => endpoint.connect().await,
        Some(tls) => {
            let tls = tls.clone();
            endpoint
                .connect_with_connector(tower::service_fn(move |uri| {
                    fleetq_proto::tls::dial(uri, tls.clone(), None)
                }))
                .await
        }
    };
    let channel = connected.map_err(|e| {
        let hint = if tls.is_some() {
            " (TLS: is the server's certificate from the CA in --tls-dir? a plaintext server needs --insecure)"
        } else {
            " (plaintext: a server with TLS needs the CLI without --insecure)"
        };
        format!("cannot reach the fleetq server at {addr}: {}. Is `fleetq dev` or `fleetq server` running? (--server ADDR or FLEETQ_SERVER choose another){hint}", source_text(&e))
    })?;
    let token = match token {
        None => None,
        Some(t) => Some(
            format!("Bearer {t}")
                .parse::<MetadataValue<Ascii>>()
                .map_err(|_| "--token: not a valid token (printable ASCII only)".to_string())?,
        ),
    };
    Ok(FleetQClient::with_interceptor(channel, BearerToken(token))
        .max_decoding_message_size(256 << 20)
        .max_encoding_message_size(64 << 20))
}

fn source_text(e: &dyn std::error::Error) -> String {
    with_sources(e.to_string(), e.source())
}

/// `text` followed by each cause in `source`'s chain.
fn with_sources(mut text: String, mut source: Option<&dyn std::error::Error>) -> String {
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
        if let Ok(s) = c
            .node_status(fleetq_proto::v1::NodeStatusRequest {
                skip_state_hash: true,
            })
            .await
        {
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
        tonic::Code::Unauthenticated => "not authenticated",
        _ => "error",
    };
    // Transport failures carry their cause (a TLS alert, a protocol
    // error) only in the source chain.
    let mut text = with_sources(
        format!("{code}: {}", status.message()),
        std::error::Error::source(status),
    );
    if text.contains("h2 protocol error") || text.contains("transport error") {
        text.push_str(" (TLS: does the server trust this client's certificate, is it the CA's of --tls-dir, or is one side --insecure and the other not?)");
    }
    text
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
