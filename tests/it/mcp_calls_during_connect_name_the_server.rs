//! A call of a deferred tool whose MCP server is still connecting (its
//! `initialize` is slow) is answered `server_connecting` naming the
//! server, not `unknown_tool` with suggestions from other sources; once
//! the server is up the same call runs.

use std::time::Duration;

use quiver_tests::daemon::Fixture;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread")]
async fn a_call_while_its_server_connects_names_the_server() {
    let fixture = Fixture::new();
    let config = fixture.path().join("slow.yaml");
    std::fs::write(
        &config,
        format!(
            "plugins:\n  dirs: [{plugins}]\nmcp_servers:\n  slow:\n    command: {server}\n    args: [\"--initialize-delay-ms\", \"4000\"]\n    connect_timeout_s: 30\ncore_tools:\n  workspace: {work}\n",
            plugins = fixture.plugins().display(),
            server = quiver_tests::mcp_test_server().display(),
            work = fixture.work().display(),
        ),
    )
    .unwrap();
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", "*", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let echo = || {
        let mut call = CallToolRequestParams::new("tool_call");
        call.arguments = json!({"name": "mcp_slow_echo", "arguments": {"text": "hi"}})
            .as_object()
            .cloned();
        call
    };
    let early = serde_json::to_value(client.call_tool(echo()).await.unwrap()).unwrap();
    assert_eq!(early["isError"], json!(true), "{early}");
    let text = early["content"][0]["text"].as_str().unwrap_or_default();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(answer["error"], json!("server_connecting"), "{answer}");
    assert_eq!(answer["server"], json!("slow"), "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("still connecting"),
        "{answer}"
    );

    let mut ran = false;
    for _ in 0..300 {
        let result = client.call_tool(echo()).await.unwrap();
        if result.is_error != Some(true) {
            assert!(format!("{:?}", result.content).contains("hi"), "{result:?}");
            ran = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ran, "the server never came up");
    client.cancel().await.unwrap();
}
