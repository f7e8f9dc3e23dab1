//! Checks that `quiver catalog search --json` prints one JSON line
//! `{"query", "matches": [{"name", "server", "tool", "score"}], "search"}` per query,
//! for a query given on the command line and for a `--queries` JSONL file.

use quiver_tests::{arg, catalog, quiver, quiver_json_lines};
use serde_json::Value;

fn check_line(line: &Value, query: &str) {
    let keys: Vec<_> = line.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["matches", "query", "search"], "{line}");
    assert_eq!(line["query"], query);
    // No embedding model configured: the lexical stage ranked them.
    assert_eq!(line["search"], "lexical", "{line}");
    let mut last = f64::INFINITY;
    for hit in line["matches"].as_array().unwrap() {
        let keys: Vec<_> = hit.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "score", "server", "tool"], "{hit}");
        let server = hit["server"].as_str().unwrap();
        let tool = hit["tool"].as_str().unwrap();
        assert_eq!(server, "github");
        assert_eq!(hit["name"], format!("mcp_{server}_{tool}"));
        let score = hit["score"].as_f64().unwrap();
        assert!(score <= last, "scores not in descending order: {line}");
        last = score;
    }
}

#[test]
fn one_query_on_the_command_line() {
    let github = catalog("github-mcp.json");
    let lines = quiver_json_lines(&[
        "catalog",
        "search",
        "--catalog",
        arg(&github),
        "--json",
        "create issue",
    ]);
    assert_eq!(lines.len(), 1);
    check_line(&lines[0], "create issue");
    let matches = lines[0]["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 5, "default limit");
    assert_eq!(matches[0]["tool"], "create_issue");
    assert!(matches[0]["score"].as_f64().unwrap() > 0.0);
}

#[test]
fn queries_file_gives_one_line_per_query_in_order() {
    let github = catalog("github-mcp.json");
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("queries.jsonl");
    let texts = [
        "list pull requests",
        "zzqqxx qqzzyy",
        "search code in a repository",
        "create issue",
    ];
    let mut file = String::new();
    for (i, text) in texts.iter().enumerate() {
        file.push_str(&serde_json::json!({"query": text, "id": i}).to_string());
        file.push('\n');
        if i == 1 {
            file.push('\n');
        }
    }
    std::fs::write(&queries, file).unwrap();
    let lines = quiver_json_lines(&[
        "catalog",
        "search",
        "--catalog",
        arg(&github),
        "--queries",
        arg(&queries),
        "--json",
    ]);
    assert_eq!(lines.len(), texts.len());
    for (line, text) in lines.iter().zip(texts) {
        check_line(line, text);
    }
    assert!(lines[1]["matches"].as_array().unwrap().is_empty());
    assert_eq!(lines[0]["matches"][0]["tool"], "list_pull_requests");
    assert_eq!(lines[2]["matches"][0]["tool"], "search_code");
    // The same query gives the same line whether from a file or the command line.
    let single = quiver_json_lines(&[
        "catalog",
        "search",
        "--catalog",
        arg(&github),
        "--json",
        "create issue",
    ]);
    assert_eq!(lines[3], single[0]);
}

#[test]
fn query_and_queries_file_together_are_refused() {
    let github = catalog("github-mcp.json");
    let dir = tempfile::tempdir().unwrap();
    let queries = dir.path().join("queries.jsonl");
    std::fs::write(&queries, "{\"query\": \"x\"}\n").unwrap();
    let both = quiver(&[
        "catalog",
        "search",
        "--catalog",
        arg(&github),
        "--queries",
        arg(&queries),
        "--json",
        "create issue",
    ]);
    assert!(!both.status.success());
    assert!(both.stdout.is_empty());
    let neither = quiver(&["catalog", "search", "--catalog", arg(&github), "--json"]);
    assert!(!neither.status.success());
}
