//! The enhanced index as it was before segments: one index built over
//! every tool at once. Kept for tests only, as the full rebuild the
//! segmented index must equal (same scores, same order).
#![allow(dead_code, unreachable_pub)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rust_stemmers::{Algorithm, Stemmer};

use crate::classic::{Scored, idf, name_substring_matches, scored, top};
use quiver_tool::tool::Tool;

/// BM25 saturation.
pub const K1: f64 = 1.5;
/// Weight of the tool's own name.
pub const NAME_WEIGHT: f64 = 3.0;
/// Weight of the server or plugin name.
pub const SERVER_WEIGHT: f64 = 1.0;
/// Weight of parameter names and descriptions.
pub const PARAMETER_WEIGHT: f64 = 0.4;
/// Score added when two adjacent query terms are adjacent in a tool's name
/// (`take a screenshot` and `take_screenshot`).
pub const NAME_BIGRAM_BONUS: f64 = 2.0;
/// Score factor for a term matched through typo tolerance.
pub const TYPO_DISCOUNT: f64 = 0.6;
/// Score factor for a term matched through [`SYNONYMS`].
pub const SYNONYM_WEIGHT: f64 = 1.0;
/// Extra weight of each repetition of a query term.
pub const REPEAT_WEIGHT: f64 = 0.5;
/// Factor of a server's context score added to each of its matching tools.
pub const SERVER_CONTEXT_WEIGHT: f64 = 0.3;
/// Score factor for an indexed term that a query term begins or that
/// begins it.
pub const EXTENSION_WEIGHT: f64 = 0.3;
/// Fewest letters of the shorter term for such a match.
pub const MIN_EXTENSION_PREFIX: usize = 5;
/// The relevance floor, as a share of the score one query term found in
/// a single tool gives at saturation (`(k1 + 1) · idf(N, 1)`): a match
/// must score at least this much, and match at least one query word
/// through a term found in no more than half the tools (see
/// [`EnhancedIndex::search`]).
pub const RELEVANCE_FLOOR: f64 = 0.08;
/// Fewest letters of a query word whose typo-tolerant match counts as
/// evidence for the relevance floor.
pub const MIN_TYPO_EVIDENCE: usize = 6;
/// The share of a result's score its prerequisite scores at least.
pub const PREREQUISITE_SHARE: f64 = 0.99;

/// Groups of words that name the same thing in tool descriptions and user
/// requests: common abbreviations and interchangeable verbs and nouns of
/// general tool vocabulary. None names a tool or a server, and none is
/// specific to one catalog or query set (docs/RETRIEVAL.md says how the
/// table was chosen).
pub const SYNONYMS: &[&[&str]] = &[
    &["web", "internet", "online"],
    &["search", "find", "lookup"],
    &["md", "markdown"],
    &["repo", "repository"],
    &["js", "javascript"],
    &["ts", "typescript"],
    &["py", "python"],
    &["doc", "docs", "documentation"],
    &["pic", "picture"],
    &["delete", "remove"],
    &["modify", "update", "edit"],
    &["dir", "directory", "folder"],
    &["config", "configuration", "settings"],
    &["db", "database"],
    &["msg", "message"],
    &["info", "information"],
    &["auth", "authentication"],
    &["env", "environment"],
    &["pr", "pull"],
    &["save", "write"],
];

const FIELDS: usize = 4;
const NAME: usize = 0;
const WEIGHTS: [f64; FIELDS] = [NAME_WEIGHT, SERVER_WEIGHT, 1.0, PARAMETER_WEIGHT];
const LENGTH_NORMALISATION: [f64; FIELDS] = [0.5, 0.0, 0.5, 0.75];

/// BM25 parameters of the per-server context score.
const SERVER_K1: f64 = 1.2;
const SERVER_B: f64 = 0.75;

/// Lookup verbs a prerequisite tool's name starts with (stemmed).
const LOOKUP_VERBS: &[&str] = &[
    "get", "list", "resolv", "find", "search", "lookup", "fetch", "load", "queri", "retriev",
    "read",
];
/// Words a prerequisite's name may have between its verb and the
/// identifier's words (`GetUserToken` for `token`: `user`).
const MAX_EXTRA_WORDS: usize = 1;
/// Last words (stemmed) of a parameter that holds an identifier.
const IDENTIFIER_WORDS: &[&str] = &["id", "token", "code", "key", "uuid", "slug", "handl"];

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

/// Han, kana and Hangul: written without spaces, indexed as character pairs.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF
        | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

/// Emits the overlapping character pairs of a CJK run (a lone character
/// alone) and empties the run.
fn flush_cjk(run: &mut Vec<char>, each: &mut impl FnMut(&str)) {
    let mut pair = String::new();
    if let [single] = run.as_slice() {
        pair.push(*single);
        each(&pair);
    }
    for window in run.windows(2) {
        pair.clear();
        pair.extend(window);
        each(&pair);
    }
    run.clear();
}

