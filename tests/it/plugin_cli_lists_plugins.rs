//! `quiver plugin list` loads the configured plugin directories and shows
//! each plugin's generation, hash, tools, health and last error;
//! `quiver plugin check` prints a good plugin's manifest.

use quiver_tests::{install_plugin, plugin_so, quiver, quiver_json_lines};

#[test]
fn list_shows_loaded_and_failed_plugins() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("text"), &dir, "text.so");
    install_plugin(&plugin_so("bad_manifest"), &dir, "broken.so");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(&config, "plugins:\n  dirs: [plugins]\n  state_dir: state\n").unwrap();

    let lines = quiver_json_lines(&[
        "plugin",
        "list",
        "--config",
        config.to_str().unwrap(),
        "--json",
    ]);
    let plugins = lines[0]["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 2);
    let broken = &plugins[0];
    assert!(broken["file"].as_str().unwrap().ends_with("broken.so"));
    assert!(broken["generation"].is_null());
    // It serves nothing, so it is not reported healthy.
    assert_eq!(broken["health"], "not_loaded");
    assert!(
        broken["last_error"]
            .as_str()
            .unwrap()
            .contains("bad manifest")
    );
    let text = &plugins[1];
    assert_eq!(text["name"], "text");
    assert_eq!(text["generation"], 1);
    assert_eq!(text["health"], "healthy");
    assert_eq!(text["sha256"].as_str().unwrap().len(), 64);
    assert!(
        text["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "regex_find")
    );

    let checked = quiver_json_lines(&[
        "plugin",
        "check",
        "--json",
        dir.join("text.so").to_str().unwrap(),
    ]);
    assert_eq!(checked[0]["name"], "text");
    assert_eq!(checked[0]["tools"].as_array().unwrap().len(), 6);
    let human = quiver(&["plugin", "check", dir.join("text.so").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("regex_replace"));
}
