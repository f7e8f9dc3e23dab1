//! Startup returns before any server has answered; a server still
//! connecting, a failed one and a disabled one are named in an empty
//! `tool_search` result, and only if the session's scope grants them.

use quiver_tests::mcp;

use std::time::Duration;

use quiver_catalog::bridge;
use quiver_mcp::{McpServerConfig, ScopedStatus, ServerState};
use quiver_tool::scope::Scope;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn slow_failed_and_disabled_servers_are_named() {
    // `sleep` never speaks MCP: the server stays "connecting" until its
    // connect timeout.
    let mut slow = McpServerConfig::stdio("slow", "sleep", vec!["600".into()]);
    slow.connect_timeout = Duration::from_secs(600);
    let mut off = mcp::test_server("off", &[]);
    off.enabled = false;
    let broken = McpServerConfig::stdio("broken", "/nonexistent/quiver-server", vec![]);
    let (registry, host) = mcp::start(vec![slow, off, broken, mcp::test_server("quick", &[])]);
    // `start` returned while `slow` had not answered.
    assert!(matches!(
        host.server_status("slow").unwrap().state,
        ServerState::Connecting { attempt: 1 }
    ));
    mcp::ready(&host, "quick").await;
    mcp::eventually("the broken server failed", || {
        matches!(
            host.server_status("broken").unwrap().state,
            ServerState::Failed { .. }
        )
    })
    .await;
    assert!(matches!(
        host.server_status("off").unwrap().state,
        ServerState::Disabled
    ));

    let assembly = mcp::assemble(&registry);
    let scope = Scope::all();
    let status = ScopedStatus::new(&host, &scope);
    let out = bridge::search_with_status(&assembly, &json!({"query": "zzzz qqqq"}), Some(&status))
        .unwrap();
    let note = out["note"].as_str().unwrap().to_lowercase();
    assert!(note.contains("servers: quick."), "{note}");
    assert!(note.contains("server slow is still connecting"), "{note}");
    assert!(note.contains("server off is disabled"), "{note}");
    assert!(
        note.contains("server broken is failing to connect"),
        "{note}"
    );
    assert!(!note.contains("server quick is"), "{note}");

    // A session granted only `quick` and `slow` hears only about `slow`.
    let scope = Scope::new(["mcp-quick", "mcp-slow"]).unwrap();
    let status = ScopedStatus::new(&host, &scope);
    let out = bridge::search_with_status(&assembly, &json!({"query": "zzzz qqqq"}), Some(&status))
        .unwrap();
    let note = out["note"].as_str().unwrap().to_lowercase();
    assert!(note.contains("server slow is still connecting"), "{note}");
    assert!(!note.contains("off") && !note.contains("broken"), "{note}");
    host.shutdown().await;
}
