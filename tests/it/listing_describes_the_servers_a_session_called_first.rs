//! The listing describes the servers a session has called before the
//! others: against the real daemon, at a context size where the test MCP
//! server is only named (smaller groups take the room for descriptions),
//! a turn calls one of its tools through `tool_call`, and the model's next
//! request describes that server's tools. Another session, which called
//! nothing, keeps the first listing.

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use serde_json::{Value, json};

/// `server`'s form in an assembly (`/v1/.../catalog` or the model's tools).
fn mode(catalog: &Value, server: &str) -> String {
    catalog["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == server)
        .map(|g| g["mode"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The `tool_search` description sent in a model request.
fn listing(request: &Value) -> String {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .map(|t| t["function"]["description"].as_str().unwrap().to_owned())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_called_server_is_described_on_the_next_request() {
    let script = json!([{"match": "echo", "steps": [
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "mcp_test_echo", "arguments": {"text": "hi"}}}]},
        {"content": "done"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.first_mcp_ready().await;

    // The largest context size at which every tool is named, some smaller
    // group is described, and the test server is only named: the room the
    // smaller groups' descriptions take would describe it.
    let mut context = None;
    for tokens in (200..20_000).step_by(50) {
        let (_, catalog) = daemon
            .get(&format!("/v1/catalog?context_tokens={tokens}"))
            .await;
        let modes: Vec<&str> = catalog["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["mode"].as_str().unwrap())
            .collect();
        if mode(&catalog, "test") == "names"
            && modes.contains(&"full")
            && modes.iter().all(|m| *m != "summary")
        {
            context = Some(tokens);
        } else if mode(&catalog, "test") == "full" {
            break;
        }
    }
    let context = context.expect("a context size at which the test server is only named");

    let session = daemon.session(json!({"context_tokens": context})).await;
    let idle = daemon.session(json!({"context_tokens": context})).await;
    let catalog = |session: String| {
        let daemon = &daemon;
        async move {
            daemon
                .get(&format!("/v1/sessions/{session}/catalog"))
                .await
                .1
        }
    };
    let before = catalog(session.clone()).await;
    assert_eq!(mode(&before, "test"), "names", "{}", before["servers"]);

    let outcome = daemon.say(&session, "echo something").await;
    assert_eq!(outcome["stop"], "answer", "{outcome}");

    // The model's first request named the server's tools; the one after
    // the call describes them.
    let requests = model.requests().await;
    assert_eq!(requests.len(), 2);
    let (first, second) = (listing(&requests[0]), listing(&requests[1]));
    assert!(first.contains("mcp_test_echo"), "{first}");
    assert!(!first.contains("- mcp_test_echo"), "{first}");
    assert!(second.contains("- mcp_test_echo: "), "{second}");
    let after = catalog(session.clone()).await;
    assert_eq!(mode(&after, "test"), "full", "{}", after["servers"]);
    assert!(
        after["listing_tokens"].as_u64().unwrap() <= after["budget_tokens"].as_u64().unwrap(),
        "{after}"
    );
    // The room still fits: some group described before is named now.
    assert_ne!(before["servers"], after["servers"]);

    // A session that called nothing is unchanged.
    let other = catalog(idle).await;
    assert_eq!(other["servers"], before["servers"]);
}
