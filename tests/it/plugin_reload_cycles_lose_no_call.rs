//! Fifty reloads in a row under the watcher, with calls running all the
//! while: no crash, no failed or lost call, and every generation serves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher};
use quiver_tests::{install_plugin, plugin_so, wait_until};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

const CYCLES: u64 = 50;

#[test]
fn fifty_reloads_without_a_lost_call() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(2);
    let host = Arc::new(PluginHost::new(Arc::new(ToolRegistry::new()), options).unwrap());
    let _watcher = PluginWatcher::start(
        host.clone(),
        std::slice::from_ref(&dir),
        Duration::from_millis(20),
    )
    .unwrap();
    let versions = [plugin_so("echo_v1"), plugin_so("echo_v2")];
    install_plugin(&versions[0], &dir, "echo.so");
    assert!(wait_until(Duration::from_secs(10), || host
        .generation_for("echo")
        .is_some()));

    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let (host, stop, calls) = (host.clone(), stop.clone(), calls.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let answer = host.call_blocking("echo", &json!({"text": "x"}));
                    let answer =
                        answer.unwrap_or_else(|e| panic!("call failed during reloads: {e}"));
                    assert!(answer["version"] == 1 || answer["version"] == 2);
                    calls.fetch_add(1, Ordering::Relaxed);
                    // Leave the two cores some room for the watcher.
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        })
        .collect();

    for cycle in 1..=CYCLES {
        let version = (cycle % 2) as usize; // 1: v2, 0: v1
        install_plugin(&versions[version], &dir, "echo.so");
        let generation = cycle + 1;
        assert!(
            wait_until(Duration::from_secs(10), || {
                host.generation_for("echo")
                    .is_some_and(|g| g.number() == generation)
            }),
            "cycle {cycle}: generation {generation} never loaded: {:?}",
            host.list()
        );
        let answer = host.call_blocking("echo", &json!({})).unwrap();
        assert_eq!(answer["version"], version as u64 + 1);
    }
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.join().unwrap();
    }
    assert!(calls.load(Ordering::Relaxed) > CYCLES);
    assert_eq!(host.loaded_generations(), CYCLES + 1);
    assert!(host.list()[0].last_error.is_none());
}
