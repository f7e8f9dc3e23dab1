//! A user's message attaches an MCP server's prompt and resources by the
//! gateway's names: the model is sent the prompt's rendering, the user's
//! text and each resource's text in a block naming it, and the reads show
//! in the session's feed. An attachment outside the session's grant, or
//! unknown, is refused with a code naming it and stores nothing.

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_message_carries_a_rendered_prompt_and_resource_texts_to_the_model() {
    let fixture = Fixture::new();
    let model = ScriptedModel::start(
        &json!([{"match": "Say hello to Ada", "steps": [{"content": "Hello, Ada."}]}]),
        &[],
    );
    let config = fixture.test_servers_config(
        "attachments.yaml",
        &[("notes", &["--resources"])],
        &format!(
            "models:\n  scripted:\n    provider: openai\n    base_url: {url}/v1\n    model: scripted\n    max_retries: 0\ndefault_model: scripted\n",
            url = model.base_url,
        ),
    );
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;
    let session = daemon.session(json!({})).await;

    let (status, answer) = daemon
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({
                "content": "Then summarise the note.",
                "prompt": {"name": "mcp_notes_greet", "arguments": {"name": "Ada"}},
                "resources": ["quiver://mcp/notes/test://notes/first"],
            }),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["reply"], "Hello, Ada.", "{answer}");
    let requests = model.requests().await;
    let sent = requests
        .last()
        .and_then(|r| r["messages"].as_array())
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        sent,
        "Say hello to Ada.\n\nThen summarise the note.\n\n<resource uri=\"quiver://mcp/notes/test://notes/first\">\nnote first\n</resource>"
    );

    // The reads are in the session's feed.
    let events = daemon
        .events(
            &format!("/v1/sessions/{session}/events?after=0"),
            100,
            Duration::from_secs(2),
        )
        .await;
    let tools: Vec<&str> = events.iter().filter_map(|e| e["tool"].as_str()).collect();
    assert!(
        tools.contains(&"prompts/get") && tools.contains(&"resources/read"),
        "{events:?}"
    );

    // Refusals: unknown or outside the grant, nothing stored.
    let stored = daemon.stored_roles(&session).await;
    let limited = daemon.session(json!({"grants": ["core"]})).await;
    for (id, body, code, names) in [
        (
            &limited,
            json!({"content": "x", "resources": ["quiver://mcp/notes/test://notes/first"]}),
            "unknown_resource",
            "quiver://mcp/notes/test://notes/first",
        ),
        (
            &session,
            json!({"content": "x", "resources": ["test://notes/first"]}),
            "unknown_resource",
            "quiver://mcp/SERVER/URI",
        ),
        (
            &session,
            json!({"content": "x", "prompt": {"name": "mcp_notes_nothing"}}),
            "unknown_prompt",
            "mcp_notes_nothing",
        ),
        (
            &session,
            json!({"content": "x", "prompt": {"name": "mcp_notes_greet"}}),
            "attachment_failed",
            "greet needs `name`",
        ),
    ] {
        let (status, refused) = daemon
            .post(&format!("/v1/sessions/{id}/messages"), body.clone())
            .await;
        assert_eq!(status, 400, "{body}: {refused}");
        assert_eq!(refused["error"], code, "{refused}");
        let message = refused["message"].as_str().unwrap_or_default();
        assert!(message.contains(names), "{refused}");
    }
    assert_eq!(daemon.stored_roles(&session).await, stored);
    assert!(daemon.stored_roles(&limited).await.is_empty());

    // A message of a prompt alone is accepted (its text is the rendering).
    let (status, answer) = daemon
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"prompt": {"name": "mcp_notes_greet", "arguments": {"name": "Ada"}}}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let _: Value = answer;
}
