//! `run_command` waits for approval by default: the pending call is listed
//! by the API with the real tool, its arguments and their digest; an
//! answer for other arguments is refused; approving runs the command and
//! the turn goes on; denying tells the model why without running anything.
//! The daemon records who answered (the program that names itself with
//! `client`, else `api`): the answer, a late second answer, the list of
//! approvals and the call's outcome in the feed all say it, and the
//! outcome's feed record carries the command's result.

use quiver_tests::daemon;
use quiver_tests::model;

use std::sync::Arc;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::{Value, json};

async fn pending(daemon: &TestDaemon, session: &str) -> Value {
    for _ in 0..400 {
        let (_, body) = daemon
            .get(&format!("/v1/approvals?session={session}"))
            .await;
        if let Some(first) = body["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no approval appeared for {session}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_command_is_approved_or_denied_through_the_api() {
    let script = json!([
        {"match": "make the file", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo approved > made.txt && echo done"}}]},
            {"content": "result: {{last_tool_result}}"}
        ]},
        {"match": "remove everything", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo denied > denied.txt"}}]},
            {"content": "result: {{last_tool_result}}"}
        ]}
    ]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = Arc::new(TestDaemon::start(&config, &fixture.state()));

    let session = daemon.session(json!({})).await;
    let turn = tokio::spawn({
        let daemon = daemon.clone();
        let session = session.clone();
        async move { daemon.say(&session, "make the file").await }
    });
    let request = pending(&daemon, &session).await;
    assert_eq!(request["tool"], "run_command");
    assert_eq!(
        request["arguments"]["command"],
        "echo approved > made.txt && echo done"
    );
    assert!(
        !fixture.work().join("made.txt").exists(),
        "ran before approval"
    );
    let id = request["id"].as_u64().unwrap();
    let (status, body) = daemon
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "approve", "digest": "0".repeat(64)}),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (409, Some("digest_mismatch"))
    );
    let (status, body) = daemon
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "approve", "digest": request["digest"], "client": "no/slashes"}),
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("bad_request")),
        "{body}"
    );
    let (status, body) = daemon
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "approve", "digest": request["digest"], "client": "quiver chat"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["answered_by"], "quiver chat", "{body}");
    assert!(body["answered_ms"].as_i64().unwrap() > 0, "{body}");
    let outcome = turn.await.unwrap();
    assert!(
        outcome["reply"].as_str().unwrap().contains("done"),
        "{outcome}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.work().join("made.txt")).unwrap(),
        "approved\n"
    );
    let (status, body) = daemon
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!((status, body["error"].as_str()), (404, Some("not_pending")));
    assert_eq!(
        (&body["data"]["answered_by"], &body["data"]["decision"]),
        (&json!("quiver chat"), &json!("approve")),
        "a late answer learns who answered first: {body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("quiver chat"),
        "{body}"
    );
    let (_, listed) = daemon.get("/v1/approvals").await;
    assert_eq!(listed["answered"][0]["id"], id, "{listed}");
    assert_eq!(listed["answered"][0]["answered_by"], "quiver chat");
    assert_eq!(listed["answered"][0]["tool"], "run_command");
    let approved = daemon
        .events(
            &format!("/v1/sessions/{session}/events?after=0"),
            2,
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(approved[1]["status"], "ok", "{approved:?}");
    assert_eq!(approved[1]["answered_by"], "quiver chat", "{approved:?}");
    assert!(
        approved[0]["answered_by"].is_null(),
        "the waiting record was not answered yet: {approved:?}"
    );
    assert!(
        approved[1]["result"].to_string().contains("done"),
        "the feed carries what the command printed: {approved:?}"
    );

    let session = daemon.session(json!({})).await;
    let turn = tokio::spawn({
        let daemon = daemon.clone();
        let session = session.clone();
        async move { daemon.say(&session, "remove everything").await }
    });
    let request = pending(&daemon, &session).await;
    let id = request["id"].as_u64().unwrap();
    let (status, _) = daemon
        .post(
            &format!("/v1/approvals/{id}"),
            json!({"decision": "deny", "reason": "not today"}),
        )
        .await;
    assert_eq!(status, 200);
    let outcome = turn.await.unwrap();
    let reply = outcome["reply"].as_str().unwrap();
    assert!(
        reply.contains("approval_denied") && reply.contains("not today"),
        "{reply}"
    );
    assert!(!fixture.work().join("denied.txt").exists());
    assert_eq!(outcome["tool_calls"][0]["ok"], false);

    let events = daemon
        .events(
            &format!("/v1/sessions/{session}/events?after=0"),
            2,
            Duration::from_secs(10),
        )
        .await;
    let statuses: Vec<&str> = events
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["awaiting_approval", "denied"]);
    assert_eq!(events[1]["answered_by"], "api", "{events:?}");
    assert!(events[1]["result"].is_null(), "a denied call has no result");
}
