//! A PostgreSQL store that cannot be reached: at start, `quiver serve`
//! stops with one line naming the store's user, host and database and what
//! failed (never the password); while serving, turns fail with the
//! structured `store_unavailable` error and `/readyz` says not ready, and
//! both recover without a restart when the database is back.

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use quiver_tests::postgres::Cluster;

use std::time::Duration;

use serde_json::json;

#[test]
fn an_unreachable_store_at_start_is_one_clear_line() {
    let fixture = Fixture::new();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = fixture.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  backend: postgres\n  url: postgres://quiver:${{QUIVER_TEST_PG_PASSWORD}}@127.0.0.1:{port}/state\n  connect_timeout_s: 2\n"
        ),
    )
    .unwrap();
    let output = quiver_tests::quiver_command()
        .env("QUIVER_TEST_PG_PASSWORD", "s3cret-pw")
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    assert!(line.starts_with("error: "), "{line}");
    assert!(
        line.contains(&format!("quiver@127.0.0.1:{port}/state")),
        "{line}"
    );
    assert!(line.contains("refused"), "{line}");
    assert!(!line.contains("s3cret"), "the password was shown: {line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn turns_fail_while_the_store_is_away_and_work_again_when_it_is_back() {
    let cluster = Cluster::start();
    let script =
        json!([{"match": "hello", "steps": [{"content": "hi there"}, {"content": "hi there"}]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(
        &model.base_url,
        &format!(
            "store:\n  backend: postgres\n  url: \"{}\"\n  connect_timeout_s: 2\n",
            cluster.url()
        ),
    );
    let daemon = TestDaemon::start(&config, &fixture.state());
    daemon.ready().await;
    let session = daemon.session(json!({})).await;
    assert_eq!(daemon.say(&session, "hello").await["reply"], "hi there");

    cluster.down();
    let (status, body) = daemon.get("/readyz").await;
    assert_eq!(
        (status, &body["error"]),
        (503, &json!("store_unavailable")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("unavailable"),
        "{body}"
    );
    let (status, body) = daemon
        .post(
            &format!("/v1/sessions/{session}/messages"),
            json!({"content": "hello again"}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]),
        (503, &json!("store_unavailable")),
        "{body}"
    );
    assert!(
        body["data"]["store"].as_str().unwrap().contains("quiver@"),
        "{body}"
    );
    // The daemon itself keeps serving what needs no store.
    let (status, _) = daemon.get("/healthz").await;
    assert_eq!(status, 200);

    cluster.up();
    let mut ready = false;
    for _ in 0..200 {
        if daemon.get("/readyz").await.0 == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "/readyz did not recover");
    assert_eq!(
        daemon.say(&session, "hello again").await["reply"],
        "hi there"
    );
    assert_eq!(daemon.stored_roles(&session).await.len(), 4);
}
