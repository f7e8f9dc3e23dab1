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

use std::sync::Arc;

use super::{EnhancedSegment, HashMap, HashSet, MIN_EXTENSION_PREFIX};

/// A segment's server (segment-local) and how often it says a term.
type ServerCount = (u32, u16);

/// Where the dictionary keys of a set of segments occur, by segment key.
pub struct Directory {
    /// The keys of the segments it was built over.
    covered: HashSet<u64>,
    /// Term → (segment key, the term's id there), in build order.
    pub(super) terms: HashMap<Arc<str>, Vec<(u64, u32)>>,
    /// The ASCII terms of [`MIN_EXTENSION_PREFIX`] letters or more, sorted,
    /// for the terms a query term begins.
    pub(super) extension_terms: Vec<Arc<str>>,
    /// Exact tool name → (segment key, segment-local tool), each segment's
    /// tools in its own order.
    pub(super) exact_names: HashMap<Box<str>, Vec<(u64, u32)>>,
    /// Server-context term → (segment key, (segment-local server, count)).
    pub(super) server_terms: HashMap<Box<str>, Vec<(u64, ServerCount)>>,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("segments", &self.covered.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

impl Directory {
    /// The directory of `segments`.
    pub fn build<'a>(segments: impl IntoIterator<Item = &'a Arc<EnhancedSegment>>) -> Directory {
        let mut directory = Directory {
            covered: HashSet::default(),
            terms: HashMap::default(),
            extension_terms: Vec::new(),
            exact_names: HashMap::default(),
            server_terms: HashMap::default(),
        };
        for segment in segments {
            if !directory.covered.insert(segment.key) {
                continue;
            }
            for (id, term) in segment.term_names.iter().enumerate() {
                directory
                    .terms
                    .entry(term.clone())
                    .or_default()
                    .push((segment.key, id as u32));
            }
            for (name, tools) in &segment.exact_names {
                let entry = match directory.exact_names.get_mut(name.as_str()) {
                    Some(entry) => entry,
                    None => directory
                        .exact_names
                        .entry(name.as_str().into())
                        .or_default(),
                };
                entry.extend(tools.iter().map(|&tool| (segment.key, tool)));
            }
            for (term, servers) in &segment.servers.terms {
                let entry = match directory.server_terms.get_mut(term.as_ref()) {
                    Some(entry) => entry,
                    None => directory.server_terms.entry(term.clone()).or_default(),
                };
                entry.extend(
                    servers
                        .iter()
                        .map(|&(server, tf)| (segment.key, (server, tf))),
                );
            }
        }
        let mut extension_terms: Vec<Arc<str>> = directory
            .terms
            .keys()
            .filter(|term| term.len() >= MIN_EXTENSION_PREFIX && term.is_ascii())
            .cloned()
            .collect();
        extension_terms.sort_unstable();
        directory.extension_terms = extension_terms;
        directory
    }

    /// Whether it was built over the segment with `key`.
    pub fn covers(&self, key: u64) -> bool {
        self.covered.contains(&key)
    }

    /// The number of segments it was built over.
    pub fn segments(&self) -> usize {
        self.covered.len()
    }
}
