//! A JSON endpoint sent a body without a JSON content type answers `415`
//! with the code `unsupported_media_type` (not `bad_request`), saying what
//! to send; the same body with the content type is accepted.

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};
use reqwest::Method;

#[tokio::test(flavor = "multi_thread")]
async fn a_body_without_a_json_content_type_is_unsupported_media_type() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let mut request = daemon.request(Method::POST, "/v1/sessions").body("{}");
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(status, 415, "{content_type:?}: {body}");
        assert_eq!(body["error"], "unsupported_media_type", "{body}");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("Content-Type: application/json"),
            "{body}"
        );
    }
    let response = daemon
        .request(Method::POST, "/v1/sessions")
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
}
