//! Two real `quiver serve` processes (instances A and B, each with its own
//! state directory) on one PostgreSQL database: an approval asked by a
//! turn on A is listed and answered through B's API and A's turn goes on;
//! B's activity feed shows A's calls; a session started on A is continued
//! on B. A killed with SIGKILL mid-turn loses nothing it wrote, and once
//! its lease runs out B marks its waiting approval abandoned (saying why)
//! and may run the session's turns; restarted, both find everything.

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use quiver_tests::postgres::Cluster;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

/// The fixture's config with the shared store (leases of 2 s).
fn shared_config(
    fixture: &Fixture,
    model: &ScriptedModel,
    cluster: &Cluster,
) -> std::path::PathBuf {
    fixture.config(
        &model.base_url,
        &format!(
            "store:\n  backend: postgres\n  url: \"{}\"\n  lease_s: 2\n",
            cluster.url()
        ),
    )
}

fn script() -> Value {
    json!([
        {"match": "make the file", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo approved > made.txt && echo done"}}]},
            {"content": "result: {{last_tool_result}}"},
            {"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "one two three"}}}]},
            {"content": "counted: {{last_tool_result}}"}
        ]},
        {"match": "ping", "steps": [
            {"content": "pong"}, {"content": "pong"}, {"content": "pong"},
            {"content": "pong"}, {"content": "pong"}, {"content": "pong"},
            {"content": "pong"}, {"content": "pong"}
        ]},
        {"match": "wipe it", "steps": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo never > wiped.txt"}}]},
            {"content": "result: {{last_tool_result}}"}
        ]}
    ])
}

