//! One agent turn against the real daemon: a scripted model (OpenAI Chat
//! Completions on loopback) searches the deferred catalog, describes a
//! plugin tool, calls it and an MCP tool through `tool_call`, then answers.
//! The model was sent the bridge instead of the deferred schemas, the
//! results flowed back, and the activity feed names the real tools.

use quiver_tests::daemon;
use quiver_tests::model;

use std::time::Duration;

use daemon::{Fixture, TestDaemon, tool_names};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_searches_describes_and_calls_through_the_bridge() {
    let script = json!([{"match": "count the words", "steps": [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "count the words of a text"}}]},
        {"tool_calls": [{"name": "tool_describe", "arguments": {"name": "word_count"}}]},
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "one two three"}}}]},
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "mcp_test_echo", "arguments": "{\"text\": \"hello from mcp\"}"}}]},
        {"content": "done: {{last_tool_result}}"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.first_mcp_ready().await;

    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "please count the words").await;
    assert_eq!(outcome["stop"], "answer", "{outcome}");
    assert_eq!(outcome["steps"], 5);
    let reply = outcome["reply"].as_str().unwrap();
    assert!(
        reply.starts_with("done: ") && reply.contains("hello from mcp"),
        "{reply}"
    );
    let calls: Vec<(String, String, bool)> = outcome["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["called"].as_str().unwrap().to_owned(),
                c["tool"].as_str().unwrap().to_owned(),
                c["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("tool_search".into(), "tool_search".into(), true),
            ("tool_describe".into(), "tool_describe".into(), true),
            ("tool_call".into(), "word_count".into(), true),
            ("tool_call".into(), "mcp_test_echo".into(), true),
        ]
    );

    // What the model was sent: the core tools and the bridge, not the
    // deferred schemas, which the tool_search description lists instead.
    let requests = model.requests().await;
    assert_eq!(requests.len(), 5);
    let first_tools = &requests[0]["tools"];
    let names = tool_names(first_tools);
    for expected in [
        "read_file",
        "run_command",
        "tool_search",
        "tool_describe",
        "tool_call",
    ] {
        assert!(names.contains(&expected.to_owned()), "{names:?}");
    }
    assert!(!names.contains(&"word_count".to_owned()), "{names:?}");
    assert!(!names.contains(&"mcp_test_echo".to_owned()), "{names:?}");
    let search = first_tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .unwrap();
    let listing = search["function"]["description"].as_str().unwrap();
    assert!(
        listing.contains("word_count") && listing.contains("mcp_test_echo"),
        "{listing}"
    );

    // The results flowed back as tool messages.
    let last_message = |request: &serde_json::Value| {
        request["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone()
    };
    let search_result = last_message(&requests[1]);
    assert_eq!(search_result["role"], "tool");
    assert!(
        search_result["content"]
            .as_str()
            .unwrap()
            .contains("\"word_count\"")
    );
    let described = last_message(&requests[2]);
    assert!(
        described["content"]
            .as_str()
            .unwrap()
            .contains("input_schema")
    );
    let counted: serde_json::Value =
        serde_json::from_str(last_message(&requests[3])["content"].as_str().unwrap()).unwrap();
    assert_eq!(counted["words"], 3);

    // The conversation is stored, in order.
    assert_eq!(
        daemon.stored_roles(&session).await,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );

    // The activity feed, replayed from the log, shows the real tools.
    let events = daemon
        .events(
            &format!("/v1/sessions/{session}/events?after=0"),
            4,
            Duration::from_secs(10),
        )
        .await;
    let lines: Vec<(String, bool, String)> = events
        .iter()
        .map(|e| {
            (
                e["tool"].as_str().unwrap().to_owned(),
                e["via_bridge"].as_bool().unwrap(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("tool_search".into(), false, "ok".into()),
            ("tool_describe".into(), false, "ok".into()),
            ("word_count".into(), true, "ok".into()),
            ("mcp_test_echo".into(), true, "ok".into()),
        ]
    );
    assert!(
        events[2]["line"]
            .as_str()
            .unwrap()
            .starts_with("word_count via tool_call  ok")
    );
}
