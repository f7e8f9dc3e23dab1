//! Checks that at a tiny context (2000 tokens, a 100-token budget) no server
//! can be listed per tool, so assembly falls back to tier 2: summary lines
//! only, still within the budget.

use quiver_tests::{assemble, catalog, listing_text, tokens_of};

fn check(name: &str) -> serde_json::Value {
    let path = catalog(name);
    let assembly = assemble(&[&path], None, 2_000);
    assert_eq!(assembly["tier"], 2, "{name}");
    assert_eq!(assembly["budget_tokens"], 100, "{name}");
    let form = assembly["listing_form"].as_str().unwrap();
    assert!(
        form == "summary" || form == "truncated",
        "{name}: listing form {form}"
    );
    for server in assembly["servers"].as_array().unwrap() {
        let mode = server["mode"].as_str().unwrap();
        assert!(
            mode == "summary" || mode == "omitted",
            "{name}: server {} is {mode}",
            server["name"]
        );
    }
    let listing = listing_text(&assembly);
    assert!(!listing.contains("\n- "), "{name}: a tool line in tier 2");
    assert!(tokens_of(&listing) <= 100);
    // The bridge is still there: the tools can be searched.
    assert_eq!(assembly["tools"].as_array().unwrap().len(), 3, "{name}");
    assembly
}

#[test]
fn github_mcp() {
    let assembly = check("github-mcp.json");
    assert_eq!(listing_text(&assembly), "github: 121 tools\n");
}

#[test]
fn mcp_popular_is_truncated() {
    let assembly = check("mcp-popular.json");
    assert_eq!(assembly["listing_form"], "truncated");
    let listing = listing_text(&assembly);
    let last = listing.lines().last().unwrap();
    assert!(
        last.starts_with("and ") && last.ends_with(" more servers"),
        "{last}"
    );
}

#[test]
fn openapi_saas() {
    check("openapi-saas.json");
}
