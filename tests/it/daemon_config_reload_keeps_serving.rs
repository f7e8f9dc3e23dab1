//! A running daemon reloads its config on SIGHUP and on `POST /v1/reload`:
//! a good config is applied (an MCP server removed, another added, a model
//! added, tool search switched off: the next assembly shows it), the
//! daemon keeps running with the same `daemon.json`; a config with errors
//! is refused with every error, and the old config keeps serving turns.
//! Each reload is told on stderr in the startup summary's lines.

use quiver_tests::daemon;
use quiver_tests::model;

use std::path::Path;
use std::time::Duration;

use daemon::{Fixture, TestDaemon, tool_names};
use model::ScriptedModel;
use serde_json::{Value, json};

/// A config with the fixture's plugins and core tools, MCP servers
/// `servers` (each our rmcp test server), the model `scripted` (and
/// `second` when asked) and `extra` YAML.
fn write_config(
    fixture: &Fixture,
    model_url: &str,
    servers: &[&str],
    second_model: bool,
    extra: &str,
) {
    let mut text = format!(
        "plugins:\n  dirs: [{}]\ncore_tools:\n  workspace: {}\nmcp_servers:\n",
        fixture.plugins().display(),
        fixture.work().display()
    );
    for server in servers {
        text.push_str(&format!(
            "  {server}:\n    command: {}\n",
            quiver_tests::mcp_test_server().display()
        ));
    }
    text.push_str("models:\n");
    for name in ["scripted"]
        .into_iter()
        .chain(second_model.then_some("second"))
    {
        text.push_str(&format!(
            "  {name}:\n    provider: openai\n    base_url: {model_url}/v1\n    model: scripted\n    max_retries: 0\n    context_tokens: 64000\n"
        ));
    }
    text.push_str("default_model: scripted\n");
    text.push_str(extra);
    std::fs::write(fixture.path().join("quiver.yaml"), text).unwrap();
}

