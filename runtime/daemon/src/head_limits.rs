//! Request-head limits answered in the API's JSON error shape: a request
//! target longer than `serve.max_uri_bytes` gets `414`, headers larger
//! than `serve.max_header_bytes` get `431`, before any route runs.
//!
//! The HTTP parser (hyper) answers an over-long head itself, with an empty
//! body, once it no longer fits the parser's buffer. The buffer is sized
//! from these limits plus [`PARSER_SLACK_BYTES`], so every head a client
//! can get parsed at all is judged here and refused with a body that says
//! which limit it crossed.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::ApiError;

/// The request-head limits, from the `serve` settings.
#[derive(Debug, Clone, Copy)]
pub struct HeadLimits {
    /// Longest request target (path and query), in bytes.
    pub max_uri_bytes: usize,
    /// Largest sum of header names and values, in bytes.
    pub max_header_bytes: usize,
}

/// Room the parser's buffer keeps beyond both limits (the request line's
/// method and version, header separators, a pipelined request's start).
pub const PARSER_SLACK_BYTES: usize = 16 * 1024;

/// Smallest read buffer hyper accepts.
const HYPER_MIN_BUFFER_BYTES: usize = 8192;

impl HeadLimits {
    /// The parser buffer for these limits: a head that passes them always
    /// fits, and one that crosses them is still parsed (so this module, not
    /// the parser, answers it).
    pub fn parser_buffer_bytes(self) -> usize {
        (self.max_uri_bytes + self.max_header_bytes + PARSER_SLACK_BYTES)
            .max(HYPER_MIN_BUFFER_BYTES)
    }

    /// The refusal for a request whose head crosses a limit, if it does.
    pub fn refusal(self, request: &Request) -> Option<Response> {
        let uri_bytes = request
            .uri()
            .path_and_query()
            .map_or(request.uri().to_string().len(), |pq| pq.as_str().len());
        if uri_bytes > self.max_uri_bytes {
            return Some(refuse(
                StatusCode::URI_TOO_LONG,
                "uri_too_long",
                format!(
                    "the request target is {uri_bytes} bytes; at most {} are accepted (serve.max_uri_bytes)",
                    self.max_uri_bytes
                ),
            ));
        }
        let header_bytes: usize = request
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum();
        if header_bytes > self.max_header_bytes {
            return Some(refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
                format!(
                    "the request headers are {header_bytes} bytes; at most {} are accepted (serve.max_header_bytes)",
                    self.max_header_bytes
                ),
            ));
        }
        None
    }
}

/// Middleware: refuses a request whose head crosses `limits`, else runs it.
pub async fn enforce(limits: HeadLimits, request: Request, next: Next) -> Response {
    match limits.refusal(&request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    }
}

fn refuse(status: StatusCode, code: &'static str, message: String) -> Response {
    let mut response = ApiError::new(status, code, message).into_response();
    // The client may have more of this head in flight; it is not read.
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits {
        max_uri_bytes: 100,
        max_header_bytes: 200,
    };

    fn request(uri: &str, header_value: &str) -> Request {
        Request::builder()
            .uri(uri)
            .header("x-test", header_value)
            .body(axum::body::Body::empty())
            .expect("a valid request")
    }

    #[test]
    fn heads_within_both_limits_pass() {
        assert!(LIMITS.refusal(&request("/v1/health", "short")).is_none());
        let uri = format!("/{}", "a".repeat(99));
        assert!(LIMITS.refusal(&request(&uri, "short")).is_none());
    }

    #[test]
    fn a_long_target_is_414_and_large_headers_are_431() {
        let uri = format!("/{}", "a".repeat(100));
        let refused = LIMITS.refusal(&request(&uri, "short")).expect("refused");
        assert_eq!(refused.status(), StatusCode::URI_TOO_LONG);
        let refused = LIMITS
            .refusal(&request("/", &"v".repeat(200)))
            .expect("refused");
        assert_eq!(
            refused.status(),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
    }

    #[test]
    fn the_parser_buffer_holds_every_head_the_limits_allow() {
        assert_eq!(
            LIMITS.parser_buffer_bytes(),
            HYPER_MIN_BUFFER_BYTES.max(300 + PARSER_SLACK_BYTES)
        );
        let big = HeadLimits {
            max_uri_bytes: 1 << 20,
            max_header_bytes: 1 << 20,
        };
        assert!(big.parser_buffer_bytes() > (2 << 20));
    }
}
