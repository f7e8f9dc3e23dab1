//! The Anthropic Messages client (`POST {base_url}/v1/messages`,
//! `anthropic-version: 2023-06-01`; streamed with `stream: true` unless the
//! model's `stream` is `false`).
//!
//! How the neutral conversation maps onto the API:
//!
//! - the system prompt and any [`Role::System`] messages become the
//!   top-level `system` text, joined by blank lines;
//! - every message is a list of content blocks; consecutive messages of the
//!   same API role are merged into one, so the tool results answering one
//!   assistant turn travel together in a single user message (followed by
//!   the user's next text, if any), as the API requires;
//! - an assistant's tool calls are `tool_use` blocks whose `input` is the
//!   parsed arguments object. Arguments that are not a JSON object (the
//!   model wrote invalid JSON, which the agent loop reported back in the
//!   tool result) are sent as `{}`: the API accepts nothing else, and the
//!   tool result already tells the model what went wrong;
//! - empty texts are left out (the API refuses empty text blocks), and a
//!   message with no block left is dropped;
//! - tools are converted to `{name, description, input_schema}`; with
//!   `allow_tools: false` they are sent only when the history holds tool
//!   blocks (the API refuses those without tool definitions), with
//!   `tool_choice: {"type": "none"}`.
//!
//! In answers, text blocks are joined by newlines, `tool_use` blocks become
//! tool calls (their `input` serialised as the arguments text), other blocks
//! (thinking) are skipped; `usage.input_tokens` counts cached prompt tokens
//! too.

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use super::http::{Endpoint, api_key_header};
use super::{
    BoxFuture, Completion, CompletionRequest, DeltaSink, FinishReason, Message, ModelConfig,
    ModelError, ModelProvider, Probe, Role, ToolCall, Usage, call_id_or_generated,
    missing_from_answer,
};

/// The API version this client speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A model behind the Anthropic Messages API.
pub struct AnthropicProvider {
    config: ModelConfig,
    endpoint: Endpoint,
}

impl AnthropicProvider {
    /// A client for `config` (its `provider` is not checked).
    pub fn new(config: &ModelConfig) -> Result<AnthropicProvider, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(value) = api_key_header(config, str::to_owned)? {
            headers.insert("x-api-key", value);
        }
        Ok(AnthropicProvider {
            endpoint: Endpoint::new(config, messages_url(&config.base_url), headers)?,
            config: config.clone(),
        })
    }

    /// The request URL.
    pub fn url(&self) -> &str {
        self.endpoint.url()
    }

    async fn complete_inner(
        &self,
        request: CompletionRequest<'_>,
        sink: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ModelError> {
        let max_tokens = request.output_limit(self.config.max_output_tokens);
        let mut body = request_body(&self.config.model, &request, max_tokens);
        let answer = match sink.filter(|_| self.config.stream) {
            Some(sink) => {
                body["stream"] = json!(true);
                let response = self.endpoint.post_streaming(&body).await?;
                crate::stream::read(
                    &self.endpoint,
                    response,
                    crate::stream::AnthropicAssembly::default(),
                    sink,
                )
                .await?
            }
            None => self.endpoint.post(&body).await?,
        };
        crate::stream::completion(&self.endpoint, answer, parse_response)
    }
}

