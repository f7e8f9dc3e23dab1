//! The segmented index against one index built over every tool at once
//! (`reference`): random add, remove and replace sequences over servers of
//! the shared catalogs, with segments reused for the servers that did not
//! change, must give the same results, in the same order, with the same
//! scores (to 1e-9), for the reference queries and for typo, compound,
//! prefix, exact-name and `server:` queries; with no directory, a directory
//! of every segment, and a stale one covering some of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use quiver_tool::naming::mcp_tool_name;
use quiver_tool::tool::{Tool, ToolSource, ToolSpec};
use serde_json::Value;

use super::reference;
use super::{Directory, EnhancedIndex, EnhancedSegment};
use crate::classic::{ClassicSegment, Scored, SearchIndex};

fn catalogs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/catalogs")
}

fn read(file: &str) -> Value {
    let path = catalogs_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is readable: {e}", path.display()));
    serde_json::from_str(&text).expect("catalog is JSON")
}

/// A server as the pool holds it: name, description, tool specs.
#[derive(Clone)]
struct Server {
    name: String,
    description: String,
    specs: Vec<ToolSpec>,
}

fn servers_of(file: &str) -> Vec<Server> {
    read(file)["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|server| Server {
            name: server["name"].as_str().expect("name").to_owned(),
            description: server["description"].as_str().unwrap_or("").to_owned(),
            specs: server["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .map(|tool| {
                    ToolSpec::new(
                        tool["name"].as_str().expect("tool name"),
                        tool["description"].as_str().unwrap_or(""),
                        tool.get("inputSchema")
                            .cloned()
                            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    )
                    .with_operation(tool["api_call"].as_str().map(str::to_owned))
                })
                .collect(),
        })
        .collect()
}

/// Small and mid-sized servers of two catalogs (the largest are left out
/// so a case stays fast in debug builds), and gorilla's tools, which make
/// the same calls under several names.
fn pool() -> &'static [Server] {
    static POOL: OnceLock<Vec<Server>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut pool: Vec<Server> = servers_of("mcp-popular.json")
            .into_iter()
            .filter(|s| s.specs.len() <= 30)
            .collect();
        pool.extend(
            servers_of("livemcpbench.json")
                .into_iter()
                .filter(|s| s.specs.len() <= 12)
                .take(20),
        );
        if let Some(mut gorilla) = servers_of("gorilla-apibench.json").into_iter().next() {
            gorilla.specs.truncate(60);
            pool.push(gorilla);
        }
        // Names must be distinct: the catalogs share a few.
        let mut seen = std::collections::HashSet::new();
        pool.retain(|s| seen.insert(s.name.clone()));
        pool
    })
}

fn queries() -> &'static [String] {
    static QUERIES: OnceLock<Vec<String>> = OnceLock::new();
    QUERIES.get_or_init(|| {
        let file = read("queries/tool-search-mcp.json");
        let mut queries: Vec<String> = file["queries"]
            .as_array()
            .expect("queries")
            .iter()
            .step_by(4)
            .map(|q| q["query"].as_str().expect("query").to_owned())
            .collect();
        queries.extend(
            [
                "naviagte the brwser",
                "websearch for news",
                "summarization of a page",
                "screenshotting",
                "read_file",
                "mcp_filesystem_read_file and list",
                "server:github create issue",
                "server:time what time is it",
                "save the notes to /root/notes/today.md",
                "historical weather",
                "find docs for a library",
                "delete the repo",
                "lookup",
                // A tool's name in words, and a place.
                "list work items",
                "take a screenshot of the page and list the projects",
                "where can I park near the Forbidden City",
            ]
            .map(str::to_owned),
        );
        queries
    })
}

/// The tools of one server as a registry lists them: exposed names, sorted,
/// each knowing its position in the server's list.
fn tools_of(server: &Server) -> Vec<Arc<Tool>> {
    let source = ToolSource::Mcp(server.name.clone());
    let mut tools: Vec<Arc<Tool>> = server
        .specs
        .iter()
        .enumerate()
        .map(|(position, spec)| {
            Arc::new(
                Tool::new(
                    mcp_tool_name(&server.name, &spec.name),
                    source.clone(),
                    spec,
                )
                .at_position(position as u32),
            )
        })
        .collect();
    tools.sort_by(|a, b| a.name().cmp(b.name()));
    tools.dedup_by(|a, b| a.name() == b.name());
    tools
}

