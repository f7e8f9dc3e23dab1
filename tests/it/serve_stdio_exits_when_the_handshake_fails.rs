//! `quiver serve --stdio` whose client never sends `initialize` (it sends
//! something else, then goes away) exits non-zero, naming the failed
//! handshake, and ends the MCP servers it started rather than leaving them
//! behind.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn a_failed_handshake_ends_the_process_and_its_servers() {
    let temp = tempfile::tempdir().unwrap();
    let pid_file = temp.path().join("grandchild.pid");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  test:\n    command: {}\n    args: [--spawn-grandchild, {}]\ncore_tools:\n  workspace: {}\n",
            quiver_tests::mcp_test_server().display(),
            pid_file.display(),
            temp.path().display()
        ),
    )
    .unwrap();
    let mut child = quiver_tests::quiver_command()
        .args(["serve", "--stdio", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(temp.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server starts a `sleep` in its process group: it outlives a
    // server that merely loses its stdin, and only ending the group ends it.
    assert!(quiver_tests::wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty())
    }));
    let grandchild: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Not an MCP client: a line that is no JSON-RPC, then end of input.
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "hello, is this the daemon?").unwrap();
    drop(stdin);

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            let output = child.wait_with_output().unwrap();
            panic!(
                "serve --stdio still runs after a failed handshake: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("MCP handshake on stdio failed"), "{stderr}");
    assert!(
        quiver_tests::wait_until(Duration::from_secs(10), || quiver_tests::process_is_gone(
            grandchild
        )),
        "the MCP server's process group (sleep {grandchild}) outlived serve --stdio"
    );
}
