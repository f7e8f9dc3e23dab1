//! The per-assembly catalog: which in-scope tools are sent eagerly and which
//! are deferred behind the bridge, grouped per server or plugin.
//!
//! A catalog is derived from a registry snapshot, a scope and the `eager`
//! globs, and from nothing else, so it can be rebuilt on every assembly (or
//! cached under exactly that key) and can never drift from the live tools.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;

use crate::assembly::Arranged;
use crate::indexing::{Segment, SegmentCache};
use crate::semantic::{DenseSlot, Shared};
use crate::settings::{SearchMode, ToolSearchConfig};
use quiver_search::classic::{Scored, SearchIndex};
use quiver_search::enhanced::{Directory, EnhancedIndex, Fusion, split_server_filters};
use quiver_tool::registry::RegistrySnapshot;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{Tool, ToolSource};

/// The deferred tools of one server or plugin, sorted by name.
#[derive(Debug)]
pub struct CatalogGroup {
    source: ToolSource,
    /// `plugin-NAME` / `mcp-NAME` when a plugin and an MCP server of the
    /// catalog share a name, so that the listing and notes tell them apart.
    label: Option<String>,
    tools: Arc<[Arc<Tool>]>,
    totals: GroupTotals,
    description: Option<Arc<str>>,
    /// Its listing lines, rendered once and shared with the next
    /// generation's catalog while its tools stay the same (see
    /// [`CatalogGroup::rendered`]).
    rendered: Arc<RenderedForms>,
}

/// A group's listing lines in the forms that list its tools, each made on
/// first use.
#[derive(Debug, Default)]
pub(crate) struct RenderedForms {
    full: std::sync::OnceLock<(String, Arc<str>)>,
    names: std::sync::OnceLock<(String, Arc<str>)>,
}

/// Character totals over a group's tools, summed once when the catalog is
/// built so that choosing listing forms does not walk every tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupTotals {
    /// Sum of the tools' name lengths.
    pub name_chars: u64,
    /// Sum of the tools' short-description lengths.
    pub short_description_chars: u64,
    /// Tools with a non-empty short description.
    pub described: u64,
    /// Sum of the tools' function-definition lengths.
    pub definition_chars: u64,
}

impl GroupTotals {
    fn of(tools: &[Arc<Tool>]) -> GroupTotals {
        let mut totals = GroupTotals::default();
        for tool in tools {
            totals.add(tool);
        }
        totals
    }

    fn add(&mut self, tool: &Tool) {
        self.name_chars += tool.name_chars() as u64;
        let short = tool.short_description_chars() as u64;
        self.short_description_chars += short;
        self.described += u64::from(short > 0);
        self.definition_chars += tool.definition_chars() as u64;
    }
}

impl CatalogGroup {
    /// Its listing lines in `form` (true: full, false: names only), made by
    /// `render` the first time and kept with the name they were made under:
    /// under another name (a label given when a plugin and a server came to
    /// share it), they are made afresh and not kept.
    pub(crate) fn rendered(&self, full: bool, render: impl Fn() -> String) -> Arc<str> {
        let slot = if full {
            &self.rendered.full
        } else {
            &self.rendered.names
        };
        let (name, text) = slot.get_or_init(|| (self.name().to_owned(), render().into()));
        if name == self.name() {
            text.clone()
        } else {
            render().into()
        }
    }

    /// The server or plugin name; its toolset (`plugin-time`, `mcp-time`)
    /// when a plugin and a server of the same name are both in the catalog.
    /// `server:` filters take either.
    pub fn name(&self) -> &str {
        match &self.label {
            Some(label) => label,
            None => self.source.group().unwrap_or("core"),
        }
    }

    /// The source (plugin or MCP server).
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// The deferred tools, sorted by exposed name.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.tools
    }

    /// The deferred tools as a shared slice (the registry's own when the
    /// whole group is deferred).
    pub fn shared_tools(&self) -> &Arc<[Arc<Tool>]> {
        &self.tools
    }

    /// Character totals over the tools.
    pub fn totals(&self) -> GroupTotals {
        self.totals
    }

    /// What the server or plugin says it is for, if it said.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    pub(crate) fn description_arc(&self) -> Option<&Arc<str>> {
        self.description.as_ref()
    }
}

