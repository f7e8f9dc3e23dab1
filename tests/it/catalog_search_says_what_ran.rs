//! `quiver catalog search` with an embedding model: it waits for every
//! tool's vector (showing progress) and each result says the search was
//! hybrid; with `--no-wait` it searches at once and says which tools were
//! matched by their words only; with no model it says it is lexical.

use std::path::Path;

use quiver_tests::{arg, catalog, minilm_model_dir, quiver_command};
use serde_json::Value;

/// Runs `catalog search --json` with `args`, state under `state`; the
/// result lines and stderr.
fn search(state: &Path, args: &[&str]) -> (Vec<Value>, String) {
    let output = quiver_command()
        .env("XDG_STATE_HOME", state)
        .args(["catalog", "search", "--json", "--limit", "5"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, stderr)
}

#[test]
fn catalog_search_waits_for_the_vectors_and_says_what_ran() {
    let state = tempfile::tempdir().unwrap();
    let github = catalog("github-mcp.json");
    let model = minilm_model_dir();
    // Words no tool has: only the model finds `star_repository`.
    let query = "mark this repo as a favourite";

    let (lexical, _) = search(state.path(), &["--catalog", arg(&github), query]);
    assert_eq!(lexical[0]["search"], "lexical", "{lexical:?}");
    assert!(lexical[0].get("embedded").is_none(), "{lexical:?}");
    assert!(
        !tools(&lexical[0]).contains(&"star_repository"),
        "{lexical:?}"
    );

    let (hybrid, stderr) = search(
        state.path(),
        &[
            "--catalog",
            arg(&github),
            "--embeddings",
            arg(&model),
            query,
        ],
    );
    assert!(stderr.contains("embedding tools: "), "{stderr}");
    assert!(stderr.contains("121 of 121"), "{stderr}");
    let line = &hybrid[0];
    assert_eq!(line["search"], "hybrid", "{line}");
    assert_eq!(line["embedded"]["ready"], 121, "{line}");
    assert_eq!(line["embedded"]["total"], 121, "{line}");
    assert!(line.get("search_note").is_none(), "{line}");
    assert!(tools(line).contains(&"star_repository"), "{line}");
}

/// The tool names of a result line's matches.
fn tools(line: &Value) -> Vec<&str> {
    line["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tool"].as_str().unwrap())
        .collect()
}

#[test]
fn catalog_search_without_waiting_says_which_tools_were_not_embedded() {
    let state = tempfile::tempdir().unwrap();
    // 1,138 tools take the model most of a minute: the search comes first.
    let popular = catalog("mcp-popular.json");
    let model = minilm_model_dir();
    let (lines, _) = search(
        state.path(),
        &[
            "--catalog",
            arg(&popular),
            "--embeddings",
            arg(&model),
            "--no-wait",
            "take a picture of the web page",
        ],
    );
    let line = &lines[0];
    let ready = line["embedded"]["ready"].as_u64().unwrap();
    assert_eq!(line["embedded"]["total"], 1138, "{line}");
    assert!(ready < 1138, "{line}");
    let note = line["search_note"].as_str().unwrap_or_default();
    if ready == 0 {
        assert_eq!(line["search"], "lexical", "{line}");
        assert!(note.starts_with("lexical search only"), "{line}");
    } else {
        assert_eq!(line["search"], "hybrid", "{line}");
        assert!(note.contains(&format!("{ready} of 1138 tools")), "{line}");
    }
}
