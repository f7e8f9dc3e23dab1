//! Loads that fail (malformed manifest, a plugin name or tool another file
//! already has) are refused with the reason in the status, and whatever
//! served before keeps serving; dotfiles, `*.tmp` and unchanged files do
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so, wait_until};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

fn setup() -> (tempfile::TempDir, std::path::PathBuf, PluginHost) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(5);
    let host = PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap();
    (temp, dir, host)
}

#[test]
fn malformed_manifest_is_refused_and_the_old_generation_serves() {
    let (_temp, dir, host) = setup();
    let path = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    assert!(matches!(
        host.reload_path(&path),
        ReloadOutcome::Loaded { .. }
    ));
    install_plugin(&plugin_so("bad_manifest"), &dir, "echo.so");
    let ReloadOutcome::Failed(message) = host.reload_path(&path) else {
        panic!("the malformed manifest loaded");
    };
    assert!(
        message.contains("echo.so: bad manifest: tool `broken`"),
        "{message}"
    );
    assert_eq!(host.list()[0].last_error.as_deref(), Some(message.as_str()));
    assert_eq!(
        host.call_blocking("echo", &json!({})).unwrap()["version"],
        1
    );
}

#[test]
fn a_second_file_with_the_same_plugin_is_refused() {
    let (_temp, dir, host) = setup();
    let first = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    let second = install_plugin(&plugin_so("echo_v2"), &dir, "echo-copy.so");
    host.reload_path(&first);
    let ReloadOutcome::Failed(message) = host.reload_path(&second) else {
        panic!("a duplicate plugin loaded");
    };
    assert!(
        message.contains("plugin `echo` is already loaded from"),
        "{message}"
    );
    assert_eq!(
        host.call_blocking("echo", &json!({})).unwrap()["version"],
        1
    );
}

#[test]
fn unchanged_dotfiles_and_tmp_files_do_nothing() {
    let (_temp, dir, host) = setup();
    let path = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    let host = Arc::new(host);
    let _watcher = PluginWatcher::start(
        host.clone(),
        std::slice::from_ref(&dir),
        Duration::from_millis(30),
    )
    .unwrap();
    assert!(matches!(
        host.reload_path(&path),
        ReloadOutcome::Loaded { generation: 1, .. } | ReloadOutcome::Unchanged
    ));
    assert_eq!(host.reload_path(&path), ReloadOutcome::Unchanged);
    assert_eq!(
        host.reload_path(&dir.join(".echo.so")),
        ReloadOutcome::Ignored
    );
    assert_eq!(
        host.reload_path(&dir.join("echo.so.tmp")),
        ReloadOutcome::Ignored
    );

    // A touch (same bytes) and stray dotfiles or temp files under the watcher.
    std::fs::copy(plugin_so("echo_v2"), dir.join(".hidden.so")).unwrap();
    std::fs::copy(plugin_so("echo_v2"), dir.join("next.so.tmp")).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, bytes).unwrap();
    // A marker plugin installed last: once it is loaded, the watcher has
    // handled every earlier event.
    install_plugin(&plugin_so("panicky"), &dir, "marker.so");
    assert!(wait_until(Duration::from_secs(10), || host
        .generation_for("ok")
        .is_some()));
    let statuses = host.list();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    assert_eq!(host.generation_for("echo").unwrap().number(), 1);
    assert_eq!(host.loaded_generations(), 2);
}
