//! Checks that a tool removed from a `ToolRegistry` source, or a whole source
//! removed, is gone from the very next `Assembler::assemble`, its listing,
//! its search and `tool_call`, with the default catalog cache on.

use quiver_catalog::assembly::{Assembler, Assembly, Tier};
use quiver_catalog::bridge::{self, BridgeError};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new(name, description, json!({"type": "object"}))
}

fn github() -> ToolSource {
    ToolSource::Mcp("github".into())
}

fn hit_names(assembly: &Assembly, query: &str) -> Vec<String> {
    assembly
        .search(query, Some(20))
        .iter()
        .map(|h| h.tool.name().to_owned())
        .collect()
}

#[test]
fn removed_tool_is_gone_at_once() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        github(),
        vec![
            spec("create_issue", "Open a new issue"),
            spec("delete_repository", "Delete a repository"),
        ],
    );
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();
    let before = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    let again = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert!(
        std::ptr::eq(before.catalog(), again.catalog()),
        "cache is on"
    );
    assert_eq!(
        hit_names(&before, "delete repository")[0],
        "mcp_github_delete_repository"
    );

    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    let after = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(after.catalog().deferred_count(), 1);
    assert!(!after.listing().text.contains("delete_repository"));
    assert!(hit_names(&after, "delete repository").is_empty());
    let error = bridge::call(&after, &json!({"name": "mcp_github_delete_repository"})).unwrap_err();
    assert!(
        matches!(&error, BridgeError::UnknownTool { name, .. } if name == "mcp_github_delete_repository"),
        "{error:?}"
    );
    assert!(bridge::describe(&after, &json!({"name": "mcp_github_delete_repository"})).is_err());
    let description = after.tools()[0]["function"]["description"]
        .as_str()
        .unwrap();
    assert!(description.contains("1 deferred tool "), "{description}");

    // The earlier assembly still has it.
    assert!(bridge::call(&before, &json!({"name": "mcp_github_delete_repository"})).is_ok());
}

#[test]
fn removed_source_is_gone_at_once() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    registry.set_source_tools(
        ToolSource::Mcp("gitlab".into()),
        vec![spec("create_merge_request", "Open a merge request")],
    );
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();
    let before = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(before.listing().groups.len(), 2);
    assert!(!hit_names(&before, "merge request").is_empty());

    assert!(registry.remove_source(&ToolSource::Mcp("gitlab".into())));
    let after = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    let groups: Vec<_> = after
        .listing()
        .groups
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(groups, ["github"]);
    assert!(!after.listing().text.contains("gitlab"));
    assert!(hit_names(&after, "merge request").is_empty());
    assert!(bridge::call(&after, &json!({"name": "mcp_gitlab_create_merge_request"})).is_err());

    // Nothing deferred any more: with `enabled: auto` the bridge goes too.
    assert!(registry.remove_source(&github()));
    let empty = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(empty.tier(), Tier::Eager);
    assert!(!empty.has_bridge());
    assert!(empty.tools().is_empty());
    assert!(empty.search("issue", None).is_empty());
}
