//! `quiver plugin new` writes a crate that builds, passes its own harness
//! test, and loads into a real daemon whose dispatcher calls its tool.
//!
//! Slow (it builds the scaffold and its dependencies from scratch in its
//! own target directory), so it is `#[ignore]`d in the normal run and
//! `.ci/run` runs it explicitly. Cargo runs `--offline` with the
//! workspace's lock file: the workspace build has already fetched every
//! crate the scaffold needs, at those versions.

use std::process::Command;

use quiver_catalog::bridge;
use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::Session;
use quiver_tests::{install_plugin, quiver, workspace_root};
use quiver_tool::scope::Scope;
use serde_json::json;

fn cargo(dir: &std::path::Path, target: &std::path::Path, args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(args)
        .arg("--offline")
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
#[ignore = "slow: builds the scaffolded crate and its dependencies; .ci/run runs it"]
async fn scaffold_builds_passes_its_test_and_serves_calls() {
    let temp = tempfile::tempdir().unwrap();
    let crate_dir = temp.path().join("demo");
    let api = workspace_root().join("plugin-api");
    let created = quiver(&[
        "plugin",
        "new",
        "demo",
        "--dir",
        crate_dir.to_str().unwrap(),
        "--api-path",
        api.to_str().unwrap(),
    ]);
    assert!(created.status.success(), "{created:?}");
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("version = \"{}\"", quiver_plugin_api_version())),
        "{manifest}"
    );
    // The workspace's lock file, so the scaffold builds the versions the
    // workspace was built and tested with (the ones a fresh machine has
    // downloaded), not whatever else the machine's cargo cache holds.
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        crate_dir.join("Cargo.lock"),
    )
    .unwrap();
    let target = temp.path().join("target");
    cargo(&crate_dir, &target, &["build", "--quiet"]);
    cargo(&crate_dir, &target, &["test", "--quiet"]);

    let plugins = temp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install_plugin(
        &target.join("debug/libquiver_plugin_demo.so"),
        &plugins,
        "demo.so",
    );
    let mut config = Config::default();
    config.plugins.dirs = vec![plugins];
    config.serve.state_dir = Some(temp.path().join("state"));
    config.core_tools.workspace = temp.path().to_path_buf();
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let session = Session::new("s", Scope::all(), daemon.feed().clone());
    let assembly = daemon.assemble(&session, 200_000);
    let found = bridge::search(&assembly, &json!({"query": "greet someone by name"})).unwrap();
    assert_eq!(found["matches"][0]["name"], "demo_hello", "{found}");
    let request = json!({"name": "demo_hello", "arguments": {"name": "Ada"}});
    let result = daemon
        .dispatcher()
        .dispatch(&session, &assembly, "tool_call", &request)
        .await
        .unwrap();
    assert_eq!(result["greeting"], "hello, Ada");
    daemon.shutdown().await;
}

fn quiver_plugin_api_version() -> String {
    let text = std::fs::read_to_string(workspace_root().join("plugin-api/Cargo.toml")).unwrap();
    let line = text.lines().find(|l| l.starts_with("version = ")).unwrap();
    line.trim_start_matches("version = ")
        .trim_matches('"')
        .to_owned()
}
