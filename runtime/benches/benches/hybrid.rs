//! Criterion benchmarks of hybrid search (`tools.tool_search.embeddings`)
//! with all-MiniLM-L6-v2 on the 5,712 tools of `openapi-saas`.
//!
//! - `hybrid/query_embedding`: the model's forward pass for one query (what
//!   a search pays for a query it has not seen), over the 113 queries of
//!   `queries/tool-search-mcp.json` in turn.
//! - `hybrid/fused_search/openapi-saas/5712`: `Assembly::search` with the
//!   query's vector already known: the lexical pass, the cosine of every
//!   tool and the fusion. One hybrid query costs the two together.
//! - `hybrid/embed_tools`: embedding 8 tool texts of the catalog, as the
//!   background worker does (one batch); the throughput line gives tools
//!   per second.
//!
//! The model is the one `.ci/run` extracts into
//! `tests/third_party/models/all-MiniLM-L6-v2` (the benchmark says so and
//! skips when it is missing). Embedding 5,712 tools takes minutes on a
//! small machine, so the tools' vectors are stand-ins: deterministic unit
//! vectors written to a temporary vector cache under each tool's text,
//! which the search then finds ready. What a search costs does not depend
//! on their values (every tool's cosine is computed, and the fusion keeps
//! the same number of candidates). `cargo bench -p quiver-benches --bench
//! hybrid`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog_file;
use quiver_catalog::semantic::{SemanticIndex, tool_text};
use quiver_catalog::settings::{EmbeddingsConfig, ToolSearchConfig};
use quiver_embed::{EmbedOptions, Embedder, TextKey, VectorCache};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn queries() -> Vec<String> {
    let path = root().join("../shared/catalogs/queries/tool-search-mcp.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["query"].as_str().unwrap().to_owned())
        .collect()
}

fn hybrid(c: &mut Criterion) {
    let model = root().join("tests/third_party/models/all-MiniLM-L6-v2");
    if !model.join("model.safetensors").is_file() {
        eprintln!(
            "hybrid: skipped, no model at {} (run the tests/third_party part of .ci/run)",
            model.display()
        );
        return;
    }
    let queries = queries();
    let document =
        catalog_file::read(&root().join("../shared/catalogs/openapi-saas.json")).unwrap();
    let registry = ToolRegistry::new();
    catalog_file::register(&registry, [document]);
    let snapshot = registry.snapshot();
    assert_eq!(snapshot.len(), 5_712, "catalog changed");

    // The same model and threads as the daemon's: half the cores for
    // background batches, every core for a query.
    let embedder = Embedder::load(
        &model,
        &EmbedOptions {
            max_tokens: None,
            threads: Some(std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))),
        },
    )
    .unwrap();

    let state = tempfile::tempdir().unwrap();
    {
        let cache = VectorCache::open(state.path(), embedder.key(), embedder.dimension()).unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let vectors: Vec<(TextKey, Arc<[f32]>)> = snapshot
            .tools()
            .map(|tool| {
                let mut vector: Vec<f32> = (0..embedder.dimension())
                    .map(|_| {
                        seed = seed
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect();
                quiver_embed::model::normalize(&mut vector);
                (TextKey::of(&tool_text(tool)), vector.into())
            })
            .collect();
        cache.insert(&vectors).unwrap();
    }
    let embeddings = EmbeddingsConfig::new(model.clone());
    let semantic = Arc::new(SemanticIndex::open(&embeddings, Some(state.path())).unwrap());
    let mut config = ToolSearchConfig::default();
    config.embeddings = Some(embeddings.clone());
    let assembler = Assembler::with_semantic(config, Some(semantic.clone()));
    let assembly = assembler.assemble(&snapshot, &Scope::all(), 200_000);
    let _ = assembly.catalog().index();
    semantic.wait_idle();
    let status = semantic.status();
    assert_eq!((status.ready, status.embedded), (5_712, 0), "{status:?}");

    let mut group = c.benchmark_group("hybrid");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("query_embedding", |b| {
        let mut next = queries.iter().cycle();
        b.iter(|| embedder.embed_query(black_box(next.next().unwrap().as_str())));
    });
    // Every query's vector once, so the search below measures the search.
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    semantic.shared().prime_queries(&refs, None).unwrap();
    group.bench_function("fused_search/openapi-saas/5712", |b| {
        let mut next = queries.iter().cycle();
        b.iter(|| assembly.search(black_box(next.next().unwrap()), None));
    });
    let texts: Vec<String> = assembly
        .catalog()
        .deferred()
        .take(64)
        .map(|tool| tool_text(tool))
        .collect();
    group.throughput(Throughput::Elements(8));
    group.bench_function("embed_tools", |b| {
        let mut start = 0;
        b.iter(|| {
            let batch: Vec<&str> = texts
                .iter()
                .cycle()
                .skip(start)
                .take(8)
                .map(String::as_str)
                .collect();
            start = (start + 8) % texts.len();
            embedder.embed(black_box(&batch))
        });
    });
    group.finish();
}

criterion_group!(benches, hybrid);
criterion_main!(benches);
