//! Model providers: the provider-neutral conversation types, the
//! [`ModelProvider`] trait the agent loop calls, and its two wire clients.
//!
//! - [`openai`]: OpenAI-compatible Chat Completions (OpenAI, llama.cpp's
//!   server, vLLM, Ollama, gateways);
//! - [`anthropic`]: Anthropic Messages;
//! - [`settings`]: the `models:` and `default_model:` config sections.
//!
//! Both clients send one request per [`ModelProvider::complete`] (streamed,
//! unless the model's `stream` is `false`: see [`stream`] for how a stream
//! is read and what a broken one gives) and share the HTTP behaviour of
//! `http`: a timeout per attempt, bounded
//! retries with exponential backoff on 429, 5xx and refused or broken
//! connections (honouring `retry-after`), never on other 4xx answers nor
//! on a timeout. Every failure is a
//! [`ModelError`] naming the configured model and the URL.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use quiver_tool::executor::BoxFuture;

pub mod anthropic;
mod http;
pub mod openai;
pub mod settings;
pub mod stream;

pub use settings::{MaxTokensField, ModelConfig, ModelsConfig, ProviderKind};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions; usually given as [`CompletionRequest::system`] instead.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The result of one tool call.
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id; the tool result refers to it.
    pub id: String,
    /// The exposed tool name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, unparsed (it may be
    /// invalid JSON).
    pub arguments: String,
}

/// One message of a conversation, in no provider's format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text (a tool result's content for [`Role::Tool`]); may be empty
    /// when an assistant message only calls tools.
    #[serde(default)]
    pub content: String,
    /// Assistant only: the tool calls, in the model's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Tool only: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool only: the name of the tool that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::plain(Role::User, text.into())
    }

    /// A system message (the clients send it where the API wants system
    /// text: in place for OpenAI, joined to the top-level `system` for
    /// Anthropic).
    pub fn system(text: impl Into<String>) -> Message {
        Message::plain(Role::System, text.into())
    }

    /// An assistant message with its text and tool calls.
    pub fn assistant(text: impl Into<String>, calls: Vec<ToolCall>) -> Message {
        Message {
            tool_calls: calls,
            ..Message::plain(Role::Assistant, text.into())
        }
    }

    /// The result of the tool call `call_id` of tool `tool_name`.
    pub fn tool_result(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Message {
        Message {
            tool_call_id: Some(call_id.into()),
            tool_name: Some(tool_name.into()),
            ..Message::plain(Role::Tool, content.into())
        }
    }

    fn plain(role: Role, content: String) -> Message {
        Message {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        }
    }
}

/// What one model turn is asked.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    /// The system prompt (empty: none).
    pub system: &'a str,
    /// The conversation so far, oldest first.
    pub messages: &'a [Message],
    /// OpenAI-style function definitions, exactly as
    /// the catalog's assembly returns them
    /// (`{"type": "function", "function": {name, description, parameters}}`).
    pub tools: &'a [Value],
    /// The output limit of this turn; `0` uses the model's configured
    /// `max_output_tokens`.
    pub max_output_tokens: u32,
    /// `false`: the model must answer in text. The OpenAI client then sends
    /// no tools; the Anthropic client sends them with `tool_choice: none`
    /// only when the history holds tool calls (its API refuses tool blocks
    /// without tool definitions). A server may still answer with tool
    /// calls; they are returned as they came.
    pub allow_tools: bool,
}

impl CompletionRequest<'_> {
    /// The output limit to send: the request's own, or `default` (the
    /// model's `max_output_tokens`) when it is `0`.
    pub fn output_limit(&self, default: u32) -> u32 {
        match self.max_output_tokens {
            0 => default,
            n => n,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants the tool calls of the message run. Also reported when a
    /// server says `stop` (or nothing) but the message has tool calls.
    ToolCalls,
    /// It hit the output limit; the message may be cut.
    Length,
    /// Anything else, as the server named it (e.g. `content_filter`,
    /// `refusal`, `pause_turn`).
    Other(String),
}

impl FinishReason {
    /// `stop`, `tool_calls`, `length` or the server's own word.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::Other(other) => other,
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tokens one request used, as the server counted them (0 when it did not
/// say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// The model's answer to one [`CompletionRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The assistant message (role [`Role::Assistant`]).
    pub message: Message,
    /// Why it stopped.
    pub finish: FinishReason,
    /// What it cost.
    pub usage: Usage,
}

/// A piece of an answer as it streams in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamDelta<'a> {
    /// More text of the answer, in order.
    Text(&'a str),
    /// The model began tool call `index` (0-based, in the message's
    /// order) of tool `name`; its arguments follow in the final message.
    ToolCall {
        /// The call's position in the message.
        index: usize,
        /// The call's id as the server gave it (empty: none yet).
        id: &'a str,
        /// The tool's exposed name.
        name: &'a str,
    },
}

/// Receives the [`StreamDelta`]s of one answer, in order.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(StreamDelta<'_>) + Send);

/// A model the agent loop can ask for the next turn.
pub trait ModelProvider: Send + Sync {
    /// Sends the conversation and returns the model's answer. Dropping the
    /// future abandons the request.
    fn complete<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<Completion, ModelError>>;

    /// As [`ModelProvider::complete`], handing `sink` the answer's pieces
    /// as they arrive when the model streams; the returned completion is
    /// the whole answer either way. A provider that does not stream (the
    /// default, and models with `stream: false`) calls `sink` never.
    fn complete_streaming<'a>(
        &'a self,
        request: CompletionRequest<'a>,
        sink: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        let _ = sink;
        self.complete(request)
    }

    /// The configured model name (the key under `models:`).
    fn name(&self) -> &str;

    /// The model's context window, in tokens.
    fn context_tokens(&self) -> u64;

    /// Asks the server something that costs no tokens (its model list),
    /// to tell at startup whether it answers and takes the credentials.
    /// `Ok` when it answered (a server without a model list answers 404,
    /// which still shows it is there); the error otherwise. A provider
    /// that cannot be probed answers `Ok(None)`.
    fn probe(&self) -> BoxFuture<'_, Result<Option<Probe>, ModelError>> {
        Box::pin(async { Ok(None) })
    }
}

