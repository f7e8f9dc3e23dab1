//! Classic tool retrieval: BM25 over each deferred tool's name, description
//! and top-level parameter names, with a name-substring fallback.
//!
//! Parameters are the usual ones (k1 = 1.5, b = 0.75) and the idf is
//! `ln(1 + (N - df + 0.5) / (df + 0.5))`, so every matching term scores
//! above zero. Tokens are the lowercased runs of `[A-Za-z0-9]`; every other
//! character (including `_ . - :` in names) separates them. A query term
//! that occurs twice counts twice. Ties keep catalog order.

use std::collections::HashMap;
use std::sync::Arc;

use crate::name_text::NameText;
use quiver_tool::tool::Tool;

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.5;
/// BM25 length normalisation.
pub const B: f64 = 0.75;

/// Calls `each` with every lowercase `[a-z0-9]+` token of `text`.
pub fn tokenize(text: &str, mut each: impl FnMut(&str)) {
    let mut token = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            token.push(c.to_ascii_lowercase());
        } else if !token.is_empty() {
            each(&token);
            token.clear();
        }
    }
    if !token.is_empty() {
        each(&token);
    }
}

/// One search hit.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The tool.
    pub tool: Arc<Tool>,
    /// Its BM25 score; `0.0` for a name-substring fallback hit.
    pub score: f64,
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: u32,
}

/// One source's tools, tokenized and indexed on their own: postings with
/// segment-local term and document ids, and the raw document lengths. The
/// corpus statistics (tool count, document frequencies, average length) are
/// combined across segments at query time by [`SearchIndex`], so a change
/// to one source rebuilds its segment only.
#[derive(Debug, Default)]
pub struct ClassicSegment {
    docs: Vec<Arc<Tool>>,
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    doc_len: Vec<u32>,
    total_len: u64,
    /// Its tools' names for the substring fallback, made on first use.
    names: std::sync::OnceLock<NameText>,
}

impl ClassicSegment {
    /// Indexes `tools`; their order is the tie-break order.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Arc<Tool>>) -> ClassicSegment {
        let mut segment = ClassicSegment::default();
        // The document's term ids, sorted afterwards so that equal ids form
        // runs: cheaper than a map per document.
        let mut doc_terms: Vec<u32> = Vec::new();
        for tool in tools {
            let doc = segment.docs.len() as u32;
            doc_terms.clear();
            let mut add = |token: &str| {
                // Look up first: most tokens are known terms, and building
                // the owned key only for new ones saves an allocation each.
                let term = match segment.terms.get(token) {
                    Some(&term) => term,
                    None => {
                        let term = segment.terms.len() as u32;
                        segment.terms.insert(token.into(), term);
                        segment.postings.push(Vec::new());
                        term
                    }
                };
                doc_terms.push(term);
            };
            tokenize(tool.name(), &mut add);
            if let Some(title) = tool.title() {
                tokenize(title, &mut add);
            }
            tokenize(tool.description(), &mut add);
            for parameter in tool.parameter_names() {
                tokenize(&parameter, &mut add);
            }
            doc_terms.sort_unstable();
            for run in doc_terms.chunk_by(|a, b| a == b) {
                if let Some(list) = run
                    .first()
                    .and_then(|&t| segment.postings.get_mut(t as usize))
                {
                    list.push(Posting {
                        doc,
                        tf: run.len() as u32,
                    });
                }
            }
            segment.doc_len.push(doc_terms.len() as u32);
            segment.total_len += doc_terms.len() as u64;
            segment.docs.push(tool.clone());
        }
        segment.postings.iter_mut().for_each(Vec::shrink_to_fit);
        segment
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the segment holds no tool.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The indexed tools, in tie-break order.
    pub fn tools(&self) -> &[Arc<Tool>] {
        &self.docs
    }
}

/// BM25 over a catalog's deferred tools: segments (one per source, see
/// [`ClassicSegment`]) in catalog order, scored with statistics combined
/// across them, so the scores are those of one index over every tool.
#[derive(Debug, Default)]
pub struct SearchIndex {
    segments: Vec<Arc<ClassicSegment>>,
    /// Where each segment's documents start; one more entry than segments.
    offsets: Vec<u32>,
    avgdl: f64,
}

