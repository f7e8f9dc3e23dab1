//! Per-turn assembly: from the live registry, a session's scope and its
//! context size, the exact tools array sent to the model, decided afresh
//! every time.
//!
//! - Tier 0: nothing is deferred (no deferrable tool in scope, or
//!   `enabled: off`): every in-scope tool is sent with its schema.
//! - Tier 1: eager tools, then the bridge, with the deferred catalog listed
//!   per server in the `tool_search` description.
//! - Tier 2: eager tools and the bridge, with one summary line per server
//!   (as many as fit), when not even one server can be listed per tool.
//!
//! The same tools and scope always give a byte-identical array, whatever
//! order sources registered in, so provider prompt caches keep hitting.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::oneshot;

use serde::Serialize;
use serde_json::{Value, json};

use crate::background;
use crate::bridge_tools::{self as bridge, TOOL_CALL, TOOL_DESCRIBE, TOOL_SEARCH};
use crate::catalog::{ArrangementKey, Catalog, Retriever, SearchRun};
use crate::indexing::SegmentCache;
use crate::listing::{self, Listing, ListingForm};
use crate::query::{self, BoundedQuery};
use crate::semantic::SemanticIndex;
use crate::settings::ToolSearchConfig;
use quiver_config::Switch;
use quiver_search::classic::Scored;
use quiver_tool::registry::{RegistrySnapshot, ToolRegistry};
use quiver_tool::scope::Scope;
use quiver_tool::tokens;
use quiver_tool::tool::{ToolSource, function_definition};

/// The sources of `used` (sorted) that have a group in `catalog`: what an
/// arrangement depends on, so that a session's call of a server outside
/// its catalog does not make another arrangement of the same listing.
fn present(catalog: &Catalog, used: &[ToolSource]) -> Vec<ToolSource> {
    if used.is_empty() {
        return Vec::new();
    }
    used.iter()
        .filter(|source| catalog.groups().iter().any(|g| g.source() == *source))
        .cloned()
        .collect()
}

/// How much of the catalog the model sees directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Everything eager, no bridge.
    Eager = 0,
    /// Bridge plus a per-tool listing of at least one server.
    Listed = 1,
    /// Bridge plus server summary lines only.
    Summarised = 2,
}

impl Serialize for Tier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u8(*self as u8)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CatalogKey {
    registry_id: u64,
    generation: u64,
    scope: String,
    defer: bool,
}

impl CatalogKey {
    /// The entry of `cache` for the same registry, scope and deferral at
    /// the latest generation before this key's, if any: the catalog a new
    /// one takes its unchanged groups (and the budgets to arrange) from.
    fn latest_before<'c>(&self, cache: &'c VecDeque<CachedCatalog>) -> Option<&'c CachedCatalog> {
        cache
            .iter()
            .filter(|e| {
                e.key.registry_id == self.registry_id
                    && e.key.scope == self.scope
                    && e.key.defer == self.defer
                    && e.key.generation < self.generation
            })
            .max_by_key(|e| e.key.generation)
    }
}

/// Default number of catalogs kept by an [`Assembler`].
pub const DEFAULT_CATALOG_CACHE: usize = 32;

struct CachedCatalog {
    key: CatalogKey,
    scope: Scope,
    catalog: Arc<Catalog>,
}

/// Sessions the configuration says will come (see
/// [`Assembler::expecting`]): a scope, and the listing budgets of the
/// context sizes they assemble at.
struct Expected {
    scope: Scope,
    key: String,
    budgets: Vec<u64>,
}

/// Builds assemblies under one tool-search configuration.
///
/// Catalogs are cached under the registry generation, the scope and the
/// deferral switch: everything they are derived from, so a change to any
/// of them is seen on the next assembly. Their search indexes are made of
/// per-source segments (see [`crate::indexing`]) cached across catalogs:
/// with [`Assembler::index_in_background`], they are built when the
/// registry publishes, on the blocking pool, and a catalog whose index is
/// not ready yet answers searches with the previous generation's. A new
/// catalog takes its unchanged groups from the same scope's previous one
/// (the registry's tool slices are shared, their totals reused).
pub struct Assembler {
    config: Arc<ToolSearchConfig>,
    cache_capacity: usize,
    cache: Mutex<VecDeque<CachedCatalog>>,
    segments: Arc<SegmentCache>,
    /// Whether a background task indexes every published generation.
    background: AtomicBool,
    /// The generation of the last finished background pass.
    ready: tokio::sync::watch::Sender<u64>,
    /// Catalogs a turn evicted from the cache while a background pass
    /// runs, for the pass to drop: the last reference to an old
    /// generation's index frees megabytes, which a turn must not wait for.
    evicted: Mutex<Vec<CachedCatalog>>,
    /// The scopes and budgets passes prepare and arrange before any turn
    /// has asked for them.
    expected: Vec<Expected>,
}

impl Assembler {
    /// An assembler with the default catalog cache.
    pub fn new(config: ToolSearchConfig) -> Assembler {
        Assembler::with_cache_capacity(config, DEFAULT_CATALOG_CACHE)
    }

    /// An assembler whose searches fuse `semantic`'s similarities with the
    /// enhanced scores (hybrid search); `None`: lexical only.
    pub fn with_semantic(
        config: ToolSearchConfig,
        semantic: Option<Arc<SemanticIndex>>,
    ) -> Assembler {
        let mut assembler = Assembler::new(config);
        assembler.segments = Arc::new(SegmentCache::with_semantic(assembler.config.mode, semantic));
        assembler
    }

    /// The embedding stage, when hybrid search is on.
    pub fn semantic(&self) -> Option<&Arc<SemanticIndex>> {
        self.segments.semantic()
    }

    /// An assembler keeping at most `capacity` catalogs (0: rebuild every time).
    pub fn with_cache_capacity(config: ToolSearchConfig, capacity: usize) -> Assembler {
        Assembler {
            segments: Arc::new(SegmentCache::new(config.mode)),
            config: Arc::new(config),
            cache_capacity: capacity,
            cache: Mutex::new(VecDeque::new()),
            background: AtomicBool::new(false),
            ready: tokio::sync::watch::Sender::new(0),
            evicted: Mutex::new(Vec::new()),
            expected: Vec::new(),
        }
    }