/// What a server answered to [`ModelProvider::probe`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The URL asked.
    pub url: String,
    /// The HTTP status it answered.
    pub status: u16,
}

/// Runs one model request, recording its latency (by model and outcome)
/// and the tokens it used in the process's metrics.
pub(crate) async fn measured(
    model: &str,
    request: impl std::future::Future<Output = Result<Completion, ModelError>>,
) -> Result<Completion, ModelError> {
    let started = std::time::Instant::now();
    let outcome = request.await;
    let status = match &outcome {
        Ok(_) => "ok",
        Err(error) => error.code(),
    };
    metrics::histogram!("quiver_model_request_duration_seconds", "model" => model.to_owned(), "status" => status)
        .record(started.elapsed().as_secs_f64());
    if let Ok(completion) = &outcome {
        metrics::counter!("quiver_model_tokens_total", "model" => model.to_owned(), "kind" => "input")
            .increment(completion.usage.input_tokens);
        metrics::counter!("quiver_model_tokens_total", "model" => model.to_owned(), "kind" => "output")
            .increment(completion.usage.output_tokens);
    }
    outcome
}

/// Why a model request failed. Every variant names the configured model,
/// and all but [`ModelError::Config`] the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The server answered with an error status (after the retries allowed
    /// for 429 and 5xx).
    #[error("model `{model}` ({url}): HTTP {status}{}: {message}", attempts_note(*attempts))]
    Status {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The error message of the body (cut), or the body itself.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The server refused the credentials (401 or 403).
    #[error(
        "model `{model}` ({url}) refused the request: HTTP {status}: {message}; check its api_key and headers"
    )]
    Unauthorized {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The error message of the body (cut).
        message: String,
    },
    /// No answer could be had: the connection was refused or broke (after
    /// the retries allowed).
    #[error("model `{model}` ({url}): {detail}{}", attempts_note(*attempts))]
    Transport {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// What failed.
        detail: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The server did not answer within the model's `timeout_s`.
    #[error("model `{model}` ({url}) did not answer within {timeout_ms} ms")]
    Timeout {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The server answered 2xx with something that is not a usable answer.
    #[error("model `{model}` ({url}) sent a malformed response: {detail}")]
    Malformed {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// What is missing or wrong.
        detail: String,
    },
    /// A streamed answer broke off: the stream ended before its end
    /// marker, the server sent an `error` event, or the connection failed
    /// mid-answer. Nothing of the partial answer is used.
    #[error("model `{model}` ({url}): the streamed answer {detail}")]
    Stream {
        /// The configured model.
        model: String,
        /// The request URL.
        url: String,
        /// What happened (`ended before ...`, `was ended by the server: ...`).
        detail: String,
    },
    /// The provider could not be set up from its configuration.
    #[error("model `{model}`: {detail}")]
    Config {
        /// The configured model.
        model: String,
        /// What is wrong.
        detail: String,
    },
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

impl ModelError {
    /// A short stable code: `http_error`, `unauthorized`, `transport_error`,
    /// `timeout`, `malformed_response`, `stream_error` or `config_error`.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Status { .. } => "http_error",
            ModelError::Unauthorized { .. } => "unauthorized",
            ModelError::Transport { .. } => "transport_error",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Malformed { .. } => "malformed_response",
            ModelError::Stream { .. } => "stream_error",
            ModelError::Config { .. } => "config_error",
        }
    }

    /// The configured model the error is about.
    pub fn model(&self) -> &str {
        match self {
            ModelError::Status { model, .. }
            | ModelError::Unauthorized { model, .. }
            | ModelError::Transport { model, .. }
            | ModelError::Timeout { model, .. }
            | ModelError::Malformed { model, .. }
            | ModelError::Stream { model, .. }
            | ModelError::Config { model, .. } => model,
        }
    }

    /// The HTTP status, when the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Status { status, .. } | ModelError::Unauthorized { status, .. } => {
                Some(*status)
            }
            _ => None,
        }
    }

    /// What an operator most likely has to do about it, naming the
    /// config key; `None` when there is nothing better than the message.
    pub fn likely_fix(&self) -> Option<String> {
        let model = self.model();
        match self {
            ModelError::Transport { url, .. } => Some(format!(
                "start the model server that should answer at {url}, or point `models.{model}.base_url` at where it listens"
            )),
            ModelError::Timeout { .. } => Some(format!(
                "the server is there but slow to answer: check its load, or raise `models.{model}.timeout_s`"
            )),
            ModelError::Unauthorized { .. } => Some(format!(
                "set `models.{model}.api_key` (e.g. \"${{OPENAI_API_KEY}}\") and export that variable where quiver starts"
            )),
            ModelError::Status { status: 404, .. } => Some(format!(
                "check `models.{model}.base_url`: OpenAI-compatible servers usually serve under `/v1`"
            )),
            ModelError::Status { status, .. } if *status >= 500 => {
                Some("the model server failed; see its own log".to_owned())
            }
            ModelError::Malformed { .. } => Some(format!(
                "check that `models.{model}.provider` is the API the server speaks"
            )),
            ModelError::Stream { .. } => Some(format!(
                "the server broke off its streamed answer; see its log, or set `models.{model}.stream: false` if it mishandles streams"
            )),
            ModelError::Status { .. } | ModelError::Config { .. } => None,
        }
    }

    /// The error as JSON: `{"error": code, "message": text}`.
    pub fn to_json(&self) -> Value {
        json!({"error": self.code(), "message": self.to_string()})
    }
}