impl ModelProvider for AnthropicProvider {
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

/// `{base_url}/v1/messages`; a base URL that already ends in `/v1` is not
/// given a second one.
fn messages_url(base_url: &str) -> String {
    if base_url.ends_with("/v1") {
        format!("{base_url}/messages")
    } else {
        format!("{base_url}/v1/messages")
    }
}

/// `{base_url}/v1/models` (one `/v1`, as for messages): the model list,
/// which answers without spending tokens.
fn models_url(base_url: &str) -> String {
    let messages = messages_url(base_url);
    format!("{}/models", messages.trim_end_matches("/messages"))
}

/// The Messages request body.
pub(crate) fn request_body(model: &str, request: &CompletionRequest<'_>, max_tokens: u32) -> Value {
    let mut system: Vec<&str> = Vec::new();
    if !request.system.is_empty() {
        system.push(request.system);
    }
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut has_tool_blocks = false;
    for message in request.messages {
        let (role, blocks) = match message.role {
            Role::System => {
                if !message.content.is_empty() {
                    system.push(&message.content);
                }
                continue;
            }
            Role::User => ("user", text_block(&message.content).into_iter().collect()),
            Role::Assistant => {
                let mut blocks: Vec<Value> = text_block(&message.content).into_iter().collect();
                blocks.extend(message.tool_calls.iter().map(tool_use_block));
                ("assistant", blocks)
            }
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.as_deref().unwrap_or_default(),
                    "content": message.content,
                })],
            ),
        };
        has_tool_blocks |= !message.tool_calls.is_empty() || message.role == Role::Tool;
        match messages.last_mut() {
            _ if blocks.is_empty() => {}
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() && (request.allow_tools || has_tool_blocks) {
        let tools: Vec<Value> = request.tools.iter().map(wire_tool).collect();
        body.insert("tools".into(), Value::Array(tools));
        if !request.allow_tools {
            body.insert("tool_choice".into(), json!({"type": "none"}));
        }
    }
    Value::Object(body)
}

fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn tool_use_block(call: &ToolCall) -> Value {
    let input = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({}),
    };
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

/// An OpenAI-style function definition as an Anthropic tool; anything else
/// (say, a tool already in Anthropic's shape) is sent unchanged.
fn wire_tool(tool: &Value) -> Value {
    let Some(function) = tool.get("function").filter(|f| f.is_object()) else {
        return tool.clone();
    };
    let mut out = Map::new();
    out.insert("name".into(), function["name"].clone());
    if let Some(description) = function["description"].as_str() {
        out.insert("description".into(), json!(description));
    }
    let schema = match &function["parameters"] {
        Value::Null => json!({"type": "object", "properties": {}}),
        schema => schema.clone(),
    };
    out.insert("input_schema".into(), schema);
    Value::Object(out)
}

