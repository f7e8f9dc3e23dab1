//! The gateway answers broken requests with the JSON-RPC error a client
//! author can act on, over stdio and Streamable HTTP, driven with raw
//! JSON-RPC (an SDK would refuse to send them): `-32602` naming the field
//! for `tools/call` params that do not fit, `-32700` for a line or body
//! that is not JSON, `-32600` for JSON that is not a message, `-32602` for
//! a `tools/list` cursor it never gave, `-32601` naming an unknown method;
//! a session's DELETE is `204`. Method probes and client cancels are not
//! logged as warnings.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// The requests every transport is sent, by id, with the error code and a
/// part of the message each must be answered with.
fn broken_requests() -> Vec<(Value, i64, &'static str)> {
    vec![
        (
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "tool_search", "arguments": "abc"}}),
            -32602,
            "`arguments` must be an object, not a string",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "tool_search", "arguments": [1]}}),
            -32602,
            "`arguments` must be an object, not an array",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}}),
            -32602,
            "`name` is missing",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": 5}}),
            -32602,
            "`name` must be a string, not a number",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"cursor": "bogus"}}),
            -32602,
            "invalid cursor `bogus`",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 7, "method": "no/such_method"}),
            -32601,
            "no/such_method",
        ),
    ]
}

/// Answers read from stdout, by id.
struct Answers {
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: HashMap<String, Value>,
}

impl Answers {
    /// Reads answers until `id`'s has come (ids as JSON text; `null` for
    /// the parse error).
    async fn answer(&mut self, id: &str) -> Value {
        let read = async {
            while !self.seen.contains_key(id) {
                let line = self.lines.next_line().await.unwrap().expect("stdout ended");
                let value: Value = serde_json::from_str(&line).unwrap();
                self.seen.insert(value["id"].to_string(), value);
            }
            self.seen.remove(id).unwrap()
        };
        tokio::time::timeout(Duration::from_secs(60), read)
            .await
            .unwrap_or_else(|_| panic!("no answer to {id}"))
    }
}

fn check(answer: &Value, code: i64, part: &str) {
    assert_eq!(answer["error"]["code"], json!(code), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(part), "{part:?} not in {answer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_answers_broken_requests_with_the_right_errors() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
    command
        .args(["serve", "--stdio", "--grant", "*", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = Answers {
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
        seen: HashMap::new(),
    };

    let mut input = format!(
        "{INITIALIZE}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    );
    input.push_str("{not json\n");
    for (request, _, _) in broken_requests() {
        input.push_str(&format!("{request}\n"));
    }
    stdin.write_all(input.as_bytes()).await.unwrap();
    assert!(out.answer("1").await["result"]["protocolVersion"].is_string());
    check(&out.answer("null").await, -32700, "parse error");
    for (request, code, part) in broken_requests() {
        check(&out.answer(&request["id"].to_string()).await, code, part);
    }

    // A call cancelled by the client: the MCP server must be up first.
    let mut attempt = 100;
    loop {
        let probe = json!({"jsonrpc": "2.0", "id": attempt, "method": "tools/call", "params": {"name": "tool_call", "arguments": {"name": "mcp_test_stats"}}});
        stdin
            .write_all(format!("{probe}\n").as_bytes())
            .await
            .unwrap();
        let answer = out.answer(&attempt.to_string()).await;
        if answer["result"]["isError"] != json!(true) {
            break;
        }
        assert!(attempt < 400, "the test server never came up: {answer}");
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hang = json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"name": "tool_call", "arguments": {"name": "mcp_test_hang"}}});
    stdin
        .write_all(format!("{hang}\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 50, "reason": "the user moved on"}});
    stdin
        .write_all(format!("{cancel}\n").as_bytes())
        .await
        .unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 51, "method": "ping"});
    stdin
        .write_all(format!("{ping}\n").as_bytes())
        .await
        .unwrap();
    assert!(out.answer("51").await["result"].is_object());

    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("quiver serve --stdio did not end with its input")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && !l.contains("MCP server unavailable"))
        .collect();
    assert!(
        warnings.is_empty(),
        "expected client behaviour was logged as warnings:\n{stderr}"
    );
}

/// POSTs `body` to `/mcp` as a client would: (status, content type, text).
async fn post(daemon: &TestDaemon, session: Option<&str>, body: String) -> (u16, String, String) {
    let mut request = daemon
        .request(reqwest::Method::POST, "/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = response.text().await.unwrap();
    (status, kind, if text.is_empty() { session } else { text })
}

/// The JSON-RPC message of a response body: plain JSON, or the first SSE
/// `data:` line holding one.
fn message(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str(text) {
        return value;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no message in {text:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_answers_broken_requests_with_the_right_errors() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    let (status, kind, text) = post(&daemon, None, "{not json".to_owned()).await;
    assert_eq!((status, kind.as_str()), (400, "application/json"), "{text}");
    check(&serde_json::from_str(&text).unwrap(), -32700, "parse error");
    let (status, _, text) = post(
        &daemon,
        None,
        r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#.to_owned(),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    check(&answer, -32600, "`jsonrpc` must be \"2.0\"");
    assert_eq!(answer["id"], json!(9));

    // A session, then the broken requests in it.
    let response = daemon
        .request(reqwest::Method::POST, "/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("no session id")
        .to_owned();
    assert!(message(&response.text().await.unwrap())["result"].is_object());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(&daemon, Some(&session), initialized.to_string()).await;
    assert_eq!(status, 202);
    for (request, code, part) in broken_requests() {
        let (_, _, text) = post(&daemon, Some(&session), request.to_string()).await;
        let answer = message(&text);
        assert_eq!(answer["id"], request["id"], "{answer}");
        check(&answer, code, part);
    }

    let deleted = daemon
        .request(reqwest::Method::DELETE, "/mcp")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let (status, _, _) = post(
        &daemon,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}).to_string(),
    )
    .await;
    assert_eq!(status, 404, "the deleted session still answers");
}
