//! Checks that `quiver catalog assemble` defers every catalog tool behind the
//! three bridge tools, states their number in the `tool_search` description,
//! and reports every server, sorted by name, with its tool count and mode.

use quiver_tests::{assemble, catalog, function, read_json, server_sizes};

fn check(catalogs: &[&str], expected_tools: usize, expected_servers: usize) {
    let paths: Vec<_> = catalogs.iter().map(|c| catalog(c)).collect();
    let mut servers: Vec<(String, usize)> = paths
        .iter()
        .flat_map(|p| server_sizes(&read_json(p)))
        .collect();
    let total: usize = servers.iter().map(|s| s.1).sum();
    assert_eq!(total, expected_tools, "tools in {catalogs:?}");
    assert_eq!(servers.len(), expected_servers, "servers in {catalogs:?}");
    servers.sort();

    let paths: Vec<_> = paths.iter().map(|p| p.as_path()).collect();
    let assembly = assemble(&paths, None, 200_000);

    assert_eq!(assembly["deferred_count"], total, "{catalogs:?}");
    assert_eq!(assembly["tier"], 1, "{catalogs:?}");
    let names: Vec<_> = assembly["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["tool_search", "tool_describe", "tool_call"]);
    for tool in assembly["tools"].as_array().unwrap() {
        assert_eq!(tool["type"], "function");
        assert_eq!(tool["function"]["parameters"]["type"], "object");
    }

    let description = function(&assembly, "tool_search").unwrap()["description"]
        .as_str()
        .unwrap();
    assert!(
        description.contains(&format!("{total} deferred tools")),
        "the tool_search description does not state {total} deferred tools: {}",
        &description[..description.len().min(300)]
    );

    let reported: Vec<(String, usize)> = assembly["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mode = s["mode"].as_str().unwrap();
            assert!(
                ["full", "names", "summary", "omitted"].contains(&mode),
                "mode {mode}"
            );
            (
                s["name"].as_str().unwrap().to_owned(),
                s["tools"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    let mut sorted = reported.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(reported, sorted, "servers are not sorted by name");
    assert_eq!(reported, servers, "servers and their tool counts");

    let deferred_tokens = assembly["deferred_tokens"].as_u64().unwrap();
    let listing_tokens = assembly["listing_tokens"].as_u64().unwrap();
    assert!(
        deferred_tokens > listing_tokens,
        "deferring saves nothing: {deferred_tokens} <= {listing_tokens}"
    );
}

#[test]
fn github_mcp() {
    check(&["github-mcp.json"], 121, 1);
}

#[test]
fn mcp_popular() {
    check(&["mcp-popular.json"], 1_138, 38);
}

#[test]
fn mcp_popular_and_cloudflare() {
    check(&["mcp-popular.json", "cloudflare-api.json"], 4_472, 39);
}

#[test]
fn openapi_saas() {
    check(&["openapi-saas.json"], 5_712, 12);
}
