//! The OpenAI-compatible Chat Completions client
//! (`POST {base_url}/chat/completions`; streamed with `stream: true` and
//! `stream_options.include_usage` unless the model's `stream` is `false`),
//! as served by OpenAI,
//! llama.cpp's server, vLLM, Ollama and most gateways.
//!
//! What differs between those servers, and how the client copes:
//!
//! - the output limit: OpenAI's reasoning models refuse `max_tokens`, older
//!   llama.cpp and Ollama servers ignore `max_completion_tokens`; see
//!   [`MaxTokensField`];
//! - an assistant message that only calls tools is sent with `content: ""`,
//!   which every one of them accepts (some refuse `null`);
//! - in answers, `content` may be `null`, a string or a list of text parts;
//!   tool calls may lack an `id` (one is generated) and may carry their
//!   `arguments` as an object instead of JSON text (it is serialised);
//!   `finish_reason` may say `stop` (or nothing) next to tool calls, which
//!   is reported as [`FinishReason::ToolCalls`].

use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Map, Value, json};

use super::http::{Endpoint, api_key_header};
use super::{
    BoxFuture, Completion, CompletionRequest, DeltaSink, FinishReason, MaxTokensField, Message,
    ModelConfig, ModelError, ModelProvider, Probe, Role, ToolCall, Usage, call_id_or_generated,
    missing_from_answer,
};

/// A model behind an OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiProvider {
    config: ModelConfig,
    endpoint: Endpoint,
    /// Whether the output limit goes in `max_completion_tokens` (else
    /// `max_tokens`); switched on when a server asks for it.
    completion_tokens_field: AtomicBool,
}

impl OpenAiProvider {
    /// A client for `config` (its `provider` is not checked).
    pub fn new(config: &ModelConfig) -> Result<OpenAiProvider, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(value) = api_key_header(config, |key| format!("Bearer {key}"))? {
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{}/chat/completions", config.base_url);
        let completion_tokens_field = match config.max_tokens_field {
            MaxTokensField::MaxTokens => false,
            MaxTokensField::MaxCompletionTokens => true,
            MaxTokensField::Auto => is_openai_itself(&config.base_url),
        };
        Ok(OpenAiProvider {
            endpoint: Endpoint::new(config, url, headers)?,
            config: config.clone(),
            completion_tokens_field: AtomicBool::new(completion_tokens_field),
        })
    }

    /// The request URL.
    pub fn url(&self) -> &str {
        self.endpoint.url()
    }

    async fn complete_inner(
        &self,
        request: CompletionRequest<'_>,
        mut sink: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ModelError> {
        let max_tokens = request.output_limit(self.config.max_output_tokens);
        let mut completion_field = self.completion_tokens_field.load(Ordering::Relaxed);
        let streamed = self.config.stream && sink.is_some();
        loop {
            let mut body = request_body(&self.config.model, &request, max_tokens, completion_field);
            if streamed {
                body["stream"] = json!(true);
                body["stream_options"] = json!({"include_usage": true});
            }
            let answer = match sink.as_mut().filter(|_| streamed) {
                Some(sink) => match self.endpoint.post_streaming(&body).await {
                    Ok(response) => {
                        crate::stream::read(
                            &self.endpoint,
                            response,
                            crate::stream::OpenAiAssembly::default(),
                            &mut **sink,
                        )
                        .await
                    }
                    Err(error) => Err(error),
                },
                None => self.endpoint.post(&body).await,
            };
            match answer {
                Ok(answer) => {
                    return crate::stream::completion(&self.endpoint, answer, parse_response);
                }
                Err(ModelError::Status {
                    status: 400,
                    message,
                    ..
                }) if !completion_field
                    && self.config.max_tokens_field == MaxTokensField::Auto
                    && message.contains("max_completion_tokens") =>
                {
                    tracing::warn!(
                        model = %self.config.name,
                        "{} refused `max_tokens` ({message}); sending `max_completion_tokens` from now on",
                        self.endpoint.url()
                    );
                    self.completion_tokens_field.store(true, Ordering::Relaxed);
                    completion_field = true;
                }
                Err(error) => return Err(error),
            }
        }
    }
}

impl ModelProvider for OpenAiProvider {
    fn complete<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(crate::measured(
            &self.config.name,
            self.complete_inner(request, None),
        ))
    }

