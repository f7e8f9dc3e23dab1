//! Hybrid search (`tools.tool_search.embeddings`): the assembler's search,
//! the one `tool_search` runs, finds a tool that a request in other words
//! misses lexically once its vector is ready; the vectors are cached in the
//! state directory, so a second start embeds nothing; an off-topic query
//! still finds nothing.

use std::sync::Arc;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::semantic::SemanticIndex;
use quiver_catalog::settings::{EmbeddingsConfig, ToolSearchConfig};
use quiver_tests::minilm_model_dir;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    let spec =
        |name: &str, description: &str| ToolSpec::new(name, description, json!({"type": "object"}));
    registry.set_source_tools(
        ToolSource::Mcp("twilio".into()),
        vec![
            spec(
                "CreateMessage",
                "Send a message from the account used to make the request",
            ),
            spec(
                "UpdateCall",
                "Modify a call in progress, for example end it",
            ),
            spec(
                "ListRecording",
                "Retrieve a list of recordings belonging to the account",
            ),
        ],
    );
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            spec("create_issue", "Open a new issue in a repository"),
            spec("list_commits", "List the commits of a branch"),
        ],
    );
    registry
}

#[test]
fn a_paraphrase_finds_its_tool_and_vectors_are_cached() {
    let state = tempfile::tempdir().unwrap();
    let mut embeddings = EmbeddingsConfig::new(minilm_model_dir());
    embeddings.weight = 0.5;
    let mut config = ToolSearchConfig::default();
    config.embeddings = Some(embeddings.clone());
    let registry = registry();
    let snapshot = registry.snapshot();

    let lexical = Assembler::new(config.clone()).assemble(&snapshot, &Scope::all(), 200_000);
    let names = |hits: Vec<quiver_search::Scored>| -> Vec<String> {
        hits.iter().map(|h| h.tool.name().to_owned()).collect()
    };
    assert!(
        !names(lexical.search("text someone on their phone", Some(3)))
            .contains(&"mcp_twilio_CreateMessage".to_owned()),
        "the lexical search was meant to miss this paraphrase"
    );

    let semantic = Arc::new(SemanticIndex::open(&embeddings, Some(state.path())).unwrap());
    let assembler = Assembler::with_semantic(config.clone(), Some(semantic.clone()));
    let assembly = assembler.assemble(&snapshot, &Scope::all(), 200_000);
    let _ = assembly.catalog().index();
    semantic.wait_idle();
    let progress = semantic.progress();
    assert!(progress.iter().all(|p| p.ready == p.total), "{progress:?}");
    assert_eq!(progress.iter().map(|p| p.total).sum::<usize>(), 5);

    let hits = names(assembly.search("text someone on their phone", Some(3)));
    assert_eq!(
        hits.first().map(String::as_str),
        Some("mcp_twilio_CreateMessage"),
        "{hits:?}"
    );
    // The exact name still ranks first, after fusion.
    let hits = names(assembly.search("list_commits", Some(3)));
    assert_eq!(
        hits.first().map(String::as_str),
        Some("mcp_github_list_commits"),
        "{hits:?}"
    );
    // Off topic: nothing, as lexically.
    let hits = names(assembly.search("bake a sourdough loaf", Some(3)));
    assert!(hits.is_empty(), "{hits:?}");

    let cache = semantic.cache_file().unwrap();
    assert!(cache.starts_with(state.path()));
    assert_eq!(semantic.embedded(), 5);
    drop(assembly);
    drop(assembler);
    drop(semantic);

    // A second start takes every vector from the cache.
    let again = Arc::new(SemanticIndex::open(&embeddings, Some(state.path())).unwrap());
    let assembler = Assembler::with_semantic(config, Some(again.clone()));
    let assembly = assembler.assemble(&snapshot, &Scope::all(), 200_000);
    let _ = assembly.catalog().index();
    assert!(again.progress().iter().all(|p| p.ready == p.total));
    assert_eq!(again.embedded(), 0);
}
