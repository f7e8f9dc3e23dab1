//! A loaded plugin's tools are deferred behind the bridge: they are listed
//! under the plugin's name, found by `tool_search`, and `tool_call`
//! resolves to a call the plugin host runs.

use std::sync::Arc;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_plugins::{PluginHost, PluginHostOptions};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use serde_json::json;

#[tokio::test]
async fn plugin_tools_are_searchable_listed_and_callable() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("text"), &dir, "text.so");
    install_plugin(&plugin_so("time"), &dir, "time.so");
    let registry = Arc::new(ToolRegistry::new());
    let host = PluginHost::new(
        registry.clone(),
        PluginHostOptions::new(temp.path().join("state")),
    )
    .unwrap();
    host.load_dirs(&[dir]);

    let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    );
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

    let call = bridge::call(
        &assembly,
        &json!({"name": "regex_replace", "arguments": {"text": "a-b", "pattern": "-", "replacement": "+"}}),
    )
    .unwrap();
    assert_eq!(host.call_resolved(&call).await.unwrap()["text"], "a+b");
}
