//! Scoring one query segment by segment, the segments that can score
//! highest first, so a lexical search over a large catalog stops as soon
//! as no segment left can place a tool among its results.
//!
//! A query's terms, name bigrams and evidence are first laid out by
//! segment (a [`Plan`]). Each segment then gets an upper bound on any of
//! its tools' scores, from the most a term can add there (its largest
//! field counts at the segment's shortest field lengths, saturated as BM25
//! saturates them), the bigram bonuses it holds and its servers' best
//! context bonus. Segments are scored best bound first; once the results
//! are full of tools scoring above the next bound, the rest cannot change
//! them and are skipped.
//!
//! Within a segment the same bounds prune tools (as MaxScore does): once
//! the results are full, the terms whose bounds, with the bigram and
//! context bonuses, add up to less than the lowest result cannot place a
//! tool on their own, so only the tools holding one of the other terms
//! are scored. Those are scored exactly, and so are the tools whose
//! results depend on them: the other tools making the same call (a copy
//! gives its score and evidence to the tool it folds into) and the
//! lookups a result brings (shown with their scores). Each scored tool's
//! score is the same sum, in the same order, as a pass over the whole
//! catalog would make, so the results match one index over every tool
//! exactly.
//!
//! A term common across a large catalog (in half the directory's
//! segments or more, see [`super::directory`]) gets no per-segment hits:
//! it is looked up only in the segments that are scored, and the segments
//! holding nothing else are bounded as one (its largest counts at the
//! widest factors, with the best context bonus) and laid out only if that
//! bound may reach the results. So a query with such a word costs
//! hundreds of visits only when the word alone decides it.
//!
//! Fusion with embeddings needs every lexical score (they are normalised
//! by the best and weighed against every similarity), so a fused search
//! scores every segment, in catalog order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{
    EXTENSION_WEIGHT, EnhancedIndex, Expansion, FIELDS, Found, NAME_BIGRAM_BONUS, QueryWord,
    REPEAT_WEIGHT, SERVER_CONTEXT_WEIGHT, SYNONYM_WEIGHT, TYPO_DISCOUNT, clears_floor, saturated,
};
use crate::classic::idf;

/// A bound is raised by this share before it is compared, so rounding in a
/// sum of many terms can never prune a tool that ties with the results.
const BOUND_MARGIN: f64 = 1e-9;

/// One kind of term an [`Expansion`] adds (its synonyms, its extensions).
type ExpansionTerms = fn(&Expansion) -> &[Found];

/// One term scored for a query, with its weight.
struct Pass<'q> {
    found: &'q Found,
    /// The term's weight in the query times its IDF.
    weight: f64,
}

/// A segment with something to score, and the most any of its tools can
/// score.
#[derive(Clone, Copy)]
struct SegmentWork {
    at: u32,
    bound: f64,
    /// Its row in [`Plan::hits`].
    row: u32,
}

/// Which of a segment's tools a scoring pass visits.
#[derive(Clone, Copy)]
enum Visit<'a> {
    /// Every tool.
    All,
    /// Only these (segment-local, ascending).
    Only(&'a [u32]),
}

impl<'a> Visit<'a> {
    /// The items of `list` (ascending by `doc`, at most one per tool) of
    /// the tools visited, each with the tool's position among them (its
    /// segment-local number when every tool is visited).
    fn of<T>(self, list: &'a [T], doc: fn(&T) -> u32) -> Visited<'a, T> {
        Visited {
            list,
            only: match self {
                Visit::All => None,
                Visit::Only(docs) => Some(docs),
            },
            visited: 0,
            doc,
        }
    }
}

/// The iterator of [`Visit::of`]: a walk of the list, or a search in what
/// is left of it for each visited tool in turn.
struct Visited<'a, T> {
    list: &'a [T],
    only: Option<&'a [u32]>,
    /// How many of `only` were taken.
    visited: u32,
    doc: fn(&T) -> u32,
}

