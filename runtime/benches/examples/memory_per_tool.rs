//! Heap bytes that Quiver keeps per tool beyond the tool's own schema.
//!
//! Loads reference catalogs (`../../../shared/catalogs` relative to this
//! crate's manifest) into a `ToolRegistry`, builds a `Catalog` and its
//! `SearchIndex`, and measures live heap bytes with a counting global
//! allocator. The baseline is each tool's `inputSchema` alone as the
//! registry holds it (a `quiver_tool::schema::Schema`: its compact JSON
//! text), measured the same way; the same schemas parsed into
//! `serde_json::Value` trees, as they were held before issue 39, are
//! shown beside it. Target: at most 3 KB per tool
//! beyond its schema. Results: `docs/BENCHMARKS.md`.
//!
//! ```text
//! cargo run --release -p quiver-benches --example memory_per_tool
//! ```
//!
//! "Requested" bytes are the sizes the program asked the allocator for;
//! "malloc" bytes add an estimate of glibc's per-chunk overhead (8-byte
//! header, 16-byte rounding, 32-byte minimum).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use quiver_catalog::assembly::Assembler;
use quiver_catalog::catalog::{Catalog, Retriever};
use quiver_catalog::catalog_file::{self, CatalogDocument};
use quiver_catalog::indexing::MIN_DIRECTORY_SEGMENTS;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_search::enhanced::Directory;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::schema::Schema;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{Tool, ToolSpec};
use serde_json::Value;

/// Target: heap bytes per tool beyond its schema.
const TARGET_BYTES_PER_TOOL: f64 = 3.0 * 1024.0;

// --- Counting allocator -----------------------------------------------------

static LIVE: AtomicUsize = AtomicUsize::new(0);
static LIVE_MALLOC: AtomicUsize = AtomicUsize::new(0);
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// Estimated glibc chunk size for a request of `size` bytes.
fn chunk(size: usize) -> usize {
    ((size + 8 + 15) & !15).max(32)
}

/// `System`, plus counters of live bytes and live allocations.
struct Counting;

fn on_alloc(size: usize) {
    LIVE.fetch_add(size, Ordering::Relaxed);
    LIVE_MALLOC.fetch_add(chunk(size), Ordering::Relaxed);
    LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
}

