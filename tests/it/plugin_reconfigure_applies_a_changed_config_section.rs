//! A config reload that changes a plugin's `plugins.config.NAME` (its file
//! unchanged) loads a new generation whose `init` got the new section; a
//! reload that leaves it alone keeps the generation; a plugin refused for
//! its section is loaded once a reload gives it a good one.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use serde_json::{Value, json};

fn options(temp: &tempfile::TempDir, config: Value) -> PluginHostOptions {
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(5);
    options.config = serde_json::from_value(config).unwrap();
    options
}

fn greeting(host: &PluginHost) -> String {
    host.call_blocking("greet", &json!({"name": "Ada"}))
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn outcome_of(outcomes: &[(std::path::PathBuf, ReloadOutcome)]) -> &ReloadOutcome {
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    &outcomes[0].1
}

#[test]
fn a_changed_section_loads_a_new_generation_and_an_unchanged_one_does_not() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("configured"), &dir, "configured.so");
    let dirs = vec![dir.clone()];
    let host = PluginHost::new(
        Arc::new(ToolRegistry::new()),
        options(&temp, json!({"configured": {"greeting": "hi"}})),
    )
    .unwrap();
    host.load_dirs(&dirs);
    assert_eq!(greeting(&host), "hi, Ada");

    let (removed, loaded) = host.reconfigure(
        options(&temp, json!({"configured": {"greeting": "hello"}})),
        &dirs,
    );
    assert!(removed.is_empty(), "{removed:?}");
    assert!(
        matches!(
            outcome_of(&loaded),
            ReloadOutcome::Loaded { generation: 2, .. }
        ),
        "{loaded:?}"
    );
    assert_eq!(greeting(&host), "hello, Ada");

    let (_, loaded) = host.reconfigure(
        options(&temp, json!({"configured": {"greeting": "hello"}})),
        &dirs,
    );
    assert!(
        matches!(outcome_of(&loaded), ReloadOutcome::Unchanged),
        "{loaded:?}"
    );
    assert_eq!(host.generation_for("greet").unwrap().number(), 2);
}

#[test]
fn a_plugin_refused_for_its_section_loads_once_a_reload_fixes_it() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("configured"), &dir, "configured.so");
    let dirs = vec![dir.clone()];
    let host = PluginHost::new(
        Arc::new(ToolRegistry::new()),
        options(&temp, json!({"configured": {"greeting": 3}})),
    )
    .unwrap();
    let loaded = host.load_dirs(&dirs);
    match outcome_of(&loaded) {
        ReloadOutcome::Failed(message) => assert!(
            message.contains("plugins.config.configured.greeting"),
            "{message}"
        ),
        other => panic!("loaded with a bad section: {other:?}"),
    }
    assert!(host.generation_for("greet").is_none());

    let (_, loaded) = host.reconfigure(
        options(&temp, json!({"configured": {"greeting": "hey"}})),
        &dirs,
    );
    assert!(
        matches!(outcome_of(&loaded), ReloadOutcome::Loaded { .. }),
        "{loaded:?}"
    );
    assert_eq!(greeting(&host), "hey, Ada");
}
