//! With the bridge inactive (`tools.tool_search.enabled: off`, or no
//! deferrable tool yet), calling a bridge tool answers `bridge_inactive`
//! and says to call tools by their names; with the bridge active,
//! `tool_call` naming a bridge tool still says to call it directly.

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_config::Switch;
use quiver_tests::dispatch::fixture_with_shop;
use serde_json::json;

#[tokio::test]
async fn bridge_tools_called_while_the_bridge_is_off() {
    let mut fixture = fixture_with_shop(Vec::new());
    let mut config = ToolSearchConfig::default();
    config.enabled = Switch::Off;
    fixture.assembler = Assembler::new(config);
    let session = fixture.session("s", &["*"]);
    for (name, arguments) in [
        ("tool_search", json!({"query": "issue"})),
        ("tool_describe", json!({"name": "mcp_github_create_issue"})),
        (
            "tool_call",
            json!({"name": "mcp_github_list_issues", "arguments": {}}),
        ),
    ] {
        let error = fixture
            .call(&session, name, arguments)
            .await
            .unwrap_err()
            .to_json();
        assert_eq!(error["error"], "bridge_inactive", "{name}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("`{name}` is not available"))
                && message.contains("call tools directly by their names")
                && !message.contains("not through tool_call"),
            "{message}"
        );
    }
    // The tools themselves are called by name.
    let out = fixture
        .call(&session, "mcp_github_list_issues", json!({}))
        .await
        .unwrap();
    assert_eq!(out["ran"], "list_issues");
}

#[tokio::test]
async fn bridge_tools_called_before_any_deferrable_tool_exists() {
    let fixture = fixture_with_shop(Vec::new());
    // Only the core tool is in scope: nothing to defer, no bridge.
    let session = fixture.session("s", &["core"]);
    let error = fixture
        .call(&session, "tool_search", json!({"query": "file"}))
        .await
        .unwrap_err();
    assert_eq!(error.code(), "bridge_inactive");
}

#[tokio::test]
async fn tool_call_of_a_bridge_tool_with_the_bridge_on() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    let error = fixture
        .call(
            &session,
            "tool_call",
            json!({"name": "tool_search", "arguments": {"query": "x"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(error.code(), "bridge_tool_named");
}
