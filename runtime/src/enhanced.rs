//! Enhanced tool retrieval (search mode `enhanced`): BM25F over weighted
//! fields with identifier splitting, English stemming and stop words, typo
//! tolerance, an exact-name pre-pass and `server:` filters.
//!
//! - Fields and weights: the tool's own name ([`NAME_WEIGHT`]), its server
//!   or plugin name ([`SERVER_WEIGHT`]), its description (1.0), and its
//!   parameter names and descriptions ([`PARAMETER_WEIGHT`]).
//! - Tokens: `[A-Za-z0-9]` runs, split again at camelCase boundaries
//!   (`getUserToken` → get user token), lowercased, English stop words
//!   dropped, Snowball-stemmed (`screenshots` → `screenshot`).
//! - A query term the index does not know is read as two known terms run
//!   together (`websearch`), or else matched to known terms within one edit
//!   (two for long terms), at a discount.
//! - Two adjacent query terms that are adjacent in a tool's name add a
//!   bonus (`take a screenshot` → `take_screenshot`).
//! - A query that holds a tool's exact name (its own or exposed name, as a
//!   whole word) ranks that tool first, always.
//! - `server:NAME` in the query keeps only that server's (or plugin's) tools.

use std::collections::HashMap;
use std::sync::Arc;

use rust_stemmers::{Algorithm, Stemmer};

use crate::search::{Scored, idf, name_substring_matches, rank};
use crate::tool::Tool;

/// BM25 saturation.
pub const K1: f64 = 1.2;
/// Weight of the tool's own name.
pub const NAME_WEIGHT: f64 = 5.0;
/// Weight of the server or plugin name.
pub const SERVER_WEIGHT: f64 = 1.0;
/// Weight of parameter names and descriptions.
pub const PARAMETER_WEIGHT: f64 = 0.4;
/// Score added when two adjacent query terms are adjacent in a tool's name
/// (`take a screenshot` and `take_screenshot`).
pub const NAME_BIGRAM_BONUS: f64 = 1.0;
/// Score factor for a term matched through typo tolerance.
pub const TYPO_DISCOUNT: f64 = 0.6;

const FIELDS: usize = 4;
const WEIGHTS: [f64; FIELDS] = [NAME_WEIGHT, SERVER_WEIGHT, 1.0, PARAMETER_WEIGHT];
const LENGTH_NORMALISATION: [f64; FIELDS] = [0.5, 0.0, 0.5, 0.75];

const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as",
    "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by",
    "can", "could", "did", "do", "does", "doing", "down", "during", "each", "etc", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "me", "might",
    "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only",
    "or", "other", "our", "ours", "out", "over", "own", "please", "same", "shall", "she", "should",
    "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "very",
    "want", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your", "yours",
];

fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Splits `text` into lowercase identifier parts: `[A-Za-z0-9]` runs, cut
/// again at camelCase boundaries (`HTTPServer` → http server).
pub fn identifier_parts(text: &str, mut each: impl FnMut(&str)) {
    let mut part = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !part.is_empty() {
                each(&part);
                part.clear();
            }
            continue;
        }
        let previous = i.checked_sub(1).and_then(|j| chars.get(j)).copied();
        let next = chars.get(i + 1).copied();
        let boundary = c.is_ascii_uppercase()
            && previous.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
            });
        if boundary && !part.is_empty() {
            each(&part);
            part.clear();
        }
        part.push(c.to_ascii_lowercase());
    }
    if !part.is_empty() {
        each(&part);
    }
}

/// The analysed terms of `text`: identifier parts without stop words, stemmed.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl Analyzer {
    /// Calls `each` with every term of `text`.
    pub fn terms(&self, text: &str, mut each: impl FnMut(&str)) {
        identifier_parts(text, |part| {
            if !is_stop_word(part) {
                each(&self.stemmer.stem(part));
            }
        });
    }
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

/// The enhanced index over a catalog's deferred tools.
pub struct EnhancedIndex {
    analyzer: Analyzer,
    docs: Vec<Arc<Tool>>,
    terms: HashMap<Box<str>, u32>,
    vocabulary: Vec<Box<str>>,
    postings: Vec<Vec<Posting>>,
    idf: Vec<f64>,
    lengths: Vec<[u32; FIELDS]>,
    name_bigrams: HashMap<(u32, u32), Vec<u32>>,
    /// Every known term with one character deleted, to the terms it came
    /// from (for typo tolerance).
    deletions: HashMap<Box<str>, Vec<u32>>,
    average_lengths: [f64; FIELDS],
    exact_names: HashMap<String, Vec<u32>>,
}

