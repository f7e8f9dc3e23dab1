//! `isError` results and protocol errors (unknown tool, bad params) both
//! come back as tool errors that name the server and the tool.

use quiver_tests::mcp;

use serde_json::{Map, json};

fn arguments(value: serde_json::Value) -> Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_and_protocol_errors_are_clear() {
    let (_registry, host) = mcp::start(vec![mcp::test_server("tester", &[])]);
    mcp::ready(&host, "tester").await;

    let error = host
        .call("tester", "fail", arguments(json!({"message": "disk full"})))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "tool_error");
    assert_eq!(
        error.to_string(),
        "MCP server `tester` tool `fail` failed: disk full"
    );
    assert_eq!(error.to_json()["content"][0]["text"], "disk full");

    let error = host
        .call("tester", "no_such_tool", Map::new())
        .await
        .unwrap_err();
    assert_eq!(error.code(), "protocol_error");
    let message = error.to_string();
    assert!(
        message.contains("`tester`")
            && message.contains("`no_such_tool`")
            && message.contains("unknown tool"),
        "{message}"
    );

    let error = host.call("tester", "echo", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "protocol_error");
    assert!(error.to_string().contains("echo needs `text`"), "{error}");
    assert_eq!(error.to_json()["error"], "protocol_error");

    let error = host.call("nobody", "echo", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "unknown_server");
    host.shutdown().await;
}
