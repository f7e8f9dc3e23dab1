//! Requests of the wrong shape are refused with a clear 400 before anything
//! happens: a session body that is not an object (`[]` is not "all
//! defaults"), a `context_tokens` outside its range, and a message too
//! large for the session's context, which never reaches the model (here
//! no model answers at all, so any model request would fail differently).

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn wrong_shapes_and_oversized_messages_are_refused_early() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    for body in [json!([]), json!("s"), json!(null)] {
        let (status, error) = daemon.post("/v1/sessions", body.clone()).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object"),
            "{error}"
        );
    }
    for tokens in [0, 999, 10_000_001_u64, u64::MAX] {
        let (status, error) = daemon
            .post("/v1/sessions", json!({"context_tokens": tokens}))
            .await;
        assert_eq!(status, 400, "{tokens}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("1000..10000000"),
            "{error}"
        );
    }
    let (status, sessions) = daemon.get("/v1/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(sessions["sessions"], json!([]), "nothing was created");

    let session = daemon.session(json!({"context_tokens": 64000})).await;
    let (status, error) = daemon
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"content": "word ".repeat(250_000)}),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("context of 64000 tokens"), "{message}");
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(stored["messages"], json!([]), "nothing was stored or sent");
    let (status, error) = daemon
        .post(&format!("/v1/sessions/{session}/messages"), json!(["hi"]))
        .await;
    assert_eq!(status, 400, "{error}");
}
