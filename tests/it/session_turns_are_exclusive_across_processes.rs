//! One session runs one turn at a time even across processes on the same
//! state directory: while the daemon runs a turn of a session, `quiver chat
//! --session` on it is told a turn is running (and stores nothing), and
//! once the turn has ended it can go on.

use quiver_tests::daemon;
use quiver_tests::model;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

/// `quiver chat --session SESSION` given one line; its stdout and stderr.
fn chat(state: &Path, config: &Path, session: &str, line: &str) -> (String, String) {
    let mut child = quiver_tests::quiver_command()
        .args(["chat", "--session", session, "--config"])
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{line}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_waits_for_the_sessions_turn() {
    // One conversation (the model matches the session's first message):
    // the slow answer, then the quick one of the second turn.
    let script = json!([
        {"match": "slowly", "steps": [
            {"content": "done slowly", "delay_ms": 4000},
            {"content": "done quickly"}
        ]}
    ]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = Arc::new(TestDaemon::start(&config, &fixture.state()));
    let session = daemon.session(json!({})).await;

    let slow = tokio::spawn({
        let daemon = daemon.clone();
        let session = session.clone();
        async move { daemon.say(&session, "answer slowly").await }
    });
    // The daemon's turn is running once the model has its request.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while model.requests().await.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (stdout, stderr) = tokio::task::spawn_blocking({
        let (state, config, session) = (fixture.state(), config.clone(), session.clone());
        move || chat(&state, &config, &session, "answer quickly")
    })
    .await
    .unwrap();
    assert!(
        stderr.contains(&format!("a turn is already running in session `{session}`")),
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("done quickly"), "{stdout}");

    let outcome = slow.await.unwrap();
    assert_eq!(outcome["reply"], "done slowly");
    let (stdout, stderr) = chat(&fixture.state(), &config, &session, "answer quickly");
    assert!(stdout.contains("done quickly"), "{stdout}\n{stderr}");
    // The session holds both turns, whole: two questions, two answers.
    assert_eq!(
        daemon.stored_roles(&session).await,
        ["user", "assistant", "user", "assistant"]
    );
}
