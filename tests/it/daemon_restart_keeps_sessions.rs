//! Sessions, their messages and the activity log live in SQLite in the
//! state directory: after the daemon stops and starts again, a session is
//! listed with its history, the next turn sends that history to the model,
//! and the activity log replays.

use quiver_tests::daemon;
use quiver_tests::model;

use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_daemon_keeps_its_sessions() {
    let script = json!([{"match": "remember the number", "steps": [
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "forty two"}}}]},
        {"content": "noted"},
        {"content": "it was forty two"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let mut daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon
        .session(json!({"id": "kept", "grants": ["plugin-text"], "context_tokens": 20000}))
        .await;
    assert_eq!(session, "kept");
    assert_eq!(
        daemon.say(&session, "remember the number 42").await["reply"],
        "noted"
    );
    daemon.stop();

    let daemon = TestDaemon::start(&config, &fixture.state());
    let (status, listed) = daemon.get("/v1/sessions").await;
    assert_eq!(status, 200);
    let kept = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "kept")
        .cloned()
        .unwrap();
    assert_eq!(kept["grants"], json!(["plugin-text"]));
    assert_eq!(kept["context_tokens"], 20000);
    assert_eq!(kept["model"], "scripted");
    assert_eq!(kept["messages"], 4);

    let outcome = daemon.say(&session, "what was it?").await;
    assert_eq!(outcome["reply"], "it was forty two");
    let requests = model.requests().await;
    let last = requests.last().unwrap();
    let contents: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(contents.contains(&"remember the number 42"), "{contents:?}");
    assert!(contents.contains(&"noted"), "{contents:?}");
    assert!(contents.contains(&"what was it?"), "{contents:?}");
    // The grant survived too: only the bridge (no core tools) is offered.
    let names = daemon::tool_names(&last["tools"]);
    assert_eq!(names, ["tool_search", "tool_describe", "tool_call"]);

    let events = daemon
        .events(
            "/v1/sessions/kept/events?after=0",
            1,
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(events[0]["tool"], "word_count");
    assert_eq!(events[0]["via_bridge"], true);
    assert!(events[0]["id"].as_i64().unwrap() > 0);
}

/// A subagent granted a tool by name (checked against the live registry
/// when it was made) loads after a restart while that tool's MCP server is
/// still connecting, within its parent's grant.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_subagent_loads_while_its_mcp_server_connects() {
    let model = ScriptedModel::start(&json!([]), &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let mut daemon = TestDaemon::start(&config, &fixture.state());
    for attempt in 0.. {
        if daemon.get("/v1/status").await.1["mcp_servers"][0]["state"] == "ready" {
            break;
        }
        assert!(attempt < 300, "the test MCP server never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    daemon
        .session(json!({"id": "lead", "grants": ["mcp-test", "plugin-text"]}))
        .await;
    daemon
        .session(json!({"id": "helper", "parent": "lead", "grants": ["mcp_test_echo"]}))
        .await;
    daemon.stop();

    // The same server now never answers: it stays "connecting".
    let text = std::fs::read_to_string(&config).unwrap();
    let server = quiver_tests::mcp_test_server().display().to_string();
    let slow = text.replace(
        &format!("command: {server}"),
        "command: sleep\n    args: [\"600\"]\n    connect_timeout_s: 600",
    );
    assert_ne!(slow, text);
    std::fs::write(&config, slow).unwrap();
    let daemon = TestDaemon::start(&config, &fixture.state());
    assert_ne!(
        daemon.get("/v1/status").await.1["mcp_servers"][0]["state"],
        "ready"
    );

    let (status, helper) = daemon.get("/v1/sessions/helper").await;
    assert_eq!(status, 200, "{helper}");
    assert_eq!(helper["session"]["grants"], json!(["mcp_test_echo"]));
    let (status, catalog) = daemon.get("/v1/sessions/helper/catalog").await;
    assert_eq!(status, 200, "{catalog}");
}
