//! Enhanced search: a query holding a tool's exact name (its own or its
//! exposed name) ranks that tool first, for every tool of a real catalog.

use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog_file;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tests::catalog;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;

#[test]
fn every_exposed_name_finds_its_tool_first() {
    let document = catalog_file::read(&catalog("mcp-popular.json")).unwrap();
    let registry = ToolRegistry::new();
    catalog_file::register(&registry, [document]);
    let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    );
    let names: Vec<String> = assembly
        .catalog()
        .deferred()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names.len(), 1138);
    for name in &names {
        for query in [
            name.clone(),
            format!("please run {name} now"),
            format!("`{name}`?"),
        ] {
            let hits = assembly.search(&query, Some(3));
            assert_eq!(
                hits.first().map(|h| h.tool.name()),
                Some(name.as_str()),
                "query {query:?}"
            );
        }
    }
}

#[test]
fn a_bare_tool_name_ranks_a_tool_of_that_name_first() {
    let document = catalog_file::read(&catalog("mcp-popular.json")).unwrap();
    let registry = ToolRegistry::new();
    catalog_file::register(&registry, [document]);
    let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    );
    for tool in assembly.catalog().deferred() {
        let query = format!("use {} for this", tool.original_name());
        let hits = assembly.search(&query, Some(20));
        let first = hits.first().map(|h| h.tool.original_name().to_lowercase());
        assert_eq!(
            first,
            Some(tool.original_name().to_lowercase()),
            "query {query:?}"
        );
    }
}