impl<'a, T> Iterator for Visited<'a, T> {
    type Item = (u32, &'a T);

    fn next(&mut self) -> Option<(u32, &'a T)> {
        let Some(only) = &mut self.only else {
            let (first, rest) = self.list.split_first()?;
            self.list = rest;
            return Some(((self.doc)(first), first));
        };
        loop {
            let (&wanted, rest) = only.split_first()?;
            *only = rest;
            let position = self.visited;
            self.visited += 1;
            let doc = self.doc;
            // Tools are ascending and distinct, so `wanted` can be no
            // further than `wanted - first` items on: in a list holding
            // most of the segment's tools, exactly there.
            let first = self.list.first().map_or(wanted, doc);
            let within = (wanted.saturating_sub(first) as usize + 1).min(self.list.len());
            let near = self.list.get(..within).unwrap_or(&[]);
            let from = match near.last() {
                Some(last) if doc(last) == wanted => within - 1,
                _ => near.partition_point(|item| doc(item) < wanted),
            };
            self.list = self.list.get(from..).unwrap_or(&[]);
            if let Some((first, rest)) = self.list.split_first()
                && doc(first) == wanted
            {
                self.list = rest;
                return Some((position, first));
            }
        }
    }
}

/// What adds to a tool's score in a segment: the plan's pass, or its
/// name bigram, of this number.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Bonus {
    Term(u32),
    Bigram(u32),
}

/// Adds `doc` to a segment's `candidates` unless `marks` says it is one.
fn add_candidate(marks: &mut [bool], candidates: &mut Vec<u32>, doc: u32) {
    if let Some(marked) = marks.get_mut(doc as usize)
        && !*marked
    {
        *marked = true;
        candidates.push(doc);
    }
}

/// Buffers reused across the segments of one query.
#[derive(Default)]
struct Scratch {
    /// Per tool of the segment, the last evidence word counted for it.
    stamps: Vec<u32>,
    /// Per tool of the segment, whether it is a candidate.
    marks: Vec<bool>,
    /// The candidates, ascending.
    candidates: Vec<u32>,
    /// A segment's terms and name bigrams with the most each can add.
    bounds: Vec<(f64, Bonus)>,
}

/// Segments ordered by bound, the higher first, ties in catalog order.
struct BestBound(SegmentWork);

impl Ord for BestBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .bound
            .total_cmp(&other.0.bound)
            .then(other.0.at.cmp(&self.0.at))
    }
}

impl PartialOrd for BestBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for BestBound {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for BestBound {}

/// A query's scoring work. What it needs in one segment is found there
/// when that segment is scored (each term's hits are in segment order), so
/// planning costs one visit per term hit, not a list per segment.
pub(super) struct Plan<'q> {
    passes: Vec<Pass<'q>>,
    /// (first, second) passes of adjacent query words, in query order: a
    /// tool whose name holds their terms adjacent gets a bonus.
    bigrams: Vec<(u32, u32)>,
    /// (distinct word, pass): the terms each word counts as evidence
    /// through (boilerplate left out), in word order.
    evidence: Vec<(u32, u32)>,
    /// Each catalog-wide server's context score, when any is above zero.
    context: Option<Vec<f64>>,
    segments: Vec<SegmentWork>,
    /// Per segment to score (a row of one entry per pass), each pass's
    /// term there: its id (`u32::MAX`: none) and largest field counts, so
    /// scoring a segment finds its terms in one place.
    hits: Vec<(u32, [u8; FIELDS])>,
    /// Per segment position, its row (`u32::MAX`: none yet).
    rows: Vec<u32>,
    /// While the segments holding common terms only (see
    /// [`Found::common`]) have no rows: the most any of their tools can
    /// score. Laid out only when they may reach the results.
    rest_bound: Option<f64>,
}

impl Plan<'_> {
    /// `pass`'s term in `work`'s segment: its id and largest field counts.
    fn hit(&self, work: &SegmentWork, pass: u32) -> Option<(u32, [u8; FIELDS])> {
        let row = work.row as usize * self.passes.len();
        let &(id, most) = self.hits.get(row + pass as usize)?;
        (id != u32::MAX).then_some((id, most))
    }

    /// Bigram `entry`'s (first, second) term ids in `work`'s segment, when
    /// it holds both.
    fn bigram(&self, work: &SegmentWork, entry: usize) -> Option<(u32, u32)> {
        let &(a, b) = self.bigrams.get(entry)?;
        Some((self.hit(work, a)?.0, self.hit(work, b)?.0))
    }
}

/// What a lexical search needs to know to stop early: how many results it
/// returns and which tools may be among them.
pub(super) struct Cutoff<'c> {
    pub(super) limit: usize,
    pub(super) floor: f64,
    /// The tools the exact-name pass places first: never counted, their
    /// segments always scored.
    pub(super) exact: &'c [u32],
    pub(super) allowed: &'c dyn Fn(u32) -> bool,
}