/// The provider for one configured model.
pub fn build(config: &ModelConfig) -> Result<Arc<dyn ModelProvider>, ModelError> {
    Ok(match config.provider {
        ProviderKind::OpenAi => Arc::new(openai::OpenAiProvider::new(config)?),
        ProviderKind::Anthropic => Arc::new(anthropic::AnthropicProvider::new(config)?),
    })
}

/// A provider for every configured model, by name.
pub fn build_all(
    config: &ModelsConfig,
) -> Result<BTreeMap<String, Arc<dyn ModelProvider>>, ModelError> {
    config
        .models
        .iter()
        .map(|(name, model)| Ok((name.clone(), build(model)?)))
        .collect()
}

/// A fresh tool-call id for a call the server sent without one: unique in
/// the process and, through the clock, across restarts.
pub(crate) fn generated_call_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("call_q{micros:x}_{n}")
}

/// The id of a tool call as the server sent it, or a fresh one when it sent
/// none.
pub(crate) fn call_id_or_generated(id: &Value) -> String {
    id.as_str()
        .filter(|id| !id.is_empty())
        .map_or_else(generated_call_id, str::to_owned)
}

/// "no WHAT in the answer", with the body's `error`, if it has one.
pub(crate) fn missing_from_answer(what: &str, body: &Value) -> String {
    let mut detail = format!("no {what} in the answer");
    if !body["error"].is_null() {
        detail.push_str(&format!(
            "; it says: {}",
            cut(&body["error"].to_string(), 300)
        ));
    }
    detail
}

/// `text` cut to at most `max` characters, with `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_serde_in_snake_case() {
        let messages = vec![
            Message::user("hi"),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "c1".into(),
                    name: "echo".into(),
                    arguments: "{\"text\":".into(),
                }],
            ),
            Message::tool_result("c1", "echo", "invalid JSON"),
        ];
        let text = serde_json::to_string(&messages).unwrap();
        assert!(text.contains("\"role\":\"tool\""), "{text}");
        assert!(!text.contains("tool_call_id\":null"), "{text}");
        let back: Vec<Message> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, messages);
    }

    #[test]
    fn errors_have_codes_and_name_model_url_and_status() {
        let error = ModelError::Status {
            model: "local".into(),
            url: "http://127.0.0.1:1/v1/chat/completions".into(),
            status: 503,
            message: "overloaded".into(),
            attempts: 3,
        };
        assert_eq!(error.code(), "http_error");
        assert_eq!(error.status(), Some(503));
        assert_eq!(
            error.to_string(),
            "model `local` (http://127.0.0.1:1/v1/chat/completions): HTTP 503 after 3 attempts: overloaded"
        );
        assert_eq!(error.to_json()["error"], "http_error");
    }

    #[test]
    fn generated_ids_differ_and_cut_respects_characters() {
        assert_ne!(generated_call_id(), generated_call_id());
        assert_eq!(cut("héllo", 2), "hé…");
        assert_eq!(cut("hé", 2), "hé");
    }
}
