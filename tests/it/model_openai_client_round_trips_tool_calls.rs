//! The OpenAI-compatible client, over real HTTP against the scripted model
//! server: the assembled tools array is sent as it is, the model's tool
//! calls come back (arguments as raw text, even when not valid JSON), the
//! tool results go back as `tool` messages tied to their call ids, and the
//! next answer sees them. With tools not allowed, none are sent. Calls the
//! server sends without an id get one.

use quiver_tests::model;

use model::{ScriptedModel, assembled_tools, tool_names, turn};
use quiver_model::{CompletionRequest, FinishReason, Message, Role};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_and_results_round_trip() {
    let script = json!([{"match": "weather in Paris", "steps": [
        {"content": "Let me look.", "tool_calls": [
            {"name": "mcp_weather_get_weather", "arguments": {"city": "Paris"}},
            {"name": "mcp_weather_get_time", "arguments": "{\"tz\": \"Europe/Par"},
        ]},
        {"content": "Last result: {{last_tool_result}}. Tools: {{tool_names}}."},
    ]}]);
    let server = ScriptedModel::start(
        &script,
        &["--require-header", "authorization=Bearer sk-local"],
    );
    let mut config = server.openai("local");
    config.api_key = Some("sk-local".into());
    config.context_tokens = 32_768;
    let provider = quiver_model::build(&config).unwrap();
    assert_eq!(provider.name(), "local");
    assert_eq!(provider.context_tokens(), 32_768);
    let tools = assembled_tools(false);
    assert_eq!(
        tool_names(&tools),
        ["mcp_weather_get_time", "mcp_weather_get_weather"]
    );

    let mut messages = vec![Message::user("What is the weather in Paris, and the time?")];
    let first = provider.complete(turn(&messages, &tools)).await.unwrap();
    assert_eq!(first.finish, FinishReason::ToolCalls);
    assert_eq!(first.message.role, Role::Assistant);
    assert_eq!(first.message.content, "Let me look.");
    let calls = &first.message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].name.as_str(),
            calls[0].arguments.as_str()
        ),
        (
            "call_0_0_0",
            "mcp_weather_get_weather",
            "{\"city\":\"Paris\"}"
        )
    );
    assert_eq!(calls[1].id, "call_0_0_1");
    assert_eq!(
        calls[1].arguments, "{\"tz\": \"Europe/Par",
        "raw text, unparsed"
    );
    assert!(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);

    messages.push(first.message.clone());
    messages.push(Message::tool_result(
        "call_0_0_0",
        "mcp_weather_get_weather",
        "sunny, 21 C",
    ));
    messages.push(Message::tool_result(
        "call_0_0_1",
        "mcp_weather_get_time",
        "error: the arguments are not valid JSON",
    ));
    let second = provider.complete(turn(&messages, &tools)).await.unwrap();
    assert_eq!(second.finish, FinishReason::Stop);
    assert!(second.message.tool_calls.is_empty());
    assert_eq!(
        second.message.content,
        "Last result: error: the arguments are not valid JSON. \
         Tools: mcp_weather_get_time,mcp_weather_get_weather."
    );

    // Text only: no tools are offered, and the configured limit applies.
    messages.push(second.message.clone());
    messages.push(Message::user("Thanks."));
    let third = provider
        .complete(CompletionRequest {
            allow_tools: false,
            max_output_tokens: 0,
            ..turn(&messages, &tools)
        })
        .await
        .unwrap();
    assert_eq!(third.message.content, "script exhausted");

    let sent = server.requests().await;
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["model"], "scripted-gpt");
    assert_eq!(
        sent[0]["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is the weather in Paris, and the time?"},
        ])
    );
    assert_eq!(
        sent[0]["tools"],
        json!(tools),
        "the assembly's tools, as they are"
    );
    assert_eq!(sent[0]["tool_choice"], "auto");
    assert_eq!(sent[0]["max_tokens"], 256);
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_0_0_0", "type": "function",
             "function": {"name": "mcp_weather_get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_0_0_1", "type": "function",
             "function": {"name": "mcp_weather_get_time", "arguments": "{\"tz\": \"Europe/Par"}},
        ]})
    );
    assert_eq!(
        sent[1]["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_0_0_0", "content": "sunny, 21 C"})
    );
    assert_eq!(sent[1]["messages"][4]["tool_call_id"], "call_0_0_1");
    assert!(sent[2].get("tools").is_none() && sent[2].get("tool_choice").is_none());
    assert_eq!(sent[2]["max_tokens"], 4096);
    assert_eq!(sent[2]["messages"].as_array().unwrap().len(), 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_without_ids_get_unique_ones() {
    let script = json!([{"match": "ping", "steps": [{"tool_calls": [
        {"name": "ping", "omit_id": true},
        {"name": "ping", "omit_id": true},
    ]}]}]);
    let server = ScriptedModel::start(&script, &[]);
    let provider = quiver_model::build(&server.openai("local")).unwrap();
    let messages = [Message::user("ping twice")];
    let completion = provider
        .complete(CompletionRequest {
            system: "",
            messages: &messages,
            tools: &[],
            max_output_tokens: 16,
            allow_tools: true,
        })
        .await
        .unwrap();
    let calls = &completion.message.tool_calls;
    assert_eq!(completion.finish, FinishReason::ToolCalls);
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|c| !c.id.is_empty() && c.arguments == "{}")
    );
    assert_ne!(calls[0].id, calls[1].id);
    assert_eq!(
        completion.message.content, "",
        "null content reads as empty"
    );
}