    /// This assembler, told which sessions to expect: each a scope and
    /// the context size it assembles at (the daemon passes its models' and
    /// the gateway's). A background pass prepares those scopes' catalogs
    /// even before any turn used them, and arranges a scope's first
    /// catalog for those context sizes, so the process's first turn (and
    /// the first after a config reload) finds its tools array made.
    pub fn expecting(mut self, sessions: impl IntoIterator<Item = (Scope, u64)>) -> Assembler {
        for (scope, context_tokens) in sessions {
            let budget = self.budget_tokens(context_tokens);
            let key = scope.cache_key();
            match self.expected.iter_mut().find(|e| e.key == key) {
                Some(known) if known.budgets.contains(&budget) => {}
                Some(known) => known.budgets.push(budget),
                None => self.expected.push(Expected {
                    scope,
                    key,
                    budgets: vec![budget],
                }),
            }
        }
        self
    }

    /// An assembler for `config` that starts from `previous`'s segments
    /// when they are of the same search mode, so a config reload indexes
    /// the sources that changed only.
    pub fn succeeding(
        previous: &Assembler,
        config: ToolSearchConfig,
        semantic: Option<Arc<SemanticIndex>>,
    ) -> Assembler {
        let mode = config.mode;
        let same_semantic = match (&semantic, previous.semantic()) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let mut assembler = Assembler::with_semantic(config, semantic);
        if previous.segments.mode() == mode && same_semantic {
            assembler.segments = previous.segments.clone();
        }
        assembler
    }

    /// The segments shared by this assembler's catalogs.
    pub fn segments(&self) -> &SegmentCache {
        &self.segments
    }

    /// Indexes every generation `registry` publishes in the background, on
    /// a thread of its own at a lower CPU priority (see
    /// [`crate::background`]; [`Assembler::prepare`] does the work); until
    /// a generation's index is ready, its catalogs answer searches with the
    /// previous generation's index. The task and its thread end when the
    /// assembler or the registry is dropped. Needs a tokio runtime.
    pub fn index_in_background(
        self: &Arc<Self>,
        registry: &Arc<ToolRegistry>,
    ) -> tokio::task::JoinHandle<()> {
        self.background.store(true, Ordering::Release);
        let mut changes = registry.subscribe();
        let assembler = Arc::downgrade(self);
        let registry = Arc::downgrade(registry);
        let passes = IndexThread::start(assembler.clone());
        tokio::spawn(async move {
            let mut first = true;
            loop {
                changes.borrow_and_update();
                let Some(snapshot) = registry.upgrade().map(|r| r.snapshot()) else {
                    break;
                };
                let generation = snapshot.generation();
                if !passes.run(snapshot, std::mem::take(&mut first)).await {
                    tracing::warn!(
                        generation,
                        "background indexing failed; searches index when they need to"
                    );
                }
                let Some(strong) = assembler.upgrade() else {
                    break;
                };
                strong.ready.send_replace(generation);
                drop(strong);
                if changes.changed().await.is_err() {
                    break;
                }
            }
        })
    }

