//! `QUIVER_LOG_FORMAT=json` makes every stderr line of `quiver serve` a
//! JSON object (tracing-subscriber's JSON layer), the startup summary
//! included, with its facts as fields.

use quiver_tests::daemon;

use std::process::Stdio;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};

#[test]
fn every_stderr_line_is_a_json_record() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("QUIVER_LOG_FORMAT", "json")
        .stderr(Stdio::piped());
    let mut daemon = TestDaemon::spawn(command, &fixture.state());
    let lines = daemon.stderr_lines();
    lines.wait_for("did not answer a probe", Duration::from_secs(60));
    lines.wait_for("mcp server test (stdio): ready", Duration::from_secs(60));
    daemon.stop();
    let records: Vec<serde_json::Value> = lines
        .all()
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let listening = records
        .iter()
        .find(|r| {
            r["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("listening on "))
        })
        .expect("a listening record");
    assert_eq!(listening["target"], "quiver::summary");
    assert_eq!(listening["level"], "INFO");
    assert_eq!(listening["fields"]["url"], daemon.url.as_str());
    let probe = records
        .iter()
        .find(|r| r["fields"]["answered"] == false)
        .expect("the failed probe as a record");
    assert_eq!(probe["fields"]["model"], "scripted");
    assert_eq!(probe["fields"]["code"], "transport_error");
    assert!(
        probe["fields"]["fix"]
            .as_str()
            .unwrap()
            .contains("base_url"),
        "{probe}"
    );
}
