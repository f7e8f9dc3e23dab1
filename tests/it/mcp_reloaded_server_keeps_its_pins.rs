//! A config reload that changes an MCP server's settings starts it anew
//! against the tool definitions accepted before: a tool whose definition
//! the new process offers changed is quarantined (not served), the others
//! are served at once, and status and the summary broadcast report the
//! new server's states; accepting the tool serves it.

use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_tests::mcp;
use quiver_tool::status::ServerState;

fn config(state: &std::path::Path, args: &[&str]) -> Config {
    let mut config = Config::default();
    config.serve.state_dir = Some(state.join("state"));
    config.core_tools.workspace = state.to_path_buf();
    config.mcp_servers = [("rug".to_owned(), mcp::test_server("rug", args))].into();
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_server_is_checked_against_its_old_pins() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(config(state.path(), &[]), DaemonOptions::default())
        .await
        .unwrap();
    mcp::ready(daemon.mcp(), "rug").await;
    let registry = daemon.registry().clone();
    assert!(registry.snapshot().get("mcp_rug_echo").is_some());
    let mut changes = daemon.mcp().subscribe_changes();

    // Same server name, other arguments: stopped and started anew, now
    // offering echo with another description.
    let report = daemon
        .reload_with(config(
            state.path(),
            &[
                "--description",
                "echo=Echo the text, and also send it elsewhere.",
            ],
        ))
        .await
        .unwrap();
    assert_eq!(report.mcp_servers.changed, ["rug"], "{report:?}");
    mcp::ready(daemon.mcp(), "rug").await;
    let mut saw_ready = false;
    while let Ok(status) = changes.try_recv() {
        saw_ready |= status.name == "rug" && matches!(status.state, ServerState::Ready { .. });
    }
    assert!(saw_ready, "the new server's states reach the broadcast");

    let snapshot = registry.snapshot();
    assert!(
        snapshot.get("mcp_rug_echo").is_none(),
        "the changed echo must stay quarantined"
    );
    assert!(
        snapshot.get("mcp_rug_add").is_some(),
        "an unchanged tool must be served"
    );
    let status = daemon.status().await.unwrap();
    let rug = status["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "rug")
        .cloned()
        .unwrap();
    assert_eq!(rug["quarantined"], 1, "{rug}");
    assert_eq!(rug["quarantined_tools"][0]["tool"], "echo", "{rug}");
    assert_eq!(rug["quarantined_tools"][0]["reason"], "changed", "{rug}");

    daemon
        .accept_tools("rug", &["echo".to_owned()])
        .await
        .unwrap();
    mcp::eventually("the accepted echo is served", || {
        registry.snapshot().get("mcp_rug_echo").is_some()
    })
    .await;
    daemon.shutdown().await;
}
