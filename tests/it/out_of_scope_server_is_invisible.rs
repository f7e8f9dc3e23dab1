//! Checks that a session whose `Scope` lacks a server sees none of its tools:
//! not in the tools array, the listing or search hits, not suggested, and
//! `tool_call` / `tool_describe` of one say it is not available in this
//! session.

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::bridge::{self, BridgeError};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new(name, description, json!({"type": "object"}))
}

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Core,
        vec![spec("read_file", "Read a file from disk")],
    );
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            spec("create_issue", "Open a new issue in a repository"),
            spec("list_issues", "List the issues of a repository"),
        ],
    );
    registry.set_source_tools(
        ToolSource::Mcp("gitlab".into()),
        vec![
            spec("create_merge_request", "Open a merge request in a project"),
            spec("list_issues", "List the issues of a project"),
        ],
    );
    registry
}

fn hit_names(assembly: &Assembly, query: &str) -> Vec<String> {
    assembly
        .search(query, Some(20))
        .iter()
        .map(|h| h.tool.name().to_owned())
        .collect()
}

fn all_text(assembly: &Assembly) -> String {
    serde_json::to_string(assembly.tools()).unwrap()
}

#[test]
fn server_outside_the_scope_is_not_seen() {
    let registry = registry();
    let assembler = Assembler::new(ToolSearchConfig::default());
    let snapshot = registry.snapshot();
    let full = assembler.assemble(&snapshot, &Scope::all(), 200_000);
    assert!(all_text(&full).contains("mcp_gitlab_create_merge_request"));
    assert!(
        hit_names(&full, "merge request").contains(&"mcp_gitlab_create_merge_request".to_owned())
    );

    let scope = Scope::new(["core", "mcp-github"]).unwrap();
    let assembly = assembler.assemble(&snapshot, &scope, 200_000);
    let text = all_text(&assembly);
    assert!(
        !text.contains("gitlab"),
        "gitlab in the tools array: {text}"
    );
    assert!(text.contains("mcp_github_create_issue"));
    let groups: Vec<_> = assembly
        .listing()
        .groups
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(groups, ["github"]);
    assert_eq!(assembly.catalog().deferred_count(), 2);
    assert!(
        assembly
            .catalog()
            .in_scope()
            .all(|t| t.source() != &ToolSource::Mcp("gitlab".into()))
    );

    for query in [
        "merge request",
        "list issues",
        "project",
        "gitlab",
        "mcp_gitlab",
    ] {
        let hits = hit_names(&assembly, query);
        assert!(
            hits.iter().all(|h| !h.contains("gitlab")),
            "{query}: {hits:?}"
        );
    }
    assert_eq!(
        hit_names(&assembly, "list issues")
            .first()
            .map(String::as_str),
        Some("mcp_github_list_issues")
    );
    let found = bridge::search(
        &assembly,
        &json!({"query": "merge request project", "limit": 20}),
    )
    .unwrap();
    assert!(!found.to_string().contains("gitlab"), "{found}");

    for name in ["mcp_gitlab_create_merge_request", "mcp_gitlab_list_issues"] {
        let error = bridge::call(&assembly, &json!({"name": name, "arguments": {}})).unwrap_err();
        assert!(
            matches!(&error, BridgeError::NotAvailable { name: n } if n == name),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("not available in this session"),
            "{error}"
        );
        assert_eq!(error.to_json()["error"], "not_available");
        let error = bridge::describe(&assembly, &json!({"name": name})).unwrap_err();
        assert!(
            matches!(error, BridgeError::NotAvailable { .. }),
            "{error:?}"
        );
    }

    // A misspelt out-of-scope name is not answered with out-of-scope names.
    let error = bridge::call(
        &assembly,
        &json!({"name": "mcp_gitlab_create_merge_requests"}),
    )
    .unwrap_err();
    match error {
        BridgeError::UnknownTool { suggestions, .. } => {
            assert!(
                suggestions.iter().all(|s| !s.contains("gitlab")),
                "{suggestions:?}"
            );
        }
        other => panic!("expected an unknown tool, got {other:?}"),
    }
}

#[test]
fn a_single_granted_tool_is_all_that_is_seen_of_its_server() {
    let registry = registry();
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::new(["mcp_gitlab_list_issues"]).unwrap();
    let assembly = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    let names: Vec<_> = assembly.catalog().in_scope().map(|t| t.name()).collect();
    assert_eq!(names, ["mcp_gitlab_list_issues"]);
    assert_eq!(
        hit_names(&assembly, "list issues"),
        ["mcp_gitlab_list_issues"]
    );
    assert!(hit_names(&assembly, "merge request").is_empty());
    assert!(!all_text(&assembly).contains("read_file"));
    assert!(matches!(
        bridge::call(
            &assembly,
            &json!({"name": "mcp_gitlab_create_merge_request"})
        ),
        Err(BridgeError::NotAvailable { .. })
    ));
    assert!(matches!(
        bridge::call(&assembly, &json!({"name": "read_file"})),
        Err(BridgeError::NotAvailable { .. })
    ));
    assert!(bridge::call(&assembly, &json!({"name": "mcp_gitlab_list_issues"})).is_ok());
}
