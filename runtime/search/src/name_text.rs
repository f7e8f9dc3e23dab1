//! The names of a segment's tools in one lowercased text, so that the
//! name-substring fallback (a query that scores nothing) is one vectorised
//! substring search (`memchr::memmem`) over a few bytes per tool instead of
//! a comparison loop per tool.

use std::sync::Arc;

use memchr::memmem;
use quiver_tool::tool::Tool;

use crate::classic::{exposed_prefix_len, unprefixed_name_contains};

/// What one entry of a [`NameText`] is.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// A tool's own name: any occurrence counts.
    Own,
    /// A tool's exposed name, ASCII: an occurrence counts when it ends
    /// after the first `prefix` bytes (what the source adds, shared by
    /// every tool of a server).
    Exposed { prefix: u32 },
    /// A name with other characters: an occurrence makes the tool a
    /// candidate, which [`unprefixed_name_contains`] decides.
    Verify,
}

/// Every tool's own and exposed name, lowercased, each followed by a NUL;
/// with, per entry, where it starts, its tool and its kind.
#[derive(Debug, Default)]
pub(crate) struct NameText {
    text: Vec<u8>,
    /// (start in `text`, tool, kind), by start.
    entries: Vec<(u32, u32, Entry)>,
}

impl NameText {
    /// The names of `docs`, in order.
    pub(crate) fn build(docs: &[Arc<Tool>]) -> NameText {
        let push = |text: &mut Vec<u8>, doc: usize, name: &str, entry: Entry| {
            let start = text.len() as u32;
            if name.is_ascii() {
                text.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
            } else {
                text.extend_from_slice(name.to_lowercase().as_bytes());
            }
            text.push(0);
            (start, doc as u32, entry)
        };
        let mut text = Vec::new();
        let mut entries = Vec::with_capacity(docs.len() * 2);
        for (doc, tool) in docs.iter().enumerate() {
            let (own, exposed) = (tool.original_name(), tool.name());
            let ascii = own.is_ascii() && exposed.is_ascii();
            if !ascii {
                entries.push(push(&mut text, doc, own, Entry::Verify));
                entries.push(push(&mut text, doc, exposed, Entry::Verify));
                continue;
            }
            entries.push(push(&mut text, doc, own, Entry::Own));
            if exposed != own {
                let prefix = exposed_prefix_len(tool) as u32;
                entries.push(push(&mut text, doc, exposed, Entry::Exposed { prefix }));
            }
        }
        NameText { text, entries }
    }

    /// Calls `found` with each tool (by position) whose name holds
    /// `needle` (lowercase) as the fallback counts it, in order, once
    /// each, until it returns `false`.
    pub(crate) fn each_match(
        &self,
        docs: &[Arc<Tool>],
        needle: &str,
        mut found: impl FnMut(u32) -> bool,
    ) {
        if needle.is_empty() || needle.contains('\0') {
            return;
        }
        let length = needle.len();
        let mut last: Option<u32> = None;
        for at in memmem::find_iter(&self.text, needle.as_bytes()) {
            let entry = self
                .entries
                .partition_point(|&(start, _, _)| start as usize <= at);
            let Some(&(start, doc, kind)) = entry.checked_sub(1).and_then(|e| self.entries.get(e))
            else {
                continue;
            };
            if last == Some(doc) {
                continue;
            }
            let offset = at - start as usize;
            let counts = match kind {
                Entry::Own => true,
                Entry::Exposed { prefix } => offset + length > prefix as usize,
                Entry::Verify => docs
                    .get(doc as usize)
                    .is_some_and(|tool| unprefixed_name_contains(tool, needle)),
            };
            if counts {
                last = Some(doc);
                if !found(doc) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classic::name_substring_matches;
    use quiver_tool::tool::{ToolSource, ToolSpec};
    use serde_json::json;

    fn tool(name: &str, source: ToolSource) -> Arc<Tool> {
        let exposed = match &source {
            ToolSource::Mcp(server) => format!("mcp_{server}_{name}"),
            _ => name.to_owned(),
        };
        let spec = ToolSpec::new(name, "", json!({"type": "object"}));
        Arc::new(Tool::new(exposed, source, &spec))
    }

    /// The matches as the per-tool scan finds them, for every needle.
    #[test]
    fn finds_what_the_per_tool_scan_finds() {
        let github = || ToolSource::Mcp("github".into());
        let docs = vec![
            tool("create_issue", github()),
            tool("list_issues", github()),
            tool("CreatePullRequest", github()),
            tool("grüße_senden", ToolSource::Mcp("post".into())),
            tool("İstanbul_weather", ToolSource::Mcp("wx".into())),
            tool("word_count", ToolSource::Plugin("text".into())),
            tool("github_lookup", ToolSource::Plugin("text".into())),
        ];
        let names = NameText::build(&docs);
        for needle in [
            "issue",
            "ISSUE",
            "mcp",
            "mcp_",
            "github",
            "github_",
            "hub_c",
            "_create",
            "pull",
            "requ",
            "grüße",
            "GRÜSSE",
            "ü",
            "i̇stanbul",
            "istanbul",
            "weather",
            "count",
            "t",
            "word count",
            "x",
            "",
            "  issue ",
            "e_i",
        ] {
            let expected: Vec<String> = name_substring_matches(&docs, needle, 100, |_| true)
                .into_iter()
                .map(|s| s.tool.name().to_owned())
                .collect();
            let mut got = Vec::new();
            names.each_match(&docs, needle.trim().to_lowercase().as_str(), |doc| {
                got.push(docs[doc as usize].name().to_owned());
                true
            });
            assert_eq!(got, expected, "{needle:?}");
        }
        // It stops when told to.
        let mut seen = 0;
        names.each_match(&docs, "issue", |_| {
            seen += 1;
            false
        });
        assert_eq!(seen, 1);
    }
}
