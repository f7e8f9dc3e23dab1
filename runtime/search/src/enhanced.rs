//! Enhanced tool retrieval (search mode `enhanced`): BM25F over weighted
//! fields with identifier splitting, English stemming and stop words, a
//! small table of tool-vocabulary synonyms, typo tolerance, server context,
//! an exact-name pre-pass, prerequisite tools and `server:` filters.
//!
//! - Fields and weights: the tool's own name ([`NAME_WEIGHT`]), its server
//!   or plugin name ([`SERVER_WEIGHT`]), its description (1.0), and its
//!   parameter names and descriptions ([`PARAMETER_WEIGHT`]). A query term
//!   said twice counts [`REPEAT_WEIGHT`] more.
//! - Tokens: alphanumeric runs, split again at camelCase boundaries
//!   (`getUserToken` → get user token), lowercased, English stop words
//!   dropped, Snowball-stemmed (`screenshots` → `screenshot`). Chinese,
//!   Japanese and Korean text becomes overlapping character pairs.
//! - Synonyms: a query term of [`SYNONYMS`] (`find`, `md`, `repo`) also
//!   matches the other words of its group, at [`SYNONYM_WEIGHT`].
//! - A query term also matches, at [`EXTENSION_WEIGHT`], the indexed terms
//!   it begins or that begin it (five letters or more), which joins word
//!   forms the stemmer keeps apart (`summar`, `summari`; `search`,
//!   `searcher`).
//! - A query term the index does not know is read as two known terms run
//!   together (`websearch`), or else matched to known words or stems within
//!   one edit (two for long terms), at [`TYPO_DISCOUNT`].
//! - Two adjacent query terms that are adjacent in a tool's name add
//!   [`NAME_BIGRAM_BONUS`] (`take a screenshot` → `take_screenshot`).
//! - Server context: what a server says it is for (its description, see
//!   [`quiver_tool::registry::ToolRegistry::set_descriptions`]) is scored per
//!   server and added, times [`SERVER_CONTEXT_WEIGHT`], to its matching
//!   tools.
//! - A query that holds a tool's exact name (its own or exposed name, as a
//!   whole word) ranks that tool first, always.
//! - Tools of one server that make the same call (see
//!   [`Tool::operation`]) are one result, under the first name its server
//!   lists, with the best score among them.
//! - Prerequisites are a score: when a result requires an identifier
//!   (`token`, `station_code`, `libraryId`) that another tool of its
//!   server looks up by name (`GetUserToken`, `resolve-library-id`), that
//!   tool scores at least [`PREREQUISITE_SHARE`] of the result's score.
//! - `server:NAME` in the query keeps only that server's (or plugin's) tools.
//!
//! The index is made of segments, one per source ([`EnhancedSegment`]),
//! whose catalog-wide statistics are combined at query time, so a change
//! to one source re-indexes that source only and scores stay those of one
//! index over every tool (`reference`, kept for tests, is that index).

use std::cell::RefCell;
/// The index's maps hash with foldhash (seeded per map): SipHash was an
/// eighth of a segment build, and the keys are short terms.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;
use std::rc::Rc;
use std::sync::Arc;

use rust_stemmers::{Algorithm, Stemmer};

use crate::classic::{Scored, best_first, idf, segments_substring_matches};
use crate::name_text::NameText;
use quiver_tool::tool::Tool;

/// The share of a result's score that a tool providing one of its
/// required inputs (its prerequisite, see
/// [`EnhancedSegment::build_prerequisites`]) scores at least: just under
/// 1, so the prerequisite ranks right below the tool that needs it unless
/// it earns more itself, and pushes out only results that score lower.
pub const PREREQUISITE_SHARE: f64 = 0.99;

/// Hybrid search: the dense candidates, the tools most similar to the
/// query, whose normalised similarity is fused with the lexical score.
pub const DENSE_CANDIDATES: usize = 30;
/// Hybrid search: the cosine similarity a dense candidate needs to be a
/// result without lexical evidence, so an off-topic query still finds
/// nothing. With all-MiniLM-L6-v2 a request and the tool it wants are often
/// only 0.2 to 0.35 apart in cosine (half of metatool's gold tools are
/// below 0.35), while requests no tool of a catalog serves reach 0.16 to
/// 0.23 against mcp-popular's tools (see docs/RETRIEVAL.md, fifth round).
pub const MIN_SIMILARITY: f32 = 0.2;
/// Hybrid search: how steeply the similarities' weight falls as the best
/// lexical match explains more of the query; the weight is scaled by
/// `(1 - coverage)` to this power. Above 1, a query that one tool matches
/// in most of its words keeps nearly its lexical order (half its words:
/// 0.165 of the weight), while one that lexical search barely explains gets
/// most of it (a quarter: 0.47).
pub const COVERAGE_EXPONENT: f64 = 2.6;
/// Hybrid search: the power of a lexical match's share of the best lexical
/// score. Above 1, the runner-up matches of a query fall behind a tool
/// the query's meaning is close to sooner than the best match does (at
/// half the best score, 0.38 of the lexical weight instead of 0.5).
pub const LEXICAL_EXPONENT: f64 = 1.4;

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
            if let Some(term) = self.analyse(part) {
                each(part, &term);
            }
        });
    }

    /// `word`'s term, `None` for a stop word. Remembered per thread:
    /// stemming and the stop-word lookup were most of a segment build, and
    /// tool texts repeat a small vocabulary. Bounded: long words are not
    /// kept, and a full memo starts over.
    fn analyse(&self, word: &str) -> Option<Rc<str>> {
        const LONGEST_KEPT: usize = 40;
        const MOST_KEPT: usize = 1 << 16;
        thread_local! {
            static ANALYSED: RefCell<HashMap<Box<str>, Option<Rc<str>>>> =
                RefCell::new(HashMap::default());
        }
        let analyse = || (!is_stop_word(word)).then(|| Rc::from(&*self.stemmer.stem(word)));
        if word.len() > LONGEST_KEPT {
            return analyse();
        }
        if let Some(known) = ANALYSED.with(|memo| memo.borrow().get(word).cloned()) {
            return known;
        }
        let analysed = analyse();
        ANALYSED.with(|memo| {
            let mut memo = memo.borrow_mut();
            if memo.len() >= MOST_KEPT {
                memo.clear();
            }
            memo.insert(word.into(), analysed.clone());
        });
        analysed
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

/// A query word: as written, as its term, and where that term is indexed.
struct QueryWord {
    word: String,
    term: String,
    found: Option<Found>,
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

/// The words of `lexicon` that one of a probe's deletion hashes
/// (`variants`) may come from, each once, into `out`.
fn lexicon_candidates(lexicon: &Lexicon, variants: &[u32], out: &mut Vec<u32>) {
    out.clear();
    for &variant in variants {
        lexicon.candidates(variant, out);
    }
    out.sort_unstable();
    out.dedup();
}

/// Per-server BM25 over what each server says it is for: each server's
/// term counts and length, with the corpus statistics (server count,
/// document frequencies, average length) combined across segments by
/// [`EnhancedIndex`].
#[derive(Default)]
struct ServerContext {
    terms: HashMap<Box<str>, Vec<(u32, u16)>>,
    lengths: Vec<u32>,
    /// Each server's or plugin's name.
    names: Vec<Box<str>>,
}

impl ServerContext {
    fn add(&mut self, analyzer: &Analyzer, name: &str, text: &str) -> u32 {
        let server = self.lengths.len() as u32;
        let mut counts: HashMap<String, u16> = HashMap::default();
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
        self.names.push(name.into());
        server
    }
}

/// A term as one segment holds it: what a search needs of it there
/// before scoring.
#[derive(Debug, Clone, Copy)]
pub(super) struct TermHit {
    id: u32,
    /// The number of the segment's tools it occurs in.
    df: u32,
    /// Its largest count in each field.
    most: [u8; FIELDS],
}

/// A term found in the index: its id in each segment that holds it, and
/// the number of tools it occurs in across all of them.
#[derive(Debug, Clone)]
struct Found {
    term: String,
    /// (segment, the term's id in that segment), in segment order.
    hits: Vec<(u32, u32)>,
    /// Per hit, the term's largest count in each field there.
    most: Vec<[u8; FIELDS]>,
    df: usize,
    /// For a term common across the directory's segments: no hits above,
    /// the term is looked up in each segment a search scores.
    common: Option<Common>,
}

/// A common term's run in the directory and its largest field counts in
/// any segment (a bound for the segments a search does not visit).
#[derive(Debug, Clone, Copy)]
struct Common {
    run: (u32, u32),
    most: [u8; FIELDS],
}

/// What one distinct query word matches beyond itself, worked out once per
/// query for both scoring and the relevance floor.
struct Expansion {
    /// The two known terms an unknown word is read as (`websearch`).
    parts: Vec<Found>,
    /// Known terms within typo distance of an unknown word that is no
    /// compound.
    near: Vec<Found>,
    /// The other indexed words of its synonym groups.
    synonyms: Vec<Found>,
    /// The indexed terms it begins or that begin it.
    extensions: Vec<Found>,
}

/// One source's tools, analysed and indexed on their own: every per-tool
/// and per-server structure of the enhanced index (postings with field
/// counts, field lengths, name bigrams, exact names, typo lexicon, server
/// context, prerequisites, same-operation folds), with segment-local term
/// and tool ids. Statistics that depend on the whole catalog (tool count,
/// document frequencies, average field lengths, the server count) are
/// combined across segments by [`EnhancedIndex`] at query time, so
/// replacing a source rebuilds its segment only, and the scores are those
/// of one index built over every tool.
///
/// Built off the request path when a source publishes; this is also where
/// any further per-source derived data (such as per-tool vectors) belongs.
pub struct EnhancedSegment {
    /// Unique among the segments this process builds: how a [`Directory`]
    /// names it.
    key: u64,
    docs: Vec<Arc<Tool>>,
    /// Each tool's server, an index into `servers`.
    doc_servers: Vec<u32>,
    /// The terms, numbered in order of first appearance, which a
    /// catalog-wide id order is derived from.
    terms: Dictionary,
    /// Each term's postings, in tool order.
    postings: Lists<Posting>,
    /// Per tool, its field lengths in terms.
    lengths: Vec<[u16; FIELDS]>,
    /// Per field, the sum of the tools' lengths.
    length_totals: [u64; FIELDS],
    /// Per field, the longest tool's length.
    max_lengths: [u16; FIELDS],
    /// Per field, the shortest tool's length.
    min_lengths: [u16; FIELDS],
    /// Per term, its largest count in each field: with `min_lengths`, what
    /// bounds the score it can give a tool here.
    term_max_counts: Vec<[u8; FIELDS]>,
    /// (term, next term) of each tool name's adjacent words → the tools.
    name_bigrams: KeyedLists<(u32, u32), u32>,
    lexicon: Lexicon,
    /// [`text_hash`] of each lower-cased tool name (own and exposed) → the
    /// tools; a lookup checks the names, so a hash collision finds nothing.
    exact_names: KeyedLists<u64, u32>,
    servers: ServerContext,
    /// A tool, to the tools of its server that look up an identifier it
    /// requires.
    prerequisites: HashMap<u32, Vec<u32>>,
    /// A tool that makes the same call as a tool its server lists earlier
    /// (see [`Tool::operation`]), to the first tool making it.
    same_operation: HashMap<u32, u32>,
    /// The ids of the ASCII terms of [`MIN_EXTENSION_PREFIX`] letters or
    /// more, sorted by term, for the terms a query term begins.
    extension_terms: SortedTerms,
    /// Its tools' names for the substring fallback, made on first use.
    names: std::sync::OnceLock<NameText>,
}

impl std::fmt::Debug for EnhancedSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnhancedSegment")
            .field("docs", &self.docs.len())
            .field("terms", &self.terms.len())
            .finish()
    }
}

