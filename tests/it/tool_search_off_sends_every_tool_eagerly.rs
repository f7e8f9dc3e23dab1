//! Checks that with `tools: {tool_search: false}` assembly is tier 0: every
//! catalog tool is sent as its own function definition, with its own
//! description and schema, and no bridge tool is added.

use std::collections::BTreeMap;
use std::path::Path;

use quiver_tests::{assemble, catalog, read_json};
use serde_json::Value;

fn check(name: &str, config_text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.yaml");
    std::fs::write(&config, config_text).unwrap();
    let path = catalog(name);
    let document = read_json(&path);
    let assembly = assemble(&[path.as_path()], Some(Path::new(&config)), 200_000);

    assert_eq!(assembly["tier"], 0, "{name}");
    assert_eq!(assembly["deferred_count"], 0, "{name}");
    assert_eq!(assembly["listing_tokens"], 0, "{name}");

    // Every catalog tool, keyed by its exposed name.
    let mut expected: BTreeMap<String, &Value> = BTreeMap::new();
    for server in document["servers"].as_array().unwrap() {
        let server_name = server["name"].as_str().unwrap();
        for tool in server["tools"].as_array().unwrap() {
            let exposed = format!("mcp_{server_name}_{}", tool["name"].as_str().unwrap());
            assert!(expected.insert(exposed, tool).is_none());
        }
    }

    let tools = assembly["tools"].as_array().unwrap();
    assert_eq!(tools.len(), expected.len(), "one definition per tool");
    let mut seen = std::collections::BTreeSet::new();
    for definition in tools {
        assert_eq!(definition["type"], "function");
        let function = &definition["function"];
        let exposed = function["name"].as_str().unwrap();
        assert!(
            !["tool_search", "tool_describe", "tool_call"].contains(&exposed),
            "bridge tool {exposed} at tier 0"
        );
        assert!(seen.insert(exposed.to_owned()), "{exposed} sent twice");
        let tool = expected
            .get(exposed)
            .unwrap_or_else(|| panic!("{exposed} is not a tool of {name}"));
        assert_eq!(function["description"], tool["description"], "{exposed}");
        assert_eq!(function["parameters"], tool["inputSchema"], "{exposed}");
    }
}

#[test]
fn tool_search_false() {
    check("github-mcp.json", "tools: {tool_search: false}\n");
}

#[test]
fn enabled_off() {
    check(
        "mcp-popular.json",
        "tools:\n  tool_search:\n    enabled: off\n",
    );
}
