//! The report's in-process figures: each step of loading a catalog, timed
//! alone (reading the file, registering its tools, the first and a warm
//! assembly, the first search with its index build, a search), a
//! 200-tool MCP listing registered the way a connecting server's is, and
//! a query far longer than any model writes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog_file::{self, CatalogDocument};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_mcp::config::ToolFilter;
use quiver_mcp::connection::specs_from_listing;
use quiver_tool::integrity::{self, Trust};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::ToolSource;

use super::{CONTEXT_TOKENS, CatalogSet, QUERY, thousands};

/// Distinct words of the long query.
const LONG_QUERY_WORDS: usize = 64_000;

/// `runs` runs of `once` (after one unmeasured), the median.
fn median(runs: usize, mut once: impl FnMut() -> Duration) -> Duration {
    let _ = once();
    let mut times: Vec<Duration> = (0..runs.max(1)).map(|_| once()).collect();
    times.sort();
    times[times.len() / 2]
}

fn timed<T>(run: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = run();
    (value, started.elapsed())
}

fn show(time: Duration) -> String {
    let us = time.as_secs_f64() * 1e6;
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.1} µs")
    }
}

fn read(files: &[PathBuf]) -> Vec<CatalogDocument> {
    files
        .iter()
        .filter_map(|file| match catalog_file::read(file) {
            Ok(document) => Some(document),
            Err(error) => {
                eprintln!("warning: {error}");
                None
            }
        })
        .collect()
}

/// Every step once per run, in order, on fresh objects: the medians.
struct Steps {
    read: Duration,
    register: Duration,
    first_assembly: Duration,
    warm_assembly: Duration,
    first_search: Duration,
    search: Duration,
}

fn steps(set: &CatalogSet, runs: usize) -> Steps {
    let mut all = Vec::new();
    for _ in 0..runs.max(1) {
        let (documents, read_time) = timed(|| read(&set.files));
        let registry = ToolRegistry::new();
        let (_, register) = timed(|| catalog_file::register(&registry, documents));
        let snapshot = registry.snapshot();
        let assembler = Assembler::new(ToolSearchConfig::default());
        let (assembly, first_assembly) =
            timed(|| assembler.assemble(&snapshot, &Scope::all(), CONTEXT_TOKENS));
        let (_, first_search) = timed(|| assembly.search(QUERY, None));
        drop(assembly);
        let warm_assembly = median(20, || {
            timed(|| assembler.assemble(&snapshot, &Scope::all(), CONTEXT_TOKENS)).1
        });
        let assembly = assembler.assemble(&snapshot, &Scope::all(), CONTEXT_TOKENS);
        let search = median(20, || timed(|| assembly.search(QUERY, None)).1);
        all.push(Steps {
            read: read_time,
            register,
            first_assembly,
            warm_assembly,
            first_search,
            search,
        });
    }
    let pick = |f: fn(&Steps) -> Duration| {
        let mut times: Vec<Duration> = all.iter().map(f).collect();
        times.sort();
        times[times.len() / 2]
    };
    Steps {
        read: pick(|s| s.read),
        register: pick(|s| s.register),
        first_assembly: pick(|s| s.first_assembly),
        warm_assembly: pick(|s| s.warm_assembly),
        first_search: pick(|s| s.first_search),
        search: pick(|s| s.search),
    }
}

/// The steps a connecting server's listing takes to the registry: the
/// specs made from the answer (`specs_from_listing`), the integrity
/// review that pins them (first sight, `accept_new`), and the registry's
/// new generation.
struct ListingSteps {
    specs: Duration,
    review: Duration,
    registry: Duration,
}

