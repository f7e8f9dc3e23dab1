//! `quiver call`: a real plugin tool, loaded from the config's plugin
//! directory, runs through the configured chain (guardrails from the
//! config) and the feed is rendered with the real tool name.

use quiver_tests::{arg, install_plugin, plugin_so, quiver};

#[test]
fn a_plugin_tool_is_called_and_denied_through_the_configured_chain() {
    let temp = tempfile::tempdir().unwrap();
    let plugins = temp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install_plugin(&plugin_so("echo_v1"), &plugins, "echo.so");
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "plugins:\n  dirs: [plugins]\n  state_dir: state\nguardrails:\n  rules:\n    - tool: echo\n      action: deny\n      reason: no shouting\n      arguments:\n        - pointer: /text\n          regex: \"^[A-Z ]+$\"\n",
    )
    .unwrap();

    let call = |arguments: &str| {
        quiver(&[
            "call",
            "tool_call",
            "--config",
            arg(&config),
            "--wait-s",
            "0",
            "--arguments",
            arguments,
        ])
    };

    let ok = call(r#"{"name": "echo", "arguments": {"text": "hello"}}"#);
    let stderr = String::from_utf8_lossy(&ok.stderr);
    assert!(ok.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(result["arguments"]["text"], "hello");
    assert!(stderr.contains("echo via tool_call  ok"), "{stderr}");

    let denied = call(r#"{"name": "echo", "arguments": {"text": "HELLO"}}"#);
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success());
    let error: serde_json::Value = serde_json::from_slice(&denied.stdout).unwrap();
    assert_eq!(error["error"], "denied_by_guardrail", "{error}");
    assert!(error.to_string().contains("no shouting"), "{error}");
    assert!(stderr.contains("echo via tool_call  denied"), "{stderr}");

    let unknown = call(r#"{"name": "ech", "arguments": {}}"#);
    assert!(!unknown.status.success());
    let error: serde_json::Value = serde_json::from_slice(&unknown.stdout).unwrap();
    assert!(
        error.to_string().contains("echo"),
        "suggests the close name: {error}"
    );
}
