//! `quiver-scripted-model`: a model server for the end-to-end tests that
//! answers from a script, speaking the OpenAI Chat Completions API
//! (`POST /v1/chat/completions`) and the Anthropic Messages API
//! (`POST /v1/messages`) on 127.0.0.1. It prints its base URL
//! (`http://127.0.0.1:PORT`) as the first line of stdout.
//!
//! `GET /requests` returns every request body received so far (a JSON
//! array, oldest first), so that tests can check what a model was sent.
//! `GET /v1/models` answers a one-model list in the OpenAI shape (the
//! probe Quiver makes at startup; not recorded in `/requests`), honouring
//! `--require-header`.
//!
//! The script (`--script FILE`) is a JSON list of conversations:
//!
//! ```json
//! [{"match": "weather", "steps": [
//!     {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
//!     {"content": "It is {{last_tool_result}}."}
//! ]}]
//! ```
//!
//! Each request is answered on its own, without memory of earlier ones: the
//! conversation is the first whose `match` occurs in the request's first
//! user message, and the step is the one whose index is the number of
//! assistant messages in the request. Concurrent sessions therefore never
//! mix, and replaying a request gets the same answer. No matching
//! conversation, or no step left: the answer is the text `script
//! exhausted`.
//!
//! A step has:
//!
//! - `content`: the answer's text; `{{last_tool_result}}` becomes the
//!   content of the request's last tool result, `{{tool_names}}` the
//!   comma-joined names of the tools offered;
//! - `tool_calls`: `[{"name", "arguments": {...} | "raw text", "omit_id"?}]`;
//!   ids are `call_C_S_K` (OpenAI) or `toolu_C_S_K` (Anthropic) for
//!   conversation C, step S, call K; `omit_id` leaves the id out (OpenAI);
//! - `delay_ms`: wait before answering;
//! - `status` (with `error`, the message, and `retry_after`, seconds): answer
//!   with that error status instead; with `times: N` only the first N
//!   requests reaching the step get the error, later ones the step's answer;
//! - `hang_up: true`: close the connection without answering (`times` as
//!   for `status`);
//! - `finish_reason`: the raw `finish_reason` / `stop_reason` to report;
//! - `raw_body`: send this text as the 200 body instead of an answer;
//! - `truncate_stream: true`: a streamed answer stops (the connection
//!   closes cleanly) after its first half of events, without its end;
//! - `stream_error`: a streamed answer sends its first text piece, then the
//!   dialect's error (an `error` event; an `{"error"}` chunk for OpenAI).
//!
//! A request with `"stream": true` is answered as server-sent events, in
//! the dialect's streaming format, cut from the same answer: the text in
//! pieces of a few characters, each tool call's arguments in two pieces
//! (OpenAI: `delta.tool_calls` by index, then a usage chunk when
//! `stream_options.include_usage` asks, then `[DONE]`; Anthropic:
//! `message_start`, `content_block_*` with `text_delta` and
//! `input_json_delta`, `message_delta`, `message_stop`).
//!
//! `--require-header NAME=VALUE` (repeatable) answers 401, in the API's
//! error format, to requests without that header. `--tls-cert FILE
//! --tls-key FILE` (PEM) serves https instead, and the URL printed is
//! `https://127.0.0.1:PORT`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::Parser;
use serde::Deserialize;
use serde_json::{Value, json};

/// The answer when no conversation or step is left.
const EXHAUSTED: &str = "script exhausted";

