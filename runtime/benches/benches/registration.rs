//! Criterion benchmarks for registering a connecting MCP server's listing,
//! step by step, the way `quiver-mcp` and the daemon take it.
//!
//! - `mcp_listing_200/specs`: the specs made from a 200-tool `tools/list`
//!   answer (`specs_from_listing`: filter, schema normalisation, metadata).
//! - `mcp_listing_200/review`: the integrity review of those specs on
//!   first sight (`integrity::review`, trust `accept_new`, no pins): hashes,
//!   screening, the pins and changes it records.
//! - `mcp_listing_200/registry_beside_100000`: the registry's new generation
//!   with the 200 served tools beside the generated catalog's 100,000
//!   (`ToolRegistry::set_source_tools`), the source removed again between
//!   iterations.
//!
//! `cargo bench -p quiver-benches --bench registration`. Results:
//! `docs/BENCHMARKS.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use quiver_benches::generated::{generate_catalog, mcp_listing};
use quiver_catalog::catalog_file;
use quiver_mcp::config::ToolFilter;
use quiver_mcp::connection::specs_from_listing;
use quiver_tool::integrity::{self, Trust};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::tool::{ToolSource, ToolSpec};

fn review(specs: Vec<ToolSpec>) -> integrity::Review {
    integrity::review(
        specs,
        Trust::AcceptNew,
        &[],
        &Default::default(),
        &Default::default(),
        0,
    )
}

fn bench_listing(c: &mut Criterion) {
    let listing = mcp_listing(200);
    let filter = ToolFilter::default();
    let specs = specs_from_listing("bench", &filter, listing.clone());
    let served = review(specs.clone()).served;
    assert_eq!(served.len(), 200, "every generated tool passes the review");

    let registry = ToolRegistry::new();
    catalog_file::register(&registry, [generate_catalog(500, 200)]);
    let source = ToolSource::Mcp("bench".into());

    let mut group = c.benchmark_group("mcp_listing_200");
    group.bench_function("specs", |b| {
        b.iter_batched(
            || listing.clone(),
            |answer| black_box(specs_from_listing("bench", &filter, answer)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("review", |b| {
        b.iter_batched(
            || specs.clone(),
            |specs| black_box(review(specs)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("registry_beside_100000", |b| {
        b.iter_batched(
            || {
                registry.remove_source(&source);
                served.clone()
            },
            |served| black_box(registry.set_source_tools(source.clone(), served)),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_listing);
criterion_main!(benches);