    fn complete_streaming<'a>(
        &'a self,
        request: CompletionRequest<'a>,
        sink: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        Box::pin(crate::measured(
            &self.config.name,
            self.complete_inner(request, Some(sink)),
        ))
    }

    fn probe(&self) -> BoxFuture<'_, Result<Option<Probe>, ModelError>> {
        Box::pin(async move {
            self.endpoint
                .probe(models_url(&self.config.base_url))
                .await
                .map(Some)
        })
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    fn context_tokens(&self) -> u64 {
        self.config.context_tokens
    }
}

/// `{base_url}/models`: the model list, which answers without spending
/// tokens.
fn models_url(base_url: &str) -> String {
    format!("{base_url}/models")
}

/// Whether `base_url` is OpenAI's own API, whose reasoning models refuse
/// `max_tokens`.
fn is_openai_itself(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|url| {
            url.host_str()
                .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
        })
        .unwrap_or(false)
}

/// The Chat Completions request body.
pub(crate) fn request_body(
    model: &str,
    request: &CompletionRequest<'_>,
    max_tokens: u32,
    completion_tokens_field: bool,
) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    messages.extend(request.messages.iter().map(wire_message));
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    let field = if completion_tokens_field {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(field.into(), json!(max_tokens));
    body.insert("stream".into(), json!(false));
    if request.allow_tools && !request.tools.is_empty() {
        body.insert("tools".into(), Value::Array(request.tools.to_vec()));
        body.insert("tool_choice".into(), json!("auto"));
    }
    Value::Object(body)
}

fn wire_message(message: &Message) -> Value {
    match message.role {
        Role::System => json!({"role": "system", "content": message.content}),
        Role::User => json!({"role": "user", "content": message.content}),
        Role::Assistant if message.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": message.content})
        }
        Role::Assistant => {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
            json!({"role": "assistant", "content": message.content, "tool_calls": calls})
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id.as_deref().unwrap_or_default(),
            "content": message.content,
        }),
    }
}

