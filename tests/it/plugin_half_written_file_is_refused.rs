//! A plugin file that is written in place and left truncated is refused
//! with a reason, and the previous generation keeps serving.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher};
use quiver_tests::{install_plugin, plugin_so, wait_until};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

#[tokio::test]
async fn truncated_file_keeps_the_old_generation() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(10);
    let host = Arc::new(PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap());
    let _watcher = PluginWatcher::start(
        host.clone(),
        std::slice::from_ref(&dir),
        Duration::from_millis(50),
    )
    .unwrap();
    let path = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    assert!(wait_until(Duration::from_secs(10), || host
        .generation_for("echo")
        .is_some()));

    let bytes = std::fs::read(plugin_so("echo_v2")).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(wait_until(Duration::from_secs(10), || host.list()[0]
        .last_error
        .is_some()));
    let status = &host.list()[0];
    let error = status.last_error.as_deref().unwrap();
    assert!(error.contains("echo.so"), "{error}");
    assert_eq!(status.generation, Some(1));
    assert_eq!(host.call("echo", &json!({})).await.unwrap()["version"], 1);
}