/// The completion in a Messages answer; the error says what is missing or
/// wrong.
pub(crate) fn parse_response(body: &Value) -> Result<Completion, String> {
    let Some(blocks) = body["content"].as_array() else {
        return Err(missing_from_answer("`content` list", body));
    };
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => texts.push(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => {
                let name = block["name"]
                    .as_str()
                    .filter(|name| !name.is_empty())
                    .ok_or_else(|| format!("`content[{index}].name` of a tool_use is missing"))?;
                let arguments = match &block["input"] {
                    Value::Null => "{}".to_owned(),
                    input => input.to_string(),
                };
                let id = call_id_or_generated(&block["id"]);
                tool_calls.push(ToolCall {
                    id,
                    name: name.to_owned(),
                    arguments,
                });
            }
            Some(_) => {}
            None => return Err(format!("`content[{index}]` has no `type`")),
        }
    }
    let finish = match body["stop_reason"].as_str() {
        None | Some("end_turn") | Some("stop_sequence") if !tool_calls.is_empty() => {
            FinishReason::ToolCalls
        }
        None | Some("end_turn") | Some("stop_sequence") => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens") => FinishReason::Length,
        Some(other) => FinishReason::Other(other.to_owned()),
    };
    let usage = &body["usage"];
    let count = |key: &str| usage[key].as_u64().unwrap_or(0);
    let usage = Usage {
        input_tokens: count("input_tokens")
            + count("cache_creation_input_tokens")
            + count("cache_read_input_tokens"),
        output_tokens: count("output_tokens"),
    };
    Ok(Completion {
        message: Message::assistant(texts.join("\n"), tool_calls),
        finish,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Value> {
        vec![
            json!({"type": "function", "function": {
                "name": "get_weather", "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }}),
            json!({"type": "function", "function": {"name": "now"}}),
        ]
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn tool_results_of_one_turn_are_merged_into_one_user_message() {
        let messages = vec![
            Message::system("Answer in French."),
            Message::user("Weather in Paris and the time?"),
            Message::assistant(
                "Let me look.",
                vec![
                    call("toolu_1", "get_weather", "{\"city\":\"Paris\"}"),
                    call("toolu_2", "now", "{not json"),
                ],
            ),
            Message::tool_result("toolu_1", "get_weather", "sunny"),
            Message::tool_result("toolu_2", "now", "error: arguments are not JSON"),
            Message::user("Thanks!"),
            Message::assistant("", vec![]),
        ];
        let tools = tools();
        let request = CompletionRequest {
            system: "Be brief.",
            messages: &messages,
            tools: &tools,
            max_output_tokens: 0,
            allow_tools: true,
        };
        let body = request_body("claude-x", &request, 1024);
        assert_eq!(
            body,
            json!({
                "model": "claude-x",
                "max_tokens": 1024,
                "system": "Be brief.\n\nAnswer in French.",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and the time?"}]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "error: arguments are not JSON"},
                        {"type": "text", "text": "Thanks!"},
                    ]},
                ],
                "tools": [
                    {"name": "get_weather", "description": "Weather of a city",
                     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
                    {"name": "now", "input_schema": {"type": "object", "properties": {}}},
                ],
            })
        );
    }

    #[test]
    fn without_tools_allowed_tools_go_only_with_tool_history_and_choice_none() {
        let tools = tools();
        let plain = [Message::user("hi")];
        let request = CompletionRequest {
            system: "",
            messages: &plain,
            tools: &tools,
            max_output_tokens: 5,
            allow_tools: false,
        };
        let body = request_body("m", &request, 5);
        assert!(body.get("tools").is_none() && body.get("system").is_none());
        let with_calls = [
            Message::user("hi"),
            Message::assistant("", vec![call("t1", "now", "{}")]),
            Message::tool_result("t1", "now", "noon"),
        ];
        let request = CompletionRequest {
            messages: &with_calls,
            ..request
        };
        let body = request_body("m", &request, 5);
        assert_eq!(body["tools"].as_array().unwrap().len(), 2);
        assert_eq!(body["tool_choice"], json!({"type": "none"}));
    }

    #[test]
    fn answers_with_text_and_tool_use_are_read() {
        let answer = json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "name": "now", "input": {}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 7},
        });
        let completion = parse_response(&answer).unwrap();
        assert_eq!(completion.finish, FinishReason::ToolCalls);
        assert_eq!(completion.message.content, "Checking.");
        let calls = &completion.message.tool_calls;
        assert_eq!(
            calls[0],
            call("toolu_9", "get_weather", "{\"city\":\"Paris\"}")
        );
        assert!(calls[1].id.starts_with("call_q"));
        assert_eq!(calls[1].arguments, "{}");
        assert_eq!(
            completion.usage,
            Usage {
                input_tokens: 100,
                output_tokens: 7
            }
        );
    }

    #[test]
    fn stop_reasons_are_mapped() {
        let finish = |reason: Value| {
            parse_response(
                &json!({"content": [{"type": "text", "text": "x"}], "stop_reason": reason}),
            )
            .unwrap()
            .finish
        };
        assert_eq!(finish(json!("end_turn")), FinishReason::Stop);
        assert_eq!(finish(json!("stop_sequence")), FinishReason::Stop);
        assert_eq!(finish(json!("max_tokens")), FinishReason::Length);
        assert_eq!(finish(Value::Null), FinishReason::Stop);
        assert_eq!(
            finish(json!("refusal")),
            FinishReason::Other("refusal".into())
        );
    }

    #[test]
    fn malformed_answers_say_what_is_missing() {
        assert_eq!(
            parse_response(&json!({"type": "message"})).unwrap_err(),
            "no `content` list in the answer"
        );
        let error = parse_response(&json!({"type": "error", "error": {"message": "overloaded"}}))
            .unwrap_err();
        assert!(error.contains("overloaded"), "{error}");
        let nameless = json!({"content": [{"type": "tool_use", "input": {}}]});
        assert!(
            parse_response(&nameless)
                .unwrap_err()
                .contains("content[0].name")
        );
        let untyped = json!({"content": [{"text": "x"}]});
        assert!(parse_response(&untyped).unwrap_err().contains("no `type`"));
    }

    #[test]
    fn the_messages_url_gets_one_v1() {
        assert_eq!(
            messages_url("https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            messages_url("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1/messages"
        );
    }
}
