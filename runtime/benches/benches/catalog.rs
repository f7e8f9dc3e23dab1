//! Criterion benchmarks for per-turn assembly and tool search.
//!
//! Catalogs are read at run time from the shared reference catalogs
//! (`../../../shared/catalogs` relative to this crate's manifest), plus one
//! generated 100,000-tool catalog (500 servers x 200 tools) built
//! deterministically here. Results and targets: `docs/BENCHMARKS.md`.
//!
//! - `assembly/cold/*`: the catalog is rebuilt on every assembly
//!   (`Assembler::with_cache_capacity(config, 0)`).
//! - `assembly/warm/*`: the default catalog cache hits on every assembly.
//! - `search/queries_{classic,enhanced}/*`: one iteration runs every query of
//!   `queries/tool-search-mcp.json` (113) through `Assembly::search` on a
//!   warmed index; the throughput line gives queries per second.
//! - `search/index_build_{classic,enhanced}/*`: building each mode's index over the deferred tools.
//! - `registry/republish_one_server/*`: one source sets an unchanged tool
//!   list again (`ToolRegistry::set_source_tools`).
//! - `change/replace_one_server_until_searchable/*`: one server's tools all
//!   change (every description differs each time); the registry publishes
//!   and the background pass (`Assembler::prepare`, which the daemon runs
//!   on the blocking pool) builds that server's segment and the catalog's
//!   index, after which the next search uses the new tools.
//! - `change/first_search_after_change/*`: the first `Assembly::search`
//!   after such a change, once the pass is done; `search_without_change`:
//!   the same query when nothing changed.
//! - `change/first_assembly_after_change/*`: a turn that reaches the
//!   changed generation before the pass: its catalog is made from the
//!   previous one's groups and its tools array arranged, inline.
//!
//! `cargo bench -p quiver-benches --bench catalog` runs everything; a filter
//! such as `-- search/queries` loads only the catalogs it needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use criterion::{
    BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use quiver_benches::generated::generate_catalog;
use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog::Retriever;
use quiver_catalog::catalog_file::{self, CatalogDocument};
use quiver_catalog::settings::SearchMode;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::{RegistrySnapshot, ToolRegistry};
use quiver_tool::scope::Scope;
use quiver_tool::tool::ToolSpec;
use serde_json::Value;

/// Context size passed to every assembly, in tokens.
const CONTEXT_TOKENS: u64 = 200_000;

fn catalogs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/catalogs")
}

fn read_catalog(file: &str) -> CatalogDocument {
    catalog_file::read(&catalogs_dir().join(file)).expect("reference catalog is readable")
}

/// A registry loaded with one catalog set, and its current snapshot.
struct Fixture {
    label: &'static str,
    registry: ToolRegistry,
    snapshot: Arc<RegistrySnapshot>,
}

impl Fixture {
    fn load(label: &'static str, documents: Vec<CatalogDocument>) -> Fixture {
        let started = Instant::now();
        let registry = ToolRegistry::new();
        catalog_file::register(&registry, documents);
        let snapshot = registry.snapshot();
        eprintln!(
            "loaded {label}: {} tools from {} servers in {:.2?} (catalog_file::register)",
            snapshot.len(),
            snapshot.groups().len(),
            started.elapsed()
        );
        Fixture {
            label,
            registry,
            snapshot,
        }
    }

    fn tools(&self) -> usize {
        self.snapshot.len()
    }
}

fn github() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::load("github-mcp", vec![read_catalog("github-mcp.json")]))
}

fn popular() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::load("mcp-popular", vec![read_catalog("mcp-popular.json")]))
}

fn popular_cloudflare() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        Fixture::load(
            "mcp-popular+cloudflare",
            vec![
                read_catalog("mcp-popular.json"),
                read_catalog("cloudflare-api.json"),
            ],
        )
    })
}

fn saas() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::load("openapi-saas", vec![read_catalog("openapi-saas.json")]))
}

fn generated() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| Fixture::load("generated", vec![generate_catalog(500, 200)]))
}

/// The query strings of `queries/tool-search-mcp.json`.
fn queries() -> &'static [String] {
    static Q: OnceLock<Vec<String>> = OnceLock::new();
    Q.get_or_init(|| {
        let path = catalogs_dir().join("queries/tool-search-mcp.json");
        let text = std::fs::read_to_string(path).expect("query file is readable");
        let file: Value = serde_json::from_str(&text).expect("query file is JSON");
        file["queries"]
            .as_array()
            .expect("queries array")
            .iter()
            .map(|q| q["query"].as_str().expect("query string").to_owned())
            .collect()
    })
}

