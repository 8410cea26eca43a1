//! Oversized requests. tonic itself refuses a message over a service's
//! `max_decoding_message_size` with `OUT_OF_RANGE` ("decoded message
//! length too large: found N bytes, the limit is: M bytes") before the
//! handler runs. This layer, around every service of the node, finds
//! those answers, names the setting in their message, and logs and
//! counts them. (A message over the limit inside a stream, an agent's
//! session, ends the stream; the agent service reports that one.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tonic::transport::server::TcpConnectInfo;
use tonic::{Code, Status};
use tower::{Layer, Service};

use crate::metrics::ServerMetrics;

use crate::metrics::reason;

/// The path prefix of the Raft peer service.
const RAFT_PATH: &str = "/fleetq.v1.Raft/";

/// Is `status` tonic's refusal of an oversized message?
pub fn is_too_large(status: &Status) -> bool {
    status.code() == Code::OutOfRange
        && status
            .message()
            .contains("decoded message length too large")
}

/// tonic's refusal with the setting named, for `path`.
pub fn explain(status: &Status, path: &str) -> Status {
    let setting = if path.starts_with(RAFT_PATH) {
        "the limit for Raft peer messages: 4 x max_request_bytes, at least 256 MiB"
    } else {
        "the server's max_request_bytes"
    };
    Status::new(
        status.code(),
        format!("request too large ({setting}): {}", status.message()),
    )
}

/// Logs, counts and explains oversized requests.
#[derive(Clone, Debug)]
pub struct RequestSizeLayer {
    metrics: ServerMetrics,
}

impl RequestSizeLayer {
    pub fn new(metrics: ServerMetrics) -> RequestSizeLayer {
        RequestSizeLayer { metrics }
    }
}

impl<S> Layer<S> for RequestSizeLayer {
    type Service = RequestSize<S>;

    fn layer(&self, inner: S) -> RequestSize<S> {
        RequestSize {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RequestSize<S> {
    inner: S,
    metrics: ServerMetrics,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> Service<http::Request<B>> for RequestSize<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let path = request.uri().path().to_string();
        let source = request
            .extensions()
            .get::<TcpConnectInfo>()
            .and_then(|i| i.remote_addr())
            .map(|a| a.ip().to_canonical().to_string())
            .unwrap_or_else(|| "unknown".into());
        let metrics = self.metrics.clone();
        let future = self.inner.call(request);
        Box::pin(async move {
            let mut response = future.await?;
            let refused = response
                .extensions()
                .get::<Status>()
                .filter(|s| is_too_large(s))
                .map(|s| explain(s, &path));
            if let Some(status) = refused {
                tracing::warn!(
                    rpc = %path,
                    client = %source,
                    reason = reason::REQUEST_TOO_LARGE,
                    "refused: {}",
                    status.message()
                );
                metrics.refused(reason::REQUEST_TOO_LARGE);
                // The grpc-status and grpc-message headers the client reads.
                if status.add_header(response.headers_mut()).is_ok() {
                    response.extensions_mut().insert(status);
                }
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tonics_refusal_is_recognised_and_explained() {
        let tonic = Status::out_of_range(
            "Error, decoded message length too large: found 20000000 bytes, the limit is: 16777216 bytes",
        );
        assert!(is_too_large(&tonic));
        assert!(!is_too_large(&Status::out_of_range("something else")));
        assert!(!is_too_large(&Status::invalid_argument(
            "decoded message length too large"
        )));
        let api = explain(&tonic, "/fleetq.v1.FleetQ/Submit");
        assert_eq!(api.code(), Code::OutOfRange);
        assert!(api.message().contains("max_request_bytes"));
        assert!(api.message().contains("the limit is: 16777216 bytes"));
        let raft = explain(&tonic, "/fleetq.v1.Raft/AppendEntries");
        assert!(raft.message().contains("Raft peer messages"));
    }
}
