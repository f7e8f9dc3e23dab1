//! The embedding stage of hybrid search: tool vectors computed in the
//! background by one worker thread as sources publish, kept per segment
//! ([`DenseSlot`], one per search segment) and in the model's
//! [`VectorCache`] shared by every session and kept in the state
//! directory, and the query's vector computed when a search asks.
//!
//! A search never waits for a tool's vector: a tool whose vector is not
//! ready is matched lexically only (its similarity is `NaN`, see
//! [`quiver_search::enhanced::Fusion`]). A text already embedded, in this
//! run or an earlier one, is never embedded again, so a reload or a
//! `list_changed` embeds only the tools whose text changed.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};

use quiver_embed::{EmbedError, EmbedOptions, Embedder, TextKey, VectorCache};
use quiver_search::enhanced::{identifier_parts, split_server_filters};
use quiver_tool::tool::{Tool, ToolSource};

use crate::settings::EmbeddingsConfig;

/// Tool texts embedded per worker step: small, so a query's embedding,
/// which shares the model's threads, waits little behind the background.
const WORKER_BATCH: usize = 8;

/// Query vectors remembered (a model retrying a search, an evaluation
/// embedding its queries in batches first); cleared when full.
const QUERY_MEMO: usize = 4096;

/// Why the embedding stage could not start.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    /// The model could not be loaded.
    #[error("tools.tool_search.embeddings.model: {0}")]
    Model(#[from] EmbedError),
}

/// The text a tool is embedded as: `<server> <name in words> (<title>):
/// <description>`, the title only when its words are not just the name's
/// (`Gimmee Air Quality` for `airqualityforeast`, not `Create Issue` for
/// `create_issue`).
pub fn tool_text(tool: &Tool) -> String {
    let mut text = String::new();
    if let Some(group) = tool.source().group() {
        text.push_str(group);
        text.push(' ');
    }
    let mut named: Vec<String> = Vec::new();
    identifier_parts(tool.original_name(), |part| named.push(part.to_owned()));
    text.push_str(&named.join(" "));
    if let Some(title) = tool.title().map(str::trim) {
        let mut titled: Vec<String> = Vec::new();
        identifier_parts(title, |part| titled.push(part.to_owned()));
        if !titled.is_empty() && titled != named {
            text.push_str(" (");
            text.push_str(title);
            text.push(')');
        }
    }
    let description = tool.description().trim();
    if !description.is_empty() {
        text.push_str(": ");
        text.push_str(description);
    }
    text
}

/// The vectors of one segment's tools, in the segment's order, filled in
/// by the worker as they are computed (unit length, for cosine by dot
/// product).
pub struct DenseSlot {
    source: ToolSource,
    vectors: Vec<OnceLock<Arc<[f32]>>>,
    ready: AtomicUsize,
    semantic: Arc<Shared>,
}

impl std::fmt::Debug for DenseSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseSlot")
            .field("source", &self.source)
            .field("ready", &self.ready())
            .field("total", &self.len())
            .finish()
    }
}

impl DenseSlot {
    /// Tools in the slot.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether the slot holds no tool.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// Tools whose vector is ready.
    pub fn ready(&self) -> usize {
        self.ready.load(Ordering::Acquire)
    }

    fn set(&self, at: usize, vector: Arc<[f32]>) {
        if let Some(cell) = self.vectors.get(at)
            && cell.set(vector).is_ok()
        {
            self.ready.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Appends the cosine similarity of each tool to `query` (a unit
    /// vector) to `out`, `NaN` for a tool whose vector is not ready.
    pub fn similarities(&self, query: &[f32], out: &mut Vec<f32>) {
        out.extend(self.vectors.iter().map(|cell| match cell.get() {
            Some(vector) => quiver_embed::model::dot(vector, query),
            None => f32::NAN,
        }));
    }

    /// The model stage this slot belongs to.
    pub fn semantic(&self) -> &Arc<Shared> {
        &self.semantic
    }
}

struct Waiting {
    text: String,
    slots: Vec<(Weak<DenseSlot>, usize)>,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<TextKey>,
    waiting: HashMap<TextKey, Waiting>,
}

/// Embedding progress of one source's newest segment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceProgress {
    /// `plugin-NAME` or `mcp-NAME`.
    pub source: String,
    /// Tools whose vector is ready.
    pub ready: usize,
    /// Tools to embed.
    pub total: usize,
}

/// The embedding stage at a glance, as status reports show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EmbeddingStatus {
    /// The model's directory.
    pub model: PathBuf,
    /// The fusion weight of the cosine scores.
    pub weight: f64,
    /// Tools of live segments whose vector is ready.
    pub ready: usize,
    /// Tools of live segments.
    pub total: usize,
    /// Vectors in the cache.
    pub cached: usize,
    /// Texts embedded by this run (not taken from the cache).
    pub embedded: u64,
    /// Texts the model failed on.
    pub failed: u64,
    /// Per source, its newest segment's progress.
    pub sources: Vec<SourceProgress>,
}

/// The model, its cache and the worker's queue: what slots and searches
/// share.
pub struct Shared {
    config: EmbeddingsConfig,
    embedder: Embedder,
    cache: VectorCache,
    queue: Mutex<Queue>,
    wake: Condvar,
    stop: AtomicBool,
    slots: Mutex<Vec<Weak<DenseSlot>>>,
    embedded: AtomicU64,
    failed: AtomicU64,
    queries: Mutex<HashMap<String, Arc<[f32]>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("model", &self.config.model)
            .field("cached", &self.cache.len())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The settings it was started with.
    pub fn config(&self) -> &EmbeddingsConfig {
        &self.config
    }

