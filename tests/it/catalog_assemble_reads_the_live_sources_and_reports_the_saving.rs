//! `quiver catalog assemble --config quiver.yaml` with no `--catalog`
//! assembles what the config's live sources (plugins, MCP servers, core
//! tools) give, and `--json` reports `tokens_without_tool_search`,
//! `tokens_with_tool_search` and the saving; `quiver tools dump` writes
//! the same live catalog in the shared catalog format, which assembles to
//! the same deferred tools, server by server. `/v1/catalog` of a daemon
//! on the same config reports the same saving.

use quiver_tests::daemon;

use daemon::{Fixture, TestDaemon};
use quiver_tests::{arg, assemble, quiver, read_json};

#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_reports_the_same_saving_as_the_command() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let live = assemble(&[], Some(&config), 64_000);
    let daemon = TestDaemon::start(&config, &fixture.state());
    let mut catalog = serde_json::Value::Null;
    for _ in 0..600 {
        catalog = daemon.get("/v1/catalog?context_tokens=64000").await.1;
        if catalog["deferred_count"] == live["deferred_count"] {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for key in [
        "tokens_without_tool_search",
        "tokens_with_tool_search",
        "bridge_tokens",
        "saved_tokens",
        "saved_pct",
    ] {
        assert_eq!(catalog[key], live[key], "{key}: {catalog}");
    }
}

#[test]
fn live_sources_assemble_with_their_saving_and_dump_as_a_catalog() {
    let fixture = Fixture::new();
    let config = fixture.config("http://127.0.0.1:9", "");
    let live = assemble(&[], Some(&config), 64_000);
    let names: Vec<&str> = live["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    // Core tools eagerly, the plugin's and the MCP server's behind the bridge.
    assert!(
        names.contains(&"read_file") && names.contains(&"tool_search"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"word_count") && !names.contains(&"mcp_test_echo"),
        "{names:?}"
    );
    let servers: Vec<&str> = live["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        servers.contains(&"test") && servers.contains(&"text"),
        "{servers:?}"
    );
    let without = live["tokens_without_tool_search"].as_u64().unwrap();
    let with = live["tokens_with_tool_search"].as_u64().unwrap();
    let sent: u64 = live["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| quiver_tests::tokens_of(&t.to_string()))
        .sum();
    // What is sent is the tools array; without tool search, every deferred
    // definition comes on top of the eager ones.
    assert!(
        with.abs_diff(sent) <= names.len() as u64,
        "{with} vs {sent}"
    );
    assert!(without > with, "{live}");
    assert_eq!(
        live["saved_tokens"].as_i64().unwrap(),
        without as i64 - with as i64
    );
    let pct = live["saved_pct"].as_f64().unwrap();
    let expected = (without - with) as f64 * 100.0 / without as f64;
    assert!((pct - expected).abs() < 0.06, "{pct} vs {expected}");
    assert!(live["bridge_tokens"].as_u64().unwrap() > 0);

    let dumped = fixture.path().join("dumped.json");
    let output = quiver(&[
        "tools",
        "dump",
        "--config",
        arg(&config),
        "--output",
        arg(&dumped),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let document = read_json(&dumped);
    let dumped_servers = quiver_tests::server_sizes(&document);
    assert!(
        dumped_servers
            .iter()
            .any(|(name, n)| name == "test" && *n > 0)
            && dumped_servers
                .iter()
                .any(|(name, n)| name == "text" && *n > 0),
        "{dumped_servers:?}"
    );
    for tool in document["servers"][0]["tools"].as_array().unwrap() {
        assert!(
            tool["name"].is_string() && tool["inputSchema"]["type"] == "object",
            "{tool}"
        );
    }
    // The dump is a catalog file: it assembles to the same deferred tools.
    let from_dump = assemble(&[&dumped], None, 64_000);
    assert_eq!(from_dump["deferred_count"], live["deferred_count"]);
    // Server by server (a plugin comes back as a server of the same name,
    // so its exposed names gain the `mcp_NAME_` prefix and cost more).
    let sizes = |assembly: &serde_json::Value| -> Vec<(String, u64)> {
        assembly["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_owned(),
                    s["tools"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(sizes(&from_dump), sizes(&live));
}