/// Eager and deferred tools of one session at one registry generation.
#[derive(Debug)]
pub struct Catalog {
    generation: u64,
    eager: Vec<Arc<Tool>>,
    groups: Vec<CatalogGroup>,
    deferred_count: usize,
    deferred_definition_chars: u64,
    mode: SearchMode,
    /// The index over this catalog's deferred tools, once built.
    index: ArcSwapOption<Retriever>,
    /// The index of the same scope's catalog at an earlier generation,
    /// which answers searches until `index` is ready (see
    /// [`Catalog::search`]).
    previous: ArcSwapOption<Retriever>,
    /// Where its index takes unchanged sources' segments from.
    segments: Option<Arc<SegmentCache>>,
    /// Its arrangements by listing budget and preferred groups, the
    /// latest made first (see [`Catalog::arranged`]).
    arranged: Mutex<Vec<(ArrangementKey, Arc<Arranged>)>>,
}

/// What one arrangement of a catalog is made for: a listing budget, and
/// the sources whose groups the listing describes first (the servers and
/// plugins a session has called, those of this catalog, in order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ArrangementKey {
    /// The listing budget in tokens.
    pub(crate) budget_tokens: u64,
    /// The preferred sources, sorted.
    pub(crate) preferred: Vec<ToolSource>,
}

/// Arrangements a catalog keeps: sessions come in a few context sizes and
/// have called a few sets of servers, and a catalog lives only until the
/// next change.
const ARRANGED_BUDGETS: usize = 16;

/// The index behind `tool_search`, of the configured mode.
#[derive(Debug)]
pub enum Retriever {
    /// BM25 (mode `classic`).
    Classic(SearchIndex),
    /// BM25F with analysis (mode `enhanced`); boxed, it is much larger.
    /// With the embedding stage on, the vectors of its segments, in order:
    /// hybrid search.
    Enhanced(Box<EnhancedIndex>, Option<Dense>),
}

/// The vectors of an enhanced index's segments, in index order.
#[derive(Debug)]
pub struct Dense {
    slots: Vec<Arc<DenseSlot>>,
    semantic: Arc<Shared>,
}

impl Dense {
    /// Per tool of the index, the cosine similarity of its vector to the
    /// query's (`NaN` while it is being embedded).
    fn similarities(&self, query: &[f32], len: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(len);
        for slot in &self.slots {
            slot.similarities(query, &mut out);
        }
        out
    }

    /// Tools whose vector is ready, and tools in all.
    pub fn progress(&self) -> (usize, usize) {
        self.slots
            .iter()
            .fold((0, 0), |(r, t), s| (r + s.ready(), t + s.len()))
    }
}

/// Which stages a search ran, as `tool_search`, `quiver catalog search`
/// and `quiver catalog eval` report it: with the embedding stage
/// configured, a search can still be lexical only (no tool's vector is
/// ready yet, or the query could not be embedded), and a hybrid search
/// may have vectors for only some tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchRun {
    /// `mode: classic`: BM25.
    Classic,
    /// `mode: enhanced` with no embedding stage configured.
    Lexical,
    /// The lexical scores fused with the similarities of `ready` of the
    /// `total` tools (the others matched lexically only).
    Hybrid {
        /// Tools whose vector was used.
        ready: usize,
        /// Tools searched.
        total: usize,
    },
    /// The embedding stage is configured but this search did not use it.
    LexicalOnly {
        /// Tools whose vector is ready.
        ready: usize,
        /// Tools searched.
        total: usize,
        /// Why, in words.
        reason: &'static str,
    },
}

impl SearchRun {
    /// `classic`, `lexical` or `hybrid`: what ranked the results.
    pub fn name(&self) -> &'static str {
        match self {
            SearchRun::Classic => "classic",
            SearchRun::Lexical | SearchRun::LexicalOnly { .. } => "lexical",
            SearchRun::Hybrid { .. } => "hybrid",
        }
    }

    /// Whether the embedding stage ranked every tool.
    pub fn is_fully_hybrid(&self) -> bool {
        matches!(self, SearchRun::Hybrid { ready, total } if ready == total)
    }

    /// A sentence for the model or the user when the embedding stage is
    /// configured but did not rank every tool; `None` otherwise.
    pub fn note(&self) -> Option<String> {
        match *self {
            SearchRun::Hybrid { ready, total } if ready < total => Some(format!(
                "semantic search used the vectors of {ready} of {total} tools; the rest, still being embedded, were matched by their words only"
            )),
            SearchRun::LexicalOnly {
                ready,
                total,
                reason,
            } => Some(format!(
                "lexical search only: {reason} ({ready} of {total} tools embedded)"
            )),
            _ => None,
        }
    }

    /// The run as JSON: `{"search": NAME}`, with `embedded` (`ready`,
    /// `total`) when the embedding stage is configured and `note` when it
    /// did not rank every tool.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::json!({"search": self.name()});
        if let SearchRun::Hybrid { ready, total } | SearchRun::LexicalOnly { ready, total, .. } =
            *self
        {
            out["embedded"] = serde_json::json!({"ready": ready, "total": total});
        }
        if let Some(note) = self.note() {
            out["search_note"] = serde_json::json!(note);
        }
        out
    }
}

