//! A stdio MCP server's tools (listed over several pages) join the deferred
//! catalog as `mcp_<server>_<tool>`, are found by `tool_search`, resolve
//! through `tool_call` and are called through the MCP client: text, image
//! and structured results come back.

use quiver_tests::mcp;

use quiver_catalog::bridge::{self, BridgeOutcome};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_listed_found_and_called() {
    let (registry, host) = mcp::start(vec![mcp::test_server(
        "tester",
        &["--tools", "25", "--page-size", "7"],
    )]);
    let tools = mcp::ready(&host, "tester").await;
    // 10 fixed tools and 25 generated ones, over 5 pages of 7.
    assert_eq!(tools, 35);

    let assembly = mcp::assemble(&registry);
    let names = mcp::deferred_names(&assembly, "tester");
    assert_eq!(names.len(), 35);
    assert!(names.contains(&"mcp_tester_echo".to_owned()));
    assert!(names.contains(&"mcp_tester_tool_24".to_owned()));

    let found = bridge::search(&assembly, &json!({"query": "echo text back"})).unwrap();
    assert_eq!(found["matches"][0]["name"], "mcp_tester_echo");
    assert_eq!(found["matches"][0]["server"], "tester");

    // Descriptions stay whole for describe.
    let described =
        bridge::describe(&assembly, &json!({"name": "mcp_tester_describe_me"})).unwrap();
    let description = described["description"].as_str().unwrap();
    assert!(
        description.len() > 600 && description.ends_with("The end."),
        "{description}"
    );

    let call =
        |arguments: serde_json::Value| match bridge::handle(&assembly, "tool_call", &arguments) {
            Some(Ok(BridgeOutcome::Dispatch(resolved))) => resolved,
            other => panic!("tool_call did not resolve: {other:?}"),
        };
    let echo = call(json!({"name": "mcp_tester_echo", "arguments": {"text": "hello"}}));
    let output = host.call_resolved(&echo).await.unwrap();
    assert_eq!(output.text(), "hello");

    let image = call(json!({"name": "mcp_tester_image"}));
    let output = host.call_resolved(&image).await.unwrap();
    assert_eq!(output.content[1]["type"], "image");
    assert_eq!(output.content[1]["mimeType"], "image/png");

    let add = call(json!({"name": "mcp_tester_add", "arguments": "{\"a\": 2, \"b\": 3}"}));
    let output = host.call_resolved(&add).await.unwrap();
    assert_eq!(output.structured_content, Some(json!({"sum": 5.0})));
    assert_eq!(output.to_json()["structured_content"]["sum"], 5.0);

    host.shutdown().await;
    assert!(
        registry.snapshot().is_empty(),
        "shutdown takes the tools out"
    );
}