/// The names a tool is found by exactly, lower-cased: its own and its
/// exposed name (one when they are the same).
fn exact_names(tool: &Tool) -> Vec<String> {
    let mut names = vec![tool.original_name().to_lowercase()];
    let exposed = tool.name().to_lowercase();
    if !names.contains(&exposed) {
        names.push(exposed);
    }
    names
}

fn parameter_text(tool: &Tool) -> String {
    let mut text = String::new();
    // Parsed for this build alone: the index keeps the words, not the tree.
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

/// Per-tool scratch space of a segment build.
#[derive(Default)]
struct BuildScratch {
    server_ids: HashMap<String, u32>,
    /// Each word written in the segment's tools, to its term (`None` for
    /// a stop word).
    words: HashMap<String, Option<u32>>,
    name_terms: Vec<Vec<u32>>,
    doc_terms: Vec<(u32, usize)>,
    exact_names: Vec<(u64, u32)>,
    name_bigrams: Vec<((u32, u32), u32)>,
    /// Each term's postings while the segment is built.
    postings: Vec<Vec<Posting>>,
}

impl EnhancedSegment {
    /// Indexes one source's tools with the description of its server or
    /// plugin; their order is the tie-break order.
    pub fn build(description: Option<&str>, tools: &[Arc<Tool>]) -> EnhancedSegment {
        Self::build_described([(description, tools)])
    }

    /// Indexes groups of tools, each with the description of its server or
    /// plugin (if any), as one segment.
    pub fn build_described<'a>(
        groups: impl IntoIterator<Item = (Option<&'a str>, &'a [Arc<Tool>])>,
    ) -> EnhancedSegment {
        static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let analyzer = Analyzer::default();
        let mut segment = EnhancedSegment {
            key: NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            docs: Vec::new(),
            doc_servers: Vec::new(),
            terms: Dictionary::default(),
            postings: Lists::default(),
            lengths: Vec::new(),
            length_totals: [0; FIELDS],
            max_lengths: [0; FIELDS],
            min_lengths: [0; FIELDS],
            term_max_counts: Vec::new(),
            name_bigrams: KeyedLists::default(),
            lexicon: Lexicon::default(),
            exact_names: KeyedLists::default(),
            servers: ServerContext::default(),
            prerequisites: HashMap::default(),
            same_operation: HashMap::default(),
            extension_terms: SortedTerms::default(),
            names: std::sync::OnceLock::new(),
        };
        // (server, call) → (position in its server's list, tool).
        let mut operations: HashMap<(u32, &str), Vec<(u32, u32)>> = HashMap::default();
        let mut scratch = BuildScratch::default();
        for (description, tools) in groups {
            for tool in tools {
                let doc = segment.docs.len() as u32;
                segment.add_tool(&analyzer, tool, description, &mut scratch);
                if let (Some(operation), Some(&server)) =
                    (tool.operation(), segment.doc_servers.last())
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
                    segment.same_operation.insert(doc, first);
                }
            }
        }
        // Stems that are not words of their own join the lexicon, so a typo
        // of an inflected word (`historical`) still reaches its stem.
        let mut lexicon = std::mem::take(&mut segment.lexicon);
        for (id, term) in (0u32..).zip(segment.terms.names()) {
            if !matches!(scratch.words.get(term), Some(Some(_))) {
                lexicon.push(term, id);
            }
        }
        lexicon.finish();
        segment.lexicon = lexicon;
        if !segment.lengths.is_empty() {
            segment.min_lengths = [u16::MAX; FIELDS];
        }
        for lengths in &segment.lengths {
            for field in 0..FIELDS {
                let (Some(total), Some(max), Some(min), Some(&length)) = (
                    segment.length_totals.get_mut(field),
                    segment.max_lengths.get_mut(field),
                    segment.min_lengths.get_mut(field),
                    lengths.get(field),
                ) else {
                    continue;
                };
                *total += u64::from(length);
                *max = (*max).max(length);
                *min = (*min).min(length);
            }
        }
        segment.term_max_counts = scratch
            .postings
            .iter()
            .map(|list| {
                list.iter().fold([0u8; FIELDS], |mut most, posting| {
                    for (m, &count) in most.iter_mut().zip(&posting.tf) {
                        *m = (*m).max(count);
                    }
                    most
                })
            })
            .collect();
        segment.extension_terms = SortedTerms::new(&segment.terms, |term| {
            term.len() >= MIN_EXTENSION_PREFIX && term.is_ascii()
        });
        segment.build_prerequisites(&analyzer, &scratch.name_terms);
        segment.postings = Lists::from_lists(&scratch.postings);
        segment.exact_names = KeyedLists::from_pairs(scratch.exact_names);
        segment.name_bigrams = KeyedLists::from_pairs(scratch.name_bigrams);
        segment.lengths.shrink_to_fit();
        segment.terms.shrink_to_fit();
        segment.docs.shrink_to_fit();
        segment.doc_servers.shrink_to_fit();
        segment
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// The key a [`Directory`] knows it by.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Whether the segment holds no tool.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The indexed tools, in tie-break order.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.docs
    }

    fn term(&self, id: u32) -> &str {
        self.terms.name(id)
    }

    /// `term` as a search sees it here, if this segment holds it.
    fn find_term(&self, term: &str) -> Option<TermHit> {
        self.terms.get(term).map(|id| self.term_hit(id))
    }

    /// Term `id` as a search sees it here.
    fn term_hit(&self, id: u32) -> TermHit {
        TermHit {
            id,
            df: self.postings.of(id).len() as u32,
            most: self
                .term_max_counts
                .get(id as usize)
                .copied()
                .unwrap_or([u8::MAX; FIELDS]),
        }
    }

    fn add_tool(
        &mut self,
        analyzer: &Analyzer,
        tool: &Arc<Tool>,
        description: Option<&str>,
        scratch: &mut BuildScratch,
    ) {
        let doc = self.docs.len() as u32;
        let group = tool.source().group().unwrap_or("");
        let server = match scratch.server_ids.get(group) {
            Some(&id) => id,
            None => {
                let text = format!("{group} {}", description.unwrap_or(""));
                let id = self.servers.add(analyzer, group, &text);
                scratch.server_ids.insert(group.to_owned(), id);
                id
            }
        };
        self.doc_servers.push(server);
        let doc_terms = &mut scratch.doc_terms;
        doc_terms.clear();
        let mut lengths = [0u16; FIELDS];
        let parameters = parameter_text(tool);
        // A title is words about the tool, as its description is.
        let described;
        let description = match tool.title() {
            Some(title) => {
                described = format!("{title}\n{}", tool.description());
                described.as_str()
            }
            None => tool.description(),
        };
        let fields: [&str; FIELDS] = [tool.original_name(), group, description, &parameters];
        let mut names: Vec<u32> = Vec::new();
        for (field, text) in fields.iter().enumerate() {
            let (terms, postings, lexicon, words) = (
                &mut self.terms,
                &mut scratch.postings,
                &mut self.lexicon,
                &mut scratch.words,
            );
            identifier_parts(text, |word| {
                // A segment's tools repeat their words: each is analysed
                // and looked up once per segment.
                let id = match words.get(word) {
                    Some(&known) => known,
                    None => {
                        let id = analyzer.analyse(word).map(|term| {
                            let (id, new) = terms.id_or_add(&term);
                            if new {
                                postings.push(Vec::new());
                            }
                            lexicon.push(word, id);
                            id
                        });
                        words.insert(word.to_owned(), id);
                        id
                    }
                };
                let Some(id) = id else {
                    return;
                };
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
                .and_then(|&(id, _)| scratch.postings.get_mut(id as usize))
            {
                list.push(Posting { doc, tf });
            }
        }
        for name in exact_names(tool) {
            scratch.exact_names.push((text_hash(&name), doc));
        }
        for pair in names.windows(2) {
            if let [a, b] = pair {
                scratch.name_bigrams.push(((*a, *b), doc));
            }
        }
        scratch.name_terms.push(names);
        self.lengths.push(lengths);
        self.docs.push(tool.clone());
    }

    /// For each tool that requires an identifier parameter (last word in
    /// [`IDENTIFIER_WORDS`]), the tools of its server whose name is a
    /// lookup verb, at most [`MAX_EXTRA_WORDS`] other words, and that
    /// parameter's last one or two words (`GetUserToken` for `token`,
    /// `resolve-library-id` for `libraryId`), with the fewest other words,
    /// that do not require it themselves. A server's tools are all in its
    /// source's segment, so this is decided per segment.
    fn build_prerequisites(&mut self, analyzer: &Analyzer, name_terms: &[Vec<u32>]) {
        self.prerequisites = HashMap::default();
        let verbs: Vec<u32> = LOOKUP_VERBS
            .iter()
            .filter_map(|v| self.terms.get(v))
            .collect();
        // (server, term) → lookup tools with that term in their name.
        let mut lookups: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
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
            analyzer.terms(parameter, |term| {
                identifier = IDENTIFIER_WORDS.contains(&term);
                parts.push(self.terms.get(term).unwrap_or(u32::MAX));
            });
            (parts, identifier)
        };
        // A bare `id` says nothing about what it identifies.
        let bare_id = self.terms.get("id");
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
}

/// The stems of each synonym group word, to the stems of the other words
/// of its groups.
fn synonym_stems() -> &'static HashMap<String, Vec<String>> {
    static TABLE: std::sync::OnceLock<HashMap<String, Vec<String>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let analyzer = Analyzer::default();
        let mut table: HashMap<String, Vec<String>> = HashMap::default();
        for group in SYNONYMS {
            let stems: Vec<String> = group
                .iter()
                .map(|w| analyzer.stem(w).into_owned())
                .collect();
            for stem in &stems {
                let others = stems.iter().filter(|other| *other != stem).cloned();
                table.entry(stem.clone()).or_default().extend(others);
            }
        }
        // A stem in two groups with the same word (`doc`: `document`)
        // reaches it once.
        for others in table.values_mut() {
            let mut seen = HashSet::default();
            others.retain(|other| seen.insert(other.clone()));
        }
        table
    })
}