#[derive(Parser, Debug)]
#[command(name = "quiver-scripted-model")]
struct Args {
    /// The script: a JSON list of `{"match", "steps"}` conversations.
    #[arg(long)]
    script: String,
    /// Where to listen; the host must be 127.0.0.1.
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: String,
    /// Refuse requests without this header (`NAME=VALUE`) with a 401.
    #[arg(long)]
    require_header: Vec<String>,
    /// Serve https with this PEM certificate chain (needs `--tls-key`).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<String>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Conversation {
    #[serde(rename = "match")]
    pattern: String,
    steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    delay_ms: Option<u64>,
    status: Option<u16>,
    error: Option<String>,
    retry_after: Option<u64>,
    times: Option<u64>,
    #[serde(default)]
    hang_up: bool,
    finish_reason: Option<String>,
    raw_body: Option<String>,
    #[serde(default)]
    truncate_stream: bool,
    stream_error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
    #[serde(default)]
    omit_id: bool,
}

fn empty_object() -> Value {
    json!({})
}

/// The two wire formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
}

struct Scripted {
    conversations: Vec<Conversation>,
    required_headers: Vec<(String, String)>,
    requests: Mutex<Vec<Value>>,
    /// Error answers given so far, by (conversation, step).
    failures: Mutex<HashMap<(usize, usize), u64>>,
}

/// What the script needs to know of a request.
struct Seen {
    first_user: String,
    assistant_messages: usize,
    last_tool_result: String,
    tool_names: Vec<String>,
}

/// The text of a message `content`: a string, or the `text` of its parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn seen(dialect: Dialect, body: &Value) -> Seen {
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let role = |m: &Value, r: &str| m["role"].as_str() == Some(r);
    let first_user = messages
        .iter()
        .find(|m| role(m, "user"))
        .map(|m| match dialect {
            // Tool results are user messages too; only the text counts.
            Dialect::Anthropic => match &m["content"] {
                Value::Array(blocks) => blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                other => text_of(other),
            },
            Dialect::OpenAi => text_of(&m["content"]),
        })
        .unwrap_or_default();
    let assistant_messages = messages.iter().filter(|m| role(m, "assistant")).count();
    let last_tool_result = match dialect {
        Dialect::OpenAi => messages
            .iter()
            .rev()
            .find(|m| role(m, "tool"))
            .map(|m| text_of(&m["content"])),
        Dialect::Anthropic => messages
            .iter()
            .rev()
            .filter_map(|m| m["content"].as_array())
            .flat_map(|blocks| blocks.iter().rev())
            .find(|b| b["type"] == "tool_result")
            .map(|b| text_of(&b["content"])),
    }
    .unwrap_or_default();
    let tool_names = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| match dialect {
                    Dialect::OpenAi => t["function"]["name"].as_str(),
                    Dialect::Anthropic => t["name"].as_str(),
                })
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Seen {
        first_user,
        assistant_messages,
        last_tool_result,
        tool_names,
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(
    dialect: Dialect,
    status: StatusCode,
    message: &str,
    retry_after: Option<u64>,
) -> Response {
    let body = match dialect {
        Dialect::OpenAi => json!({"error": {
            "message": message, "type": "scripted_error", "code": status.as_u16(),
        }}),
        Dialect::Anthropic => json!({"type": "error", "error": {
            "type": "api_error", "message": message,
        }}),
    };
    let mut response = json_response(status, &body);
    if let Some(seconds) = retry_after
        && let Ok(value) = header::HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

/// The answer of step `step_index` of conversation `conversation_index`
/// (`None`: the script is exhausted) in `dialect`.
fn answer(
    dialect: Dialect,
    request: &Value,
    seen: &Seen,
    step: Option<(usize, usize, &Step)>,
) -> Value {
    let content = match step {
        Some((_, _, step)) => step
            .content
            .as_deref()
            .unwrap_or_default()
            .replace("{{last_tool_result}}", &seen.last_tool_result)
            .replace("{{tool_names}}", &seen.tool_names.join(",")),
        None => EXHAUSTED.to_owned(),
    };
    let calls: &[ScriptedCall] = step.map_or(&[], |(_, _, s)| &s.tool_calls);
    let (conversation, step_index) = step.map_or((0, 0), |(c, s, _)| (c, s));
    let finish = step.and_then(|(_, _, s)| s.finish_reason.clone());
    let input_tokens = tokens(request.to_string().len());
    let mut output_chars = content.len();
    let model = request["model"].clone();
    match dialect {
        Dialect::OpenAi => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(k, call)| {
                    let arguments = match &call.arguments {
                        Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    };
                    output_chars += call.name.len() + arguments.len();
                    let mut out = json!({
                        "type": "function",
                        "function": {"name": call.name, "arguments": arguments},
                    });
                    if !call.omit_id {
                        out["id"] = json!(format!("call_{conversation}_{step_index}_{k}"));
                    }
                    out
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                if content.is_empty() {
                    message["content"] = Value::Null;
                }
                message["tool_calls"] = Value::Array(tool_calls);
            }
            let finish = finish.unwrap_or_else(|| {
                if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                }
                .to_owned()
            });
            let output_tokens = tokens(output_chars);
            json!({
                "id": format!("chatcmpl-scripted-{conversation}-{step_index}"),
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": input_tokens,
                    "completion_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
            })
        }
        Dialect::Anthropic => {
            let mut blocks = Vec::new();
            if !content.is_empty() {
                blocks.push(json!({"type": "text", "text": content}));
            }
            for (k, call) in calls.iter().enumerate() {
                let input = match &call.arguments {
                    Value::String(raw) => serde_json::from_str(raw).unwrap_or(json!(raw)),
                    other => other.clone(),
                };
                output_chars += call.name.len() + input.to_string().len();
                blocks.push(json!({
                    "type": "tool_use",
                    "id": format!("toolu_{conversation}_{step_index}_{k}"),
                    "name": call.name,
                    "input": input,
                }));
            }
            let finish = finish.unwrap_or_else(|| {
                if calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                }
                .to_owned()
            });
            json!({
                "id": format!("msg_scripted_{conversation}_{step_index}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": finish,
                "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": tokens(output_chars)},
            })
        }
    }
}

