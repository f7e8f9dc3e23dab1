//! `mcp-server-time` (installed by `.ci/run` into a venv at the version
//! pinned in tests/third_party/requirements.txt): its real tools join the
//! catalog, are found by `tool_search` and are called through `tool_call`
//! and the MCP client.

use quiver_tests::mcp;

use quiver_catalog::bridge::{self, BridgeOutcome};
use quiver_mcp::McpServerConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn server_time_tools_are_found_and_called() {
    let bin = quiver_tests::mcp_server_time_bin();
    let config = McpServerConfig::stdio(
        "time",
        bin.to_string_lossy().into_owned(),
        vec!["--local-timezone".into(), "UTC".into()],
    );
    let (registry, host) = mcp::start(vec![config]);
    mcp::ready(&host, "time").await;

    let assembly = mcp::assemble(&registry);
    let names = mcp::deferred_names(&assembly, "time");
    assert!(
        names.contains(&"mcp_time_get_current_time".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"mcp_time_convert_time".to_owned()),
        "{names:?}"
    );

    let found = bridge::search(&assembly, &json!({"query": "current time in a timezone"})).unwrap();
    assert_eq!(
        found["matches"][0]["name"], "mcp_time_get_current_time",
        "{found}"
    );
    let resolved = match bridge::handle(
        &assembly,
        "tool_call",
        &json!({"name": "mcp_time_get_current_time", "arguments": {"timezone": "Europe/Paris"}}),
    ) {
        Some(Ok(BridgeOutcome::Dispatch(resolved))) => resolved,
        other => panic!("tool_call did not resolve: {other:?}"),
    };
    let output = host.call_resolved(&resolved).await.unwrap();
    assert!(output.text().contains("Europe/Paris"), "{output:?}");

    let error = host
        .call(
            "time",
            "get_current_time",
            json!({"timezone": "Not/AZone"})
                .as_object()
                .cloned()
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("`time`") && error.to_string().contains("`get_current_time`"),
        "{error}"
    );
    host.shutdown().await;
}
