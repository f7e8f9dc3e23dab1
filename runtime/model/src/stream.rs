//! Streamed answers: the server-sent events of a 2xx answer (parsed by
//! `eventsource-stream` over reqwest's byte stream) assembled into the same
//! [`Completion`] a plain answer gives, each piece handed to a
//! [`DeltaSink`] as it arrives.
//!
//! - OpenAI Chat Completions: `data:` chunks of `choices[0].delta` (`content`
//!   text; `tool_calls` pieces put together by their `index`: id and name
//!   once, arguments text appended), `finish_reason`, a last chunk with
//!   `usage` (asked for with `stream_options.include_usage`), then
//!   `data: [DONE]`;
//! - Anthropic Messages: `message_start` (input usage), `content_block_start`
//!   / `content_block_delta` (`text_delta`, `input_json_delta`) /
//!   `content_block_stop`, `message_delta` (stop reason, output usage),
//!   `message_stop`; `ping` is skipped, `error` ends the answer.
//!
//! A stream is only an answer once it reached its end (`[DONE]` or a
//! `finish_reason`; `message_stop`): one that stops before, an `error`
//! event, or a connection that breaks mid-answer is a
//! [`ModelError::Stream`], a chunk that is not the JSON it should be a
//! [`ModelError::Malformed`], both naming the model and URL. Nothing of a
//! partial answer is returned. A server that answers a streamed request with
//! plain JSON (not `text/event-stream`) is read as a plain answer.

use std::collections::BTreeMap;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::StreamExt;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

use super::http::Endpoint;
use super::{Completion, DeltaSink, ModelError, StreamDelta, cut};

/// Characters of a bad chunk quoted in an error.
const QUOTED_CHUNK_CHARS: usize = 300;

/// What reading one event decided.
pub(crate) enum Flow {
    /// Go on reading.
    More,
    /// The answer is complete.
    Done,
}