async fn respond(
    dialect: Dialect,
    scripted: Arc<Scripted>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            let message = format!("the body is not JSON: {error}");
            return error_response(dialect, StatusCode::BAD_REQUEST, &message, None);
        }
    };
    scripted
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());
    for (name, value) in &scripted.required_headers {
        let sent = headers.get(name.as_str()).and_then(|v| v.to_str().ok());
        if sent != Some(value.as_str()) {
            let message = format!("missing or wrong `{name}` header");
            return error_response(dialect, StatusCode::UNAUTHORIZED, &message, None);
        }
    }
    let seen = seen(dialect, &request);
    let step = scripted
        .conversations
        .iter()
        .enumerate()
        .find(|(_, c)| seen.first_user.contains(&c.pattern))
        .and_then(|(index, c)| {
            c.steps
                .get(seen.assistant_messages)
                .map(|step| (index, seen.assistant_messages, step))
        });
    if let Some((conversation, index, step)) = step {
        if let Some(ms) = step.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if step.status.is_some() || step.hang_up {
            let failing = {
                let mut failures = scripted
                    .failures
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let given = failures.entry((conversation, index)).or_insert(0);
                *given += 1;
                step.times.is_none_or(|times| *given <= times)
            };
            if failing && step.hang_up {
                // Unwinding the connection's task drops the connection
                // before any byte of an answer (without the panic message
                // a `panic!` would print).
                std::panic::resume_unwind(Box::new("scripted hang-up"));
            }
            if let Some(status) = step.status.filter(|_| failing) {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let message = step.error.as_deref().unwrap_or("scripted failure");
                return error_response(dialect, status, message, step.retry_after);
            }
        }
        if let Some(raw) = &step.raw_body {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                raw.clone(),
            )
                .into_response();
        }
    }
    let answer = answer(dialect, &request, &seen, step);
    if request["stream"] == json!(true) {
        let include_usage = request["stream_options"]["include_usage"] == json!(true);
        let mut events = match dialect {
            Dialect::OpenAi => openai_events(&answer, include_usage),
            Dialect::Anthropic => anthropic_events(&answer),
        };
        let step = step.map(|(_, _, step)| step);
        if let Some(message) = step.and_then(|s| s.stream_error.as_deref()) {
            let error = match dialect {
                Dialect::OpenAi => sse(
                    None,
                    &json!({"error": {"message": message, "type": "server_error"}}),
                ),
                Dialect::Anthropic => sse(
                    Some("error"),
                    &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
                ),
            };
            // After the first text piece (the first event is never one).
            let first_text = events
                .iter()
                .skip(1)
                .position(|e| e.contains("\"content\":\"") || e.contains("text_delta"))
                .map_or(1, |i| i + 2);
            events.truncate(first_text);
            events.push(error);
        } else if step.is_some_and(|s| s.truncate_stream) {
            events.truncate(events.len() / 2);
        }
        return event_stream_response(events);
    }
    json_response(StatusCode::OK, &answer)
}

