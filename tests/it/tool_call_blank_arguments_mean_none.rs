//! `tool_call` `arguments` absent, `null`, `""` or whitespace mean `{}`
//! (gateways send `""` for parameterless tools); the tool runs with no
//! arguments, and a tool that requires some says which.

use std::sync::atomic::Ordering;

use quiver_tests::dispatch::fixture_with_shop;
use serde_json::{Value, json};

#[tokio::test]
async fn blank_arguments_run_the_tool_with_none() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let mut request = json!({"name": "mcp_github_list_issues"});
    let absent = fixture
        .call(&session, "tool_call", request.clone())
        .await
        .unwrap();
    assert_eq!(absent["arguments"], json!({}));
    for blank in [Value::Null, json!(""), json!("   "), json!("\n\t ")] {
        request["arguments"] = blank.clone();
        let out = fixture.call(&session, "tool_call", request.clone()).await;
        assert_eq!(out.unwrap(), absent, "{blank}");
    }
    assert_eq!(fixture.invoked.load(Ordering::SeqCst), 5);

    let error = fixture
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": " "}),
        )
        .await
        .unwrap_err()
        .to_json();
    assert_eq!(error["error"], "invalid_arguments", "{error}");
    assert!(error["problems"].to_string().contains("repo"), "{error}");
    assert_eq!(fixture.invoked.load(Ordering::SeqCst), 5);
}
