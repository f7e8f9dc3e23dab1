//! Replacing a plugin file by atomic rename loads a new generation under
//! the watcher: new calls go to it while a call in flight on the old
//! generation completes there.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher};
use quiver_tests::{install_plugin, plugin_so, wait_until};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_calls_go_to_the_new_generation_and_old_calls_finish() {
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

    install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    assert!(wait_until(Duration::from_secs(10), || host
        .generation_for("echo")
        .is_some()));
    assert_eq!(host.call("echo", &json!({})).await.unwrap()["version"], 1);

    let started = temp.path().join("started");
    let in_flight = {
        let host = host.clone();
        let started = started.display().to_string();
        tokio::spawn(async move {
            host.call("echo", &json!({"delay_ms": 1500, "started_file": started}))
                .await
        })
    };
    assert!(wait_until(Duration::from_secs(5), || started.exists()));

    install_plugin(&plugin_so("echo_v2"), &dir, "echo.so");
    assert!(wait_until(Duration::from_secs(10), || {
        host.generation_for("echo").is_some_and(|g| g.number() == 2)
    }));
    assert!(
        !in_flight.is_finished(),
        "the old call should still be running"
    );
    assert_eq!(host.call("echo", &json!({})).await.unwrap()["version"], 2);
    let old = in_flight.await.unwrap().unwrap();
    assert_eq!(old["version"], 1);
    assert_eq!(host.list()[0].version.as_deref(), Some("2.0.0"));
}
