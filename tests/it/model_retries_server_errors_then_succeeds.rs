//! A 5xx, a 429 or a connection closed without an answer is retried with
//! backoff, honouring the server's `retry-after`, and the answer that
//! finally comes is returned; both clients do it (529 is Anthropic's
//! "overloaded").

use quiver_tests::model;

use std::time::{Duration, Instant};

use model::{ScriptedModel, ask};
use quiver_model::build;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn server_errors_are_retried_until_an_answer_comes() {
    let script = json!([
        {"match": "flaky", "steps": [{"status": 500, "times": 1, "content": "recovered"}]},
        {"match": "overloaded", "steps": [{"status": 529, "times": 2, "content": "finally"}]},
        {"match": "hang up", "steps": [{"hang_up": true, "times": 1, "content": "answered"}]},
    ]);
    let server = ScriptedModel::start(&script, &[]);

    let openai = build(&server.openai("local")).unwrap();
    assert_eq!(ask(&*openai, "flaky").await.unwrap(), "recovered");
    let sent = server.requests().await;
    assert_eq!(sent.len(), 2, "one failure, one retry");
    assert_eq!(sent[0], sent[1], "the retry sends the same request");

    let anthropic = build(&server.anthropic("claude")).unwrap();
    assert_eq!(ask(&*anthropic, "overloaded").await.unwrap(), "finally");
    assert_eq!(server.requests().await.len(), 2 + 3);

    assert_eq!(ask(&*openai, "hang up").await.unwrap(), "answered");
    assert_eq!(server.requests().await.len(), 5 + 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn rate_limits_wait_as_long_as_retry_after_asks() {
    let script = json!([{"match": "busy", "steps": [
        {"status": 429, "times": 1, "retry_after": 1, "error": "slow down", "content": "served"},
    ]}]);
    let server = ScriptedModel::start(&script, &[]);
    let provider = build(&server.openai("local")).unwrap();
    let started = Instant::now();
    assert_eq!(ask(&*provider, "busy").await.unwrap(), "served");
    // The configured backoff is 50 ms; only `retry-after` explains a second.
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retried after {:?}",
        started.elapsed()
    );
    assert_eq!(server.requests().await.len(), 2);
}
