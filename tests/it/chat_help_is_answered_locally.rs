//! `/help` in `quiver chat` lists the slash commands on the terminal and
//! is never sent to the model.

use quiver_tests::daemon;
use quiver_tests::model;

use std::io::Write;
use std::process::Stdio;

use daemon::Fixture;
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn help_lists_the_commands_and_reaches_no_model() {
    let model = ScriptedModel::start(
        &json!([{"match": "hello", "steps": [{"content": "hi there"}]}]),
        &[],
    );
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
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
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"/help\nhello\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("/help: this list")
            && stderr.contains("/tools:")
            && stderr.contains("/quit"),
        "{stderr}"
    );
    assert_eq!(stdout.trim(), "hi there", "{stderr}");
    // One model request: the message; `/help` never went out.
    let requests = model.requests().await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(!requests[0].to_string().contains("/help"));
}
