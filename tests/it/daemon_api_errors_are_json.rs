//! Every error of the HTTP API is `{"error": code, "message"}` naming what
//! was wrong: a query parameter of the wrong form or an unknown one (a
//! typo is not ignored), a path segment of the wrong form, a method the
//! route does not take, a route that does not exist.

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};
use reqwest::Method;
use serde_json::{Value, json};

async fn call(daemon: &TestDaemon, method: Method, path: &str) -> (u16, Value) {
    let response = daemon
        .request(method, path)
        .json(&json!({"decision": "deny"}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text:?}"));
    (status, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_name_what_was_wrong_in_json() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    let cases = [
        (
            Method::GET,
            "/v1/events?after=yesterday",
            400,
            "bad_query",
            "after",
        ),
        (
            Method::GET,
            "/v1/catalog?context_tokens=lots",
            400,
            "bad_query",
            "context_tokens",
        ),
        // A typo for `grant` is refused, not read as "everything".
        (
            Method::GET,
            "/v1/catalog?grants=core",
            400,
            "bad_query",
            "grants",
        ),
        (
            Method::GET,
            "/v1/approvals?sesion=x",
            400,
            "bad_query",
            "sesion",
        ),
        (Method::POST, "/v1/approvals/abc", 400, "bad_path", "abc"),
        (
            Method::DELETE,
            "/v1/health",
            405,
            "method_not_allowed",
            "DELETE",
        ),
        (
            Method::GET,
            "/v1/nothing-here",
            404,
            "not_found",
            "/v1/nothing-here",
        ),
    ];
    for (method, path, status, code, named) in cases {
        let (got, body) = call(&daemon, method, path).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(code)),
            "{path}: {body}"
        );
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(named), "{path}: {message}");
    }
    // The good forms still work.
    let (status, _) = daemon
        .get("/v1/catalog?grant=core&context_tokens=50000")
        .await;
    assert_eq!(status, 200);
}