#[derive(Debug, Clone)]
enum Change {
    /// Adds the pool's server (or replaces it when present).
    Add(usize),
    /// Removes the n-th present server.
    Remove(usize),
    /// Replaces the n-th present server by a variant: every `keep`-th of
    /// its tools kept, its description replaced.
    Replace(usize, usize),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0..64usize).prop_map(Change::Add),
        1 => (0..64usize).prop_map(Change::Remove),
        2 => ((0..64usize), (1..4usize)).prop_map(|(n, keep)| Change::Replace(n, keep)),
    ]
}

/// What the catalog holds: per server, its tools, description and the
/// segments built for them (reused until the server changes).
#[derive(Default)]
struct State {
    servers: BTreeMap<String, Entry>,
    /// Every enhanced segment built so far, replaced and removed ones too:
    /// a directory built earlier still names them.
    history: Vec<Arc<EnhancedSegment>>,
}

struct Entry {
    description: String,
    tools: Vec<Arc<Tool>>,
    enhanced: Arc<EnhancedSegment>,
    classic: Arc<ClassicSegment>,
}

impl State {
    fn set(&mut self, name: &str, description: String, tools: Vec<Arc<Tool>>) {
        let described = (!description.is_empty()).then_some(description.as_str());
        let enhanced = Arc::new(EnhancedSegment::build(described, &tools));
        self.history.push(enhanced.clone());
        let classic = Arc::new(ClassicSegment::build(&tools));
        self.servers.insert(
            name.to_owned(),
            Entry {
                description,
                tools,
                enhanced,
                classic,
            },
        );
    }

    fn apply(&mut self, change: &Change) {
        let pool = pool();
        match *change {
            Change::Add(n) => {
                let server = &pool[n % pool.len()];
                self.set(&server.name, server.description.clone(), tools_of(server));
            }
            Change::Remove(n) => {
                if let Some(name) = self.nth(n) {
                    self.servers.remove(&name);
                }
            }
            Change::Replace(n, keep) => {
                if let Some(name) = self.nth(n) {
                    let server = pool.iter().find(|s| s.name == name).expect("pooled");
                    let mut variant = server.clone();
                    variant.specs = variant.specs.into_iter().step_by(keep).collect();
                    let description = format!("{} (variant {keep})", server.description);
                    self.set(&name, description, tools_of(&variant));
                }
            }
        }
    }

    fn nth(&self, n: usize) -> Option<String> {
        let count = self.servers.len();
        (count > 0).then(|| self.servers.keys().nth(n % count).cloned())?
    }
}

fn same(label: &str, query: &str, segmented: &[Scored], full: &[Scored]) {
    let names = |hits: &[Scored]| -> Vec<String> {
        hits.iter().map(|h| h.tool.name().to_owned()).collect()
    };
    assert_eq!(
        names(segmented),
        names(full),
        "{label}: order differs for {query:?}"
    );
    for (a, b) in segmented.iter().zip(full) {
        assert!(
            (a.score - b.score).abs() <= 1e-9,
            "{label}: {} scores {} segmented, {} in one index, for {query:?}",
            a.tool.name(),
            a.score,
            b.score
        );
    }
}

