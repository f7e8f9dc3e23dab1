//! Search segments per source, shared by every catalog of an
//! [`Assembler`](crate::assembly::Assembler), and the background pass that
//! builds them when the registry publishes, so a change to one source
//! re-indexes that source only and a search never waits for an index.
//!
//! A segment is keyed by its source and exactly the tools (by pointer: the
//! registry keeps the `Arc` of an unchanged tool) and description it was
//! built from; a catalog's index is its groups' segments combined (see
//! [`Retriever::from_segments`]), a few steps per segment. Per-source
//! derived data that takes long to compute (per-tool vectors, say) belongs
//! in [`Segment`] too, built here, off the request path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::catalog::{CatalogGroup, Retriever};
use crate::semantic::{DenseSlot, SemanticIndex};
use crate::settings::SearchMode;
use quiver_search::classic::ClassicSegment;
use quiver_search::enhanced::{Directory, EnhancedIndex, EnhancedSegment};
use quiver_tool::tool::{Tool, ToolSource};

/// One source's part of a catalog's search index, of the configured mode.
#[derive(Debug, Clone)]
pub enum Segment {
    /// BM25 (mode `classic`).
    Classic(Arc<ClassicSegment>),
    /// BM25F with analysis (mode `enhanced`), and the group's vectors when
    /// the embedding stage is on.
    Enhanced(Arc<EnhancedSegment>, Option<Arc<DenseSlot>>),
}

impl Segment {
    /// Indexes one catalog group (and queues its tools' vectors with
    /// `semantic`, when given, in the enhanced mode).
    pub fn build(
        mode: SearchMode,
        group: &CatalogGroup,
        semantic: Option<&SemanticIndex>,
    ) -> Segment {
        match mode {
            SearchMode::Classic => Segment::Classic(Arc::new(ClassicSegment::build(group.tools()))),
            SearchMode::Enhanced => Segment::Enhanced(
                Arc::new(EnhancedSegment::build(group.description(), group.tools())),
                semantic.map(|s| s.slot(group.source(), group.tools())),
            ),
        }
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        match self {
            Segment::Classic(segment) => segment.len(),
            Segment::Enhanced(segment, _) => segment.len(),
        }
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Cached {
    tools: Arc<[Arc<Tool>]>,
    description: Option<Arc<str>>,
    segment: Segment,
    /// The pass that last used it.
    used: u64,
}

impl Cached {
    fn matches(&self, group: &CatalogGroup) -> bool {
        self.description.as_deref() == group.description()
            && (Arc::ptr_eq(&self.tools, group.shared_tools())
                || (self.tools.len() == group.tools().len()
                    && self
                        .tools
                        .iter()
                        .zip(group.tools())
                        .all(|(a, b)| Arc::ptr_eq(a, b))))
    }
}

/// How many of a catalog's enhanced segments may be looked up one by one,
/// outside the directory, before the background pass builds a new one.
/// A change leaves one source's new segment uncovered (the replaced one
/// simply drops out), so a run of changes to one plugin never rebuilds it;
/// changes to this many different sources do, once.
pub const MAX_UNCOVERED_SEGMENTS: usize = 8;

/// Catalogs of this many enhanced segments or fewer never get a directory:
/// looking a key up in a few dozen segments costs less than the memory a
/// directory takes (about 340 bytes per tool at 4,472 tools in 39 servers).
pub const MIN_DIRECTORY_SEGMENTS: usize = 64;

/// Segments by source, for one search mode (and embedding stage).
pub struct SegmentCache {
    mode: SearchMode,
    semantic: Option<Arc<SemanticIndex>>,
    entries: Mutex<HashMap<ToolSource, Vec<Cached>>>,
    /// The enhanced segments' catalog-wide directory, built by
    /// [`SegmentCache::refresh_directory`]; any one serves (see
    /// [`Directory`]), a recent one serves best.
    directory: Mutex<Option<Arc<Directory>>>,
    /// Counts background passes; entries unused for two are dropped.
    pass: AtomicU64,
}

impl std::fmt::Debug for SegmentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentCache")
            .field("mode", &self.mode)
            .field("segments", &self.len())
            .finish()
    }
}