/// One dialect's assembly of a streamed answer.
pub(crate) trait Assembly {
    /// Takes in one event; may hand pieces to `sink`.
    fn event(&mut self, event: &Event, sink: &mut DeltaSink<'_>) -> Result<Flow, String>;
    /// Whether what was read so far is a whole answer, should the stream
    /// end now.
    fn is_complete(&self) -> bool;
    /// The answer as the dialect's plain JSON answer, for its
    /// `parse_response`.
    fn into_answer(self) -> Result<Value, String>;
}

/// Reads the answer `response` of `endpoint` into the plain JSON answer
/// `assembly` builds; `Ok(None)` when the server did not stream (its body
/// is then the returned plain answer, `Some`).
pub(crate) async fn read<A: Assembly>(
    endpoint: &Endpoint,
    response: reqwest::Response,
    mut assembly: A,
    mut sink: DeltaSink<'_>,
) -> Result<Value, ModelError> {
    let streamed = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
    if !streamed {
        let bytes = response
            .bytes()
            .await
            .map_err(|error| endpoint.stream_read_error(&error))?;
        return endpoint.json_of(&bytes);
    }
    let mut events = response.bytes_stream().eventsource();
    let mut count = 0usize;
    loop {
        match events.next().await {
            Some(Ok(event)) => {
                count += 1;
                match assembly.event(&event, &mut sink) {
                    Ok(Flow::More) => {}
                    Ok(Flow::Done) => break,
                    Err(detail) => return Err(detail_error(endpoint, detail)),
                }
            }
            Some(Err(EventStreamError::Transport(error))) => {
                return Err(endpoint.stream_read_error(&error));
            }
            Some(Err(error)) => {
                return Err(endpoint.malformed(format!("event {}: {error}", count + 1)));
            }
            None if assembly.is_complete() => break,
            None => {
                return Err(endpoint.stream_error(format!(
                    "ended after {count} events, before its end marker (the connection closed mid-answer)"
                )));
            }
        }
    }
    assembly
        .into_answer()
        .map_err(|detail| endpoint.malformed(detail))
}

/// Errors of an assembly: `error:`-prefixed details are the server's own
/// stream errors, the others malformed chunks.
fn detail_error(endpoint: &Endpoint, detail: String) -> ModelError {
    match detail.strip_prefix(SERVER_ERROR) {
        Some(message) => endpoint.stream_error(format!("was ended by the server: {message}")),
        None => endpoint.malformed(detail),
    }
}

/// Prefix of an assembly error that is the server's `error` event.
const SERVER_ERROR: &str = "error:";

fn chunk_json(event: &Event, index: &str) -> Result<Value, String> {
    serde_json::from_str(&event.data).map_err(|error| {
        format!(
            "stream {index} is not JSON ({error}): {}",
            cut(&event.data, QUOTED_CHUNK_CHARS)
        )
    })
}

/// The message of an error object (`{"message"}`, or the whole thing).
fn error_text(error: &Value) -> String {
    let text = match &error["message"] {
        Value::String(message) => message.clone(),
        _ => error.to_string(),
    };
    cut(&text, QUOTED_CHUNK_CHARS)
}

// ---- OpenAI ---------------------------------------------------------------

/// A tool call of an OpenAI stream, as far as it came.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// An OpenAI Chat Completions stream being read.
#[derive(Default)]
pub(crate) struct OpenAiAssembly {
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<String>,
    usage: Option<Value>,
    chunks: usize,
}

impl Assembly for OpenAiAssembly {
    fn event(&mut self, event: &Event, sink: &mut DeltaSink<'_>) -> Result<Flow, String> {
        if event.data.trim() == "[DONE]" {
            return Ok(Flow::Done);
        }
        if event.data.trim().is_empty() {
            return Ok(Flow::More);
        }
        self.chunks += 1;
        let chunk = chunk_json(event, &format!("chunk {}", self.chunks))?;
        if !chunk["error"].is_null() {
            return Err(format!("{SERVER_ERROR}{}", error_text(&chunk["error"])));
        }
        if chunk["usage"].is_object() {
            self.usage = Some(chunk["usage"].clone());
        }
        let Some(choice) = chunk["choices"].get(0) else {
            // The usage chunk has no choices.
            return Ok(Flow::More);
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        match &delta["content"] {
            Value::String(text) if !text.is_empty() => {
                self.content.push_str(text);
                sink(StreamDelta::Text(text));
            }
            Value::Null | Value::String(_) => {}
            other => {
                return Err(format!(
                    "chunk {}: `choices[0].delta.content` is {other}, not text",
                    self.chunks
                ));
            }
        }
        match &delta["tool_calls"] {
            Value::Null => {}
            Value::Array(pieces) => {
                for (position, piece) in pieces.iter().enumerate() {
                    self.tool_call_piece(position, piece, sink)?;
                }
            }
            _ => {
                return Err(format!(
                    "chunk {}: `choices[0].delta.tool_calls` is not a list",
                    self.chunks
                ));
            }
        }
        Ok(Flow::More)
    }

    fn is_complete(&self) -> bool {
        self.finish.is_some()
    }

    fn into_answer(self) -> Result<Value, String> {
        let tool_calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|call| {
                let mut out = json!({
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                });
                if !call.id.is_empty() {
                    out["id"] = json!(call.id);
                }
                out
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": self.content});
        if !tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(tool_calls);
        }
        let mut answer = json!({
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        });
        if let Some(usage) = self.usage {
            answer["usage"] = usage;
        }
        Ok(answer)
    }
}

impl OpenAiAssembly {
    fn tool_call_piece(
        &mut self,
        position: usize,
        piece: &Value,
        sink: &mut DeltaSink<'_>,
    ) -> Result<(), String> {
        let index = match &piece["index"] {
            Value::Null => position as u64,
            value => value.as_u64().ok_or_else(|| {
                format!(
                    "chunk {}: a tool call's `index` is {value}, not a number",
                    self.chunks
                )
            })?,
        };
        let order = self.calls.len();
        let call = self.calls.entry(index).or_default();
        if let Some(id) = piece["id"].as_str() {
            call.id = id.to_owned();
        }
        let function = &piece["function"];
        if let Some(name) = function["name"].as_str() {
            // Servers send the name once; some repeat it whole.
            if !call.name.ends_with(name) {
                call.name.push_str(name);
            }
        }
        match &function["arguments"] {
            Value::String(text) => call.arguments.push_str(text),
            Value::Null => {}
            other => call.arguments.push_str(&other.to_string()),
        }
        if !call.announced && !call.name.is_empty() {
            call.announced = true;
            let order = self.calls.keys().position(|k| *k == index).unwrap_or(order);
            let call = &self.calls[&index];
            sink(StreamDelta::ToolCall {
                index: order,
                id: &call.id,
                name: &call.name,
            });
        }
        Ok(())
    }
}

// ---- Anthropic ------------------------------------------------------------

/// A content block of an Anthropic stream, as far as it came.
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input_json: String,
        /// The input given whole in `content_block_start` (no deltas).
        input: Value,
    },
    /// Thinking and other blocks, kept out of the answer.
    Other,
}

/// An Anthropic Messages stream being read.
#[derive(Default)]
pub(crate) struct AnthropicAssembly {
    blocks: BTreeMap<u64, Block>,
    usage: serde_json::Map<String, Value>,
    stop_reason: Option<String>,
    stopped: bool,
    events: usize,
    tool_calls: usize,
}