/// What a hybrid search fuses with the lexical scores: per tool of the
/// index (in index order), the cosine similarity of its vector to the
/// query's (`NaN` for a tool whose vector is not ready: it is matched
/// lexically only), and the weight of the similarity (0 to 1, one for
/// every catalog).
#[derive(Debug, Clone, Copy)]
pub struct Fusion<'a> {
    /// Cosine similarity per tool, `NaN` when unknown.
    pub similarity: &'a [f32],
    /// Weight of the normalised similarity; the lexical score has `1 - weight`.
    pub weight: f64,
}

/// What the lexical pass found, as fusion weighs it.
#[derive(Clone, Copy)]
struct Lexical<'a> {
    /// BM25F scores per tool.
    scores: &'a [f64],
    /// The tools with a score.
    touched: &'a [u32],
    /// Per tool, the query words it matches (see `evidence`).
    evidence: &'a [u8],
    /// The relevance floor a lexical match must reach.
    floor: f64,
    /// The query's distinct words.
    query_words: usize,
}

/// The enhanced index over a catalog's deferred tools: one
/// [`EnhancedSegment`] per source, in catalog order, with the statistics
/// that span them. Combining segments costs a few steps per segment and
/// per distinct field length, so a catalog whose sources did not change
/// reuses their segments as they are.
pub struct EnhancedIndex {
    analyzer: Analyzer,
    segments: Vec<Arc<EnhancedSegment>>,
    /// Where each segment's tools start in catalog order; one more entry
    /// than segments.
    offsets: Vec<u32>,
    /// Per field and field length: the field weight over its BM25 length
    /// normalisation under the catalog-wide average length, so scoring a
    /// posting needs no division.
    factors: [Vec<f64>; FIELDS],
    /// Where each segment's servers start in `server_ids`.
    server_starts: Vec<u32>,
    /// Per segment server: its catalog-wide server id, and whether its text
    /// is the one that counts (the first segment to name a server does).
    server_ids: Vec<(u32, bool)>,
    /// Per catalog-wide server, its context length.
    server_lengths: Vec<u32>,
    server_average_length: f64,
    /// Where the dictionaries of most segments are looked up at once.
    directory: Option<Arc<Directory>>,
    /// Per directory slot, the position of its segment in this index
    /// (`u32::MAX` once that segment has left): the directory gives hits
    /// by slot, and a search maps thousands of them.
    slot_positions: Vec<u32>,
    /// The positions of the segments the directory does not cover (all of
    /// them without one), looked up one by one.
    overlay: Vec<u32>,
    /// Per segment position, its directory slot (`u32::MAX`: uncovered).
    position_slots: Vec<u32>,
    /// The directory's slots whose segments have left this index.
    dropped_slots: Vec<u32>,
    /// Per field, the largest of `shortest_factors`: bounds a term in any
    /// segment.
    widest_factors: [f64; FIELDS],
    /// Catalog-wide (copy, first) of the tools making the same call as a
    /// tool their server lists earlier, sorted.
    same_operations: Vec<(u32, u32)>,
    /// Per segment and field, the factor (see `factors`) at the segment's
    /// shortest length of the field: the largest any of its tools has, so
    /// bounding a segment a search skips costs no visit to it.
    shortest_factors: Vec<[f64; FIELDS]>,
}

impl std::fmt::Debug for EnhancedIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnhancedIndex")
            .field("docs", &self.len())
            .field("segments", &self.segments.len())
            .finish()
    }
}

