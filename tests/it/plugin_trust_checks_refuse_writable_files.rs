//! Plugin files and directories writable by others are refused with a
//! clear error (like sshd's StrictModes) unless `--dev`; `plugins.pin`
//! refuses a file whose sha256 differs.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;

fn host(temp: &std::path::Path, configure: impl FnOnce(&mut PluginHostOptions)) -> PluginHost {
    let mut options = PluginHostOptions::new(temp.join("state"));
    configure(&mut options);
    PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap()
}

#[test]
fn writable_files_and_directories_are_refused_unless_dev() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let ReloadOutcome::Failed(message) = host(temp.path(), |_| {}).reload_path(&path) else {
        panic!("a world-writable plugin loaded");
    };
    assert!(
        message.contains("echo.so") && message.contains("writable by anyone"),
        "{message}"
    );
    assert!(message.contains("--dev"), "{message}");

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
    let ReloadOutcome::Failed(message) = host(temp.path(), |_| {}).reload_path(&path) else {
        panic!("a plugin in a group-writable directory loaded");
    };
    assert!(message.contains("writable by its group"), "{message}");

    let dev = host(temp.path(), |o| o.dev = true);
    assert!(matches!(
        dev.reload_path(&path),
        ReloadOutcome::Loaded { .. }
    ));
}

#[test]
fn pinned_hash_must_match() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    let wrong = host(temp.path(), |o| {
        o.pin.insert("echo".into(), "0".repeat(64));
    });
    let ReloadOutcome::Failed(message) = wrong.reload_path(&path) else {
        panic!("a plugin with the wrong hash loaded");
    };
    assert!(message.contains("plugins.pin.echo"), "{message}");

    let digest = quiver_plugins::files::sha256_hex(&std::fs::read(&path).unwrap());
    let right = host(temp.path(), |o| {
        o.pin.insert("echo".into(), digest.clone());
    });
    assert!(matches!(
        right.reload_path(&path),
        ReloadOutcome::Loaded { .. }
    ));
    assert_eq!(right.list()[0].sha256.as_deref(), Some(digest.as_str()));
}
