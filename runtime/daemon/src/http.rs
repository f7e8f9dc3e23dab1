//! The daemon's HTTP accept loop: axum's router served over hyper with the
//! limits a daemon reachable by untrusted clients needs. At most
//! `serve.max_connections` connections are served at once (past that a
//! connection is answered `503` with the JSON error shape and closed, so a
//! flood of idle connections cannot exhaust the open-file limit); a
//! connection must send each request's headers within
//! `serve.header_read_timeout_s`, which also closes idle keep-alive
//! connections (hyper starts that timer whenever it waits for a request
//! head); bodies over `serve.max_body_bytes` are answered `413`, request
//! targets and headers over their limits `414` and `431`
//! ([`crate::head_limits`]). Accepted connections have `TCP_NODELAY` set,
//! and hyper writes each response's head and body parts with vectored
//! writes, so that an answer is never held back waiting for an ACK.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::head_limits::{self, HeadLimits};
use crate::settings::ServeConfig;

/// What [`serve`] enforces, from the `serve` settings.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Most connections served at once.
    pub max_connections: usize,
    /// Longest wait for a request's headers (and idle keep-alive).
    pub header_read_timeout: Duration,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Request-target and header limits.
    pub head: HeadLimits,
}

impl HttpLimits {
    /// The limits `serve` sets.
    pub fn from_settings(serve: &ServeConfig) -> HttpLimits {
        HttpLimits {
            max_connections: serve.max_connections,
            header_read_timeout: serve.header_read_timeout,
            max_body_bytes: serve.max_body_bytes,
            head: HeadLimits {
                max_uri_bytes: serve.max_uri_bytes,
                max_header_bytes: serve.max_header_bytes,
            },
        }
    }
}

/// The address a request's connection came from, in its extensions (the
/// API opens `/metrics` to loopback peers when configured to).
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// How long accepting pauses after it fails (out of file descriptors,
/// say), so that a full table does not spin the loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` within `limits` until `shutdown` is
/// cancelled, then waits for open connections to finish their requests
/// (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) {
    let head = limits.head;
    let router = router
        .layer(axum::extract::DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(axum::middleware::from_fn(move |request, next| {
            head_limits::enforce(head, request, next)
        }));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut refused_since_log = 0u64;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                // A response goes out in more than one write (headers, SSE
                // events, the last chunk): with Nagle's algorithm the later
                // ones wait for the client's delayed ACK, some 40 ms a call.
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
                }
                (stream, peer)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot accept a connection; pausing");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if refused_since_log == 0 {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached: new connections are answered 503 (serve.max_connections)"
                );
            }
            refused_since_log = (refused_since_log + 1) % 1000;
            tokio::spawn(refuse(stream));
            continue;
        };
        refused_since_log = 0;
        let connection_router = router.clone();
        let service = hyper::service::service_fn(
            move |mut request: hyper::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(PeerAddr(peer));
                let mut router = connection_router.clone();
                // The router is always ready; `call` is its whole service.
                tower::Service::call(&mut router, request)
            },
        );
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_buf_size(head.parser_buffer_bytes())
            .keep_alive(true);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Answers a connection past the limit with a `503` in the API's JSON
/// error shape and closes it, without reading the request.
async fn refuse(mut stream: TcpStream) {
    let body = r#"{"error":"too_many_connections","message":"the daemon serves its maximum number of connections (serve.max_connections); retry later"}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}
