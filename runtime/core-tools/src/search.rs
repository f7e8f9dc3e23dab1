//! `search_files`: a regular expression searched line by line in the
//! workspace's files (or one file), skipping what `.gitignore`/`.ignore`
//! exclude, `.git`, binary files and symlinks.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use globset::{GlobBuilder, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::{CoreToolError, ErrorKind};
use super::files::looks_binary;
use super::parse_args;
use super::settings::CoreToolsConfig;
use super::walk::{self, EntryKind, Flow, IgnoreRules, MAX_WALK_DEPTH};
use super::workspace::{Workspace, open_regular_in, shown};

/// `search_files`.
pub const SEARCH_FILES: &str = "search_files";

/// Longest matching line shown, in characters.
const MAX_LINE_CHARS: usize = 300;

/// Longest piece of a line searched at once, in bytes: a longer line (a
/// minified file) is searched in pieces of this size, so memory stays
/// bounded.
const MAX_LINE_BYTES: u64 = 1 << 20;

/// Largest compiled pattern, in bytes (the regex crate's size limit).
const MAX_PATTERN_SIZE: usize = 1 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    max_matches: Option<u64>,
}

/// Which file names to search.
struct NameFilter {
    matcher: GlobMatcher,
    /// A glob with a `/` is matched against the whole relative path;
    /// otherwise against the file name.
    whole_path: bool,
}

