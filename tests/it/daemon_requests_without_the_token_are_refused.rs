//! Every request to the daemon needs its bearer token: none, a wrong one or
//! another scheme gets 401 with a JSON error (API and MCP gateway alike), a
//! gateway client's token opens `/mcp` only, and the token file is made
//! once, readable by its owner only.

use quiver_tests::daemon;

use std::os::unix::fs::PermissionsExt;

use daemon::{Fixture, TestDaemon};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn requests_without_the_token_are_refused() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let mut daemon = TestDaemon::start(&config, &fixture.state());
    let http = reqwest::Client::new();
    let paths = [
        "/v1/health",
        "/v1/status",
        "/v1/sessions",
        "/v1/approvals",
        "/v1/events",
        "/mcp",
        "/nowhere",
    ];
    for path in paths {
        for header in [
            None,
            Some("Bearer wrong"),
            Some(format!("Basic {}", daemon.token).as_str()),
        ] {
            let mut request = http.get(format!("{}{path}", daemon.url));
            if let Some(header) = header {
                request = request.header("authorization", header);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status().as_u16(), 401, "{path} with {header:?}");
            assert!(response.headers().contains_key("www-authenticate"));
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(body["error"], "unauthorized", "{path}");
        }
    }
    let response = http
        .post(format!("{}/v1/sessions", daemon.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert!(
        daemon.get("/v1/sessions").await.1["sessions"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // With the token.
    let (status, health) = daemon.get("/v1/health").await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));
    let (status, missing) = daemon.get("/nowhere").await;
    assert_eq!(
        (status, missing["error"].as_str()),
        (404, Some("not_found"))
    );

    // A gateway client's token opens /mcp only.
    let (_, client) = daemon
        .post(
            "/v1/gateway/clients",
            json!({"name": "ci", "grants": ["plugin-text"]}),
        )
        .await;
    let client_token = client["token"].as_str().unwrap();
    let response = http
        .get(format!("{}/v1/status", daemon.url))
        .bearer_auth(client_token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    // Removed, it opens nothing.
    let response = http
        .delete(format!("{}/v1/gateway/clients/ci", daemon.url))
        .bearer_auth(&daemon.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    let response = http
        .post(format!("{}/mcp", daemon.url))
        .bearer_auth(client_token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);

    // The token file: mode 0600, and the same token after a restart.
    let token_file = fixture.state().join("token");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = daemon.token.clone();
    daemon.stop();
    let daemon = TestDaemon::start(&config, &fixture.state());
    assert_eq!(daemon.token, token);
    assert_eq!(daemon.get("/v1/health").await.0, 200);
}
