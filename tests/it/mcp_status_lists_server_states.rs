//! `quiver status` connects the configured servers for a few seconds and
//! prints each one's state; it exits non-zero when an enabled server is not
//! ready.

#[test]
fn status_prints_every_server() {
    let server = quiver_tests::mcp_test_server();
    let config = quiver_tests::scratch_path("status.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  good:\n    command: {}\n  off:\n    command: {}\n    enabled: false\n  broken:\n    command: /nonexistent/quiver-server\n",
            server.display(),
            server.display()
        ),
    )
    .unwrap();
    let output = quiver_tests::quiver(&[
        "status",
        "--config",
        quiver_tests::arg(&config),
        "--json",
        "--wait-s",
        "30",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let state = |name: &str| {
        lines
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from {stdout}"))
            .clone()
    };
    assert_eq!(state("good")["state"], "ready", "{stdout}");
    assert_eq!(state("good")["tools"], 12);
    assert_eq!(state("off")["state"], "disabled");
    assert_eq!(state("broken")["state"], "failed");
    assert!(
        state("broken")["error"]
            .as_str()
            .unwrap()
            .contains("cannot start")
    );
    assert!(
        !output.status.success(),
        "a failing server makes the exit code non-zero"
    );

    let output = quiver_tests::quiver(&["status", "--config", quiver_tests::arg(&config)]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("good") && text.contains("ready (12 tools)"),
        "{text}"
    );
    let _ = std::fs::remove_file(&config);
}