    /// Weight of the similarity in the fused score.
    pub fn weight(&self) -> f64 {
        self.config.weight
    }

    /// The query's unit vector (remembered for repeated queries).
    pub fn embed_query(&self, query: &str) -> Result<Arc<[f32]>, EmbedError> {
        if let Some(vector) = self
            .queries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(query)
        {
            return Ok(vector.clone());
        }
        let vector = unit(self.embedder.embed_query(query)?);
        self.remember_query(query, vector.clone());
        Ok(vector)
    }

    /// Embeds `queries` in batches ahead of searching them (for
    /// evaluation), so each search finds its vector remembered: all of
    /// them, whatever [`QUERY_MEMO`] says. A query `kept` holds is taken
    /// from it, and a new one is added to it, so an evaluation run again
    /// embeds no query twice.
    pub fn prime_queries(
        &self,
        queries: &[&str],
        kept: Option<&VectorCache>,
    ) -> Result<(), EmbedError> {
        // What a search embeds: the query without its `server:` filters.
        let texts: Vec<String> = queries
            .iter()
            .map(|q| split_server_filters(q).1.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
        let mut missing: Vec<&str> = Vec::new();
        {
            let mut memo = self.queries.lock().unwrap_or_else(PoisonError::into_inner);
            for query in &texts {
                if memo.contains_key(query) {
                    continue;
                }
                match kept.and_then(|k| k.get(&TextKey::of(query))) {
                    Some(vector) => {
                        memo.insert(query.clone(), vector);
                    }
                    None => missing.push(query),
                }
            }
        }
        missing.sort_unstable();
        missing.dedup();
        for chunk in missing.chunks(64) {
            let vectors: Vec<(TextKey, Arc<[f32]>)> = chunk
                .iter()
                .zip(self.embedder.embed(chunk)?)
                .map(|(query, vector)| (TextKey::of(query), unit(vector)))
                .collect();
            if let Some(kept) = kept
                && let Err(error) = kept.insert(&vectors)
            {
                tracing::warn!(%error, "cannot keep the query vectors");
            }
            let mut memo = self.queries.lock().unwrap_or_else(PoisonError::into_inner);
            for (query, (_, vector)) in chunk.iter().zip(vectors) {
                memo.insert((*query).to_owned(), vector);
            }
        }
        Ok(())
    }

    /// The vectors of evaluation queries, kept beside the tools' under
    /// `state_dir` (as `<model key>.queries`), never mixed with them.
    pub fn query_cache(
        &self,
        state_dir: &Path,
    ) -> Result<VectorCache, quiver_embed::cache::CacheError> {
        VectorCache::open(
            state_dir,
            &format!("{}.queries", self.embedder.key()),
            self.embedder.dimension(),
        )
    }

    fn remember_query(&self, query: &str, vector: Arc<[f32]>) {
        let mut memo = self.queries.lock().unwrap_or_else(PoisonError::into_inner);
        if memo.len() >= QUERY_MEMO {
            memo.clear();
        }
        memo.insert(query.to_owned(), vector);
    }

    fn enqueue(&self, slot: &Arc<DenseSlot>, missing: Vec<(usize, TextKey, String)>) {
        if missing.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for (at, key, text) in missing {
            match queue.waiting.get_mut(&key) {
                Some(waiting) => waiting.slots.push((Arc::downgrade(slot), at)),
                None => {
                    queue.order.push_back(key);
                    queue.waiting.insert(
                        key,
                        Waiting {
                            text,
                            slots: vec![(Arc::downgrade(slot), at)],
                        },
                    );
                }
            }
        }
        drop(queue);
        self.wake.notify_one();
    }

    /// The worker: embeds queued texts until the stage is dropped.
    fn work(self: Arc<Self>) {
        loop {
            let batch: Vec<(TextKey, Waiting)> = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                while queue.order.is_empty() && !self.stop.load(Ordering::Acquire) {
                    queue = self
                        .wake
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                let mut batch = Vec::new();
                while batch.len() < WORKER_BATCH {
                    let Some(key) = queue.order.pop_front() else {
                        break;
                    };
                    if let Some(waiting) = queue.waiting.remove(&key) {
                        // Nobody waits any more (the source changed again).
                        if waiting.slots.iter().any(|(s, _)| s.strong_count() > 0) {
                            batch.push((key, waiting));
                        }
                    }
                }
                batch
            };
            if batch.is_empty() {
                continue;
            }
            let texts: Vec<&str> = batch.iter().map(|(_, w)| w.text.as_str()).collect();
            match self.embedder.embed(&texts) {
                Ok(vectors) => {
                    let vectors: Vec<(TextKey, Arc<[f32]>)> = batch
                        .iter()
                        .zip(vectors)
                        .map(|((key, _), v)| (*key, unit(v)))
                        .collect();
                    if let Err(error) = self.cache.insert(&vectors) {
                        tracing::warn!(%error, "cannot write the vector cache; vectors are kept in memory only");
                    }
                    for ((_, waiting), (_, vector)) in batch.iter().zip(&vectors) {
                        for (slot, at) in &waiting.slots {
                            if let Some(slot) = slot.upgrade() {
                                slot.set(*at, vector.clone());
                            }
                        }
                    }
                    self.embedded
                        .fetch_add(vectors.len() as u64, Ordering::Relaxed);
                    metrics::counter!("quiver_tool_embeddings_total")
                        .increment(vectors.len() as u64);
                }
                Err(error) => {
                    tracing::warn!(%error, tools = batch.len(), "embedding failed; those tools are matched lexically only");
                    self.failed.fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The embedding stage: a model, its vector cache and the background
/// worker. Dropping it stops the worker.
#[derive(Debug)]
pub struct SemanticIndex {
    shared: Arc<Shared>,
}

impl Drop for SemanticIndex {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
    }
}

/// `vector` scaled to unit length.
fn unit(mut vector: Vec<f32>) -> Arc<[f32]> {
    quiver_embed::model::normalize(&mut vector);
    vector.into()
}

impl SemanticIndex {
    /// Loads the model of `config` and its cache under `state_dir` (a
    /// cache that cannot be opened is a warning: vectors then live in
    /// memory only), and starts the worker.
    pub fn open(
        config: &EmbeddingsConfig,
        state_dir: Option<&Path>,
    ) -> Result<SemanticIndex, SemanticError> {
        let threads = config.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
        });
        let embedder = Embedder::load(
            &config.model,
            &EmbedOptions {
                max_tokens: config.max_tokens,
                threads: Some(threads),
            },
        )?;
        let cache = match state_dir {
            Some(dir) => match VectorCache::open(dir, embedder.key(), embedder.dimension()) {
                Ok(cache) => cache,
                Err(error) => {
                    tracing::warn!(%error, "cannot use the vector cache; vectors are kept in memory only");
                    VectorCache::in_memory(embedder.dimension())
                }
            },
            None => VectorCache::in_memory(embedder.dimension()),
        };
        let shared = Arc::new(Shared {
            config: config.clone(),
            embedder,
            cache,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            slots: Mutex::new(Vec::new()),
            embedded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            queries: Mutex::new(HashMap::new()),
        });
        let worker = shared.clone();
        // Embedding a catalog takes minutes of CPU: at background
        // priority, it never takes a core from a search.
        crate::background::spawn("quiver-embedder", move || worker.work()).map_err(|e| {
            SemanticError::Model(EmbedError::Threads {
                threads: 1,
                message: e.to_string(),
            })
        })?;
        Ok(SemanticIndex { shared })
    }

    /// The settings it was started with.
    pub fn config(&self) -> &EmbeddingsConfig {
        &self.shared.config
    }

    /// The model's directory.
    pub fn model_dir(&self) -> &Path {
        self.shared.embedder.dir()
    }

    /// The vector cache's file, if it has one.
    pub fn cache_file(&self) -> Option<PathBuf> {
        self.shared.cache.path().map(Path::to_path_buf)
    }

    /// Vectors in the cache.
    pub fn cached(&self) -> usize {
        self.shared.cache.len()
    }

    /// Texts embedded by this run (not taken from the cache).
    pub fn embedded(&self) -> u64 {
        self.shared.embedded.load(Ordering::Relaxed)
    }

    /// Texts the model failed on (those tools stay lexical-only).
    pub fn failed(&self) -> u64 {
        self.shared.failed.load(Ordering::Relaxed)
    }

    /// What `/v1/status` and `quiver status` show: the model, the cache,
    /// and per source how many of its tools have their vector.
    pub fn status(&self) -> EmbeddingStatus {
        let sources = self.progress();
        EmbeddingStatus {
            model: self.model_dir().to_path_buf(),
            weight: self.shared.weight(),
            ready: sources.iter().map(|s| s.ready).sum(),
            total: sources.iter().map(|s| s.total).sum(),
            cached: self.cached(),
            embedded: self.embedded(),
            failed: self.failed(),
            sources,
        }
    }

    /// What searches and slots share.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A slot for `tools` of `source`: vectors from the cache at once, the
    /// rest queued for the worker.
    pub fn slot(&self, source: &ToolSource, tools: &[Arc<Tool>]) -> Arc<DenseSlot> {
        let slot = Arc::new(DenseSlot {
            source: source.clone(),
            vectors: (0..tools.len()).map(|_| OnceLock::new()).collect(),
            ready: AtomicUsize::new(0),
            semantic: self.shared.clone(),
        });
        let mut missing = Vec::new();
        for (at, tool) in tools.iter().enumerate() {
            let text = tool_text(tool);
            let key = TextKey::of(&text);
            match self.shared.cache.get(&key) {
                Some(vector) => slot.set(at, vector),
                None => missing.push((at, key, text)),
            }
        }
        self.shared.enqueue(&slot, missing);
        let mut slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slots.retain(|s| s.strong_count() > 0);
        slots.push(Arc::downgrade(&slot));
        slot
    }

    /// Per source, the embedding progress of its newest live segment.
    pub fn progress(&self) -> Vec<SourceProgress> {
        let slots = self
            .shared
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut newest: Vec<(ToolSource, Arc<DenseSlot>)> = Vec::new();
        for slot in slots.iter().filter_map(Weak::upgrade) {
            match newest.iter_mut().find(|(s, _)| *s == slot.source) {
                Some(entry) => entry.1 = slot,
                None => newest.push((slot.source.clone(), slot)),
            }
        }
        let mut progress: Vec<SourceProgress> = newest
            .into_iter()
            .map(|(source, slot)| SourceProgress {
                source: source.toolset(),
                ready: slot.ready(),
                total: slot.len(),
            })
            .collect();
        progress.sort_by(|a, b| a.source.cmp(&b.source));
        progress
    }

    /// Whether no text is waiting for the worker.
    pub fn is_idle(&self) -> bool {
        let queue = self
            .shared
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        queue.order.is_empty()
    }

    /// Blocks until every queued text is embedded (for evaluation and
    /// benchmarks; the daemon never waits).
    pub fn wait_idle(&self) {
        while !self.is_idle() || self.progress().iter().any(|p| p.ready < p.total) {
            if self.is_idle() {
                // The last batch is being embedded, or failed.
                std::thread::sleep(std::time::Duration::from_millis(20));
                if self.is_idle() && self.shared.failed.load(Ordering::Relaxed) > 0 {
                    return;
                }
                continue;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_tool::registry::ToolRegistry;
    use quiver_tool::tool::{ToolMetadata, ToolSpec};
    use serde_json::json;

    fn text(name: &str, title: Option<&str>, description: &str) -> String {
        let registry = ToolRegistry::new();
        let spec = ToolSpec::new(name, description, json!({"type": "object"})).with_metadata(
            ToolMetadata {
                title: title.map(str::to_owned),
                ..ToolMetadata::default()
            },
        );
        registry.set_source_tools(ToolSource::Mcp("srv".into()), vec![spec]);
        tool_text(&registry.snapshot().groups()[0].tools()[0])
    }

    #[test]
    fn a_tool_is_embedded_with_its_title_when_the_title_says_more_than_its_name() {
        assert_eq!(
            text(
                "airqualityforeast",
                Some("Gimmee Air Quality"),
                "Forecasts."
            ),
            "srv airqualityforeast (Gimmee Air Quality): Forecasts."
        );
        assert_eq!(
            text("create_issue", Some("Create Issue"), "Opens one."),
            "srv create issue: Opens one."
        );
        assert_eq!(text("getUser", None, " "), "srv get user");
    }
}
