//! `@modelcontextprotocol/server-everything` (installed by `.ci/run` at the
//! version pinned in tests/third_party/package-lock.json, run from
//! node_modules over stdio): its real tools join the catalog, are found by
//! `tool_search` and are called through `tool_call` and the MCP client.

use quiver_tests::mcp;

use quiver_catalog::bridge::{self, BridgeOutcome};
use quiver_mcp::McpServerConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn server_everything_tools_are_found_and_called() {
    let entry = quiver_tests::server_everything_entry();
    let config = McpServerConfig::stdio(
        "everything",
        "node",
        vec![entry.to_string_lossy().into_owned(), "stdio".into()],
    );
    let (registry, host) = mcp::start(vec![config]);
    let tools = mcp::ready(&host, "everything").await;
    assert!(tools >= 5, "only {tools} tools");

    let assembly = mcp::assemble(&registry);
    let names = mcp::deferred_names(&assembly, "everything");
    for expected in [
        "mcp_everything_echo",
        "mcp_everything_get-sum",
        "mcp_everything_get-tiny-image",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} missing from {names:?}"
        );
    }

    let found = bridge::search(&assembly, &json!({"query": "sum of two numbers"})).unwrap();
    assert_eq!(
        found["matches"][0]["name"], "mcp_everything_get-sum",
        "{found}"
    );
    let resolve =
        |arguments: serde_json::Value| match bridge::handle(&assembly, "tool_call", &arguments) {
            Some(Ok(BridgeOutcome::Dispatch(resolved))) => resolved,
            other => panic!("tool_call did not resolve: {other:?}"),
        };
    let sum = resolve(json!({"name": "mcp_everything_get-sum", "arguments": {"a": 19, "b": 23}}));
    let output = host.call_resolved(&sum).await.unwrap();
    assert!(output.text().contains("42"), "{:?}", output);

    let echo =
        resolve(json!({"name": "mcp_everything_echo", "arguments": {"message": "hi there"}}));
    let output = host.call_resolved(&echo).await.unwrap();
    assert!(output.text().contains("hi there"), "{:?}", output);

    let image = resolve(json!({"name": "mcp_everything_get-tiny-image"}));
    let output = host.call_resolved(&image).await.unwrap();
    assert!(
        output.content.iter().any(|c| c["type"] == "image"),
        "{:?}",
        output
    );

    // Bad params reach the model as a clear tool error naming server and tool.
    let error = host
        .call(
            "everything",
            "get-sum",
            json!({"a": "x"}).as_object().cloned().unwrap(),
        )
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("`everything`") && message.contains("`get-sum`"),
        "{message}"
    );
    host.shutdown().await;
}
