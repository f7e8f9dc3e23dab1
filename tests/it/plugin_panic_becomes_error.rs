//! A panic inside a plugin comes back as an error and the host keeps
//! running and calling the plugin.

use std::sync::Arc;

use quiver_plugins::{PluginCallError, PluginHost, PluginHostOptions};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

#[tokio::test]
async fn panic_is_an_error_and_the_host_lives() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("panicky"), &dir, "panicky.so");
    let host = PluginHost::new(
        Arc::new(ToolRegistry::new()),
        PluginHostOptions::new(temp.path().join("state")),
    )
    .unwrap();
    host.reload_path(&path);
    for _ in 0..3 {
        match host.call("boom", &json!({})).await {
            Err(PluginCallError::Panicked {
                plugin,
                tool,
                message,
            }) => {
                assert_eq!((plugin.as_str(), tool.as_str()), ("panicky", "boom"));
                assert!(message.contains("boom went the plugin"), "{message}");
            }
            other => panic!("expected a panic error, got {other:?}"),
        }
        assert_eq!(host.call("ok", &json!({})).await.unwrap(), json!("ok"));
    }
    let blocking = host.call_blocking("boom", &json!({})).unwrap_err();
    assert!(matches!(blocking, PluginCallError::Panicked { .. }));
}
