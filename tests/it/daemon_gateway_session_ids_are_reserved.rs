//! Gateway sessions (`gateway-NAME`) are the MCP gateway's own: a session
//! made through the API may not take such an id, a gateway client may not
//! be named like the gateway's own clients (`stdio`, `daemon`), and a
//! client's changed grant is stored with its session.

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

/// Connects to `/mcp` with `token` and lists the tools, which opens the
/// client's gateway session.
async fn list_tools_as(daemon: &TestDaemon, token: &str) {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
            .auth_header(token.to_owned()),
    );
    let client = ().serve(transport).await.unwrap();
    client.list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
}

async fn add_client(daemon: &TestDaemon, name: &str, grants: &[&str]) -> String {
    let (status, created) = daemon
        .post(
            "/v1/gateway/clients",
            json!({"name": name, "grants": grants}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created["token"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_sessions_belong_to_their_clients() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    // A chat session cannot take a gateway client's id.
    let (status, refused) = daemon
        .post("/v1/sessions", json!({"id": "gateway-foo"}))
        .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"], "bad_request");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("`gateway-foo`") && message.contains("gateway-"),
        "{message}"
    );
    assert_eq!(daemon.get("/v1/sessions/gateway-foo").await.0, 404);

    // Nor can a gateway client share the gateway's own sessions.
    for reserved in ["stdio", "daemon"] {
        let (status, refused) = daemon
            .post(
                "/v1/gateway/clients",
                json!({"name": reserved, "grants": ["core"]}),
            )
            .await;
        assert_eq!(status, 400, "{reserved}: {refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(reserved),
            "{refused}"
        );
    }

    // A client's changed grant is stored with its session.
    let token = add_client(&daemon, "foo", &["plugin-text"]).await;
    list_tools_as(&daemon, &token).await;
    let (status, session) = daemon.get("/v1/sessions/gateway-foo").await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["session"]["kind"], "gateway");
    assert_eq!(session["session"]["grants"], json!(["plugin-text"]));

    let deleted = daemon
        .request(reqwest::Method::DELETE, "/v1/gateway/clients/foo")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 204);
    let token = add_client(&daemon, "foo", &["core"]).await;
    list_tools_as(&daemon, &token).await;
    let (_, session) = daemon.get("/v1/sessions/gateway-foo").await;
    assert_eq!(session["session"]["grants"], json!(["core"]));
}
