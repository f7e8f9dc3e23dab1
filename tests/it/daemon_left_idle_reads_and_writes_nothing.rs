//! A daemon left idle reads and writes nothing: none of its background
//! work (the savings sampler, the session sweep, the plugin watcher, MCP
//! supervision) touches a file, a socket or a pipe while nothing happens.
//! Counted by the kernel (`rchar`, `wchar` in `/proc/PID/io`).

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};

fn io(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    (field("rchar:"), field("wchar:"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_daemon_reads_and_writes_nothing() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;
    // Past the start (the MCP server's first listing, the startup lines).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = io(daemon.pid());
    // Longer than any period the daemon keeps (the savings sampler's 10 s).
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(io(daemon.pid()), before, "(rchar, wchar) of an idle daemon");
}
