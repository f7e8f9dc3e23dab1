//! Sessions can be deleted (with their messages and subagents) and
//! changed: a session whose model a reload removed is told so and can be
//! switched to another model with `PATCH`; its grant can be changed
//! within its parent's; a grant matching no toolset or tool is refused,
//! naming the known toolsets.

use quiver_tests::daemon;
use quiver_tests::model;

use daemon::{Fixture, TestDaemon, tool_names};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_deleted_switched_and_grants_checked() {
    let script =
        json!([{"match": "hello", "steps": [{"content": "hi there"}, {"content": "hi again"}]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    // Delete: the session, its messages and its subagent.
    let parent = daemon.session(json!({"id": "doomed"})).await;
    daemon.say(&parent, "hello").await;
    let child = daemon
        .session(json!({"id": "doomed-child", "parent": parent}))
        .await;
    let kept = daemon.session(json!({"id": "kept"})).await;
    let response = daemon
        .request(reqwest::Method::DELETE, &format!("/v1/sessions/{parent}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["deleted"], json!([child, parent]));
    for gone in [&parent, &child] {
        let (status, body) = daemon.get(&format!("/v1/sessions/{gone}")).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (404, Some("unknown_session"))
        );
    }
    let (_, list) = daemon.get("/v1/sessions").await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [kept.as_str()]);
    let again = daemon
        .request(reqwest::Method::DELETE, &format!("/v1/sessions/{parent}"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
    // The same id can be used again, and starts empty.
    let reborn = daemon.session(json!({"id": "doomed"})).await;
    assert!(daemon.stored_roles(&reborn).await.is_empty());

    // The model goes away in a reload: the session is told, and switched.
    let session = daemon.session(json!({})).await;
    daemon.say(&session, "hello").await;
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("  scripted:\n", "  second:\n")
        .replace("default_model: scripted", "default_model: second");
    std::fs::write(&config, text).unwrap();
    let (status, report) = daemon.post("/v1/reload", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["models_removed"], json!(["scripted"]));
    let path = format!("/v1/sessions/{session}/messages");
    let (status, refused) = daemon.post(&path, json!({"content": "hello"})).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (409, Some("session_model_gone")),
        "{refused}"
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("`scripted`") && message.contains("second") && message.contains("PATCH"),
        "{message}"
    );
    let patch = |body: serde_json::Value| {
        daemon
            .request(reqwest::Method::PATCH, &format!("/v1/sessions/{session}"))
            .json(&body)
            .send()
    };
    let response = patch(json!({"model": "nope"})).await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"], "unknown_model", "{body}");
    let response = patch(json!({"model": "second"})).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let record: serde_json::Value = response.json().await.unwrap();
    assert_eq!(record["model"], "second", "{record}");
    assert_eq!(record["context_tokens"], 64000, "{record}");
    let outcome = daemon.say(&session, "hello").await;
    assert_eq!(outcome["reply"], "hi again");
    // The history was kept across the switch.
    assert_eq!(
        daemon.stored_roles(&session).await,
        ["user", "assistant", "user", "assistant"]
    );

    // Unknown grants are refused, naming what there is.
    for grant in ["mcp-nosuch", "nomatch_*"] {
        let (status, refused) = daemon
            .post("/v1/sessions", json!({"grants": ["core", grant]}))
            .await;
        assert_eq!(
            (status, refused["error"].as_str()),
            (400, Some("unknown_grant")),
            "{refused}"
        );
        let message = refused["message"].as_str().unwrap();
        assert!(
            message.contains(grant)
                && message.contains("core")
                && message.contains("plugin-text")
                && message.contains("mcp-test"),
            "{message}"
        );
    }
    daemon
        .session(json!({"grants": ["mcp_test_*", "word_count"]}))
        .await;

    // The grant changes; a subagent's stays within its parent's.
    let response = patch(json!({"grants": ["plugin-text"]})).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (_, catalog) = daemon.get(&format!("/v1/sessions/{session}/catalog")).await;
    assert_eq!(
        tool_names(&catalog["tools"]),
        ["tool_search", "tool_describe", "tool_call"]
    );
    assert!(!catalog["listing"].as_str().unwrap().contains("mcp_test"));
    let child = daemon.session(json!({"parent": session})).await;
    let response = daemon
        .request(reqwest::Method::PATCH, &format!("/v1/sessions/{child}"))
        .json(&json!({"grants": ["core"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let response = patch(json!({"grants": ["nosuch"]})).await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(stored["session"]["grants"], json!(["plugin-text"]));
}
