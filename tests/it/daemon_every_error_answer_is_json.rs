//! Every error answer of `/v1` and `/mcp` has the JSON error shape
//! `{"error", "message"}`, including the ones the MCP transport and the
//! body limit make themselves: a request `/mcp` cannot take, a body over
//! `serve.max_body_bytes` (413).

use quiver_tests::daemon::{Fixture, TestDaemon};
use reqwest::Method;
use serde_json::Value;

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = response.text().await.unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "{status} {content_type}: {text}"
    );
    (status, serde_json::from_str(&text).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_and_body_limit_errors_are_json() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "serve:\n  max_body_bytes: 2048\n");
    let daemon = TestDaemon::start(&config, &fixture.state());

    let response = daemon
        .request(Method::POST, "/mcp")
        .header("content-type", "text/plain")
        .body("not json-rpc")
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert!((400..500).contains(&status), "{status} {error}");
    assert!(
        error["error"].is_string() && error["message"].is_string(),
        "{error}"
    );

    let response = daemon
        .request(Method::GET, "/mcp")
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert!((400..500).contains(&status), "{status} {error}");

    let big = format!("{{\"id\": \"{}\"}}", "x".repeat(4096));
    let response = daemon
        .request(Method::POST, "/v1/sessions")
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 413, "{error}");
}
