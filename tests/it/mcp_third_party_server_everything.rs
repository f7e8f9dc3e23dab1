//! `@modelcontextprotocol/server-everything` (installed by `.ci/run` at the
//! version pinned in tests/third_party/package-lock.json, run from
//! node_modules over stdio): its real tools join the catalog, are found by
//! `tool_search` and are called through `tool_call` by the dispatcher, as
//! the model's calls are.

use quiver_tests::mcp;

use quiver_catalog::bridge;
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
    let served = mcp::serve(vec![config]).await;
    let host = served.daemon.mcp();
    let tools = mcp::ready(host, "everything").await;
    assert!(tools >= 5, "only {tools} tools");

    let assembly = mcp::assemble(served.daemon.registry());
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
    let sum = served
        .tool_call("mcp_everything_get-sum", json!({"a": 19, "b": 23}))
        .await;
    assert!(mcp::text(&sum).contains("42"), "{sum}");

    let echo = served
        .tool_call("mcp_everything_echo", json!({"message": "hi there"}))
        .await;
    assert!(mcp::text(&echo).contains("hi there"), "{echo}");

    let image = served
        .tool_call("mcp_everything_get-tiny-image", json!({}))
        .await;
    assert!(
        image["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image"),
        "{image}"
    );

    // Arguments of the wrong type reach the model as a clear error: the
    // chain's validation against the server's schema names the problem
    // before anything is sent.
    let request = json!({"name": "mcp_everything_get-sum", "arguments": {"a": "x", "b": 1}});
    let error = served
        .call("tool_call", request)
        .await
        .unwrap_err()
        .to_json();
    assert_eq!(error["error"], "invalid_arguments", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("mcp_everything_get-sum"),
        "{error}"
    );
    host.shutdown().await;
}
