//! Sessions run their turns at the same time without mixing: each gets its
//! own answer, history and activity, and a second message to a session
//! whose turn is still running is refused rather than interleaved.

use quiver_tests::daemon;
use quiver_tests::model;

use std::sync::Arc;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_sessions_keep_to_themselves() {
    let conversation = |n: usize| {
        json!({"match": format!("conversation {n}"), "steps": [
            {"delay_ms": 200, "tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "w ".repeat(n + 1)}}}]},
            {"delay_ms": 100, "content": format!("answer {n}: {{{{last_tool_result}}}}")}
        ]})
    };
    let script = json!((0..6).map(conversation).collect::<Vec<_>>());
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = Arc::new(TestDaemon::start(&config, &fixture.state()));

    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(daemon.session(json!({})).await);
    }
    let turns: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(n, session)| {
            let daemon = daemon.clone();
            let session = session.clone();
            tokio::spawn(async move { daemon.say(&session, &format!("conversation {n}")).await })
        })
        .collect();
    // While session 0's turn runs, a second message to it is refused.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, busy) = daemon
        .post(
            &format!("/v1/sessions/{}/messages", sessions[0]),
            json!({"content": "conversation 0 again"}),
        )
        .await;
    assert_eq!(
        (status, busy["error"].as_str()),
        (409, Some("turn_in_progress")),
        "{busy}"
    );

    for (n, turn) in turns.into_iter().enumerate() {
        let outcome = turn.await.unwrap();
        let reply = outcome["reply"].as_str().unwrap();
        assert!(reply.starts_with(&format!("answer {n}: ")), "{reply}");
        let result: serde_json::Value =
            serde_json::from_str(reply.split_once(": ").unwrap().1).unwrap();
        assert_eq!(
            result["words"],
            n + 1,
            "session {n} got another session's result"
        );
    }
    for (n, session) in sessions.iter().enumerate() {
        let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
        let messages = stored["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[0]["content"], format!("conversation {n}"));
        let events = daemon
            .events(
                &format!("/v1/sessions/{session}/events?after=0"),
                2,
                Duration::from_secs(2),
            )
            .await;
        assert_eq!(events.len(), 1, "session {n} sees only its own call");
        assert_eq!(events[0]["session"], session.as_str());
    }
}