impl Assembly for AnthropicAssembly {
    fn event(&mut self, event: &Event, sink: &mut DeltaSink<'_>) -> Result<Flow, String> {
        self.events += 1;
        if event.data.trim().is_empty() {
            return Ok(Flow::More);
        }
        let data = chunk_json(event, &format!("event {} ({})", self.events, event.event))?;
        let kind = data["type"].as_str().unwrap_or(event.event.as_str());
        let block_index = || {
            data["index"]
                .as_u64()
                .ok_or_else(|| format!("`{kind}` event {} has no `index`", self.events))
        };
        match kind {
            "message_start" => {
                if let Some(usage) = data["message"]["usage"].as_object() {
                    self.usage.extend(usage.clone());
                }
            }
            "content_block_start" => {
                let index = block_index()?;
                let block = &data["content_block"];
                let block = match block["type"].as_str() {
                    Some("text") => {
                        let text = block["text"].as_str().unwrap_or_default().to_owned();
                        if !text.is_empty() {
                            sink(StreamDelta::Text(&text));
                        }
                        Block::Text(text)
                    }
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        let name = block["name"].as_str().unwrap_or_default().to_owned();
                        if name.is_empty() {
                            return Err(format!(
                                "the tool_use block {index} has no `name` (event {})",
                                self.events
                            ));
                        }
                        sink(StreamDelta::ToolCall {
                            index: self.tool_calls,
                            id: &id,
                            name: &name,
                        });
                        self.tool_calls += 1;
                        let input = match &block["input"] {
                            Value::Object(map) if !map.is_empty() => block["input"].clone(),
                            _ => Value::Null,
                        };
                        Block::ToolUse {
                            id,
                            name,
                            input_json: String::new(),
                            input,
                        }
                    }
                    Some(_) => Block::Other,
                    None => {
                        return Err(format!(
                            "the content block {index} has no `type` (event {})",
                            self.events
                        ));
                    }
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = block_index()?;
                let delta = &data["delta"];
                match (self.blocks.get_mut(&index), delta["type"].as_str()) {
                    (Some(Block::Text(text)), Some("text_delta")) => {
                        let piece = delta["text"].as_str().unwrap_or_default();
                        text.push_str(piece);
                        if !piece.is_empty() {
                            sink(StreamDelta::Text(piece));
                        }
                    }
                    (Some(Block::ToolUse { input_json, .. }), Some("input_json_delta")) => {
                        input_json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    (Some(_), _) => {}
                    (None, _) => {
                        return Err(format!(
                            "a delta for content block {index}, which never started (event {})",
                            self.events
                        ));
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = data["usage"].as_object() {
                    self.usage.extend(usage.clone());
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(Flow::Done);
            }
            "error" => return Err(format!("{SERVER_ERROR}{}", error_text(&data["error"]))),
            // `ping`, `content_block_stop` and event types added later.
            _ => {}
        }
        Ok(Flow::More)
    }

    fn is_complete(&self) -> bool {
        self.stopped
    }

    fn into_answer(self) -> Result<Value, String> {
        let mut content = Vec::new();
        for (index, block) in self.blocks {
            match block {
                Block::Text(text) => content.push(json!({"type": "text", "text": text})),
                Block::ToolUse {
                    id,
                    name,
                    input_json,
                    input,
                } => {
                    let input = if input_json.trim().is_empty() {
                        match input {
                            Value::Null => json!({}),
                            input => input,
                        }
                    } else {
                        serde_json::from_str::<Value>(&input_json).map_err(|error| {
                            format!(
                                "the input of tool_use block {index} (`{name}`) is not JSON ({error}): {}",
                                cut(&input_json, QUOTED_CHUNK_CHARS)
                            )
                        })?
                    };
                    content
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                }
                Block::Other => {}
            }
        }
        Ok(json!({
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": Value::Object(self.usage),
        }))
    }
}

/// Finishes a streamed request: the assembled answer parsed by the
/// dialect's `parse`.
pub(crate) fn completion(
    endpoint: &Endpoint,
    answer: Value,
    parse: fn(&Value) -> Result<Completion, String>,
) -> Result<Completion, ModelError> {
    parse(&answer).map_err(|detail| endpoint.malformed(detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{anthropic, openai};

    fn event(name: &str, data: &str) -> Event {
        Event {
            event: name.to_owned(),
            data: data.to_owned(),
            id: String::new(),
            retry: None,
        }
    }

    fn run<A: Assembly>(mut assembly: A, events: &[Event]) -> (Result<Value, String>, Vec<String>) {
        let mut seen = Vec::new();
        let mut record = |delta: StreamDelta<'_>| {
            seen.push(match delta {
                StreamDelta::Text(text) => format!("text:{text}"),
                StreamDelta::ToolCall { index, id, name } => format!("call:{index}:{id}:{name}"),
            })
        };
        let mut sink: DeltaSink<'_> = &mut record;
        for event in events {
            match assembly.event(event, &mut sink) {
                Ok(Flow::More) => {}
                Ok(Flow::Done) => return (assembly.into_answer(), seen),
                Err(error) => return (Err(error), seen),
            }
        }
        let complete = assembly.is_complete();
        let answer = if complete {
            assembly.into_answer()
        } else {
            Err("truncated".into())
        };
        (answer, seen)
    }

    #[test]
    fn openai_chunks_assemble_text_tool_calls_by_index_and_usage() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let "}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"me look."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"now","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5}}"#,
            "[DONE]",
        ];
        let events: Vec<Event> = chunks.iter().map(|c| event("message", c)).collect();
        let (answer, seen) = run(OpenAiAssembly::default(), &events);
        let completion = openai::parse_response(&answer.unwrap()).unwrap();
        assert_eq!(
            seen,
            [
                "text:Let ",
                "text:me look.",
                "call:0:call_a:get_weather",
                "call:1:call_b:now"
            ]
        );
        assert_eq!(completion.message.content, "Let me look.");
        let calls = &completion.message.tool_calls;
        assert_eq!(calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(
            (calls[1].id.as_str(), calls[1].name.as_str()),
            ("call_b", "now")
        );
        assert_eq!(completion.usage.input_tokens, 12);
        assert_eq!(completion.usage.output_tokens, 5);
    }

    #[test]
    fn openai_streams_without_an_end_errors_or_bad_chunks_are_refused() {
        let text = event("message", r#"{"choices":[{"delta":{"content":"Hal"}}]}"#);
        let (answer, seen) = run(OpenAiAssembly::default(), std::slice::from_ref(&text));
        assert_eq!(answer.unwrap_err(), "truncated");
        assert_eq!(seen, ["text:Hal"]);
        let error = event("message", r#"{"error":{"message":"overloaded"}}"#);
        let (answer, _) = run(OpenAiAssembly::default(), &[text.clone(), error]);
        assert_eq!(answer.unwrap_err(), "error:overloaded");
        let (answer, _) = run(OpenAiAssembly::default(), &[event("message", "{nope")]);
        assert!(answer.unwrap_err().contains("chunk 1 is not JSON"));
        // A finish reason is an end, even without `[DONE]`.
        let finish = event(
            "message",
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        );
        let (answer, _) = run(OpenAiAssembly::default(), &[text, finish]);
        assert_eq!(answer.unwrap()["choices"][0]["message"]["content"], "Hal");
    }

    #[test]
    fn anthropic_events_assemble_text_tool_use_and_usage() {
        let events = [
            event(
                "message_start",
                r#"{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":1}}}"#,
            ),
            event("ping", r#"{"type":"ping"}"#),
            event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            event(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Check"}}"#,
            ),
            event(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ing."}}"#,
            ),
            event(
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            event(
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
            ),
            event(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}"#,
            ),
            event(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}"#,
            ),
            event(
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            event(
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
            event("message_stop", r#"{"type":"message_stop"}"#),
        ];
        let (answer, seen) = run(AnthropicAssembly::default(), &events);
        let completion = anthropic::parse_response(&answer.unwrap()).unwrap();
        assert_eq!(
            seen,
            ["text:Check", "text:ing.", "call:0:toolu_1:get_weather"]
        );
        assert_eq!(completion.message.content, "Checking.");
        assert_eq!(
            completion.message.tool_calls[0].arguments,
            "{\"city\":\"Paris\"}"
        );
        assert_eq!(completion.finish, crate::FinishReason::ToolCalls);
        assert_eq!(completion.usage.input_tokens, 25);
        assert_eq!(completion.usage.output_tokens, 9);
    }

    #[test]
    fn anthropic_error_events_truncation_and_bad_input_are_refused() {
        let start = event(
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
        );
        let (answer, seen) = run(AnthropicAssembly::default(), std::slice::from_ref(&start));
        assert_eq!(answer.unwrap_err(), "truncated");
        assert_eq!(seen, ["text:Hi"]);
        let error = event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        let (answer, _) = run(AnthropicAssembly::default(), &[start, error]);
        assert_eq!(answer.unwrap_err(), "error:Overloaded");
        let orphan = event(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
        );
        let (answer, _) = run(AnthropicAssembly::default(), &[orphan]);
        assert!(answer.unwrap_err().contains("never started"));
        let bad_input = [
            event(
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"now","input":{}}}"#,
            ),
            event(
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            ),
            event("message_stop", r#"{"type":"message_stop"}"#),
        ];
        let (answer, _) = run(AnthropicAssembly::default(), &bad_input);
        assert!(answer.unwrap_err().contains("`now`) is not JSON"));
    }
}
