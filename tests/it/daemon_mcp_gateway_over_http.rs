//! The MCP gateway at `/mcp`, driven by rmcp clients over Streamable HTTP:
//! a client sees the assembled view of its grant (core tools, the bridge
//! with the listing), calls run through the chain, a gateway client's own
//! token sees nothing outside its grant, and `tools/list_changed` reaches
//! both an initialized session and a `subscriptions/listen` stream when a
//! plugin is added.

use quiver_tests::daemon;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A legacy-lifecycle client that counts `tools/list_changed`.
#[derive(Clone, Default)]
struct Counting {
    changed: Arc<AtomicUsize>,
    notify: Arc<Notify>,
}

impl ClientHandler for Counting {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("gateway-test", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

fn transport(daemon: &TestDaemon, token: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
            .auth_header(token.to_owned()),
    )
}

async fn names<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

async fn search_description<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> String {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "tool_search")
        .and_then(|t| t.description.map(|d| d.to_string()))
        .unwrap()
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    params
}

#[tokio::test(flavor = "multi_thread")]
async fn gateway_clients_see_their_grant_and_hear_list_changes() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    for _ in 0..300 {
        if daemon.get("/v1/status").await.1["mcp_servers"][0]["state"] == "ready" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The daemon's own token: `gateway.grants` (everything).
    let counting = Counting::default();
    let admin = counting
        .clone()
        .serve(transport(&daemon, &daemon.token))
        .await
        .unwrap();
    assert_eq!(
        names(&admin).await,
        [
            "list_dir",
            "read_file",
            "run_command",
            "search_files",
            "tool_call",
            "tool_describe",
            "tool_search",
            "write_file"
        ]
    );
    let listing = search_description(&admin).await;
    assert!(
        listing.contains("word_count") && listing.contains("mcp_test_echo"),
        "{listing}"
    );
    let counted = admin
        .call_tool(call(
            "tool_call",
            json!({"name": "word_count", "arguments": {"text": "a b c d"}}),
        ))
        .await
        .unwrap();
    assert_ne!(counted.is_error, Some(true), "{counted:?}");
    assert_eq!(counted.structured_content.unwrap()["words"], 4);
    let echoed = admin
        .call_tool(call(
            "tool_call",
            json!({"name": "mcp_test_echo", "arguments": {"text": "through the gateway"}}),
        ))
        .await
        .unwrap();
    assert!(format!("{:?}", echoed.content).contains("through the gateway"));

    // A newer client listening on a subscription stream.
    let modern = ClientConfig::default()
        .serve_with_lifecycle(
            transport(&daemon, &daemon.token),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let mut subscription = modern
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();

    // A gateway client with its own token, granted only the text plugin.
    let (status, created) = daemon
        .post(
            "/v1/gateway/clients",
            json!({"name": "limited", "grants": ["plugin-text"]}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_owned();
    let limited = ().serve(transport(&daemon, &token)).await.unwrap();
    assert_eq!(
        names(&limited).await,
        ["tool_call", "tool_describe", "tool_search"]
    );
    let listing = search_description(&limited).await;
    assert!(listing.contains("word_count"), "{listing}");
    assert!(!listing.contains("mcp_test"), "{listing}");
    let refused = limited
        .call_tool(call(
            "tool_call",
            json!({"name": "mcp_test_echo", "arguments": {"text": "x"}}),
        ))
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        format!("{:?}", refused.content).contains("not_available"),
        "{refused:?}"
    );
    let refused = limited
        .call_tool(call("read_file", json!({"path": "x"})))
        .await
        .unwrap();
    assert_eq!(
        refused.is_error,
        Some(true),
        "core tools are outside the grant"
    );

    // A plugin arrives: both admin clients are told, and see it listed.
    quiver_tests::install_plugin(
        &quiver_tests::plugin_so("echo_v1"),
        &fixture.plugins(),
        "echo.so",
    );
    tokio::time::timeout(Duration::from_secs(20), counting.notify.notified())
        .await
        .expect("no tools/list_changed on the initialized session");
    let notification = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("no notification on the subscription")
        .unwrap()
        .unwrap();
    assert!(matches!(
        notification,
        ServerNotification::ToolListChangedNotification(_)
    ));
    let listing = search_description(&admin).await;
    assert!(listing.contains("echo"), "{listing}");
    // Told once searches see it: the first search after the notice finds
    // the new tool (its segment was built in the background first).
    let found = admin
        .call_tool(call(
            "tool_search",
            json!({"query": "echoes its arguments back with the plugin version"}),
        ))
        .await
        .unwrap();
    let text = serde_json::to_value(&found.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let found: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(found["matches"][0]["name"], "echo", "{found}");

    // Calls are recorded in the gateway clients' own sessions.
    let (_, sessions) = daemon.get("/v1/sessions").await;
    let ids: Vec<&str> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"gateway-daemon") && ids.contains(&"gateway-limited"),
        "{ids:?}"
    );
    let events = daemon
        .events(
            "/v1/sessions/gateway-daemon/events?after=0",
            2,
            Duration::from_secs(10),
        )
        .await;
    let tools: Vec<&str> = events.iter().map(|e| e["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["word_count", "mcp_test_echo"]);

    subscription.cancel().await.ok();
    admin.cancel().await.ok();
    modern.cancel().await.ok();
    limited.cancel().await.ok();
}