impl EnhancedIndex {
    /// Indexes `tools` with no server descriptions; their order is the
    /// tie-break order.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Arc<Tool>>) -> EnhancedIndex {
        let tools: Vec<Arc<Tool>> = tools.into_iter().cloned().collect();
        Self::from_segments(vec![Arc::new(EnhancedSegment::build(None, &tools))])
    }

    /// Indexes groups of tools, one segment each, with the description of
    /// its server or plugin (if any); the order is the tie-break order.
    pub fn build_described<'a>(
        groups: impl IntoIterator<Item = (Option<&'a str>, &'a [Arc<Tool>])>,
    ) -> EnhancedIndex {
        Self::from_segments(
            groups
                .into_iter()
                .map(|(description, tools)| Arc::new(EnhancedSegment::build(description, tools)))
                .collect(),
        )
    }

    /// Combines segments, in tie-break order.
    pub fn from_segments(segments: Vec<Arc<EnhancedSegment>>) -> EnhancedIndex {
        Self::with_directory(segments, None)
    }

    /// Combines segments, in tie-break order, looking the dictionaries of
    /// those `directory` covers up through it (same results, one lookup
    /// instead of one per segment).
    pub fn with_directory(
        segments: Vec<Arc<EnhancedSegment>>,
        directory: Option<Arc<Directory>>,
    ) -> EnhancedIndex {
        // The synonym table is made once per process; made here, on the
        // background pass that builds indexes, no search waits for it.
        synonym_stems();
        let mut positions: HashMap<u64, u32> = HashMap::default();
        positions.reserve(segments.len());
        let mut overlay = Vec::new();
        let mut same_operations = Vec::new();
        let mut min_lengths = Vec::with_capacity(segments.len());
        let mut offsets = Vec::with_capacity(segments.len() + 1);
        let mut total = 0u32;
        let mut length_totals = [0u64; FIELDS];
        let mut max_lengths = [0u16; FIELDS];
        let mut server_starts = Vec::with_capacity(segments.len());
        let mut server_ids = Vec::new();
        let mut server_lengths: Vec<u32> = Vec::new();
        let mut server_names: HashMap<&str, u32> = HashMap::default();
        for (at, segment) in segments.iter().enumerate() {
            positions.insert(segment.key, at as u32);
            if !directory.as_ref().is_some_and(|d| d.covers(segment.key)) {
                overlay.push(at as u32);
            }
            let start = total;
            same_operations.extend(
                segment
                    .same_operation
                    .iter()
                    .map(|(&copy, &first)| (start + copy, start + first)),
            );
            offsets.push(total);
            min_lengths.push(segment.min_lengths);
            total += segment.docs.len() as u32;
            for field in 0..FIELDS {
                if let (Some(sum), Some(max), Some(&add), Some(&longest)) = (
                    length_totals.get_mut(field),
                    max_lengths.get_mut(field),
                    segment.length_totals.get(field),
                    segment.max_lengths.get(field),
                ) {
                    *sum += add;
                    *max = (*max).max(longest);
                }
            }
            let server_start = server_ids.len();
            server_starts.push(server_start as u32);
            // One server per name across the catalog, as one index keys
            // them: a name's first segment brings its context.
            for (name, &length) in segment.servers.names.iter().zip(&segment.servers.lengths) {
                match server_names.get(name.as_ref()) {
                    Some(&id) => server_ids.push((id, false)),
                    None => {
                        let id = server_lengths.len() as u32;
                        server_names.insert(name, id);
                        server_lengths.push(length);
                        server_ids.push((id, true));
                    }
                }
            }
        }
        offsets.push(total);
        let n = f64::from(total);
        let factors: [Vec<f64>; FIELDS] = std::array::from_fn(|field| {
            // Lengths are whole numbers far below 2^53: these sums are
            // exactly those one index over every tool would make.
            let sum = length_totals.get(field).copied().unwrap_or(0) as f64;
            let average = (sum / n.max(1.0)).max(1.0);
            let b = LENGTH_NORMALISATION.get(field).copied().unwrap_or(0.0);
            let weight = WEIGHTS.get(field).copied().unwrap_or(0.0);
            (0..=max_lengths.get(field).copied().unwrap_or(0))
                .map(|length| weight / (1.0 - b + b * f64::from(length) / average))
                .collect()
        });
        let total_server_length: f64 = server_lengths.iter().map(|&l| f64::from(l)).sum();
        let server_average_length =
            (total_server_length / server_lengths.len().max(1) as f64).max(1.0);
        let shortest_factors: Vec<[f64; FIELDS]> = min_lengths
            .iter()
            .map(|shortest: &[u16; FIELDS]| {
                std::array::from_fn(|field| {
                    let length = shortest.get(field).copied().unwrap_or(0);
                    // The table covers every length up to the catalog's
                    // longest; its first entry is the largest factor.
                    factors
                        .get(field)
                        .and_then(|table| table.get(length as usize).or(table.first()))
                        .copied()
                        .unwrap_or(0.0)
                })
            })
            .collect();
        same_operations.sort_unstable();
        let slot_positions: Vec<u32> = directory
            .as_ref()
            .map(|d| {
                d.keys
                    .iter()
                    .map(|key| positions.get(key).copied().unwrap_or(u32::MAX))
                    .collect()
            })
            .unwrap_or_default();
        let mut position_slots = vec![u32::MAX; segments.len()];
        let mut dropped_slots = Vec::new();
        for (slot, &at) in (0u32..).zip(&slot_positions) {
            match position_slots.get_mut(at as usize) {
                Some(entry) => *entry = slot,
                None => dropped_slots.push(slot),
            }
        }
        let widest_factors = std::array::from_fn(|field| {
            shortest_factors
                .iter()
                .filter_map(|factors: &[f64; FIELDS]| factors.get(field).copied())
                .fold(0.0, f64::max)
        });
        EnhancedIndex {
            analyzer: Analyzer::default(),
            segments,
            offsets,
            factors,
            server_starts,
            server_ids,
            server_lengths,
            server_average_length,
            directory,
            slot_positions,
            overlay,
            position_slots,
            dropped_slots,
            widest_factors,
            same_operations,
            shortest_factors,
        }
    }

    /// The directory it looks most dictionaries up in, if any.
    pub fn directory(&self) -> Option<&Arc<Directory>> {
        self.directory.as_ref()
    }

    /// The segments looked up one by one: those the directory does not
    /// cover.
    pub fn uncovered_segments(&self) -> usize {
        self.overlay.len()
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0) as usize
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The segments, in catalog order.
    pub fn segments(&self) -> &[Arc<EnhancedSegment>] {
        &self.segments
    }

    /// The segment and segment-local id of catalog-wide tool `doc`.
    fn locate(&self, doc: u32) -> Option<(usize, u32)> {
        let at = self
            .offsets
            .partition_point(|&start| start <= doc)
            .checked_sub(1)?;
        let start = *self.offsets.get(at)?;
        let segment = self.segments.get(at)?;
        let local = doc - start;
        ((local as usize) < segment.docs.len()).then_some((at, local))
    }

    fn tool(&self, doc: u32) -> Option<&Arc<Tool>> {
        let (at, local) = self.locate(doc)?;
        self.segments.get(at)?.docs.get(local as usize)
    }

    fn start(&self, segment: usize) -> u32 {
        self.offsets.get(segment).copied().unwrap_or(0)
    }

    /// How many tools segment `at` holds, read from `offsets` (a search
    /// sizes hundreds of segments it never visits).
    fn segment_len(&self, at: usize) -> u32 {
        match (self.offsets.get(at), self.offsets.get(at + 1)) {
            (Some(&start), Some(&end)) => end - start,
            _ => 0,
        }
    }

    /// The catalog-wide server of tool `local` of segment `at`. Read
    /// through the segment's own table, not from a catalog-wide one: that
    /// would be rebuilt, 100,000 entries, on every change.
    fn server_of(&self, at: usize, local: u32) -> Option<u32> {
        let server = *self.segments.get(at)?.doc_servers.get(local as usize)?;
        let start = *self.server_starts.get(at)?;
        self.server_ids
            .get((start + server) as usize)
            .map(|&(id, _)| id)
    }

    /// The position in this index of the directory's segment `slot`, if
    /// that segment is in it.
    fn position_of_slot(&self, slot: u32) -> Option<u32> {
        self.slot_positions
            .get(slot as usize)
            .copied()
            .filter(|&at| at != u32::MAX)
    }

    /// The segments the directory does not cover (every one without a
    /// directory), with their positions.
    fn uncovered(&self) -> impl Iterator<Item = (u32, &EnhancedSegment)> {
        self.overlay
            .iter()
            .filter_map(|&at| Some((at, &**self.segments.get(at as usize)?)))
    }

    /// Each (segment position, value) of one key, for the segments that
    /// hold it: the directory's `listed` hits for the segments it covers
    /// (those of segments not in this index dropped), then `own`'s lookup
    /// in each uncovered segment; in segment order only without a
    /// directory, so callers that need that order sort.
    fn gather<'s, T: Copy + 's>(
        &'s self,
        listed: Option<&[(u32, T)]>,
        own: impl Fn(&'s EnhancedSegment) -> Option<&'s [T]>,
        out: &mut Vec<(u32, T)>,
    ) {
        for &(slot, value) in listed.unwrap_or(&[]) {
            if let Some(at) = self.position_of_slot(slot) {
                out.push((at, value));
            }
        }
        for (at, segment) in self.uncovered() {
            for &value in own(segment).unwrap_or(&[]) {
                out.push((at, value));
            }
        }
    }

    /// Calls `each` with (segment position, the term there) for each
    /// segment holding `term`: the directory's in slot order, with the
    /// uncovered segments' merged in by position. So the hits come in
    /// segment order whenever the directory's slots are in it (always but
    /// for a directory built before the catalog's order changed): a
    /// replaced segment costs a common term no sort of its hundreds of
    /// hits.
    fn each_term_hit(&self, term: &str, mut each: impl FnMut(u32, TermHit)) {
        let mut own = self
            .uncovered()
            .filter_map(|(at, segment)| Some((at, segment.find_term(term)?)))
            .peekable();
        for &(slot, hit) in self
            .directory
            .as_deref()
            .map_or(&[][..], |d| d.terms.get(term))
        {
            if let Some(at) = self.position_of_slot(slot) {
                while let Some((before, own_hit)) = own.next_if(|&(other, _)| other < at) {
                    each(before, own_hit);
                }
                each(at, hit);
            }
        }
        own.for_each(|(at, hit)| each(at, hit));
    }

    /// Whether a segment of this index holds `term` ([`Self::resolve`]
    /// without collecting its hits).
    fn knows(&self, term: &str) -> bool {
        self.directory.as_ref().is_some_and(|directory| {
            directory
                .terms
                .get(term)
                .iter()
                .any(|&(slot, _)| self.position_of_slot(slot).is_some())
        }) || self.uncovered().any(|(_, s)| s.terms.contains(term))
    }

    /// `term`'s hits in segment order, when any segment holds it. Built in
    /// one pass: the hits of a common term run to hundreds.
    fn resolve(&self, term: &str) -> Option<Found> {
        if let Some(found) = self.resolve_common(term) {
            return found;
        }
        let mut found = Found {
            term: term.to_owned(),
            hits: Vec::new(),
            most: Vec::new(),
            df: 0,
            common: None,
        };
        let listed = self
            .directory
            .as_deref()
            .map_or(0, |d| d.terms.get(term).len());
        let most = listed + self.overlay.len();
        found.hits.reserve_exact(most);
        found.most.reserve_exact(most);
        let mut ordered = true;
        self.each_term_hit(term, |at, hit| {
            ordered &= found.hits.last().is_none_or(|&(last, _)| last < at);
            found.hits.push((at, hit.id));
            found.most.push(hit.most);
            found.df += hit.df as usize;
        });
        if found.hits.is_empty() {
            return None;
        }
        // Out of order only under a directory built before the catalog's
        // order changed.
        if !ordered {
            let mut hits: Vec<((u32, u32), [u8; FIELDS])> =
                found.hits.into_iter().zip(found.most).collect();
            hits.sort_unstable_by_key(|&((at, _), _)| at);
            (found.hits, found.most) = hits.into_iter().unzip();
        }
        Some(found)
    }

    /// `term` when the directory counts it common (`None` otherwise): its
    /// document frequency from the directory's total, less the segments
    /// that have left, plus the uncovered ones; no hits.
    fn resolve_common(&self, term: &str) -> Option<Option<Found>> {
        let directory = self.directory.as_deref()?;
        let run = directory.terms.run(term)?;
        let total = directory.common_terms.get(&run.0)?;
        let mut total = *total;
        // The left segments' largest counts stay in: still a bound.
        for &slot in &self.dropped_slots {
            if let Some(hit) = directory.terms.run_hit(run, slot) {
                total.df -= u64::from(hit.df);
            }
        }
        for (_, segment) in self.uncovered() {
            if let Some(hit) = segment.find_term(term) {
                total.add(&hit);
            }
        }
        Some((total.df > 0).then(|| Found {
            term: term.to_owned(),
            hits: Vec::new(),
            most: Vec::new(),
            df: total.df as usize,
            common: Some(Common {
                run,
                most: total.most,
            }),
        }))
    }

    /// Common term `found` in segment `at`, if it is there.
    fn common_in(&self, found: &Found, common: &Common, at: u32) -> Option<TermHit> {
        match self.position_slots.get(at as usize) {
            Some(&slot) if slot != u32::MAX => {
                self.directory.as_deref()?.terms.run_hit(common.run, slot)
            }
            _ => self.segments.get(at as usize)?.find_term(&found.term),
        }
    }

    /// Where one index over every tool would number `term`: ids count
    /// terms in order of first appearance, so by the first segment that
    /// holds it, then by its id there.
    fn term_order(&self, term: &str) -> (usize, u32) {
        let mut first = (usize::MAX, u32::MAX);
        self.each_term_hit(term, |at, hit| {
            first = first.min((at as usize, hit.id));
        });
        first
    }

    /// Known terms whose word or stem is within one edit of `word` or of
    /// its stem `term` (two edits for 8 characters or more); for typo
    /// tolerance, only for 4 characters or more. At most four, nearest
    /// first.
    fn near_terms<'s>(&'s self, word: &str, term: &str) -> Vec<Found> {
        let mut near: HashMap<&'s str, usize> = HashMap::default();
        let probes: &[&str] = if word == term { &[word] } else { &[word, term] };
        let mut variants = Vec::new();
        let mut candidates: Vec<u32> = Vec::new();
        for &probe in probes {
            let length = probe.chars().count();
            if length < 4 || !probe.is_ascii() {
                continue;
            }
            let allowed = if length >= 8 { 2 } else { 1 };
            variants.clear();
            deletion_hashes(probe.as_bytes(), allowed, &mut variants);
            variants.sort_unstable();
            variants.dedup();
            let mut consider = |known: &str, term: &'s str| {
                let distance = strsim::damerau_levenshtein(known, probe);
                if distance <= allowed {
                    let slot = near.entry(term).or_insert(distance);
                    *slot = (*slot).min(distance);
                }
            };
            if let Some(directory) = self.directory.as_deref() {
                lexicon_candidates(&directory.typo_lexicon, &variants, &mut candidates);
                for &index in &candidates {
                    let Some((known, word)) = directory.typo_lexicon.word(index) else {
                        continue;
                    };
                    // Only words some segment of this index still holds.
                    if let Some(term) = directory.typo_terms.get(word as usize)
                        && directory
                            .typo_slots
                            .of(word)
                            .iter()
                            .any(|&slot| self.position_of_slot(slot).is_some())
                    {
                        consider(known, term);
                    }
                }
            }
            for (_, segment) in self.uncovered() {
                lexicon_candidates(&segment.lexicon, &variants, &mut candidates);
                for &index in &candidates {
                    if let Some((known, id)) = segment.lexicon.word(index) {
                        consider(known, segment.term(id));
                    }
                }
            }
        }
        let mut near: Vec<(usize, (usize, u32), &str)> = near
            .into_iter()
            .map(|(term, distance)| (distance, self.term_order(term), term))
            .collect();
        near.sort_unstable();
        near.truncate(4);
        near.into_iter()
            .filter_map(|(_, _, term)| self.resolve(term))
            .collect()
    }

    /// A term the index does not know, read as two known terms run
    /// together (`websearch` → web search).
    fn split_compound(&self, term: &str) -> Vec<Found> {
        if term.len() < 6 || !term.is_ascii() {
            return Vec::new();
        }
        for cut in 3..=term.len() - 3 {
            let (left, right) = term.split_at(cut);
            if self.knows(left) && self.knows(right) {
                return [left, right]
                    .into_iter()
                    .filter_map(|t| self.resolve(t))
                    .collect();
            }
        }
        Vec::new()
    }

    /// The indexed terms that `word` begins or that begin it: for an
    /// indexed term of [`MIN_EXTENSION_PREFIX`] letters or more, the longer
    /// ones it begins and the shorter ones (of as many letters or more)
    /// that begin it; for an unknown one, its known beginnings.
    fn extensions_of(&self, word: &QueryWord) -> Vec<Found> {
        let term = word.term.as_str();
        if !term.is_ascii() {
            return Vec::new();
        }
        let mut names: Vec<&str> = Vec::new();
        if word.found.is_some() {
            if term.len() < MIN_EXTENSION_PREFIX {
                return Vec::new();
            }
            if let Some(directory) = &self.directory {
                let sorted = &directory.extension_terms;
                let from = sorted.partition_point(|longer| longer.as_ref() < term);
                for longer in sorted.get(from..).unwrap_or(&[]) {
                    if !longer.starts_with(term) {
                        break;
                    }
                    if longer.as_ref() != term && self.knows(longer) {
                        names.push(longer);
                    }
                }
            }
            for (_, segment) in self.uncovered() {
                names.extend(
                    segment
                        .extension_terms
                        .beginning_with(&segment.terms, term)
                        .filter(|&longer| longer != term),
                );
            }
        }
        for end in (MIN_EXTENSION_PREFIX..term.len()).rev() {
            if let Some(prefix) = term.get(..end)
                && self.knows(prefix)
            {
                names.push(prefix);
            }
        }
        names.sort_unstable();
        names.dedup();
        names.into_iter().filter_map(|t| self.resolve(t)).collect()
    }

    fn expand(&self, word: &QueryWord) -> Expansion {
        let (parts, near) = if word.found.is_some() {
            (Vec::new(), Vec::new())
        } else {
            let parts = self.split_compound(&word.term);
            let near = if parts.is_empty() {
                self.near_terms(&word.word, &word.term)
            } else {
                Vec::new()
            };
            (parts, near)
        };
        let synonyms = synonym_stems()
            .get(word.term.as_str())
            .into_iter()
            .flatten()
            .filter_map(|other| self.resolve(other))
            .collect();
        Expansion {
            parts,
            near,
            synonyms,
            extensions: self.extensions_of(word),
        }
    }

    /// The words of the query's text, in order.
    fn query_words(&self, text: &str) -> Vec<QueryWord> {
        let mut words = Vec::new();
        self.analyzer.words(text, |word, term| {
            words.push(QueryWord {
                word: word.to_owned(),
                term: term.to_owned(),
                found: self.resolve(term),
            });
        });
        words
    }

    /// Each server's context score for the query `terms`.
    fn server_scores(&self, terms: &[&str]) -> Vec<f64> {
        let mut scores = vec![0.0; self.server_lengths.len()];
        let mut entries: Vec<(u32, u16)> = Vec::new();
        let mut found: Vec<(u32, (u32, u16))> = Vec::new();
        for term in terms {
            entries.clear();
            found.clear();
            // Each catalog-wide server counts once per term (through the
            // first segment that names it), so the order does not matter.
            self.gather(
                self.directory.as_deref().map(|d| d.server_terms.get(term)),
                |segment| segment.servers.terms.get(*term).map(Vec::as_slice),
                &mut found,
            );
            for &(at, (server, tf)) in &found {
                let start = self.server_starts.get(at as usize).copied().unwrap_or(0);
                if let Some(&(id, true)) = self.server_ids.get((start + server) as usize) {
                    entries.push((id, tf));
                }
            }
            if entries.is_empty() {
                continue;
            }
            let idf = idf(self.server_lengths.len(), entries.len());
            for &(server, tf) in &entries {
                let tf = f64::from(tf);
                let length = self
                    .server_lengths
                    .get(server as usize)
                    .copied()
                    .unwrap_or(0);
                let norm = SERVER_K1
                    * (1.0 - SERVER_B + SERVER_B * f64::from(length) / self.server_average_length);
                if let Some(score) = scores.get_mut(server as usize) {
                    *score += idf * tf * (SERVER_K1 + 1.0) / (tf + norm);
                }
            }
        }
        scores
    }

    /// Distinct query words (by term) with how often each was said.
    fn unique(words: &[QueryWord]) -> Vec<(&QueryWord, usize)> {
        let mut unique: Vec<(&QueryWord, usize)> = Vec::new();
        for word in words {
            match unique.iter_mut().find(|(w, _)| w.term == word.term) {
                Some((_, count)) => *count += 1,
                None => unique.push((word, 1)),
            }
        }
        unique
    }

    /// The best `limit` tools for `query`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        self.search_fused(query, limit, None)
    }

    /// The best `limit` tools for `query`, the lexical scores fused with
    /// `fusion`'s similarities when given (see [`Fusion`]); without it,
    /// exactly [`EnhancedIndex::search`].
    pub fn search_fused(
        &self,
        query: &str,
        limit: usize,
        fusion: Option<&Fusion<'_>>,
    ) -> Vec<Scored> {
        if limit == 0 || self.is_empty() {
            return Vec::new();
        }
        let (servers, text) = split_server_filters(query);
        let allowed = |doc: u32| {
            servers.is_empty()
                || self.tool(doc).is_some_and(|tool| {
                    let group = tool.source().group().unwrap_or("");
                    // `server:time` takes a plugin and a server of that
                    // name; `server:mcp-time` only the server.
                    let toolset = tool.source().toolset();
                    servers
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(group) || s.eq_ignore_ascii_case(&toolset))
                })
        };

        let words = self.query_words(&text);
        let exact = self.exact_matches(&text);
        let unique = Self::unique(&words);
        let expansions: Vec<Expansion> = unique.iter().map(|(w, _)| self.expand(w)).collect();
        let fusion = fusion.filter(|f| f.similarity.len() == self.len() && f.weight > 0.0);
        let floor = RELEVANCE_FLOOR * (K1 + 1.0) * idf(self.len(), 1);
        let mut plan = self.plan(&words, &unique, &expansions);
        // A lexical search stops once no segment left can reach its results.
        let cutoff = fusion.is_none().then_some(Cutoff {
            limit,
            floor,
            exact: &exact,
            allowed: &allowed,
        });
        let mut out = self.score_plan(&mut plan, cutoff.as_ref());
        self.fold_same_operation_evidence(&mut out);
        let lexical = Lexical {
            scores: &out.scores,
            touched: &out.touched,
            evidence: &out.evidence,
            floor,
            query_words: unique.len(),
        };
        // Fusion scores every segment, so its slots are the tools.
        let fused = fusion.and_then(|f| self.fuse(f, &lexical, &allowed));
        let dense_ok = match fused {
            Some((fused_scores, fused_touched, ok)) => {
                out.scores = fused_scores;
                out.touched = fused_touched;
                Some(ok)
            }
            None => None,
        };
        self.fold_same_operations(&mut out);
        let best = if exact.is_empty() {
            0.0
        } else {
            out.touched
                .iter()
                .map(|&slot| out.score(slot))
                .fold(0.0f64, f64::max)
        };
        // Exact names above every other tool, in the order the names appear.
        for (rank, &doc) in exact.iter().enumerate() {
            let Some(slot) = out.slot(self, doc) else {
                continue;
            };
            if let Some(score) = out.scores.get_mut(slot as usize) {
                if *score == 0.0 {
                    out.touched.push(slot);
                }
                *score = best + 1.0 + (exact.len() - rank) as f64;
            }
        }

        // The relevance floor: weak evidence is no match, so an off-topic
        // query finds nothing rather than whatever shares a word with it.
        let clears = |slot: u32| {
            let doc = out.doc(slot);
            allowed(doc)
                && (exact.contains(&doc)
                    || match &dense_ok {
                        // Fused: a lexical match or a close dense one.
                        Some(ok) => ok.get(doc as usize).copied().unwrap_or(false),
                        None => clears_floor(&out.scores, &out.evidence, floor, slot),
                    })
        };
        let mut results: Vec<u32> = out
            .touched
            .iter()
            .copied()
            .filter(|&slot| out.score(slot) > 0.0 && clears(slot))
            .collect();
        self.score_prerequisites(&mut out, &mut results, limit, &allowed);
        // Ranked by score, ties in catalog order (slots need not be).
        let hits = results
            .iter()
            .map(|&slot| (out.score(slot), out.doc(slot)))
            .collect();
        let ranked = best_first(hits, limit);
        if ranked.is_empty() {
            return segments_substring_matches(
                self.segments
                    .iter()
                    .zip(&self.offsets)
                    .map(|(segment, &start)| {
                        let names = segment.names.get_or_init(|| NameText::build(&segment.docs));
                        (start, segment.docs.as_slice(), names)
                    }),
                &text,
                limit,
                allowed,
            );
        }
        ranked
            .into_iter()
            .filter_map(|doc| {
                self.tool(doc).map(|tool| Scored {
                    tool: tool.clone(),
                    score: out.slot(self, doc).map_or(0.0, |slot| out.score(slot)),
                })
            })
            .collect()
    }

    /// Fuses the lexical `scores` with `fusion`'s similarities: the
    /// scores of the tools that clear the relevance floor, divided by the
    /// best of them and raised to [`LEXICAL_EXPONENT`], and the
    /// similarities of the [`DENSE_CANDIDATES`] most similar tools, scaled
    /// from 0 (the last candidate's similarity or [`MIN_SIMILARITY`],
    /// whichever is lower) to 1 (the first), and every lexical match's
    /// similarity on the same scale, weighed `1 - w` and `w`, where `w` is
    /// the fusion weight times the share of the query's words that no
    /// lexical match explains (the most words any lexical match holds, of
    /// all the query's words) to the power [`COVERAGE_EXPONENT`]. Returns
    /// the fused scores, the tools they touch, and per tool whether it may
    /// be a result (a lexical match, or a candidate of [`MIN_SIMILARITY`]
    /// or more), folded like the scores; `None` when no tool has a vector.
    fn fuse(
        &self,
        fusion: &Fusion<'_>,
        lexical: &Lexical<'_>,
        allowed: &impl Fn(u32) -> bool,
    ) -> Option<(Vec<f64>, Vec<u32>, Vec<bool>)> {
        let Lexical {
            scores,
            touched,
            evidence,
            floor,
            query_words,
        } = *lexical;
        let n = self.len();
        let mut candidates: Vec<(u32, f32)> = fusion
            .similarity
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_finite())
            .map(|(d, &s)| (d as u32, s))
            .filter(|&(d, _)| allowed(d))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if candidates.len() > DENSE_CANDIDATES {
            candidates.select_nth_unstable_by(DENSE_CANDIDATES - 1, order);
            candidates.truncate(DENSE_CANDIDATES);
        }
        candidates.sort_unstable_by(order);
        let high = candidates.first().map_or(0.0, |c| c.1);
        // Scaled from the floor, or from the last candidate when that is
        // lower: a candidate at the floor counts for nothing, so where many
        // tools are close to the query (near-duplicate models, say) the
        // small differences between them are not stretched to the whole
        // range.
        let low = candidates.last().map_or(0.0, |c| c.1).min(MIN_SIMILARITY);
        let span = f64::from(high - low);

        let mut ok = vec![false; n];
        let mut fused = vec![0.0; n];
        let mut fused_touched = Vec::new();
        let lexical_ok = |d: u32| clears_floor(scores, evidence, floor, d);
        // One pass over the lexical matches: the best score, which
        // normalises them, and the most query words one of them holds.
        // The lexical search is trusted as far as it explains the query:
        // when one lexical match holds every query word, the similarities
        // only break ties; when the best holds none, they weigh in full.
        let (best, most_words) =
            touched
                .iter()
                .filter(|&&d| lexical_ok(d))
                .fold((0.0f64, 0u8), |(best, most), &d| {
                    let score = scores.get(d as usize).copied().unwrap_or(0.0);
                    let words = evidence.get(d as usize).copied().unwrap_or(0);
                    (best.max(score), most.max(words))
                });
        let coverage = (f64::from(most_words) / query_words.max(1) as f64).min(1.0);
        let weight = fusion.weight.clamp(0.0, 1.0) * (1.0 - coverage).powf(COVERAGE_EXPONENT);
        // A similarity on the candidates' scale: 0 at `low` or below.
        let scaled = |similarity: f32| {
            if !similarity.is_finite() || similarity <= low {
                0.0
            } else if span > 0.0 {
                (f64::from(similarity - low) / span).min(1.0)
            } else {
                1.0
            }
        };
        // Every lexical match counts its similarity on that scale, a match
        // just outside the candidates too (it is not dissimilar for
        // being the 31st).
        for &d in touched {
            if !lexical_ok(d) || best <= 0.0 {
                continue;
            }
            if let (Some(f), Some(o), Some(&s)) = (
                fused.get_mut(d as usize),
                ok.get_mut(d as usize),
                scores.get(d as usize),
            ) {
                let similarity = fusion.similarity.get(d as usize).copied().unwrap_or(0.0);
                *f = (1.0 - weight) * (s / best).powf(LEXICAL_EXPONENT)
                    + weight * scaled(similarity);
                *o = true;
                fused_touched.push(d);
            }
        }
        for &(d, similarity) in &candidates {
            if let (Some(f), Some(o)) = (fused.get_mut(d as usize), ok.get_mut(d as usize)) {
                if *o {
                    // A lexical match: counted above.
                    continue;
                }
                fused_touched.push(d);
                // A tiny floor keeps the last candidate a (low) result.
                *f = weight * scaled(similarity).max(1e-6);
                *o = similarity >= MIN_SIMILARITY;
            }
        }
        // A folded copy's eligibility counts for the tool it folds into.
        for &(copy, first) in &self.same_operations {
            if ok.get(copy as usize).copied().unwrap_or(false)
                && let Some(kept) = ok.get_mut(first as usize)
            {
                *kept = true;
            }
        }
        Some((fused, fused_touched, ok))
    }

    /// The tool that catalog-wide tool `doc` folds into, if it makes the
    /// same call as one its server lists earlier.
    fn folds_into(&self, doc: u32) -> Option<u32> {
        let at = self
            .same_operations
            .binary_search_by_key(&doc, |&(copy, _)| copy)
            .ok()?;
        self.same_operations.get(at).map(|&(_, first)| first)
    }

    /// A folded copy's evidence counts for the tool it folds into (in the
    /// scored segments: a server's copies fold within its segment).
    fn fold_same_operation_evidence(&self, out: &mut Scores) {
        if self.same_operations.is_empty() {
            return;
        }
        let scored: Vec<(u32, u32)> = out.scored_segments(self).collect();
        for (start, len) in scored {
            let from = self
                .same_operations
                .partition_point(|&(copy, _)| copy < start);
            for &(copy, first) in self.same_operations.get(from..).unwrap_or(&[]) {
                if copy >= start + len {
                    break;
                }
                // A pruned segment scores a copy with its first, or neither.
                let (Some(copy), Some(first)) = (out.slot(self, copy), out.slot(self, first))
                else {
                    continue;
                };
                let words = out.evidence.get(copy as usize).copied().unwrap_or(0);
                if let Some(kept) = out.evidence.get_mut(first as usize) {
                    *kept = (*kept).max(words);
                }
            }
        }
    }

    /// Tools that make the same call as a tool their server lists earlier
    /// give their score to it (the best of them counts) and drop out, so an
    /// operation listed several times is one result, under its first name.
    fn fold_same_operations(&self, out: &mut Scores) {
        if self.same_operations.is_empty() {
            return;
        }
        let mut added = Vec::new();
        let mut touched = std::mem::take(&mut out.touched);
        touched.retain(|&slot| {
            let doc = out.doc(slot);
            let Some(first) = self.folds_into(doc) else {
                return true;
            };
            // A pruned segment scores a copy with its first.
            let Some(first) = out.slot(self, first) else {
                return true;
            };
            let score = out
                .scores
                .get_mut(slot as usize)
                .map_or(0.0, std::mem::take);
            if let Some(best) = out.scores.get_mut(first as usize) {
                if *best == 0.0 && score > 0.0 {
                    added.push(first);
                }
                *best = best.max(score);
            }
            false
        });
        touched.extend(added);
        out.touched = touched;
    }

    /// The tools that catalog-wide tool `doc` needs first (see
    /// [`EnhancedSegment::build_prerequisites`]).
    fn prerequisites_of(&self, doc: u32) -> Vec<u32> {
        let Some((at, local)) = self.locate(doc) else {
            return Vec::new();
        };
        let start = self.start(at);
        self.segments
            .get(at)
            .and_then(|s| s.prerequisites.get(&local))
            .into_iter()
            .flatten()
            .map(|&d| start + d)
            .collect()
    }

    /// Prerequisites as a score: each tool that provides a required input
    /// of one of `results` (slots of `out`; see
    /// [`EnhancedSegment::build_prerequisites`]) scores at least
    /// [`PREREQUISITE_SHARE`] of that result's score, and is a result
    /// itself. It competes by score: it never pushes out a match that
    /// scores more than it now does. Only the best `limit` results lend:
    /// a prerequisite scores less than the result it follows, so one lent
    /// by a result outside them stays outside them too.
    fn score_prerequisites(
        &self,
        out: &mut Scores,
        results: &mut Vec<u32>,
        limit: usize,
        allowed: &impl Fn(u32) -> bool,
    ) {
        let scored = results
            .iter()
            .map(|&slot| (out.score(slot), slot))
            .collect();
        let mut lent: Vec<(u32, f64)> = Vec::new();
        for slot in best_first(scored, limit) {
            let share = PREREQUISITE_SHARE * out.score(slot);
            for needed in self.prerequisites_of(out.doc(slot)) {
                // The lookups of a scored tool are scored with it.
                if let Some(at) = out.slot(self, needed).filter(|_| allowed(needed)) {
                    lent.push((at, share));
                }
            }
        }
        for (at, share) in lent {
            if let Some(score) = out.scores.get_mut(at as usize)
                && *score < share
            {
                if *score == 0.0 {
                    out.touched.push(at);
                }
                *score = share;
                if !results.contains(&at) {
                    results.push(at);
                }
            }
        }
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
        let mut hits: Vec<(u32, u32)> = Vec::new();
        for word in words {
            hits.clear();
            let key = text_hash(word);
            self.gather(
                self.directory.as_deref().map(|d| d.exact_names.get(word)),
                |segment| Some(segment.exact_names.get(&key)),
                &mut hits,
            );
            // Segment order, each segment's tools in its own order.
            hits.sort_by_key(|&(at, _)| at);
            for &(at, local) in &hits {
                let doc = self.start(at as usize) + local;
                let named = self
                    .tool(doc)
                    .is_some_and(|tool| exact_names(tool).iter().any(|name| name == word));
                if named && !found.contains(&doc) {
                    found.push(doc);
                }
            }
        }
        found
    }
}