fn check(state: &State) {
    let entries: Vec<&Entry> = state.servers.values().collect();
    let segments: Vec<Arc<EnhancedSegment>> = entries.iter().map(|e| e.enhanced.clone()).collect();
    let segmented = EnhancedIndex::from_segments(segments.clone());
    // Through a directory of every segment in the index, and through one
    // of every other segment ever built (some in the index, some replaced
    // or removed since), the rest looked up one by one.
    let everything = EnhancedIndex::with_directory(
        segments.clone(),
        Some(Arc::new(Directory::build(&segments))),
    );
    assert_eq!(everything.uncovered_segments(), 0);
    let partly = EnhancedIndex::with_directory(
        segments,
        Some(Arc::new(Directory::build(state.history.iter().step_by(2)))),
    );
    let full = reference::EnhancedIndex::build_described(entries.iter().map(|e| {
        (
            (!e.description.is_empty()).then_some(e.description.as_str()),
            e.tools.as_slice(),
        )
    }));
    let classic = SearchIndex::from_segments(entries.iter().map(|e| e.classic.clone()).collect());
    let classic_full = SearchIndex::build(entries.iter().flat_map(|e| e.tools.iter()));
    assert_eq!(segmented.len(), full.len());
    // Small limits fill the results early, so segments and the tools
    // within them are pruned; 10 is what a model's search asks.
    for limit in [1, 3, 10] {
        for query in queries() {
            let expected = full.search(query, limit);
            same(
                "enhanced",
                query,
                &segmented.search(query, limit),
                &expected,
            );
            same(
                "enhanced, full directory",
                query,
                &everything.search(query, limit),
                &expected,
            );
            same(
                "enhanced, stale directory",
                query,
                &partly.search(query, limit),
                &expected,
            );
        }
    }
    for query in queries() {
        same(
            "classic",
            query,
            &classic.search(query, 10),
            &classic_full.search(query, 10),
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn segments_score_as_one_index_through_any_change_sequence(
        initial in proptest::collection::vec(0..64usize, 1..6),
        changes in proptest::collection::vec(change(), 1..6),
    ) {
        let mut state = State::default();
        for n in initial {
            state.apply(&Change::Add(n));
        }
        check(&state);
        for change in &changes {
            state.apply(change);
            check(&state);
        }
    }
}

#[test]
fn an_empty_catalog_and_empty_segments_find_nothing() {
    let empty = EnhancedIndex::from_segments(vec![Arc::new(EnhancedSegment::build(None, &[]))]);
    assert!(empty.is_empty());
    assert!(empty.search("anything", 5).is_empty());
    let server = &pool()[0];
    let tools = tools_of(server);
    let with_gaps = EnhancedIndex::from_segments(vec![
        Arc::new(EnhancedSegment::build(None, &[])),
        Arc::new(EnhancedSegment::build(None, &tools)),
        Arc::new(EnhancedSegment::build(None, &[])),
    ]);
    let full = reference::EnhancedIndex::build(tools.iter());
    let query = tools[0].original_name().to_owned();
    same(
        "gaps",
        &query,
        &with_gaps.search(&query, 5),
        &full.search(&query, 5),
    );
    assert!(!with_gaps.search(&query, 5).is_empty());
}

/// One tool of MCP server `server`.
fn one_tool(server: &str, name: &str, description: &str) -> Arc<Tool> {
    let spec = ToolSpec::new(name, description, serde_json::json!({"type": "object"}));
    Arc::new(Tool::new(
        mcp_tool_name(server, name),
        ToolSource::Mcp(server.into()),
        &spec,
    ))
}

#[test]
fn a_stale_directory_offers_no_typo_match_for_a_word_whose_segments_left() {
    // `navigate` was only in the browser's old segment; the other server
    // still holds its stem through `navigation`, which is too far from the
    // typo to match it. A directory built before the browser changed still
    // lists `navigate`: it must not bring `page_history` in.
    let old_browser = Arc::new(EnhancedSegment::build(
        None,
        &[one_tool("browser", "open_url", "Navigate to a web address")],
    ));
    let new_browser_tools = [one_tool("browser", "take_screenshot", "Capture the page")];
    let new_browser = Arc::new(EnhancedSegment::build(None, &new_browser_tools));
    let history_tools = [one_tool(
        "history",
        "page_history",
        "Show the navigation history",
    )];
    let history = Arc::new(EnhancedSegment::build(None, &history_tools));
    let stale = Directory::build([&old_browser, &history]);
    let index = EnhancedIndex::with_directory(vec![new_browser, history], Some(Arc::new(stale)));
    let full = reference::EnhancedIndex::build(new_browser_tools.iter().chain(&history_tools));
    let query = "naviagte";
    same(
        "stale typo",
        query,
        &index.search(query, 5),
        &full.search(query, 5),
    );
    // Before the change, the same typo finds the browser through the word.
    let before = EnhancedIndex::with_directory(
        vec![old_browser.clone()],
        Some(Arc::new(Directory::build([&old_browser]))),
    );
    assert_eq!(
        before
            .search(query, 5)
            .first()
            .map(|s| s.tool.original_name()),
        Some("open_url")
    );
}

/// Servers alike in shape, different in wording: in each, `remove_gadget`
/// needs a gadget id that `lookup_gadget_id` gives, `purge_gadget` makes the
/// same call as `remove_gadget` (and folds into it), and so does
/// `lookup_gadget_label_id` as `lookup_gadget_id`; fillers share words.
/// With `rare`, each `remove_gadget` names one of ten words besides, so
/// each of those is in a tenth of the servers.
fn gadget_servers(seed: u64, count: usize, rare: bool) -> Vec<(String, Vec<Arc<Tool>>)> {
    const RARE: [&str; 10] = [
        "zeppelin", "quasar", "walrus", "origami", "tundra", "saffron", "banjo", "lagoon",
        "nebula", "kayak",
    ];
    const FILLER: [&str; 12] = [
        "label", "archive", "widget", "report", "stock", "price", "order", "ship", "count",
        "stale", "batch", "cache",
    ];
    struct Lcg(u64);
    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) as usize) % n
        }
        fn words(&mut self, count: usize) -> String {
            (0..count)
                .map(|_| FILLER[self.below(FILLER.len())])
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
    let mut rng = Lcg(0x6761_6467_6574 ^ seed);
    let mut servers = Vec::new();
    for server in 0..count {
        let name = format!("shop{server:02}");
        let rare = if rare { RARE[server % RARE.len()] } else { "" };
        let required = |parameter: &str| serde_json::json!({"type": "object", "properties": {parameter: {}}, "required": [parameter]});
        let spec = |tool: &str, description: String, schema, call: Option<&str>| {
            ToolSpec::new(tool, description, schema).with_operation(call.map(str::to_owned))
        };
        let mut specs = vec![
            spec(
                "remove_gadget",
                format!("Remove a gadget. {} {rare}", rng.words(server % 4)),
                required("gadget_id"),
                Some("DELETE /gadgets/{id}"),
            ),
            spec(
                "purge_gadget",
                format!("Purge a gadget. {}", {
                    let n = rng.below(7);
                    rng.words(n)
                }),
                serde_json::json!({"type": "object"}),
                Some("DELETE /gadgets/{id}"),
            ),
            spec(
                "lookup_gadget_id",
                format!("Lookup a gadget id by its label. {}", {
                    let n = rng.below(3);
                    rng.words(n)
                }),
                required("label"),
                Some("GET /gadgets"),
            ),
            spec(
                "lookup_gadget_label_id",
                format!("Label lookup. {}", {
                    let n = rng.below(6);
                    rng.words(n)
                }),
                required("label"),
                Some("GET /gadgets"),
            ),
            spec(
                "purge_cache",
                format!("Purge the cache. {}", {
                    let n = rng.below(7);
                    rng.words(n)
                }),
                serde_json::json!({"type": "object"}),
                None,
            ),
        ];
        for filler in 0..rng.below(6) {
            specs.push(spec(
                &format!(
                    "{}_{}_{filler}",
                    FILLER[rng.below(12)],
                    FILLER[rng.below(12)]
                ),
                {
                    let n = 1 + rng.below(8);
                    rng.words(n)
                },
                serde_json::json!({"type": "object"}),
                None,
            ));
        }
        let source = ToolSource::Mcp(name.clone());
        let mut tools: Vec<Arc<Tool>> = specs
            .iter()
            .enumerate()
            .map(|(position, spec)| {
                Arc::new(
                    Tool::new(mcp_tool_name(&name, &spec.name), source.clone(), spec)
                        .at_position(position as u32),
                )
            })
            .collect();
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        servers.push((name, tools));
    }
    servers
}

