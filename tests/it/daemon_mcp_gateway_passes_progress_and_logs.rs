//! A gateway client that calls a slow upstream tool hears its progress:
//! each `notifications/progress` the MCP server sends for the call reaches
//! the client under the client's own progress token, in order, whether the
//! tool is called directly or through `tool_call`. What the server logs
//! (`notifications/message`) lands in the daemon's log, naming the server.

use std::sync::{Arc, Mutex};

use quiver_tests::daemon::Fixture;
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// A client that keeps every progress notification it hears.
#[derive(Clone, Default)]
struct Listener {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Listener {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// `quiver serve --stdio` with the test server started `--chatty`, its
/// stderr kept for the log checks.
async fn gateway(
    fixture: &Fixture,
    extra: &str,
) -> (
    RunningService<RoleClient, Listener>,
    Listener,
    tokio::process::ChildStderr,
) {
    let config = fixture.test_servers_config("chatty.yaml", &[("chatty", &["--chatty"])], extra);
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", "*", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state());
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let listener = Listener::default();
    let client = listener.clone().serve(transport).await.unwrap();
    (client, listener, stderr.unwrap())
}

async fn call(
    client: &RunningService<RoleClient, Listener>,
    name: &str,
    arguments: Value,
) -> Value {
    let mut request = CallToolRequestParams::new(name.to_owned());
    request.arguments = arguments.as_object().cloned();
    serde_json::to_value(client.call_tool(request).await.unwrap()).unwrap()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Calls until the server is connected (bounded): a call while it connects
/// answers `server_connecting`.
async fn call_when_ready(
    client: &RunningService<RoleClient, Listener>,
    name: &str,
    arguments: Value,
) -> Value {
    for _ in 0..300 {
        let result = call(client, name, arguments.clone()).await;
        if !text(&result).contains("server_connecting") && !text(&result).contains("unknown_tool") {
            return result;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{name} never became callable");
}

/// Waits (bounded) until the client has heard `steps` reports, then checks
/// them. Quiver sends every report before the answer, but the client's
/// rmcp runs each notification handler on a task of its own, so the last
/// ones can reach `on_progress` after `call_tool` returned.
async fn assert_counted(listener: &Listener, steps: usize) {
    for _ in 0..200 {
        if listener.progress.lock().unwrap().len() >= steps {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut progress = std::mem::take(&mut *listener.progress.lock().unwrap());
    // Handler tasks may also run out of order on the client.
    progress.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    let seen: Vec<(f64, Option<f64>, Option<String>)> = progress
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    let expected: Vec<(f64, Option<f64>, Option<String>)> = (1..=steps)
        .map(|step| {
            (
                step as f64,
                Some(steps as f64),
                Some(format!("step {step} of {steps}")),
            )
        })
        .collect();
    assert_eq!(seen, expected);
    // One call, one token: the client's own.
    let tokens: std::collections::BTreeSet<String> = progress
        .iter()
        .map(|p| format!("{:?}", p.progress_token))
        .collect();
    assert!(tokens.len() <= 1, "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_of_a_deferred_tool_reaches_the_client_through_tool_call() {
    let fixture = Fixture::new();
    let (client, listener, _stderr) =
        gateway(&fixture, "tools:\n  tool_search:\n    enabled: on\n").await;
    let result = call_when_ready(
        &client,
        "tool_call",
        json!({"name": "mcp_chatty_count_up", "arguments": {"steps": 5}}),
    )
    .await;
    assert!(text(&result).contains("counted 5"), "{result}");
    assert_counted(&listener, 5).await;

    // A call that reports nothing sends nothing.
    let result = call(
        &client,
        "tool_call",
        json!({"name": "mcp_chatty_count_up", "arguments": {"steps": 0}}),
    )
    .await;
    assert!(text(&result).contains("counted 0"), "{result}");
    assert_counted(&listener, 0).await;
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_of_a_directly_sent_tool_and_server_logs_reach_their_places() {
    let fixture = Fixture::new();
    let (client, listener, mut stderr) =
        gateway(&fixture, "tools:\n  tool_search:\n    enabled: off\n").await;
    let result = call_when_ready(&client, "mcp_chatty_count_up", json!({"steps": 3})).await;
    assert_eq!(text(&result), "counted 3", "{result}");
    assert_counted(&listener, 3).await;

    let said = call(
        &client,
        "mcp_chatty_say",
        json!({"level": "warning", "text": "disk nearly full on the test server"}),
    )
    .await;
    assert_eq!(text(&said), "said", "{said}");
    client.cancel().await.unwrap();
    let mut log = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        stderr.read_to_string(&mut log),
    )
    .await
    .expect("the daemon ends when its client leaves")
    .unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("disk nearly full on the test server"))
        .unwrap_or_else(|| panic!("the server's log message is not in the log:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("server=\"chatty\"") || line.contains("server=chatty"),
        "{line}"
    );
    assert!(line.contains("test-logger"), "{line}");
}