/// A query's scores and evidence, per slot. A search over every segment
/// numbers slots as the catalog numbers tools; one that stops early lays
/// only the segments it scores out, one after another, so its arrays
/// (cleared and walked on every search) grow with its work, not with the
/// catalog: a whole segment as its tools go, a pruned one as its
/// candidates go.
pub(super) struct Scores {
    pub(super) scores: Vec<f64>,
    pub(super) evidence: Vec<u8>,
    /// The slots with a score.
    pub(super) touched: Vec<u32>,
    /// Per segment, its first tool's slot (`u32::MAX`: not scored).
    bases: Vec<u32>,
    /// Per scored segment, how many slots it has: all its tools, or (when
    /// fewer) its candidates, in tool order.
    counts: Vec<u32>,
    /// Per slot, its catalog-wide tool; empty when slots are tools.
    docs: Vec<u32>,
    every_segment: bool,
}

impl Scores {
    /// Arrays for every tool of `index`, slot = tool.
    fn every_segment(index: &EnhancedIndex) -> Scores {
        let n = index.len();
        Scores {
            scores: vec![0.0; n],
            evidence: vec![0u8; n],
            touched: Vec::new(),
            bases: index.offsets.clone(),
            counts: (0..index.segments.len())
                .map(|at| index.segment_len(at))
                .collect(),
            docs: Vec::new(),
            every_segment: true,
        }
    }

    /// Empty arrays that segments are added to as they are scored, with
    /// room (reserved, never written) for `most` tools, so adding one
    /// never moves them.
    fn segment_by_segment(index: &EnhancedIndex, most: usize) -> Scores {
        Scores {
            scores: Vec::with_capacity(most),
            evidence: Vec::with_capacity(most),
            touched: Vec::new(),
            bases: vec![u32::MAX; index.segments.len()],
            counts: vec![0; index.segments.len()],
            docs: Vec::with_capacity(most),
            every_segment: false,
        }
    }

    /// The first slot of segment `at`, given slots first if it has none:
    /// one per tool `visit` visits.
    fn make_room(&mut self, index: &EnhancedIndex, at: u32, visit: Visit<'_>) -> Option<u32> {
        let base = *self.bases.get(at as usize)?;
        if base != u32::MAX {
            return Some(base);
        }
        let start = index.start(at as usize);
        let count = match visit {
            Visit::All => {
                let len = index.segment_len(at as usize);
                self.docs.extend(start..start + len);
                len
            }
            Visit::Only(candidates) => {
                self.docs
                    .extend(candidates.iter().map(|&local| start + local));
                candidates.len() as u32
            }
        };
        let base = self.scores.len() as u32;
        self.scores.resize(self.scores.len() + count as usize, 0.0);
        self.evidence
            .resize(self.evidence.len() + count as usize, 0);
        if let (Some(slot), Some(slots)) = (
            self.bases.get_mut(at as usize),
            self.counts.get_mut(at as usize),
        ) {
            *slot = base;
            *slots = count;
        }
        Some(base)
    }

    /// The catalog-wide tool of `slot`.
    pub(super) fn doc(&self, slot: u32) -> u32 {
        if self.every_segment {
            slot
        } else {
            self.docs.get(slot as usize).copied().unwrap_or(u32::MAX)
        }
    }

    /// The slot of catalog-wide tool `doc`, if its segment was scored.
    pub(super) fn slot(&self, index: &EnhancedIndex, doc: u32) -> Option<u32> {
        if self.every_segment {
            return ((doc as usize) < self.scores.len()).then_some(doc);
        }
        let (at, local) = index.locate(doc)?;
        let base = *self.bases.get(at)?;
        if base == u32::MAX {
            return None;
        }
        let count = self.counts.get(at).copied().unwrap_or(0);
        if count == index.segment_len(at) {
            return Some(base + local);
        }
        // A pruned segment's slots are its candidates, in tool order.
        let candidates = self.docs.get(base as usize..(base + count) as usize)?;
        let offset = candidates.binary_search(&doc).ok()?;
        Some(base + offset as u32)
    }

    /// The score of `slot` (0 for none).
    pub(super) fn score(&self, slot: u32) -> f64 {
        self.scores.get(slot as usize).copied().unwrap_or(0.0)
    }

    /// Each scored segment's first tool and number of tools.
    pub(super) fn scored_segments<'i>(
        &'i self,
        index: &'i EnhancedIndex,
    ) -> impl Iterator<Item = (u32, u32)> + 'i {
        (0..index.segments.len()).filter_map(move |at| {
            let base = *self.bases.get(at)?;
            (base != u32::MAX).then(|| (index.start(at), index.segment_len(at)))
        })
    }
}