#[test]
fn tools_pruned_within_a_segment_leave_folds_and_lookups_exact() {
    // Once the results are full, a segment scores only the tools holding a
    // strong term (`purg`); the results still need the copies folding
    // into them and the lookups they bring, with their weak-term scores.
    let mut lookups_shown = 0;
    for seed in 0..16 {
        let servers = gadget_servers(seed, 30, false);
        let segments: Vec<Arc<EnhancedSegment>> = servers
            .iter()
            .map(|(_, tools)| Arc::new(EnhancedSegment::build(None, tools)))
            .collect();
        let indexes = [
            EnhancedIndex::from_segments(segments.clone()),
            EnhancedIndex::with_directory(
                segments.clone(),
                Some(Arc::new(Directory::build(&segments))),
            ),
        ];
        let full = reference::EnhancedIndex::build_described(
            servers.iter().map(|(_, tools)| (None, tools.as_slice())),
        );
        let queries = [
            "purge gadget",
            "purge a gadget forever",
            "purge the gadget label",
            "remove gadget",
            "remove the stale gadget",
            "gadget label",
            "archive gadget report",
        ];
        for index in &indexes {
            for limit in 1..=4 {
                for query in queries {
                    let expected = full.search(query, limit);
                    same("pruned", query, &index.search(query, limit), &expected);
                    lookups_shown += expected
                        .iter()
                        .filter(|hit| hit.tool.original_name() == "lookup_gadget_id")
                        .count();
                }
            }
        }
    }
    // The case this guards: results whose lookups come along.
    assert!(lookups_shown > 0);
}