impl SearchIndex {
    /// Indexes `tools` as one segment; their order is the tie-break order.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Arc<Tool>>) -> SearchIndex {
        SearchIndex::from_segments(vec![Arc::new(ClassicSegment::build(tools))])
    }

    /// Combines segments, in tie-break order; costs one step per segment.
    pub fn from_segments(segments: Vec<Arc<ClassicSegment>>) -> SearchIndex {
        let mut offsets = Vec::with_capacity(segments.len() + 1);
        let mut total = 0u32;
        let mut total_len = 0u64;
        for segment in &segments {
            offsets.push(total);
            total += segment.docs.len() as u32;
            total_len += segment.total_len;
        }
        offsets.push(total);
        // Lengths are whole numbers far below 2^53: this sum is exactly the
        // one a single index would make.
        let avgdl = if total == 0 {
            0.0
        } else {
            total_len as f64 / f64::from(total)
        };
        SearchIndex {
            segments,
            offsets,
            avgdl,
        }
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.offsets.last().copied().unwrap_or(0) as usize
    }

    /// Whether the index holds no tool.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tool with catalog-wide document number `doc`.
    fn tool(&self, doc: u32) -> Option<&Arc<Tool>> {
        let segment = self.offsets.partition_point(|&start| start <= doc);
        let index = segment.checked_sub(1)?;
        let start = *self.offsets.get(index)?;
        self.segments.get(index)?.docs.get((doc - start) as usize)
    }

    /// BM25 scores of every tool for `query`, in catalog order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.len()];
        self.accumulate(query, &mut scores, &mut Vec::new());
        scores
    }

    fn accumulate(&self, query: &str, scores: &mut [f64], touched: &mut Vec<u32>) {
        let n = self.len();
        let mut found: Vec<(usize, u32)> = Vec::new();
        tokenize(query, |token| {
            found.clear();
            let mut df = 0;
            for (at, segment) in self.segments.iter().enumerate() {
                if let Some(&term) = segment.terms.get(token) {
                    df += segment.postings.get(term as usize).map_or(0, Vec::len);
                    found.push((at, term));
                }
            }
            if found.is_empty() {
                return;
            }
            let idf = idf(n, df);
            for &(at, term) in &found {
                let (Some(segment), Some(&start)) = (self.segments.get(at), self.offsets.get(at))
                else {
                    continue;
                };
                for posting in segment.postings.get(term as usize).into_iter().flatten() {
                    let tf = posting.tf as f64;
                    let dl = segment
                        .doc_len
                        .get(posting.doc as usize)
                        .copied()
                        .unwrap_or(0) as f64;
                    let norm = K1 * (1.0 - B + B * dl / self.avgdl);
                    let doc = start + posting.doc;
                    if let Some(score) = scores.get_mut(doc as usize) {
                        if *score == 0.0 {
                            touched.push(doc);
                        }
                        *score += idf * tf * (K1 + 1.0) / (tf + norm);
                    }
                }
            }
        });
    }

    /// The best `limit` tools for `query`: by BM25 score, ties in catalog
    /// order; when nothing scores above zero, tools whose name contains the
    /// query (case-insensitive), in catalog order, with score 0.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Scored> {
        if limit == 0 || self.is_empty() {
            return Vec::new();
        }
        let mut scores = vec![0.0; self.len()];
        let mut touched = Vec::new();
        self.accumulate(query, &mut scores, &mut touched);
        let ranked: Vec<Scored> = top(&scores, touched, limit, |_| true)
            .into_iter()
            .filter_map(|doc| {
                self.tool(doc).map(|tool| Scored {
                    tool: tool.clone(),
                    score: scores.get(doc as usize).copied().unwrap_or(0.0),
                })
            })
            .collect();
        if ranked.is_empty() {
            return segments_substring_matches(
                self.segments
                    .iter()
                    .zip(&self.offsets)
                    .map(|(segment, &start)| {
                        let names = segment.names.get_or_init(|| NameText::build(&segment.docs));
                        (start, segment.docs.as_slice(), names)
                    }),
                query,
                limit,
                |_| true,
            );
        }
        ranked
    }
}

