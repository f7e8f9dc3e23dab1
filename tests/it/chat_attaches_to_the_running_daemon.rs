//! `quiver chat` on a state directory a `quiver serve` runs on attaches to
//! that daemon through its API instead of starting its own runtime: the
//! turn runs in the daemon (its live feed shows the chat's tool calls, its
//! approval queue holds the chat's approval, answered from the chat's
//! input and recorded as answered by `quiver chat`), the text streams to
//! stdout, and the session is the daemon's.
//! Without a daemon, chat runs locally as before (the other chat tests).

use quiver_tests::daemon;
use quiver_tests::model;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use daemon::{Fixture, TestDaemon, read_named_events};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_its_turns_in_the_running_daemon_and_answers_its_approvals() {
    let script = json!([{"match": "make the file", "steps": [
        {"content": "Running it.", "tool_calls": [{"name": "run_command", "arguments": {"command": "echo attached > made.txt && echo made-it"}}]},
        {"content": "all done: {{last_tool_result}}"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    // The daemon's own live feed: a chat running locally would not show here.
    let feed = daemon.open_events("/v1/events").await;
    let feed = tokio::spawn(read_named_events(
        feed,
        Duration::from_secs(60),
        |_, data| data["tool"] == "run_command" && data["status"] == "ok",
    ));

    let mut child = quiver_tests::quiver_command()
        .arg("chat")
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The message, the answer to its approval prompt, then the end of input.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"please make the file\ny\n")
        .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("attached to the daemon at {}", daemon.url)),
        "{stderr}"
    );
    assert!(stderr.contains("approve `run_command`"), "{stderr}");
    assert!(
        stderr.contains("· run_command  awaiting approval") && stderr.contains("· run_command  ok"),
        "{stderr}"
    );
    // Both steps' text, as it streamed, then nothing printed twice.
    assert!(stdout.starts_with("Running it.\n"), "{stdout}");
    assert!(
        stdout.contains("all done:") && stdout.contains("made-it"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("all done:").count(), 1, "{stdout}");
    assert_eq!(
        std::fs::read_to_string(fixture.work().join("made.txt")).unwrap(),
        "attached\n"
    );

    // The daemon ran the call and asked for its approval.
    let fed = feed.await.unwrap();
    let statuses: Vec<&str> = fed
        .iter()
        .filter(|(_, d)| d["tool"] == "run_command")
        .filter_map(|(_, d)| d["status"].as_str())
        .collect();
    assert_eq!(statuses, ["awaiting_approval", "ok"], "{fed:?}");
    let session = fed[0].1["session"].as_str().unwrap().to_owned();
    assert!(stderr.contains(&format!("session {session}")), "{stderr}");
    let (_, approvals) = daemon.get("/v1/approvals").await;
    assert_eq!(approvals["approvals"], json!([]), "nothing left waiting");
    assert_eq!(
        approvals["answered"][0]["answered_by"], "quiver chat",
        "{approvals}"
    );
    let outcome = fed
        .iter()
        .find(|(_, d)| d["tool"] == "run_command" && d["status"] == "ok")
        .unwrap();
    assert_eq!(outcome.1["answered_by"], "quiver chat", "{fed:?}");
    assert_eq!(
        daemon.stored_roles(&session).await,
        ["user", "assistant", "tool", "assistant"]
    );
}
