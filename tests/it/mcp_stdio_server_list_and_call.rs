//! A stdio MCP server's tools (listed over several pages) join the deferred
//! catalog as `mcp_<server>_<tool>`, are found by `tool_search`, resolve
//! through `tool_call` and are called through the dispatcher as the
//! model's calls are: text, image and structured results come back.

use quiver_tests::mcp;

use quiver_catalog::bridge;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_listed_found_and_called() {
    let served = mcp::serve(vec![mcp::test_server(
        "tester",
        &["--tools", "25", "--page-size", "7"],
    )])
    .await;
    let (registry, host) = (served.daemon.registry(), served.daemon.mcp());
    let tools = mcp::ready(host, "tester").await;
    // 12 fixed tools and 25 generated ones, over 6 pages of 7.
    assert_eq!(tools, 37);

    let assembly = mcp::assemble(registry);
    let names = mcp::deferred_names(&assembly, "tester");
    assert_eq!(names.len(), 37);
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

    let echo = served
        .tool_call("mcp_tester_echo", json!({"text": "hello"}))
        .await;
    assert_eq!(mcp::text(&echo), "hello");

    let image = served.tool_call("mcp_tester_image", json!({})).await;
    assert_eq!(image["content"][1]["type"], "image");
    assert_eq!(image["content"][1]["mimeType"], "image/png");

    // Arguments as a JSON string, as some gateways send them.
    let add = served
        .tool_call("mcp_tester_add", json!("{\"a\": 2, \"b\": 3}"))
        .await;
    assert_eq!(add["structured_content"]["sum"], 5.0);

    host.shutdown().await;
    assert!(
        mcp::deferred_names(&mcp::assemble(registry), "tester").is_empty(),
        "shutdown takes the server's tools out"
    );
}