    /// Builds `snapshot`'s catalogs for the scopes in use (every cached
    /// scope and every expected one, else every tool) and their search
    /// indexes, reusing the segments of unchanged sources and building the
    /// others. Blocking: the background task runs it on a thread of its own.
    pub fn prepare(&self, snapshot: &Arc<RegistrySnapshot>) {
        self.segments.begin_pass();
        let defer = self.config.enabled != Switch::Off;
        let mut scopes: Vec<(Scope, String, bool)> = Vec::new();
        let mut add = |scope: &Scope, key: &str, defer: bool| {
            if !scopes.iter().any(|(_, k, d)| k == key && *d == defer) {
                scopes.push((scope.clone(), key.to_owned(), defer));
            }
        };
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            for entry in cache.iter() {
                add(&entry.scope, &entry.key.scope, entry.key.defer);
            }
        }
        for expected in &self.expected {
            add(&expected.scope, &expected.key, defer);
        }
        if scopes.is_empty() {
            scopes.push((Scope::all(), Scope::all().cache_key(), defer));
        }
        let mut catalogs = Vec::with_capacity(scopes.len());
        for (scope, _, defer) in scopes {
            let catalog = self.catalog(snapshot, &scope, defer);
            if !catalog.is_index_ready() {
                catalog.set_index(Arc::new(self.segments.compose(catalog.groups())));
            }
            catalogs.push(catalog);
        }
        // The change is searchable; now, if too many segments are looked up
        // one by one, a fresh directory, and the same indexes through it.
        let indexes: Vec<Arc<Retriever>> = catalogs.iter().map(|c| c.index()).collect();
        if self.segments.refresh_directory(&indexes) {
            for catalog in &catalogs {
                if let Some(index) = self.segments.compose_cached(catalog.groups()) {
                    catalog.set_index(Arc::new(index));
                }
            }
        }
        self.segments.end_pass();
    }

    /// Arranges the catalogs of `snapshot`'s generation (see
    /// [`Assembler::prepare`]) for the listing budgets their scope's
    /// previous catalog was arranged with (a scope's first catalog: the
    /// budgets [`Assembler::expecting`] named for it), so each session's
    /// next turn finds its tools array made, and lets the previous
    /// catalog's arrangements go. The background pass runs it once the
    /// change is searchable (on its first pass, before).
    pub fn arrange_ahead(&self, snapshot: &RegistrySnapshot) {
        let defer = self.config.enabled != Switch::Off;
        let mut work: Vec<(Arc<Catalog>, Vec<ArrangementKey>)> = Vec::new();
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            for entry in cache.iter().filter(|e| {
                e.key.registry_id == snapshot.registry_id()
                    && e.key.generation == snapshot.generation()
            }) {
                let keys = match entry.key.latest_before(&cache) {
                    Some(previous) => previous.catalog.take_arrangements(),
                    None => self
                        .expected
                        .iter()
                        .find(|e| e.key == entry.key.scope && entry.key.defer == defer)
                        .map(|e| {
                            e.budgets
                                .iter()
                                .map(|&budget_tokens| ArrangementKey {
                                    budget_tokens,
                                    preferred: Vec::new(),
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                work.push((entry.catalog.clone(), keys));
            }
        }
        for (catalog, keys) in work {
            for key in keys {
                // A preferred source may be gone in this generation.
                let key = ArrangementKey {
                    preferred: present(&catalog, &key.preferred),
                    ..key
                };
                catalog.arranged(&key, || self.arrange(&catalog, &key));
            }
        }
    }

    /// Resolves once the background pass for `generation` or a later one
    /// has finished: from then on, searches of catalogs of that generation
    /// use their own index. Only an assembler indexing in the background
    /// (see [`Assembler::index_in_background`]) ever resolves it.
    pub async fn index_ready(&self, generation: u64) {
        let mut ready = self.ready.subscribe();
        // The sender lives as long as `self`.
        let _ = ready.wait_for(|&done| done >= generation).await;
    }

    /// The generation of the last finished background pass.
    pub fn ready_generation(&self) -> u64 {
        *self.ready.borrow()
    }

    /// The configuration.
    pub fn config(&self) -> &ToolSearchConfig {
        &self.config
    }

    fn catalog(&self, snapshot: &RegistrySnapshot, scope: &Scope, defer: bool) -> Arc<Catalog> {
        if self.cache_capacity == 0 {
            return Arc::new(Catalog::build(snapshot, scope, &self.config, defer));
        }
        let key = CatalogKey {
            registry_id: snapshot.registry_id(),
            generation: snapshot.generation(),
            scope: scope.cache_key(),
            defer,
        };
        let lock = || self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = {
            let mut cache = lock();
            if let Some(entry) = cache
                .iter()
                .position(|e| e.key == key)
                .and_then(|position| cache.remove(position))
            {
                let catalog = entry.catalog.clone();
                cache.push_front(entry);
                return catalog;
            }
            // The same sessions' latest earlier catalog: its unchanged
            // groups are reused, and its index answers while this one's is
            // built.
            key.latest_before(&cache).map(|e| e.catalog.clone())
        };
        // Built outside the lock: the background pass builds catalogs at
        // a lower priority, and a turn must not wait for it to be
        // scheduled again to find its own catalog.
        let catalog = Arc::new(
            Catalog::build_after(previous.as_deref(), snapshot, scope, &self.config, defer)
                .with_segments(self.segments.clone()),
        );
        // With a background pass, the pass composes this generation's
        // index and sets it on the cached catalog; until then the previous
        // generation's index answers, and a turn never composes one itself.
        // Without one to serve (a new scope), the index is composed here
        // from the cached segments, if they all are.
        let meanwhile = self
            .background
            .load(Ordering::Acquire)
            .then(|| previous.and_then(|p| p.serving_index()))
            .flatten();
        match meanwhile {
            Some(index) => catalog.serve_meanwhile(index),
            None => {
                if let Some(index) = self.segments.compose_cached(catalog.groups()) {
                    catalog.set_index(Arc::new(index));
                }
            }
        }
        let mut cache = lock();
        // Built meanwhile by another turn or the pass: the first one is
        // kept, so every turn of a generation shares one catalog, its
        // index and its arrangements.
        if let Some(entry) = cache.iter().find(|e| e.key == key) {
            return entry.catalog.clone();
        }
        cache.push_front(CachedCatalog {
            key,
            scope: scope.clone(),
            catalog: catalog.clone(),
        });
        if cache.len() > self.cache_capacity {
            let evicted = cache.split_off(self.cache_capacity);
            drop(cache);
            self.evict(evicted);
        }
        catalog
    }

    /// Lets `evicted` go: at once without a background pass, else kept
    /// for the pass to drop (see [`Assembler::release_evicted`]), unless
    /// more than a cache's worth already wait.
    fn evict(&self, evicted: VecDeque<CachedCatalog>) {
        if !self.background.load(Ordering::Acquire) {
            return;
        }
        let mut waiting = self.evicted.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.len() < self.cache_capacity.max(1) {
            waiting.extend(evicted);
        }
    }

    /// Drops the catalogs turns evicted since the last pass; the
    /// background pass runs it once its change is searchable.
    fn release_evicted(&self) {
        let evicted =
            std::mem::take(&mut *self.evicted.lock().unwrap_or_else(PoisonError::into_inner));
        drop(evicted);
    }

    /// The listing budget for a session with `context_tokens` of context.
    pub fn budget_tokens(&self, context_tokens: u64) -> u64 {
        let by_share = context_tokens.saturating_mul(self.config.threshold_pct as u64) / 100;
        match self.config.listing {
            Switch::On => self.config.listing_max_tokens,
            Switch::Auto | Switch::Off => by_share.min(self.config.listing_max_tokens),
        }
    }

    /// Assembles what the model sees this turn.
    pub fn assemble(
        &self,
        snapshot: &Arc<RegistrySnapshot>,
        scope: &Scope,
        context_tokens: u64,
    ) -> Assembly {
        self.assemble_preferring(snapshot, scope, context_tokens, &[])
    }

    /// Assembles what the model sees this turn in a session that has
    /// called tools of `used` (servers and plugins, sorted): when not every
    /// group can be described, theirs are described first.
    pub fn assemble_preferring(
        &self,
        snapshot: &Arc<RegistrySnapshot>,
        scope: &Scope,
        context_tokens: u64,
        used: &[ToolSource],
    ) -> Assembly {
        let defer = self.config.enabled != Switch::Off;
        let catalog = self.catalog(snapshot, scope, defer);
        let budget_tokens = self.budget_tokens(context_tokens);
        // The same catalog, budget and preference always arrange the same
        // way: every turn after the first at this generation, scope,
        // context size and set of used servers reuses the arrangement (see
        // [`Catalog::arranged`]).
        let key = ArrangementKey {
            budget_tokens,
            preferred: present(&catalog, used),
        };
        let arranged = catalog.arranged(&key, || self.arrange(&catalog, &key));
        let savings = arranged.savings;
        metrics::histogram!("quiver_assembly_tool_tokens", "tool_search" => "without")
            .record(savings.tokens_without_tool_search as f64);
        metrics::histogram!("quiver_assembly_tool_tokens", "tool_search" => "with")
            .record(savings.tokens_with_tool_search as f64);
        Assembly {
            snapshot: snapshot.clone(),
            catalog,
            config: self.config.clone(),
            budget_tokens,
            arranged,
        }
    }

    /// The tier, listing and tools array of `catalog` for `key` (a
    /// listing budget and the groups to describe first).
    fn arrange(&self, catalog: &Catalog, key: &ArrangementKey) -> Arranged {
        let bridge = match self.config.enabled {
            Switch::Off => false,
            Switch::On => true,
            Switch::Auto => catalog.deferred_count() > 0,
        };
        let mut tools: Vec<Value> = catalog.eager().iter().map(|t| t.definition()).collect();
        let eager_chars: u64 = catalog
            .eager()
            .iter()
            .map(|t| t.definition_chars() as u64)
            .sum();
        let deferred_chars = catalog.deferred_definition_chars();
        let (tier, listing, search_description) = if !bridge {
            (
                Tier::Eager,
                Listing::empty(catalog, ListingForm::None),
                None,
            )
        } else {
            let listing = if self.config.listing == Switch::Off {
                Listing::empty(catalog, ListingForm::Off)
            } else {
                listing::plan_preferring(catalog, key.budget_tokens, &key.preferred)
            };
            let tier = if listing.lists_tools() {
                Tier::Listed
            } else {
                Tier::Summarised
            };
            let description = search_description(catalog, &listing);
            tools.push(function_definition(
                TOOL_SEARCH,
                &description,
                &bridge::search_schema(
                    self.config.search_default_limit,
                    self.config.max_search_limit,
                ),
            ));
            tools.push(function_definition(
                TOOL_DESCRIBE,
                DESCRIBE_DESCRIPTION,
                &bridge::describe_schema(),
            ));
            tools.push(function_definition(
                TOOL_CALL,
                CALL_DESCRIPTION,
                &bridge::call_schema(),
            ));
            (tier, listing, Some(description))
        };
        // What the tools array costs now, against every tool sent with
        // its schema: the figure tool search exists for.
        // The eager tools' sizes are known; only the bridge (whose search
        // description holds the listing) is measured here.
        let sent_chars: u64 = eager_chars
            + tools[catalog.eager().len()..]
                .iter()
                .map(|t| tokens::json_chars(t) as u64)
                .sum::<u64>();
        let savings = Savings {
            tokens_without_tool_search: tokens::tokens_for_chars(eager_chars + deferred_chars),
            tokens_with_tool_search: tokens::tokens_for_chars(sent_chars),
            bridge_tokens: tokens::tokens_for_chars(sent_chars.saturating_sub(eager_chars)),
        };
        Arranged {
            tier,
            listing,
            savings,
            tools,
            search_description,
        }
    }
}

/// Where [`Assembler::index_in_background`] runs its passes: a thread of
/// its own at background priority, or, if no thread can be started, the
/// blocking pool at normal priority.
struct IndexThread {
    assembler: Weak<Assembler>,
    passes: Option<std::sync::mpsc::Sender<Pass>>,
}

/// One pass to run: a published snapshot, whether it is the assembler's
/// first, and where to say the change is searchable (false: it panicked).
struct Pass {
    snapshot: Arc<RegistrySnapshot>,
    first: bool,
    searchable: oneshot::Sender<bool>,
}

impl IndexThread {
    fn start(assembler: Weak<Assembler>) -> IndexThread {
        let (passes, queue) = std::sync::mpsc::channel::<Pass>();
        let worker = assembler.clone();
        let started = background::spawn("quiver-index", move || {
            // Ends when the task (holding the sender) ends.
            while let Ok(pass) = queue.recv() {
                run_pass(&worker, pass);
            }
        });
        let passes = match started {
            Ok(_) => Some(passes),
            Err(error) => {
                tracing::warn!(%error, "cannot start the indexing thread; indexing on the blocking pool");
                None
            }
        };
        IndexThread { assembler, passes }
    }

    /// Runs one pass over `snapshot`; false when it failed (it panicked).
    async fn run(&self, snapshot: Arc<RegistrySnapshot>, first: bool) -> bool {
        let (searchable, answer) = oneshot::channel();
        let mut pass = Pass {
            snapshot,
            first,
            searchable,
        };
        if let Some(passes) = &self.passes {
            match passes.send(pass) {
                Ok(()) => return answer.await.unwrap_or(false),
                // The thread is gone: the pool takes over.
                Err(std::sync::mpsc::SendError(back)) => pass = back,
            }
        }
        let assembler = self.assembler.clone();
        tokio::task::spawn_blocking(move || run_pass(&assembler, pass));
        answer.await.unwrap_or(false)
    }
}

/// One pass: makes the change searchable ([`Assembler::prepare`]), says
/// so, then arranges the new catalogs for the budgets in use
/// ([`Assembler::arrange_ahead`]) and drops the catalogs turns evicted,
/// so that work never delays the change. The first pass arranges before
/// it says so: nothing earlier serves turns then, and the process's
/// first turn finds its tools array made.
fn run_pass(assembler: &Weak<Assembler>, pass: Pass) {
    let Pass {
        snapshot,
        first,
        searchable,
    } = pass;
    let Some(assembler) = assembler.upgrade() else {
        let _ = searchable.send(true);
        return;
    };
    let catching =
        |work: &dyn Fn()| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_ok();
    let prepared = catching(&|| assembler.prepare(&snapshot));
    let after = || {
        catching(&|| {
            assembler.arrange_ahead(&snapshot);
            assembler.release_evicted();
        })
    };
    if first {
        after();
    }
    let _ = searchable.send(prepared);
    if !first {
        after();
    }
}

const DESCRIBE_DESCRIPTION: &str = "Return the full description and JSON input schema of a tool found with tool_search or named in its listing.";
const CALL_DESCRIPTION: &str = "Call a tool found with tool_search or named in its listing, by exact name, with arguments matching its schema (see tool_describe).";

fn search_description(catalog: &Catalog, listing: &Listing) -> String {
    let n = catalog.deferred_count();
    let servers = catalog.groups().len();
    let mut text = format!(
        "Search {n} deferred {} from {servers} {} that are not in your tool list. Returns matching tool names with descriptions; then use tool_describe for a tool's schema and tool_call to run it.",
        if n == 1 { "tool" } else { "tools" },
        if servers == 1 { "server" } else { "servers" },
    );
    if !listing.text.is_empty() {
        text.push_str("\n\nDeferred tools by server:\n");
        text.push_str(&listing.text);
    }
    text
}

/// What tool search saves on one assembly, in tokens of tool definitions
/// (`ceil(chars / 4)` of their JSON text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Savings {
    /// Every tool in scope sent with its schema (tier 0).
    pub tokens_without_tool_search: u64,
    /// The tools array as sent: the eager tools, and the bridge tools with
    /// the listing when there is a bridge (equal to the above without one).
    pub tokens_with_tool_search: u64,
    /// Of those, the three bridge tools (their schemas and the listing).
    pub bridge_tokens: u64,
}

impl Savings {
    /// Tokens saved (negative when the bridge costs more than the tools
    /// it stands for).
    pub fn saved_tokens(&self) -> i64 {
        self.tokens_without_tool_search as i64 - self.tokens_with_tool_search as i64
    }

    /// The saving as a percentage of the eager cost, to one decimal.
    pub fn saved_pct(&self) -> f64 {
        if self.tokens_without_tool_search == 0 {
            return 0.0;
        }
        let pct = self.saved_tokens() as f64 * 100.0 / self.tokens_without_tool_search as f64;
        (pct * 10.0).round() / 10.0
    }

    /// E.g. `22 tools: 2438 tokens sent eagerly, 1296 with tool search
    /// (-46.8%; 919 of them the bridge tools)`.
    pub fn describe(&self, tools: usize) -> String {
        let bridge = if self.bridge_tokens > 0
            && self.tokens_with_tool_search != self.tokens_without_tool_search
        {
            format!("; {} of them the bridge tools", self.bridge_tokens)
        } else {
            String::new()
        };
        format!(
            "{tools} tools: {} tokens of definitions sent eagerly, {} with tool search ({}{}%{bridge})",
            self.tokens_without_tool_search,
            self.tokens_with_tool_search,
            if self.saved_tokens() > 0 { "-" } else { "+" },
            self.saved_pct().abs(),
        )
    }
}

/// What the model sees on one turn, and the bridge handlers that act on it.
pub struct Assembly {
    snapshot: Arc<RegistrySnapshot>,
    catalog: Arc<Catalog>,
    config: Arc<ToolSearchConfig>,
    budget_tokens: u64,
    arranged: Arc<Arranged>,
}

/// What one catalog under one listing budget sends: the same for every
/// assembly of that catalog and budget, so built once and shared.
#[derive(Debug)]
pub(crate) struct Arranged {
    tier: Tier,
    listing: Listing,
    savings: Savings,
    tools: Vec<Value>,
    search_description: Option<String>,
}

impl Assembly {
    /// The tier.
    pub fn tier(&self) -> Tier {
        self.arranged.tier
    }

    /// The listing placed in the `tool_search` description.
    pub fn listing(&self) -> &Listing {
        &self.arranged.listing
    }

    /// The listing budget, in tokens.
    pub fn budget_tokens(&self) -> u64 {
        self.budget_tokens
    }

    /// Tokens the deferred tools' definitions would have cost.
    pub fn deferred_tokens(&self) -> u64 {
        tokens::tokens_for_chars(self.catalog.deferred_definition_chars())
    }

    /// What tool search saves on this assembly.
    pub fn savings(&self) -> Savings {
        self.arranged.savings
    }

    /// Tools in scope: the eager ones and the deferred ones.
    pub fn tool_count(&self) -> usize {
        self.catalog.eager().len() + self.catalog.deferred_count()
    }

    /// The OpenAI-style tools array for the model.
    pub fn tools(&self) -> &[Value] {
        &self.arranged.tools
    }

    /// The catalog this assembly was built from.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The registry snapshot this assembly was built from.
    pub fn snapshot(&self) -> &RegistrySnapshot {
        &self.snapshot
    }

    /// The tool-search configuration.
    pub fn config(&self) -> &ToolSearchConfig {
        &self.config
    }

    /// Whether the bridge tools are in the tools array.
    pub fn has_bridge(&self) -> bool {
        self.arranged.search_description.is_some()
    }

    /// The schema of a bridge tool of this assembly.
    pub fn bridge_schema(&self, name: &str) -> Option<Value> {
        match name {
            TOOL_SEARCH => Some(bridge::search_schema(
                self.config.search_default_limit,
                self.config.max_search_limit,
            )),
            TOOL_DESCRIBE => Some(bridge::describe_schema()),
            TOOL_CALL => Some(bridge::call_schema()),
            _ => None,
        }
    }

    /// The part of `query` that is searched: at most `max_query_chars`
    /// characters and `max_query_words` distinct words (see
    /// [`crate::query`]). Bounding a bounded query changes nothing.
    pub fn bound_query<'q>(&self, query: &'q str) -> BoundedQuery<'q> {
        query::bound(
            query,
            self.config.max_query_chars,
            self.config.max_query_words,
        )
    }

    /// Search of the deferred catalog for [`Assembly::bound_query`] of
    /// `query`; `limit` defaults to `search_default_limit` and is clamped
    /// to `1..=max_search_limit`.
    pub fn search(&self, query: &str, limit: Option<i64>) -> Vec<Scored> {
        self.catalog.search(
            self.bound_query(query).text,
            self.config.effective_limit(limit),
        )
    }

    /// [`Assembly::search`] (of the bounded query), and which stages ran
    /// (see [`SearchRun`]).
    pub fn search_run(&self, query: &str, limit: Option<i64>) -> (Vec<Scored>, SearchRun) {
        self.search_bounded(&self.bound_query(query), limit)
    }

    /// [`Assembly::search_run`] of a query bounded already (the caller
    /// also wants to know how it was cut).
    pub fn search_bounded(
        &self,
        bounded: &BoundedQuery<'_>,
        limit: Option<i64>,
    ) -> (Vec<Scored>, SearchRun) {
        self.catalog
            .search_run(bounded.text, self.config.effective_limit(limit))
    }

    /// Search with any `limit` (not clamped to `max_search_limit`), for
    /// evaluation.
    pub fn search_unclamped(&self, query: &str, limit: usize) -> Vec<Scored> {
        self.catalog.search(self.bound_query(query).text, limit)
    }

    /// The assembly in the `quiver catalog assemble --json` shape.
    pub fn to_json(&self) -> Value {
        json!({
            "tier": self.arranged.tier,
            "listing_form": self.arranged.listing.form,
            "budget_tokens": self.budget_tokens,
            "listing_tokens": self.arranged.listing.tokens,
            "deferred_count": self.catalog.deferred_count(),
            "deferred_tokens": self.deferred_tokens(),
            "tokens_without_tool_search": self.arranged.savings.tokens_without_tool_search,
            "tokens_with_tool_search": self.arranged.savings.tokens_with_tool_search,
            "bridge_tokens": self.arranged.savings.bridge_tokens,
            "saved_tokens": self.arranged.savings.saved_tokens(),
            "saved_pct": self.arranged.savings.saved_pct(),
            "servers": self.arranged.listing.groups,
            "tools": self.arranged.tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::new(
            name,
            format!("Does {name}."),
            json!({"type": "object", "properties": {}}),
        )
    }

    fn config(yaml: &str) -> ToolSearchConfig {
        crate::settings::from_yaml(yaml)
    }

    fn names(assembly: &Assembly) -> Vec<String> {
        assembly
            .tools()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn tier_zero_without_deferrable_tools_sends_the_input() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(
            ToolSource::Core,
            vec![spec("write_file"), spec("read_file")],
        );
        let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
            &registry.snapshot(),
            &Scope::all(),
            100_000,
        );
        assert_eq!(assembly.tier(), Tier::Eager);
        assert!(!assembly.has_bridge());
        let snapshot = registry.snapshot();
        let mut expected: Vec<Value> = snapshot.tools().map(|t| t.definition()).collect();
        expected.sort_by(|a, b| {
            a["function"]["name"]
                .as_str()
                .cmp(&b["function"]["name"].as_str())
        });
        assert_eq!(assembly.tools(), expected.as_slice());
    }

    #[test]
    fn a_catalog_and_budget_are_arranged_once_and_a_change_arranges_anew() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("b")]);
        let assembler = Assembler::new(ToolSearchConfig::default());
        let assemble = |context| assembler.assemble(&registry.snapshot(), &Scope::all(), context);
        let (first, again) = (assemble(100_000), assemble(100_000));
        assert_eq!(first.tools(), again.tools());
        assert!(
            std::ptr::eq(first.tools(), again.tools()),
            "the second turn reuses the arrangement"
        );
        // A context size with another budget is arranged on its own.
        let small = assemble(2_000);
        assert_ne!(small.budget_tokens(), first.budget_tokens());
        assert!(!std::ptr::eq(small.tools(), first.tools()));
        assert_eq!(small.to_json()["budget_tokens"], small.budget_tokens());
        // A change is a new catalog: arranged afresh, with the new tool.
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("c")]);
        let changed = assemble(100_000);
        let listing = changed.tools()[0]["function"]["description"]
            .as_str()
            .unwrap();
        assert!(listing.contains("- mcp_s_c: Does c."), "{listing}");
        assert!(!listing.contains("mcp_s_b"), "{listing}");
        // A catalog keeps a bounded number of budgets.
        for context in (1..=20).map(|k| k * 10_000) {
            assert_eq!(
                assemble(context).budget_tokens(),
                assembler.budget_tokens(context)
            );
        }
        let latest = assemble(100_000);
        assert_eq!(latest.tools(), changed.tools());
    }

    #[test]
    fn the_pass_after_a_change_arranges_the_budgets_in_use() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("b")]);
        let assembler = Assembler::new(ToolSearchConfig::default());
        let turn = assembler.assemble(&registry.snapshot(), &Scope::all(), 100_000);
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("c")]);
        let snapshot = registry.snapshot();
        assembler.prepare(&snapshot);
        let changed = assembler.catalog(&snapshot, &Scope::all(), true);
        assert!(
            changed.arranged_budgets().is_empty(),
            "indexed, not arranged"
        );
        let before = assembler.catalog(&turn.snapshot, &Scope::all(), true);
        assert_eq!(before.arranged_budgets(), [turn.budget_tokens()]);
        assembler.arrange_ahead(&snapshot);
        assert_eq!(changed.arranged_budgets(), [turn.budget_tokens()]);
        assert!(
            before.arranged_budgets().is_empty(),
            "the previous generation lets its arrangement go"
        );
        let next = assembler.assemble(&snapshot, &Scope::all(), 100_000);
        assert_eq!(changed.arranged_budgets(), [turn.budget_tokens()]);
        let listing = next.tools()[0]["function"]["description"].as_str().unwrap();
        assert!(listing.contains("- mcp_s_c: Does c."), "{listing}");
    }

    #[test]
    fn tier_zero_when_off() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("b")]);
        let assembly = Assembler::new(config("tools:\n  tool_search: false\n")).assemble(
            &registry.snapshot(),
            &Scope::all(),
            100_000,
        );
        assert_eq!(assembly.tier(), Tier::Eager);
        assert_eq!(names(&assembly), ["mcp_s_a", "mcp_s_b"]);
        assert_eq!(assembly.to_json()["listing_form"], "none");
    }

    #[test]
    fn tier_one_bridge_after_eager_tools() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Core, vec![spec("read_file")]);
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a"), spec("b")]);
        let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
            &registry.snapshot(),
            &Scope::all(),
            100_000,
        );
        assert_eq!(assembly.tier(), Tier::Listed);
        assert_eq!(
            names(&assembly),
            ["read_file", "tool_search", "tool_describe", "tool_call"]
        );
        let description = assembly.tools()[1]["function"]["description"]
            .as_str()
            .unwrap();
        assert!(description.starts_with("Search 2 deferred tools from 1 server"));
        assert!(description.ends_with("s (2 tools):\n- mcp_s_a: Does a.\n- mcp_s_b: Does b.\n"));
    }

    #[test]
    fn enabled_on_keeps_the_bridge_without_deferrable_tools() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Core, vec![spec("read_file")]);
        let assembly = Assembler::new(config("tools:\n  tool_search:\n    enabled: on\n"))
            .assemble(&registry.snapshot(), &Scope::all(), 100_000);
        assert!(assembly.has_bridge());
        assert_eq!(
            names(&assembly),
            ["read_file", "tool_search", "tool_describe", "tool_call"]
        );
    }

    #[test]
    fn listing_off_leaves_only_the_count() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("a")]);
        let assembly = Assembler::new(config("tools:\n  tool_search:\n    listing: off\n"))
            .assemble(&registry.snapshot(), &Scope::all(), 100_000);
        assert_eq!(assembly.tier(), Tier::Summarised);
        assert_eq!(assembly.listing().form, ListingForm::Off);
        let description = assembly.tools()[0]["function"]["description"]
            .as_str()
            .unwrap();
        assert!(description.starts_with("Search 1 deferred tool from 1 server"));
        assert!(!description.contains("mcp_s_a"));
    }

    #[test]
    fn budget_is_the_smaller_of_share_and_cap() {
        let assembler = Assembler::new(ToolSearchConfig::default());
        assert_eq!(assembler.budget_tokens(200_000), 10_000);
        assert_eq!(assembler.budget_tokens(1_000_000), 20_000);
        assert_eq!(assembler.budget_tokens(0), 0);
        let on = Assembler::new(config(
            "tools:\n  tool_search:\n    listing: on\n    listing_max_tokens: 3000\n",
        ));
        assert_eq!(on.budget_tokens(1_000), 3_000);
    }

    #[test]
    fn same_tools_give_the_same_bytes_whatever_the_order() {
        let forward = ToolRegistry::new();
        forward.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("x"), spec("y")]);
        forward.set_source_tools(ToolSource::Plugin("p".into()), vec![spec("q"), spec("r")]);
        forward.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("z")]);
        let backward = ToolRegistry::new();
        backward.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("z")]);
        backward.set_source_tools(ToolSource::Plugin("p".into()), vec![spec("r"), spec("q")]);
        backward.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("y"), spec("x")]);
        let assembler = Assembler::new(ToolSearchConfig::default());
        let bytes = |r: &ToolRegistry| {
            serde_json::to_string(
                assembler
                    .assemble(&r.snapshot(), &Scope::all(), 50_000)
                    .tools(),
            )
            .unwrap()
        };
        assert_eq!(bytes(&forward), bytes(&backward));
    }

    #[test]
    fn a_change_shows_in_the_next_assembly_despite_the_cache() {
        let registry = ToolRegistry::new();
        let assembler = Assembler::new(ToolSearchConfig::default());
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("alpha")]);
        let first = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        assert_eq!(first.search("alpha", None).len(), 1);
        registry.set_source_tools(
            ToolSource::Mcp("s".into()),
            vec![spec("alpha"), spec("beta")],
        );
        let second = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        assert_eq!(second.catalog().deferred_count(), 2);
        assert_eq!(second.search("beta", None)[0].tool.name(), "mcp_s_beta");
        registry.remove_source(&ToolSource::Mcp("s".into()));
        let third = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        assert_eq!(third.tier(), Tier::Eager);
        assert!(third.search("alpha", None).is_empty());
    }

    #[test]
    fn scopes_get_their_own_catalogs() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("x")]);
        registry.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("x")]);
        let assembler = Assembler::new(ToolSearchConfig::default());
        let snapshot = registry.snapshot();
        let only_a = assembler.assemble(&snapshot, &Scope::new(["mcp-a"]).unwrap(), 50_000);
        let all = assembler.assemble(&snapshot, &Scope::all(), 50_000);
        assert_eq!(only_a.catalog().deferred_count(), 1);
        assert_eq!(all.catalog().deferred_count(), 2);
        let hits: Vec<_> = only_a
            .search("x", None)
            .iter()
            .map(|h| h.tool.name().to_owned())
            .collect();
        assert_eq!(hits, ["mcp_a_x"]);
    }

    fn hits(assembly: &Assembly, query: &str) -> Vec<(String, f64)> {
        assembly
            .search(query, Some(20))
            .iter()
            .map(|h| (h.tool.name().to_owned(), h.score))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turn_leaves_the_catalogs_it_evicts_for_the_background_pass_to_drop() {
        let registry = Arc::new(ToolRegistry::new());
        registry.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("alpha")]);
        registry.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("beta")]);
        let assembler = Arc::new(Assembler::with_cache_capacity(
            ToolSearchConfig::default(),
            1,
        ));
        let _task = assembler.index_in_background(&registry);
        assembler
            .index_ready(registry.snapshot().generation())
            .await;
        let snapshot = registry.snapshot();
        let everything = Arc::downgrade(&assembler.catalog(&snapshot, &Scope::all(), true));
        // Another scope's turn takes the only place in the cache.
        let only_a = Scope::new(["mcp-a"]).unwrap();
        let turn = assembler.assemble(&snapshot, &only_a, 50_000);
        assert_eq!(hits(&turn, "alpha")[0].0, "mcp_a_alpha");
        assert_eq!(
            everything.strong_count(),
            1,
            "the evicted catalog waits for the pass"
        );
        let generation = registry
            .set_source_tools(ToolSource::Mcp("b".into()), vec![spec("gamma")])
            .generation;
        assembler.index_ready(generation).await;
        // The pass lets it go after the change is searchable.
        for _ in 0..500 {
            if everything.strong_count() == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(everything.strong_count(), 0, "the pass dropped it");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn background_indexing_serves_the_new_source_once_ready() {
        let registry = Arc::new(ToolRegistry::new());
        registry.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("alpha")]);
        registry.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("beta")]);
        let assembler = Arc::new(Assembler::new(ToolSearchConfig::default()));
        let _task = assembler.index_in_background(&registry);
        assembler
            .index_ready(registry.snapshot().generation())
            .await;
        let first = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        // Built by the background pass, not by this search.
        assert!(first.catalog().is_index_ready());
        assert_eq!(hits(&first, "alpha")[0].0, "mcp_a_alpha");
        let b_segment_before = assembler.segments().len();

        let generation = registry
            .set_source_tools(
                ToolSource::Mcp("a".into()),
                vec![spec("alpha"), spec("gamma")],
            )
            .generation;
        // Before the new index is ready, a search answers whole: either
        // generation's tools, never a tool of neither.
        let meanwhile = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        for (name, _) in hits(&meanwhile, "gamma alpha beta") {
            assert!(["mcp_a_alpha", "mcp_a_gamma", "mcp_b_beta"].contains(&name.as_str()));
        }
        assembler.index_ready(generation).await;
        let after = assembler.assemble(&registry.snapshot(), &Scope::all(), 50_000);
        assert!(after.catalog().is_index_ready());
        // The same answers as a full rebuild of every segment.
        let full =
            crate::catalog::Retriever::build(after.catalog().mode(), after.catalog().groups());
        for query in ["gamma", "alpha", "beta", "does"] {
            let rebuilt: Vec<(String, f64)> = full
                .search(query, 20)
                .iter()
                .map(|h| (h.tool.name().to_owned(), h.score))
                .collect();
            assert_eq!(hits(&after, query), rebuilt, "{query}");
        }
        assert!(!hits(&after, "gamma").is_empty());
        // Server b's segment was reused, a's rebuilt: the cache holds both
        // generations' `a` until the next pass drops the unused one.
        assert!(assembler.segments().len() >= b_segment_before);
    }

    #[tokio::test]
    async fn the_first_pass_arranges_the_expected_sessions_before_any_turn() {
        let registry = Arc::new(ToolRegistry::new());
        registry.set_source_tools(ToolSource::Mcp("a".into()), vec![spec("alpha")]);
        registry.set_source_tools(ToolSource::Mcp("b".into()), vec![spec("beta")]);
        let only_a = Scope::new(["mcp-a"]).unwrap();
        let assembler = Arc::new(Assembler::new(ToolSearchConfig::default()).expecting([
            (Scope::all(), 200_000),
            (Scope::all(), 8_000),
            (only_a.clone(), 8_000),
        ]));
        let (large, small) = (
            assembler.budget_tokens(200_000),
            assembler.budget_tokens(8_000),
        );
        assert_ne!(large, small);
        let _task = assembler.index_in_background(&registry);
        let generation = registry.snapshot().generation();
        // Said searchable only once the first generation is arranged too.
        assembler.index_ready(generation).await;
        let snapshot = registry.snapshot();
        let everything = assembler.catalog(&snapshot, &Scope::all(), true);
        let mut budgets = everything.arranged_budgets();
        budgets.sort_unstable();
        assert_eq!(budgets, [small, large]);
        let narrow = assembler.catalog(&snapshot, &only_a, true);
        assert!(
            narrow.is_index_ready(),
            "an expected scope is indexed before its first turn"
        );
        assert_eq!(narrow.arranged_budgets(), [small]);
        // The first turn takes what the pass made.
        let turn = assembler.assemble(&snapshot, &only_a, 8_000);
        assert!(std::ptr::eq(
            turn.tools(),
            narrow
                .arranged(
                    &ArrangementKey {
                        budget_tokens: small,
                        preferred: Vec::new(),
                    },
                    || unreachable!("arranged by the pass")
                )
                .tools
                .as_slice()
        ));
        assert_eq!(hits(&turn, "beta"), []);

        // A change carries the budgets over, as for any scope in use.
        let changed = registry
            .set_source_tools(ToolSource::Mcp("a".into()), vec![spec("gamma")])
            .generation;
        assembler.index_ready(changed).await;
        let next = assembler.assemble(&registry.snapshot(), &only_a, 8_000);
        assert_eq!(hits(&next, "gamma")[0].0, "mcp_a_gamma");
    }

    #[test]
    fn a_catalog_serving_an_earlier_index_drops_tools_it_no_longer_holds() {
        let registry = ToolRegistry::new();
        registry.set_source_tools(
            ToolSource::Mcp("s".into()),
            vec![spec("alpha"), spec("beta")],
        );
        let config = ToolSearchConfig::default();
        let old = Catalog::build(&registry.snapshot(), &Scope::all(), &config, true);
        registry.set_source_tools(ToolSource::Mcp("s".into()), vec![spec("alpha")]);
        let new = Catalog::build(&registry.snapshot(), &Scope::all(), &config, true);
        new.serve_meanwhile(old.index());
        assert!(!new.is_index_ready());
        let names: Vec<String> = new
            .search("alpha beta", 10)
            .iter()
            .map(|h| h.tool.name().to_owned())
            .collect();
        assert_eq!(names, ["mcp_s_alpha"]);
        // The hit is this catalog's own tool.
        let hit = new.search("alpha", 10).remove(0);
        assert!(Arc::ptr_eq(&hit.tool, &new.groups()[0].tools()[0]));
        assert!(!new.is_index_ready(), "serving meanwhile builds nothing");
    }

    #[test]
    fn the_background_pass_keeps_a_directory_once_many_sources_are_indexed() {
        // A catalog of a few sources never gets one.
        let few = ToolRegistry::new();
        for n in 0..10 {
            few.set_source_tools(ToolSource::Mcp(format!("s{n}")), vec![spec("x")]);
        }
        let assembler = Assembler::new(ToolSearchConfig::default());
        let snapshot = few.snapshot();
        assembler.prepare(&snapshot);
        let assembly = assembler.assemble(&snapshot, &Scope::all(), 100_000);
        match &*assembly.catalog().index() {
            Retriever::Enhanced(index, _) => assert!(index.directory().is_none()),
            Retriever::Classic(_) => panic!("the default mode is enhanced"),
        }

        let registry = ToolRegistry::new();
        let source = |n: usize| ToolSource::Mcp(format!("server{n}"));
        let tools = |n: usize, round: usize| {
            (0..3)
                .map(|t| spec(&format!("{}{n}x{t}", ["plainwidget", "fancygizmo"][round])))
                .collect::<Vec<_>>()
        };
        for n in 0..70 {
            registry.set_source_tools(source(n), tools(n, 0));
        }
        let assembler = Assembler::new(ToolSearchConfig::default());
        let pass = || {
            let snapshot = registry.snapshot();
            assembler.prepare(&snapshot);
            let assembly = assembler.assemble(&snapshot, &Scope::all(), 100_000);
            let index = assembly.catalog().index();
            let found: Vec<String> = assembly
                .search("plainwidget7x1 fancygizmo3x2", None)
                .iter()
                .map(|h| h.tool.original_name().to_owned())
                .collect();
            match &*index {
                Retriever::Enhanced(index, _) => (
                    index.directory().cloned(),
                    index.uncovered_segments(),
                    found,
                ),
                Retriever::Classic(_) => panic!("the default mode is enhanced"),
            }
        };
        let (first, uncovered, found) = pass();
        let first = first.expect("70 sources: a directory");
        assert_eq!((first.segments(), uncovered), (70, 0));
        assert_eq!(found, ["plainwidget7x1"]);

        // One source changes: its new segment is looked up on its own, the
        // directory stays.
        registry.set_source_tools(source(3), tools(3, 1));
        let (directory, uncovered, found) = pass();
        assert!(Arc::ptr_eq(&directory.unwrap(), &first));
        assert_eq!(uncovered, 1);
        assert_eq!(found, ["plainwidget7x1", "fancygizmo3x2"]);

        // Nine more change: too many uncovered, a new directory over them.
        for n in 8..17 {
            registry.set_source_tools(source(n), tools(n, 1));
        }
        let (directory, uncovered, found) = pass();
        let directory = directory.unwrap();
        assert!(!Arc::ptr_eq(&directory, &first));
        assert_eq!((directory.segments(), uncovered), (70, 0));
        assert_eq!(found, ["plainwidget7x1", "fancygizmo3x2"]);
    }
}
