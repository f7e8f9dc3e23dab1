//! `quiver status` trusts `daemon.json` only as far as it can check it: a
//! file naming a process that is gone is reported as stale and the status
//! is read here instead; a live process that does not answer is an error
//! (exit non-zero), not a silent fallback that would start a second copy
//! of every MCP server beside a running daemon.

use std::process::Command;

fn status(state: &std::path::Path, config: &std::path::Path) -> std::process::Output {
    quiver_tests::quiver(&[
        "status",
        "--config",
        quiver_tests::arg(config),
        "--state-dir",
        quiver_tests::arg(state),
        "--wait-s",
        "0",
    ])
}

fn write_daemon_file(state: &std::path::Path, pid: u32, url: &str) {
    let token = state.join("token");
    std::fs::write(&token, "not-a-real-token\n").unwrap();
    let body = serde_json::json!({"url": url, "pid": pid, "token_file": token});
    std::fs::write(state.join("daemon.json"), body.to_string()).unwrap();
}

#[test]
fn a_stale_file_is_named_and_a_silent_daemon_is_an_error() {
    let temp = tempfile::tempdir().unwrap();
    let state = temp.path().join("state");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(&state)
        .unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(&config, "core_tools:\n  workspace: .\n").unwrap();

    // A process that has exited.
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    write_daemon_file(&state, gone_pid, "http://127.0.0.1:9");
    let output = status(&state, &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("names process {gone_pid}, which is not running")),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("daemon: not running"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );

    // A live process (this test) at an address where nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    write_daemon_file(&state, std::process::id(), &url);
    let output = status(&state, &config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("is running but did not answer"), "{stderr}");
    assert!(stderr.contains(&url), "{stderr}");
}
