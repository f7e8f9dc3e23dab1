//! A catalog-wide directory over many segments' dictionaries, so a query
//! looks a term up once instead of once per segment.
//!
//! At 100,000 tools in 500 segments, looking every query term, synonym,
//! prefix, exact-name candidate and server-context term up in each
//! segment's own maps was most of a search. A [`Directory`] holds, for the
//! segments it was built over, where each of those keys occurs, by segment
//! key ([`EnhancedSegment::key`]); an [`EnhancedIndex`](super::EnhancedIndex)
//! keeps the hits of its own segments (by key) and looks the few segments
//! the directory does not cover up one by one.
//!
//! A directory is immutable and never has to be current: one built before
//! a source changed still serves the catalogs after it, its hits for the
//! replaced segment dropped (that key is no longer in the index) and the
//! new segment looked up directly. So a change costs no directory work;
//! the directory is rebuilt, off the request path, once enough segments
//! are uncovered (see `quiver_catalog::indexing`).

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::Arc;

use super::{
    EnhancedSegment, FIELDS, HashMap, HashSet, Lexicon, Lists, MIN_EXTENSION_PREFIX, TermHit,
};

/// A segment's server (segment-local) and how often it says a term.
type ServerCount = (u32, u16);

/// Keys to their hits, each a (segment slot, value), flat: one allocation
/// holds every key's hits, a key maps to its range.
pub(super) struct Table<K, T> {
    ranges: HashMap<K, (u32, u32)>,
    hits: Vec<(u32, T)>,
}

impl<K: Hash + Eq + Borrow<str> + Clone, T: Copy> Table<K, T> {
    /// From (key, segment slot, value) in segment order; each key's hits
    /// keep that order.
    fn build(entries: Vec<(K, u32, T)>) -> Table<K, T> {
        // Per key: where its run starts, its length, how much is filled.
        let mut runs: HashMap<K, (u32, u32, u32)> = HashMap::default();
        for (key, _, _) in &entries {
            match runs.get_mut(key.borrow()) {
                Some(run) => run.1 += 1,
                None => {
                    runs.insert(key.clone(), (0, 1, 0));
                }
            }
        }
        let mut next = 0u32;
        for run in runs.values_mut() {
            run.0 = next;
            next += run.1;
        }
        let mut hits: Vec<Option<(u32, T)>> = vec![None; next as usize];
        for (key, slot, value) in entries {
            if let Some(run) = runs.get_mut(key.borrow()) {
                if let Some(hit) = hits.get_mut((run.0 + run.2) as usize) {
                    *hit = Some((slot, value));
                }
                run.2 += 1;
            }
        }
        Table {
            ranges: runs
                .into_iter()
                .map(|(key, (start, len, _))| (key, (start, len)))
                .collect(),
            hits: hits.into_iter().flatten().collect(),
        }
    }

    /// The hits of `key`.
    pub(super) fn get(&self, key: &str) -> &[(u32, T)] {
        self.ranges.get(key).map_or(&[], |&run| self.run_hits(run))
    }

    /// Where the hits of `key` are: (start, length).
    pub(super) fn run(&self, key: &str) -> Option<(u32, u32)> {
        self.ranges.get(key).copied()
    }

    /// The hits of a run [`Self::run`] gave.
    pub(super) fn run_hits(&self, (start, len): (u32, u32)) -> &[(u32, T)] {
        self.hits
            .get(start as usize..(start + len) as usize)
            .unwrap_or(&[])
    }

    /// The value of a run [`Self::run`] gave in segment `slot`, if there:
    /// a run is in slot order.
    pub(super) fn run_hit(&self, run: (u32, u32), slot: u32) -> Option<T> {
        let hits = self.run_hits(run);
        let index = hits.binary_search_by_key(&slot, |&(slot, _)| slot).ok()?;
        hits.get(index).map(|&(_, value)| value)
    }

    /// The keys.
    pub(super) fn keys(&self) -> impl Iterator<Item = &K> {
        self.ranges.keys()
    }

    fn len(&self) -> usize {
        self.ranges.len()
    }
}

/// A term is common (see [`Directory::common_terms`]) in at least this
/// many segments: below it, reading its hits costs little.
pub(super) const COMMON_TERM_SEGMENTS: u32 = 32;

/// A common term's statistics over a directory's segments.
#[derive(Debug, Clone, Copy)]
pub(super) struct TermTotal {
    /// The number of tools it occurs in.
    pub(super) df: u64,
    /// Its largest count in each field.
    pub(super) most: [u8; FIELDS],
}

impl TermTotal {
    /// Counts one more segment's `hit` in.
    pub(super) fn add(&mut self, hit: &TermHit) {
        self.df += u64::from(hit.df);
        for (most, &count) in self.most.iter_mut().zip(&hit.most) {
            *most = (*most).max(count);
        }
    }
}

