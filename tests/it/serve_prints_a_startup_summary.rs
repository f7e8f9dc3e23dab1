//! `quiver serve` says on stderr what it runs: the config file and how it
//! was found, where it listens, the token file, each plugin with its file,
//! tools and generation, each MCP server's state as it changes, whether
//! the default model answered a probe (and the likely fix when it did
//! not), and what tool search saves.

use quiver_tests::daemon;
use quiver_tests::model;

use std::process::Stdio;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn serve(config: &std::path::Path, state: &std::path::Path) -> TestDaemon {
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .arg("--config")
        .arg(config)
        .stderr(Stdio::piped());
    TestDaemon::spawn(command, state)
}

#[test]
fn the_summary_names_config_listener_plugins_servers_model_and_savings() {
    let model = ScriptedModel::start(&json!([]), &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    // A second MCP server whose command does not exist.
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "mcp_servers:\n",
        "mcp_servers:\n  broken:\n    command: /nonexistent/mcp-server\n",
    );
    std::fs::write(&config, text).unwrap();
    let mut daemon = serve(&config, &fixture.state());
    let lines = daemon.stderr_lines();

    let first = lines.wait_for("quiver ", WAIT);
    assert!(
        first.contains(&format!("config {} (--config)", config.display())),
        "{first}"
    );
    let listening = lines.wait_for("listening on ", WAIT);
    assert!(listening.contains(&daemon.url), "{listening}");
    assert!(listening.contains("/healthz"), "{listening}");
    let token = lines.wait_for("token in ", WAIT);
    assert!(
        token.ends_with(&fixture.state().join("token").display().to_string()),
        "{token}"
    );
    let plugin = lines.wait_for("plugin text: ", WAIT);
    assert!(
        plugin.contains(&fixture.plugins().join("text.so").display().to_string())
            && plugin.contains(" tools, generation 1"),
        "{plugin}"
    );
    let core = lines.wait_for("core tools: ", WAIT);
    assert!(core.contains("read_file"), "{core}");
    let ready = lines.wait_for("mcp server test (stdio): ready, ", WAIT);
    assert!(ready.ends_with(" tools"), "{ready}");
    let failed = lines.wait_for("mcp server broken (stdio): failed: ", WAIT);
    assert!(failed.contains("retrying in"), "{failed}");
    let probe = lines.wait_for("default model scripted", WAIT);
    assert!(
        probe.contains("answered a probe (HTTP 200 from ")
            && probe.contains(&format!("{}/v1/models", model.base_url)),
        "{probe}"
    );
    let saving = lines.wait_for("tool search: ", WAIT);
    assert!(
        saving.contains("tokens of definitions sent eagerly")
            && saving.contains("with tool search (-")
            && saving.contains("of them the bridge tools"),
        "{saving}"
    );
    // The figures are those of the catalog the API reports.
    let without = number_before(&saving, " tokens of definitions sent eagerly");
    let with = number_before(&saving, " with tool search");
    assert!(with < without, "{saving}");
    daemon.stop();
}

#[test]
fn a_model_that_does_not_answer_is_named_with_the_likely_fix() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let fixture = Fixture::new();
    let config = fixture.config(&url, "");
    let mut daemon = serve(&config, &fixture.state());
    let lines = daemon.stderr_lines();
    let probe = lines.wait_for("default model scripted", WAIT);
    assert!(probe.contains("did not answer a probe"), "{probe}");
    assert!(probe.contains(&format!("{url}/v1/models")), "{probe}");
    assert!(
        probe.contains("likely fix: start the model server")
            && probe.contains("`models.scripted.base_url`"),
        "{probe}"
    );
    daemon.stop();
}

fn number_before(line: &str, marker: &str) -> u64 {
    let head = &line[..line
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in {line}"))];
    let digits: String = head
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number before {marker:?} in {line}"))
}
