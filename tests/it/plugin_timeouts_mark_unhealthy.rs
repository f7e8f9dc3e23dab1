//! A call slower than `plugins.call_timeout_ms` fails with a timeout; after
//! repeated timeouts the plugin is reported unhealthy and not called, until
//! a new generation loads.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{Health, PluginCallError, PluginHost, PluginHostOptions};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_timeouts_make_a_plugin_unhealthy() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("slow"), &dir, "slow.so");
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.call_timeout = Duration::from_millis(100);
    let host = PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap();
    host.reload_path(&path);

    assert_eq!(
        host.call("sleep", &json!({"ms": 1})).await.unwrap()["slept_ms"],
        1
    );
    for attempt in 1..=3 {
        let error = host.call("sleep", &json!({"ms": 400})).await.unwrap_err();
        assert!(
            matches!(
                error,
                PluginCallError::Timeout {
                    timeout_ms: 100,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(host.list()[0].consecutive_timeouts, attempt);
    }
    assert_eq!(host.list()[0].health, Health::Unhealthy);
    let refused = host.call("sleep", &json!({"ms": 1})).await.unwrap_err();
    assert!(
        matches!(refused, PluginCallError::Unhealthy { .. }),
        "{refused}"
    );
    assert!(host.list_json()["plugins"][0]["health"] == "unhealthy");
}
