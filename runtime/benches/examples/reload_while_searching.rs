//! Search latency while one plugin reloads again and again: no search may
//! wait for an index build.
//!
//! Loads `mcp-popular.json` and `cloudflare-api.json` from the shared
//! reference catalogs (`../../../shared/catalogs` relative to this crate's
//! manifest) plus a 12-tool plugin, indexes in the background as
//! `quiver serve` does (`Assembler::index_in_background`), then reloads the
//! plugin 50 times (every tool's description changes each time, 50 ms
//! apart) while a thread assembles and searches without pause, as a
//! model's `tool_search` calls do. Prints the search latencies and how long
//! each change took to become searchable. Target: no search above 1 ms.
//! Each search above 0.5 ms is listed with its assembly's share, whether it
//! was the first of a new generation, and how often its thread was
//! descheduled (involuntary context switches), blocked (voluntary ones) or
//! page-faulted meanwhile, which tells the runtime's own work from the
//! machine taking the core away. `--no-reload` runs the same searches with
//! no reload, the baseline of what the machine alone does to them.
//! Results: `docs/BENCHMARKS.md`.
//!
//! ```text
//! cargo run --release -p quiver-benches --example reload_while_searching [-- --no-reload]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog_file;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

const CYCLES: u64 = 50;
const PLUGIN_TOOLS: usize = 12;
const QUERIES: [&str; 6] = [
    "create a DNS record",
    "list open pull requests",
    "word count of a text",
    "send a message to a channel",
    "query the database",
    "revision of the plugin tool",
];

fn plugin_specs(round: u64) -> Vec<ToolSpec> {
    (0..PLUGIN_TOOLS)
        .map(|i| {
            ToolSpec::new(
                format!("dev_tool_{i}"),
                format!(
                    "Plugin tool {i} under development, revision {round}: counts words in a text"
                ),
                json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            )
        })
        .collect()
}

/// What can stall a search besides its own work, counted for the calling
/// thread.
#[derive(Clone, Copy)]
struct Stalls {
    descheduled: i64,
    blocked: i64,
    page_faults: i64,
}

impl Stalls {
    fn now() -> Stalls {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `usage` points to a rusage for getrusage to fill.
        let filled = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) } == 0;
        // SAFETY: zeroed, then filled by getrusage when it succeeded.
        let usage = unsafe { usage.assume_init() };
        assert!(filled, "getrusage(RUSAGE_THREAD) failed");
        Stalls {
            descheduled: usage.ru_nivcsw,
            blocked: usage.ru_nvcsw,
            page_faults: usage.ru_minflt + usage.ru_majflt,
        }
    }

    fn since(self, before: Stalls) -> Stalls {
        Stalls {
            descheduled: self.descheduled - before.descheduled,
            blocked: self.blocked - before.blocked,
            page_faults: self.page_faults - before.page_faults,
        }
    }
}

/// A search above [`SLOW`].
struct Slow {
    index: usize,
    took: Duration,
    assembly: Duration,
    first_of_generation: bool,
    stalls: Stalls,
}

/// The searching session's context size.
const CONTEXT_TOKENS: u64 = 200_000;

/// Searches slower than this are listed one by one.
const SLOW: Duration = Duration::from_micros(500);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/catalogs");
    let documents: Vec<_> = ["mcp-popular.json", "cloudflare-api.json"]
        .iter()
        .map(|f| catalog_file::read(&dir.join(f)).expect("reference catalog is readable"))
        .collect();
    let registry = Arc::new(ToolRegistry::new());
    catalog_file::register(&registry, documents);
    let plugin = ToolSource::Plugin("dev".into());
    registry.set_source_tools(plugin.clone(), plugin_specs(0));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Told the session to come, as `quiver serve` tells it its models'
    // context sizes: the first pass arranges its tools array.
    let assembler = Arc::new(
        Assembler::new(ToolSearchConfig::default()).expecting([(Scope::all(), CONTEXT_TOKENS)]),
    );
    runtime.block_on(async {
        let _task = assembler.index_in_background(&registry);
        assembler
            .index_ready(registry.snapshot().generation())
            .await;
    });
    let tools = registry.snapshot().len();

    let stop = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (registry, assembler, stop) = (registry.clone(), assembler.clone(), stop.clone());
        std::thread::spawn(move || {
            let scope = Scope::all();
            let mut latencies = Vec::new();
            let mut slow = Vec::new();
            let mut generation = 0;
            while !stop.load(Ordering::Relaxed) {
                let index = latencies.len();
                let before = Stalls::now();
                let started = Instant::now();
                let snapshot = registry.snapshot();
                let assembly = assembler.assemble(&snapshot, &scope, CONTEXT_TOKENS);
                let assembled = started.elapsed();
                std::hint::black_box(assembly.search(QUERIES[index % QUERIES.len()], None));
                let took = started.elapsed();
                latencies.push(took);
                if took > SLOW {
                    slow.push(Slow {
                        index,
                        took,
                        assembly: assembled,
                        first_of_generation: snapshot.generation() != generation,
                        stalls: Stalls::now().since(before),
                    });
                }
                generation = snapshot.generation();
            }
            (latencies, slow)
        })
    };

    let reload = !std::env::args().any(|a| a == "--no-reload");
    let mut searchable = Vec::new();
    runtime.block_on(async {
        for round in 1..=CYCLES {
            if !reload {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let started = Instant::now();
            let generation = registry
                .set_source_tools(plugin.clone(), plugin_specs(round))
                .generation;
            assembler.index_ready(generation).await;
            searchable.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    stop.store(true, Ordering::Relaxed);
    let (mut latencies, slow) = searcher.join().unwrap();
    latencies.sort();
    searchable.sort();

    if reload {
        println!("{tools} tools, {CYCLES} reloads of a {PLUGIN_TOOLS}-tool plugin, 50 ms apart");
    } else {
        println!("{tools} tools, no reload (baseline), {CYCLES} × 50 ms");
    }
    for s in &slow {
        println!(
            "search #{} took {:.1?} (assembly {:.1?}{}): descheduled {}, blocked {}, page faults {}",
            s.index,
            s.took,
            s.assembly,
            if s.first_of_generation {
                ", first of its generation"
            } else {
                ""
            },
            s.stalls.descheduled,
            s.stalls.blocked,
            s.stalls.page_faults,
        );
    }
    println!(
        "searches (assemble + search): {} | median {:.1?} | p99 {:.1?} | p99.9 {:.1?} | max {:.1?} | above 1 ms: {}",
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        latencies.last().unwrap(),
        latencies
            .iter()
            .filter(|l| **l > Duration::from_millis(1))
            .count()
    );
    if reload {
        println!(
            "change to searchable: median {:.2?} | max {:.2?}",
            percentile(&searchable, 0.5),
            searchable.last().unwrap()
        );
    }
}
