//! The HTTP exchange both model clients share: one JSON POST with a timeout
//! per attempt, retries with exponential backoff (and jitter) on 429, 5xx
//! and refused or broken connections, and errors that name the model and
//! URL.

use std::error::Error as _;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::Value;

use super::{ModelConfig, ModelError, Probe, cut};

/// Longest a [`Endpoint::probe`] waits.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest pause between two attempts, whatever the backoff says.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A `retry-after` longer than this is not waited for: the error is
/// returned at once, since the caller is better placed to decide.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest connection attempt.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Characters of an error body kept in a [`ModelError`].
pub(crate) const ERROR_MESSAGE_CHARS: usize = 500;

/// What one attempt brought back.
enum Answer {
    /// The whole body.
    Body(Vec<u8>),
    /// A 2xx answer, its body not read yet (a stream).
    Open(reqwest::Response),
}

/// One model's API endpoint and the client that reaches it.
pub(crate) struct Endpoint {
    client: reqwest::Client,
    url: String,
    model: String,
    timeout: Duration,
    max_retries: u32,
    backoff: Duration,
}

/// A header value that must not show in logs (`Debug` of the request).
fn secret_header(value: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(value).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The header carrying `config`'s API key as `format(key)`; nothing when
/// it has none.
pub(crate) fn api_key_header(
    config: &ModelConfig,
    format: impl FnOnce(&str) -> String,
) -> Result<Option<HeaderValue>, ModelError> {
    let Some(key) = &config.api_key else {
        return Ok(None);
    };
    secret_header(&format(key))
        .map(Some)
        .ok_or_else(|| ModelError::Config {
            model: config.name.clone(),
            detail: "the api_key has characters a header cannot carry".into(),
        })
}

impl Endpoint {
    /// A client for `url` sending `headers` (the provider's own, then the
    /// configured ones, which win) with every request.
    pub(crate) fn new(
        config: &ModelConfig,
        url: String,
        mut headers: HeaderMap,
    ) -> Result<Endpoint, ModelError> {
        let config_error = |detail: String| ModelError::Config {
            model: config.name.clone(),
            detail,
        };
        let https = url.to_ascii_lowercase().starts_with("https://");
        if https && !cfg!(feature = "model-https") {
            return Err(config_error(format!(
                "{url} needs TLS, and this build has no `model-https` cargo feature"
            )));
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| config_error(format!("`{name}` is not a header name")))?;
            let value = secret_header(value).ok_or_else(|| {
                config_error(format!(
                    "the value of header `{name}` is not a valid header value"
                ))
            })?;
            headers.insert(name, value);
        }
        let builder = reqwest::Client::builder()
            .user_agent(concat!("quiver/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(MAX_CONNECT_TIMEOUT));
        #[cfg(feature = "model-https")]
        let builder = match &config.tls_ca_file {
            Some(file) if https => {
                builder.tls_certs_merge(read_ca_file(file).map_err(config_error)?)
            }
            Some(_) => return Err(config_error("`tls_ca_file` is for https base URLs".into())),
            // Loading the system's trust store is pointless for plain http,
            // and fails where there is none (a minimal container).
            None if !https => builder.tls_certs_only([]),
            None => builder,
        };
        let client = builder
            .build()
            .map_err(|error| config_error(format!("cannot set up the HTTP client: {error}")))?;
        Ok(Endpoint {
            client,
            url,
            model: config.name.clone(),
            timeout: config.timeout,
            max_retries: config.max_retries,
            backoff: config.retry_backoff,
        })
    }

    /// The request URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// A [`ModelError::Malformed`] for this endpoint.
    pub(crate) fn malformed(&self, detail: impl Into<String>) -> ModelError {
        ModelError::Malformed {
            model: self.model.clone(),
            url: self.url.clone(),
            detail: detail.into(),
        }
    }

    /// POSTs `body` and returns the JSON of a 2xx answer, retrying 429,
    /// 5xx and refused or broken connections up to `max_retries` times
    /// (never a timeout: the server may still be generating).
    pub(crate) async fn post(&self, body: &Value) -> Result<Value, ModelError> {
        match self.send(body, false).await? {
            Answer::Body(bytes) => self.json_of(&bytes),
            Answer::Open(_) => unreachable!("an answer is only left open when asked"),
        }
    }

    /// POSTs `body` (a request asking for a stream) with the retries of
    /// [`Endpoint::post`], which only apply before the answer begins: a 2xx
    /// answer is returned unread, for the caller to stream.
    pub(crate) async fn post_streaming(
        &self,
        body: &Value,
    ) -> Result<reqwest::Response, ModelError> {
        match self.send(body, true).await? {
            Answer::Open(response) => Ok(response),
            Answer::Body(_) => unreachable!("a 2xx answer is left open when asked"),
        }
    }

    /// The JSON of a 2xx answer's body.
    pub(crate) fn json_of(&self, bytes: &[u8]) -> Result<Value, ModelError> {
        serde_json::from_slice(bytes).map_err(|error| {
            self.malformed(format!(
                "the body is not JSON ({error}): {}",
                cut(&String::from_utf8_lossy(bytes), ERROR_MESSAGE_CHARS)
            ))
        })
    }

    /// A [`ModelError::Stream`] for this endpoint.
    pub(crate) fn stream_error(&self, detail: impl Into<String>) -> ModelError {
        ModelError::Stream {
            model: self.model.clone(),
            url: self.url.clone(),
            detail: detail.into(),
        }
    }

    /// A [`ModelError::Timeout`] or [`ModelError::Stream`] for a stream
    /// that failed while being read.
    pub(crate) fn stream_read_error(&self, error: &reqwest::Error) -> ModelError {
        if error.is_timeout() {
            ModelError::Timeout {
                model: self.model.clone(),
                url: self.url.clone(),
                timeout_ms: self.timeout.as_millis() as u64,
            }
        } else {
            self.stream_error(format!("broke off: {}", error_chain(error)))
        }
    }

    /// The retry loop of [`Endpoint::post`] and
    /// [`Endpoint::post_streaming`]: a 2xx answer (its body read, or left
    /// open with `open`), or the error of the last attempt.
    async fn send(&self, body: &Value, open: bool) -> Result<Answer, ModelError> {
        let body = body.to_string().into_bytes();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let retries_left = attempt <= self.max_retries;
            let (status, retry_after, answer) = match self.exchange(body.clone(), open).await {
                Ok(answer) => answer,
                Err(error) if retries_left && !error.is_timeout() && !error.is_builder() => {
                    let wait = self.backoff_after(attempt);
                    tracing::warn!(
                        model = %self.model,
                        "{}: {}; retrying in {} ms",
                        self.url,
                        error_chain(&error),
                        wait.as_millis()
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Err(error) => return Err(self.transport_error(&error, attempt)),
            };
            let bytes = match answer {
                open @ Answer::Open(_) => return Ok(open),
                Answer::Body(bytes) if status.is_success() => return Ok(Answer::Body(bytes)),
                Answer::Body(bytes) => bytes,
            };
            let mut message = error_message(&bytes);
            if is_retryable(status) && retries_left {
                match retry_after {
                    Some(asked) if asked > MAX_RETRY_AFTER => {
                        message.push_str(&format!(
                            " (the server asked to retry after {} s)",
                            asked.as_secs()
                        ));
                    }
                    asked => {
                        let wait = self.backoff_after(attempt).max(asked.unwrap_or_default());
                        tracing::warn!(
                            model = %self.model,
                            "{} answered HTTP {}: {}; retrying in {} ms",
                            self.url,
                            status.as_u16(),
                            message,
                            wait.as_millis()
                        );
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                }
            }
            return Err(self.status_error(status, message, attempt));
        }
    }

    /// One `GET url` with the endpoint's headers, no retry and at most
    /// [`PROBE_TIMEOUT`]: whether the server is there and takes the
    /// credentials. A 404 or 405 (no model list) counts as an answer.
    pub(crate) async fn probe(&self, url: String) -> Result<Probe, ModelError> {
        let timeout = self.timeout.min(PROBE_TIMEOUT);
        let sent = self.client.get(&url).timeout(timeout).send().await;
        let with_url = |mut error: ModelError| {
            match &mut error {
                ModelError::Transport { url: u, .. }
                | ModelError::Timeout { url: u, .. }
                | ModelError::Status { url: u, .. }
                | ModelError::Unauthorized { url: u, .. } => *u = url.clone(),
                _ => {}
            }
            error
        };
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_timeout() => {
                return Err(with_url(ModelError::Timeout {
                    model: self.model.clone(),
                    url: String::new(),
                    timeout_ms: timeout.as_millis() as u64,
                }));
            }
            Err(error) => return Err(with_url(self.transport_error(&error, 1))),
        };
        let status = response.status();
        if status.is_success()
            || matches!(
                status,
                StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
            )
        {
            return Ok(Probe {
                url,
                status: status.as_u16(),
            });
        }
        let body = response.bytes().await.unwrap_or_default();
        Err(with_url(self.status_error(status, error_message(&body), 1)))
    }

    /// One attempt: the status, the pause `retry-after` asks for, the body
    /// (a 2xx answer left unread with `open`).
    async fn exchange(
        &self,
        body: Vec<u8>,
        open: bool,
    ) -> Result<(StatusCode, Option<Duration>, Answer), reqwest::Error> {
        let response = self.client.post(&self.url).body(body).send().await?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        if open && status.is_success() {
            return Ok((status, retry_after, Answer::Open(response)));
        }
        let bytes = response.bytes().await?.to_vec();
        Ok((status, retry_after, Answer::Body(bytes)))
    }

    fn status_error(&self, status: StatusCode, message: String, attempts: u32) -> ModelError {
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            ModelError::Unauthorized {
                model: self.model.clone(),
                url: self.url.clone(),
                status: status.as_u16(),
                message,
            }
        } else {
            ModelError::Status {
                model: self.model.clone(),
                url: self.url.clone(),
                status: status.as_u16(),
                message,
                attempts,
            }
        }
    }

    fn transport_error(&self, error: &reqwest::Error, attempts: u32) -> ModelError {
        if error.is_timeout() {
            ModelError::Timeout {
                model: self.model.clone(),
                url: self.url.clone(),
                timeout_ms: self.timeout.as_millis() as u64,
            }
        } else {
            let what = if error.is_connect() {
                "cannot connect"
            } else {
                "the exchange failed"
            };
            ModelError::Transport {
                model: self.model.clone(),
                url: self.url.clone(),
                detail: format!("{what}: {}", error_chain(error)),
                attempts,
            }
        }
    }

    /// The pause after failed attempt `attempt` (1-based): the backoff
    /// doubled per attempt, capped, plus up to a quarter of jitter so that
    /// sessions refused together do not come back together.
    fn backoff_after(&self, attempt: u32) -> Duration {
        let base = self
            .backoff
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(MAX_BACKOFF);
        base + base.mul_f64(fastrand::f64() / 4.0)
    }
}

/// The certificates of a PEM file, to trust besides the system's.
#[cfg(feature = "model-https")]
fn read_ca_file(file: &std::path::Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(file)
        .map_err(|error| format!("cannot read tls_ca_file {}: {error}", file.display()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(certificates),
        Ok(_) => Err(format!(
            "tls_ca_file {} holds no PEM certificate",
            file.display()
        )),
        Err(error) => Err(format!("tls_ca_file {}: {error}", file.display())),
    }
}

/// Whether a status is worth another attempt: rate limits and server-side
/// failures (529 is Anthropic's "overloaded").
fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// The pause a `retry-after-ms` or `retry-after` (seconds) header asks for.
/// An HTTP date is not honoured: the backoff applies.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number(RETRY_AFTER.as_str()).map(Duration::from_secs_f64))
}

/// The human message of an error body, whichever server sent it:
/// `{"error": {"message"}}` (OpenAI, Anthropic, llama.cpp, Ollama),
/// `{"error": "text"}`, `{"message"}` (vLLM), `{"detail"}` (FastAPI
/// servers); otherwise the body itself. Cut to a few hundred characters.
pub(crate) fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|json| {
            let candidates = [
                &json["error"]["message"],
                &json["error"],
                &json["message"],
                &json["detail"],
            ];
            candidates.into_iter().find_map(|v| match v {
                Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
                Value::Null | Value::Object(_) | Value::String(_) => None,
                other => Some(other.to_string()),
            })
        })
        .unwrap_or_else(|| {
            if text.trim().is_empty() {
                "(empty body)".to_owned()
            } else {
                text.trim().to_owned()
            }
        });
    cut(&message, ERROR_MESSAGE_CHARS)
}

