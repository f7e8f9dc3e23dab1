//! `quiver store migrate --from sqlite:STATE_DIR --to postgres://...`
//! copies a daemon's embedded store (sessions, messages, the activity log,
//! approvals, instances) into an empty PostgreSQL database, prints each
//! table's row count and checksum, verified by reading the copy back; a
//! daemon pointed at the database then finds everything. A copy into a
//! store that holds data is refused, and a database migrated by a newer
//! Quiver is refused at start.

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use quiver_tests::postgres::Cluster;

use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_sqlite_store_is_copied_into_postgres_and_served_from_there() {
    let script = json!([{"match": "count", "steps": [
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "a b c d"}}}]},
        {"content": "counted: {{last_tool_result}}"},
        {"content": "still here"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let embedded = fixture.config(&model.base_url, "");
    let mut daemon = TestDaemon::start(&embedded, &fixture.state());
    daemon.ready().await;
    daemon.session(json!({"id": "moving"})).await;
    daemon.say("moving", "count these words").await;
    let (status, _) = daemon
        .post(
            "/v1/gateway/clients",
            json!({"name": "ci", "grants": ["core"]}),
        )
        .await;
    assert_eq!(status, 201);
    daemon.stop();

    let cluster = Cluster::start();
    let url = cluster.url();
    let output = quiver_tests::quiver_command()
        .args(["store", "migrate", "--from"])
        .arg(format!("sqlite:{}", fixture.state().display()))
        .args(["--to", &url])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row = |table: &str| -> (usize, String) {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(table))
            .unwrap_or_else(|| panic!("no line for {table}:\n{stdout}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.last(), Some(&"verified"), "{line}");
        (words[1].parse().unwrap(), words[4].to_owned())
    };
    assert_eq!(row("sessions").0, 1);
    assert_eq!(row("messages").0, 4);
    assert_eq!(row("gateway_clients").0, 1);
    assert!(row("events").0 >= 1);
    assert_eq!(row("messages").1.len(), 64, "a sha256");
    assert!(stdout.contains("copied and verified"), "{stdout}");
    // The database holds what the file held.
    assert_eq!(
        cluster
            .psql("SELECT count(*) FROM messages WHERE session = 'moving'")
            .trim(),
        "4"
    );

    // A second copy into it is refused: it is not empty.
    let again = quiver_tests::quiver_command()
        .args(["store", "migrate", "--from"])
        .arg(format!("sqlite:{}", fixture.state().display()))
        .args(["--to", &url])
        .output()
        .unwrap();
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("not empty"), "{stderr}");

    // A daemon on the database serves the moved session and goes on.
    let shared = fixture.config(
        &model.base_url,
        &format!("store:\n  backend: postgres\n  url: \"{url}\"\n"),
    );
    let daemon = TestDaemon::start(&shared, &fixture.path().join("state-pg"));
    daemon.ready().await;
    assert_eq!(daemon.stored_roles("moving").await.len(), 4);
    assert_eq!(
        daemon.say("moving", "and now?").await["reply"],
        "still here"
    );
    let (_, clients) = daemon.get("/v1/gateway/clients").await;
    assert_eq!(clients["clients"][0]["name"], "ci", "{clients}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_migrated_by_a_newer_quiver_is_refused() {
    let cluster = Cluster::start();
    let fixture = Fixture::new();
    let config = fixture.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  backend: postgres\n  url: \"{}\"\n",
            cluster.url()
        ),
    )
    .unwrap();
    // Made by this build first, then migrated further by a newer one.
    let mut daemon = TestDaemon::start(&config, &fixture.state());
    daemon.stop();
    cluster.psql(
        "INSERT INTO quiver_schema_history (version, name, applied_on, checksum) VALUES (99, 'from_the_future', '2027-01-01T00:00:00Z', '1')",
    );
    let output = quiver_tests::quiver_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(fixture.state())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("schema version 99"), "{stderr}");
    assert!(stderr.contains("knows versions up to 1"), "{stderr}");
}