impl EnhancedIndex {
    /// A query's scoring work: the words' own terms (or a compound's
    /// parts, or near terms), then synonyms and extensions not already
    /// scored, each once; the terms the relevance floor's evidence counts
    /// per word; and each segment to score with its bound.
    pub(super) fn plan<'q>(
        &self,
        words: &'q [QueryWord],
        unique: &[(&'q QueryWord, usize)],
        expansions: &'q [Expansion],
    ) -> Plan<'q> {
        let n = self.len();
        let mut passes: Vec<Pass<'q>> = Vec::new();
        let mut pass = |found: &'q Found, weight: f64| {
            passes.push(Pass {
                found,
                weight: weight * idf(n, found.df),
            });
        };
        let mut matched: Vec<&str> = Vec::new();
        for (&(word, count), expansion) in unique.iter().zip(expansions) {
            if let Some(found) = &word.found {
                matched.push(&found.term);
                pass(found, 1.0 + REPEAT_WEIGHT * (count - 1) as f64);
            } else if !expansion.parts.is_empty() {
                expansion.parts.iter().for_each(|part| pass(part, 1.0));
            } else {
                expansion
                    .near
                    .iter()
                    .for_each(|near| pass(near, TYPO_DISCOUNT));
            }
        }
        // Then every synonym, then every extension, each term once and
        // none a word already matched.
        let kinds: [(ExpansionTerms, f64); 2] = [
            (|e| &e.synonyms, SYNONYM_WEIGHT),
            (|e| &e.extensions, EXTENSION_WEIGHT),
        ];
        for (of, weight) in kinds {
            let mut added: Vec<&str> = Vec::new();
            for found in expansions.iter().flat_map(of) {
                if !matched.contains(&found.term.as_str()) && !added.contains(&found.term.as_str())
                {
                    added.push(&found.term);
                    pass(found, weight);
                }
            }
        }

