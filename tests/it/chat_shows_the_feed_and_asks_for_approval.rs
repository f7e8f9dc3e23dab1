//! `quiver chat` on a terminal: a message runs a turn against the
//! configured model, its text printed as it streams, the activity feed is
//! shown as it happens with the real
//! tool names, a call needing approval is asked on the terminal and
//! answered there, and the session is stored for later.

use quiver_tests::daemon;
use quiver_tests::model;

use std::io::Write;
use std::process::{Child, Command, Stdio};

use daemon::Fixture;
use model::ScriptedModel;
use serde_json::json;

/// `quiver chat` on `config`, given `input` and then the end of input.
fn chat(fixture: &Fixture, config: &std::path::Path, input: &[u8]) -> Child {
    let mut child = quiver_tests::quiver_command()
        .arg("chat")
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(fixture.state())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_turns_shows_the_feed_and_asks() {
    let script = json!([{"match": "list and count", "steps": [
        {"content": "Counting first.", "tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "a b"}}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo from-the-shell"}}]},
        {"content": "all done: {{last_tool_result}}"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    // The message, then the answer to the approval prompt; then end of input.
    let child = chat(&fixture, &config, b"please list and count\ny\n");
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stdout.contains("all done:") && stdout.contains("from-the-shell"),
        "{stdout}\n{stderr}"
    );
    // Every step's text is printed as it streams, the answer once.
    assert!(stdout.starts_with("Counting first.\n"), "{stdout}");
    assert_eq!(stdout.matches("all done:").count(), 1, "{stdout}");
    assert!(
        stderr.contains("· word_count via tool_call  ok"),
        "{stderr}"
    );
    assert!(stderr.contains("approve `run_command`"), "{stderr}");
    assert!(
        stderr.contains("· run_command  awaiting approval"),
        "{stderr}"
    );
    assert!(stderr.contains("· run_command  ok"), "{stderr}");

    // The session was stored.
    let store =
        quiver_store::sqlite::SqliteStore::open(&fixture.state().join("quiver.db")).unwrap();
    let sessions = quiver_store::Store::sessions(&store).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].messages, 6);
}

/// Input that ends while a prompt waits denies the call at once, instead
/// of leaving the prompt to wait out `approval.timeout_s`.
#[tokio::test(flavor = "multi_thread")]
async fn end_of_input_at_a_prompt_denies_at_once() {
    let script = json!([{"match": "run it", "steps": [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch ran"}}]},
        {"content": "result: {{last_tool_result}}"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    // Long enough that waiting it out would fail the deadline below.
    let config = fixture.config(&model.base_url, "approval:\n  timeout_s: 600\n");
    let child = chat(&fixture, &config, b"please run it\n");
    let pid = child.id();
    let waited = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(output) = waited else {
        let _ = Command::new("kill").arg(pid.to_string()).status();
        panic!("chat still waits at the prompt after its input ended");
    };
    let output = output.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("approval_denied"), "{stdout}\n{stderr}");
    assert!(!fixture.work().join("ran").exists());
}
