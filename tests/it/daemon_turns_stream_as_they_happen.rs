//! Streamed turns through the real daemon and the scripted model speaking
//! both streaming dialects: `POST .../messages?stream=true` answers with the
//! text pieces, the whole answer of each step, the tool activity between
//! them and the outcome, in the order they happened; the session feed
//! carries the same messages in the same place among its activity; a
//! truncated stream or a server's `error` event is a `stream_error` naming
//! the model, and the daemon goes on serving; a client that goes away
//! mid-stream leaves the turn running and stored; `stream: false` sends
//! plain requests and still gives each whole answer.

use quiver_tests::daemon;
use quiver_tests::model;

use std::time::Duration;

use daemon::{Fixture, TestDaemon, read_named_events};
use model::ScriptedModel;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn script() -> Value {
    json!([
        {"match": "read my notes", "steps": [
            {"content": "Let me read them.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"content": "Your notes say: {{last_tool_result}}"}
        ]},
        {"match": "slow answer", "steps": [
            {"content": "Reading first.", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"content": "Finally: {{last_tool_result}}", "delay_ms": 400}
        ]},
        {"match": "cut me off", "steps": [
            {"content": "This answer will never reach its end marker.", "truncate_stream": true}
        ]},
        {"match": "fail mid-way", "steps": [
            {"content": "Starting to answer and then", "stream_error": "the model is overloaded"}
        ]}
    ])
}

/// The fixture's config with the model speaking `provider` (and `more`
/// model keys).
fn config_for(
    fixture: &Fixture,
    model: &ScriptedModel,
    provider: &str,
    more: &str,
) -> std::path::PathBuf {
    let path = fixture.config(&model.base_url, "");
    let text = std::fs::read_to_string(&path).unwrap();
    let base = match provider {
        "anthropic" => model.base_url.clone(),
        _ => format!("{}/v1", model.base_url),
    };
    let text = text.replace(
        &format!("provider: openai\n    base_url: {}/v1\n", model.base_url),
        &format!("provider: {provider}\n    base_url: {base}\n{more}"),
    );
    assert!(text.contains(&format!("provider: {provider}")), "{text}");
    std::fs::write(&path, text).unwrap();
    path
}

fn position(events: &[(String, Value)], what: impl Fn(&str, &Value) -> bool) -> usize {
    events
        .iter()
        .position(|(name, data)| what(name, data))
        .unwrap_or_else(|| panic!("not found in {events:#?}"))
}

fn text_of_step(events: &[(String, Value)], step: u64) -> String {
    events
        .iter()
        .filter(|(name, data)| name == "message.delta" && data["step"] == step)
        .filter_map(|(_, data)| data["text"].as_str())
        .collect()
}

/// Checks the order of one turn of `read my notes`: step 1's text, its tool
/// call, its whole answer, the tool's activity, step 2's text, its whole
/// answer.
fn check_turn_order(events: &[(String, Value)], session: &str) {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(text_of_step(events, 1), "Let me read them.", "{names:?}");
    let step_1_pieces = events
        .iter()
        .filter(|(n, d)| n == "message.delta" && d["step"] == 1 && d["text"].is_string())
        .count();
    assert!(step_1_pieces > 1, "the text came whole: {names:?}");
    let call = position(events, |n, d| {
        n == "message.delta" && d["tool_call"]["name"] == "read_file"
    });
    let done_1 = position(events, |n, d| n == "message.done" && d["step"] == 1);
    let activity = position(events, |n, d| {
        n == "activity" && d["tool"] == "read_file" && d["status"] == "ok"
    });
    let first_2 = position(events, |n, d| n == "message.delta" && d["step"] == 2);
    let done_2 = position(events, |n, d| n == "message.done" && d["step"] == 2);
    let last_1 = events
        .iter()
        .rposition(|(n, d)| n == "message.delta" && d["step"] == 1)
        .unwrap();
    assert!(
        last_1 < done_1
            && call < done_1
            && done_1 < activity
            && activity < first_2
            && first_2 < done_2,
        "out of order: {names:?}"
    );
    let done = &events[done_1].1;
    assert_eq!(done["session"], session);
    assert_eq!(done["message"]["role"], "assistant");
    assert_eq!(done["message"]["content"], "Let me read them.");
    assert_eq!(done["message"]["tool_calls"][0]["name"], "read_file");
    assert_eq!(done["finish"], "tool_calls");
    assert!(
        done["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{done}"
    );
    assert!(
        done["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{done}"
    );
    // The tool result is read_file's JSON, quoted by the scripted model.
    let answer = text_of_step(events, 2);
    assert!(
        answer.starts_with("Your notes say: {") && answer.contains("buy milk"),
        "{answer}"
    );
    assert_eq!(events[done_2].1["message"]["content"], answer);
}

async fn streamed_turn_in_order(provider: &str) {
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    std::fs::write(fixture.work().join("notes.txt"), "buy milk").unwrap();
    let config = config_for(&fixture, &model, provider, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon.session(json!({})).await;

    let feed = daemon
        .open_events(&format!("/v1/sessions/{session}/events"))
        .await;
    let feed = tokio::spawn(read_named_events(feed, WAIT, |name, data| {
        name == "message.done" && data["step"] == 2
    }));
    let events = daemon
        .say_streaming(&session, "please read my notes", WAIT)
        .await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    check_turn_order(&events, &session);
    // The outcome closes the stream, as a plain POST would have answered.
    let (last, outcome) = events.last().unwrap();
    assert_eq!(last, "turn.done", "{names:?}");
    assert_eq!(
        outcome["reply"],
        events[events.len() - 2].1["message"]["content"]
    );
    assert_eq!(outcome["steps"], 2);
    assert_eq!(outcome["tool_calls"][0]["tool"], "read_file");

    // The session feed: the same messages, in their place among the activity.
    let fed = feed.await.unwrap();
    check_turn_order(&fed, &session);
    assert!(fed.iter().all(|(name, _)| name != "turn.done"));

    // The model was asked for streams (with the token counts, for OpenAI).
    let requests = model.requests().await;
    assert!(requests.iter().all(|r| r["stream"] == true), "{requests:?}");
    if provider == "openai" {
        assert_eq!(requests[0]["stream_options"]["include_usage"], true);
    }
    // The whole turn was stored as it streamed.
    let roles = daemon.stored_roles(&session).await;
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    // A plain POST still answers JSON, from the streamed model.
    let other = daemon.session(json!({})).await;
    let plain = daemon.say(&other, "please read my notes").await;
    assert!(
        plain["reply"].as_str().unwrap().contains("buy milk"),
        "{plain}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_streamed_turn_arrives_in_order_over_the_post_and_the_feed() {
    streamed_turn_in_order("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anthropic_streamed_turn_arrives_in_order_over_the_post_and_the_feed() {
    streamed_turn_in_order("anthropic").await;
}

async fn broken_streams_are_errors(provider: &str) {
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    std::fs::write(fixture.work().join("notes.txt"), "buy milk").unwrap();
    let config = config_for(&fixture, &model, provider, "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon.session(json!({})).await;

    let events = daemon.say_streaming(&session, "cut me off", WAIT).await;
    let (last, error) = events.last().unwrap();
    assert_eq!(last, "error", "{events:?}");
    assert_eq!(error["error"], "stream_error", "{error}");
    assert_eq!(error["status"], 502);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("model `scripted`") && message.contains("before its end marker"),
        "{message}"
    );
    // What came before the cut was shown, but no whole answer was made of it.
    assert!(
        events.iter().any(|(n, _)| n == "message.delta"),
        "{events:?}"
    );
    assert!(
        events.iter().all(|(n, _)| n != "message.done"),
        "{events:?}"
    );

    // A server's error mid-stream, through a plain POST: a JSON error
    // naming the model.
    let session = daemon.session(json!({})).await;
    let (status, body) = daemon
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"content": "fail mid-way"}),
        )
        .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"], "stream_error");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("model `scripted`") && message.contains("the model is overloaded"),
        "{message}"
    );

    // The daemon goes on serving.
    let other = daemon.session(json!({})).await;
    let outcome = daemon.say(&other, "please read my notes").await;
    assert!(
        outcome["reply"].as_str().unwrap().contains("buy milk"),
        "{outcome}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_truncated_and_failed_streams_are_stream_errors() {
    broken_streams_are_errors("openai").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_truncated_and_failed_streams_are_stream_errors() {
    broken_streams_are_errors("anthropic").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_leaves_mid_stream_does_not_stop_the_turn() {
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    std::fs::write(fixture.work().join("notes.txt"), "buy milk").unwrap();
    let config = config_for(&fixture, &model, "openai", "");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon.session(json!({})).await;

    let response = daemon.post_streaming(&session, "a slow answer").await;
    // Gone after the first step's answer, while the second is awaited.
    let seen = read_named_events(response, WAIT, |name, _| name == "message.done").await;
    assert_eq!(seen.last().unwrap().0, "message.done", "{seen:?}");
    drop(seen);
    let mut roles = Vec::new();
    for _ in 0..400 {
        roles = daemon.stored_roles(&session).await;
        if roles.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    let (_, stored) = daemon.get(&format!("/v1/sessions/{session}")).await;
    let last = stored["messages"][3]["content"].as_str().unwrap();
    assert!(
        last.starts_with("Finally: ") && last.contains("buy milk"),
        "{stored}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_with_stream_false_sends_plain_requests_and_whole_answers() {
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    std::fs::write(fixture.work().join("notes.txt"), "buy milk").unwrap();
    let config = config_for(&fixture, &model, "anthropic", "    stream: false\n");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let session = daemon.session(json!({})).await;

    let events = daemon
        .say_streaming(&session, "please read my notes", WAIT)
        .await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        events
            .iter()
            .all(|(n, d)| n != "message.delta" || d["text"].is_null()),
        "{names:?}"
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| **n == "message.done" || **n == "turn.done")
            .count(),
        3,
        "{names:?}"
    );
    let reply = events.last().unwrap().1["reply"].as_str().unwrap();
    assert!(reply.contains("buy milk"), "{reply}");
    let requests = model.requests().await;
    assert!(
        requests.iter().all(|r| r.get("stream").is_none()),
        "{requests:?}"
    );
}