/// Polls `/v1/status` until `ready` holds for it (bounded).
async fn status_until(daemon: &TestDaemon, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..600 {
        let (status, body) = daemon.get("/v1/status").await;
        assert_eq!(status, 200, "{body}");
        if ready(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (_, body) = daemon.get("/v1/status").await;
    panic!("{what} never happened: {body}");
}

fn server_state(status: &Value, name: &str) -> Option<String> {
    status["mcp_servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["state"].as_str().unwrap_or_default().to_owned())
}

/// How long a summary line may take to come.
const WAIT: Duration = Duration::from_secs(60);

fn hang_up(pid: u32) {
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

fn daemon_file(state: &Path) -> Value {
    quiver_tests::read_json(&state.join("daemon.json"))
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_and_the_api_apply_a_good_config_and_refuse_a_bad_one() {
    let script = json!([{"match": "hello", "steps": [{"content": "hi there"}]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    write_config(&fixture, &model.base_url, &["test"], false, "");
    let config = fixture.path().join("quiver.yaml");
    let mut command = quiver_tests::quiver_command();
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .stderr(std::process::Stdio::piped());
    let mut daemon = TestDaemon::spawn(command, &fixture.state());
    let lines = daemon.stderr_lines();
    let before = daemon_file(&fixture.state());
    let status = status_until(&daemon, "server test ready", |s| {
        server_state(s, "test").as_deref() == Some("ready")
    })
    .await;
    assert_eq!(status["config"]["generation"], 1, "{status}");
    let (_, catalog) = daemon.get("/v1/catalog").await;
    assert_eq!(catalog["tier"], 1, "{catalog}");
    let listing = catalog["listing"].as_str().unwrap();
    assert!(listing.contains("mcp_test_echo"), "{listing}");

    // A good config on SIGHUP: server `test` leaves, `other` comes, a
    // second model, tool search off.
    write_config(
        &fixture,
        &model.base_url,
        &["other"],
        true,
        "tools:\n  tool_search: false\n",
    );
    hang_up(daemon.pid());
    let status = status_until(&daemon, "reload applied and server other ready", |s| {
        s["config"]["generation"] == 2 && server_state(s, "other").as_deref() == Some("ready")
    })
    .await;
    assert_eq!(server_state(&status, "test"), None, "{status}");
    let models: Vec<&str> = status["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["scripted", "second"]);
    let (_, catalog) = daemon.get("/v1/catalog").await;
    assert_eq!(catalog["tier"], 0, "{catalog}");
    let names = tool_names(&catalog["tools"]);
    assert!(names.contains(&"mcp_other_echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp_test_")),
        "{names:?}"
    );
    assert!(names.contains(&"word_count".to_owned()), "{names:?}");
    // Told as the startup summary tells a start.
    let reloaded = lines.wait_for("reloaded (generation 2)", WAIT);
    assert!(
        reloaded.starts_with(&format!("config {} reloaded", config.display()))
            && reloaded.contains("mcp_servers")
            && reloaded.contains("tools.tool_search"),
        "{reloaded}"
    );
    lines.wait_for("mcp server test: removed by the reload", WAIT);
    lines.wait_for("mcp server other (stdio): ready, 12 tools", WAIT);
    let probe = lines.wait_for("default model scripted", WAIT);
    assert!(probe.contains("answered a probe"), "{probe}");
    // Tool search is off now: nothing saved.
    let saving = lines.wait_for("(tier 0,", WAIT);
    assert!(saving.starts_with("tool search: "), "{saving}");
    // Still the same daemon, still where daemon.json says.
    assert_eq!(daemon_file(&fixture.state()), before);
    assert_eq!(before["pid"], daemon.pid());

    // A config with errors on SIGHUP: refused with every error; the old
    // one serves on.
    std::fs::write(
        &config,
        "tools:\n  tool_serch: true\nmodels:\n  broken:\n    provider: nobody\n",
    )
    .unwrap();
    hang_up(daemon.pid());
    let status = status_until(&daemon, "reload refused", |s| {
        s["config"]["reloads_refused"] == 1
    })
    .await;
    assert_eq!(status["config"]["generation"], 2, "{status}");
    let refused = lines.wait_for("refused, the running config keeps serving", WAIT);
    assert!(
        refused.contains("tool_serch") && refused.contains("nobody"),
        "{refused}"
    );
    let errors = status["config"]["last_reload"]["errors"].to_string();
    assert!(
        errors.contains("tool_serch") && errors.contains("nobody"),
        "{errors}"
    );
    let (_, catalog) = daemon.get("/v1/catalog").await;
    assert!(tool_names(&catalog["tools"]).contains(&"mcp_other_echo".to_owned()));
    let session = daemon.session(json!({"model": "second"})).await;
    let outcome = daemon.say(&session, "hello").await;
    assert_eq!(outcome["reply"], "hi there");

    // The same through the API.
    let (status, refused) = daemon.post("/v1/reload", json!({})).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"], "config_refused");
    assert!(
        refused["data"]["errors"].as_array().unwrap().len() >= 2,
        "{refused}"
    );
    assert_eq!(
        refused["data"]["file"],
        config.display().to_string(),
        "{refused}"
    );
    // A config that parses but cannot serve (a workspace that does not
    // exist) is refused too.
    std::fs::write(
        &config,
        format!(
            "core_tools:\n  workspace: {}\n",
            fixture.path().join("missing").display()
        ),
    )
    .unwrap();
    let (status, refused) = daemon.post("/v1/reload", json!({})).await;
    assert_eq!(
        (status, refused["error"].as_str()),
        (422, Some("config_refused")),
        "{refused}"
    );
    assert!(
        refused["message"].as_str().unwrap().contains("missing"),
        "{refused}"
    );

    write_config(&fixture, &model.base_url, &["test", "other"], false, "");
    let (status, report) = daemon.post("/v1/reload", json!({})).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["generation"], 3, "{report}");
    assert_eq!(report["mcp_servers"]["added"], json!(["test"]), "{report}");
    assert_eq!(report["mcp_servers"]["removed"], json!([]), "{report}");
    assert_eq!(report["models_removed"], json!(["second"]), "{report}");
    let changed = report["changed"].to_string();
    assert!(
        changed.contains("tools.tool_search") && changed.contains("models"),
        "{report}"
    );
    status_until(&daemon, "server test back", |s| {
        server_state(s, "test").as_deref() == Some("ready")
    })
    .await;
    let (_, catalog) = daemon.get("/v1/catalog").await;
    assert_eq!(catalog["tier"], 1, "{catalog}");
    // Counted for Prometheus: two applied, three refused, generation 3.
    let (status, metrics) = daemon.get("/metrics").await;
    assert_eq!(status, 200, "{metrics}");
    let metrics = metrics.as_str().unwrap();
    // Every series carries the instance label too.
    for (name, label, value) in [
        ("quiver_config_reloads_total", "outcome=\"applied\"", " 2"),
        ("quiver_config_reloads_total", "outcome=\"refused\"", " 3"),
        ("quiver_config_generation", "instance=", " 3"),
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(&format!("{name}{{"))
                && l.contains(label)
                && l.ends_with(value)),
            "no {name} with {label} at{value}:\n{metrics}"
        );
    }

    // SIGTERM still stops it cleanly.
    daemon.stop();
    assert!(!fixture.state().join("daemon.json").exists());
}
