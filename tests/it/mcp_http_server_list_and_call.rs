//! A Streamable HTTP server on 127.0.0.1, configured in `quiver.yaml` with
//! a bearer token from the environment (`${VAR}`): its tools join the
//! catalog, are found by `tool_search` and are called through `tool_call`
//! (by `quiver call`, with the token in that process's environment only).
//! A wrong token leaves the server failing, with the reason in `quiver
//! status`.

use std::process::Command;

use serde_json::Value;

/// Starts the test server in HTTP mode on a free 127.0.0.1 port; returns
/// it and its URL.
fn http_server(args: &[&str]) -> (quiver_tests::KillOnDrop, String) {
    let mut command = Command::new(quiver_tests::mcp_test_server());
    command.args(["--http", "127.0.0.1:0"]).args(args);
    let (server, url) = quiver_tests::spawn_serving_url(command);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (server, url)
}

/// Runs `quiver` with the token in its environment only (never in this
/// test process's, which other tests share).
fn quiver_with_token(args: &[&str]) -> std::process::Output {
    quiver_tests::quiver_command()
        .args(args)
        .env("QUIVER_TEST_MCP_TOKEN", "s3cret")
        .output()
        .unwrap()
}

#[test]
fn http_tools_are_listed_found_and_called_with_a_token() {
    let (_server, url) = http_server(&["--require-header", "authorization=Bearer s3cret"]);
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        format!(
            "serve:\n  state_dir: state\ncore_tools:\n  workspace: .\nmcp_servers:\n  remote:\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{QUIVER_TEST_MCP_TOKEN}}\"\n    call_timeout_s: 20\n  wrong:\n    url: {url}\n    headers:\n      Authorization: \"Bearer nope\"\n    connect_timeout_s: 5\n"
        ),
    )
    .unwrap();
    let config = quiver_tests::arg(&config);

    let search = quiver_with_token(&[
        "call",
        "tool_search",
        "--config",
        config,
        "--arguments",
        r#"{"query": "add two numbers sum"}"#,
    ]);
    let found: Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(found["matches"][0]["name"], "mcp_remote_add", "{found}");

    let call = quiver_with_token(&[
        "call",
        "tool_call",
        "--config",
        config,
        "--arguments",
        r#"{"name": "mcp_remote_add", "arguments": {"a": 40, "b": 2}}"#,
    ]);
    let stderr = String::from_utf8_lossy(&call.stderr);
    assert!(call.status.success(), "{stderr}");
    let result: Value = serde_json::from_slice(&call.stdout).unwrap();
    assert_eq!(result["structured_content"]["sum"], 42.0, "{result}");

    // The server with a wrong token fails, with the reason in its status.
    let status = quiver_with_token(&["status", "--config", config, "--json", "--wait-s", "10"]);
    let stdout = String::from_utf8_lossy(&status.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let server = |name: &str| {
        lines
            .iter()
            .find(|l| l["kind"] == "mcp_server" && l["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {stdout}"))
            .clone()
    };
    assert_eq!(server("remote")["state"], "ready", "{stdout}");
    let wrong = server("wrong");
    assert_eq!(wrong["state"], "failed", "{stdout}");
    let text = wrong.to_string();
    assert!(
        text.contains("401") || text.to_lowercase().contains("unauthorized"),
        "{text}"
    );
}
