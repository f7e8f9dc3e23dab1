//! Every error answer of `/v1` and `/mcp` has the JSON error shape
//! `{"error", "message"}`, including the ones the MCP transport and the
//! body limit make themselves: a request `/mcp` cannot take, a body over
//! `serve.max_body_bytes` (413), a request target over
//! `serve.max_uri_bytes` (414) and headers over `serve.max_header_bytes`
//! (431), on `/v1` and `/mcp` alike and before authentication.

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

#[tokio::test(flavor = "multi_thread")]
async fn long_targets_and_large_headers_are_json_and_name_their_limit() {
    let fixture = Fixture::new();
    let config = fixture.config(
        "http://127.0.0.1:9",
        "serve:\n  max_uri_bytes: 1024\n  max_header_bytes: 2048\n",
    );
    let daemon = TestDaemon::start(&config, &fixture.state());

    for path in ["/v1/health", "/mcp"] {
        let long = format!("{path}?q={}", "a".repeat(2000));
        let response = daemon.request(Method::GET, &long).send().await.unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 414, "{error}");
        assert_eq!(error["error"], "uri_too_long", "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("serve.max_uri_bytes"),
            "{error}"
        );

        let response = daemon
            .request(Method::GET, path)
            .header("x-padding", "p".repeat(4000))
            .send()
            .await
            .unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 431, "{error}");
        assert_eq!(error["error"], "headers_too_large", "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("serve.max_header_bytes"),
            "{error}"
        );
    }

    // Within the limits the same daemon answers as usual.
    let response = daemon
        .request(Method::GET, "/v1/health")
        .header("x-padding", "p".repeat(1000))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}