// --- Benchmarks -------------------------------------------------------------

/// A catalog set: benchmark label, tool count, loader. Fixtures are loaded
/// inside the benchmark closures, so a filtered run loads only what it uses.
type Set = (&'static str, usize, fn() -> &'static Fixture);

const GITHUB: Set = ("github-mcp", 121, github);
const POPULAR: Set = ("mcp-popular", 1_138, popular);
const POPULAR_CLOUDFLARE: Set = ("mcp-popular+cloudflare", 4_472, popular_cloudflare);
const SAAS: Set = ("openapi-saas", 5_712, saas);
const GENERATED: Set = ("generated", 100_000, generated);

fn load((label, tools, loader): Set) -> &'static Fixture {
    let fixture = loader();
    assert_eq!(
        (fixture.label, fixture.tools()),
        (label, tools),
        "catalog set changed"
    );
    fixture
}

fn id(function: &str, (label, tools, _): Set) -> BenchmarkId {
    BenchmarkId::new(function, format!("{label}/{tools}"))
}

fn assembly(c: &mut Criterion, sets: &[Set]) {
    let scope = Scope::all();
    let mut group = c.benchmark_group("assembly");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for &set in sets {
        group.bench_function(id("cold", set), |b| {
            let snapshot = &load(set).snapshot;
            let cold = Assembler::with_cache_capacity(ToolSearchConfig::default(), 0);
            b.iter(|| cold.assemble(black_box(snapshot), &scope, CONTEXT_TOKENS));
        });
        group.bench_function(id("warm", set), |b| {
            let snapshot = &load(set).snapshot;
            let warm = Assembler::new(ToolSearchConfig::default());
            drop(warm.assemble(snapshot, &scope, CONTEXT_TOKENS));
            b.iter(|| warm.assemble(black_box(snapshot), &scope, CONTEXT_TOKENS));
        });
    }
    group.finish();
}

const MODES: [SearchMode; 2] = [SearchMode::Classic, SearchMode::Enhanced];

fn mode_name(mode: SearchMode) -> &'static str {
    match mode {
        SearchMode::Classic => "classic",
        SearchMode::Enhanced => "enhanced",
    }
}

fn mode_config(mode: SearchMode) -> ToolSearchConfig {
    let mut config = ToolSearchConfig::default();
    config.mode = mode;
    config
}

fn search(c: &mut Criterion, query_sets: &[Set], index_sets: &[Set]) {
    let scope = Scope::all();
    let queries = queries();
    let mut group = c.benchmark_group("search");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(queries.len() as u64));
    for mode in MODES {
        let config = mode_config(mode);
        for &set in query_sets {
            group.bench_function(id(&format!("queries_{}", mode_name(mode)), set), |b| {
                let assembler = Assembler::new(config.clone());
                let assembly = assembler.assemble(&load(set).snapshot, &scope, CONTEXT_TOKENS);
                // The index is built lazily on the first search: build it now.
                assert_eq!(assembly.catalog().index().len(), set.1);
                b.iter(|| {
                    for query in queries {
                        black_box(assembly.search(black_box(query), None));
                    }
                });
            });
        }
    }
    // Builds take 10 ms to 1 s: one build per sample.
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    for mode in MODES {
        for &set in index_sets {
            group.throughput(Throughput::Elements(set.1 as u64));
            group.bench_function(id(&format!("index_build_{}", mode_name(mode)), set), |b| {
                let assembler = Assembler::new(ToolSearchConfig::default());
                let assembly = assembler.assemble(&load(set).snapshot, &scope, CONTEXT_TOKENS);
                let catalog = assembly.catalog();
                b.iter(|| Retriever::build(mode, catalog.groups()));
            });
        }
    }
    group.finish();
}