/// The completion in a Chat Completions answer; the error says what is
/// missing or wrong.
pub(crate) fn parse_response(body: &Value) -> Result<Completion, String> {
    let Some(choice) = body["choices"].get(0) else {
        return Err(missing_from_answer("`choices[0]`", body));
    };
    let message = &choice["message"];
    if !message.is_object() {
        return Err("no `choices[0].message` object in the answer".into());
    }
    let content = match &message["content"] {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => {
            return Err(format!("`choices[0].message.content` is {other}, not text"));
        }
    };
    let tool_calls = match &message["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) => calls
            .iter()
            .enumerate()
            .map(|(index, call)| parse_tool_call(index, call))
            .collect::<Result<_, _>>()?,
        _ => return Err("`choices[0].message.tool_calls` is not a list".into()),
    };
    let finish = match choice["finish_reason"].as_str() {
        None | Some("stop") if !tool_calls.is_empty() => FinishReason::ToolCalls,
        None | Some("stop") => FinishReason::Stop,
        Some("tool_calls") | Some("function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some(other) => FinishReason::Other(other.to_owned()),
    };
    let usage = Usage {
        input_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: body["usage"]["completion_tokens"].as_u64().unwrap_or(0),
    };
    Ok(Completion {
        message: Message::assistant(content, tool_calls),
        finish,
        usage,
    })
}

fn parse_tool_call(index: usize, call: &Value) -> Result<ToolCall, String> {
    let function = &call["function"];
    let name = function["name"]
        .as_str()
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            format!("`choices[0].message.tool_calls[{index}].function.name` is missing")
        })?;
    let arguments = match &function["arguments"] {
        Value::String(text) => text.clone(),
        // A call of a tool without parameters.
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    };
    let id = call_id_or_generated(&call["id"]);
    Ok(ToolCall {
        id,
        name: name.to_owned(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Value> {
        vec![json!({"type": "function", "function": {
            "name": "get_weather", "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }})]
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::user("Weather in Paris?"),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\": \"Paris\"".into(),
                }],
            ),
            Message::tool_result("call_1", "get_weather", "error: arguments are not JSON"),
        ]
    }

    #[test]
    fn request_carries_system_history_tools_and_the_limit() {
        let messages = conversation();
        let tools = tools();
        let request = CompletionRequest {
            system: "Be brief.",
            messages: &messages,
            tools: &tools,
            max_output_tokens: 0,
            allow_tools: true,
        };
        let body = request_body("qwen", &request, 512, false);
        assert_eq!(
            body,
            json!({
                "model": "qwen",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": "", "tool_calls": [{
                        "id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\""},
                    }]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "error: arguments are not JSON"},
                ],
                "max_tokens": 512,
                "stream": false,
                "tools": tools,
                "tool_choice": "auto",
            })
        );
        let body = request_body("o3", &request, 512, true);
        assert_eq!(body["max_completion_tokens"], 512);
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn without_tools_allowed_no_tools_are_sent() {
        let messages = conversation();
        let tools = tools();
        let request = CompletionRequest {
            system: "",
            messages: &messages,
            tools: &tools,
            max_output_tokens: 1,
            allow_tools: false,
        };
        let body = request_body("m", &request, 1, false);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
        assert_eq!(
            body["messages"][0]["role"], "user",
            "no empty system message"
        );
    }

    #[test]
    fn answers_with_tool_calls_null_content_and_missing_ids_are_read() {
        let answer = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"type": "function", "function": {"name": "get_time", "arguments": {"tz": "UTC"}}},
                    {"function": {"name": "ping"}},
                ],
            }}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
        });
        let completion = parse_response(&answer).unwrap();
        assert_eq!(completion.finish, FinishReason::ToolCalls);
        assert_eq!(completion.message.role, Role::Assistant);
        assert_eq!(completion.message.content, "");
        let calls = &completion.message.tool_calls;
        assert_eq!(calls[0].id, "call_a");
        assert_eq!(calls[0].arguments, "{\"city\":\"Paris\"}");
        assert!(calls[1].id.starts_with("call_q"), "{}", calls[1].id);
        assert_ne!(calls[1].id, calls[2].id);
        assert_eq!(calls[1].arguments, "{\"tz\":\"UTC\"}");
        assert_eq!(calls[2].arguments, "{}");
        assert_eq!(
            completion.usage,
            Usage {
                input_tokens: 120,
                output_tokens: 30
            }
        );
    }

    #[test]
    fn finish_reasons_are_mapped() {
        let answer = |finish: Value, calls: Value| json!({"choices": [{"finish_reason": finish, "message": {"content": "x", "tool_calls": calls}}]});
        let call = json!([{"id": "1", "function": {"name": "f", "arguments": "{}"}}]);
        let finish = |a: Value| parse_response(&a).unwrap().finish;
        assert_eq!(
            finish(answer(json!("stop"), Value::Null)),
            FinishReason::Stop
        );
        assert_eq!(finish(answer(Value::Null, Value::Null)), FinishReason::Stop);
        assert_eq!(
            finish(answer(json!("length"), Value::Null)),
            FinishReason::Length
        );
        assert_eq!(
            finish(answer(json!("stop"), call.clone())),
            FinishReason::ToolCalls
        );
        assert_eq!(finish(answer(Value::Null, call)), FinishReason::ToolCalls);
        assert_eq!(
            finish(answer(json!("content_filter"), Value::Null)),
            FinishReason::Other("content_filter".into())
        );
        let parts = json!({"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]});
        assert_eq!(parse_response(&parts).unwrap().message.content, "ab");
        assert_eq!(parse_response(&parts).unwrap().usage, Usage::default());
    }

    #[test]
    fn malformed_answers_say_what_is_missing() {
        assert_eq!(
            parse_response(&json!({"object": "list"})).unwrap_err(),
            "no `choices[0]` in the answer"
        );
        let error = parse_response(&json!({"error": {"message": "busy"}})).unwrap_err();
        assert!(error.contains("busy"), "{error}");
        assert!(
            parse_response(&json!({"choices": [{}]}))
                .unwrap_err()
                .contains("message")
        );
        let nameless = json!({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]});
        assert!(
            parse_response(&nameless)
                .unwrap_err()
                .contains("tool_calls[0].function.name")
        );
        let bad_content = json!({"choices": [{"message": {"content": 5}}]});
        assert!(
            parse_response(&bad_content)
                .unwrap_err()
                .contains("not text")
        );
    }

    #[test]
    fn openai_itself_is_recognised() {
        assert!(is_openai_itself("https://api.openai.com/v1"));
        assert!(!is_openai_itself("http://127.0.0.1:8080/v1"));
        assert!(!is_openai_itself("https://openrouter.example/api/v1"));
    }
}
