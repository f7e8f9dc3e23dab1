//! The listing names every tool before it describes any: at 200,000 tokens
//! of context with mcp-popular (1,138 tools in 38 servers), every
//! tool-search-mcp query's gold tool is named in what `quiver catalog
//! assemble` sends, descriptions go to small servers before large ones, and
//! at every context size from 8K to 1M the listing stays within its budget
//! and a server is summarised only when names alone do not fit.

use std::collections::HashSet;

use quiver_tests::{assemble, catalog, listing_text, read_json, shared_catalogs, tokens_of};
use quiver_tool::naming::mcp_tool_name;
use serde_json::Value;

/// The words of a listing: tool names stand between `- `, `: `, `, ` and
/// line ends.
fn words(listing: &str) -> HashSet<&str> {
    listing
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .filter(|w| !w.is_empty())
        .collect()
}

fn servers(assembly: &Value) -> &Vec<Value> {
    assembly["servers"].as_array().unwrap()
}

#[test]
fn every_gold_tool_is_named_at_200k() {
    let query_set = read_json(
        &shared_catalogs()
            .join("queries")
            .join("tool-search-mcp.json"),
    );
    assert_eq!(query_set["catalog"], "mcp-popular.json");
    let popular = catalog("mcp-popular.json");
    let assembly = assemble(&[&popular], None, 200_000);
    let listing = listing_text(&assembly);
    let named = words(&listing);
    let queries = query_set["queries"].as_array().unwrap();
    let missing: Vec<String> = queries
        .iter()
        .filter_map(|q| {
            let server = q["server"].as_str().unwrap();
            let gold = q["gold"].as_array().unwrap();
            let absent: Vec<String> = gold
                .iter()
                .map(|g| mcp_tool_name(server, g.as_str().unwrap()))
                .filter(|name| !named.contains(name.as_str()))
                .collect();
            (!absent.is_empty()).then(|| format!("{}: {absent:?}", q["query"]))
        })
        .collect();
    println!(
        "gold tool named for {} of {} tool-search-mcp queries at 200K",
        queries.len() - missing.len(),
        queries.len()
    );
    assert!(missing.is_empty(), "not named: {missing:#?}");

    // Every server is listed per tool, none summarised.
    for server in servers(&assembly) {
        assert_ne!(server["mode"], "summary", "{server}");
    }
    // The room left after the names went to the smallest servers first:
    // every server described is at most as large as any only named.
    let sizes = |mode: &str| -> Vec<u64> {
        servers(&assembly)
            .iter()
            .filter(|s| s["mode"] == mode)
            .map(|s| s["tools"].as_u64().unwrap())
            .collect()
    };
    let (full, names) = (sizes("full"), sizes("names"));
    assert!(!full.is_empty() && !names.is_empty(), "{full:?} {names:?}");
    assert!(
        full.iter().max() <= names.iter().min(),
        "full {full:?}, names only {names:?}"
    );
}

#[test]
fn within_budget_and_more_context_never_names_fewer_tools_from_8k_to_1m() {
    let popular = catalog("mcp-popular.json");
    let saas = catalog("openapi-saas.json");
    for catalogs in [vec![popular.as_path()], vec![&popular, &saas]] {
        let mut last_named = 0;
        for context in [
            8_000u64, 16_000, 32_000, 64_000, 128_000, 200_000, 400_000, 1_000_000,
        ] {
            let assembly = assemble(&catalogs, None, context);
            let what = format!("{} catalogs at {context}", catalogs.len());
            let budget = assembly["budget_tokens"].as_u64().unwrap();
            let listing = listing_text(&assembly);
            let tokens = tokens_of(&listing);
            assert!(tokens <= budget, "{what}: {tokens} over {budget}");
            assert_eq!(assembly["listing_tokens"], tokens, "{what}");
            let groups = servers(&assembly);
            let named: u64 = groups
                .iter()
                .filter(|s| s["mode"] == "full" || s["mode"] == "names")
                .map(|s| s["tools"].as_u64().unwrap())
                .sum();
            assert!(named >= last_named, "{what}: {named} named < {last_named}");
            last_named = named;
            // mcp-popular's names fit from 200K on: nothing is summarised.
            if context >= 200_000 && catalogs.len() == 1 {
                assert!(groups.iter().all(|s| s["mode"] != "summary"), "{what}");
            }
        }
    }
}
