//! Retrieval evaluation: recall@k, hit@k and MRR@10 of `tool_search` over
//! query sets with gold tool names, in the `../shared/catalogs/queries`
//! format.
//!
//! A tool's identity is (server, tool). When a query names its `server`,
//! only that server's tool of a gold name counts; otherwise a gold name
//! matches a tool of that name on any server.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Scored;

/// Ranks looked at for MRR.
pub const MRR_DEPTH: usize = 10;

/// Misses kept per query set in a report.
pub const MAX_MISSES: usize = 50;

/// A query-set file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The file could not be read.
    #[error("cannot read query set {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a query set.
    #[error("{file}:{line}:{column}: not a query set: {message}")]
    Format {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde's message (it names the field).
        message: String,
    },
}

/// One query with its gold tools.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    /// The user's words.
    pub query: String,
    /// Tool names that answer it.
    pub gold: Vec<String>,
    /// The server the gold tools belong to, when known.
    #[serde(default)]
    pub server: Option<String>,
}

/// A query-set file.
#[derive(Debug, Clone, Deserialize)]
pub struct QuerySet {
    /// The catalog file it is scored against (a name next to `queries/`).
    pub catalog: String,
    /// The queries.
    pub queries: Vec<EvalQuery>,
}

/// Reads a query-set file.
pub fn read_query_set(path: &Path) -> Result<QuerySet, EvalError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Io {
        file: file.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EvalError::Format {
        file,
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Where a query set's catalog is: `queries/x.json` names `catalog.json`,
/// found in the directory above `queries/` (or beside the query file).
pub fn catalog_path(query_file: &Path, set: &QuerySet) -> PathBuf {
    let dir = query_file.parent().unwrap_or(Path::new("."));
    let above = dir.parent().map(|p| p.join(&set.catalog));
    match above {
        Some(path) if path.exists() => path,
        _ => dir.join(&set.catalog),
    }
}

/// A query whose gold tools were not all in the top k.
#[derive(Debug, Clone, Serialize)]
pub struct Miss {
    /// The query.
    pub query: String,
    /// Gold names not retrieved.
    pub missing: Vec<String>,
    /// What was retrieved, as `server/tool`.
    pub got: Vec<String>,
}

/// Scores of one query set.
#[derive(Debug, Clone, Serialize)]
pub struct SetReport {
    /// Query-set name (its file stem).
    pub name: String,
    /// Number of queries.
    pub queries: usize,
    /// Mean fraction of gold tools in the top k.
    pub recall: f64,
    /// Fraction of queries with any gold tool in the top k.
    pub hit: f64,
    /// Mean reciprocal rank of the first gold tool within the top 10.
    pub mrr: f64,
    /// Total number of misses (only the first [`MAX_MISSES`] are listed).
    pub miss_count: usize,
    /// Queries with gold tools missing from the top k.
    pub misses: Vec<Miss>,
    /// Recall@k of each query, in the set's order (for comparing two
    /// rankings query by query).
    #[serde(skip)]
    pub recalls: Vec<f64>,
    /// Whether each query found any gold tool in the top k, in order.
    #[serde(skip)]
    pub hits: Vec<bool>,
}

fn is_gold(query: &EvalQuery, server: Option<&str>, tool: &str) -> bool {
    query.gold.iter().any(|g| g == tool)
        && query.server.as_deref().is_none_or(|s| Some(s) == server)
}

/// Runs every query of `set` through `search` (a query and how many
/// results to return; unclamped, the index as the catalog holds it) and
/// scores the top `k`.
pub fn evaluate(
    name: &str,
    search: impl Fn(&str, usize) -> Vec<Scored>,
    set: &QuerySet,
    k: usize,
) -> SetReport {
    let depth = k.max(MRR_DEPTH);
    let (mut recall, mut hit, mut mrr) = (0.0, 0.0, 0.0);
    let mut misses = Vec::new();
    let mut miss_count = 0;
    let mut recalls = Vec::with_capacity(set.queries.len());
    let mut hits = Vec::with_capacity(set.queries.len());
    for query in &set.queries {
        let results = search(&query.query, depth);
        let top: Vec<(Option<&str>, &str)> = results
            .iter()
            .map(|r| (r.tool.source().group(), r.tool.original_name()))
            .collect();
        let mut found: Vec<&str> = Vec::new();
        for (server, tool) in top.iter().take(k) {
            if is_gold(query, *server, tool) && !found.contains(tool) {
                found.push(tool);
            }
        }
        let mut gold: Vec<&str> = query.gold.iter().map(String::as_str).collect();
        gold.sort_unstable();
        gold.dedup();
        let query_recall = if gold.is_empty() {
            0.0
        } else {
            found.len() as f64 / gold.len() as f64
        };
        recall += query_recall;
        recalls.push(query_recall);
        if !found.is_empty() {
            hit += 1.0;
        }
        hits.push(!found.is_empty());
        if let Some(rank) = top
            .iter()
            .take(MRR_DEPTH)
            .position(|(server, tool)| is_gold(query, *server, tool))
        {
            mrr += 1.0 / (rank + 1) as f64;
        }
        if found.len() < gold.len() {
            miss_count += 1;
            if misses.len() < MAX_MISSES {
                misses.push(Miss {
                    query: query.query.clone(),
                    missing: gold
                        .iter()
                        .filter(|g| !found.contains(g))
                        .map(|g| (*g).to_owned())
                        .collect(),
                    got: top
                        .iter()
                        .take(k)
                        .map(|(s, t)| format!("{}/{t}", s.unwrap_or("core")))
                        .collect(),
                });
            }
        }
    }
    let n = set.queries.len().max(1) as f64;
    SetReport {
        name: name.to_owned(),
        queries: set.queries.len(),
        recall: recall / n,
        hit: hit / n,
        mrr: mrr / n,
        miss_count,
        misses,
        recalls,
        hits,
    }
}

/// Whether the query at 0-based `position` is in the odd (`true`) or even
/// (`false`) half.
fn in_half(position: usize, odd: bool) -> bool {
    (position % 2 == 1) == odd
}

/// The queries of `set` at odd (`Some(true)`) or even (`Some(false)`)
/// 0-based positions, or all of them: the halves parameters are chosen
/// on and reported on.
pub fn half(set: &QuerySet, odd: Option<bool>) -> QuerySet {
    let Some(odd) = odd else {
        return set.clone();
    };
    QuerySet {
        catalog: set.catalog.clone(),
        queries: set
            .queries
            .iter()
            .enumerate()
            .filter(|&(i, _)| in_half(i, odd))
            .map(|(_, q)| q.clone())
            .collect(),
    }
}

/// Recall@k of `report`'s queries at odd (`true`) or even (`false`)
/// 0-based positions, as [`half`] takes them: both halves from one run.
pub fn half_recall(report: &SetReport, odd: bool) -> f64 {
    let (sum, count) = report
        .recalls
        .iter()
        .enumerate()
        .filter(|&(i, _)| in_half(i, odd))
        .fold((0.0, 0usize), |(sum, count), (_, r)| (sum + r, count + 1));
    sum / count.max(1) as f64
}

/// Hit@k of `report`'s queries at odd (`true`) or even (`false`) 0-based
/// positions (see [`half_recall`]).
pub fn half_hit(report: &SetReport, odd: bool) -> f64 {
    let (sum, count) = report
        .hits
        .iter()
        .enumerate()
        .filter(|&(i, _)| in_half(i, odd))
        .fold((0usize, 0usize), |(sum, count), (_, &h)| {
            (sum + usize::from(h), count + 1)
        });
    sum as f64 / count.max(1) as f64
}

/// Queries where `candidate` finds more gold tools than `baseline` (wins)
/// and fewer (losses); both reports of the same set.
pub fn wins_and_losses(candidate: &SetReport, baseline: &SetReport) -> (usize, usize) {
    let pairs = candidate.recalls.iter().zip(&baseline.recalls);
    let wins = pairs.clone().filter(|(c, b)| c > b).count();
    let losses = pairs.filter(|(c, b)| c < b).count();
    (wins, losses)
}

/// Query-weighted averages over several set reports.
pub fn overall(reports: &[SetReport]) -> (usize, f64, f64, f64) {
    let total: usize = reports.iter().map(|r| r.queries).sum();
    let weight = |f: fn(&SetReport) -> f64| {
        reports.iter().map(|r| f(r) * r.queries as f64).sum::<f64>() / total.max(1) as f64
    };
    (
        total,
        weight(|r| r.recall),
        weight(|r| r.hit),
        weight(|r| r.mrr),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_recall_splits_a_report_as_half_splits_its_set() {
        let report = SetReport {
            name: "set".into(),
            queries: 5,
            recall: 0.6,
            hit: 0.6,
            mrr: 0.6,
            miss_count: 2,
            misses: Vec::new(),
            recalls: vec![1.0, 0.0, 1.0, 0.5, 0.0],
            hits: vec![true, false, true, true, false],
        };
        assert!((half_recall(&report, false) - 2.0 / 3.0).abs() < 1e-12);
        assert!((half_recall(&report, true) - 0.25).abs() < 1e-12);
        assert!((half_hit(&report, false) - 2.0 / 3.0).abs() < 1e-12);
        assert!((half_hit(&report, true) - 0.5).abs() < 1e-12);
        let empty = SetReport {
            recalls: Vec::new(),
            hits: Vec::new(),
            ..report
        };
        assert_eq!(half_recall(&empty, true), 0.0);
        assert_eq!(half_hit(&empty, true), 0.0);
    }
}
