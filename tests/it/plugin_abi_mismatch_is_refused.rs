//! A plugin whose root module has another layout (one built against
//! quiver-plugin-api 0.1) is refused at load with an error naming the
//! file, what differs and the version to rebuild against, by the host and
//! by `quiver plugin check`.

use std::sync::Arc;

use quiver_plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_tests::{install_plugin, plugin_so, quiver};
use quiver_tool::registry::ToolRegistry;

#[test]
fn layout_mismatch_names_file_and_difference() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let path = install_plugin(&plugin_so("abi_mismatch"), &dir, "mismatch.so");
    let host = PluginHost::new(
        Arc::new(ToolRegistry::new()),
        PluginHostOptions::new(temp.path().join("state")),
    )
    .unwrap();
    let ReloadOutcome::Failed(message) = host.reload_path(&path) else {
        panic!("the mismatched plugin loaded");
    };
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("ABI mismatch"), "{message}");
    assert!(message.contains("user:0.2.0 library:0.1.0"), "{message}");
    assert!(
        message.contains("rebuild it against quiver-plugin-api 0.2.0"),
        "{message}"
    );
    assert!(host.registry().snapshot().is_empty());

    let output = quiver(&["plugin", "check", path.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error:") && stderr.contains("ABI mismatch"),
        "{stderr}"
    );
}