impl std::fmt::Debug for EnhancedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnhancedIndex")
            .field("docs", &self.docs.len())
            .field("terms", &self.vocabulary.len())
            .finish()
    }
}

fn parameter_text(tool: &Tool) -> String {
    let mut text = String::new();
    if let Some(properties) = tool
        .input_schema()
        .get("properties")
        .and_then(|p| p.as_object())
    {
        for (name, schema) in properties {
            text.push_str(name);
            text.push(' ');
            if let Some(description) = schema.get("description").and_then(|d| d.as_str()) {
                text.push_str(description);
                text.push(' ');
            }
        }
    }
    text
}

impl EnhancedIndex {
    /// Indexes `tools`; their order is the tie-break order.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Arc<Tool>>) -> EnhancedIndex {
        let mut index = EnhancedIndex {
            analyzer: Analyzer::default(),
            docs: Vec::new(),
            terms: HashMap::new(),
            vocabulary: Vec::new(),
            postings: Vec::new(),
            idf: Vec::new(),
            lengths: Vec::new(),
            name_bigrams: HashMap::new(),
            deletions: HashMap::new(),
            average_lengths: [0.0; FIELDS],
            exact_names: HashMap::new(),
        };
        let mut doc_terms: Vec<(u32, usize)> = Vec::new();
        for tool in tools {
            let doc = index.docs.len() as u32;
            doc_terms.clear();
            let mut lengths = [0u32; FIELDS];
            let parameters = parameter_text(tool);
            let fields: [&str; FIELDS] = [
                tool.original_name(),
                tool.source().group().unwrap_or(""),
                tool.description(),
                &parameters,
            ];
            let mut name_terms: Vec<u32> = Vec::new();
            for (field, text) in fields.iter().enumerate() {
                let (terms, vocabulary, postings) =
                    (&mut index.terms, &mut index.vocabulary, &mut index.postings);
                index.analyzer.terms(text, |term| {
                    let id = match terms.get(term) {
                        Some(&id) => id,
                        None => {
                            let id = vocabulary.len() as u32;
                            terms.insert(term.into(), id);
                            vocabulary.push(term.into());
                            postings.push(Vec::new());
                            id
                        }
                    };
                    doc_terms.push((id, field));
                    if field == 0 {
                        name_terms.push(id);
                    }

                    if let Some(length) = lengths.get_mut(field) {
                        *length += 1;
                    }
                });
            }
            doc_terms.sort_unstable();
            for run in doc_terms.chunk_by(|a, b| a.0 == b.0) {
                let mut tf = [0u16; FIELDS];
                for &(_, field) in run {
                    if let Some(count) = tf.get_mut(field) {
                        *count = count.saturating_add(1);
                    }
                }
                if let Some(list) = run
                    .first()
                    .and_then(|&(id, _)| index.postings.get_mut(id as usize))
                {
                    list.push(Posting { doc, tf });
                }
            }
            for name in [tool.original_name(), tool.name()] {
                let entry = index.exact_names.entry(name.to_lowercase()).or_default();
                if !entry.contains(&doc) {
                    entry.push(doc);
                }
            }
            for pair in name_terms.windows(2) {
                if let [a, b] = pair {
                    let docs = index.name_bigrams.entry((*a, *b)).or_default();
                    if docs.last() != Some(&doc) {
                        docs.push(doc);
                    }
                }
            }
            index.lengths.push(lengths);
            index.docs.push(tool.clone());
        }
        for (id, term) in index.vocabulary.iter().enumerate() {
            if term.len() < 3 {
                continue;
            }
            for deletion in single_deletions(term) {
                let ids = index
                    .deletions
                    .entry(deletion.into_boxed_str())
                    .or_default();
                if ids.last() != Some(&(id as u32)) {
                    ids.push(id as u32);
                }
            }
        }
        let n = index.docs.len() as f64;
        if !index.docs.is_empty() {
            for field in 0..FIELDS {
                let total: f64 = index.lengths.iter().map(|l| l[field] as f64).sum();
                index.average_lengths[field] = (total / n).max(1.0);
            }
        }
        index.idf = index
            .postings
            .iter()
            .map(|list| idf(index.docs.len(), list.len()))
            .collect();
        index
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Known terms within one edit of `term` (two when it is long), for
    /// typo tolerance; only for terms of four or more characters. Looked up
    /// through the single-deletion index (symmetric delete), so the cost
    /// does not grow with the vocabulary.
    fn near_terms(&self, term: &str) -> Vec<u32> {
        let length = term.len();
        if length < 4 || !term.is_ascii() {
            return Vec::new();
        }
        let allowed = if length >= 8 { 2 } else { 1 };
        let mut variants = vec![term.to_owned()];
        for _ in 0..allowed {
            let mut next = Vec::new();
            for variant in &variants {
                next.extend(single_deletions(variant));
            }
            variants.extend(next);
        }
        variants.sort_unstable();
        variants.dedup();
        let mut candidates: Vec<u32> = Vec::new();
        for variant in &variants {
            if let Some(&id) = self.terms.get(variant.as_str()) {
                candidates.push(id);
            }
            if let Some(ids) = self.deletions.get(variant.as_str()) {
                candidates.extend(ids);
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        let mut near: Vec<(usize, u32)> = candidates
            .into_iter()
            .filter_map(|id| {
                let known = self.vocabulary.get(id as usize)?;
                let distance = strsim::damerau_levenshtein(known, term);
                (distance <= allowed).then_some((distance, id))
            })
            .collect();
        near.sort_unstable();
        near.into_iter().take(4).map(|(_, id)| id).collect()
    }

    /// A term the index does not know, read as two known terms run
    /// together (`websearch` → web search).
    fn split_compound(&self, term: &str) -> Vec<u32> {
        if term.len() < 6 || !term.is_ascii() {
            return Vec::new();
        }
        for cut in 3..=term.len() - 3 {
            let (left, right) = term.split_at(cut);
            if let (Some(&a), Some(&b)) = (self.terms.get(left), self.terms.get(right)) {
                return vec![a, b];
            }
        }
        Vec::new()
    }

    fn add_term(&self, id: u32, weight: f64, scores: &mut [f64], touched: &mut Vec<u32>) {
        let (Some(list), Some(&idf)) = (self.postings.get(id as usize), self.idf.get(id as usize))
        else {
            return;
        };
        for posting in list {
            let Some(lengths) = self.lengths.get(posting.doc as usize) else {
                continue;
            };
            let mut tf = 0.0;
            for field in 0..FIELDS {
                let count = posting.tf[field] as f64;
                if count > 0.0 {
                    let b = LENGTH_NORMALISATION[field];
                    let norm = 1.0 - b + b * lengths[field] as f64 / self.average_lengths[field];
                    tf += WEIGHTS[field] * count / norm;
                }
            }
            if let Some(score) = scores.get_mut(posting.doc as usize) {
                if *score == 0.0 {
                    touched.push(posting.doc);
                }
                *score += weight * idf * tf * (K1 + 1.0) / (tf + K1);
            }
        }
    }

    /// The best `limit` tools for `query`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        if limit == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let (servers, text) = split_server_filters(query);
        let allowed = |doc: u32| {
            servers.is_empty()
                || self.docs.get(doc as usize).is_some_and(|tool| {
                    let group = tool.source().group().unwrap_or("");
                    servers.iter().any(|s| s.eq_ignore_ascii_case(group))
                })
        };

        let mut query_terms: Vec<String> = Vec::new();
        let mut query_terms_in_order: Vec<String> = Vec::new();
        self.analyzer.terms(&text, |term| {
            query_terms_in_order.push(term.to_owned());
            if !query_terms.iter().any(|t| t == term) {
                query_terms.push(term.to_owned());
            }
        });
        let mut scores = vec![0.0; self.docs.len()];
        let mut touched = Vec::new();
        for term in &query_terms {
            match self.terms.get(term.as_str()) {
                Some(&id) => self.add_term(id, 1.0, &mut scores, &mut touched),
                None => {
                    let parts = self.split_compound(term);
                    if !parts.is_empty() {
                        for id in parts {
                            self.add_term(id, 1.0, &mut scores, &mut touched);
                        }
                    } else {
                        for id in self.near_terms(term) {
                            self.add_term(id, TYPO_DISCOUNT, &mut scores, &mut touched);
                        }
                    }
                }
            }
        }

        let ids: Vec<Option<u32>> = query_terms_in_order
            .iter()
            .map(|t| self.terms.get(t.as_str()).copied())
            .collect();
        for pair in ids.windows(2) {
            let [Some(a), Some(b)] = pair else { continue };
            for &doc in self.name_bigrams.get(&(*a, *b)).into_iter().flatten() {
                if let Some(score) = scores.get_mut(doc as usize) {
                    if *score == 0.0 {
                        touched.push(doc);
                    }
                    *score += NAME_BIGRAM_BONUS;
                }
            }
        }
        let exact = self.exact_matches(&text);
        let best = touched
            .iter()
            .filter_map(|&d| scores.get(d as usize).copied())
            .fold(0.0f64, f64::max);
        for (rank, &doc) in exact.iter().enumerate() {
            if let Some(score) = scores.get_mut(doc as usize) {
                if *score == 0.0 {
                    touched.push(doc);
                }
                // Above every BM25 score, in the order the names appear.
                *score = best + 1.0 + (exact.len() - rank) as f64;
            }
        }

        let ranked = rank(&self.docs, &scores, touched, limit, allowed);
        if ranked.is_empty() {
            return name_substring_matches(&self.docs, &text, limit, allowed);
        }
        ranked
    }

    /// Tools whose exact name (own or exposed, case-insensitive) is the
    /// whole query or a whole word of it, in order of appearance.
    fn exact_matches(&self, text: &str) -> Vec<u32> {
        let mut found = Vec::new();
        let whole = text.trim().to_lowercase();
        let words = std::iter::once(whole.clone()).chain(whole.split_whitespace().map(|w| {
            w.trim_matches(|c: char| "`'\".,;:!?()[]{}<>".contains(c))
                .to_owned()
        }));
        for word in words {
            if let Some(docs) = self.exact_names.get(&word) {
                for &doc in docs {
                    if !found.contains(&doc) {
                        found.push(doc);
                    }
                }
            }
        }
        found
    }
}

/// `term` with each one of its (ASCII) characters deleted in turn.
fn single_deletions(term: &str) -> Vec<String> {
    (0..term.len())
        .filter(|&i| term.is_char_boundary(i) && term.is_char_boundary(i + 1))
        .map(|i| format!("{}{}", &term[..i], &term[i + 1..]))
        .collect()
}

/// Takes `server:NAME` filters out of a query.
pub fn split_server_filters(query: &str) -> (Vec<String>, String) {
    let mut servers = Vec::new();
    let mut rest = Vec::new();
    for word in query.split_whitespace() {
        match word.strip_prefix("server:") {
            Some(name) if !name.is_empty() => servers.push(name.to_owned()),
            _ => rest.push(word),
        }
    }
    (servers, rest.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn tool(server: &str, name: &str, description: &str) -> Arc<Tool> {
        let spec = ToolSpec::new(
            name,
            description,
            json!({"type": "object", "properties": {"path": {"description": "File path"}}}),
        );
        Arc::new(Tool::new(
            crate::naming::mcp_tool_name(server, name),
            ToolSource::Mcp(server.into()),
            &spec,
        ))
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn identifiers_split_at_camel_case() {
        let mut parts = Vec::new();
        identifier_parts("getUserToken HTTPServer snake_case v2", |p| {
            parts.push(p.to_owned())
        });
        assert_eq!(
            parts,
            [
                "get", "user", "token", "http", "server", "snake", "case", "v2"
            ]
        );
    }

    #[test]
    fn stemming_matches_word_forms() {
        let index = EnhancedIndex::build(
            [tool("b", "take_screenshot", "Takes screenshots of pages")].iter(),
        );
        assert_eq!(index.search("screenshotting page", 5).len(), 1);
    }

    #[test]
    fn exact_name_ranks_first() {
        let tools = [
            tool("s", "list_files", "List files and files and files"),
            tool("s", "read", "Read a file"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        let hits = index.search("files please read", 5);
        assert_eq!(hits[0].tool.original_name(), "read");
        let hits = index.search("mcp_s_list_files", 5);
        assert_eq!(hits[0].tool.original_name(), "list_files");
    }

    #[test]
    fn typos_are_tolerated() {
        let index =
            EnhancedIndex::build([tool("s", "navigate", "Navigate the browser to a URL")].iter());
        assert_eq!(index.search("navgate browser", 5).len(), 1);
        assert_eq!(index.search("brwser", 5).len(), 1);
    }

    #[test]
    fn server_filter_restricts_results() {
        let tools = [
            tool("a", "search", "Search things"),
            tool("b", "search", "Search things"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        let hits = index.search("server:b search things", 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].tool.source().group(), Some("b"));
    }
}
