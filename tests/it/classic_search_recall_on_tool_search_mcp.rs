//! Checks the recall@5 of classic BM25 `quiver catalog search` on the
//! tool-search-mcp query set against mcp-popular.json (about 0.61 when the
//! issue was written), with each tool identified by (server, tool).

use std::collections::BTreeSet;

use quiver_tests::{arg, catalog, quiver_json_lines, read_json, shared_catalogs};

/// The floor asserted; the measured value is printed.
const RECALL_AT_5_FLOOR: f64 = 0.55;

#[test]
fn recall_at_5_stays_above_the_floor() {
    let query_set = read_json(
        &shared_catalogs()
            .join("queries")
            .join("tool-search-mcp.json"),
    );
    assert_eq!(query_set["catalog"], "mcp-popular.json");
    let queries = query_set["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 113);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.jsonl");
    let lines: Vec<String> = queries
        .iter()
        .map(|q| serde_json::json!({"query": q["query"]}).to_string())
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let popular = catalog("mcp-popular.json");
    let results = quiver_json_lines(&[
        "catalog",
        "search",
        "--catalog",
        arg(&popular),
        "--queries",
        arg(&file),
        "--limit",
        "5",
        "--json",
    ]);
    assert_eq!(results.len(), queries.len(), "one line per query");

    let mut recall_sum = 0.0;
    for (query, result) in queries.iter().zip(&results) {
        assert_eq!(result["query"], query["query"], "lines out of order");
        let matches = result["matches"].as_array().unwrap();
        assert!(matches.len() <= 5);
        let found: BTreeSet<(&str, &str)> = matches
            .iter()
            .map(|m| (m["server"].as_str().unwrap(), m["tool"].as_str().unwrap()))
            .collect();
        let server = query["server"].as_str().unwrap();
        let gold = query["gold"].as_array().unwrap();
        let hits = gold
            .iter()
            .filter(|g| found.contains(&(server, g.as_str().unwrap())))
            .count();
        recall_sum += hits as f64 / gold.len() as f64;
    }
    let recall = recall_sum / queries.len() as f64;
    println!("classic BM25 recall@5 on tool-search-mcp / mcp-popular: {recall:.4}");
    assert!(
        recall >= RECALL_AT_5_FLOOR,
        "recall@5 {recall:.4} is below {RECALL_AT_5_FLOOR}"
    );
}