/// Where the dictionary keys of a set of segments occur, by segment slot
/// (an index into `keys`).
pub struct Directory {
    /// The keys of the segments it was built over, by slot.
    pub(super) keys: Vec<u64>,
    covered: HashSet<u64>,
    /// Term → (slot, the term there), in slot order: a search reads a
    /// common term's statistics in 500 segments from one run here
    /// instead of visiting each segment.
    pub(super) terms: Table<Arc<str>, TermHit>,
    /// Per common term (one in at least half the segments, and in
    /// [`COMMON_TERM_SEGMENTS`] or more), by the start of its run in
    /// `terms`: its document frequency and largest field counts over the
    /// whole run. A search reads these instead of the run, and looks the
    /// term up only in the few segments it scores.
    pub(super) common_terms: HashMap<u32, TermTotal>,
    /// The ASCII terms of [`MIN_EXTENSION_PREFIX`] letters or more, sorted,
    /// for the terms a query term begins.
    pub(super) extension_terms: Vec<Arc<str>>,
    /// Exact tool name → (slot, segment-local tool), each segment's tools
    /// in its own order.
    pub(super) exact_names: Table<Arc<str>, u32>,
    /// Server-context term → (slot, (segment-local server, count)).
    pub(super) server_terms: Table<Arc<str>, ServerCount>,
    /// Every segment's typo lexicon in one: each distinct (word, term)
    /// pair once, its payload an index into `typo_terms` and `typo_slots`.
    pub(super) typo_lexicon: Lexicon,
    /// Per lexicon word, its term.
    pub(super) typo_terms: Vec<Arc<str>>,
    /// Per lexicon word, the slots whose lexicon holds it, so a search
    /// skips words whose every segment has left the index.
    pub(super) typo_slots: Lists<u32>,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("segments", &self.keys.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl Directory {
    /// The directory of `segments`.
    pub fn build<'a>(segments: impl IntoIterator<Item = &'a Arc<EnhancedSegment>>) -> Directory {
        let mut keys = Vec::new();
        let mut covered: HashSet<u64> = HashSet::default();
        let mut terms = Vec::new();
        let mut exact_names = Vec::new();
        let mut server_terms = Vec::new();
        let mut typo_words: HashMap<(&'a str, &'a str), Vec<u32>> = HashMap::default();
        // One shared text per distinct term, however many segments hold it.
        let mut shared: HashMap<&'a str, Arc<str>> = HashMap::default();
        let mut share = |term: &'a str| -> Arc<str> {
            shared
                .entry(term)
                .or_insert_with(|| Arc::from(term))
                .clone()
        };
        for segment in segments {
            if !covered.insert(segment.key) {
                continue;
            }
            let slot = keys.len() as u32;
            keys.push(segment.key);
            for (id, term) in (0u32..).zip(segment.terms.names()) {
                terms.push((share(term), slot, segment.term_hit(id)));
            }
            for (local, tool) in (0u32..).zip(&segment.docs) {
                for name in super::exact_names(tool) {
                    exact_names.push((Arc::<str>::from(name), slot, local));
                }
            }
            for (term, servers) in &segment.servers.terms {
                let term: Arc<str> = term.as_ref().into();
                server_terms.extend(servers.iter().map(|&hit| (term.clone(), slot, hit)));
            }
            for index in 0..segment.lexicon.words.len() as u32 {
                if let Some((word, id)) = segment.lexicon.word(index)
                    && id < segment.terms.len() as u32
                {
                    let term = segment.terms.name(id);
                    typo_words.entry((word, term)).or_default().push(slot);
                }
            }
        }
        // Sorted, so the lexicon is the same whatever the map's order.
        let mut typo_words: Vec<_> = typo_words.into_iter().collect();
        typo_words.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut typo_lexicon = Lexicon::default();
        let mut typo_terms = Vec::with_capacity(typo_words.len());
        let mut slot_lists = Vec::with_capacity(typo_words.len());
        for ((word, term), slots) in typo_words {
            typo_lexicon.push(word, typo_terms.len() as u32);
            typo_terms.push(share(term));
            slot_lists.push(slots);
        }
        typo_lexicon.finish();
        let typo_slots = Lists::from_lists(&slot_lists);
        let terms = Table::build(terms);
        let common_terms = terms
            .ranges
            .values()
            .filter(|&&(_, len)| len >= COMMON_TERM_SEGMENTS && len as usize * 2 >= keys.len())
            .map(|&run| {
                let mut total = TermTotal {
                    df: 0,
                    most: [0; FIELDS],
                };
                for (_, hit) in terms.run_hits(run) {
                    total.add(hit);
                }
                (run.0, total)
            })
            .collect();
        let mut extension_terms: Vec<Arc<str>> = terms
            .keys()
            .filter(|term| term.len() >= MIN_EXTENSION_PREFIX && term.is_ascii())
            .cloned()
            .collect();
        extension_terms.sort_unstable();
        Directory {
            keys,
            covered,
            terms,
            common_terms,
            extension_terms,
            exact_names: Table::build(exact_names),
            server_terms: Table::build(server_terms),
            typo_lexicon,
            typo_terms,
            typo_slots,
        }
    }

    /// Whether it was built over the segment with `key`.
    pub fn covers(&self, key: u64) -> bool {
        self.covered.contains(&key)
    }

    /// The number of segments it was built over.
    pub fn segments(&self) -> usize {
        self.keys.len()
    }
}
