//! A stdio server runs in a process group of its own and the whole group
//! is ended: a grandchild it spawned (as `npx`, `uvx` or `sh -c` do) does
//! not outlive shutdown, nor a crash of the server itself. Its stderr goes
//! to the log, not into the protocol.

use quiver_tests::mcp;

use quiver_mcp::ServerState;
use quiver_tests::process_is_gone;
use serde_json::Map;

fn read_pid(path: &std::path::Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_the_grandchild() {
    let grandchild_file = quiver_tests::scratch_path("grandchild.pid");
    let server_file = quiver_tests::scratch_path("server.pid");
    let (_registry, host) = mcp::start(vec![mcp::test_server(
        "wrapper",
        &[
            "--spawn-grandchild",
            grandchild_file.to_str().unwrap(),
            "--pid-file",
            server_file.to_str().unwrap(),
            "--stderr",
            "hello from the test server's stderr",
        ],
    )]);
    mcp::ready(&host, "wrapper").await;
    let grandchild = read_pid(&grandchild_file);
    let server = read_pid(&server_file);
    assert!(
        !process_is_gone(grandchild),
        "the grandchild runs while the server does"
    );
    host.shutdown().await;
    mcp::eventually("the server process is gone", || process_is_gone(server)).await;
    mcp::eventually("the grandchild is gone", || process_is_gone(grandchild)).await;
    let _ = std::fs::remove_file(&grandchild_file);
    let _ = std::fs::remove_file(&server_file);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crash_ends_the_grandchild_before_the_reconnect() {
    let grandchild_file = quiver_tests::scratch_path("grandchild-crash.pid");
    let (_registry, host) = mcp::start(vec![mcp::test_server(
        "wrapper",
        &["--spawn-grandchild", grandchild_file.to_str().unwrap()],
    )]);
    mcp::ready(&host, "wrapper").await;
    let first = read_pid(&grandchild_file);
    let _ = host.call("wrapper", "crash", Map::new()).await;
    mcp::eventually("the first grandchild is gone", || process_is_gone(first)).await;
    mcp::eventually("the server is back", || {
        let status = host.server_status("wrapper").unwrap();
        status.reconnects >= 1 && matches!(status.state, ServerState::Ready { .. })
    })
    .await;
    let second = read_pid(&grandchild_file);
    assert_ne!(first, second);
    host.shutdown().await;
    mcp::eventually("the second grandchild is gone", || process_is_gone(second)).await;
    let _ = std::fs::remove_file(&grandchild_file);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_host_ends_the_group() {
    let grandchild_file = quiver_tests::scratch_path("grandchild-drop.pid");
    let (_registry, host) = mcp::start(vec![mcp::test_server(
        "wrapper",
        &["--spawn-grandchild", grandchild_file.to_str().unwrap()],
    )]);
    mcp::ready(&host, "wrapper").await;
    let grandchild = read_pid(&grandchild_file);
    drop(host);
    mcp::eventually("the grandchild is gone", || process_is_gone(grandchild)).await;
    let _ = std::fs::remove_file(&grandchild_file);
}