        // Every term a word or its expansion counts through is a pass (each
        // term once): the pass of a term.
        let pass_of = |term: &str| {
            passes
                .iter()
                .position(|pass| pass.found.term == term)
                .map(|pass| pass as u32)
        };
        let mut bigrams: Vec<(u32, u32)> = Vec::new();
        for pair in words.windows(2) {
            if let [
                QueryWord { found: Some(a), .. },
                QueryWord { found: Some(b), .. },
            ] = pair
                && let (Some(a), Some(b)) = (pass_of(&a.term), pass_of(&b.term))
            {
                bigrams.push((a, b));
            }
        }
        // Boilerplate: a term found in more than half the tools (of three
        // or more), such as the server's name in a one-server catalog.
        let is_boilerplate = |df: usize| n >= 3 && df * 2 > n;
        let mut evidence: Vec<(u32, u32)> = Vec::new();
        for (index, (&(word, _), expansion)) in unique.iter().zip(expansions).enumerate() {
            let mut word_terms: Vec<&Found> = Vec::new();
            match &word.found {
                Some(found) => word_terms.push(found),
                None if expansion.parts.is_empty()
                    && word.word.chars().count() >= super::MIN_TYPO_EVIDENCE =>
                {
                    word_terms.extend(&expansion.near);
                }
                None => word_terms.extend(&expansion.parts),
            }
            word_terms.extend(&expansion.synonyms);
            word_terms.extend(&expansion.extensions);
            evidence.extend(
                word_terms
                    .into_iter()
                    .filter(|t| !is_boilerplate(t.df))
                    .filter_map(|t| Some((index as u32, pass_of(&t.term)?))),
            );
        }
        let query_terms: Vec<&str> = unique.iter().map(|(w, _)| w.term.as_str()).collect();
        let context = self.server_scores(&query_terms);
        let context = context.iter().any(|&s| s > 0.0).then_some(context);
        let mut plan = Plan {
            passes,
            bigrams,
            evidence,
            context,
            segments: Vec::new(),
            hits: Vec::new(),
            rows: vec![u32::MAX; self.segments.len()],
            rest_bound: None,
        };
        self.lay_out(&mut plan);
        plan
    }

    /// Finds each segment holding a term other than a common one and lays
    /// it out (see [`Self::add_rows`]); bounds the segments holding common
    /// terms only, which are laid out when they may reach the results.
    fn lay_out(&self, plan: &mut Plan<'_>) {
        let mut held = vec![false; self.segments.len()];
        for pass in plan
            .passes
            .iter()
            .filter(|pass| pass.found.common.is_none())
        {
            for &(at, _) in &pass.found.hits {
                if let Some(held) = held.get_mut(at as usize) {
                    *held = true;
                }
            }
        }
        self.add_rows(plan, &held);
        if plan.passes.iter().any(|pass| pass.found.common.is_some()) {
            plan.rest_bound = Some(self.rest_bound(plan));
        }
    }

    /// Gives each segment `marked` (by position) that has no row yet a
    /// row: each pass's term there, from its hits or, for a common term,
    /// looked up; and its bound: the bigram bonuses it holds, then each
    /// term's most, then its servers' best context bonus.
    fn add_rows(&self, plan: &mut Plan<'_>, marked: &[bool]) {
        let width = plan.passes.len();
        let first = plan.segments.len();
        for (at, (&marked, slot)) in (0u32..).zip(marked.iter().zip(plan.rows.iter_mut())) {
            if !marked || *slot != u32::MAX {
                continue;
            }
            let row = plan.segments.len() as u32;
            *slot = row;
            plan.segments.push(SegmentWork {
                at,
                bound: 0.0,
                row,
            });
        }
        plan.hits
            .resize(plan.segments.len() * width, (u32::MAX, [0; FIELDS]));
        for (pass, entry) in plan.passes.iter().enumerate() {
            match &entry.found.common {
                None => {
                    for (&(at, id), &most) in entry.found.hits.iter().zip(&entry.found.most) {
                        if let Some(&row) = plan.rows.get(at as usize)
                            && row as usize >= first
                            && let Some(slot) = plan.hits.get_mut(row as usize * width + pass)
                        {
                            *slot = (id, most);
                        }
                    }
                }
                Some(common) => {
                    for work in plan.segments.get(first..).unwrap_or(&[]) {
                        if let Some(hit) = self.common_in(entry.found, common, work.at)
                            && let Some(slot) = plan.hits.get_mut(work.row as usize * width + pass)
                        {
                            *slot = (hit.id, hit.most);
                        }
                    }
                }
            }
        }
        let Plan {
            passes,
            bigrams,
            context,
            segments,
            hits,
            ..
        } = plan;
        for work in segments.get_mut(first..).unwrap_or(&mut []) {
            let row = hits
                .get(work.row as usize * width..(work.row as usize + 1) * width)
                .unwrap_or(&[]);
            let held = |pass: u32| {
                row.get(pass as usize)
                    .is_some_and(|&(id, _)| id != u32::MAX)
            };
            let mut bound = 0.0;
            for &(a, b) in bigrams.iter() {
                if held(a) && held(b) {
                    bound += NAME_BIGRAM_BONUS;
                }
            }
            for (pass, &(id, most)) in passes.iter().zip(row) {
                if id != u32::MAX {
                    bound += saturated(pass.weight, self.most_tf(&most, work.at));
                }
            }
            if let Some(context) = context {
                bound += SERVER_CONTEXT_WEIGHT * self.best_context(work.at as usize, context);
            }
            work.bound = bound;
        }
    }

    /// The most any tool of a segment without a row can score: there only
    /// common terms occur, each at most its largest counts in any segment
    /// at the widest factors, with the bigrams of two common terms and the
    /// best context bonus of any server.
    fn rest_bound(&self, plan: &Plan<'_>) -> f64 {
        let common = |pass: u32| {
            plan.passes
                .get(pass as usize)
                .is_some_and(|pass| pass.found.common.is_some())
        };
        let mut bound = 0.0;
        for &(a, b) in &plan.bigrams {
            if common(a) && common(b) {
                bound += NAME_BIGRAM_BONUS;
            }
        }
        for pass in &plan.passes {
            if let Some(common) = &pass.found.common {
                let tf: f64 = common
                    .most
                    .iter()
                    .zip(&self.widest_factors)
                    .map(|(&count, factor)| f64::from(count) * factor)
                    .sum();
                bound += saturated(pass.weight, tf);
            }
        }
        if let Some(context) = &plan.context {
            bound += SERVER_CONTEXT_WEIGHT * context.iter().copied().fold(0.0, f64::max);
        }
        bound
    }

    /// Lays out the segments that hold a common term and no row yet;
    /// returns their work.
    fn lay_out_rest(&self, plan: &mut Plan<'_>) -> Vec<SegmentWork> {
        plan.rest_bound = None;
        let mut held = vec![false; self.segments.len()];
        for pass in &plan.passes {
            if pass.found.common.is_some() {
                self.each_term_hit(&pass.found.term, |at, _| {
                    if let Some(held) = held.get_mut(at as usize) {
                        *held = true;
                    }
                });
            }
        }
        let first = plan.segments.len();
        self.add_rows(plan, &held);
        plan.segments.get(first..).unwrap_or(&[]).to_vec()
    }

    /// The most field-weighted count a term can have in segment `at` under
    /// this index's length normalisation: its largest count in each field
    /// (`most`) at the segment's shortest length of that field (the
    /// normalisation only falls as a field grows).
    fn most_tf(&self, most: &[u8; FIELDS], at: u32) -> f64 {
        let factors = self.shortest_factors.get(at as usize);
        (0..FIELDS)
            .map(|field| {
                let count = most.get(field).copied().unwrap_or(u8::MAX);
                let factor = factors.and_then(|f| f.get(field)).copied().unwrap_or(0.0);
                f64::from(count) * factor
            })
            .sum()
    }

    /// The catalog-wide server of segment `at` when it has one only.
    fn only_server(&self, at: usize) -> Option<u32> {
        match self.servers_of_segment(at) {
            &[(id, _)] => Some(id),
            _ => None,
        }
    }

    /// Segment `at`'s servers: (catalog-wide id, whether its text counts).
    fn servers_of_segment(&self, at: usize) -> &[(u32, bool)] {
        let start = self.server_starts.get(at).copied().unwrap_or(0) as usize;
        let end = self
            .server_starts
            .get(at + 1)
            .map_or(self.server_ids.len(), |&end| end as usize);
        self.server_ids.get(start..end).unwrap_or(&[])
    }

    /// The best context score among the servers of segment `at`.
    fn best_context(&self, at: usize, context: &[f64]) -> f64 {
        self.servers_of_segment(at)
            .iter()
            .filter_map(|&(id, _)| context.get(id as usize).copied())
            .fold(0.0, f64::max)
    }

    /// Whether only some of segment `work`'s tools can score above
    /// `lowest` (the lowest of full results); if so, leaves them in
    /// `scratch.candidates`: the tools holding a term that the others'
    /// bounds do not cover, the tools that make the same call as one of
    /// them, and their lookups (prerequisites) with theirs.
    fn reachable(
        &self,
        plan: &Plan<'_>,
        work: &SegmentWork,
        lowest: f64,
        scratch: &mut Scratch,
    ) -> bool {
        let Some(segment) = self.segments.get(work.at as usize) else {
            return false;
        };
        let at = work.at as usize;
        scratch.bounds.clear();
        for (entry, pass) in (0u32..).zip(&plan.passes) {
            if let Some((_, most)) = plan.hit(work, entry) {
                let bound = saturated(pass.weight, self.most_tf(&most, work.at));
                scratch.bounds.push((bound, Bonus::Term(entry)));
            }
        }
        for entry in 0..plan.bigrams.len() {
            if plan.bigram(work, entry).is_some() {
                scratch
                    .bounds
                    .push((NAME_BIGRAM_BONUS, Bonus::Bigram(entry as u32)));
            }
        }
        scratch
            .bounds
            .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // The context bonus any tool may get, then the weakest terms and
        // bigrams while they all together stay below the results.
        let mut covered = 0.0;
        if let Some(context) = &plan.context {
            covered += SERVER_CONTEXT_WEIGHT * self.best_context(at, context);
        }
        let mut weak = 0;
        for &(bound, _) in &scratch.bounds {
            if lowest > (covered + bound) * (1.0 + BOUND_MARGIN) + BOUND_MARGIN {
                covered += bound;
                weak += 1;
            } else {
                break;
            }
        }
        if weak == 0 {
            return false;
        }
        let len = segment.docs.len();
        scratch.marks.clear();
        scratch.marks.resize(len, false);
        scratch.candidates.clear();
        let Scratch {
            marks,
            candidates,
            bounds,
            ..
        } = scratch;
        let mut mark = |doc: u32| add_candidate(marks, candidates, doc);
        for &(_, bonus) in bounds.get(weak..).unwrap_or(&[]) {
            match bonus {
                Bonus::Term(entry) => {
                    if let Some((id, _)) = plan.hit(work, entry) {
                        segment.postings.of(id).iter().for_each(|p| mark(p.doc));
                    }
                }
                Bonus::Bigram(entry) => {
                    if let Some(pair) = plan.bigram(work, entry as usize) {
                        segment
                            .name_bigrams
                            .get(&pair)
                            .iter()
                            .for_each(|&d| mark(d));
                    }
                }
            }
        }
        // Scoring most of the segment one tool at a time costs more than
        // walking it.
        if candidates.len() * 2 > len {
            return false;
        }
        // A copy's score and evidence go to the first tool making its
        // call, whose own count too; a result brings its lookups, shown
        // with their (folded) scores.
        let fold = |candidates: &mut Vec<u32>, marks: &mut Vec<bool>| {
            for copies_first in [true, false] {
                for (&copy, &first) in &segment.same_operation {
                    let (from, to) = if copies_first {
                        (copy, first)
                    } else {
                        (first, copy)
                    };
                    if marks.get(from as usize).copied().unwrap_or(false) {
                        add_candidate(marks, candidates, to);
                    }
                }
            }
        };
        fold(candidates, marks);
        for index in 0..candidates.len() {
            let Some(&doc) = candidates.get(index) else {
                break;
            };
            for &needed in segment.prerequisites.get(&doc).into_iter().flatten() {
                add_candidate(marks, candidates, needed);
            }
        }
        fold(candidates, marks);
        candidates.sort_unstable();
        true
    }

    /// Scores `plan`'s segments: all of them in catalog order with no
    /// `cutoff` (fusion needs every score), otherwise best bound first
    /// until no segment left can reach the results.
    pub(super) fn score_plan(&self, plan: &mut Plan<'_>, cutoff: Option<&Cutoff<'_>>) -> Scores {
        let mut scratch = Scratch::default();
        let Some(cutoff) = cutoff.filter(|c| c.limit > 0) else {
            if plan.rest_bound.is_some() {
                self.lay_out_rest(plan);
            }
            let mut order = plan.segments.clone();
            order.sort_unstable_by_key(|work| work.at);
            let mut out = Scores::every_segment(self);
            for work in &order {
                self.score_segment(plan, work, Visit::All, &mut out, &mut scratch.stamps);
            }
            return out;
        };
        // The exact-name pass's segments first, whatever their bound: their
        // tools are results, and so may be their prerequisites. Each gets a
        // row, though it may hold common terms only.
        let mut exact_segments: Vec<u32> = cutoff
            .exact
            .iter()
            .filter_map(|&doc| self.locate(doc).map(|(at, _)| at as u32))
            .collect();
        exact_segments.sort_unstable();
        exact_segments.dedup();
        if !exact_segments.is_empty() {
            let mut exact_held = vec![false; self.segments.len()];
            for &at in &exact_segments {
                if let Some(held) = exact_held.get_mut(at as usize) {
                    *held = true;
                }
            }
            self.add_rows(plan, &exact_held);
        }
        // Room for every segment with a row, and the exact matches'.
        let most = plan
            .segments
            .iter()
            .map(|work| self.segment_len(work.at as usize) as usize)
            .sum();
        let mut out = Scores::segment_by_segment(self, most);
        let (mut forced, rest): (Vec<SegmentWork>, Vec<SegmentWork>) = plan
            .segments
            .iter()
            .partition(|work| exact_segments.binary_search(&work.at).is_ok());
        // Worst first: they are popped from the end.
        forced.sort_by_key(|work| BestBound(*work));
        // Then the rest, best bound first, from a heap: a search usually
        // stops after a few of hundreds.
        let mut heap: BinaryHeap<BestBound> = rest.into_iter().map(BestBound).collect();
        // An exact match's segment is scored even when no query term
        // occurs in it: its tools take slots all the same.
        for &at in &exact_segments {
            out.make_room(self, at, Visit::All);
        }
        // The `limit` best scores so far of tools that may be results.
        let n = self.len();
        let mut best: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(cutoff.limit.min(n) + 1);
        loop {
            let full = best.len() >= cutoff.limit;
            let lowest = best
                .peek()
                .filter(|_| full)
                .map(|&Reverse(lowest)| f64::from_bits(lowest));
            let beaten = |bound: f64| {
                lowest.is_some_and(|l| l > bound * (1.0 + BOUND_MARGIN) + BOUND_MARGIN)
            };
            // The segments of common terms only are laid out once they may
            // hold a better tool than the next segment with a row.
            if let Some(rest) = plan.rest_bound
                && forced.is_empty()
            {
                if beaten(rest) {
                    plan.rest_bound = None;
                } else if heap.peek().is_none_or(|next| rest >= next.0.bound) {
                    heap.extend(self.lay_out_rest(plan).into_iter().map(BestBound));
                    continue;
                }
            }
            let (work, forced_now) = match forced.pop() {
                Some(work) => (work, true),
                None => match heap.pop() {
                    Some(next) => (next.0, false),
                    None => break,
                },
            };
            if !forced_now && beaten(work.bound) {
                break;
            }
            let from = out.touched.len();
            // Once the results are full, only the tools that can reach
            // them (and those their results depend on) are scored.
            let visit = match lowest.filter(|_| !forced_now) {
                Some(lowest) if self.reachable(plan, &work, lowest, &mut scratch) => {
                    Visit::Only(&scratch.candidates)
                }
                _ => Visit::All,
            };
            self.score_segment(plan, &work, visit, &mut out, &mut scratch.stamps);
            for &slot in out.touched.get(from..).unwrap_or(&[]) {
                let doc = out.doc(slot);
                let counts = clears_floor(&out.scores, &out.evidence, cutoff.floor, slot)
                    && self.folds_into(doc).is_none()
                    && !cutoff.exact.contains(&doc)
                    && (cutoff.allowed)(doc);
                if counts {
                    // Scores here are positive, whose bits order as they do.
                    best.push(Reverse(out.score(slot).to_bits()));
                    if best.len() > cutoff.limit {
                        best.pop();
                    }
                }
            }
        }
        out
    }

    /// Scores one segment's tools: the plan's terms in pass order, then the
    /// name bigrams, then the server-context bonus, as a pass over the
    /// whole catalog adds them; and counts each tool's evidence words.
    fn score_segment(
        &self,
        plan: &Plan<'_>,
        work: &SegmentWork,
        visit: Visit<'_>,
        out: &mut Scores,
        stamps: &mut Vec<u32>,
    ) {
        let Some(segment) = self.segments.get(work.at as usize) else {
            return;
        };
        let Some(base) = out.make_room(self, work.at, visit) else {
            return;
        };
        let from = out.touched.len();
        let [name, server, description, parameters] = &self.factors;
        for (entry, pass) in (0u32..).zip(&plan.passes) {
            let Some((id, _)) = plan.hit(work, entry) else {
                continue;
            };
            for (position, posting) in visit.of(segment.postings.of(id), |p| p.doc) {
                let Some(lengths) = segment.lengths.get(posting.doc as usize) else {
                    continue;
                };
                let factor = |table: &[f64], field: usize| {
                    lengths
                        .get(field)
                        .and_then(|&l| table.get(l as usize))
                        .copied()
                        .unwrap_or(0.0)
                };
                let factors = [
                    factor(name, 0),
                    factor(server, 1),
                    factor(description, 2),
                    factor(parameters, 3),
                ];
                let mut tf = 0.0;
                for (&count, factor) in posting.tf.iter().zip(&factors) {
                    tf += f64::from(count) * factor;
                }
                let slot = base + position;
                if let Some(score) = out.scores.get_mut(slot as usize) {
                    if *score == 0.0 {
                        out.touched.push(slot);
                    }
                    *score += saturated(pass.weight, tf);
                }
            }
        }
        for pair in (0..plan.bigrams.len()).filter_map(|entry| plan.bigram(work, entry)) {
            for (position, _) in visit.of(segment.name_bigrams.get(&pair), |&d| d) {
                let slot = base + position;
                if let Some(score) = out.scores.get_mut(slot as usize) {
                    if *score == 0.0 {
                        out.touched.push(slot);
                    }
                    *score += NAME_BIGRAM_BONUS;
                }
            }
        }
        if let Some(context) = &plan.context {
            // Most segments are one server's: one bonus for all their tools.
            let only = self.only_server(work.at as usize);
            let start = self.start(work.at as usize);
            for &slot in out.touched.get(from..).unwrap_or(&[]) {
                let local = out.doc(slot) - start;
                let server = only
                    .or_else(|| self.server_of(work.at as usize, local))
                    .unwrap_or(0);
                let bonus = context.get(server as usize).copied().unwrap_or(0.0);
                if let Some(score) = out.scores.get_mut(slot as usize) {
                    *score += SERVER_CONTEXT_WEIGHT * bonus;
                }
            }
        }
        // A word counts once per tool however many of its terms match it.
        stamps.clear();
        stamps.resize(
            out.counts.get(work.at as usize).copied().unwrap_or(0) as usize,
            0,
        );
        for &(word, pass) in &plan.evidence {
            let Some((id, _)) = plan.hit(work, pass) else {
                continue;
            };
            for (position, _) in visit.of(segment.postings.of(id), |p| p.doc) {
                if let Some(stamp) = stamps.get_mut(position as usize)
                    && *stamp != word + 1
                {
                    *stamp = word + 1;
                    if let Some(words) = out.evidence.get_mut((base + position) as usize) {
                        *words = words.saturating_add(1);
                    }
                }
            }
        }
    }
}