impl NameFilter {
    fn matches(&self, relative: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// The matches found so far and what was skipped.
struct Found {
    matches: Vec<Value>,
    max: usize,
    files_searched: usize,
    binary_skipped: usize,
    unreadable: usize,
}

impl Found {
    fn full(&self) -> bool {
        self.matches.len() >= self.max
    }

    /// Searches one open file; returns `Stop` when the match limit is hit.
    fn search(
        &mut self,
        regex: &Regex,
        relative: &Path,
        file: cap_std::fs::File,
        cancel: &AtomicBool,
    ) -> Flow {
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        match looks_binary(&mut reader) {
            Ok(true) => {
                self.binary_skipped += 1;
                return Flow::Continue;
            }
            Ok(false) => {}
            Err(_) => {
                self.unreadable += 1;
                return Flow::Continue;
            }
        }
        self.files_searched += 1;
        let mut line = Vec::new();
        let mut number: u64 = 1;
        loop {
            if number.is_multiple_of(4096) && cancel.load(Ordering::Relaxed) {
                return Flow::Stop;
            }
            line.clear();
            match (&mut reader)
                .take(MAX_LINE_BYTES)
                .read_until(b'\n', &mut line)
            {
                Ok(0) => return Flow::Continue,
                Ok(_) => {}
                Err(_) => {
                    self.unreadable += 1;
                    return Flow::Continue;
                }
            }
            let complete = line.last() == Some(&b'\n');
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if regex.is_match(text) {
                self.matches.push(json!({
                    "path": shown(relative),
                    "line": number,
                    "text": cut(&String::from_utf8_lossy(text)),
                }));
                if self.full() {
                    return Flow::Stop;
                }
            }
            // A piece of a long line keeps the line's number.
            if complete {
                number += 1;
            }
        }
    }
}

/// `text` cut to [`MAX_LINE_CHARS`] characters, marked when cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `search_files`: lines matching `pattern` under `path` (a directory,
/// walked, or one file), at most `max_matches` (and never more than
/// `core_tools.max_search_matches`).
pub(crate) fn search_files(
    workspace: &Workspace,
    config: &CoreToolsConfig,
    arguments: Map<String, Value>,
    cancel: &AtomicBool,
) -> Result<Value, CoreToolError> {
    let args: SearchArgs = parse_args(SEARCH_FILES, arguments)?;
    let fail = |kind| CoreToolError::new(SEARCH_FILES, kind);
    let regex = RegexBuilder::new(&args.pattern)
        .case_insensitive(args.case_insensitive)
        .size_limit(MAX_PATTERN_SIZE)
        .build()
        .map_err(|e| {
            fail(ErrorKind::InvalidPattern {
                pattern: args.pattern.clone(),
                message: e.to_string(),
            })
        })?;
    let filter = match &args.glob {
        None => None,
        Some(glob) => Some(NameFilter {
            matcher: GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map_err(|e| {
                    fail(ErrorKind::InvalidArguments {
                        message: format!("glob `{glob}` is not valid: {}", e.kind()),
                    })
                })?
                .compile_matcher(),
            whole_path: glob.contains('/'),
        }),
    };
    let requested = args.path.as_deref().unwrap_or(".");
    let relative = workspace.relative(SEARCH_FILES, requested)?;
    let start = workspace.canonical(SEARCH_FILES, &relative, requested)?;
    workspace.check_protected(SEARCH_FILES, &start, requested)?;
    let max = args
        .max_matches
        .unwrap_or(config.max_search_matches as u64)
        .clamp(1, config.max_search_matches as u64) as usize;
    let mut found = Found {
        matches: Vec::new(),
        max,
        files_searched: 0,
        binary_skipped: 0,
        unreadable: 0,
    };
    let is_dir = workspace
        .dir()
        .metadata(super::workspace::dot_if_empty(&start))
        .map_err(|e| CoreToolError::io(SEARCH_FILES, requested, &e))?
        .is_dir();
    let mut cancelled = false;
    if is_dir {
        let dir = workspace.open_dir(SEARCH_FILES, &start, requested)?;
        let mut rules = IgnoreRules::for_start(workspace, &start);
        let summary = walk::walk(
            &dir,
            &start,
            &mut rules,
            MAX_WALK_DEPTH,
            cancel,
            workspace.protected_inside(),
            &mut |entry| {
                if entry.ignored
                    || entry.kind != EntryKind::File
                    || filter.as_ref().is_some_and(|f| !f.matches(entry.relative))
                {
                    return Flow::Continue;
                }
                // By name in its own directory's handle, not following a
                // symlink swapped in since the walk looked.
                match open_regular_in(entry.parent, Path::new(entry.name), false, SEARCH_FILES, "")
                {
                    Ok(file) => found.search(&regex, entry.relative, file, cancel),
                    Err(_) => {
                        found.unreadable += 1;
                        Flow::Continue
                    }
                }
            },
        );
        found.unreadable += summary.unreadable;
        cancelled = summary.cancelled;
    } else {
        let file = workspace.open_regular(SEARCH_FILES, &start, requested)?;
        found.search(&regex, &start, file, cancel);
    }
    let truncated = found.full();
    let mut result = json!({
        "pattern": args.pattern,
        "path": shown(&start),
        "matches": found.matches,
        "files_searched": found.files_searched,
        "truncated": truncated,
    });
    if let Some(object) = result.as_object_mut() {
        if truncated {
            object.insert(
                "note".into(),
                json!(format!(
                    "stopped at {max} matches; narrow the pattern, the path or the glob to see others"
                )),
            );
        }
        if found.binary_skipped > 0 {
            object.insert("binary_files_skipped".into(), json!(found.binary_skipped));
        }
        if found.unreadable > 0 {
            object.insert("unreadable".into(), json!(found.unreadable));
        }
        if cancelled {
            object.insert("cancelled".into(), json!(true));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn setup() -> (tempfile::TempDir, Workspace, CoreToolsConfig) {
        let temp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(temp.path()).unwrap();
        let config = CoreToolsConfig {
            max_search_matches: 3,
            ..CoreToolsConfig::default()
        };
        (temp, ws, config)
    }

    fn search(
        ws: &Workspace,
        config: &CoreToolsConfig,
        value: Value,
    ) -> Result<Value, CoreToolError> {
        let cancel = AtomicBool::new(false);
        search_files(ws, config, value.as_object().unwrap().clone(), &cancel)
    }

    #[test]
    fn finds_lines_with_numbers_in_name_order() {
        let (temp, ws, config) = setup();
        fs::create_dir(temp.path().join("src")).unwrap();
        fs::write(
            temp.path().join("src/b.rs"),
            "fn b() {}\r\nlet x = 1;\nfn c() {}\n",
        )
        .unwrap();
        fs::write(temp.path().join("src/a.rs"), "// FN upper\nfn a() {}").unwrap();
        fs::write(temp.path().join("notes.md"), "fn in prose\n").unwrap();
        let r = search(&ws, &config, json!({"pattern": "^fn ", "glob": "*.rs"})).unwrap();
        let found: Vec<(String, u64, String)> = r["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["path"].as_str().unwrap().to_owned(),
                    m["line"].as_u64().unwrap(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("src/a.rs".into(), 2, "fn a() {}".into()),
                ("src/b.rs".into(), 1, "fn b() {}".into()),
                ("src/b.rs".into(), 3, "fn c() {}".into()),
            ]
        );
        assert_eq!(r["files_searched"], 2);
        let r = search(
            &ws,
            &config,
            json!({"pattern": "fn upper", "case_insensitive": true, "path": "src/a.rs"}),
        )
        .unwrap();
        assert_eq!(r["matches"][0]["line"], 1);
        let r = search(&ws, &config, json!({"pattern": "fn", "glob": "src/*.md"})).unwrap();
        assert_eq!(r["matches"], json!([]));
    }

    #[test]
    fn stops_at_the_match_limit_and_skips_binary_files() {
        let (temp, ws, config) = setup();
        fs::write(temp.path().join("many.txt"), "x\n".repeat(10)).unwrap();
        fs::write(temp.path().join("bin.dat"), b"x\x00x\n").unwrap();
        let r = search(&ws, &config, json!({"pattern": "x"})).unwrap();
        assert_eq!(r["matches"].as_array().unwrap().len(), 3);
        assert_eq!(r["truncated"], true);
        assert_eq!(r["binary_files_skipped"], 1);
        let r = search(&ws, &config, json!({"pattern": "x", "max_matches": 1000})).unwrap();
        assert_eq!(r["matches"].as_array().unwrap().len(), 3);
        let r = search(&ws, &config, json!({"pattern": "x", "max_matches": 2})).unwrap();
        assert_eq!(r["matches"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn long_lines_are_cut_in_the_result() {
        let (temp, ws, config) = setup();
        fs::write(
            temp.path().join("min.js"),
            format!("{}needle{}", "a".repeat(500), "b".repeat(500)),
        )
        .unwrap();
        let r = search(&ws, &config, json!({"pattern": "needle"})).unwrap();
        let text = r["matches"][0]["text"].as_str().unwrap();
        assert_eq!(text.chars().count(), MAX_LINE_CHARS + 1);
        assert!(text.ends_with('…'));
    }

    #[test]
    fn bad_patterns_and_globs_are_errors() {
        let (_temp, ws, config) = setup();
        let error = search(&ws, &config, json!({"pattern": "("})).unwrap_err();
        assert_eq!(error.code(), "invalid_pattern");
        assert!(error.to_string().contains("`(`"), "{error}");
        let error = search(&ws, &config, json!({"pattern": "x", "glob": "a[" })).unwrap_err();
        assert_eq!(error.code(), "invalid_arguments");
        let error = search(&ws, &config, json!({"pattern": "x", "path": "missing"})).unwrap_err();
        assert_eq!(error.code(), "not_found");
    }
}
