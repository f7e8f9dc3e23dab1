//! Checks that a tool added to (or changed in) a `ToolRegistry` source is in
//! the very next `Assembler::assemble`, its listing and its search, with the
//! default catalog cache on, and that earlier assemblies stay as they were.

use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::{Value, json};

fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        description,
        json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
    )
}

fn github() -> ToolSource {
    ToolSource::Mcp("github".into())
}

fn search_description(tools: &[Value]) -> String {
    tools
        .iter()
        .find(|t| t["function"]["name"] == "tool_search")
        .and_then(|t| t["function"]["description"].as_str())
        .unwrap_or_default()
        .to_owned()
}

fn hit_names(assembly: &quiver_catalog::assembly::Assembly, query: &str) -> Vec<String> {
    assembly
        .search(query, Some(20))
        .iter()
        .map(|h| h.tool.name().to_owned())
        .collect()
}

#[test]
fn added_tool_is_listed_searchable_and_callable_at_once() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();

    let before = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    // The cache is on: the same registry generation and scope reuse the catalog.
    let again = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert!(std::ptr::eq(before.catalog(), again.catalog()));
    assert_eq!(before.catalog().deferred_count(), 1);
    assert!(hit_names(&before, "merge pull request").is_empty());

    registry.set_source_tools(
        github(),
        vec![
            spec("create_issue", "Open a new issue"),
            spec("merge_pull_request", "Merge a pull request"),
        ],
    );
    let after = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(after.catalog().deferred_count(), 2);
    let description = search_description(after.tools());
    assert!(description.contains("2 deferred tools"), "{description}");
    assert!(
        after
            .listing()
            .text
            .contains("- mcp_github_merge_pull_request: Merge a pull request"),
        "{}",
        after.listing().text
    );
    assert!(description.ends_with(&after.listing().text));
    assert_eq!(
        hit_names(&after, "merge pull request")
            .first()
            .map(String::as_str),
        Some("mcp_github_merge_pull_request")
    );
    let found = bridge::search(&after, &json!({"query": "merge pull request"})).unwrap();
    assert_eq!(found["matches"][0]["name"], "mcp_github_merge_pull_request");
    let call = bridge::call(
        &after,
        &json!({"name": "mcp_github_merge_pull_request", "arguments": {"repo": "q"}}),
    )
    .unwrap();
    assert_eq!(call.tool.original_name(), "merge_pull_request");
    let described =
        bridge::describe(&after, &json!({"name": "mcp_github_merge_pull_request"})).unwrap();
    assert_eq!(described["description"], "Merge a pull request");

    // The earlier assembly is a snapshot: it has not changed.
    assert_eq!(before.catalog().deferred_count(), 1);
    assert!(hit_names(&before, "merge pull request").is_empty());
    assert!(!before.listing().text.contains("merge_pull_request"));
}

#[test]
fn added_server_is_listed_and_searchable_at_once() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();
    let before = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(before.listing().groups.len(), 1);

    registry.set_source_tools(
        ToolSource::Plugin("weather".into()),
        vec![spec("forecast", "Weather forecast for a city")],
    );
    let after = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    let groups: Vec<_> = after
        .listing()
        .groups
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    assert_eq!(groups, ["github", "weather"]);
    assert!(
        after
            .listing()
            .text
            .contains("weather (1 tool):\n- forecast: Weather forecast")
    );
    assert_eq!(hit_names(&after, "weather forecast"), ["forecast"]);
    assert!(search_description(after.tools()).contains("from 2 servers"));
}

#[test]
fn changed_description_is_searchable_at_once() {
    let registry = ToolRegistry::new();
    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();
    let before = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert!(hit_names(&before, "ticket").is_empty());

    registry.set_source_tools(github(), vec![spec("create_issue", "Open a new ticket")]);
    let after = assembler.assemble(&registry.snapshot(), &scope, 200_000);
    assert_eq!(hit_names(&after, "ticket"), ["mcp_github_create_issue"]);
    assert!(after.listing().text.contains("Open a new ticket"));
    let described = bridge::describe(&after, &json!({"name": "mcp_github_create_issue"})).unwrap();
    assert_eq!(described["description"], "Open a new ticket");
}

#[test]
fn another_registry_at_the_same_generation_is_not_confused() {
    // Both registries are at generation 1; one assembler serves both.
    let first = ToolRegistry::new();
    first.set_source_tools(github(), vec![spec("create_issue", "Open a new issue")]);
    let second = ToolRegistry::new();
    second.set_source_tools(github(), vec![spec("star_repository", "Star a repository")]);
    assert_eq!(
        first.snapshot().generation(),
        second.snapshot().generation()
    );

    let assembler = Assembler::new(ToolSearchConfig::default());
    let scope = Scope::all();
    let a = assembler.assemble(&first.snapshot(), &scope, 200_000);
    let b = assembler.assemble(&second.snapshot(), &scope, 200_000);
    assert_eq!(hit_names(&a, "issue"), ["mcp_github_create_issue"]);
    assert_eq!(hit_names(&b, "star"), ["mcp_github_star_repository"]);
    assert!(hit_names(&b, "issue").is_empty());
    assert!(b.listing().text.contains("star_repository"));
    assert!(!b.listing().text.contains("create_issue"));
}
