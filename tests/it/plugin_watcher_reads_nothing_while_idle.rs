//! The plugin watcher reads a file once per real change: reads of plugin
//! files (another process hashing them, or the daemon's own load after a
//! hot add) read nothing again, and a file refused for a duplicate plugin
//! name is not copied or opened again while nothing changes.

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::{install_plugin, plugin_so};
use serde_json::Value;

fn reads(status: &Value) -> Vec<(String, u64)> {
    status["plugins"]["plugins"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|p| {
            let file = p["file"].as_str().unwrap_or_default();
            let name = file.rsplit('/').next().unwrap_or_default().to_owned();
            (name, p["reads"].as_u64().unwrap_or(0))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_daemon_reads_no_plugin_file_again() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    install_plugin(&plugin_so("echo_v1"), &fixture.plugins(), "echo.so");
    install_plugin(&plugin_so("echo_v1"), &fixture.plugins(), "echo_again.so");
    let mut status = Value::Null;
    for _ in 0..200 {
        status = daemon.get("/v1/status").await.1;
        if reads(&status).len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reads(&status).len(), 3, "{status}");
    // Another process reads (hashes) every plugin file a few times.
    for _ in 0..3 {
        for name in ["echo.so", "echo_again.so", "text.so"] {
            std::fs::read(fixture.plugins().join(name)).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Several debounce periods (200 ms) with nothing changing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let status = daemon.get("/v1/status").await.1;
    let counted = reads(&status);
    assert_eq!(
        counted,
        vec![
            ("echo.so".to_owned(), 1),
            ("echo_again.so".to_owned(), 1),
            ("text.so".to_owned(), 1),
        ],
        "{status}"
    );
    let again = status["plugins"]["plugins"][1]["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(again.contains("already loaded from"), "{status}");
    // Two copies only: the refused duplicate's copy was removed.
    let copies = std::fs::read_dir(fixture.state().join("plugins"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".so"))
        .count();
    assert_eq!(copies, 2);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(reads(&daemon.get("/v1/status").await.1), counted);
}
