//! `quiver catalog eval --mode hybrid`: the queries' vectors are kept in
//! the state directory beside the tools' (`<model>.queries.vectors`), so a
//! second run embeds no query and scores the same; the report gives each
//! set's odd and even halves, hybrid and lexical (recall and hit), from
//! one run, and says that the embedding stage ranked every query.

use std::path::Path;

use quiver_tests::{arg, minilm_model_dir, quiver_command};
use serde_json::{Value, json};

fn eval(state: &Path, catalog: &Path, queries: &Path) -> Value {
    let model = minilm_model_dir();
    let output = quiver_command()
        .env("XDG_STATE_HOME", state)
        .args([
            "catalog",
            "eval",
            "--json",
            "--mode",
            "hybrid",
            "--embeddings",
            arg(&model),
            "--catalog",
            arg(catalog),
            "--queries",
            arg(queries),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Sizes of the files under `dir`, by name.
fn sizes(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_second_hybrid_eval_embeds_no_query_and_reports_both_halves() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let tool = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": {"type": "object"}});
    let document = json!({"servers": [{"name": "twilio", "tools": [
        tool("CreateMessage", "Send a message from the account used to make the request"),
        tool("UpdateCall", "Modify a call in progress, for example end it"),
        tool("ListRecording", "Retrieve a list of recordings belonging to the account"),
    ]}]});
    std::fs::write(&catalog, document.to_string()).unwrap();
    let queries = dir.path().join("queries.json");
    let query = |query: &str, gold: &str| json!({"query": query, "gold": [gold]});
    let set = json!({"catalog": "catalog.json", "queries": [
        query("text someone on their phone", "CreateMessage"),
        query("hang up the call", "UpdateCall"),
        query("list recordings", "ListRecording"),
    ]});
    std::fs::write(&queries, set.to_string()).unwrap();
    let state = dir.path().join("state");

    let first = eval(&state, &catalog, &queries);
    let vectors = state.join("quiver/embeddings");
    let after_first = sizes(&vectors);
    // One file of tool texts and one of queries, three vectors each (a
    // 12-byte header, then a 32-byte key and 384 floats per vector).
    let record = 32 + 4 * 384;
    let lengths: Vec<u64> = after_first.iter().map(|(_, len)| *len).collect();
    assert_eq!(
        lengths,
        [12 + 3 * record, 12 + 3 * record],
        "{after_first:?}"
    );
    assert!(
        after_first
            .iter()
            .any(|(name, _)| name.ends_with(".queries.vectors")),
        "{after_first:?}"
    );

    let second = eval(&state, &catalog, &queries);
    assert_eq!(
        sizes(&vectors),
        after_first,
        "the second run embedded again"
    );
    assert_eq!(first["sets"], second["sets"]);

    // Halves: queries 1 (odd) and 0 and 2 (even); the paraphrase of
    // query 0 is found only through the similarities.
    let versus = &first["against_lexical"][0];
    let recall = first["sets"][0]["recall"].as_f64().unwrap();
    let odd = versus["odd"]["recall"].as_f64().unwrap();
    let even = versus["even"]["recall"].as_f64().unwrap();
    assert!((recall - (odd + 2.0 * even) / 3.0).abs() < 1e-9, "{first}");
    assert!(
        even > versus["even"]["lexical_recall"].as_f64().unwrap(),
        "{first}"
    );
    assert!(
        versus["even"]["hit"].as_f64().unwrap() > versus["even"]["lexical_hit"].as_f64().unwrap(),
        "{first}"
    );
    // What ran: every tool's vector, every query ranked with them.
    assert_eq!(versus["search"], "hybrid", "{first}");
    assert_eq!(
        versus["embedded"],
        json!({"ready": 3, "total": 3}),
        "{first}"
    );
    assert_eq!(versus["hybrid_queries"], 3, "{first}");
}
