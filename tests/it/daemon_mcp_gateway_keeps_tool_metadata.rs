//! What an MCP server says about its tools besides name, description and
//! input schema (title, behaviour hints, output schema, `_meta`) reaches
//! the gateway's client: in `tools/list` when the tool is sent directly
//! (tier 0), in `tool_describe` and `tool_search` when it is deferred; and
//! a structured result that does not match the declared output schema is
//! an error result, not data.

use quiver_tests::daemon::Fixture;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// `quiver serve --stdio` with our test server started `--rich` as `rich`,
/// and `extra` YAML.
async fn gateway(fixture: &Fixture, extra: &str) -> RunningService<RoleClient, ()> {
    let config = fixture.test_servers_config("rich.yaml", &[("rich", &["--rich"])], extra);
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", "*", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state());
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, name: &str, arguments: Value) -> Value {
    let mut request = CallToolRequestParams::new(name.to_owned());
    request.arguments = arguments.as_object().cloned();
    serde_json::to_value(client.call_tool(request).await.unwrap()).unwrap()
}

/// The JSON a bridge tool answered with (its one text block).
fn answer(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {result}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn tier_zero_tools_list_carries_title_hints_output_schema_and_meta() {
    let fixture = Fixture::new();
    let client = gateway(&fixture, "tools:\n  tool_search:\n    enabled: off\n").await;
    let mut sum = None;
    for _ in 0..300 {
        let tools = client.list_all_tools().await.unwrap();
        sum = tools.into_iter().find(|t| t.name == "mcp_rich_sum");
        if sum.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let sum = serde_json::to_value(sum.expect("mcp_rich_sum never listed")).unwrap();
    assert_eq!(sum["title"], json!("Sum of two numbers"), "{sum}");
    assert_eq!(
        sum["annotations"],
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
        "{sum}"
    );
    assert_eq!(sum["outputSchema"]["required"], json!(["sum"]), "{sum}");
    assert_eq!(
        sum["_meta"],
        json!({"quiver.test/kind": "arithmetic"}),
        "{sum}"
    );

    let result = call(&client, "mcp_rich_sum", json!({"a": 1, "b": 2})).await;
    assert_eq!(result["structuredContent"], json!({"sum": 3.0}), "{result}");
    assert_ne!(result["isError"], json!(true), "{result}");

    let result = call(&client, "mcp_rich_miscount", json!({})).await;
    assert_eq!(result["isError"], json!(true), "{result}");
    let error = answer(&result);
    assert_eq!(error["error"], json!("invalid_output"), "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("/count"),
        "the message names where it misses: {error}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn deferred_tools_show_their_metadata_in_describe_and_search() {
    let fixture = Fixture::new();
    let client = gateway(&fixture, "").await;
    let mut described = Value::Null;
    for _ in 0..300 {
        let result = call(&client, "tool_describe", json!({"name": "mcp_rich_sum"})).await;
        if result["isError"] != json!(true) {
            described = answer(&result);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        described["title"],
        json!("Sum of two numbers"),
        "{described}"
    );
    assert_eq!(
        described["annotations"]["readOnlyHint"],
        json!(true),
        "{described}"
    );
    assert_eq!(
        described["output_schema"]["properties"]["sum"],
        json!({"type": "number"}),
        "{described}"
    );

    let found = answer(
        &call(
            &client,
            "tool_search",
            json!({"query": "sum of two numbers"}),
        )
        .await,
    );
    let first = &found["matches"][0];
    assert_eq!(first["name"], json!("mcp_rich_sum"), "{found}");
    assert_eq!(first["title"], json!("Sum of two numbers"), "{found}");

    let result = call(
        &client,
        "tool_call",
        json!({"name": "mcp_rich_miscount", "arguments": {}}),
    )
    .await;
    assert_eq!(result["isError"], json!(true), "{result}");
    assert_eq!(
        answer(&result)["error"],
        json!("invalid_output"),
        "{result}"
    );
    client.cancel().await.unwrap();
}