impl Retriever {
    /// Indexes the tools of `groups` for `mode`, one fresh segment per
    /// group (the enhanced mode also matches each group's description):
    /// a full rebuild.
    pub fn build(mode: SearchMode, groups: &[CatalogGroup]) -> Retriever {
        Retriever::from_segments(
            mode,
            groups
                .iter()
                .map(|g| Segment::build(mode, g, None))
                .collect(),
        )
    }

    /// Combines per-group segments, in catalog order, into the index of
    /// `mode` (segments of the other mode are ignored); scores equal those
    /// of [`Retriever::build`] over the same groups.
    pub fn from_segments(mode: SearchMode, segments: Vec<Segment>) -> Retriever {
        Retriever::from_segments_with(mode, segments, None)
    }

    /// [`Retriever::from_segments`], the enhanced index looking the
    /// dictionaries of the segments `directory` covers up through it (same
    /// results, fewer lookups).
    pub fn from_segments_with(
        mode: SearchMode,
        segments: Vec<Segment>,
        directory: Option<Arc<Directory>>,
    ) -> Retriever {
        match mode {
            SearchMode::Classic => Retriever::Classic(SearchIndex::from_segments(
                segments
                    .into_iter()
                    .filter_map(|s| match s {
                        Segment::Classic(segment) => Some(segment),
                        Segment::Enhanced(..) => None,
                    })
                    .collect(),
            )),
            SearchMode::Enhanced => {
                let mut lexical = Vec::with_capacity(segments.len());
                let mut slots = Vec::with_capacity(segments.len());
                for segment in segments {
                    if let Segment::Enhanced(segment, slot) = segment {
                        lexical.push(segment);
                        slots.push(slot);
                    }
                }
                // Every segment's vectors, or none: one cache builds them all.
                let slots: Option<Vec<Arc<DenseSlot>>> = slots.into_iter().collect();
                let dense = slots.and_then(|slots| {
                    let semantic = slots.first()?.semantic().clone();
                    Some(Dense { slots, semantic })
                });
                Retriever::Enhanced(
                    Box::new(EnhancedIndex::with_directory(lexical, directory)),
                    dense,
                )
            }
        }
    }

    /// The vectors behind hybrid search, when the embedding stage is on.
    pub fn dense(&self) -> Option<&Dense> {
        match self {
            Retriever::Enhanced(_, dense) => dense.as_ref(),
            Retriever::Classic(_) => None,
        }
    }