/// The error's causes, innermost last, without reqwest's outer "error
/// sending request for url (...)" which repeats the URL the error names.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        parts.push(cause.to_string());
        source = cause.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_found_in_every_known_body_shape() {
        let openai = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(error_message(openai), "Incorrect API key provided");
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        let vllm = br#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}"#;
        assert_eq!(error_message(vllm), "max_tokens is too large");
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(br#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(error_message(b"Bad Gateway\n"), "Bad Gateway");
        assert_eq!(error_message(b""), "(empty body)");
        let long = "x".repeat(2000);
        assert_eq!(
            error_message(long.as_bytes()).chars().count(),
            ERROR_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut date = HeaderMap::new();
        date.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn only_rate_limits_and_server_errors_are_retried() {
        assert!(is_retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(is_retryable(StatusCode::BAD_GATEWAY));
        assert!(is_retryable(StatusCode::from_u16(529).unwrap()));
        assert!(!is_retryable(StatusCode::BAD_REQUEST));
        assert!(!is_retryable(StatusCode::UNAUTHORIZED));
        assert!(!is_retryable(StatusCode::NOT_FOUND));
    }

    #[test]
    fn backoff_doubles_with_bounded_jitter() {
        let mut config = ModelConfig::new(
            "m",
            super::super::ProviderKind::OpenAi,
            "http://127.0.0.1:9/v1",
            "x",
        );
        config.retry_backoff = Duration::from_millis(100);
        let endpoint =
            Endpoint::new(&config, "http://127.0.0.1:9/v1/x".into(), HeaderMap::new()).unwrap();
        for (attempt, base) in [(1, 100), (2, 200), (3, 400)] {
            let wait = endpoint.backoff_after(attempt).as_millis();
            assert!(
                (base..=base + base / 4).contains(&wait),
                "{attempt}: {wait}"
            );
        }
        assert!(endpoint.backoff_after(30) <= MAX_BACKOFF + MAX_BACKOFF / 4);
    }
}
