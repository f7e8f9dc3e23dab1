//! Failed model requests are typed errors that name the configured model,
//! the URL, the HTTP status and the server's own message: a refused key
//! (401, never retried), another 4xx (never retried), a 5xx that persists
//! (retried `max_retries` times), a refused connection and one closed
//! without an answer (retried too), and a 2xx body that is no answer.

use quiver_tests::model;

use model::{ScriptedModel, ask};
use quiver_model::{ModelConfig, build};
use serde_json::json;

fn script() -> serde_json::Value {
    json!([
        {"match": "bad request", "steps": [{"status": 400, "error": "tools[0].function.name is invalid"}]},
        {"match": "always down", "steps": [{"status": 503, "error": "upstream unavailable"}]},
        {"match": "garbage", "steps": [{"raw_body": "<html>gateway</html>"}]},
        {"match": "empty object", "steps": [{"raw_body": "{\"id\": \"x\"}"}]},
        {"match": "fine", "steps": [{"content": "fine"}]},
        {"match": "hangs up", "steps": [{"hang_up": true}]},
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_key_is_unauthorized_and_not_retried() {
    let server = ScriptedModel::start(
        &script(),
        &["--require-header", "authorization=Bearer right"],
    );
    let mut config = server.openai("local");
    config.api_key = Some("wrong".into());
    let error = ask(&*build(&config).unwrap(), "fine").await.unwrap_err();
    assert_eq!(error.code(), "unauthorized");
    assert_eq!(error.status(), Some(401));
    assert_eq!(error.model(), "local");
    assert_eq!(
        error.to_string(),
        format!(
            "model `local` ({}/v1/chat/completions) refused the request: HTTP 401: \
             missing or wrong `authorization` header; check its api_key and headers",
            server.base_url
        )
    );
    assert_eq!(server.requests().await.len(), 1, "a 401 is not retried");

    // The Anthropic error format gives its message too.
    let server = ScriptedModel::start(&script(), &["--require-header", "x-api-key=right"]);
    let error = ask(&*build(&server.anthropic("claude")).unwrap(), "fine")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "unauthorized");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("model `claude` ({}/v1/messages)", server.base_url))
            && text.contains("HTTP 401: missing or wrong `x-api-key` header"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn client_errors_are_not_retried_and_server_errors_are() {
    let server = ScriptedModel::start(&script(), &[]);
    let provider = build(&server.openai("local")).unwrap();

    let error = ask(&*provider, "bad request").await.unwrap_err();
    assert_eq!(error.code(), "http_error");
    assert_eq!(
        error.to_string(),
        format!(
            "model `local` ({}/v1/chat/completions): HTTP 400: tools[0].function.name is invalid",
            server.base_url
        )
    );
    assert_eq!(server.requests().await.len(), 1);

    let error = ask(&*provider, "always down").await.unwrap_err();
    assert_eq!(error.status(), Some(503));
    assert!(
        error
            .to_string()
            .ends_with("HTTP 503 after 3 attempts: upstream unavailable"),
        "{error}"
    );
    assert_eq!(server.requests().await.len(), 1 + 3, "two retries");

    let mut once = server.anthropic("claude");
    once.max_retries = 0;
    let error = ask(&*build(&once).unwrap(), "always down")
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("HTTP 503: upstream unavailable"),
        "{error}"
    );
    assert_eq!(server.requests().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_connection_is_retried_then_named() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = ModelConfig::new(
        "gone",
        quiver_model::ProviderKind::OpenAi,
        format!("http://127.0.0.1:{port}/v1"),
        "m",
    );
    config.retry_backoff = std::time::Duration::from_millis(20);
    let error = ask(&*build(&config).unwrap(), "fine").await.unwrap_err();
    assert_eq!(error.code(), "transport_error");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "model `gone` (http://127.0.0.1:{port}/v1/chat/completions): cannot connect: "
        )) && text.ends_with("after 3 attempts"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_closed_without_an_answer_is_retried_then_named() {
    let server = ScriptedModel::start(&script(), &[]);
    let error = ask(&*build(&server.anthropic("claude")).unwrap(), "hangs up")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "transport_error");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "model `claude` ({}/v1/messages): the exchange failed: ",
            server.base_url
        )) && text.ends_with("after 3 attempts"),
        "{text}"
    );
    assert_eq!(server.requests().await.len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_is_no_answer_is_malformed() {
    let server = ScriptedModel::start(&script(), &[]);
    let provider = build(&server.openai("local")).unwrap();
    let error = ask(&*provider, "garbage").await.unwrap_err();
    assert_eq!(error.code(), "malformed_response");
    let text = error.to_string();
    assert!(
        text.contains("model `local`")
            && text.contains("the body is not JSON")
            && text.contains("<html>gateway</html>"),
        "{text}"
    );
    let error = ask(&*provider, "empty object").await.unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("sent a malformed response: no `choices[0]` in the answer"),
        "{error}"
    );
    let anthropic = build(&server.anthropic("claude")).unwrap();
    let error = ask(&*anthropic, "empty object").await.unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("no `content` list in the answer"),
        "{error}"
    );
    assert_eq!(
        server.requests().await.len(),
        3,
        "malformed answers are not retried"
    );
}
