//! A loaded plugin's tools are deferred behind the bridge: they are listed
//! under the plugin's name, found by `tool_search`, and `tool_call` runs
//! them through the dispatcher of the runtime `quiver serve` starts.

use quiver_catalog::bridge;
use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::Session;
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::scope::Scope;
use serde_json::json;

#[tokio::test]
async fn plugin_tools_are_searchable_listed_and_callable() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("text"), &dir, "text.so");
    install_plugin(&plugin_so("time"), &dir, "time.so");
    let mut config = Config::default();
    config.plugins.dirs = vec![dir];
    config.serve.state_dir = Some(temp.path().join("state"));
    config.core_tools.workspace = temp.path().to_path_buf();
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let session = Session::new("s", Scope::all(), daemon.feed().clone());
    let assembly = daemon.assemble(&session, 200_000);
    assert!(assembly.has_bridge());
    let listing = &assembly.listing().text;
    assert!(
        listing.contains("text") && listing.contains("time_convert"),
        "{listing}"
    );

    let found = bridge::search(&assembly, &json!({"query": "replace regular expression"})).unwrap();
    let first = &found["matches"][0];
    assert_eq!(first["name"], "regex_replace");
    assert_eq!(first["source"], "plugin");
    assert_eq!(first["plugin"], "text");
    let zones = bridge::search(&assembly, &json!({"query": "convert time zone"})).unwrap();
    assert_eq!(zones["matches"][0]["name"], "time_convert");

    let request = json!({"name": "regex_replace", "arguments": {"text": "a-b", "pattern": "-", "replacement": "+"}});
    let result = daemon
        .dispatcher()
        .dispatch(&session, &assembly, "tool_call", &request)
        .await
        .unwrap();
    assert_eq!(result["text"], "a+b");
    daemon.shutdown().await;
}