#[test]
fn common_terms_are_looked_up_where_scored_and_bound_the_rest() {
    // Forty servers or more share the gadget words, so the directory counts
    // them common: a search looks them up only in the segments it scores
    // and bounds the segments holding nothing else as one, laying those out
    // only when they may reach the results. The rare words (a tenth of the
    // servers each) and the servers' names are not common.
    let mut reached_rest = 0;
    for seed in 0..6 {
        let servers = gadget_servers(seed, 40 + seed as usize, true);
        // And servers holding rare words only: a segment of theirs has a
        // row, though a lower bound than the segments of common terms.
        let mut servers = servers;
        for (at, word) in ["kayak", "walrus", "kayak"].into_iter().enumerate() {
            // Forty tools each, so the word is no rarer than the gadget
            // words: these segments' bounds fall below the others'.
            let name = format!("rental{at}");
            let tools = (0..40)
                .map(|number| {
                    let spec = ToolSpec::new(
                        format!("rent_{word}_{number}"),
                        format!("Rent a {word} by the hour."),
                        serde_json::json!({"type": "object"}),
                    );
                    let tool_name = mcp_tool_name(&name, &spec.name);
                    Arc::new(Tool::new(tool_name, ToolSource::Mcp(name.clone()), &spec))
                })
                .collect();
            servers.insert(at * 7, (name, tools));
        }
        let segments: Vec<Arc<EnhancedSegment>> = servers
            .iter()
            .map(|(_, tools)| Arc::new(EnhancedSegment::build(None, tools)))
            .collect();
        let directory = Arc::new(Directory::build(&segments));
        assert!(
            directory.common_terms.len() >= 5,
            "the gadget words are common"
        );
        // Then some servers change: two replaced by another seed's, one
        // removed, one added; the old directory still serves, its replaced
        // and removed segments dropped, the new ones looked up directly.
        let others = gadget_servers(seed + 100, 50 + seed as usize, true);
        let mut changed = servers.clone();
        let mut replaced = Vec::new();
        for name in ["shop03", "shop17"] {
            let other = others.iter().find(|(other, _)| other == name);
            let server = changed.iter_mut().find(|(server, _)| server == name);
            if let (Some(server), Some(other)) = (server, other) {
                server.1 = other.1.clone();
                replaced.push(server.0.clone());
            }
        }
        changed.remove(25);
        changed.extend(others.last().cloned());
        let reused: std::collections::HashMap<&str, &Arc<EnhancedSegment>> = servers
            .iter()
            .zip(&segments)
            .map(|((name, _), segment)| (name.as_str(), segment))
            .collect();
        let changed_segments: Vec<Arc<EnhancedSegment>> = changed
            .iter()
            .map(|(name, tools)| match reused.get(name.as_str()) {
                Some(&segment) if !replaced.contains(name) => segment.clone(),
                _ => Arc::new(EnhancedSegment::build(None, tools)),
            })
            .collect();
        let cases = [
            (
                &servers,
                EnhancedIndex::with_directory(segments.clone(), Some(directory.clone())),
            ),
            (
                &changed,
                EnhancedIndex::with_directory(changed_segments.clone(), Some(directory.clone())),
            ),
            (
                &changed,
                EnhancedIndex::with_directory(
                    changed_segments.clone(),
                    Some(Arc::new(Directory::build(&changed_segments))),
                ),
            ),
        ];
        let queries = [
            "purge gadget",
            "remove the zeppelin gadget",
            "quasar lookup",
            "walrus",
            "shop07 purge the cache",
            "lookup gadget label id",
            "archive gadget report",
            "label cache batch stale",
            "purge_gadget",
            "purge_gadget quasar",
            "mcp_shop05_purge_gadget walrus",
            "purge kayak gadget",
            "purge walrus gadget",
            "purge remove lookup gadget label id cache tundra",
        ];
        for (catalog, index) in &cases {
            let full = reference::EnhancedIndex::build_described(
                catalog.iter().map(|(_, tools)| (None, tools.as_slice())),
            );
            for limit in [1, 2, 4, 10] {
                for query in queries {
                    let expected = full.search(query, limit);
                    let found = index.search(query, limit);
                    same("common terms", query, &found, &expected);
                    // Every term common: each result comes from the
                    // segments laid out late.
                    if query == "purge gadget" {
                        reached_rest += found.len();
                    }
                }
            }
        }
    }
    assert!(reached_rest > 0);
}
