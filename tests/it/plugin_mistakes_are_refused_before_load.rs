//! Plugin mistakes are refused before anything is served, with the same
//! message from `quiver plugin check` and from the daemon's loader: an
//! input schema that is not a valid JSON Schema (naming the tool and the
//! place in the schema), a tool named like a core tool (naming the owner),
//! and a plugin built against quiver-plugin-api 0.1 (naming both versions
//! and the version to rebuild against).

use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_tests::{install_plugin, plugin_so, quiver};

/// Each fixture and what its refusal must say.
const MISTAKES: &[(&str, &[&str])] = &[
    (
        "bad_schema",
        &[
            "bad manifest: tool `shout`: input schema is not a valid JSON Schema at /properties/text/type",
        ],
    ),
    (
        "core_name",
        &[
            "tool `read_file` is already offered by core",
            "rename the plugin's tool",
        ],
    ),
    (
        "abi_mismatch",
        &[
            "ABI mismatch",
            "quiver-plugin-api 0.1 (plugin ABI 1)",
            "this host speaks plugin ABI 2 (quiver-plugin-api 0.2.0)",
            "rebuild it against quiver-plugin-api 0.2.0",
        ],
    ),
];

#[test]
fn plugin_check_refuses_each_mistake() {
    for (fixture, expected) in MISTAKES {
        let output = quiver(&[
            "plugin",
            "check",
            "--dev",
            plugin_so(fixture).to_str().unwrap(),
        ]);
        assert!(!output.status.success(), "{fixture} passed the check");
        let stderr = String::from_utf8_lossy(&output.stderr);
        for part in *expected {
            assert!(
                stderr.contains(part),
                "{fixture}: `{part}` missing from {stderr}"
            );
        }
    }
}

#[tokio::test]
async fn the_daemon_refuses_each_mistake_and_serves_the_rest() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("text"), &dir, "text.so");
    for (fixture, _) in MISTAKES {
        install_plugin(&plugin_so(fixture), &dir, &format!("{fixture}.so"));
    }
    let mut config = Config::default();
    config.plugins.dirs = vec![dir.clone()];
    config.serve.state_dir = Some(temp.path().join("state"));
    config.core_tools.workspace = temp.path().to_path_buf();
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let statuses = daemon.plugins().list();
    for (fixture, expected) in MISTAKES {
        let file = dir.join(format!("{fixture}.so"));
        let status = statuses.iter().find(|s| s.file == file).unwrap();
        assert!(status.generation.is_none(), "{fixture} loaded");
        let error = status.last_error.as_deref().unwrap_or_default();
        for part in *expected {
            assert!(
                error.contains(part),
                "{fixture}: `{part}` missing from {error}"
            );
        }
    }
    let registry = daemon.plugins().registry().snapshot();
    assert!(registry.get("shout").is_none());
    assert_eq!(
        registry.get("read_file").unwrap().source().toolset(),
        "core"
    );
    assert!(registry.get("word_count").is_some());
    daemon.shutdown().await;
}