/// Splits `text` into lowercase identifier parts: alphanumeric runs, cut
/// again at camelCase boundaries (`HTTPServer` → http server). Runs of
/// Chinese, Japanese or Korean characters become overlapping pairs.
pub fn identifier_parts(text: &str, mut each: impl FnMut(&str)) {
    let mut part = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let mut chars = text.chars().peekable();
    let mut previous: Option<char> = None;
    while let Some(c) = chars.next() {
        let is_cjk = is_cjk(c);
        if !cjk.is_empty() && !is_cjk {
            flush_cjk(&mut cjk, &mut each);
        }
        if is_cjk || !c.is_alphanumeric() {
            if !part.is_empty() {
                each(&part);
                part.clear();
            }
            if is_cjk {
                cjk.push(c);
            }
            previous = Some(c);
            continue;
        }
        let next = chars.peek().copied();
        let boundary = c.is_uppercase()
            && previous.is_some_and(|p| {
                p.is_lowercase() || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !part.is_empty() {
            each(&part);
            part.clear();
        }
        part.extend(c.to_lowercase());
        previous = Some(c);
    }
    if !cjk.is_empty() {
        flush_cjk(&mut cjk, &mut each);
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
        self.words(text, |_, term| each(term));
    }

    /// Calls `each` with every word of `text` that is not a stop word, as
    /// written (lowercased) and as its term (stemmed).
    pub fn words(&self, text: &str, mut each: impl FnMut(&str, &str)) {
        identifier_parts(text, |part| {
            if !is_stop_word(part) {
                each(part, &self.stemmer.stem(part));
            }
        });
    }

    fn stem<'a>(&self, word: &'a str) -> std::borrow::Cow<'a, str> {
        self.stemmer.stem(word)
    }
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    /// Occurrences per field (saturating; BM25 saturates long before 255).
    tf: [u8; FIELDS],
}

/// A query word: as written, as its term, and that term's id if indexed.
struct QueryWord {
    word: String,
    term: String,
    id: Option<u32>,
}

/// Known words and stems for typo tolerance, found through the hashes of
/// their single-character deletions (symmetric delete), so the cost of a
/// lookup does not grow with the vocabulary.
#[derive(Default)]
struct Lexicon {
    /// Every word, back to back.
    text: String,
    /// Each word's end in `text` and its term id.
    words: Vec<(u32, u32)>,
    /// (hash of the word or of the word with one character deleted, word),
    /// sorted.
    deletions: Vec<(u32, u32)>,
    /// Where each run of `deletions` with the same top hash bits starts
    /// (one more entry than runs), so a lookup searches a few entries.
    buckets: Vec<u32>,
    /// Hash bits below the bucket bits (32 when there is one bucket).
    shift: u32,
}

impl Lexicon {
    fn push(&mut self, word: &str, term: u32) {
        self.text.push_str(word);
        self.words.push((self.text.len() as u32, term));
    }

    fn word(&self, index: u32) -> Option<(&str, u32)> {
        let &(end, term) = self.words.get(index as usize)?;
        let start = match index.checked_sub(1) {
            Some(previous) => self.words.get(previous as usize)?.0,
            None => 0,
        };
        Some((self.text.get(start as usize..end as usize)?, term))
    }

    fn finish(&mut self) {
        let mut hashes = Vec::new();
        for index in 0..self.words.len() as u32 {
            let Some((word, _)) = self.word(index) else {
                continue;
            };
            // Probes are ASCII (see `near_terms`).
            if word.len() < 3 || !word.is_ascii() {
                continue;
            }
            hashes.clear();
            deletion_hashes(word.as_bytes(), 1, &mut hashes);
            self.deletions
                .extend(hashes.iter().map(|&hash| (hash, index)));
        }
        self.deletions.sort_unstable();
        self.deletions.dedup();
        self.deletions.shrink_to_fit();
        // About 16 entries per bucket.
        let bits = (self.deletions.len() / 16).max(1).ilog2().min(20);
        self.shift = 32 - bits;
        self.buckets = (0..=1u32 << bits)
            .map(|bucket| {
                self.deletions
                    .partition_point(|&(hash, _)| u64::from(hash) >> self.shift < u64::from(bucket))
                    as u32
            })
            .collect();
        self.text.shrink_to_fit();
        self.words.shrink_to_fit();
    }

    /// Words that a probe or one of its deletions, given by its hash, may
    /// come from.
    fn candidates(&self, hash: u32, out: &mut Vec<u32>) {
        let bucket = (u64::from(hash) >> self.shift) as usize;
        let (Some(&from), Some(&to)) = (self.buckets.get(bucket), self.buckets.get(bucket + 1))
        else {
            return;
        };
        let run = self
            .deletions
            .get(from as usize..to as usize)
            .unwrap_or(&[]);
        let start = run.partition_point(|&(h, _)| h < hash);
        for &(h, word) in run.get(start..).unwrap_or(&[]) {
            if h != hash {
                break;
            }
            out.push(word);
        }
    }
}

