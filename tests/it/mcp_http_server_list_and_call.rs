//! A Streamable HTTP server on 127.0.0.1, configured in `quiver.yaml` with
//! a bearer token from the environment (`${VAR}`): its tools join the
//! catalog, are found by `tool_search` and are called through `tool_call`.
//! A wrong token leaves the server failing, with the reason in its status.

use quiver_tests::mcp;

use std::process::Command;

use quiver_catalog::bridge::{self, BridgeOutcome};
use quiver_mcp::ServerState;
use serde_json::json;

/// Starts the test server in HTTP mode on a free 127.0.0.1 port; returns
/// it and its URL.
fn http_server(args: &[&str]) -> (quiver_tests::KillOnDrop, String) {
    let mut command = Command::new(quiver_tests::mcp_test_server());
    command.args(["--http", "127.0.0.1:0"]).args(args);
    let (server, url) = quiver_tests::spawn_serving_url(command);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (server, url)
}

#[tokio::test(flavor = "multi_thread")]
async fn http_tools_are_listed_found_and_called_with_a_token() {
    // SAFETY: this file's only test; nothing else reads the environment
    // concurrently while it is set.
    unsafe { std::env::set_var("QUIVER_TEST_MCP_TOKEN", "s3cret") };
    let (_server, url) = http_server(&["--require-header", "authorization=Bearer s3cret"]);
    let yaml = format!(
        "mcp_servers:\n  remote:\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{QUIVER_TEST_MCP_TOKEN}}\"\n    call_timeout_s: 20\n  wrong:\n    url: {url}\n    headers:\n      Authorization: \"Bearer nope\"\n    connect_timeout_s: 5\n"
    );
    let loaded = quiver_daemon::config::parse(&yaml, "quiver.yaml").unwrap();
    let servers: Vec<_> = loaded.config.mcp_servers.into_values().collect();
    let (registry, host) = mcp::start(servers);
    mcp::ready(&host, "remote").await;

    let assembly = mcp::assemble(&registry);
    assert!(mcp::deferred_names(&assembly, "remote").contains(&"mcp_remote_add".to_owned()));
    let found = bridge::search(&assembly, &json!({"query": "add two numbers sum"})).unwrap();
    assert_eq!(found["matches"][0]["name"], "mcp_remote_add");
    let resolved = match bridge::handle(
        &assembly,
        "tool_call",
        &json!({"name": "mcp_remote_add", "arguments": {"a": 40, "b": 2}}),
    ) {
        Some(Ok(BridgeOutcome::Dispatch(resolved))) => resolved,
        other => panic!("{other:?}"),
    };
    let output = host.call_resolved(&resolved).await.unwrap();
    assert_eq!(output.structured_content, Some(json!({"sum": 42.0})));

    mcp::eventually("the server with a wrong token has failed", || {
        matches!(
            host.server_status("wrong").unwrap().state,
            ServerState::Failed { .. }
        )
    })
    .await;
    assert!(mcp::deferred_names(&mcp::assemble(&registry), "wrong").is_empty());
    let text = format!("{:?}", host.server_status("wrong").unwrap());
    assert!(
        text.contains("401") || text.to_lowercase().contains("unauthorized"),
        "{text}"
    );
    host.shutdown().await;
}
