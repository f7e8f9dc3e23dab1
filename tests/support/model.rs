//! Model helpers shared by the `model_*` end-to-end tests (included with
//! `#[path = "support/model.rs"] mod model;`): the scripted model server
//! (`quiver-scripted-model`) on a free 127.0.0.1 port, and model configs
//! pointing at it.

#![allow(missing_docs)]

use std::process::Command;
use std::time::Duration;

use quiver_model::{
    CompletionRequest, Message, ModelConfig, ModelError, ModelProvider, ProviderKind,
};
use serde_json::Value;

/// A running scripted model server; killed when dropped.
pub struct ScriptedModel {
    _child: crate::KillOnDrop,
    /// `http://127.0.0.1:PORT` (`https://` with `--tls-cert`).
    pub base_url: String,
    _script: tempfile::NamedTempFile,
}

impl ScriptedModel {
    /// Starts the server with `script` (a JSON list of conversations) and
    /// `args` (e.g. `["--require-header", "x-api-key=k"]`).
    pub fn start(script: &Value, args: &[&str]) -> ScriptedModel {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), script.to_string()).unwrap();
        let mut command = Command::new(crate::scripted_model_server());
        command.arg("--script").arg(file.path()).args(args);
        let (child, base_url) = crate::spawn_serving_url(command);
        ScriptedModel {
            _child: child,
            base_url,
            _script: file,
        }
    }

    /// A config of model `name` speaking the OpenAI API to this server.
    pub fn openai(&self, name: &str) -> ModelConfig {
        fast(ModelConfig::new(
            name,
            ProviderKind::OpenAi,
            format!("{}/v1", self.base_url),
            "scripted-gpt",
        ))
    }

    /// A config of model `name` speaking the Anthropic API to this server.
    pub fn anthropic(&self, name: &str) -> ModelConfig {
        fast(ModelConfig::new(
            name,
            ProviderKind::Anthropic,
            self.base_url.clone(),
            "scripted-claude",
        ))
    }

    /// Every request body the server received, oldest first.
    pub async fn requests(&self) -> Vec<Value> {
        let url = format!("{}/requests", self.base_url);
        let response = reqwest::get(&url).await.unwrap();
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        let body = response.bytes().await.unwrap();
        match serde_json::from_slice(&body).unwrap() {
            Value::Array(requests) => requests,
            other => panic!("{url} did not return a list: {other}"),
        }
    }
}

/// Short retry pauses, so that tests of retries stay quick.
fn fast(mut config: ModelConfig) -> ModelConfig {
    config.retry_backoff = Duration::from_millis(50);
    config.timeout = Duration::from_secs(30);
    config
}

/// The tools array a session gets for an MCP server `weather` with tools
/// `get_weather {city}` and `get_time {tz}`: the bridge tools when
/// `tool_search` is on, the two tools themselves when it is off.
pub fn assembled_tools(tool_search: bool) -> Vec<Value> {
    use quiver_catalog::assembly::Assembler;
    use quiver_catalog::settings::ToolSearchConfig;
    use quiver_config::Switch;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::scope::Scope;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    let registry = ToolRegistry::new();
    let string_parameter = |name: &str| json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]});
    registry.set_source_tools(
        ToolSource::Mcp("weather".into()),
        vec![
            ToolSpec::new(
                "get_weather",
                "Current weather of a city",
                string_parameter("city"),
            ),
            ToolSpec::new(
                "get_time",
                "Current time in a time zone",
                string_parameter("tz"),
            ),
        ],
    );
    let mut config = ToolSearchConfig::default();
    config.enabled = if tool_search { Switch::On } else { Switch::Off };
    Assembler::new(config)
        .assemble(&registry.snapshot(), &Scope::all(), 200_000)
        .tools()
        .to_vec()
}

/// The `function.name` of each tool of an OpenAI-style tools array.
pub fn tool_names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The text `provider` answers to the single user message `text` (no
/// system prompt, no tools, at most 64 output tokens).
pub async fn ask(provider: &dyn ModelProvider, text: &str) -> Result<String, ModelError> {
    let messages = [Message::user(text)];
    let request = CompletionRequest {
        system: "",
        messages: &messages,
        tools: &[],
        max_output_tokens: 64,
        allow_tools: true,
    };
    provider.complete(request).await.map(|c| c.message.content)
}

/// A turn of a conversation with `tools` offered and a 256-token limit.
pub fn turn<'a>(messages: &'a [Message], tools: &'a [Value]) -> CompletionRequest<'a> {
    CompletionRequest {
        system: "You are terse.",
        messages,
        tools,
        max_output_tokens: 256,
        allow_tools: true,
    }
}
