//! Deleting a plugin file unregisters its tools: the next assembly no
//! longer lists or finds them.

use std::sync::Arc;
use std::time::Duration;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher};
use quiver_tests::{install_plugin, plugin_so, wait_until};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;

#[test]
fn removed_plugin_is_gone_from_the_next_assembly() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let registry = Arc::new(ToolRegistry::new());
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(10);
    let host = Arc::new(PluginHost::new(registry.clone(), options).unwrap());
    let _watcher = PluginWatcher::start(
        host.clone(),
        std::slice::from_ref(&dir),
        Duration::from_millis(50),
    )
    .unwrap();
    let path = install_plugin(&plugin_so("text"), &dir, "text.so");
    assert!(wait_until(Duration::from_secs(10), || registry
        .snapshot()
        .get("regex_find")
        .is_some()));

    let assembler = Assembler::new(ToolSearchConfig::default());
    let before = assembler.assemble(&registry.snapshot(), &Scope::all(), 200_000);
    assert_eq!(before.catalog().deferred_count(), 6);
    assert!(before.listing().text.contains("regex_find"));

    std::fs::remove_file(&path).unwrap();
    assert!(wait_until(Duration::from_secs(10), || registry
        .snapshot()
        .get("regex_find")
        .is_none()));
    let after = assembler.assemble(&registry.snapshot(), &Scope::all(), 200_000);
    assert_eq!(after.catalog().deferred_count(), 0);
    assert!(after.search("regex", None).is_empty());
    assert!(host.list().is_empty());
    assert!(host.generation_for("regex_find").is_none());
}
