//! Checks that with mcp-popular and the 3,334-tool Cloudflare catalog at
//! 200000 tokens of context, Cloudflare is collapsed to its summary line
//! while small servers keep their tools listed in full.

use quiver_tests::{assemble, catalog, listing_text};

#[test]
fn cloudflare_is_summarised_and_small_servers_are_full() {
    let popular = catalog("mcp-popular.json");
    let cloudflare = catalog("cloudflare-api.json");
    let assembly = assemble(&[&popular, &cloudflare], None, 200_000);

    assert_eq!(assembly["tier"], 1);
    assert_eq!(assembly["listing_form"], "mixed");
    let servers = assembly["servers"].as_array().unwrap();
    let mode_of = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no server {name}"))["mode"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let cf = servers.iter().find(|s| s["name"] == "cloudflare").unwrap();
    assert_eq!(cf["tools"], 3_334);
    assert_eq!(mode_of("cloudflare"), "summary");

    let full: Vec<_> = servers
        .iter()
        .filter(|s| s["mode"] == "full")
        .map(|s| (s["name"].as_str().unwrap(), s["tools"].as_u64().unwrap()))
        .collect();
    assert!(
        full.iter().any(|&(_, tools)| tools <= 10),
        "no small server is listed in full: {full:?}"
    );

    let listing = listing_text(&assembly);
    assert!(
        listing.lines().any(|l| l == "cloudflare: 3334 tools"),
        "no cloudflare summary line in the listing"
    );
    assert!(
        !listing.contains("- mcp_cloudflare_"),
        "a cloudflare tool is listed one by one"
    );
    for (name, tools) in &full {
        let header = format!("{name} ({tools} tool");
        assert!(
            listing.lines().any(|l| l.starts_with(&header)),
            "no header for full server {name}"
        );
    }
}