/// Whether tool `doc` is a lexical match: some query word matches it
/// through a term that is not boilerplate, and its score reaches the
/// relevance `floor`.
fn clears_floor(scores: &[f64], evidence: &[u8], floor: f64, doc: u32) -> bool {
    evidence.get(doc as usize).is_some_and(|&words| words >= 1)
        && scores
            .get(doc as usize)
            .is_some_and(|&score| score >= floor)
}

/// A term's BM25 contribution: its `weight` (query weight times IDF) with
/// its field-weighted, length-normalised count `tf` saturated by [`K1`].
fn saturated(weight: f64, tf: f64) -> f64 {
    weight * tf * (K1 + 1.0) / (tf + K1)
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

mod directory;
pub use directory::Directory;
mod dictionary;
mod lists;
use dictionary::{Dictionary, SortedTerms, text_hash};
use lists::{KeyedLists, Lists};
mod scoring;
use scoring::{Cutoff, Scores};

#[cfg(test)]
mod reference;
#[cfg(test)]
mod segment_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn tool_with(
        server: &str,
        name: &str,
        description: &str,
        schema: serde_json::Value,
    ) -> Arc<Tool> {
        let spec = ToolSpec::new(name, description, schema);
        Arc::new(Tool::new(
            quiver_tool::naming::mcp_tool_name(server, name),
            ToolSource::Mcp(server.into()),
            &spec,
        ))
    }

    /// An input schema that requires one parameter.
    fn requiring(parameter: &str) -> serde_json::Value {
        json!({"type": "object", "properties": {parameter: {}}, "required": [parameter]})
    }

    fn tool(server: &str, name: &str, description: &str) -> Arc<Tool> {
        tool_with(
            server,
            name,
            description,
            json!({"type": "object", "properties": {"path": {"description": "File path"}}}),
        )
    }

    fn names(hits: &[Scored]) -> Vec<&str> {
        hits.iter().map(|h| h.tool.original_name()).collect()
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn identifiers_split_at_camel_case() {
        let mut parts = Vec::new();
        identifier_parts(
            "getUserToken HTTPServer snake_case kebab-case v2 Ünïcode",
            |p| parts.push(p.to_owned()),
        );
        assert_eq!(
            parts,
            [
                "get",
                "user",
                "token",
                "http",
                "server",
                "snake",
                "case",
                "kebab",
                "case",
                "v2",
                "ünïcode"
            ]
        );
    }

    #[test]
    fn cjk_text_becomes_character_pairs() {
        let mut parts = Vec::new();
        identifier_parts("获取热榜 of 36氪", |p| parts.push(p.to_owned()));
        assert_eq!(parts, ["获取", "取热", "热榜", "of", "36", "氪"]);
        let index = EnhancedIndex::build(
            [
                tool("t", "get_rank", "获取热榜"),
                tool("t", "get_news", "获取新闻"),
            ]
            .iter(),
        );
        assert_eq!(names(&index.search("热榜", 5)), ["get_rank"]);
    }

    fn messaging_index() -> EnhancedIndex {
        EnhancedIndex::build(
            [
                tool("t", "word_count", "Count the words of a text"),
                tool("t", "echo", "Echo the given text back"),
                tool("t", "CreateMessage", "Send a message from the account"),
            ]
            .iter(),
        )
    }

    #[test]
    fn a_limit_beyond_the_catalog_returns_every_match() {
        let index = messaging_index();
        assert_eq!(
            names(&index.search("send a message", usize::MAX)),
            ["CreateMessage"]
        );
    }

    #[test]
    fn fusion_leaves_a_fully_explained_query_to_the_lexical_order() {
        let index = messaging_index();
        // The dense side prefers CreateMessage, but a lexical match holds
        // every query word: the similarities only break ties.
        let similarity = [0.30, 0.32, 0.90];
        let fusion = Fusion {
            similarity: &similarity,
            weight: 0.9,
        };
        let hits = index.search_fused("count words", 3, Some(&fusion));
        assert_eq!(names(&hits)[0], "word_count");
    }

    #[test]
    fn fusion_keeps_a_mostly_explained_query_in_its_lexical_order() {
        let index = EnhancedIndex::build(
            [
                tool("t", "tally", "Count the words of a text"),
                tool("t", "echo", "Echo the given text back"),
                tool("t", "CreateMessage", "Send a message from the account"),
                tool("t", "list_files", "List the files of a folder"),
            ]
            .iter(),
        );
        // tally and echo each hold two of the three words, tally a little
        // better; the dense side prefers echo. A third of the query
        // unexplained leaves the similarities (1/3)^2.6 of the weight, too
        // little to overturn the lexical order (a third of it would).
        let lexical = index.search("text words back", 4);
        assert_eq!(names(&lexical)[..2], ["tally", "echo"]);
        let similarity = [0.30, 0.90, 0.50, 0.20];
        let fusion = Fusion {
            similarity: &similarity,
            weight: 0.9,
        };
        let hits = index.search_fused("text words back", 4, Some(&fusion));
        assert_eq!(names(&hits)[..2], ["tally", "echo"], "{hits:?}");
    }

    #[test]
    fn fusion_finds_a_close_tool_no_word_matches_and_nothing_far() {
        let index = messaging_index();
        assert!(index.search("sms my friend", 3).is_empty());
        let close = [0.10, 0.12, MIN_SIMILARITY + 0.05];
        let fusion = Fusion {
            similarity: &close,
            weight: 0.3,
        };
        let hits = index.search_fused("sms my friend", 3, Some(&fusion));
        assert_eq!(names(&hits), ["CreateMessage"]);
        let far = [0.10, 0.12, MIN_SIMILARITY - 0.05];
        let fusion = Fusion {
            similarity: &far,
            weight: 0.3,
        };
        assert!(
            index
                .search_fused("sms my friend", 3, Some(&fusion))
                .is_empty()
        );
    }

    #[test]
    fn fusion_lifts_a_similar_tool_over_a_match_of_one_word_in_three() {
        let index = messaging_index();
        // Lexically only "text" matches, and not CreateMessage.
        let lexical = index.search("text someone's phone", 3);
        assert!(
            !names(&lexical).contains(&"CreateMessage"),
            "{:?}",
            names(&lexical)
        );
        let similarity = [0.20, 0.18, 0.60];
        let fusion = Fusion {
            similarity: &similarity,
            weight: 1.0,
        };
        let hits = index.search_fused("text someone's phone", 3, Some(&fusion));
        assert_eq!(names(&hits)[0], "CreateMessage", "{:?}", names(&hits));
    }

    #[test]
    fn fusion_does_not_stretch_small_differences_between_close_tools() {
        let index = EnhancedIndex::build(
            [
                tool("t", "alpha_reader", "Reads alpha records"),
                tool(
                    "t",
                    "beta_reader",
                    "Reads beta records, one page after another, with filters",
                ),
                tool("t", "gamma", "Keeps a ledger"),
            ]
            .iter(),
        );
        let query = "alpha beta yak zebra";
        let lexical = index.search(query, 3);
        assert_eq!(names(&lexical), ["alpha_reader", "beta_reader"]);
        // Each match holds a quarter of the query, so the similarities
        // weigh in. Every tool is about as similar to it, the lexical
        // second a little more than the first: scaled from the floor, not
        // from the least similar of them, that difference stays small and
        // the lexical order stands.
        let similarity = [0.60, 0.61, 0.62];
        let fusion = Fusion {
            similarity: &similarity,
            weight: 1.0,
        };
        let fused = index.search_fused(query, 3, Some(&fusion));
        assert_eq!(
            names(&fused)[..2],
            ["alpha_reader", "beta_reader"],
            "{:?}",
            names(&fused)
        );
    }

    #[test]
    fn a_lexical_match_outside_the_dense_candidates_keeps_its_similarity() {
        let fillers: Vec<String> = (0..DENSE_CANDIDATES)
            .map(|i| format!("ledger_{i}"))
            .collect();
        let mut tools = vec![
            tool("t", "alpha_reader", "Reads alpha records"),
            tool(
                "t",
                "beta_reader",
                "Reads beta records, one page after another, with filters",
            ),
        ];
        tools.extend(fillers.iter().map(|name| tool("t", name, "Keeps a ledger")));
        let index = EnhancedIndex::build(tools.iter());
        let query = "alpha beta yak zebra";
        assert_eq!(
            names(&index.search(query, 3)),
            ["alpha_reader", "beta_reader"]
        );
        // The fillers take every candidate place; beta_reader is far more
        // similar to the query than alpha_reader, though outside them.
        let mut similarity = vec![0.90f32; tools.len()];
        similarity[0] = 0.30;
        similarity[1] = 0.80;
        let fusion = Fusion {
            similarity: &similarity,
            weight: 1.0,
        };
        let fused = index.search_fused(query, tools.len(), Some(&fusion));
        let position = |name: &str| names(&fused).iter().position(|n| *n == name);
        assert!(
            position("beta_reader") < position("alpha_reader"),
            "{:?}",
            names(&fused)
        );
    }

    #[test]
    fn deletion_hashes_are_the_hashes_of_the_shorter_words() {
        let hash = |word: &str| {
            let mut out = Vec::new();
            deletion_hashes(word.as_bytes(), 0, &mut out);
            out[0]
        };
        let mut one = Vec::new();
        deletion_hashes(b"abcd", 1, &mut one);
        assert_eq!(one, ["abcd", "bcd", "acd", "abd", "abc"].map(hash));
        let mut two = Vec::new();
        deletion_hashes(b"abc", 2, &mut two);
        let expected = ["abc", "bc", "c", "b", "ac", "a", "ab"].map(hash);
        assert_eq!(two, expected);
    }

    #[test]
    fn stemming_matches_word_forms() {
        let index = EnhancedIndex::build(
            [tool("b", "take_screenshot", "Takes screenshots of pages")].iter(),
        );
        assert_eq!(index.search("screenshotting page", 5).len(), 1);
    }

    #[test]
    fn weak_or_boilerplate_evidence_is_no_match() {
        let tools: Vec<Arc<Tool>> = [
            ("create_issue", "Create an issue in a GitHub repository"),
            ("list_issues", "List the issues of a GitHub repository"),
            (
                "merge_pull_request",
                "Merge a pull request of a GitHub repository",
            ),
            (
                "get_file_contents",
                "Get the contents of a file in a GitHub repository",
            ),
        ]
        .into_iter()
        .map(|(name, description)| tool("github", name, description))
        .collect();
        let index = EnhancedIndex::build(tools.iter());
        // Every tool shares `github` and `repository`: no evidence alone.
        assert!(index.search("github repository", 5).is_empty());
        assert_eq!(
            names(&index.search("github issue", 5))[..2],
            ["create_issue", "list_issues"]
        );
        // The shared `mcp_github_` prefix is not a name match.
        assert!(index.search("mcp", 5).is_empty());
        assert!(index.search("mcp_github_", 5).is_empty());
        assert_eq!(
            names(&index.search("get_file_con", 5)),
            ["get_file_contents"]
        );
        // An exact name always clears the floor.
        assert_eq!(
            names(&index.search("mcp_github_list_issues", 5))[0],
            "list_issues"
        );
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
    fn typos_are_tolerated_on_words_and_stems() {
        let tools = [
            tool("s", "navigate", "Navigate the browser to a URL"),
            tool("s", "history", "Events in history on a date"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        assert_eq!(names(&index.search("navgate browser", 5))[0], "navigate");
        assert_eq!(names(&index.search("brwser", 5)), ["navigate"]);
        // A transposed letter in an inflected word: `navigate` is a word
        // of the index even though its stem is `navig`.
        assert_eq!(names(&index.search("naviagte", 5)), ["navigate"]);
        // An unknown word form whose stem is one edit from a known stem.
        assert_eq!(names(&index.search("historical", 5)), ["history"]);
    }

    #[test]
    fn synonyms_reach_the_other_words_of_their_group() {
        let tools = [
            tool("s", "web_search", "Search the web"),
            tool("s", "convert", "Convert a file to markdown"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        assert_eq!(names(&index.search("find it", 5)), ["web_search"]);
        assert_eq!(
            names(&index.search("look it up on the internet", 5)),
            ["web_search"]
        );
        assert_eq!(names(&index.search("make an md file", 5))[0], "convert");
    }

    #[test]
    fn server_descriptions_rank_their_tools() {
        let a = [tool("alpha", "open_page", "Open a page")];
        let b = [tool("beta", "open_page", "Open a page")];
        let index = EnhancedIndex::build_described([
            (Some("Spreadsheet editing"), &a[..]),
            (Some("Browser automation"), &b[..]),
        ]);
        let hits = index.search("open a page in the browser", 5);
        assert_eq!(hits[0].tool.source().group(), Some("beta"));
        // Context adds to matching tools; it matches no tool alone.
        assert!(index.search("browser", 5).is_empty());
    }

    #[test]
    fn a_tool_that_needs_an_identifier_brings_its_lookup() {
        let tools = [
            tool_with("s", "AddAlarm", "Add an alarm", requiring("token")),
            tool_with(
                "s",
                "GetUserToken",
                "Get the token of a user",
                requiring("password"),
            ),
            tool_with("s", "CheckToken", "Check a token", requiring("token")),
            tool_with(
                "s",
                "get_docs",
                "Library documentation",
                requiring("libraryId"),
            ),
            tool_with(
                "s",
                "resolve_library_id",
                "Resolve a name",
                requiring("libraryName"),
            ),
            tool_with("t", "GetUserToken", "Elsewhere", requiring("password")),
            // Lookups that take the identifier instead of giving it, and a
            // bare `id`, make no prerequisite.
            tool_with(
                "u",
                "delete_comment",
                "Delete a comment",
                requiring("comment_id"),
            ),
            tool_with("u", "get_comments_by_ids", "Comments", requiring("ids")),
            tool_with("u", "delete_page", "Delete a page", requiring("id")),
            tool_with("u", "get_page_id", "Page id", requiring("title")),
        ];
        let index = EnhancedIndex::build(tools.iter());
        let hits = index.search("add an alarm", 3);
        assert_eq!(names(&hits)[..2], ["AddAlarm", "GetUserToken"]);
        assert_eq!(hits[1].tool.source().group(), Some("s"));
        assert_eq!(
            names(&index.search("library documentation", 2)),
            ["get_docs", "resolve_library_id"]
        );
        // Only the tools that need a token or a library id have one.
        let mut needing: Vec<u32> = index.segments[0].prerequisites.keys().copied().collect();
        needing.sort_unstable();
        assert_eq!(needing, [0, 2, 3]);
        // Filters still apply.
        let hits = index.search("server:t add an alarm token", 3);
        assert!(hits.iter().all(|h| h.tool.source().group() == Some("t")));
    }

    #[test]
    fn a_prerequisite_competes_by_score_and_pushes_out_no_better_match() {
        // Two servers' `send_message`, scored alike; the first requires a
        // token its server's `GetUserToken` gives.
        let first = [
            tool_with(
                "chat",
                "send_message",
                "Send a message to a channel",
                requiring("token"),
            ),
            tool_with(
                "chat",
                "GetUserToken",
                "Get the token of a user",
                requiring("password"),
            ),
        ];
        let second = [
            tool_with(
                "mail",
                "send_message",
                "Send a message to a channel",
                requiring("address"),
            ),
            tool("mail", "list_folders", "List the mail folders"),
            tool("mail", "delete_draft", "Delete a draft"),
        ];
        let index = EnhancedIndex::build_described([(None, &first[..]), (None, &second[..])]);
        let hits = index.search("send a message to a channel", 5);
        let found: Vec<(Option<&str>, &str)> = hits
            .iter()
            .map(|h| (h.tool.source().group(), h.tool.original_name()))
            .collect();
        // The lookup ranks below the equal match (a splice would put it
        // second), just below the tool that needs it by score.
        assert_eq!(
            found,
            [
                (Some("chat"), "send_message"),
                (Some("mail"), "send_message"),
                (Some("chat"), "GetUserToken"),
            ]
        );
        let share = hits[2].score / hits[0].score;
        assert!((share - PREREQUISITE_SHARE).abs() < 1e-9, "{share}");
        let reference = super::reference::EnhancedIndex::build(first.iter().chain(&second));
        let expected: Vec<&str> = names(&hits);
        assert_eq!(
            names(&reference.search("send a message to a channel", 5)),
            expected
        );
    }

    #[test]
    fn the_first_results_each_bring_their_lookups() {
        let lv3 = [tool_with(
            "lv3",
            "QueryMeeting",
            "Query the details of a meeting: meeting details",
            requiring("meeting"),
        )];
        let bank = [
            tool_with(
                "bank",
                "QueryMeeting",
                "Query a meeting",
                requiring("token"),
            ),
            tool_with(
                "bank",
                "GetUserToken",
                "Get the token of a user",
                requiring("password"),
            ),
            tool_with("bank", "QueryAlarm", "Query an alarm", requiring("token")),
        ];
        let index = EnhancedIndex::build_described([(None, &lv3[..]), (None, &bank[..])]);
        // The best needs no token; the second does, and brings its lookup.
        let hits = index.search("query the meeting details", 5);
        let found: Vec<(Option<&str>, &str)> = hits
            .iter()
            .map(|h| (h.tool.source().group(), h.tool.original_name()))
            .collect();
        assert_eq!(
            found[..3],
            [
                (Some("lv3"), "QueryMeeting"),
                (Some("bank"), "QueryMeeting"),
                (Some("bank"), "GetUserToken"),
            ]
        );
    }

    #[test]
    fn tools_making_the_same_call_are_one_result_under_the_first_listed() {
        let entry = |name: &str, description: &str, call: &str, position: u32| {
            let spec = ToolSpec::new(name, description, json!({"type": "object"}))
                .with_operation(Some(call.to_owned()));
            Arc::new(
                Tool::new(
                    quiver_tool::naming::mcp_tool_name("hub", name),
                    ToolSource::Mcp("hub".into()),
                    &spec,
                )
                .at_position(position),
            )
        };
        // Sorted by name, the copy comes first; the server lists it second.
        let tools = [
            entry(
                "encoder#2",
                "Sentence embeddings for similarity",
                "load('encoder')",
                1,
            ),
            entry("encoder", "Text vectors", "load('encoder')", 0),
            entry("resnet", "Image classification", "load('resnet')", 2),
        ];
        let index = EnhancedIndex::build(tools.iter());
        // The copy's words find the operation, under its first name.
        assert_eq!(names(&index.search("sentence similarity", 5)), ["encoder"]);
        assert_eq!(names(&index.search("text vectors", 5)), ["encoder"]);
        // Asked for by its exact name, the copy is still there.
        assert_eq!(names(&index.search("encoder#2", 5))[0], "encoder#2");
        assert_eq!(names(&index.search("image classification", 5)), ["resnet"]);
    }

    #[test]
    fn terms_match_the_terms_they_begin_or_are_begun_by() {
        let tools = [
            tool("s", "summarize", "Write a summary of a text"),
            tool("s", "searcher", "Searcher of articles"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        // `summarize` stems to `summar`, `summary` to `summari`.
        assert_eq!(names(&index.search("summarize", 5))[0], "summarize");
        assert_eq!(names(&index.search("a summary", 5)), ["summarize"]);
        assert_eq!(names(&index.search("search", 5)), ["searcher"]);
        // An unknown word reaches the indexed terms it begins with.
        assert_eq!(names(&index.search("summarization", 5)), ["summarize"]);
        // A shorter term of fewer than five letters links nothing.
        let tools = [
            tool("s", "port", "Open a port"),
            tool("s", "portal", "Open a portal"),
        ];
        let index = EnhancedIndex::build(tools.iter());
        assert_eq!(names(&index.search("portal", 5)), ["portal"]);
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
