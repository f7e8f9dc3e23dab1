//! SIGTERM stops `quiver serve` promptly: open event streams (the feed's,
//! an MCP client's idle HTTP session) end with the server instead of holding the graceful shutdown forever; a request that
//! does not finish (a turn waiting on a model that never answers) is waited
//! for until a second signal, or for at most 10 s.

use quiver_tests::daemon;

use std::time::{Duration, Instant};

use daemon::{Fixture, TestDaemon};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

/// A model endpoint that accepts connections and never answers: the
/// kernel queues them on the listener, nobody reads.
fn silent_model() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

#[tokio::test(flavor = "multi_thread")]
async fn open_event_streams_do_not_hold_the_stop() {
    let (_model, model_url) = silent_model();
    let fixture = Fixture::new();
    let config = fixture.config(&model_url, "");
    let mut daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon.session(json!({"id": "watched"})).await;

    let mut streams = Vec::new();
    for path in [
        "/v1/events".to_owned(),
        "/v1/events?after=0".to_owned(),
        format!("/v1/sessions/{session}/events"),
    ] {
        let response = daemon
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
        streams.push(response);
    }

    // An MCP client's Streamable HTTP session, idle after a call, holds
    // its own open stream.
    let mcp = ()
        .serve(StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", daemon.url))
                .auth_header(daemon.token.clone()),
        ))
        .await
        .unwrap();
    mcp.list_all_tools().await.unwrap();

    let started = Instant::now();
    let status = daemon
        .signal_and_wait(Duration::from_secs(5))
        .unwrap_or_else(|| {
            panic!("quiver serve still runs 5 s after SIGTERM with open event streams")
        });
    assert!(status.success(), "quiver serve exited with {status}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // The streams ended (not cut mid-event): each reads to its end.
    for mut stream in streams {
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(Some(_)) = stream.chunk().await {}
        })
        .await;
        assert!(ended.is_ok(), "an event stream stayed open");
    }
}

/// Starts a turn and waits until it is waiting on the silent model (its
/// request reached `model`); returns that connection, kept open unanswered.
async fn hanging_turn(daemon: &TestDaemon, model: std::net::TcpListener) -> std::net::TcpStream {
    let session = daemon.session(json!({})).await;
    let turn = daemon.request(
        reqwest::Method::POST,
        &format!("/v1/sessions/{session}/messages"),
    );
    tokio::spawn(async move {
        let _ = turn.json(&json!({"content": "hello"})).send().await;
    });
    // The daemon's startup probe (`GET .../models`) may come first: the
    // turn's connection is the one that POSTs.
    let accepted = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            for _ in 0..8 {
                let (mut stream, _) = model.accept().unwrap();
                let mut method = [0u8; 4];
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                if stream.read_exact(&mut method).is_ok() && &method == b"POST" {
                    return stream;
                }
            }
            panic!("no connection to the model posted a turn");
        }),
    )
    .await
    .expect("the turn never asked the model");
    accepted.unwrap()
}

/// A daemon (and its scratch directory) running a turn that waits on a
/// model that never answers, and that model connection.
async fn daemon_in_a_hanging_turn() -> (Fixture, TestDaemon, std::net::TcpStream) {
    let (model, model_url) = silent_model();
    let fixture = Fixture::new();
    let config = fixture.config(&model_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let turn = hanging_turn(&daemon, model).await;
    (fixture, daemon, turn)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_sigterm_ends_a_stop_that_waits_on_a_request() {
    let (_fixture, mut daemon, _turn) = daemon_in_a_hanging_turn().await;

    // The first signal waits for the running turn ...
    assert!(
        daemon.signal_and_wait(Duration::from_secs(2)).is_none(),
        "quiver serve did not wait for the running turn"
    );
    // ... the second one does not.
    let started = Instant::now();
    let status = daemon
        .signal_and_wait(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("quiver serve still runs 5 s after a second SIGTERM"));
    assert!(status.success(), "quiver serve exited with {status}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_waits_on_a_request_for_at_most_ten_seconds() {
    let (_fixture, mut daemon, _turn) = daemon_in_a_hanging_turn().await;

    let started = Instant::now();
    let status = daemon
        .signal_and_wait(Duration::from_secs(16))
        .unwrap_or_else(|| panic!("quiver serve still runs 16 s after SIGTERM"));
    assert!(status.success(), "quiver serve exited with {status}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(9),
        "stopped after {waited:?}, before the running turn's grace period"
    );
}