impl SegmentCache {
    /// An empty cache of `mode` segments.
    pub fn new(mode: SearchMode) -> SegmentCache {
        SegmentCache::with_semantic(mode, None)
    }

    /// An empty cache of `mode` segments whose enhanced segments carry
    /// `semantic`'s vectors.
    pub fn with_semantic(mode: SearchMode, semantic: Option<Arc<SemanticIndex>>) -> SegmentCache {
        SegmentCache {
            mode,
            semantic,
            entries: Mutex::new(HashMap::new()),
            directory: Mutex::new(None),
            pass: AtomicU64::new(0),
        }
    }

    /// The search mode.
    pub fn mode(&self) -> SearchMode {
        self.mode
    }

    /// The embedding stage its segments carry vectors of.
    pub fn semantic(&self) -> Option<&Arc<SemanticIndex>> {
        self.semantic.as_ref()
    }

    fn lookup(&self, group: &CatalogGroup) -> Option<Segment> {
        let pass = self.pass.load(Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = entries
            .get_mut(group.source())?
            .iter_mut()
            .find(|c| c.matches(group))?;
        cached.used = pass;
        Some(cached.segment.clone())
    }

    fn insert(&self, group: &CatalogGroup, segment: Segment) {
        let pass = self.pass.load(Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let variants = entries.entry(group.source().clone()).or_default();
        if variants.iter().any(|c| c.matches(group)) {
            return;
        }
        variants.push(Cached {
            tools: group.shared_tools().clone(),
            description: group.description_arc().cloned(),
            segment,
            used: pass,
        });
    }

    /// The index over `groups` from cached segments alone, if every one is
    /// cached.
    pub fn compose_cached(&self, groups: &[CatalogGroup]) -> Option<Retriever> {
        let segments: Option<Vec<Segment>> = groups.iter().map(|g| self.lookup(g)).collect();
        Some(Retriever::from_segments_with(
            self.mode,
            segments?,
            self.directory(),
        ))
    }

    /// The index over `groups`, building (and caching) the segments that
    /// are missing.
    pub fn compose(&self, groups: &[CatalogGroup]) -> Retriever {
        let segments = groups
            .iter()
            .map(|group| {
                self.lookup(group).unwrap_or_else(|| {
                    let segment = Segment::build(self.mode, group, self.semantic.as_deref());
                    self.insert(group, segment.clone());
                    segment
                })
            })
            .collect();
        Retriever::from_segments_with(self.mode, segments, self.directory())
    }

    /// The current directory of the enhanced segments, if one was built.
    pub fn directory(&self) -> Option<Arc<Directory>> {
        self.directory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Builds a new directory over the segments of `indexes` when one of
    /// them, of more than [`MIN_DIRECTORY_SEGMENTS`] segments, looks more
    /// than [`MAX_UNCOVERED_SEGMENTS`] up one by one. Returns whether
    /// it did, so the caller composes those indexes again. The background
    /// pass runs it after the change it indexes is searchable.
    pub(crate) fn refresh_directory(&self, indexes: &[Arc<Retriever>]) -> bool {
        let enhanced: Vec<&EnhancedIndex> = indexes
            .iter()
            .filter_map(|index| match &**index {
                Retriever::Enhanced(index, _) => Some(&**index),
                Retriever::Classic(_) => None,
            })
            .collect();
        if !enhanced.iter().any(|index| {
            index.segments().len() > MIN_DIRECTORY_SEGMENTS
                && index.uncovered_segments() > MAX_UNCOVERED_SEGMENTS
        }) {
            return false;
        }
        let directory = Directory::build(enhanced.iter().flat_map(|index| index.segments()));
        *self
            .directory
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(directory));
        true
    }

    /// Starts a background pass: what it uses is kept.
    pub(crate) fn begin_pass(&self) {
        self.pass.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends a pass: drops the segments that neither it nor the one before
    /// used (sources that changed or left, scopes no longer used).
    pub(crate) fn end_pass(&self) {
        let keep_from = self.pass.load(Ordering::Relaxed).saturating_sub(1);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|_, variants| {
            variants.retain(|c| c.used >= keep_from);
            !variants.is_empty()
        });
    }

    /// Number of cached segments.
    pub fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.values().map(Vec::len).sum()
    }

    /// Whether no segment is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
