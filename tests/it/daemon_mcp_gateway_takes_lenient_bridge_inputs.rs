//! A gateway client (rmcp over `quiver serve --stdio`) sends each lenient
//! form models send: `queries` as a bare string and as a JSON-encoded
//! list, `names` as a string, `arguments: ""` for a parameterless tool,
//! numbers as strings (coerced, and the result says so); a blank query is
//! `empty_query`.

use quiver_tests::daemon;

use daemon::Fixture;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let mut request = CallToolRequestParams::new(name.to_owned());
    request.arguments = arguments.as_object().cloned();
    client.call_tool(request).await.unwrap()
}

fn text(result: &CallToolResult) -> String {
    format!("{:?}", result.content)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gateway_takes_what_models_send() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", "mcp-test", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    // The server connects in the background: wait until its tools are found.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let found = call(&client, "tool_search", json!({"queries": "echo text"})).await;
        if found.is_error != Some(true) && text(&found).contains("mcp_test_echo") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{found:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let found = call(
        &client,
        "tool_search",
        json!({"queries": "[\"echo text\", \"add two numbers\"]"}),
    )
    .await;
    let results = &found.structured_content.as_ref().unwrap()["results"];
    assert_eq!(results.as_array().unwrap().len(), 2, "{found:?}");
    assert_eq!(
        results[1]["matches"][0]["name"], "mcp_test_add",
        "{found:?}"
    );

    let blank = call(&client, "tool_search", json!({"query": "  "})).await;
    assert_eq!(blank.is_error, Some(true));
    assert!(text(&blank).contains("empty_query"), "{blank:?}");

    let described = call(&client, "tool_describe", json!({"names": "mcp_test_add"})).await;
    let tools = &described.structured_content.as_ref().unwrap()["tools"];
    assert_eq!(tools[0]["input_schema"]["required"], json!(["a", "b"]));

    let stats = call(
        &client,
        "tool_call",
        json!({"name": "mcp_test_stats", "arguments": ""}),
    )
    .await;
    assert_ne!(stats.is_error, Some(true), "{stats:?}");

    let sum = call(
        &client,
        "tool_call",
        json!({"name": "mcp_test_add", "arguments": {"a": "2", "b": " 3.5"}}),
    )
    .await;
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    assert_eq!(sum.structured_content.as_ref().unwrap()["sum"], 5.5);
    assert!(
        text(&sum).contains("arguments coerced") && text(&sum).contains("/a"),
        "{sum:?}"
    );
    let sum = call(
        &client,
        "tool_call",
        json!({"name": "mcp_test_add", "arguments": "{\"a\": \"1\", \"b\": 1}"}),
    )
    .await;
    assert_eq!(sum.structured_content.as_ref().unwrap()["sum"], 2.0);

    client.cancel().await.unwrap();
}