/// BM25's idf: `ln(1 + (N - df + 0.5) / (df + 0.5))`, always above zero.
pub fn idf(documents: usize, document_frequency: usize) -> f64 {
    let (n, df) = (documents as f64, document_frequency as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The best `limit` of the `touched` documents that score above zero and
/// are `allowed`: by score, ties in document order.
pub fn rank(
    docs: &[Arc<Tool>],
    scores: &[f64],
    touched: Vec<u32>,
    limit: usize,
    allowed: impl Fn(u32) -> bool,
) -> Vec<Scored> {
    top(scores, touched, limit, allowed)
        .into_iter()
        .filter_map(|doc| scored(docs, scores, doc))
        .collect()
}

/// The documents [`rank`] returns, as indexes into `scores`.
pub fn top(
    scores: &[f64],
    touched: Vec<u32>,
    limit: usize,
    allowed: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let score_of = |doc: u32| scores.get(doc as usize).copied().unwrap_or(0.0);
    let hits = touched
        .into_iter()
        .filter(|&d| score_of(d) > 0.0 && allowed(d))
        .map(|d| (score_of(d), d))
        .collect();
    best_first(hits, limit)
}

/// The ids of the `limit` best (score, id) pairs: highest score first,
/// ties by id.
pub fn best_first(mut hits: Vec<(f64, u32)>, limit: usize) -> Vec<u32> {
    let order = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if limit == 0 {
        return Vec::new();
    }
    if hits.len() > limit {
        hits.select_nth_unstable_by(limit - 1, order);
        hits.truncate(limit);
    }
    hits.sort_unstable_by(order);
    hits.into_iter().map(|(_, id)| id).collect()
}

/// Document `doc` as a hit with its score from `scores`.
pub fn scored(docs: &[Arc<Tool>], scores: &[f64], doc: u32) -> Option<Scored> {
    docs.get(doc as usize).map(|tool| Scored {
        tool: tool.clone(),
        score: scores.get(doc as usize).copied().unwrap_or(0.0),
    })
}

/// The fallback when nothing scores: `allowed` tools whose name contains
/// the query (case-insensitive), in document order, score 0. The exposed
/// name's prefix (`mcp_`, `mcp_<server>_`) is not searched: it is shared
/// by every tool of a server, so `mcp` or `github_` would match them all.
pub fn name_substring_matches<'a>(
    docs: impl IntoIterator<Item = &'a Arc<Tool>>,
    query: &str,
    limit: usize,
    allowed: impl Fn(u32) -> bool,
) -> Vec<Scored> {
    let needle = query.trim().to_lowercase();
    if needle.is_empty() {
        return Vec::new();
    }
    docs.into_iter()
        .enumerate()
        .filter(|(doc, tool)| allowed(*doc as u32) && unprefixed_name_contains(tool, &needle))
        .take(limit)
        .map(|(_, tool)| Scored {
            tool: tool.clone(),
            score: 0.0,
        })
        .collect()
}

/// [`name_substring_matches`] over segments: each segment's first
/// catalog position, its tools and their [`NameText`], in catalog order.
pub(crate) fn segments_substring_matches<'a>(
    segments: impl IntoIterator<Item = (u32, &'a [Arc<Tool>], &'a NameText)>,
    query: &str,
    limit: usize,
    allowed: impl Fn(u32) -> bool,
) -> Vec<Scored> {
    let needle = query.trim().to_lowercase();
    let mut hits = Vec::new();
    if needle.is_empty() || limit == 0 {
        return hits;
    }
    for (start, docs, names) in segments {
        names.each_match(docs, &needle, |local| {
            let doc = start + local;
            if allowed(doc)
                && let Some(tool) = docs.get(local as usize)
            {
                hits.push(Scored {
                    tool: tool.clone(),
                    score: 0.0,
                });
            }
            hits.len() < limit
        });
        if hits.len() >= limit {
            break;
        }
    }
    hits
}

/// Length of the part of `tool`'s exposed name that its source adds:
/// `mcp_<server>_`, else `mcp_`, else nothing.
pub fn exposed_prefix_len(tool: &Tool) -> usize {
    let name = tool.name();
    if let Some(rest) = name.strip_prefix("mcp_") {
        if let Some(group) = tool.source().group()
            && rest.len() > group.len()
            && rest.is_char_boundary(group.len())
            && rest[..group.len()].eq_ignore_ascii_case(
                &group.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_"),
            )
            && rest[group.len()..].starts_with('_')
        {
            return 4 + group.len() + 1;
        }
        return 4;
    }
    0
}

/// Where lowercase ASCII `needle` occurs in ASCII `name`, ignoring case:
/// the non-overlapping matches, left to right, as `str::match_indices`
/// finds them in the lowercased name.
fn ascii_matches<'a>(name: &'a str, needle: &'a str) -> impl Iterator<Item = usize> + 'a {
    let (name, needle) = (name.as_bytes(), needle.as_bytes());
    let mut from = 0;
    std::iter::from_fn(move || {
        if needle.is_empty() {
            return None;
        }
        while from + needle.len() <= name.len() {
            let at = from;
            if name[at..at + needle.len()].eq_ignore_ascii_case(needle) {
                from = at + needle.len();
                return Some(at);
            }
            from += 1;
        }
        None
    })
}

