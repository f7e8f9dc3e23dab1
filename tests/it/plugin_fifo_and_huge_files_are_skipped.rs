//! A FIFO and a 100 GiB sparse file named `*.so` in a plugin directory are
//! skipped with a reason, without reading them: at startup (`quiver call`
//! still answers, the daemon still listens) and when they appear in a
//! watched directory (plugins added after them still load).

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::{arg, install_plugin, plugin_so, quiver_command, wait_until};
use serde_json::Value;

fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

fn huge(path: &std::path::Path) {
    let file = std::fs::File::create(path).unwrap();
    file.set_len(100 << 30).unwrap();
}

fn plugins(status: &Value) -> Vec<Value> {
    status["plugins"]["plugins"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn error_of(status: &Value, file: &str) -> Option<String> {
    plugins(status)
        .iter()
        .find(|p| p["file"].as_str().is_some_and(|f| f.ends_with(file)))
        .and_then(|p| p["last_error"].as_str().map(str::to_owned))
}

#[test]
fn special_files_at_startup_do_not_block_or_kill_the_runtime() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    mkfifo(&dir.join("a_fifo.so"));
    huge(&dir.join("b_huge.so"));
    install_plugin(&plugin_so("echo_v1"), &dir, "c_echo.so");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(&config, "plugins:\n  dirs: [plugins]\n  state_dir: state\n").unwrap();
    let mut child = quiver_command()
        .args([
            "call",
            "tool_call",
            "--config",
            arg(&config),
            "--wait-s",
            "0",
        ])
        .args([
            "--arguments",
            r#"{"name": "echo", "arguments": {"text": "hi"}}"#,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let done = wait_until(Duration::from_secs(60), || {
        child.try_wait().unwrap().is_some()
    });
    if !done {
        let _ = child.kill();
        panic!("quiver call blocked on the FIFO");
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["arguments"]["text"], "hi", "{result}");
    assert!(stderr.contains("a FIFO"), "{stderr}");
    assert!(stderr.contains("max_file_bytes"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn special_files_in_a_watched_dir_are_skipped_while_calls_go_on() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    mkfifo(&fixture.plugins().join("fifo.so"));
    huge(&fixture.plugins().join("huge.so"));
    install_plugin(&plugin_so("echo_v1"), &fixture.plugins(), "later.so");
    let mut status = Value::Null;
    for _ in 0..200 {
        status = daemon.get("/v1/status").await.1;
        let loaded = plugins(&status).iter().any(|p| p["name"] == "echo");
        if loaded
            && error_of(&status, "fifo.so").is_some()
            && error_of(&status, "huge.so").is_some()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        plugins(&status).iter().any(|p| p["name"] == "echo"),
        "{status}"
    );
    let fifo = error_of(&status, "fifo.so").unwrap_or_default();
    assert!(fifo.contains("not a regular file (a FIFO)"), "{status}");
    let huge = error_of(&status, "huge.so").unwrap_or_default();
    assert!(huge.contains("max_file_bytes"), "{status}");
    assert!(plugins(&status).iter().any(|p| p["name"] == "text"));
    let (code, _) = daemon.get("/v1/health").await;
    assert_eq!(code, 200);
}