/// One server-sent event (`event:` line when named).
fn sse(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// `text` in pieces of a few characters (on character boundaries).
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(4).map(|c| c.iter().collect()).collect()
}

/// A text in two pieces, cut at a character boundary.
fn halves(text: &str) -> (String, String) {
    let middle = text.chars().count() / 2;
    let cut = text
        .char_indices()
        .nth(middle)
        .map_or(text.len(), |(i, _)| i);
    (text[..cut].to_owned(), text[cut..].to_owned())
}

/// A Chat Completions answer as its stream of chunks.
fn openai_events(answer: &Value, include_usage: bool) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        sse(
            None,
            &json!({
                "id": answer["id"], "object": "chat.completion.chunk", "created": 0,
                "model": answer["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }),
        )
    };
    let choice = &answer["choices"][0];
    let message = &choice["message"];
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in pieces(message["content"].as_str().unwrap_or_default()) {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (index, call) in message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut head = json!({"index": index, "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""}});
        if let Some(id) = call.get("id") {
            head["id"] = id.clone();
        }
        events.push(chunk(json!({"tool_calls": [head]}), Value::Null));
        let (first, second) = halves(call["function"]["arguments"].as_str().unwrap_or_default());
        for part in [first, second] {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": part}}]}),
                Value::Null,
            ));
        }
    }
    events.push(chunk(json!({}), choice["finish_reason"].clone()));
    if include_usage {
        events.push(sse(
            None,
            &json!({"id": answer["id"], "object": "chat.completion.chunk", "created": 0,
                "model": answer["model"], "choices": [], "usage": answer["usage"]}),
        ));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// A Messages answer as its event stream.
fn anthropic_events(answer: &Value) -> Vec<String> {
    let mut start = answer.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![
        sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": start}),
        ),
        sse(Some("ping"), &json!({"type": "ping"})),
    ];
    for (index, block) in answer["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let delta = |delta: Value| {
            sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        if block["type"] == "tool_use" {
            let mut head = block.clone();
            head["input"] = json!({});
            events.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index, "content_block": head}),
            ));
            let (first, second) = halves(&block["input"].to_string());
            for part in [first, second] {
                events.push(delta(
                    json!({"type": "input_json_delta", "partial_json": part}),
                ));
            }
        } else {
            events.push(sse(
                Some("content_block_start"),
                &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
            ));
            for piece in pieces(block["text"].as_str().unwrap_or_default()) {
                events.push(delta(json!({"type": "text_delta", "text": piece})));
            }
        }
        events.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(sse(
        Some("message_delta"),
        &json!({"type": "message_delta",
            "delta": {"stop_reason": answer["stop_reason"], "stop_sequence": null},
            "usage": {"output_tokens": answer["usage"]["output_tokens"]}}),
    ));
    events.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    events
}

/// A `text/event-stream` answer sending `events` one frame at a time.
fn event_stream_response(events: Vec<String>) -> Response {
    // Each frame its own chunk, so a client really reads them piece by piece.
    let frames = futures_util::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, std::convert::Infallible>(Bytes::from(e))),
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        axum::body::Body::from_stream(frames),
    )
        .into_response()
}