fn mcp_listing(registry: &ToolRegistry, runs: usize) -> ListingSteps {
    let tools = quiver_benches::generated::mcp_listing(200);
    let filter = ToolFilter::default();
    let mut measured = Vec::new();
    for round in 0..runs.max(1) * 10 {
        let answer = tools.clone();
        let (specs, specs_time) = timed(|| specs_from_listing("bench", &filter, answer));
        let (review, review_time) = timed(|| {
            integrity::review(
                specs,
                Trust::AcceptNew,
                &[],
                &Default::default(),
                &Default::default(),
                0,
            )
        });
        let source = ToolSource::Mcp(format!("bench-{round}"));
        let (_, registry_time) = timed(|| registry.set_source_tools(source.clone(), review.served));
        registry.remove_source(&source);
        measured.push(ListingSteps {
            specs: specs_time,
            review: review_time,
            registry: registry_time,
        });
    }
    let pick = |f: fn(&ListingSteps) -> Duration| {
        let mut times: Vec<Duration> = measured.iter().map(f).collect();
        times.sort();
        times[times.len() / 2]
    };
    ListingSteps {
        specs: pick(|s| s.specs),
        review: pick(|s| s.review),
        registry: pick(|s| s.registry),
    }
}

pub(crate) fn report(sets: &[CatalogSet], runs: usize) {
    println!("## In process: loading a catalog, step by step\n");
    println!(
        "Each step on fresh objects (median of {runs} loads; warm assembly and search: median of 20), context {CONTEXT_TOKENS} tokens, query `{QUERY}`.\n"
    );
    println!(
        "| catalog | tools | read the file | register | per tool | first assembly | warm assembly | first search (index build) | search |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for set in sets {
        eprintln!("in process: {}", set.label);
        let steps = steps(set, runs);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            set.label,
            thousands(set.tools),
            show(steps.read),
            show(steps.register),
            show(steps.register / set.tools.max(1) as u32),
            show(steps.first_assembly),
            show(steps.warm_assembly),
            show(steps.first_search),
            show(steps.search)
        );
    }
    println!();

    // The listing joins the largest catalog, as a server connecting to a
    // loaded daemon.
    let registry = ToolRegistry::new();
    if let Some(largest) = sets.iter().max_by_key(|s| s.tools) {
        catalog_file::register(&registry, read(&largest.files));
    }
    let listing = mcp_listing(&registry, runs);
    let total = listing.specs + listing.review + listing.registry;
    println!(
        "A 200-tool MCP listing registered beside {} tools (median of {} servers): specs {}, integrity review {}, registry {}; {} in all, {} per tool.\n",
        thousands(registry.snapshot().len()),
        runs.max(1) * 10,
        show(listing.specs),
        show(listing.review),
        show(listing.registry),
        show(total),
        show(total / 200)
    );

    let long: String = (0..LONG_QUERY_WORDS)
        .map(|i| format!("w{i:05}x "))
        .collect();
    let unknown: String = (0..10).map(|i| format!("w{i:05}x ")).collect();
    let snapshot = registry.snapshot();
    // As a one-shot `quiver catalog search` runs it (no directory over the
    // segments: each word is looked up in every server's segment), and as
    // the daemon does, whose background pass builds the directory when the
    // registry publishes (`Assembler::prepare`).
    for (label, prepared) in [
        ("one-shot, no directory", false),
        ("daemon, after the background pass", true),
    ] {
        let assembler = Assembler::new(ToolSearchConfig::default());
        if prepared {
            assembler.prepare(&snapshot);
        }
        let assembly = assembler.assemble(&snapshot, &Scope::all(), CONTEXT_TOKENS);
        let _ = assembly.search(QUERY, None);
        // The first query matching nothing makes the name texts of the
        // substring fallback.
        let _ = assembly.search(&unknown, None);
        let long_time = median(runs, || timed(|| assembly.search(&long, None)).1);
        let unknown_time = median(runs, || timed(|| assembly.search(&unknown, None)).1);
        println!(
            "A query of {} distinct words ({} characters) against those {} tools ({label}): {}; 10 unknown words: {}.\n",
            thousands(LONG_QUERY_WORDS),
            thousands(long.len()),
            thousands(snapshot.len()),
            show(long_time),
            show(unknown_time)
        );
    }
}