/// 32-bit FNV-1a hashes of `word` and of `word` with one (or, when
/// `deletions` is 2, also two) of its bytes deleted, computed without
/// building the strings. The deletion index only needs a cheap, stable
/// hash: every candidate is checked by edit distance anyway. ASCII only.
fn deletion_hashes(word: &[u8], deletions: usize, out: &mut Vec<u32>) {
    let hash_without = |skip: [usize; 2]| {
        word.iter()
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .fold(0x811c_9dc5_u32, |hash, (_, &byte)| {
                (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
            })
    };
    let none = word.len();
    out.push(hash_without([none, none]));
    for i in 0..word.len() {
        out.push(hash_without([i, none]));
        if deletions >= 2 {
            out.extend((i + 1..word.len()).map(|j| hash_without([i, j])));
        }
    }
}

/// Per-server BM25 over what each server says it is for.
#[derive(Default)]
struct ServerContext {
    terms: HashMap<Box<str>, Vec<(u32, u16)>>,
    lengths: Vec<u32>,
    average_length: f64,
}

impl ServerContext {
    fn add(&mut self, analyzer: &Analyzer, text: &str) -> u32 {
        let server = self.lengths.len() as u32;
        let mut counts: HashMap<String, u16> = HashMap::new();
        let mut length = 0u32;
        analyzer.terms(text, |term| {
            length += 1;
            let count = counts.entry(term.to_owned()).or_default();
            *count = count.saturating_add(1);
        });
        for (term, tf) in counts {
            self.terms
                .entry(term.into_boxed_str())
                .or_default()
                .push((server, tf));
        }
        self.lengths.push(length);
        server
    }

    fn finish(&mut self) {
        let total: f64 = self.lengths.iter().map(|&l| f64::from(l)).sum();
        self.average_length = (total / self.lengths.len().max(1) as f64).max(1.0);
        self.terms.shrink_to_fit();
    }

    /// Each server's score for the query `terms`.
    fn scores(&self, terms: &[&str]) -> Vec<f64> {
        let mut scores = vec![0.0; self.lengths.len()];
        for term in terms {
            let Some(list) = self.terms.get(*term) else {
                continue;
            };
            let idf = idf(self.lengths.len(), list.len());
            for &(server, tf) in list {
                let tf = f64::from(tf);
                let length = self.lengths.get(server as usize).copied().unwrap_or(0);
                let norm = SERVER_K1
                    * (1.0 - SERVER_B + SERVER_B * f64::from(length) / self.average_length);
                if let Some(score) = scores.get_mut(server as usize) {
                    *score += idf * tf * (SERVER_K1 + 1.0) / (tf + norm);
                }
            }
        }
        scores
    }
}

/// The enhanced index over a catalog's deferred tools.
pub struct EnhancedIndex {
    analyzer: Analyzer,
    docs: Vec<Arc<Tool>>,
    /// Each tool's server, an index into the server context.
    doc_servers: Vec<u32>,
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    idf: Vec<f64>,
    /// Field lengths while building; emptied once `factors` are known.
    lengths: Vec<[u16; FIELDS]>,
    /// Per tool and field: the field weight over its BM25 length
    /// normalisation, so scoring a posting needs no division.
    factors: Vec<[f64; FIELDS]>,
    name_bigrams: HashMap<(u32, u32), Vec<u32>>,
    lexicon: Lexicon,
    exact_names: HashMap<String, Vec<u32>>,
    servers: ServerContext,
    /// A query term of a synonym group, to the indexed terms of the others.
    synonyms: HashMap<Box<str>, Vec<u32>>,
    /// A tool, to the tools of its server that look up an identifier it
    /// requires.
    prerequisites: HashMap<u32, Vec<u32>>,
    /// A tool that makes the same call as a tool its server lists earlier
    /// (see [`Tool::operation`]), to the first tool making it.
    same_operation: HashMap<u32, u32>,
    /// Per term, where its run of [`Self::extensions`] starts (one more
    /// entry than terms).
    extension_starts: Vec<u32>,
    /// The indexed terms each term begins or is begun by, run after run.
    extensions: Vec<u32>,
}

impl std::fmt::Debug for EnhancedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnhancedIndex")
            .field("docs", &self.docs.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

fn parameter_text(tool: &Tool) -> String {
    let mut text = String::new();
    let schema = tool.input_schema().parsed();
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
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
    /// Indexes `tools` with no server descriptions; their order is the
    /// tie-break order.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Arc<Tool>>) -> EnhancedIndex {
        let tools: Vec<Arc<Tool>> = tools.into_iter().cloned().collect();
        Self::build_described([(None, tools.as_slice())])
    }

    /// Indexes groups of tools, each with the description of its server or
    /// plugin (if any); the order is the tie-break order.
    pub fn build_described<'a>(
        groups: impl IntoIterator<Item = (Option<&'a str>, &'a [Arc<Tool>])>,
    ) -> EnhancedIndex {
        let mut index = EnhancedIndex {
            analyzer: Analyzer::default(),
            docs: Vec::new(),
            doc_servers: Vec::new(),
            terms: HashMap::new(),
            postings: Vec::new(),
            idf: Vec::new(),
            lengths: Vec::new(),
            factors: Vec::new(),
            name_bigrams: HashMap::new(),
            lexicon: Lexicon::default(),
            exact_names: HashMap::new(),
            servers: ServerContext::default(),
            synonyms: HashMap::new(),
            prerequisites: HashMap::new(),
            same_operation: HashMap::new(),
            extension_starts: Vec::new(),
            extensions: Vec::new(),
        };
        // (server, call) → (position in its server's list, tool).
        let mut operations: HashMap<(u32, &str), Vec<(u32, u32)>> = HashMap::new();
        let mut surfaces: HashSet<String> = HashSet::new();
        let mut server_ids: HashMap<String, u32> = HashMap::new();
        let mut name_terms: Vec<Vec<u32>> = Vec::new();
        let mut doc_terms: Vec<(u32, usize)> = Vec::new();
        for (description, tools) in groups {
            for tool in tools {
                let doc = index.docs.len() as u32;
                index.add_tool(
                    tool,
                    description,
                    &mut server_ids,
                    &mut surfaces,
                    &mut name_terms,
                    &mut doc_terms,
                );
                if let (Some(operation), Some(&server)) =
                    (tool.operation(), index.doc_servers.last())
                {
                    operations
                        .entry((server, operation))
                        .or_default()
                        .push((tool.position(), doc));
                }
            }
        }
        for mut docs in operations.into_values().filter(|docs| docs.len() > 1) {
            docs.sort_unstable();
            if let Some((&(_, first), rest)) = docs.split_first() {
                for &(_, doc) in rest {
                    index.same_operation.insert(doc, first);
                }
            }
        }
        // Stems that are not words of their own join the lexicon, so a typo
        // of an inflected word (`historical`) still reaches its stem.
        let mut stems: Vec<(&str, u32)> = index
            .terms
            .iter()
            .filter(|(term, _)| !surfaces.contains(term.as_ref()))
            .map(|(term, &id)| (term.as_ref(), id))
            .collect();
        stems.sort_unstable_by_key(|&(_, id)| id);
        let mut lexicon = std::mem::take(&mut index.lexicon);
        for (stem, id) in stems {
            lexicon.push(stem, id);
        }
        lexicon.finish();
        index.lexicon = lexicon;

        let n = index.docs.len() as f64;
        let mut average_lengths = [1.0; FIELDS];
        for (field, average) in average_lengths.iter_mut().enumerate() {
            let total: f64 = index.lengths.iter().map(|l| f64::from(l[field])).sum();
            *average = (total / n.max(1.0)).max(1.0);
        }
        index.factors = std::mem::take(&mut index.lengths)
            .iter()
            .map(|lengths| {
                let mut factors = [0.0; FIELDS];
                for (field, factor) in factors.iter_mut().enumerate() {
                    let b = LENGTH_NORMALISATION[field];
                    let norm = 1.0 - b + b * f64::from(lengths[field]) / average_lengths[field];
                    *factor = WEIGHTS[field] / norm;
                }
                factors
            })
            .collect();
        index.idf = index
            .postings
            .iter()
            .map(|list| idf(index.docs.len(), list.len()))
            .collect();
        index.servers.finish();
        index.build_synonyms();
        index.build_extensions();
        index.build_prerequisites(&name_terms);
        index.postings.iter_mut().for_each(Vec::shrink_to_fit);
        index
    }

    fn add_tool(
        &mut self,
        tool: &Arc<Tool>,
        description: Option<&str>,
        server_ids: &mut HashMap<String, u32>,
        surfaces: &mut HashSet<String>,
        name_terms: &mut Vec<Vec<u32>>,
        doc_terms: &mut Vec<(u32, usize)>,
    ) {
        let doc = self.docs.len() as u32;
        let group = tool.source().group().unwrap_or("");
        let server = match server_ids.get(group) {
            Some(&id) => id,
            None => {
                let text = format!("{group} {}", description.unwrap_or(""));
                let id = self.servers.add(&self.analyzer, &text);
                server_ids.insert(group.to_owned(), id);
                id
            }
        };
        self.doc_servers.push(server);
        doc_terms.clear();
        let mut lengths = [0u16; FIELDS];
        let parameters = parameter_text(tool);
        let fields: [&str; FIELDS] = [tool.original_name(), group, tool.description(), &parameters];
        let mut names: Vec<u32> = Vec::new();
        for (field, text) in fields.iter().enumerate() {
            let (terms, postings, lexicon) =
                (&mut self.terms, &mut self.postings, &mut self.lexicon);
            self.analyzer.words(text, |word, term| {
                let id = match terms.get(term) {
                    Some(&id) => id,
                    None => {
                        let id = postings.len() as u32;
                        terms.insert(term.into(), id);
                        postings.push(Vec::new());
                        id
                    }
                };
                if !surfaces.contains(word) {
                    surfaces.insert(word.to_owned());
                    lexicon.push(word, id);
                }
                doc_terms.push((id, field));
                if field == NAME {
                    names.push(id);
                }
                if let Some(length) = lengths.get_mut(field) {
                    *length = length.saturating_add(1);
                }
            });
        }
        doc_terms.sort_unstable();
        for run in doc_terms.chunk_by(|a, b| a.0 == b.0) {
            let mut tf = [0u8; FIELDS];
            for &(_, field) in run {
                if let Some(count) = tf.get_mut(field) {
                    *count = count.saturating_add(1);
                }
            }
            if let Some(list) = run
                .first()
                .and_then(|&(id, _)| self.postings.get_mut(id as usize))
            {
                list.push(Posting { doc, tf });
            }
        }
        for name in [tool.original_name(), tool.name()] {
            let entry = self.exact_names.entry(name.to_lowercase()).or_default();
            if !entry.contains(&doc) {
                entry.push(doc);
            }
        }
        for pair in names.windows(2) {
            if let [a, b] = pair {
                let docs = self.name_bigrams.entry((*a, *b)).or_default();
                if docs.last() != Some(&doc) {
                    docs.push(doc);
                }
            }
        }
        name_terms.push(names);
        self.lengths.push(lengths);
        self.docs.push(tool.clone());
    }

    fn build_synonyms(&mut self) {
        for group in SYNONYMS {
            let stems: Vec<String> = group
                .iter()
                .map(|w| self.analyzer.stem(w).into_owned())
                .collect();
            for stem in &stems {
                let others: Vec<u32> = stems
                    .iter()
                    .filter(|other| *other != stem)
                    .filter_map(|other| self.terms.get(other.as_str()).copied())
                    .collect();
                if !others.is_empty() {
                    self.synonyms
                        .entry(stem.as_str().into())
                        .or_default()
                        .extend(others);
                }
            }
        }
    }

    /// Links each term of [`MIN_EXTENSION_PREFIX`] letters or more to the
    /// indexed terms it begins and that begin it.
    fn build_extensions(&mut self) {
        let mut sorted: Vec<(&str, u32)> = self
            .terms
            .iter()
            .filter(|(term, _)| term.len() >= MIN_EXTENSION_PREFIX && term.is_ascii())
            .map(|(term, &id)| (term.as_ref(), id))
            .collect();
        sorted.sort_unstable();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (at, &(term, id)) in sorted.iter().enumerate() {
            // The terms that begin with `term` follow it in sorted order.
            for &(longer, other) in sorted.get(at + 1..).unwrap_or(&[]) {
                if !longer.starts_with(term) {
                    break;
                }
                pairs.push((id, other));
                pairs.push((other, id));
            }
        }
        pairs.sort_unstable();
        let mut starts = Vec::with_capacity(self.postings.len() + 1);
        let mut next = 0;
        for id in 0..self.postings.len() as u32 {
            starts.push(next as u32);
            next += pairs.get(next..).map_or(0, |rest| {
                rest.iter().take_while(|&&(from, _)| from == id).count()
            });
        }
        starts.push(next as u32);
        self.extension_starts = starts;
        self.extensions = pairs.into_iter().map(|(_, to)| to).collect();
    }

    /// The indexed terms that `word` begins or that begin it: through the
    /// links of its term when indexed, else its own beginnings.
    fn extensions_of(&self, word: &QueryWord, out: &mut Vec<u32>) {
        match word.id {
            Some(id) => {
                let range = self
                    .extension_starts
                    .get(id as usize)
                    .zip(self.extension_starts.get(id as usize + 1));
                if let Some((&from, &to)) = range {
                    out.extend_from_slice(
                        self.extensions
                            .get(from as usize..to as usize)
                            .unwrap_or(&[]),
                    );
                }
            }
            None if word.term.is_ascii() => {
                for end in (MIN_EXTENSION_PREFIX..word.term.len()).rev() {
                    if let Some(&id) = word.term.get(..end).and_then(|p| self.terms.get(p)) {
                        out.push(id);
                    }
                }
            }
            None => {}
        }
    }

    /// For each tool that requires an identifier parameter (last word in
    /// [`IDENTIFIER_WORDS`]), the tools of its server whose name is a
    /// lookup verb, at most [`MAX_EXTRA_WORDS`] other words, and that
    /// parameter's last one or two words (`GetUserToken` for `token`,
    /// `resolve-library-id` for `libraryId`), with the fewest other words,
    /// that do not require it themselves.
    fn build_prerequisites(&mut self, name_terms: &[Vec<u32>]) {
        self.prerequisites = HashMap::new();
        let verbs: Vec<u32> = LOOKUP_VERBS
            .iter()
            .filter_map(|v| self.terms.get(*v).copied())
            .collect();
        // (server, term) → lookup tools with that term in their name.
        let mut lookups: HashMap<(u32, u32), Vec<u32>> = HashMap::new();
        for (doc, names) in name_terms.iter().enumerate() {
            if !names.first().is_some_and(|v| verbs.contains(v)) {
                continue;
            }
            let server = self.doc_servers.get(doc).copied().unwrap_or(0);
            for &term in names.iter().skip(1) {
                let docs = lookups.entry((server, term)).or_default();
                if docs.last() != Some(&(doc as u32)) {
                    docs.push(doc as u32);
                }
            }
        }
        if lookups.is_empty() {
            return;
        }
        // A parameter name's term ids, and whether it ends in an
        // identifier word.
        let parse = |parameter: &str| {
            let mut parts: Vec<u32> = Vec::new();
            let mut identifier = false;
            self.analyzer.terms(parameter, |term| {
                identifier = IDENTIFIER_WORDS.contains(&term);
                parts.push(self.terms.get(term).copied().unwrap_or(u32::MAX));
            });
            (parts, identifier)
        };
        // A bare `id` says nothing about what it identifies.
        let bare_id = self.terms.get("id").copied();
        let identifier = |parameter: &str| match parse(parameter) {
            (parts, true) if parts.len() > 1 || parts.first().copied() != bare_id => Some(parts),
            _ => None,
        };
        let mut prerequisites = std::mem::take(&mut self.prerequisites);
        for (doc, tool) in self.docs.iter().enumerate() {
            let server = self.doc_servers.get(doc).copied().unwrap_or(0);
            let mut found: Vec<(usize, u32)> = Vec::new();
            for parts in tool.required_parameters().filter_map(identifier) {
                let tail = &parts[parts.len().saturating_sub(2)..];
                let Some(candidates) = tail.last().and_then(|t| lookups.get(&(server, *t))) else {
                    continue;
                };
                for &other in candidates {
                    let Some(names) = name_terms.get(other as usize) else {
                        continue;
                    };
                    // A lookup that itself requires an identifier of the
                    // same kind (`getCommentsByIds`) takes it, not gives it.
                    if other as usize == doc
                        || !names.ends_with(tail)
                        || self.docs.get(other as usize).is_some_and(|o| {
                            o.required_parameters()
                                .map(parse)
                                .any(|(p, id)| id && p.last() == tail.last())
                        })
                    {
                        continue;
                    }
                    let extra_words = names.len().saturating_sub(tail.len() + 1);
                    if extra_words <= MAX_EXTRA_WORDS && !found.iter().any(|&(_, f)| f == other) {
                        found.push((extra_words, other));
                    }
                }
            }
            found.sort_unstable();
            let fewest = found.first().map(|&(extra, _)| extra);
            let best: Vec<u32> = found
                .iter()
                .filter(|&&(extra, _)| Some(extra) == fewest)
                .map(|&(_, other)| other)
                .collect();
            // Several equally good candidates: no clear prerequisite.
            if best.len() == 1 {
                prerequisites.insert(doc as u32, best);
            }
        }
        self.prerequisites = prerequisites;
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Known terms whose word or stem is within one edit of `word` or of
    /// its stem `term` (two edits for 8 characters or more); for typo
    /// tolerance, only for 4 characters or more. At most four, nearest
    /// first.
    fn near_terms(&self, word: &str, term: &str) -> Vec<u32> {
        let mut near: Vec<(usize, u32)> = Vec::new();
        let probes: &[&str] = if word == term { &[word] } else { &[word, term] };
        for &probe in probes {
            let length = probe.chars().count();
            if length < 4 || !probe.is_ascii() {
                continue;
            }
            let allowed = if length >= 8 { 2 } else { 1 };
            let mut variants = Vec::new();
            deletion_hashes(probe.as_bytes(), allowed, &mut variants);
            variants.sort_unstable();
            variants.dedup();
            let mut candidates: Vec<u32> = Vec::new();
            for &variant in &variants {
                self.lexicon.candidates(variant, &mut candidates);
            }
            candidates.sort_unstable();
            candidates.dedup();
            near.extend(candidates.into_iter().filter_map(|index| {
                let (known, term) = self.lexicon.word(index)?;
                let distance = strsim::damerau_levenshtein(known, probe);
                (distance <= allowed).then_some((distance, term))
            }));
        }
        near.sort_unstable();
        let mut terms: Vec<u32> = Vec::new();
        for (_, term) in near {
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
        terms.truncate(4);
        terms
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
            let Some(factors) = self.factors.get(posting.doc as usize) else {
                continue;
            };
            let mut tf = 0.0;
            for (&count, factor) in posting.tf.iter().zip(factors) {
                tf += f64::from(count) * factor;
            }
            if let Some(score) = scores.get_mut(posting.doc as usize) {
                if *score == 0.0 {
                    touched.push(posting.doc);
                }
                *score += weight * idf * tf * (K1 + 1.0) / (tf + K1);
            }
        }
    }

    fn query_words(&self, text: &str) -> Vec<QueryWord> {
        let mut words = Vec::new();
        self.analyzer.words(text, |word, term| {
            words.push(QueryWord {
                word: word.to_owned(),
                term: term.to_owned(),
                id: self.terms.get(term).copied(),
            });
        });
        words
    }

    /// Scores every tool for `words` into `scores`, listing each tool that
    /// scores in `touched`.
    fn score(&self, words: &[QueryWord], scores: &mut [f64], touched: &mut Vec<u32>) {
        let mut unique: Vec<(&QueryWord, usize)> = Vec::new();
        for word in words {
            match unique.iter_mut().find(|(w, _)| w.term == word.term) {
                Some((_, count)) => *count += 1,
                None => unique.push((word, 1)),
            }
        }
        let mut matched: Vec<u32> = Vec::new();
        for &(word, count) in &unique {
            let weight = 1.0 + REPEAT_WEIGHT * (count - 1) as f64;
            if let Some(id) = word.id {
                matched.push(id);
                self.add_term(id, weight, scores, touched);
                continue;
            }
            let parts = self.split_compound(&word.term);
            if !parts.is_empty() {
                for id in parts {
                    self.add_term(id, 1.0, scores, touched);
                }
            } else {
                for id in self.near_terms(&word.word, &word.term) {
                    self.add_term(id, TYPO_DISCOUNT, scores, touched);
                }
            }
        }
        let mut synonyms: Vec<u32> = Vec::new();
        for (word, _) in &unique {
            for &id in self.synonyms.get(word.term.as_str()).into_iter().flatten() {
                if !matched.contains(&id) && !synonyms.contains(&id) {
                    synonyms.push(id);
                }
            }
        }
        for id in synonyms {
            self.add_term(id, SYNONYM_WEIGHT, scores, touched);
        }
        let mut extensions: Vec<u32> = Vec::new();
        for (word, _) in &unique {
            self.extensions_of(word, &mut extensions);
        }
        let mut added: Vec<u32> = Vec::new();
        for id in extensions {
            if !matched.contains(&id) && !added.contains(&id) {
                added.push(id);
                self.add_term(id, EXTENSION_WEIGHT, scores, touched);
            }
        }

        for pair in words.windows(2) {
            let [QueryWord { id: Some(a), .. }, QueryWord { id: Some(b), .. }] = pair else {
                continue;
            };
            for &doc in self.name_bigrams.get(&(*a, *b)).into_iter().flatten() {
                if let Some(score) = scores.get_mut(doc as usize) {
                    if *score == 0.0 {
                        touched.push(doc);
                    }
                    *score += NAME_BIGRAM_BONUS;
                }
            }
        }

        let terms: Vec<&str> = unique.iter().map(|(w, _)| w.term.as_str()).collect();
        let context = self.servers.scores(&terms);
        if context.iter().any(|&s| s > 0.0) {
            for &doc in touched.iter() {
                let server = self.doc_servers.get(doc as usize).copied().unwrap_or(0);
                let bonus = context.get(server as usize).copied().unwrap_or(0.0);
                if let Some(score) = scores.get_mut(doc as usize) {
                    *score += SERVER_CONTEXT_WEIGHT * bonus;
                }
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
                    // `server:time` takes a plugin and a server of that
                    // name; `server:mcp-time` only the server.
                    let toolset = tool.source().toolset();
                    servers
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(group) || s.eq_ignore_ascii_case(&toolset))
                })
        };

        let mut scores = vec![0.0; self.docs.len()];
        let mut touched = Vec::new();
        let words = self.query_words(&text);
        self.score(&words, &mut scores, &mut touched);
        let mut evidence = self.evidence(&words);
        // A folded copy's evidence counts for the tool it folds into.
        for (&copy, &first) in &self.same_operation {
            let words = evidence.get(copy as usize).copied().unwrap_or(0);
            if let Some(kept) = evidence.get_mut(first as usize) {
                *kept = (*kept).max(words);
            }
        }
        self.fold_same_operations(&mut scores, &mut touched);
        let exact = self.exact_matches(&text);
        let best = if exact.is_empty() {
            0.0
        } else {
            touched
                .iter()
                .filter_map(|&d| scores.get(d as usize).copied())
                .fold(0.0f64, f64::max)
        };
        for (rank, &doc) in exact.iter().enumerate() {
            if let Some(score) = scores.get_mut(doc as usize) {
                if *score == 0.0 {
                    touched.push(doc);
                }
                // Above every BM25 score, in the order the names appear.
                *score = best + 1.0 + (exact.len() - rank) as f64;
            }
        }

        // The relevance floor: weak evidence is no match, so an off-topic
        // query finds nothing rather than whatever shares a word with it.
        let floor = RELEVANCE_FLOOR * (K1 + 1.0) * idf(self.docs.len(), 1);
        let clears = |doc: u32| {
            let d = doc as usize;
            allowed(doc)
                && (exact.contains(&doc)
                    || (evidence.get(d).is_some_and(|&words| words >= 1)
                        && scores.get(d).is_some_and(|&score| score >= floor)))
        };
        // Prerequisites are a score: at least a share of the result's.
        let results: Vec<u32> = touched
            .iter()
            .copied()
            .filter(|&d| scores.get(d as usize).is_some_and(|&s| s > 0.0) && clears(d))
            .collect();
        let mut lent: Vec<u32> = Vec::new();
        for &doc in &results {
            let share = PREREQUISITE_SHARE * scores.get(doc as usize).copied().unwrap_or(0.0);
            for &needed in self.prerequisites.get(&doc).into_iter().flatten() {
                if !allowed(needed) {
                    continue;
                }
                if let Some(score) = scores.get_mut(needed as usize)
                    && *score < share
                {
                    *score = share;
                    lent.push(needed);
                }
            }
        }
        let mut candidates = results;
        candidates.extend(lent);
        candidates.sort_unstable();
        candidates.dedup();
        let ranked = top(&scores, candidates, limit, |_| true);
        if ranked.is_empty() {
            return name_substring_matches(&self.docs, &text, limit, allowed);
        }
        ranked
            .into_iter()
            .filter_map(|doc| scored(&self.docs, &scores, doc))
            .collect()
    }

    /// Per tool, how many distinct query `words` match it through a term
    /// that is not boilerplate (a term found in more than half the tools,
    /// such as the server's name in a one-server catalog). Words match as
    /// they score: the term itself, a compound's parts for an unknown one,
    /// synonyms and extensions; near terms (typo tolerance) only for a word
    /// of [`MIN_TYPO_EVIDENCE`] letters or more, since a short word is
    /// within one edit of many unrelated ones.
    fn evidence(&self, words: &[QueryWord]) -> Vec<u8> {
        let n = self.docs.len();
        // Boilerplate: a term found in more than half the tools (of three
        // or more).
        let is_boilerplate = |df: usize| n >= 3 && df * 2 > n;
        let mut count = vec![0u8; n];
        let mut seen: Vec<&str> = Vec::new();
        // Per tool, 1 when this word matched it through a term that is not
        // boilerplate, a tiny value when only through boilerplate.
        let mut of_word = vec![0.0f64; n];
        let mut touched: Vec<u32> = Vec::new();
        for word in words {
            if seen.contains(&word.term.as_str()) {
                continue;
            }
            seen.push(&word.term);
            let mut terms: Vec<u32> = Vec::new();
            match word.id {
                Some(id) => terms.push(id),
                None => {
                    let parts = self.split_compound(&word.term);
                    if parts.is_empty() && word.word.chars().count() >= MIN_TYPO_EVIDENCE {
                        terms.extend(self.near_terms(&word.word, &word.term));
                    } else {
                        terms.extend(parts);
                    }
                }
            }
            terms.extend(self.synonyms.get(word.term.as_str()).into_iter().flatten());
            self.extensions_of(word, &mut terms);
            for term in terms {
                let postings = self.postings.get(term as usize).map_or(0, Vec::len);
                let weight = if is_boilerplate(postings) {
                    f64::MIN_POSITIVE
                } else {
                    1.0
                };
                for posting in self.postings.get(term as usize).into_iter().flatten() {
                    if let Some(slot) = of_word.get_mut(posting.doc as usize) {
                        if *slot == 0.0 {
                            touched.push(posting.doc);
                        }
                        *slot = slot.max(weight);
                    }
                }
            }
            for doc in touched.drain(..) {
                let strength = of_word.get_mut(doc as usize).map_or(0.0, std::mem::take);
                if strength >= 1.0
                    && let Some(words) = count.get_mut(doc as usize)
                {
                    *words = words.saturating_add(1);
                }
            }
        }
        count
    }

    /// Tools that make the same call as a tool their server lists earlier
    /// give their score to it (the best of them counts) and drop out, so an
    /// operation listed several times is one result, under its first name.
    fn fold_same_operations(&self, scores: &mut [f64], touched: &mut Vec<u32>) {
        if self.same_operation.is_empty() {
            return;
        }
        let mut added = Vec::new();
        touched.retain(|&doc| {
            let Some(&first) = self.same_operation.get(&doc) else {
                return true;
            };
            let score = scores.get_mut(doc as usize).map_or(0.0, std::mem::take);
            if let Some(best) = scores.get_mut(first as usize) {
                if *best == 0.0 && score > 0.0 {
                    added.push(first);
                }
                *best = best.max(score);
            }
            false
        });
        touched.extend(added);
    }

    /// Tools whose exact name (own or exposed, case-insensitive) is the
    /// whole query or a whole word of it, in order of appearance.
    fn exact_matches(&self, text: &str) -> Vec<u32> {
        let mut found = Vec::new();
        let whole = text.trim().to_lowercase();
        let words = std::iter::once(whole.as_str()).chain(
            whole
                .split_whitespace()
                .map(|w| w.trim_matches(|c: char| "`'\".,;:!?()[]{}<>".contains(c))),
        );
        for word in words {
            if let Some(docs) = self.exact_names.get(word) {
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
