//! Hybrid search in the real daemon: the model directory is named relative
//! to the config file; `/v1/status` and `quiver status` show the embedding
//! progress; a tool an MCP server adds (`list_changed`) is embedded alone,
//! the others coming from the vector cache; and the model's `tool_search`
//! then finds it from a request in other words, its result saying the
//! search was hybrid; with `readiness_waits`, `/readyz` is never ready
//! while a tool's vector is missing.

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_added_upstream_is_embedded_alone_and_found_by_a_paraphrase() {
    let script = json!([
        {"match": "add the messaging tool", "steps": [
            {"tool_calls": [{"name": "tool_call", "arguments": {"name": "mcp_test_add_tool", "arguments": {
                "name": "CreateMessage",
                "description": "Send a message from the account used to make the request"
            }}}]},
            {"content": "added"}
        ]},
        {"match": "text my friend", "steps": [
            {"tool_calls": [{"name": "tool_search", "arguments": {"query": "SMS my friend on their mobile"}}]},
            {"content": "found: {{last_tool_result}}"}
        ]}
    ]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    // A model directory relative to the config file, as operators write it.
    std::fs::create_dir_all(fixture.path().join("models")).unwrap();
    std::os::unix::fs::symlink(
        quiver_tests::minilm_model_dir(),
        fixture.path().join("models/minilm"),
    )
    .unwrap();
    let config = fixture.config(
        &model.base_url,
        "tools:\n  tool_search:\n    embeddings:\n      model: models/minilm\n      weight: 0.5\n      readiness_waits: true\n",
    );
    let daemon = TestDaemon::start(&config, &fixture.state());

    // Readiness waits for the vectors: whenever `/readyz` says ready,
    // every tool has its vector.
    for _ in 0..200 {
        let (code, ready) = daemon.get("/readyz").await;
        let (_, status) = daemon.get("/v1/status").await;
        let embeddings = &status["embeddings"];
        if code == 200 {
            assert_eq!(embeddings["ready"], embeddings["total"], "{status}");
            break;
        }
        assert_eq!(code, 503, "{ready}");
        assert_eq!(ready["error"], "not_ready", "{ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every tool of the plugins and the MCP server gets its vector.
    let before = embedded_everything(&daemon, |e| e["total"].as_u64().unwrap() > 0).await;
    let (code, ready) = daemon.get("/readyz").await;
    assert_eq!(code, 200, "{ready}");
    let sources = before["sources"].as_array().unwrap();
    assert!(
        sources.iter().any(|s| s["source"] == "mcp-test"),
        "{before}"
    );
    assert!(
        before["model"].as_str().unwrap().ends_with("minilm"),
        "{before}"
    );
    assert_eq!(before["failed"], 0);
    let total = before["total"].as_u64().unwrap();
    let embedded = before["embedded"].as_u64().unwrap();
    assert!(embedded > 0, "{before}");

    // `quiver status` asks the running daemon and says the same.
    let output = quiver_tests::quiver(&[
        "status",
        "--config",
        quiver_tests::arg(&config),
        "--state-dir",
        quiver_tests::arg(&fixture.state()),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("embeddings: minilm  {total}/{total} tools ready"))),
        "{text}"
    );

    // The server adds a tool: only that tool is embedded.
    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "add the messaging tool").await;
    assert_eq!(outcome["reply"], "added", "{outcome}");
    let after = embedded_everything(&daemon, |e| e["total"].as_u64().unwrap() == total + 1).await;
    assert_eq!(after["embedded"].as_u64().unwrap(), embedded + 1, "{after}");

    // The model's search in other words finds it.
    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "text my friend").await;
    let reply = outcome["reply"].as_str().unwrap();
    let found: Value = serde_json::from_str(reply.strip_prefix("found: ").unwrap()).unwrap();
    let names: Vec<&str> = found["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("{found}"))
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"mcp_test_CreateMessage"), "{found}");
    assert_eq!(found["search"], "hybrid", "{found}");
    assert_eq!(
        found["embedded"]["ready"], found["embedded"]["total"],
        "{found}"
    );
    assert!(found.get("search_note").is_none(), "{found}");
}

/// Waits until `/v1/status` shows every tool's vector ready and `wanted`
/// holds of its `embeddings`, which it gives back.
async fn embedded_everything(daemon: &TestDaemon, wanted: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..1200 {
        let (code, status) = daemon.get("/v1/status").await;
        assert_eq!(code, 200, "{status}");
        last = status["embeddings"].clone();
        assert!(last.is_object(), "{status}");
        if last["ready"] == last["total"] && wanted(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the embeddings never got ready: {last}");
}
