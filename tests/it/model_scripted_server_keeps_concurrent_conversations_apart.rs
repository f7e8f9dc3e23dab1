//! The scripted model server answers each request from the request alone:
//! many sessions running at once, each at its own step, get their own
//! conversation's answers, and a replayed request gets the same answer.

use quiver_tests::model;

use std::sync::Arc;

use model::ScriptedModel;
use quiver_model::{CompletionRequest, Message, ModelProvider, ToolCall, build};
use serde_json::json;

async fn turn(provider: &dyn ModelProvider, messages: &[Message]) -> Message {
    let request = CompletionRequest {
        system: "",
        messages,
        tools: &[],
        max_output_tokens: 32,
        allow_tools: true,
    };
    provider.complete(request).await.unwrap().message
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_in_parallel_never_mix() {
    let conversations: Vec<_> = (0..8)
        .map(|n| {
            json!({"match": format!("session {n}:"), "steps": [
                {"delay_ms": 40 * (8 - n), "tool_calls": [{"name": "lookup", "arguments": {"n": n}}]},
                {"delay_ms": 20 * n, "content": format!("session {n} got {{{{last_tool_result}}}}")},
            ]})
        })
        .collect();
    let server = ScriptedModel::start(&json!(conversations), &[]);
    let provider: Arc<dyn ModelProvider> = build(&server.openai("local")).unwrap();
    let sessions: Vec<_> = (0..8)
        .map(|n| {
            let provider = provider.clone();
            tokio::spawn(async move {
                let mut messages = vec![Message::user(format!("session {n}: go"))];
                let first = turn(&*provider, &messages).await;
                let call: &ToolCall = &first.tool_calls[0];
                assert_eq!(call.arguments, format!("{{\"n\":{n}}}"));
                let replay = turn(&*provider, &messages).await;
                assert_eq!(replay, first, "a replay gets the same answer");
                messages.push(first.clone());
                messages.push(Message::tool_result(
                    &call.id,
                    "lookup",
                    format!("result {n}"),
                ));
                turn(&*provider, &messages).await.content
            })
        })
        .collect();
    for (n, session) in sessions.into_iter().enumerate() {
        assert_eq!(
            session.await.unwrap(),
            format!("session {n} got result {n}")
        );
    }
    assert_eq!(server.requests().await.len(), 8 * 3);
}
