//! Checks that `quiver catalog search` returns `search_default_limit` (5)
//! matches by default and clamps `--limit` to `1..=max_search_limit` (20):
//! `--limit 50` gives 20 matches and `--limit 0` gives 1.

use std::path::Path;

use quiver_tests::{arg, catalog, quiver_json_lines};
use serde_json::Value;

/// A query that more than 20 GitHub tools match.
const QUERY: &str = "repository issue pull request";

fn search(config: Option<&Path>, limit: Option<&str>) -> Vec<Value> {
    let github = catalog("github-mcp.json");
    let mut args = vec!["catalog", "search", "--catalog", arg(&github), "--json"];
    if let Some(config) = config {
        args.extend(["--config", arg(config)]);
    }
    if let Some(limit) = limit {
        args.extend(["--limit", limit]);
    }
    args.push(QUERY);
    let lines = quiver_json_lines(&args);
    assert_eq!(lines.len(), 1);
    lines[0]["matches"].as_array().unwrap().clone()
}

fn names(matches: &[Value]) -> Vec<&str> {
    matches
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect()
}

#[test]
fn default_and_clamped_limits() {
    let twenty = search(None, Some("20"));
    assert_eq!(twenty.len(), 20, "the query must match at least 20 tools");
    let default = search(None, None);
    assert_eq!(default.len(), 5);
    assert_eq!(names(&default), names(&twenty[..5]), "top 5 of the top 20");
    for (limit, expected) in [("50", 20), ("21", 20), ("0", 1), ("1", 1), ("3", 3)] {
        let matches = search(None, Some(limit));
        assert_eq!(matches.len(), expected, "--limit {limit}");
        assert_eq!(
            names(&matches),
            names(&twenty[..expected]),
            "--limit {limit}"
        );
    }
}

#[test]
fn limits_follow_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "tools:\n  tool_search:\n    search_default_limit: 3\n    max_search_limit: 8\n",
    )
    .unwrap();
    assert_eq!(search(Some(&config), None).len(), 3);
    assert_eq!(search(Some(&config), Some("50")).len(), 8);
    assert_eq!(search(Some(&config), Some("0")).len(), 1);
}
