//! The Anthropic Messages client, over real HTTP against the scripted model
//! server: it sends `x-api-key` and `anthropic-version`, the system prompt
//! at the top level and the assembled tools as `{name, description,
//! input_schema}`; `tool_use` blocks come back as tool calls; the results
//! of one turn's calls go back merged into one user message of
//! `tool_result` blocks, and the next answer sees them. With tools not
//! allowed after tool use, the tools still go (the API wants them) with
//! `tool_choice: none`.

use quiver_tests::model;

use model::{ScriptedModel, assembled_tools, turn};
use quiver_model::{CompletionRequest, FinishReason, Message, Role};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn tool_use_and_merged_tool_results_round_trip() {
    let script = json!([{"match": "weather in Paris", "steps": [
        {"content": "Checking both.", "tool_calls": [
            {"name": "mcp_weather_get_weather", "arguments": {"city": "Paris"}},
            {"name": "mcp_weather_get_time", "arguments": {"tz": "Europe/Paris"}},
        ]},
        {"content": "Last result: {{last_tool_result}}. Tools: {{tool_names}}."},
    ]}]);
    let server = ScriptedModel::start(
        &script,
        &[
            "--require-header",
            "x-api-key=sk-ant-test",
            "--require-header",
            "anthropic-version=2023-06-01",
        ],
    );
    let mut config = server.anthropic("claude");
    config.api_key = Some("sk-ant-test".into());
    let provider = quiver_model::build(&config).unwrap();
    assert_eq!(provider.name(), "claude");
    let tools = assembled_tools(false);

    let mut messages = vec![Message::user("What is the weather in Paris, and the time?")];
    let first = provider.complete(turn(&messages, &tools)).await.unwrap();
    assert_eq!(first.finish, FinishReason::ToolCalls);
    assert_eq!(first.message.role, Role::Assistant);
    assert_eq!(first.message.content, "Checking both.");
    let calls = &first.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].name.as_str(),
            calls[0].arguments.as_str()
        ),
        (
            "toolu_0_0_0",
            "mcp_weather_get_weather",
            "{\"city\":\"Paris\"}"
        )
    );
    assert_eq!(calls[1].arguments, "{\"tz\":\"Europe/Paris\"}");
    assert!(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);

    messages.push(first.message.clone());
    messages.push(Message::tool_result(
        "toolu_0_0_0",
        "mcp_weather_get_weather",
        "sunny, 21 C",
    ));
    messages.push(Message::tool_result(
        "toolu_0_0_1",
        "mcp_weather_get_time",
        "14:05",
    ));
    let second = provider.complete(turn(&messages, &tools)).await.unwrap();
    assert_eq!(second.finish, FinishReason::Stop);
    assert_eq!(
        second.message.content,
        "Last result: 14:05. Tools: mcp_weather_get_time,mcp_weather_get_weather."
    );

    messages.push(second.message.clone());
    messages.push(Message::user("Thanks."));
    let third = provider
        .complete(CompletionRequest {
            allow_tools: false,
            ..turn(&messages, &tools)
        })
        .await
        .unwrap();
    assert_eq!(third.message.content, "script exhausted");

    let sent = server.requests().await;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["model"], "scripted-claude");
    assert_eq!(sent[0]["system"], "You are terse.");
    assert_eq!(sent[0]["max_tokens"], 256);
    let converted: Vec<Value> = tools
        .iter()
        .map(|t| {
            let f = &t["function"];
            json!({"name": f["name"], "description": f["description"], "input_schema": f["parameters"]})
        })
        .collect();
    assert_eq!(sent[0]["tools"], json!(converted));
    assert!(sent[0].get("tool_choice").is_none());
    assert_eq!(
        sent[1]["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "What is the weather in Paris, and the time?"},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "toolu_0_0_0", "name": "mcp_weather_get_weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_0_0_1", "name": "mcp_weather_get_time",
                 "input": {"tz": "Europe/Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_0_0_0", "content": "sunny, 21 C"},
                {"type": "tool_result", "tool_use_id": "toolu_0_0_1", "content": "14:05"},
            ]},
        ])
    );
    assert_eq!(sent[2]["tool_choice"], json!({"type": "none"}));
    assert_eq!(sent[2]["tools"], json!(converted));
    let history = sent[2]["messages"].as_array().unwrap();
    assert_eq!(history.len(), 5);
    let last = &history[4];
    assert_eq!(
        last,
        &json!({"role": "user", "content": [{"type": "text", "text": "Thanks."}]})
    );
}
