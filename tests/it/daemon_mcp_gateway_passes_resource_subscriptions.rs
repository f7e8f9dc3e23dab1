//! A gateway client subscribes to an upstream server's resource under the
//! gateway's name and hears `notifications/resources/updated` when the
//! server says it changed: a client of a protocol before 2026-07-28 with
//! `resources/subscribe` on its session (over stdio), a newer one by naming
//! the resource in `subscriptions/listen` (over HTTP). The server is asked
//! once however many clients subscribe, and told to stop when the last one
//! unsubscribes or goes; refusals keep the reason; subscriptions are in the
//! feed.

use std::time::Duration;

use quiver_tests::daemon::{Fixture, TestDaemon};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ResourceUpdatedNotificationParam, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const FIRST: &str = "quiver://mcp/notes/test://notes/first";
const SECOND: &str = "quiver://mcp/notes/test://notes/second";

/// A client of protocol 2025-11-25 that passes on each resource update.
#[derive(Clone)]
struct Updates(mpsc::UnboundedSender<String>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("subscription-test", "1.0.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    params
}

/// Runs an upstream tool of `server` through `tool_call`; its text.
async fn run<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    server: &str,
    tool: &str,
    arguments: Value,
) -> CallOutcome {
    let result = client
        .call_tool(call(
            "tool_call",
            json!({"name": format!("mcp_{server}_{tool}"), "arguments": arguments}),
        ))
        .await
        .unwrap();
    CallOutcome {
        ok: result.is_error != Some(true),
        text: serde_json::to_string(&result.content).unwrap(),
        structured: result.structured_content,
    }
}

struct CallOutcome {
    ok: bool,
    text: String,
    structured: Option<Value>,
}

