//! `quiver call tool_search` right after start: the command waits for the
//! MCP servers' first connection and then for their tools' search segments
//! (built in the background), so its one search finds a server's tools
//! instead of answering from the index of the moment before they arrived.
//! A large server makes that background build long enough to be seen.

use serde_json::Value;

#[test]
fn a_large_servers_tools_are_found_by_the_first_search() {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir(temp.path().join("work")).unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: work\nmcp_servers:\n  big:\n    command: {}\n    args: [\"--tools\", \"4000\", \"--page-size\", \"1000\"]\n",
            quiver_tests::mcp_test_server().display(),
        ),
    )
    .unwrap();
    let search = quiver_tests::quiver(&[
        "call",
        "tool_search",
        "--config",
        quiver_tests::arg(&config),
        "--wait-s",
        "60",
        "--arguments",
        r#"{"query": "add two numbers sum"}"#,
    ]);
    let stderr = String::from_utf8_lossy(&search.stderr);
    assert!(search.status.success(), "{stderr}");
    let found: Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(
        found["matches"][0]["name"], "mcp_big_add",
        "{found}\n{stderr}"
    );
}