/// The first pending approval `daemon` lists (whichever instance asked).
async fn pending(daemon: &TestDaemon) -> Value {
    for _ in 0..800 {
        let (_, body) = daemon.get("/v1/approvals").await;
        if let Some(first) = body["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no approval appeared");
}

async fn instance_id(daemon: &TestDaemon) -> String {
    let (status, body) = daemon.get("/v1/status").await;
    assert_eq!(status, 200, "{body}");
    body["instance"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_asked_on_one_instance_is_answered_on_the_other() {
    let cluster = Cluster::start();
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    let config = shared_config(&fixture, &model, &cluster);
    let a = Arc::new(TestDaemon::start(&config, &fixture.path().join("state-a")));
    let b = Arc::new(TestDaemon::start(&config, &fixture.path().join("state-b")));
    a.ready().await;
    b.ready().await;
    let (id_a, id_b) = (instance_id(&a).await, instance_id(&b).await);
    assert_ne!(id_a, id_b);
    // Each knows the other.
    let (_, status) = b.get("/v1/status").await;
    let running: Vec<&str> = status["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["stopped_ms"].is_null())
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert!(
        running.contains(&id_a.as_str()) && running.contains(&id_b.as_str()),
        "{status}"
    );
    // `quiver status` on B's state directory names B, its store and A.
    let output = quiver_tests::quiver_command()
        .args(["status", "--state-dir"])
        .arg(fixture.path().join("state-b"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("instance: {id_b} on "))
            && text.contains(&format!(
                "store: postgres quiver@localhost:{}/quiver",
                cluster.port()
            )),
        "{text}"
    );
    let a_line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("instance {id_a} ")))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        a_line.contains(&format!("running, pid {}", a.pid())),
        "{a_line}"
    );

    // B's feed, open before A does anything.
    let feed = b.open_events("/v1/events").await;
    let session = a.session(json!({"id": "shared"})).await;
    let turn = tokio::spawn({
        let a = a.clone();
        async move { a.say("shared", "make the file").await }
    });
    let request = pending(&b).await;
    assert_eq!(request["instance"], id_a.as_str(), "{request}");
    // B's status stream shows A with a call waiting on it.
    let stream = b.open_events("/v1/status/events").await;
    let shown =
        quiver_tests::daemon::read_named_events(stream, Duration::from_secs(20), |_, data| {
            data["instances"]
                .as_array()
                .is_some_and(|all| all.iter().any(|i| i["id"] == id_a.as_str()))
        })
        .await;
    let (_, last) = shown.last().unwrap();
    let a_shown = last["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id_a.as_str())
        .unwrap();
    assert_eq!(
        (&a_shown["running"], &a_shown["pending_approvals"]),
        (&json!(true), &json!(1)),
        "{a_shown}"
    );
    assert_eq!(request["session"], session.as_str());
    assert_eq!(request["tool"], "run_command");
    let (status, body) = b
        .post(
            &format!("/v1/approvals/{}", request["id"]),
            json!({"decision": "approve", "digest": request["digest"], "client": "operator on b"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let outcome = turn.await.unwrap();
    assert!(
        outcome["reply"].as_str().unwrap().contains("done"),
        "{outcome}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.work().join("made.txt")).unwrap(),
        "approved\n"
    );
    // A's listing of the same approval says who answered, on B.
    let (_, approvals) = a.get("/v1/approvals").await;
    let answered = &approvals["answered"][0];
    assert_eq!(
        (&answered["answered_by"], &answered["state"]),
        (&json!("operator on b"), &json!("answered")),
        "{approvals}"
    );

    // B's feed showed A's call, as A recorded it.
    let events =
        quiver_tests::daemon::read_named_events(feed, Duration::from_secs(20), |_, data| {
            data["tool"] == "run_command" && data["status"] == "ok"
        })
        .await;
    let from_a: Vec<&Value> = events
        .iter()
        .map(|(_, data)| data)
        .filter(|data| data["instance"] == id_a.as_str())
        .collect();
    assert!(
        from_a.iter().any(|e| e["status"] == "awaiting_approval"),
        "{events:?}"
    );
    let done = from_a.iter().find(|e| e["status"] == "ok").unwrap();
    assert_eq!(done["answered_by"], "operator on b", "{done}");

    // The session goes on on B, with what A stored.
    let outcome = b.say("shared", "how many words").await;
    assert!(
        outcome["reply"].as_str().unwrap().contains('3'),
        "{outcome}"
    );
    let roles = a.stored_roles("shared").await;
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    // Turns sent to the instances in turn, each as soon as the last one
    // answered (as behind a load balancer): the claim is free by then.
    let pingpong = a.session(json!({"id": "pingpong"})).await;
    for n in 0..8 {
        let on = if n % 2 == 0 { &a } else { &b };
        assert_eq!(on.say(&pingpong, "ping").await["reply"], "pong");
    }
    // B's savings show A's totals too (sampled 10 s after activity).
    let mut a_totals = Value::Null;
    for _ in 0..300 {
        let (_, savings) = b.get("/v1/savings").await;
        if let Some(found) = savings["instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["instance"] == id_a.as_str())
        {
            a_totals = found["point"].clone();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(a_totals["tool_calls"].as_u64().unwrap() >= 1, "{a_totals}");
    // Metrics name each instance.
    let metrics = b
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!("instance=\"{id_b}\"")),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_instance_leaves_nothing_waiting_and_loses_nothing() {
    let cluster = Cluster::start();
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    let config = shared_config(&fixture, &model, &cluster);
    let (state_a, state_b) = (
        fixture.path().join("state-a"),
        fixture.path().join("state-b"),
    );
    let a = Arc::new(TestDaemon::start(&config, &state_a));
    let mut b = TestDaemon::start(&config, &state_b);
    a.ready().await;
    b.ready().await;
    let id_a = instance_id(&a).await;
    a.session(json!({"id": "doomed"})).await;
    let turn = tokio::spawn({
        let a = a.clone();
        async move {
            // The process dies under it: the request fails, whatever it says.
            let _ = a
                .request(reqwest::Method::POST, "/v1/sessions/doomed/messages")
                .json(&json!({"content": "wipe it"}))
                .send()
                .await;
        }
    });
    let request = pending(&b).await;
    assert_eq!(request["instance"], id_a.as_str());
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &a.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = turn.await;

    // Once A's lease has run out, B abandons what A left waiting.
    let mut abandoned = Value::Null;
    for _ in 0..400 {
        let (_, body) = b.get("/v1/approvals").await;
        if body["approvals"].as_array().unwrap().is_empty() {
            abandoned = body["answered"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["id"] == request["id"])
                .cloned()
                .unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(abandoned["state"], "abandoned", "{abandoned}");
    let reason = abandoned["reason"].as_str().unwrap();
    assert!(
        reason.contains(&id_a) && reason.contains("lease"),
        "{reason}"
    );
    // An answer now says it is gone, and why.
    let (status, body) = b
        .post(
            &format!("/v1/approvals/{}", request["id"]),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]),
        (404, &json!("not_pending")),
        "{body}"
    );
    assert_eq!(body["data"]["state"], "abandoned");
    assert!(!fixture.work().join("wiped.txt").exists());
    // What A wrote before it died is there: the question and the call.
    assert_eq!(b.stored_roles("doomed").await, ["user", "assistant"]);
    let (_, status) = b.get("/v1/status").await;
    let gone = status["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id_a.as_str())
        .unwrap()
        .clone();
    assert!(
        gone["stop_reason"].as_str().unwrap().contains("lease"),
        "{gone}"
    );
    // The session's turn is free: B runs it, and the model hears that the
    // call A had asked for never finished.
    let outcome = b.say("doomed", "is it done?").await;
    assert!(
        outcome["reply"].as_str().unwrap().contains("interrupted"),
        "{outcome}"
    );

    // Both restarted: everything is still there, and A is A again.
    b.stop();
    drop(a);
    let a = TestDaemon::start(&config, &state_a);
    let b = TestDaemon::start(&config, &state_b);
    a.ready().await;
    b.ready().await;
    assert_eq!(instance_id(&a).await, id_a);
    assert_eq!(
        a.stored_roles("doomed").await,
        ["user", "assistant", "user", "assistant"]
    );
    let (_, stored) = b.get("/v1/sessions/doomed").await;
    assert_eq!(stored["session"]["messages"], 4, "{stored}");
    // The log kept A's call, with A's name on it.
    let log = b.open_events("/v1/events?after=0").await;
    let replayed =
        quiver_tests::daemon::read_named_events(log, Duration::from_secs(20), |_, data| {
            data["instance"] == id_a.as_str() && data["status"] == "awaiting_approval"
        })
        .await;
    assert!(
        replayed
            .iter()
            .any(|(_, data)| data["instance"] == id_a.as_str() && data["tool"] == "run_command"),
        "{replayed:?}"
    );
    let (_, approvals) = a.get("/v1/approvals").await;
    assert!(approvals["approvals"].as_array().unwrap().is_empty());
    assert!(
        approvals["answered"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == request["id"] && a["state"] == "abandoned")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_with_a_running_instances_id_is_refused() {
    let cluster = Cluster::start();
    let model = ScriptedModel::start(&script(), &[]);
    let fixture = Fixture::new();
    // One config for both, naming the instance: the operator's mistake.
    let config = fixture.config(
        &model.base_url,
        &format!(
            "serve:\n  instance_id: quiver-one\nstore:\n  backend: postgres\n  url: \"{}\"\n  lease_s: 2\n",
            cluster.url()
        ),
    );
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .stderr(std::process::Stdio::piped());
    let mut a = TestDaemon::spawn(command, &fixture.path().join("state-a"));
    let summary = a.stderr_lines();
    a.ready().await;
    assert_eq!(instance_id(&a).await, "quiver-one");
    // The startup summary names the instance and its store (no password).
    let line = summary.wait_for(
        "instance quiver-one, store postgres",
        Duration::from_secs(20),
    );
    assert!(line.contains("(shared: "), "{line}");
    let output = quiver_tests::quiver_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.path().join("state-b"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("instance id `quiver-one` is in use by process")
            && stderr.contains(&format!("process {}", a.pid()))
            && stderr.contains("serve.instance_id"),
        "{stderr}"
    );
    // A was not disturbed: it still runs, with nothing taken from it.
    let (_, status) = a.get("/v1/status").await;
    let me = status["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "quiver-one")
        .cloned()
        .unwrap();
    assert_eq!(me["pid"], a.pid(), "{status}");
    assert!(me["stopped_ms"].is_null(), "{status}");
}
