//! `mcp-server-time` (installed by `.ci/run` into a venv at the version
//! pinned in tests/third_party/requirements.txt): its real tools join the
//! catalog, are found by `tool_search` and are called through `tool_call`
//! by the dispatcher, as the model's calls are; a bad timezone reaches the
//! model as a tool error naming the server and the tool.

use quiver_tests::mcp;

use quiver_catalog::bridge;
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
    let served = mcp::serve(vec![config]).await;
    let host = served.daemon.mcp();
    mcp::ready(host, "time").await;

    let assembly = mcp::assemble(served.daemon.registry());
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
    let output = served
        .tool_call(
            "mcp_time_get_current_time",
            json!({"timezone": "Europe/Paris"}),
        )
        .await;
    assert!(mcp::text(&output).contains("Europe/Paris"), "{output}");

    let request =
        json!({"name": "mcp_time_get_current_time", "arguments": {"timezone": "Not/AZone"}});
    let error = served
        .call("tool_call", request)
        .await
        .unwrap_err()
        .to_json();
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`time`") && message.contains("`get_current_time`"),
        "{error}"
    );
    host.shutdown().await;
}