/// Whether `needle` (lowercase) occurs in `tool`'s own name, or in its
/// exposed name other than wholly inside the prefix the source adds.
pub(crate) fn unprefixed_name_contains(tool: &Tool, needle: &str) -> bool {
    let (own, exposed) = (tool.original_name(), tool.name());
    // Lowercasing a character at most triples its bytes (`İ` → `i̇`
    // adds half): a needle longer than that is in neither name, and a
    // long query costs a length comparison per tool, not a search.
    if needle.len() > 3 * own.len().max(exposed.len()) {
        return false;
    }
    if needle.is_ascii() && own.is_ascii() && exposed.is_ascii() {
        // A query of several words is in no name without a space (most
        // names), which memchr tells at once.
        if needle.contains(' ') && !own.contains(' ') && !exposed.contains(' ') {
            return false;
        }
        // The same test without lowercasing copies of both names.
        if ascii_matches(own, needle).next().is_some() {
            return true;
        }
        let prefix = exposed_prefix_len(tool);
        return ascii_matches(exposed, needle).any(|at| at + needle.len() > prefix);
    }
    if own.to_lowercase().contains(needle) {
        return true;
    }
    let name = exposed.to_lowercase();
    let prefix = exposed_prefix_len(tool);
    name.match_indices(needle)
        .any(|(at, _)| at + needle.len() > prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn tool(name: &str, description: &str, params: &[&str]) -> Arc<Tool> {
        let properties: serde_json::Map<_, _> =
            params.iter().map(|p| (p.to_string(), json!({}))).collect();
        let spec = ToolSpec::new(
            name,
            description,
            json!({"type": "object", "properties": properties}),
        );
        Arc::new(Tool::new(name.into(), ToolSource::Mcp("s".into()), &spec))
    }

    #[test]
    fn tokens_are_lowercase_alphanumeric_runs() {
        let mut tokens = Vec::new();
        tokenize("mcp_github.create-Issue:v2 héllo", |t| {
            tokens.push(t.to_owned())
        });
        assert_eq!(
            tokens,
            ["mcp", "github", "create", "issue", "v2", "h", "llo"]
        );
    }

    #[test]
    fn scores_match_the_bm25_formula() {
        let tools = [
            tool("create_issue", "Create an issue", &["title"]),
            tool("list_files", "List files in a directory", &["path"]),
            tool("delete_file", "Delete a file", &["path"]),
        ];
        let index = SearchIndex::build(tools.iter());
        // Hand computation for "issue" in doc 0: tokens create issue create
        // an issue title = 6; the other docs have 8 (list files list files
        // in a directory path) and 6 (delete file delete a file path).
        let n = 3.0f64;
        let idf = (1.0 + (n - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let tf = 2.0;
        let expected = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * 6.0 / (20.0 / 3.0)));
        let scores = index.scores("issue");
        assert!(
            (scores[0] - expected).abs() < 1e-12,
            "{} vs {expected}",
            scores[0]
        );
        assert_eq!(scores[1], 0.0);
        // A repeated query term counts twice.
        assert!((index.scores("issue issue")[0] - 2.0 * expected).abs() < 1e-12);
    }

    #[test]
    fn name_description_and_parameters_are_indexed() {
        let tools = [
            tool("alpha", "nothing here", &["repository_owner"]),
            tool("beta", "mentions owner once", &[]),
        ];
        let index = SearchIndex::build(tools.iter());
        let hits = index.search("repository", 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].tool.name(), "alpha");
    }

    #[test]
    fn ties_keep_catalog_order_and_limit_applies() {
        let tools = [
            tool("b_same", "same words", &[]),
            tool("a_same", "same words", &[]),
            tool("c_same", "same words", &[]),
        ];
        let index = SearchIndex::build(tools.iter());
        let names: Vec<_> = index
            .search("words", 2)
            .iter()
            .map(|s| s.tool.name().to_owned())
            .collect();
        assert_eq!(names, ["b_same", "a_same"]);
    }

    #[test]
    fn substring_fallback_on_names_when_nothing_scores() {
        let tools = [tool("create_issue", "x", &[]), tool("recreate", "y", &[])];
        let index = SearchIndex::build(tools.iter());
        let hits = index.search("CREAT", 5);
        let names: Vec<_> = hits.iter().map(|s| s.tool.name()).collect();
        assert_eq!(names, ["create_issue", "recreate"]);
        assert!(hits.iter().all(|h| h.score == 0.0));
        assert!(index.search("zzz", 5).is_empty());
        assert!(index.search("   ", 5).is_empty());
    }

    #[test]
    fn higher_scores_rank_first() {
        let tools = [
            tool(
                "get_weather",
                "Get the weather forecast for a city",
                &["city"],
            ),
            tool("get_time", "Get the current time", &["timezone"]),
        ];
        let index = SearchIndex::build(tools.iter());
        let hits = index.search("weather in a city", 5);
        assert_eq!(hits[0].tool.name(), "get_weather");
        assert!(hits[0].score > hits.get(1).map_or(0.0, |h| h.score));
    }
}
