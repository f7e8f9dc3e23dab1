//! A server that dies (kill -9, or a tool that ends the process): the call
//! in flight gets a clear error, the server's tools leave the catalog,
//! the host reconnects with backoff and the tools come back.

use quiver_tests::mcp;

use std::sync::Arc;

use quiver_mcp::ServerState;
use serde_json::Map;

fn read_pid(path: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_server_reconnects_and_its_tools_return() {
    let pid_file = quiver_tests::scratch_path("crash.pid");
    // A longer first pause than `fast_options`, so that the window in which
    // the tools are out of the catalog is easy to observe.
    let registry = Arc::new(quiver_tool::registry::ToolRegistry::new());
    let mut options = mcp::fast_options();
    options.backoff.initial = std::time::Duration::from_millis(500);
    let host = quiver_mcp::McpHost::start(
        registry.clone(),
        vec![mcp::test_server(
            "fragile",
            &["--pid-file", pid_file.to_str().unwrap()],
        )],
        options,
    );
    let host = Arc::new(host);
    mcp::ready(&host, "fragile").await;
    let first_pid = read_pid(&pid_file).expect("the server wrote its pid");

    // A call in flight when the server is killed.
    let in_flight = tokio::spawn({
        let host = host.clone();
        async move { host.call("fragile", "hang", Map::new()).await }
    });
    // `stats` counts every call, itself included: 2 means `hang` is running.
    let deadline = tokio::time::Instant::now() + mcp::DEADLINE;
    loop {
        let stats = host.call("fragile", "stats", Map::new()).await.unwrap();
        if stats.structured_content.unwrap()["calls"].as_u64().unwrap() >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hanging call never reached the server"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-9", &first_pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());

    let error = in_flight.await.unwrap().unwrap_err();
    assert_eq!(error.code(), "server_disconnected", "{error}");
    assert!(
        error.to_string().contains("`fragile`") && error.to_string().contains("`hang`"),
        "{error}"
    );

    mcp::eventually("the dead server's tools left the catalog", || {
        mcp::deferred_names(&mcp::assemble(&registry), "fragile").is_empty()
            || host.server_status("fragile").unwrap().reconnects > 0
    })
    .await;
    mcp::eventually("the server reconnected", || {
        let status = host.server_status("fragile").unwrap();
        status.reconnects >= 1 && matches!(status.state, ServerState::Ready { .. })
    })
    .await;
    let second_pid = read_pid(&pid_file).unwrap();
    assert_ne!(first_pid, second_pid, "a new process serves");
    assert!(!mcp::deferred_names(&mcp::assemble(&registry), "fragile").is_empty());
    assert_eq!(
        host.call(
            "fragile",
            "echo",
            serde_json::json!({"text": "back"})
                .as_object()
                .cloned()
                .unwrap()
        )
        .await
        .unwrap()
        .text(),
        "back"
    );

    // A tool that ends the process: its own call fails clearly, and the
    // server comes back again.
    let error = host.call("fragile", "crash", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "server_disconnected", "{error}");
    mcp::eventually("the server reconnected after the crash", || {
        let status = host.server_status("fragile").unwrap();
        status.reconnects >= 2 && matches!(status.state, ServerState::Ready { .. })
    })
    .await;
    host.shutdown().await;
    let _ = std::fs::remove_file(&pid_file);
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_leave_the_catalog_while_the_server_is_down() {
    // A server that cannot start at all never adds tools, and calls say why.
    let (registry, host) = mcp::start(vec![quiver_mcp::McpServerConfig::stdio(
        "missing",
        "/nonexistent/quiver-no-such-server",
        vec![],
    )]);
    mcp::eventually("the spawn failure is reported", || {
        matches!(
            host.server_status("missing").unwrap().state,
            ServerState::Failed { .. }
        )
    })
    .await;
    let status = host.server_status("missing").unwrap();
    match &status.state {
        ServerState::Failed { error, .. } => assert!(error.contains("cannot start"), "{error}"),
        other => panic!("{other:?}"),
    }
    assert!(registry.snapshot().is_empty());
    let error = host.call("missing", "x", Map::new()).await.unwrap_err();
    assert_eq!(error.code(), "server_not_connected");
    assert!(error.to_string().contains("`missing`"), "{error}");
    host.shutdown().await;
}
