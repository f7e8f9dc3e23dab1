//! A session sees and calls only what it was granted: its catalog holds
//! only granted toolsets, a call outside the grant is `not_available`
//! without running, and a subagent cannot be granted more than its parent.

use quiver_tests::daemon;
use quiver_tests::model;

use daemon::{Fixture, TestDaemon, tool_names};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn sessions_and_subagents_stay_within_their_grant() {
    let script = json!([{"match": "try the server", "steps": [
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "mcp_test_echo", "arguments": {"text": "x"}}}]},
        {"tool_calls": [{"name": "mcp_test_echo", "arguments": {"text": "x"}}]},
        {"content": "{{last_tool_result}}"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    // The server's tools must exist for a call of one to be out of grant
    // rather than unknown.
    daemon.ready().await;

    let parent = daemon
        .session(json!({"grants": ["core", "plugin-text"]}))
        .await;
    let (status, catalog) = daemon.get(&format!("/v1/sessions/{parent}/catalog")).await;
    assert_eq!(status, 200);
    let names = tool_names(&catalog["tools"]);
    assert!(names.contains(&"read_file".to_owned()) && names.contains(&"tool_search".to_owned()));
    let listing = catalog["listing"].as_str().unwrap();
    assert!(
        listing.contains("word_count") && !listing.contains("mcp_test"),
        "{listing}"
    );

    let outcome = daemon.say(&parent, "try the server").await;
    assert!(
        outcome["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == false)
    );
    assert!(
        outcome["reply"].as_str().unwrap().contains("not_available"),
        "{outcome}"
    );

    // A subagent: a subset is fine, more is refused (and nothing is stored).
    let child = daemon
        .session(json!({"parent": parent, "grants": ["plugin-text"]}))
        .await;
    let (_, catalog) = daemon.get(&format!("/v1/sessions/{child}/catalog")).await;
    assert_eq!(
        tool_names(&catalog["tools"]),
        ["tool_search", "tool_describe", "tool_call"]
    );
    // Without `grants`, a subagent gets its parent's grant.
    let (status, inherited) = daemon.post("/v1/sessions", json!({"parent": parent})).await;
    assert_eq!(status, 201, "{inherited}");
    let (_, parent_record) = daemon.get(&format!("/v1/sessions/{parent}")).await;
    assert_eq!(inherited["grants"], parent_record["session"]["grants"]);
    let (status, catalog) = daemon
        .get(&format!(
            "/v1/sessions/{}/catalog",
            inherited["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 200, "{catalog}");
    let (status, refused) = daemon
        .post(
            "/v1/sessions",
            json!({"id": "greedy", "parent": parent, "grants": ["mcp-test"]}),
        )
        .await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (403, Some("beyond_parent_grant")),
        "{refused}"
    );
    assert_eq!(daemon.get("/v1/sessions/greedy").await.0, 404);

    // Bad requests name what is wrong.
    let (status, bad) = daemon
        .post("/v1/sessions", json!({"grants": ["mcp-[x"]}))
        .await;
    assert_eq!(
        (status, bad["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, bad) = daemon.post("/v1/sessions", json!({"model": "gpt-9"})).await;
    assert_eq!(
        (status, bad["error"].as_str()),
        (400, Some("unknown_model"))
    );
    assert!(bad["message"].as_str().unwrap().contains("scripted"));
    let (status, bad) = daemon.post("/v1/sessions", json!({"grant": ["x"]})).await;
    assert_eq!(status, 400, "a body of the wrong shape is a 400: {bad}");
    assert!(bad["message"].as_str().unwrap().contains("grant"), "{bad}");
}
