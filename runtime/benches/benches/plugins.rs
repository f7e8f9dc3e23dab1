//! Plugin benchmarks: the host -> plugin -> host round trip of a trivial
//! tool, and the time from renaming a new `.so` into a watched directory to
//! its tools being in the registry (what the next assembly reads).
//!
//! Builds the echo fixture plugins in release mode first.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use quiver_plugins::{PluginHost, PluginHostOptions, PluginWatcher, watcher::DEFAULT_DEBOUNCE};
use quiver_tool::registry::ToolRegistry;
use serde_json::json;

fn echo_plugins() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "fixture-plugin-echo-v1",
            "-p",
            "fixture-plugin-echo-v2",
        ])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(status.success());
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release");
    (
        target.join("libfixture_plugin_echo_v1.so"),
        target.join("libfixture_plugin_echo_v2.so"),
    )
}

fn install(so: &Path, dir: &Path) {
    let tmp = dir.join(".echo.so.tmp");
    std::fs::copy(so, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("echo.so")).unwrap();
}

fn benches(c: &mut Criterion) {
    let (v1, v2) = echo_plugins();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install(&v1, &dir);
    let registry = Arc::new(ToolRegistry::new());
    let host = Arc::new(
        PluginHost::new(
            registry.clone(),
            PluginHostOptions::new(temp.path().join("state")),
        )
        .unwrap(),
    );
    host.load_dirs(std::slice::from_ref(&dir));
    let arguments = json!({"text": "hi"});

    c.bench_function("plugin call, same thread (trivial tool)", |b| {
        b.iter(|| host.call_blocking("echo", &arguments).unwrap())
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    c.bench_function("plugin call, blocking pool + timeout (trivial tool)", |b| {
        b.iter(|| runtime.block_on(host.call("echo", &arguments)).unwrap())
    });

    let _watcher =
        PluginWatcher::start(host.clone(), std::slice::from_ref(&dir), DEFAULT_DEBOUNCE).unwrap();
    let mut group = c.benchmark_group("plugin reload");
    group.sample_size(10);
    group.bench_function("rename to tools in registry (200 ms debounce)", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let current = host.generation_for("echo").unwrap();
                let before = current.number();
                let next = if current.version() == "1.0.0" {
                    &v2
                } else {
                    &v1
                };
                let start = Instant::now();
                install(next, &dir);
                while host.generation_for("echo").map_or(0, |g| g.number()) == before {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let snapshot = registry.snapshot();
                assert!(snapshot.get("echo").is_some());
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(plugins, benches);
criterion_main!(plugins);
