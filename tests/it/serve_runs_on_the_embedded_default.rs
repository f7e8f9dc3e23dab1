//! The README's main command: `quiver serve` with no config runs the
//! embedded default, which loads the bundled plugins built beside the
//! `quiver` executable (and no other `.so` there) and connects the bundled
//! example notes MCP server, whose tools then work through the gateway.

use quiver_tests::daemon;

use std::time::Duration;

use daemon::TestDaemon;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn serve_with_no_config_runs_the_bundled_tools() {
    // The bundled plugins (and the fixtures, which must not load) are
    // built beside the quiver binary, as `cargo build` leaves them.
    quiver_tests::plugin_so("text");
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .current_dir(&work)
        .env("XDG_STATE_HOME", scratch.path().join("xdg"));
    let daemon = TestDaemon::spawn(command, &scratch.path().join("state"));

    let mut status = serde_json::Value::Null;
    for _ in 0..400 {
        status = daemon.get("/v1/status").await.1;
        if status["mcp_servers"][0]["state"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status["mcp_servers"][0]["name"], "notes", "{status}");
    assert_eq!(status["mcp_servers"][0]["tools"], 5, "{status}");
    let mut plugins: Vec<&str> = status["plugins"]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    plugins.sort();
    assert_eq!(plugins, ["sqlite", "text", "time"], "{status}");
    assert_eq!(status["default_model"], "local");
    assert_eq!(
        std::fs::canonicalize(status["workspace"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(&work).unwrap()
    );

    let client = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
                .auth_header(daemon.token.clone()),
        ))
        .await
        .unwrap();
    let call = |arguments: serde_json::Value| {
        let mut call = CallToolRequestParams::new("tool_call");
        call.arguments = arguments.as_object().cloned();
        call
    };
    let saved = client
        .call_tool(call(json!({"name": "mcp_notes_add_note", "arguments": {"title": "groceries", "text": "oat milk and bread"}})))
        .await
        .unwrap();
    assert_ne!(saved.is_error, Some(true), "{saved:?}");
    let found = client
        .call_tool(call(
            json!({"name": "mcp_notes_search_notes", "arguments": {"query": "milk"}}),
        ))
        .await
        .unwrap();
    assert!(
        format!("{:?}", found.content).contains("groceries"),
        "{found:?}"
    );
    let now = client
        .call_tool(call(
            json!({"name": "time_now", "arguments": {"zone": "Europe/Paris"}}),
        ))
        .await
        .unwrap();
    assert_ne!(now.is_error, Some(true), "{now:?}");
    client.cancel().await.unwrap();
}