    /// The best `limit` tools for `query`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        self.search_run(query, limit).0
    }

    /// [`Retriever::search`], and which stages ran.
    pub fn search_run(&self, query: &str, limit: usize) -> (Vec<Scored>, SearchRun) {
        match self {
            Retriever::Classic(index) => (index.search(query, limit), SearchRun::Classic),
            Retriever::Enhanced(index, None) => (index.search(query, limit), SearchRun::Lexical),
            Retriever::Enhanced(index, Some(dense)) => {
                let (ready, total) = dense.progress();
                let lexical_only = |reason| SearchRun::LexicalOnly {
                    ready,
                    total,
                    reason,
                };
                let (_, text) = split_server_filters(query);
                if text.trim().is_empty() {
                    return (
                        index.search(query, limit),
                        lexical_only("the query has no words to embed"),
                    );
                }
                if ready == 0 {
                    return (
                        index.search(query, limit),
                        lexical_only("no tool's vector is ready yet"),
                    );
                }
                if dense.semantic.weight() <= 0.0 {
                    return (
                        index.search(query, limit),
                        lexical_only("the similarity's weight is 0"),
                    );
                }
                match dense.semantic.embed_query(text.trim()) {
                    Ok(vector) => {
                        let similarity = dense.similarities(&vector, index.len());
                        let fusion = Fusion {
                            similarity: &similarity,
                            weight: dense.semantic.weight(),
                        };
                        (
                            index.search_fused(query, limit, Some(&fusion)),
                            SearchRun::Hybrid { ready, total },
                        )
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot embed the query; lexical search only");
                        (
                            index.search(query, limit),
                            lexical_only("the query could not be embedded"),
                        )
                    }
                }
            }
        }
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        match self {
            Retriever::Classic(index) => index.len(),
            Retriever::Enhanced(index, _) => index.len(),
        }
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Catalog {
    /// Classifies the in-scope tools of `snapshot`. Core tools and `eager`
    /// matches are eager; plugin and MCP tools are deferred, unless
    /// `defer` is false, in which case every tool is eager.
    pub fn build(
        snapshot: &RegistrySnapshot,
        scope: &Scope,
        config: &ToolSearchConfig,
        defer: bool,
    ) -> Catalog {
        Catalog::build_after(None, snapshot, scope, config, defer)
    }

    /// [`Catalog::build`], taking the totals of unchanged groups from
    /// `previous` (a catalog of an earlier generation, same scope and
    /// settings): a change to one source then costs that source's tools.
    pub fn build_after(
        previous: Option<&Catalog>,
        snapshot: &RegistrySnapshot,
        scope: &Scope,
        config: &ToolSearchConfig,
        defer: bool,
    ) -> Catalog {
        let earlier: HashMap<&ToolSource, &CatalogGroup> = previous
            .map(|p| p.groups.iter().map(|g| (&g.source, g)).collect())
            .unwrap_or_default();
        let mut eager = Vec::new();
        let mut groups: Vec<CatalogGroup> = Vec::new();
        for group in snapshot.groups() {
            let source = group.source();
            // Deciding per toolset first keeps the per-tool glob matching off
            // the common path (a fully granted server with no eager globs).
            let whole_group = scope.allows_toolset(&source.toolset());
            if whole_group && defer && source.is_deferrable() && config.eager.is_empty() {
                // Every tool deferred: the group is the registry's, shared.
                let tools = group.shared_tools().clone();
                if tools.is_empty() {
                    continue;
                }
                let (totals, rendered) = match earlier.get(source) {
                    Some(before) if Arc::ptr_eq(&before.tools, &tools) => {
                        (before.totals, before.rendered.clone())
                    }
                    _ => (GroupTotals::of(&tools), Arc::default()),
                };
                groups.push(CatalogGroup {
                    source: source.clone(),
                    label: None,
                    tools,
                    totals,
                    description: group.description().cloned(),
                    rendered,
                });
                continue;
            }
            let mut deferred = Vec::new();
            let mut totals = GroupTotals::default();
            for tool in group.tools() {
                if !whole_group && !scope.allows(tool) {
                    continue;
                }
                if !defer || !source.is_deferrable() || config.is_eager(tool.name()) {
                    eager.push(tool.clone());
                } else {
                    totals.add(tool);
                    deferred.push(tool.clone());
                }
            }
            if !deferred.is_empty() {
                groups.push(CatalogGroup {
                    source: source.clone(),
                    label: None,
                    tools: deferred.into(),
                    totals,
                    description: group.description().cloned(),
                    rendered: Arc::default(),
                });
            }
        }
        eager.sort_by(|a, b| a.name().cmp(b.name()));
        groups.sort_by(|a, b| (a.name(), a.source.kind()).cmp(&(b.name(), b.source.kind())));
        // Sorted by name, a plugin and a server sharing one are neighbours.
        for at in 1..groups.len() {
            if groups[at - 1].source.group() == groups[at].source.group() {
                for shared in [at - 1, at] {
                    groups[shared].label = Some(groups[shared].source.toolset());
                }
            }
        }
        let deferred_count = groups.iter().map(|g| g.tools.len()).sum();
        let deferred_definition_chars = groups.iter().map(|g| g.totals.definition_chars).sum();
        Catalog {
            generation: snapshot.generation(),
            eager,
            groups,
            deferred_count,
            deferred_definition_chars,
            mode: config.mode,
            index: ArcSwapOption::empty(),
            previous: ArcSwapOption::empty(),
            segments: None,
            arranged: Mutex::new(Vec::new()),
        }
    }

    /// The registry generation this catalog was built from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Tools sent to the model with their full schema, sorted by name.
    pub fn eager(&self) -> &[Arc<Tool>] {
        &self.eager
    }

    /// Deferred tools per server or plugin, sorted by group name.
    pub fn groups(&self) -> &[CatalogGroup] {
        &self.groups
    }

    /// Number of deferred tools.
    pub fn deferred_count(&self) -> usize {
        self.deferred_count
    }

    /// Characters of every deferred tool's function definition, summed.
    pub fn deferred_definition_chars(&self) -> u64 {
        self.deferred_definition_chars
    }

    /// Deferred tools in catalog order (group by group, name by name).
    pub fn deferred(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.groups.iter().flat_map(|g| g.tools.iter())
    }

    /// Every in-scope tool, eager or deferred.
    pub fn in_scope(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.eager.iter().chain(self.deferred())
    }

    /// Finds an in-scope tool by its exact exposed name.
    pub fn find(&self, name: &str) -> Option<&Arc<Tool>> {
        if let Ok(i) = self.eager.binary_search_by(|t| t.name().cmp(name)) {
            return self.eager.get(i);
        }
        self.groups.iter().find_map(|g| {
            g.tools
                .binary_search_by(|t| t.name().cmp(name))
                .ok()
                .and_then(|i| g.tools.get(i))
        })
    }

    /// Whether `name` is an eager tool of this catalog.
    pub fn is_eager(&self, name: &str) -> bool {
        self.eager.binary_search_by(|t| t.name().cmp(name)).is_ok()
    }

    /// The search mode.
    pub fn mode(&self) -> SearchMode {
        self.mode
    }

    /// The search index over the deferred tools: the one set by the
    /// assembler (see [`crate::indexing`]), else built here on first use,
    /// for a catalog used on its own.
    pub fn index(&self) -> Arc<Retriever> {
        if let Some(index) = self.index.load_full() {
            return index;
        }
        let index = Arc::new(match &self.segments {
            Some(segments) => segments.compose(&self.groups),
            None => Retriever::build(self.mode, &self.groups),
        });
        self.index.store(Some(index.clone()));
        index
    }

    /// Builds this catalog's index from (and into) `segments`.
    pub fn with_segments(mut self, segments: Arc<SegmentCache>) -> Catalog {
        self.segments = Some(segments);
        self
    }

    /// This catalog's arrangement for `key`: the one made earlier, else
    /// the one `arrange` makes (made outside the lock; two first
    /// assemblies may both make it, and both are the same).
    pub(crate) fn arranged(
        &self,
        key: &ArrangementKey,
        arrange: impl FnOnce() -> Arranged,
    ) -> Arc<Arranged> {
        let lock = || self.arranged.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, arranged)) = lock().iter().find(|(k, _)| k == key) {
            return arranged.clone();
        }
        let arranged = Arc::new(arrange());
        let mut kept = lock();
        if !kept.iter().any(|(k, _)| k == key) {
            kept.insert(0, (key.clone(), arranged.clone()));
            kept.truncate(ARRANGED_BUDGETS);
        }
        arranged
    }

    /// The listing budgets this catalog has been arranged for, the latest
    /// made first (what the tests look at; the background pass takes them).
    #[cfg(test)]
    pub(crate) fn arranged_budgets(&self) -> Vec<u64> {
        let kept = self.arranged.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter().map(|(key, _)| key.budget_tokens).collect()
    }

    /// What this catalog has been arranged for, letting the arrangements
    /// go: once a later generation's catalog takes over, an older one
    /// (kept in the assembler's cache for sessions still on it) need not
    /// hold a listing per budget, tens of kilobytes each.
    pub(crate) fn take_arrangements(&self) -> Vec<ArrangementKey> {
        let mut kept = self.arranged.lock().unwrap_or_else(PoisonError::into_inner);
        kept.drain(..).map(|(key, _)| key).collect()
    }

    /// The index over this catalog's own tools, if it is ready.
    pub fn ready_index(&self) -> Option<Arc<Retriever>> {
        self.index.load_full()
    }

    /// Whether this catalog's own index is ready.
    pub fn is_index_ready(&self) -> bool {
        self.index.load().is_some()
    }

    pub(crate) fn set_index(&self, index: Arc<Retriever>) {
        self.index.store(Some(index));
        self.previous.store(None);
    }

    /// Lets an earlier generation's index answer until this one's is set.
    pub(crate) fn serve_meanwhile(&self, previous: Arc<Retriever>) {
        if self.index.load().is_none() {
            self.previous.store(Some(previous));
        }
    }

    /// The index serving searches now: this catalog's own, else the earlier
    /// one it was given to serve meanwhile.
    pub(crate) fn serving_index(&self) -> Option<Arc<Retriever>> {
        self.index.load_full().or_else(|| self.previous.load_full())
    }

    /// The best `limit` deferred tools for `query`. While the index of this
    /// generation is being built in the background, the previous
    /// generation's answers, less the tools this catalog no longer holds
    /// (each hit is this catalog's tool of that name): a source changed is
    /// seen whole, before or after, never half.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        self.search_run(query, limit).0
    }

    /// [`Catalog::search`], and which stages ran.
    pub fn search_run(&self, query: &str, limit: usize) -> (Vec<Scored>, SearchRun) {
        if let Some(index) = self.index.load_full() {
            return index.search_run(query, limit);
        }
        let Some(previous) = self.previous.load_full() else {
            return self.index().search_run(query, limit);
        };
        let (hits, run) = previous.search_run(query, limit);
        let hits = hits
            .into_iter()
            .filter_map(|hit| {
                let group = self
                    .groups
                    .iter()
                    .find(|g| g.source == *hit.tool.source())?;
                let at = group
                    .tools
                    .binary_search_by(|t| t.name().cmp(hit.tool.name()))
                    .ok()?;
                Some(Scored {
                    tool: group.tools.get(at)?.clone(),
                    score: hit.score,
                })
            })
            .collect();
        (hits, run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::tool::ToolSpec;
    use serde_json::json;

    fn registry() -> ToolRegistry {
        let registry = ToolRegistry::new();
        let spec = |n: &str| ToolSpec::new(n, "", json!({"type": "object"}));
        registry.set_source_tools(ToolSource::Core, vec![spec("read_file")]);
        registry.set_source_tools(
            ToolSource::Plugin("text".into()),
            vec![spec("b64"), spec("hash")],
        );
        registry.set_source_tools(
            ToolSource::Mcp("github".into()),
            vec![spec("issue"), spec("pr")],
        );
        registry
    }

    #[test]
    fn core_is_eager_and_sources_are_deferred_per_group() {
        let snapshot = registry().snapshot();
        let config = ToolSearchConfig::default();
        let catalog = Catalog::build(&snapshot, &Scope::all(), &config, true);
        let eager: Vec<_> = catalog.eager().iter().map(|t| t.name()).collect();
        assert_eq!(eager, ["read_file"]);
        let groups: Vec<_> = catalog
            .groups()
            .iter()
            .map(|g| (g.name(), g.tools().len()))
            .collect();
        assert_eq!(groups, [("github", 2), ("text", 2)]);
        assert_eq!(catalog.deferred_count(), 4);
    }

    #[test]
    fn groups_carry_their_source_description() {
        let registry = registry();
        registry.set_descriptions([(
            ToolSource::Mcp("github".into()),
            "Issues and pull requests".to_owned(),
        )]);
        let catalog = Catalog::build(
            &registry.snapshot(),
            &Scope::all(),
            &ToolSearchConfig::default(),
            true,
        );
        let described: Vec<_> = catalog
            .groups()
            .iter()
            .map(|g| (g.name(), g.description()))
            .collect();
        assert_eq!(
            described,
            [("github", Some("Issues and pull requests")), ("text", None)]
        );
    }

    #[test]
    fn eager_globs_keep_tools_out_of_the_catalog() {
        let snapshot = registry().snapshot();
        let config =
            crate::settings::from_yaml("tools:\n  tool_search:\n    eager: [\"mcp_github_*\"]\n");
        let catalog = Catalog::build(&snapshot, &Scope::all(), &config, true);
        let eager: Vec<_> = catalog.eager().iter().map(|t| t.name()).collect();
        assert_eq!(eager, ["mcp_github_issue", "mcp_github_pr", "read_file"]);
        assert_eq!(catalog.deferred_count(), 2);
    }

    #[test]
    fn scope_limits_what_the_catalog_holds() {
        let snapshot = registry().snapshot();
        let scope = Scope::new(["core", "mcp_github_pr"]).unwrap();
        let catalog = Catalog::build(&snapshot, &scope, &ToolSearchConfig::default(), true);
        let names: Vec<_> = catalog.in_scope().map(|t| t.name()).collect();
        assert_eq!(names, ["read_file", "mcp_github_pr"]);
        assert!(catalog.find("b64").is_none());
        assert!(catalog.find("mcp_github_pr").is_some());
    }

    #[test]
    fn no_deferral_makes_everything_eager() {
        let snapshot = registry().snapshot();
        let catalog = Catalog::build(
            &snapshot,
            &Scope::all(),
            &ToolSearchConfig::default(),
            false,
        );
        assert_eq!(catalog.eager().len(), 5);
        assert_eq!(catalog.deferred_count(), 0);
    }
}
