//! Checks that `quiver catalog assemble` sizes the listing budget as
//! `min(threshold_pct% of context, listing_max_tokens)` (defaults 5 and
//! 20000), keeps the listing within it, and reports the listing's true size.

use quiver_tests::{assemble, catalog, listing_text, tokens_of};

/// The default budget: 5% of the context, at most 20000 tokens.
fn default_budget(context_tokens: u64) -> u64 {
    (context_tokens * 5 / 100).min(20_000)
}

fn check(catalogs: &[&str], contexts: &[u64]) {
    let paths: Vec<_> = catalogs.iter().map(|c| catalog(c)).collect();
    let paths: Vec<_> = paths.iter().map(|p| p.as_path()).collect();
    for &context in contexts {
        let assembly = assemble(&paths, None, context);
        let what = format!("{catalogs:?} at {context} tokens of context");
        let budget = assembly["budget_tokens"].as_u64().unwrap();
        let listing_tokens = assembly["listing_tokens"].as_u64().unwrap();
        assert_eq!(budget, default_budget(context), "budget for {what}");
        assert!(
            listing_tokens <= budget,
            "{what}: listing of {listing_tokens} tokens exceeds the budget of {budget}"
        );
        let listing = listing_text(&assembly);
        assert_eq!(
            listing_tokens,
            tokens_of(&listing),
            "{what}: listing_tokens is not ceil(chars/4) of the listing text"
        );
        assert_eq!(
            listing.is_empty(),
            listing_tokens == 0,
            "{what}: empty listing iff zero tokens"
        );
    }
}

#[test]
fn github_mcp() {
    check(
        &["github-mcp.json"],
        &[0, 2_000, 8_000, 50_000, 200_000, 1_000_000],
    );
}

#[test]
fn mcp_popular() {
    check(&["mcp-popular.json"], &[2_000, 1_000_000]);
}

#[test]
fn mcp_popular_and_cloudflare() {
    check(&["mcp-popular.json", "cloudflare-api.json"], &[8_000]);
}

#[test]
fn openapi_saas() {
    check(&["openapi-saas.json"], &[1_000_000]);
}

#[test]
fn configured_threshold_and_cap() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "tools:\n  tool_search:\n    threshold_pct: 10\n    listing_max_tokens: 3000\n",
    )
    .unwrap();
    let github = catalog("github-mcp.json");
    for (context, budget) in [
        (1_000, 100),
        (20_000, 2_000),
        (29_990, 2_999),
        (200_000, 3_000),
    ] {
        let assembly = assemble(&[&github], Some(&config), context);
        assert_eq!(
            assembly["budget_tokens"], budget,
            "budget at {context} tokens of context"
        );
        let listing_tokens = assembly["listing_tokens"].as_u64().unwrap();
        assert!(listing_tokens <= budget, "{listing_tokens} > {budget}");
        assert_eq!(listing_tokens, tokens_of(&listing_text(&assembly)));
    }
}
