//! Bounded queries: how much of a `tool_search` query is searched, and how
//! much of it an answer repeats.
//!
//! A query is a few keywords; what a model sends may be a pasted document.
//! Search cost grows with the query's words, so a query is searched up to
//! `tools.tool_search.max_query_chars` characters and
//! `tools.tool_search.max_query_words` distinct words (whichever comes
//! first), cut at a word boundary, and the answer says so. An answer
//! repeats at most [`ECHO_CHARS`] characters of the query: the model sent
//! it and needs no copy.

use std::borrow::Cow;
use std::collections::HashSet;

/// Most characters of a query that an answer repeats.
pub const ECHO_CHARS: usize = 100;

/// The part of a query that is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedQuery<'q> {
    /// The searched text: the query itself, or its start when it is cut.
    pub text: &'q str,
    /// How it was cut, when it was.
    pub cut: Option<QueryCut>,
}

/// What cutting a query left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryCut {
    /// Characters of the query.
    pub chars: usize,
    /// Characters searched (the start of the query, up to a word's end).
    pub kept_chars: usize,
    /// Distinct words searched.
    pub kept_words: usize,
    /// The limit that cut it.
    pub by: CutBy,
}

/// The limit a query reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutBy {
    /// `max_query_chars`, at this many characters.
    Chars(usize),
    /// `max_query_words`, at this many distinct words.
    Words(usize),
}

impl QueryCut {
    /// A sentence for the model: what was searched and why.
    pub fn note(&self) -> String {
        let limit = match self.by {
            CutBy::Chars(max) => format!("{max} characters"),
            CutBy::Words(max) => format!("{max} distinct words"),
        };
        format!(
            "Only the first {} of the query's {} characters ({} distinct words) were searched: a query is searched up to {limit}. Send a few keywords describing the tool you need.",
            self.kept_chars, self.chars, self.kept_words
        )
    }
}

/// `query` cut to at most `max_chars` characters and `max_words`
/// distinct words (compared case-insensitively), at the end of the last
/// word that fits (one word longer than `max_chars` is cut inside it). One
/// pass over the text, so cutting costs what reading the query costs.
pub fn bound(query: &str, max_chars: usize, max_words: usize) -> BoundedQuery<'_> {
    let mut distinct: HashSet<Cow<'_, str>> = HashSet::new();
    // Bytes of the kept text, and characters counted so far up to `counted`.
    let mut kept = 0usize;
    let mut kept_chars = 0usize;
    let mut counted = 0usize;
    let mut chars = 0usize;
    let mut by = None;
    for word in query.split_whitespace() {
        let start = word.as_ptr() as usize - query.as_ptr() as usize;
        let end = start + word.len();
        chars += query[counted..end].chars().count();
        counted = end;
        if chars > max_chars {
            if kept == 0 {
                // The first word alone is too long: its first characters.
                kept = query
                    .char_indices()
                    .nth(max_chars)
                    .map_or(query.len(), |(at, _)| at);
                kept_chars = max_chars;
            }
            by = Some(CutBy::Chars(max_chars));
            break;
        }
        let folded = if word.chars().any(char::is_uppercase) {
            Cow::Owned(word.to_lowercase())
        } else {
            Cow::Borrowed(word)
        };
        if !distinct.contains(&folded) {
            if distinct.len() == max_words {
                by = Some(CutBy::Words(max_words));
                break;
            }
            distinct.insert(folded);
        }
        kept = end;
        kept_chars = chars;
    }
    match by {
        None => BoundedQuery {
            text: query,
            cut: None,
        },
        Some(by) => BoundedQuery {
            text: &query[..kept],
            cut: Some(QueryCut {
                chars: query.chars().count(),
                kept_chars,
                kept_words: distinct.len().max(usize::from(kept > 0)),
                by,
            }),
        },
    }
}

/// The query as an answer repeats it: whole up to [`ECHO_CHARS`]
/// characters, else its first characters and `…`.
pub fn echo(query: &str) -> Cow<'_, str> {
    match query.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(query),
        Some((at, _)) => Cow::Owned(format!("{}…", query[..at].trim_end())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_query_is_searched_whole() {
        let query = "  create a GitHub issue  ";
        assert_eq!(
            bound(query, 2_000, 256),
            BoundedQuery {
                text: query,
                cut: None
            }
        );
        // At the limits exactly: nothing is cut.
        assert_eq!(bound("ab cd", 5, 2).cut, None);
        assert_eq!(bound("", 0, 0).cut, None);
    }

    #[test]
    fn a_long_query_is_cut_after_the_last_word_that_fits() {
        let bounded = bound("read the file ünïcode now", 17, 256);
        assert_eq!(bounded.text, "read the file");
        assert_eq!(
            bounded.cut,
            Some(QueryCut {
                chars: 25,
                kept_chars: 13,
                kept_words: 3,
                by: CutBy::Chars(17),
            })
        );
        // One word longer than the limit: its first characters.
        let bounded = bound("ééééé more", 3, 256);
        assert_eq!(bounded.text, "ééé");
        assert_eq!(bounded.cut.map(|c| c.kept_chars), Some(3));
    }

    #[test]
    fn repeated_words_do_not_count_against_the_word_limit() {
        let bounded = bound("Issue issue ISSUE create issue list more", 2_000, 2);
        assert_eq!(bounded.text, "Issue issue ISSUE create issue");
        assert_eq!(
            bounded.cut,
            Some(QueryCut {
                chars: 40,
                kept_chars: 30,
                kept_words: 2,
                by: CutBy::Words(2),
            })
        );
        let note = bounded.cut.unwrap().note();
        assert!(note.contains("first 30 of the query's 40 characters (2 distinct words)"));
        assert!(note.contains("up to 2 distinct words"), "{note}");
    }

    #[test]
    fn an_answer_repeats_a_short_prefix() {
        assert_eq!(echo("find issues"), "find issues");
        let long = "word ".repeat(100);
        let echoed = echo(&long);
        assert!(echoed.chars().count() <= ECHO_CHARS + 1, "{echoed}");
        assert!(echoed.ends_with("word…"), "{echoed}");
        assert_eq!(echo(&"é".repeat(ECHO_CHARS)), "é".repeat(ECHO_CHARS));
    }
}
