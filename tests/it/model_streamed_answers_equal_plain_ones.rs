//! Both clients against the scripted model: a streamed answer (text and
//! several tool calls, their arguments arriving in pieces) is the same
//! message, finish and output usage as the plain answer to the same request;
//! its pieces arrive in order; a stream cut short or ended by the server's
//! error is a `stream_error` naming the model and URL, never a partial
//! answer.

use quiver_tests::model;

use model::ScriptedModel;
use quiver_model::{CompletionRequest, Message, ModelConfig, StreamDelta};
use serde_json::json;

fn script() -> serde_json::Value {
    json!([
        {"match": "weather and time", "steps": [
            {"content": "Checking both for you.", "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}
            ]}
        ]},
        {"match": "cut", "steps": [{"content": "a long answer cut off", "truncate_stream": true}]},
        {"match": "fail", "steps": [{"content": "starting then failing", "stream_error": "overloaded now"}]}
    ])
}

async fn streamed_equals_plain(config: ModelConfig) {
    let provider = quiver_model::build(&config).unwrap();
    let tools = model::assembled_tools(false);
    let messages = [Message::user("weather and time in Paris?")];
    let request = CompletionRequest {
        system: "Be brief.",
        messages: &messages,
        tools: &tools,
        max_output_tokens: 256,
        allow_tools: true,
    };
    let plain = provider.complete(request).await.unwrap();
    let mut pieces = Vec::new();
    let mut sink = |delta: StreamDelta<'_>| {
        pieces.push(match delta {
            StreamDelta::Text(text) => format!("text:{text}"),
            StreamDelta::ToolCall { index, name, .. } => format!("call:{index}:{name}"),
        })
    };
    let streamed = provider
        .complete_streaming(request, &mut sink)
        .await
        .unwrap();
    assert_eq!(streamed.message, plain.message);
    assert_eq!(streamed.finish, plain.finish);
    // The scripted server counts the request's characters, and the streamed
    // request has its `stream` fields more.
    assert_eq!(streamed.usage.output_tokens, plain.usage.output_tokens);
    assert_eq!(streamed.message.tool_calls.len(), 2);
    assert_eq!(
        streamed.message.tool_calls[1].arguments,
        "{\"tz\":\"Europe/Paris\"}"
    );
    assert!(streamed.usage.input_tokens > 0 && streamed.usage.output_tokens > 0);
    let text: String = pieces
        .iter()
        .filter_map(|p| p.strip_prefix("text:"))
        .collect();
    assert_eq!(text, "Checking both for you.");
    assert!(pieces.len() > 3, "{pieces:?}");
    let calls: Vec<&String> = pieces.iter().filter(|p| p.starts_with("call:")).collect();
    assert_eq!(calls, ["call:0:get_weather", "call:1:get_time"]);

    for (text, expected) in [
        ("cut", "before its end marker"),
        ("fail", "was ended by the server: overloaded now"),
    ] {
        let messages = [Message::user(text)];
        let request = CompletionRequest {
            messages: &messages,
            ..request
        };
        let error = provider
            .complete_streaming(request, &mut |_| {})
            .await
            .unwrap_err();
        assert_eq!(error.code(), "stream_error", "{error}");
        let message = error.to_string();
        assert!(
            message.contains(&format!("model `{}`", config.name))
                && message.contains(&config.base_url)
                && message.contains(expected),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_stream_assembles_into_the_plain_answer() {
    let server = ScriptedModel::start(&script(), &[]);
    streamed_equals_plain(server.openai("gpt")).await;
    let requests = server.requests().await;
    assert_eq!(requests[0]["stream"], false);
    assert_eq!(requests[1]["stream"], true);
    assert_eq!(
        requests[1]["stream_options"],
        json!({"include_usage": true})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anthropic_stream_assembles_into_the_plain_answer() {
    let server = ScriptedModel::start(&script(), &[]);
    streamed_equals_plain(server.anthropic("claude")).await;
    let requests = server.requests().await;
    assert!(requests[0].get("stream").is_none());
    assert_eq!(requests[1]["stream"], true);
}
