//! Checks that `tool_call` (and `tool_describe`) of a name that is no tool
//! fails with an unknown-tool error listing at most 3 close in-scope names,
//! the closest first.

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::bridge::{self, BridgeError, SUGGESTIONS};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

fn assembly(tools: &[&str]) -> Assembly {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        tools
            .iter()
            .map(|n| ToolSpec::new(*n, format!("{n} tool"), json!({"type": "object"})))
            .collect(),
    );
    Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    )
}

fn suggestions(error: BridgeError) -> Vec<String> {
    match error {
        BridgeError::UnknownTool { suggestions, .. } => suggestions,
        other => panic!("expected an unknown tool, got {other:?}"),
    }
}

#[test]
fn at_most_three_close_names_closest_first() {
    let assembly = assembly(&[
        "create_issue",
        "create_issues",
        "close_issue",
        "get_issue",
        "list_issues",
        "update_issue",
        "delete_repository",
    ]);
    let error = bridge::call(&assembly, &json!({"name": "mcp_github_craete_issue"})).unwrap_err();
    let message = error.to_string();
    let as_json = error.to_json();
    assert_eq!(as_json["error"], "unknown_tool");
    let names = suggestions(error);
    assert_eq!(SUGGESTIONS, 3);
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[0], "mcp_github_create_issue");
    assert!(
        names.contains(&"mcp_github_create_issues".to_owned()),
        "{names:?}"
    );
    assert!(!names.contains(&"mcp_github_delete_repository".to_owned()));
    assert!(
        message.contains("unknown tool `mcp_github_craete_issue`"),
        "{message}"
    );
    for name in &names {
        assert!(message.contains(&format!("`{name}`")), "{message}");
    }
    assert_eq!(as_json["suggestions"], json!(names));

    let described =
        bridge::describe(&assembly, &json!({"name": "mcp_github_craete_issue"})).unwrap_err();
    assert_eq!(suggestions(described), names);
}

#[test]
fn suggestions_are_real_names_even_with_few_tools() {
    let assembly = assembly(&["create_issue"]);
    let error = bridge::call(&assembly, &json!({"name": "mcp_github_create_isue"})).unwrap_err();
    let names = suggestions(error);
    assert!(!names.is_empty() && names.len() <= 3, "{names:?}");
    assert_eq!(names[0], "mcp_github_create_issue");
    for name in &names {
        assert!(
            name == "mcp_github_create_issue"
                || ["tool_search", "tool_describe", "tool_call"].contains(&name.as_str()),
            "{name} is not a tool of this session"
        );
    }
}

#[test]
fn names_are_exact() {
    let assembly = assembly(&["create_issue"]);
    for name in [
        "MCP_GITHUB_CREATE_ISSUE",
        " mcp_github_create_issue",
        "create_issue",
    ] {
        let error = bridge::call(&assembly, &json!({"name": name})).unwrap_err();
        assert_eq!(suggestions(error)[0], "mcp_github_create_issue", "{name:?}");
    }
}