fn load_script(path: &str) -> Result<Vec<Conversation>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path} is not a valid script: {e}"))
}

fn required_headers(args: &[String]) -> Result<Vec<(String, String)>, String> {
    args.iter()
        .map(|arg| {
            arg.split_once('=')
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.to_owned()))
                .ok_or_else(|| format!("--require-header `{arg}` is not NAME=VALUE"))
        })
        .collect()
}

async fn serve(args: Args) -> Result<(), String> {
    let conversations = load_script(&args.script)?;
    let required_headers = required_headers(&args.require_header)?;
    let addr: std::net::SocketAddr = args
        .addr
        .parse()
        .map_err(|e| format!("--addr `{}` is not IP:PORT: {e}", args.addr))?;
    if addr.ip() != std::net::Ipv4Addr::LOCALHOST {
        return Err(format!(
            "refusing to listen on {addr}: only 127.0.0.1 is allowed"
        ));
    }
    let scripted = Arc::new(Scripted {
        conversations,
        required_headers,
        requests: Mutex::default(),
        failures: Mutex::default(),
    });
    let router = Router::new()
        .route(
            "/v1/chat/completions",
            post(
                |State(s): State<Arc<Scripted>>, headers: HeaderMap, body: Bytes| {
                    respond(Dialect::OpenAi, s, headers, body)
                },
            ),
        )
        .route(
            "/v1/messages",
            post(
                |State(s): State<Arc<Scripted>>, headers: HeaderMap, body: Bytes| {
                    respond(Dialect::Anthropic, s, headers, body)
                },
            ),
        )
        .route(
            "/v1/models",
            get(
                |State(s): State<Arc<Scripted>>, headers: HeaderMap| async move {
                    for (name, value) in &s.required_headers {
                        let sent = headers.get(name.as_str()).and_then(|v| v.to_str().ok());
                        if sent != Some(value.as_str()) {
                            let message = format!("missing or wrong `{name}` header");
                            return error_response(
                                Dialect::OpenAi,
                                StatusCode::UNAUTHORIZED,
                                &message,
                                None,
                            );
                        }
                    }
                    json_response(
                        StatusCode::OK,
                        &json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]}),
                    )
                },
            ),
        )
        .route(
            "/requests",
            get(|State(s): State<Arc<Scripted>>| async move {
                let requests = s.requests.lock().unwrap_or_else(PoisonError::into_inner);
                json_response(StatusCode::OK, &Value::Array(requests.clone()))
            }),
        )
        .layer(DefaultBodyLimit::max(64 << 20))
        .with_state(scripted);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let acceptor = tls_acceptor(cert, key)?;
            println!("https://{local}");
            let _ = std::io::stdout().flush();
            let listener = TlsListener {
                tcp: listener,
                acceptor,
            };
            axum::serve(listener, router).await
        }
        _ => {
            println!("http://{local}");
            let _ = std::io::stdout().flush();
            axum::serve(listener, router).await
        }
    }
    .map_err(|e| e.to_string())
}

fn tls_acceptor(cert: &str, key: &str) -> Result<tokio_rustls::TlsAcceptor, String> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read the certificates of {cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {key}: {e}"))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A TCP listener whose connections are served over TLS; a failed
/// handshake (say, a client that does not trust the certificate) is logged
/// and the next connection accepted.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, peer) = match self.tcp.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    eprintln!("quiver-scripted-model: accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            match self.acceptor.accept(stream).await {
                Ok(tls) => return (tls, peer),
                Err(error) => {
                    eprintln!("quiver-scripted-model: TLS handshake with {peer} failed: {error}")
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

#[tokio::main]
async fn main() {
    if let Err(error) = serve(Args::parse()).await {
        eprintln!("quiver-scripted-model: {error}");
        std::process::exit(2);
    }
}