/// One MCP server re-sending an unchanged tool list (`tools/list_changed`):
/// `ToolRegistry::set_source_tools` rebuilds the whole snapshot.
fn registry(c: &mut Criterion, sets: &[Set]) {
    let mut group = c.benchmark_group("registry");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for &set in sets {
        group.bench_function(id("republish_one_server", set), |b| {
            let fixture = load(set);
            let server = &fixture.snapshot.groups()[0];
            let specs: Vec<ToolSpec> = server
                .tools()
                .iter()
                .map(|t| {
                    ToolSpec::new(t.original_name(), t.description(), t.input_schema().clone())
                })
                .collect();
            b.iter_batched(
                || specs.clone(),
                |specs| {
                    fixture
                        .registry
                        .set_source_tools(server.source().clone(), specs)
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// One server's tool list with every description changed (`round`
/// differs each time), as a server sends after an upgrade.
fn changed_specs(fixture: &Fixture, round: u64) -> (quiver_tool::tool::ToolSource, Vec<ToolSpec>) {
    let server = &fixture.snapshot.groups()[fixture.snapshot.groups().len() / 2];
    let specs = server
        .tools()
        .iter()
        .map(|t| {
            ToolSpec::new(
                t.original_name(),
                format!("{} (revision {round})", t.description()),
                t.input_schema().clone(),
            )
        })
        .collect();
    (server.source().clone(), specs)
}

/// The next round's change to `registry` (see [`changed_specs`]),
/// published, and its snapshot.
fn change_once(registry: &ToolRegistry, set: Set, round: &mut u64) -> Arc<RegistrySnapshot> {
    *round += 1;
    let (source, specs) = changed_specs(load(set), *round);
    registry.set_source_tools(source, specs);
    registry.snapshot()
}

/// A registry of its own for `set` (changes must not leak into the shared
/// fixtures) with an assembler whose background pass has run once.
fn changing(set: Set) -> (ToolRegistry, Assembler) {
    let fixture = load(set);
    let registry = ToolRegistry::new();
    registry.set_many(
        fixture
            .snapshot
            .groups()
            .iter()
            .map(|g| {
                let specs = g.tools().iter().map(|t| (**t.spec()).clone()).collect();
                (g.source().clone(), specs)
            })
            .collect(),
    );
    registry.set_descriptions(
        fixture
            .snapshot
            .groups()
            .iter()
            .filter_map(|g| Some((g.source().clone(), g.description()?.to_string()))),
    );
    let assembler = Assembler::new(ToolSearchConfig::default());
    assembler.prepare(&registry.snapshot());
    (registry, assembler)
}

fn change(c: &mut Criterion, sets: &[Set]) {
    let scope = Scope::all();
    let mut group = c.benchmark_group("change");
    group
        .sample_size(20)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for &set in sets {
        group.bench_function(id("replace_one_server_until_searchable", set), |b| {
            let (registry, assembler) = changing(set);
            let mut round = 0;
            b.iter_batched(
                || {
                    round += 1;
                    changed_specs(load(set), round)
                },
                |(source, specs)| {
                    registry.set_source_tools(source, specs);
                    assembler.prepare(&registry.snapshot());
                },
                BatchSize::PerIteration,
            );
            let assembly = assembler.assemble(&registry.snapshot(), &scope, CONTEXT_TOKENS);
            assert!(
                assembly.catalog().is_index_ready(),
                "the pass indexed the change"
            );
        });
        group.bench_function(id("first_search_after_change", set), |b| {
            let (registry, assembler) = changing(set);
            let query = &queries()[0];
            let mut round = 0;
            b.iter_batched(
                || {
                    let snapshot = change_once(&registry, set, &mut round);
                    assembler.prepare(&snapshot);
                    assembler.assemble(&snapshot, &scope, CONTEXT_TOKENS)
                },
                |assembly| assembly.search(query, None),
                BatchSize::PerIteration,
            );
        });
        group.bench_function(id("first_assembly_after_change", set), |b| {
            let (registry, assembler) = changing(set);
            let mut round = 0;
            b.iter_batched(
                || change_once(&registry, set, &mut round),
                |snapshot| assembler.assemble(&snapshot, &scope, CONTEXT_TOKENS),
                BatchSize::PerIteration,
            );
        });
        group.bench_function(id("search_without_change", set), |b| {
            let (registry, assembler) = changing(set);
            let query = &queries()[0];
            let assembly = assembler.assemble(&registry.snapshot(), &scope, CONTEXT_TOKENS);
            b.iter(|| assembly.search(query, None));
        });
    }
    group.finish();
}

/// The reference catalogs. They run first, before the generated catalog's
/// much larger registry is allocated.
fn reference_catalogs(c: &mut Criterion) {
    assembly(c, &[GITHUB, POPULAR, POPULAR_CLOUDFLARE, SAAS]);
    search(
        c,
        &[POPULAR, POPULAR_CLOUDFLARE, SAAS],
        &[POPULAR, POPULAR_CLOUDFLARE, SAAS],
    );
    registry(c, &[POPULAR_CLOUDFLARE]);
    change(c, &[POPULAR, POPULAR_CLOUDFLARE]);
}

/// The generated 100,000-tool catalog (about 2 s to generate and register).
fn generated_catalog(c: &mut Criterion) {
    assembly(c, &[GENERATED]);
    search(c, &[], &[GENERATED]);
    registry(c, &[GENERATED]);
    change(c, &[GENERATED]);
}

criterion_group!(benches, reference_catalogs, generated_catalog);
criterion_main!(benches);
