//! `tool_search` has a relevance floor: a query whose words every tool
//! shares (the server's name) or that only the exposed-name prefix
//! matches (`mcp`, `mcp_github_`) finds nothing, and the empty result
//! keeps its note, which suggests rephrasing and names the servers; real
//! queries and exact names still find their tools.

use quiver_tests::dispatch::fixture_with_shop;
use serde_json::json;

#[tokio::test]
async fn weak_evidence_is_no_match_and_the_note_says_what_to_do() {
    let fixture = fixture_with_shop(Vec::new());
    let session = fixture.session("s", &["*"]);
    for query in ["mcp", "mcp_github_", "MCP_"] {
        let out = fixture
            .call(&session, "tool_search", json!({"query": query}))
            .await
            .unwrap();
        assert_eq!(out["matches"], json!([]), "{query}: {out}");
        let note = out["note"].as_str().unwrap();
        assert!(
            note.contains("Rephrase") && note.contains("github"),
            "{query}: {note}"
        );
    }
    let found = fixture
        .call(
            &session,
            "tool_search",
            json!({"query": "delete a repository"}),
        )
        .await
        .unwrap();
    assert_eq!(found["matches"][0]["name"], "mcp_github_delete_repo");
    let exact = fixture
        .call(
            &session,
            "tool_search",
            json!({"query": "mcp_github_list_issues"}),
        )
        .await
        .unwrap();
    assert_eq!(exact["matches"][0]["name"], "mcp_github_list_issues");
    // A substring of the tool's own name is still found.
    let part = fixture
        .call(&session, "tool_search", json!({"query": "github_list_iss"}))
        .await
        .unwrap();
    assert_eq!(
        part["matches"][0]["name"], "mcp_github_list_issues",
        "{part}"
    );
}
