//! A plugin and an MCP server of the same name (`time`) are two groups in
//! the listing, each labelled with its toolset (`plugin-time`,
//! `mcp-time`); `server:mcp-time` searches the server only, `server:time`
//! both, and the empty-result note names both.

use quiver_tests::{arg, install_plugin, plugin_so, quiver};
use serde_json::Value;

fn call(config: &std::path::Path, tool: &str, arguments: &str) -> Value {
    let out = quiver(&[
        "call",
        tool,
        "--config",
        arg(config),
        "--wait-s",
        "30",
        "--arguments",
        arguments,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn sources(result: &Value) -> Vec<(String, String)> {
    result["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {result}"))
        .iter()
        .map(|r| {
            let source = r["source"].as_str().unwrap_or_default().to_owned();
            let group = r["server"]
                .as_str()
                .or(r["plugin"].as_str())
                .unwrap_or_default()
                .to_owned();
            (source, group)
        })
        .collect()
}

#[test]
fn plugin_time_and_server_time_are_two_groups() {
    let temp = tempfile::tempdir().unwrap();
    let plugins = temp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install_plugin(&plugin_so("time"), &plugins, "libquiver_plugin_time.so");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "plugins:\n  dirs: [plugins]\n  state_dir: state\nserve:\n  state_dir: state\nmcp_servers:\n  time:\n    command: {}\ntools:\n  tool_search:\n    enabled: on\n",
            quiver_tests::mcp_test_server().display()
        ),
    )
    .unwrap();

    let assembled = quiver(&[
        "catalog",
        "assemble",
        "--config",
        arg(&config),
        "--context-tokens",
        "64000",
        "--json",
    ]);
    assert!(
        assembled.status.success(),
        "{}",
        String::from_utf8_lossy(&assembled.stderr)
    );
    let assembled: Value = serde_json::from_slice(&assembled.stdout).unwrap();
    let listing = assembled.to_string();
    assert!(listing.contains("plugin-time ("), "{listing}");
    assert!(listing.contains("mcp-time ("), "{listing}");

    let only_server = call(
        &config,
        "tool_search",
        r#"{"query": "server:mcp-time echo text"}"#,
    );
    let found = sources(&only_server);
    assert!(!found.is_empty(), "{only_server}");
    assert!(
        found
            .iter()
            .all(|(source, group)| source == "mcp" && group == "time"),
        "{only_server}"
    );
    let only_plugin = call(
        &config,
        "tool_search",
        r#"{"query": "server:plugin-time current time"}"#,
    );
    let found = sources(&only_plugin);
    assert!(!found.is_empty(), "{only_plugin}");
    assert!(
        found.iter().all(|(source, _)| source == "plugin"),
        "{only_plugin}"
    );
    // `server:time` takes both: each finds its own tools through it.
    for (query, kind) in [
        ("server:time echo text", "mcp"),
        ("server:time current time", "plugin"),
    ] {
        let result = call(
            &config,
            "tool_search",
            &serde_json::json!({ "query": query }).to_string(),
        );
        assert!(
            sources(&result).iter().any(|(source, _)| source == kind),
            "{result}"
        );
    }

    let nothing = call(&config, "tool_search", r#"{"query": "zzqx vorpal"}"#);
    let note = nothing.to_string();
    assert!(
        note.contains("mcp-time") && note.contains("plugin-time"),
        "{note}"
    );
}