/// Until `server`'s tools can be called (bounded).
async fn wait_for_server<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    server: &str,
) {
    for _ in 0..300 {
        if run(client, server, "stats", json!({})).await.ok {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{server} never connected");
}

/// Until the upstream server holds `held` subscriptions (bounded): an
/// unsubscribe reaches it after the client's own answer.
async fn wait_for_held<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    held: u64,
) {
    let mut last = Value::Null;
    for _ in 0..200 {
        let stats = run(client, "notes", "stats", json!({})).await;
        last = stats.structured.unwrap_or_default();
        if last["subscriptions"] == held {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server never held {held} subscriptions: {last}");
}

async fn next_update(updates: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(20), updates.recv())
        .await
        .expect("no resources/updated within 20 s")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
#[allow(deprecated)] // resources/subscribe is the session path of the earlier protocol versions
async fn a_session_client_subscribes_and_hears_updates_under_the_gateways_names() {
    let fixture = Fixture::new();
    let config = fixture.notes_config();
    let gateway = |name: &str| {
        let mut command = tokio::process::Command::from(quiver_tests::quiver_command());
        command
            .args(["serve", "--stdio", "--config"])
            .arg(&config)
            .arg("--state-dir")
            .arg(fixture.state().join(name));
        TokioChildProcess::new(command).unwrap()
    };
    let (sender, mut updates) = mpsc::unbounded_channel();
    let client = Updates(sender).serve(gateway("one")).await.unwrap();
    let resources = client
        .peer_info()
        .unwrap()
        .capabilities
        .resources
        .clone()
        .unwrap();
    assert_eq!(resources.subscribe, Some(true), "{resources:?}");
    assert_eq!(resources.list_changed, Some(true), "{resources:?}");
    wait_for_server(&client, "notes").await;
    wait_for_server(&client, "plain").await;

    client
        .subscribe(SubscribeRequestParams::new(FIRST))
        .await
        .unwrap();
    // Subscribing twice to the same resource holds one upstream.
    client
        .subscribe(SubscribeRequestParams::new(FIRST))
        .await
        .unwrap();
    wait_for_held(&client, 1).await;
    let touched = run(&client, "notes", "touch_note", json!({"name": "first"})).await;
    assert!(touched.text.contains("touched 1"), "{}", touched.text);
    assert_eq!(next_update(&mut updates).await, FIRST);

    // A resource nobody subscribed to is not held upstream, nor heard.
    let touched = run(&client, "notes", "touch_note", json!({"name": "second"})).await;
    assert!(touched.text.contains("touched 0"), "{}", touched.text);

    // Refusals name why, with the codes a server would give.
    let plain = client
        .subscribe(SubscribeRequestParams::new(
            "quiver://mcp/plain/test://notes/first",
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        plain.contains("offers no resource subscriptions") && plain.contains("-32601"),
        "{plain}"
    );
    let foreign = client
        .subscribe(SubscribeRequestParams::new("test://notes/first"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        foreign.contains("-32002") && foreign.contains("quiver://mcp/SERVER/URI"),
        "{foreign}"
    );
    let refused = client
        .subscribe(SubscribeRequestParams::new(
            "quiver://mcp/notes/other://elsewhere",
        ))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("other://elsewhere"), "{refused}");

    // A second client's subscription to the same resource shares the
    // upstream one; both hear the update.
    let (sender, mut second_updates) = mpsc::unbounded_channel();
    let second = Updates(sender).serve(gateway("two")).await.unwrap();
    wait_for_server(&second, "notes").await;
    second
        .subscribe(SubscribeRequestParams::new(FIRST))
        .await
        .unwrap();
    second
        .subscribe(SubscribeRequestParams::new(SECOND))
        .await
        .unwrap();

    // One gateway process per client here (stdio), so each holds its own
    // upstream session: the shared count is per daemon; what each client
    // hears is what it asked for.
    let touched = run(&second, "notes", "touch_note", json!({"name": "second"})).await;
    assert!(touched.text.contains("touched 1"), "{}", touched.text);
    assert_eq!(next_update(&mut second_updates).await, SECOND);

    // Unsubscribing lets the server go.
    client
        .unsubscribe(UnsubscribeRequestParams::new(FIRST))
        .await
        .unwrap();
    wait_for_held(&client, 0).await;
    let touched = run(&client, "notes", "touch_note", json!({"name": "first"})).await;
    assert!(touched.text.contains("touched 0"), "{}", touched.text);
    assert!(updates.try_recv().is_err(), "an update after unsubscribing");
    second.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listen_stream_names_its_resources_and_they_are_released_when_it_ends() {
    let fixture = Fixture::new();
    let config = fixture.notes_config();
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;
    let transport = || {
        StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
                .auth_header(daemon.token.clone()),
        )
    };
    let modern = ClientConfig::default()
        .serve_with_lifecycle(
            transport(),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    wait_for_server(&modern, "notes").await;

    let mut stream = modern
        .listen(
            SubscriptionFilter::builder()
                .resource_subscription(FIRST)
                .resources_list_changed()
                .build(),
        )
        .await
        .unwrap();
    assert_eq!(
        stream.acknowledged().resource_subscriptions.as_deref(),
        Some([FIRST.to_owned()].as_slice())
    );
    wait_for_held(&modern, 1).await;
    // A second stream for the same resource: still one upstream.
    let mut other = modern
        .listen(
            SubscriptionFilter::builder()
                .resource_subscription(FIRST)
                .build(),
        )
        .await
        .unwrap();
    let touched = run(&modern, "notes", "touch_note", json!({"name": "first"})).await;
    assert!(touched.text.contains("touched 1"), "{}", touched.text);
    for stream in [&mut stream, &mut other] {
        let notification = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("no update on the stream")
            .unwrap()
            .unwrap();
        let ServerNotification::ResourceUpdatedNotification(updated) = notification else {
            panic!("not an update: {notification:?}");
        };
        assert_eq!(updated.params.uri, FIRST);
    }

    // The streams end: the server is let go.
    other.cancel().await.unwrap();
    wait_for_held(&modern, 1).await;
    stream.cancel().await.unwrap();
    wait_for_held(&modern, 0).await;

    // The subscriptions are in the gateway session's feed.
    let events = daemon
        .events("/v1/events?after=0", 200, Duration::from_secs(3))
        .await;
    let subscribed: Vec<&Value> = events
        .iter()
        .filter(|e| e["tool"] == "resources/subscribe")
        .collect();
    assert_eq!(subscribed.len(), 2, "{events:?}");
    assert_eq!(subscribed[0]["arguments"]["uri"], FIRST);
    assert_eq!(subscribed[0]["status"], "ok");
    assert_eq!(subscribed[0]["session"], "gateway-daemon");
    modern.cancel().await.unwrap();
}
