//! `isError` results and protocol errors (unknown tool, bad params) both
//! come back as tool errors that name the server and the tool; through
//! `quiver call` (the path the model's calls take) an `isError` result is
//! `{"error": "tool_error", "message", "data": {"content": [...]}}`, the
//! tool's own content kept.

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

    let error = host.call("nobody", "echo", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "unknown_server");
    host.shutdown().await;
}

#[test]
fn an_is_error_result_reaches_the_model_with_its_content() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: .\nmcp_servers:\n  tester:\n    command: {}\n",
            quiver_tests::mcp_test_server().display()
        ),
    )
    .unwrap();
    let output = quiver_tests::quiver(&[
        "call",
        "tool_call",
        "--config",
        quiver_tests::arg(&config),
        "--arguments",
        r#"{"name": "mcp_tester_fail", "arguments": {"message": "disk full"}}"#,
    ]);
    assert!(!output.status.success());
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["error"], "tool_error", "{seen}");
    assert_eq!(
        seen["message"],
        "`mcp_tester_fail` failed: MCP server `tester` tool `fail` failed: disk full"
    );
    assert_eq!(seen["data"]["content"][0]["text"], "disk full", "{seen}");
}
