//! A model that keeps calling `tool_search` is stopped: past
//! `agent.max_consecutive_searches` searches in a row, the search is not
//! run, the model is told why, asked once more without tools, and the turn
//! ends cleanly with its answer; calls the model asked for after the
//! limit in the same step are answered, not run. A model that never stops
//! calling tools ends at `agent.max_steps` the same way.

use quiver_tests::daemon;
use quiver_tests::model;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn endless_searching_and_endless_steps_end_the_turn() {
    let search =
        |q: &str| json!({"tool_calls": [{"name": "tool_search", "arguments": {"query": q}}]});
    let count = json!({"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "x"}}}]});
    let script = json!([
        {"match": "find a tool", "steps": [
            search("a"), search("b"), search("c"), search("d"),
            {"content": "I could not find one: {{last_tool_result}}"}
        ]},
        {"match": "batch", "steps": [
            search("a"), search("b"), search("c"),
            {"tool_calls": [
                {"name": "tool_search", "arguments": {"query": "d"}},
                {"name": "run_command", "arguments": {"command": "touch ran"}}
            ]},
            {"content": "stopped"}
        ]},
        {"match": "keep going", "steps": [
            search("a"), count, search("b"), count, search("c"),
            {"content": "stopping as told"}
        ]}
    ]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(
        &model.base_url,
        "agent:\n  max_consecutive_searches: 3\n  max_steps: 5\n",
    );
    let daemon = TestDaemon::start(&config, &fixture.state());

    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "find a tool for me").await;
    assert_eq!(outcome["stop"], "search_limit", "{outcome}");
    let reply = outcome["reply"].as_str().unwrap();
    assert!(reply.contains("Search limit reached"), "{reply}");
    let calls = outcome["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 4);
    assert_eq!(calls[3]["ok"], false);
    let requests = model.requests().await;
    assert_eq!(requests.len(), 5);
    let last = requests.last().unwrap();
    assert!(
        last.get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty)),
        "{last}"
    );
    // The fourth search was not run: only three were recorded.
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    let searches = stored["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool" && m["content"].as_str().unwrap().contains("\"matches\""))
        .count();
    assert_eq!(searches, 3);

    // A call after the limit in the same step is not run.
    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "batch of calls").await;
    assert_eq!(outcome["stop"], "search_limit", "{outcome}");
    let calls = outcome["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 5, "{outcome}");
    assert_eq!(
        (&calls[4]["called"], &calls[4]["ok"]),
        (&json!("run_command"), &json!(false))
    );
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    let not_run = stored["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_name"] == "run_command")
        .unwrap();
    assert!(
        not_run["content"].as_str().unwrap().contains("not_run"),
        "{not_run}"
    );
    assert!(!fixture.work().join("ran").exists());

    // Searches broken by other calls do not count as a loop; the step
    // limit ends the turn instead.
    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "keep going").await;
    assert_eq!(outcome["stop"], "step_limit", "{outcome}");
    assert_eq!(outcome["reply"], "stopping as told");
    assert_eq!(outcome["steps"], 6);
    assert!(
        outcome["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true)
    );
}
