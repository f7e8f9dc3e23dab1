//! A plugin's lifecycle: its `plugins.config.NAME` section is checked
//! against the schema it declares and handed to `init` (a bad section, a
//! missing one, a refusing `init` or a section for a plugin that takes
//! none refuse the load, naming the key); its `tracing` events land in the
//! host's log under its name; its structured errors reach the model with
//! their code and data; its shutdown hook runs when it stops serving.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so, quiver_command, wait_until};
use quiver_tool::executor::ToolError;
use quiver_tool::registry::ToolRegistry;
use serde_json::{Value, json};

fn host(temp: &tempfile::TempDir, config: Value) -> PluginHost {
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(5);
    options.config = serde_json::from_value(config).unwrap();
    PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap()
}

fn failure(outcome: ReloadOutcome) -> String {
    match outcome {
        ReloadOutcome::Failed(message) => message,
        other => panic!("loaded: {other:?}"),
    }
}

#[test]
fn config_reaches_init_errors_keep_their_code_and_shutdown_runs() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("configured"), &dir, "configured.so");
    let marker = temp.path().join("shut-down");
    let host = host(
        &temp,
        json!({"configured": {"greeting": "hi", "shutdown_file": marker}}),
    );
    assert!(matches!(
        host.reload_path(&path),
        ReloadOutcome::Loaded { .. }
    ));
    let spec = host.generation_for("greet").unwrap().tools()[0].clone();
    assert_eq!(
        spec.metadata.as_ref().unwrap().title.as_deref(),
        Some("Greet")
    );
    assert_eq!(
        host.call_blocking("greet", &json!({"name": "Ada"}))
            .unwrap()["text"],
        "hi, Ada"
    );
    let error = ToolError::from(
        host.call_blocking("greet", &json!({"name": ""}))
            .unwrap_err(),
    );
    let model_sees = error.to_json();
    assert_eq!(model_sees["error"], "invalid_argument", "{model_sees}");
    assert_eq!(model_sees["data"]["field"], "name", "{model_sees}");
    assert!(!marker.exists());
    assert!(host.remove_path(&path));
    assert!(wait_until(Duration::from_secs(5), || marker.exists()));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "hi");
}

#[test]
fn bad_missing_or_unwanted_config_and_a_refusing_init_are_refused() {
    let cases = [
        (
            json!({"configured": {"greeting": 3}}),
            "bad configuration: plugins.config.configured.greeting",
        ),
        (json!({}), "bad configuration: plugins.config.configured"),
        (
            json!({"configured": {"greeting": "hi", "extra": 1}}),
            "bad configuration: plugins.config.configured",
        ),
        (
            json!({"configured": {"greeting": "hi", "refuse": true}}),
            "init failed (refused): told to refuse by its config",
        ),
    ];
    for (config, expected) in cases {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("plugins");
        std::fs::create_dir(&dir).unwrap();
        let path = install_plugin(&plugin_so("configured"), &dir, "configured.so");
        let message = failure(host(&temp, config.clone()).reload_path(&path));
        assert!(message.contains(expected), "{config}: {message}");
    }
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("text"), &dir, "text.so");
    let message = failure(host(&temp, json!({"text": {"x": 1}})).reload_path(&path));
    assert!(
        message.contains("plugins.config.text is set, but plugin `text` takes no configuration"),
        "{message}"
    );
}

#[test]
fn plugin_log_events_land_in_the_hosts_log_under_its_name() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "plugins:\n  config:\n    configured:\n      greeting: howdy\n",
    )
    .unwrap();
    let output = quiver_command()
        .env("QUIVER_LOG", "info")
        .args(["plugin", "check", "--dev", "--config"])
        .arg(&config)
        .arg(plugin_so("configured"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let log = String::from_utf8_lossy(&output.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("configured") && l.contains("howdy"))
        .unwrap_or_else(|| panic!("no plugin log line in {log}"));
    assert!(
        line.contains("quiver::plugin") && line.contains("plugin=\"configured\""),
        "{line}"
    );
}
