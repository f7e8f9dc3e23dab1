//! A blank query is an `empty_query` error saying what to send, not an
//! empty result the model would read as "no such tool": `query` blank or
//! whitespace, a `queries` entry blank, or only a `server:` filter.

use quiver_tests::dispatch::fixture_with_shop;
use serde_json::json;

#[tokio::test]
async fn blank_queries_are_an_error_naming_what_to_send() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    for (arguments, at) in [
        (json!({"query": ""}), "`query`"),
        (json!({"query": "  \n\t"}), "`query`"),
        (json!({"query": "server:github"}), "`query`"),
        (json!({"queries": ["  ", ""]}), "`queries[0]`"),
        (json!({"queries": ["create issue", ""]}), "`queries[1]`"),
        (json!({"queries": ""}), "`queries[0]`"),
    ] {
        let error = fixture
            .call(&session, "tool_search", arguments.clone())
            .await
            .unwrap_err()
            .to_json();
        assert_eq!(error["error"], "empty_query", "{arguments}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(at) && message.contains("send words describing the tool"),
            "{arguments}: {message}"
        );
    }
    let found = fixture
        .call(&session, "tool_search", json!({"query": " create issue "}))
        .await
        .unwrap();
    assert_eq!(found["matches"][0]["tool"], "create_issue");
}