fn on_dealloc(size: usize) {
    LIVE.fetch_sub(size, Ordering::Relaxed);
    LIVE_MALLOC.fetch_sub(chunk(size), Ordering::Relaxed);
    LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; the counters are
// only updated after `System` succeeded.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `GlobalAlloc::alloc`.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            on_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as `GlobalAlloc::alloc_zeroed`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            on_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) };
        on_dealloc(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as `GlobalAlloc::realloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            on_dealloc(layout.size());
            on_alloc(new_size);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Live heap at one point.
#[derive(Clone, Copy)]
struct Heap {
    bytes: usize,
    malloc: usize,
    blocks: usize,
}

impl Heap {
    fn now() -> Heap {
        Heap {
            bytes: LIVE.load(Ordering::Relaxed),
            malloc: LIVE_MALLOC.load(Ordering::Relaxed),
            blocks: LIVE_BLOCKS.load(Ordering::Relaxed),
        }
    }

    /// What was allocated and is still live since `self`.
    fn since(self) -> Heap {
        let now = Heap::now();
        Heap {
            bytes: now.bytes.saturating_sub(self.bytes),
            malloc: now.malloc.saturating_sub(self.malloc),
            blocks: now.blocks.saturating_sub(self.blocks),
        }
    }

    fn sub(self, other: Heap) -> Heap {
        Heap {
            bytes: self.bytes.saturating_sub(other.bytes),
            malloc: self.malloc.saturating_sub(other.malloc),
            blocks: self.blocks.saturating_sub(other.blocks),
        }
    }
}

/// Runs `build` and returns its value with the heap it still holds.
fn measure<T>(build: impl FnOnce() -> T) -> (T, Heap) {
    let before = Heap::now();
    let value = build();
    (value, before.since())
}

// --- Measurement ------------------------------------------------------------

fn read_catalog(file: &str) -> CatalogDocument {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/catalogs")
        .join(file);
    catalog_file::read(&path).expect("reference catalog is readable")
}

struct Row {
    label: &'static str,
    heap: Heap,
}

fn report(label: &str, files: &[&str]) {
    let documents: Vec<CatalogDocument> = files.iter().map(|f| read_catalog(f)).collect();

    // Baseline: every inputSchema alone, as the registry holds it (its
    // compact text, see `quiver_tool::schema`); and, for comparison, the
    // same schemas parsed into trees, as they were held before.
    let texts: Vec<String> = documents
        .iter()
        .flat_map(|d| &d.servers)
        .flat_map(|s| &s.tools)
        .map(|t| t.input_schema.text().to_owned())
        .collect();
    drop(documents);
    let mut held: Vec<Schema> = Vec::with_capacity(texts.len());
    let (_, schemas) = measure(|| {
        for text in &texts {
            let value: Value = serde_json::from_str(text).expect("schema parses");
            held.push(Schema::new(&value));
        }
    });
    drop(held);
    let mut parsed: Vec<Value> = Vec::with_capacity(texts.len());
    let (_, trees) = measure(|| {
        for text in &texts {
            parsed.push(serde_json::from_str(text).expect("schema parses"));
        }
    });
    drop(parsed);
    let schema_text_bytes: usize = texts.iter().map(String::len).sum();
    drop(texts);

    // The registry, as `catalog_file::read` and `register` fill it.
    let (registry, registry_heap) = measure(|| {
        let registry = ToolRegistry::new();
        let documents: Vec<CatalogDocument> = files.iter().map(|f| read_catalog(f)).collect();
        let reports = catalog_file::register(&registry, documents);
        drop(reports);
        registry
    });
    let snapshot = registry.snapshot();
    let tools = snapshot.len();

    // Rebuild what the registry holds piece by piece, to attribute its bytes.
    // (a) The specs it keeps per source; each `Tool` shares its spec.
    let (specs, specs_heap) = measure(|| {
        snapshot
            .tools()
            .map(|t| {
                Arc::new(ToolSpec::new(
                    t.original_name(),
                    t.description(),
                    Schema::new(&t.input_schema().parsed()),
                ))
            })
            .collect::<Vec<_>>()
    });
    // (b) The built `Tool`s around those shared specs.
    let (built, tools_heap) = measure(|| {
        snapshot
            .tools()
            .zip(&specs)
            .map(|(t, spec)| {
                Arc::new(Tool::from_shared(
                    t.name().to_owned(),
                    t.source().clone(),
                    spec.clone(),
                ))
            })
            .collect::<Vec<_>>()
    });
    drop((specs, built));

    // The catalog and its search index.
    let config = ToolSearchConfig::default();
    let (catalog, catalog_heap) =
        measure(|| Catalog::build(&snapshot, &Scope::all(), &config, true));
    let (_, index_heap) = measure(|| catalog.index().len());
    // The catalog-wide directory the background pass keeps for a catalog
    // of more than MIN_DIRECTORY_SEGMENTS sources.
    let index = catalog.index();
    let (directory, directory_heap) = measure(|| match &*index {
        Retriever::Enhanced(index, _) if index.segments().len() > MIN_DIRECTORY_SEGMENTS => {
            Some(Directory::build(index.segments()))
        }
        _ => None,
    });

    // One arrangement (the tier, listing and tools array of a 200,000-token
    // session): kept on its catalog per listing budget and shared by every
    // turn. Measured on a catalog already built (and arranged for a tiny
    // budget), so only the arrangement and the turn's handle count.
    let assembler = Assembler::new(ToolSearchConfig::default());
    drop(assembler.assemble(&snapshot, &Scope::all(), 1));
    let (assembly, arranged_heap) =
        measure(|| assembler.assemble(&snapshot, &Scope::all(), 200_000));
    let assembly_catalog = assembly.catalog().deferred_count();
    let listing_tokens = assembly.listing().tokens;
    drop(assembly);
    drop(assembler);

    let retained = Heap {
        bytes: registry_heap.bytes
            + catalog_heap.bytes
            + index_heap.bytes
            + directory_heap.bytes
            + arranged_heap.bytes,
        malloc: registry_heap.malloc
            + catalog_heap.malloc
            + index_heap.malloc
            + directory_heap.malloc
            + arranged_heap.malloc,
        blocks: registry_heap.blocks
            + catalog_heap.blocks
            + index_heap.blocks
            + directory_heap.blocks
            + arranged_heap.blocks,
    };
    let beyond = retained.sub(schemas);
    let per = |bytes: usize| bytes as f64 / tools as f64;
    println!(
        "## {label}: {tools} tools, {} servers ({} refused, {} renamed)",
        snapshot.groups().len(),
        snapshot.refused().len(),
        snapshot.renamed().len()
    );
    println!(
        "inputSchema: {schema_text_bytes} bytes of compact JSON text, {:.0} bytes/tool",
        per(schema_text_bytes)
    );
    println!(
        "{:<44} {:>12} {:>10} {:>10} {:>10}",
        "structure", "bytes", "bytes/tool", "malloc/tool", "allocs/tool"
    );
    let rows = [
        Row {
            label: "schema parsed into a tree (before issue 39)",
            heap: trees,
        },
        Row {
            label: "schema as held, compact text (baseline)",
            heap: schemas,
        },
        Row {
            label: "registry (register)",
            heap: registry_heap,
        },
        Row {
            label: "  of which: ToolSpecs (incl. schema)",
            heap: specs_heap,
        },
        Row {
            label: "  of which: Arc<Tool>s (sharing the spec)",
            heap: tools_heap,
        },
        Row {
            label: "  of which: maps, snapshot, other",
            heap: registry_heap.sub(specs_heap).sub(tools_heap),
        },
        Row {
            label: "catalog (Catalog::build)",
            heap: catalog_heap,
        },
        Row {
            label: "search index (Catalog::index, default mode)",
            heap: index_heap,
        },
        Row {
            label: "catalog-wide directory (background pass)",
            heap: directory_heap,
        },
        Row {
            label: "one arrangement (kept per listing budget)",
            heap: arranged_heap,
        },
        Row {
            label: "retained: all of the above",
            heap: retained,
        },
        Row {
            label: "retained beyond the schema",
            heap: beyond,
        },
    ];
    for row in rows {
        println!(
            "{:<44} {:>12} {:>10.0} {:>10.0} {:>10.1}",
            row.label,
            row.heap.bytes,
            per(row.heap.bytes),
            per(row.heap.malloc),
            per(row.heap.blocks)
        );
    }
    let verdict = if per(beyond.bytes) <= TARGET_BYTES_PER_TOOL {
        "within"
    } else {
        "OVER"
    };
    println!(
        "beyond schema: {:.0} bytes/tool requested ({:.0} with malloc overhead): {verdict} the {:.0}-byte target",
        per(beyond.bytes),
        per(beyond.malloc),
        TARGET_BYTES_PER_TOOL
    );
    println!(
        "the arrangement: {} bytes for {assembly_catalog} deferred tools, listing {listing_tokens} tokens",
        arranged_heap.bytes
    );
    println!();
    drop((directory, index, catalog));
}

fn main() {
    println!(
        "size_of: Tool {} bytes, ToolSpec {} bytes, serde_json::Value {} bytes",
        std::mem::size_of::<Tool>(),
        std::mem::size_of::<ToolSpec>(),
        std::mem::size_of::<Value>()
    );
    println!();
    report(
        "mcp-popular + cloudflare-api",
        &["mcp-popular.json", "cloudflare-api.json"],
    );
    report("openapi-saas", &["openapi-saas.json"]);
}
