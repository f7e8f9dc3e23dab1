//! A confined, depth-first walk of a workspace directory, in name order,
//! honouring `.gitignore` and `.ignore` files (matched with the `ignore`
//! crate's gitignore matcher).
//!
//! The `ignore` crate's own walker works on paths, so a directory swapped
//! for a symlink between its look and its read would be followed out of
//! the workspace. This walk instead opens each directory relative to its
//! parent's handle without following symlinks (`open_dir_nofollow`) and
//! never enters a symlink, so it cannot leave the directory it started in,
//! whatever changes under it. `.git` and ignored directories are reported
//! (marked ignored) but not entered.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::workspace::{Workspace, dot_if_empty, open_regular_in};

/// Deepest a walk goes, whatever it is asked (bounds the recursion).
pub(crate) const MAX_WALK_DEPTH: usize = 256;

/// The ignore files read in each directory, later ones taking precedence.
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];

/// Largest ignore file read, in bytes.
const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;

/// What a directory entry is, without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed by a walk).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl EntryKind {
    /// `file`, `dir`, `symlink` or `other`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }

    fn of(file_type: cap_std::fs::FileType) -> EntryKind {
        if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        }
    }
}

/// One entry met by a walk.
pub(crate) struct Entry<'a> {
    /// Its path relative to the workspace root.
    pub(crate) relative: &'a Path,
    /// Its name in its directory.
    pub(crate) name: &'a OsStr,
    /// What it is.
    pub(crate) kind: EntryKind,
    /// Whether an ignore file (or being `.git`) excludes it.
    pub(crate) ignored: bool,
    /// Its directory's handle, to open it by `name`.
    pub(crate) parent: &'a Dir,
}

/// Whether a walk goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Visit the next entry.
    Continue,
    /// Stop the whole walk.
    Stop,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WalkSummary {
    /// Directories that could not be opened or read (skipped).
    pub(crate) unreadable: usize,
    /// Whether the caller went away and the walk stopped early.
    pub(crate) cancelled: bool,
}

/// The ignore rules in force at one point of a walk: one matcher per
/// directory that has ignore files, deepest last.
#[derive(Default)]
pub(crate) struct IgnoreRules {
    layers: Vec<(PathBuf, Gitignore)>,
}

impl IgnoreRules {
    /// The rules in force in `start` (relative to the root, symlinks
    /// resolved): those of the root and of every directory down to it.
    pub(crate) fn for_start(workspace: &Workspace, start: &Path) -> IgnoreRules {
        let mut rules = IgnoreRules::default();
        let mut prefix = PathBuf::new();
        let mut components = start.components();
        loop {
            if let Ok(dir) = workspace.dir().open_dir(dot_if_empty(&prefix)) {
                rules.push_dir(&dir, &prefix);
            }
            match components.next() {
                Some(component) => prefix.push(component),
                None => return rules,
            }
        }
    }

    /// Whether `relative` (from the root) is ignored: the deepest layer
    /// with an opinion decides.
    pub(crate) fn is_ignored(&self, relative: &Path, is_dir: bool) -> bool {
        for (dir, matcher) in self.layers.iter().rev() {
            let Ok(inside) = relative.strip_prefix(dir) else {
                continue;
            };
            match matcher.matched(inside, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// Adds the ignore files of `dir` (at `relative`); returns whether it
    /// had any rule (and so whether [`IgnoreRules::pop`] must follow).
    fn push_dir(&mut self, dir: &Dir, relative: &Path) -> bool {
        // Root `.`: patterns are matched against paths relative to `dir`,
        // which `is_ignored` computes itself.
        let mut builder = GitignoreBuilder::new(".");
        let mut any = false;
        for name in IGNORE_FILES {
            let Ok(file) = open_regular_in(dir, Path::new(name), false, "", "") else {
                continue;
            };
            let mut text = String::new();
            if file
                .take(MAX_IGNORE_FILE_BYTES)
                .read_to_string(&mut text)
                .is_err()
            {
                continue;
            }
            for line in text.lines() {
                // A line that is not a valid glob is skipped, as git does.
                any |= builder.add_line(None, line).is_ok();
            }
        }
        match builder.build() {
            Ok(matcher) if any && !matcher.is_empty() => {
                self.layers.push((relative.to_path_buf(), matcher));
                true
            }
            _ => false,
        }
    }

    fn pop(&mut self) {
        self.layers.pop();
    }
}

/// Walks `dir` (at `relative` from the root, symlinks resolved) down to
/// `max_depth` levels, calling `visit` for every entry in name order,
/// depth first. Stops when `visit` says so or `cancel` is set.
pub(crate) fn walk(
    dir: &Dir,
    relative: &Path,
    rules: &mut IgnoreRules,
    max_depth: usize,
    cancel: &AtomicBool,
    protected: &[PathBuf],
    visit: &mut dyn FnMut(&Entry<'_>) -> Flow,
) -> WalkSummary {
    let mut walker = Walker {
        protected,
        rules,
        max_depth: max_depth.min(MAX_WALK_DEPTH),
        cancel,
        summary: WalkSummary::default(),
    };
    walker.walk_dir(dir, relative, 1, visit);
    walker.summary
}

struct Walker<'a> {
    /// Paths relative to the root that are neither shown nor entered.
    protected: &'a [PathBuf],
    rules: &'a mut IgnoreRules,
    max_depth: usize,
    cancel: &'a AtomicBool,
    summary: WalkSummary,
}

impl Walker<'_> {
    fn walk_dir(
        &mut self,
        dir: &Dir,
        relative: &Path,
        depth: usize,
        visit: &mut dyn FnMut(&Entry<'_>) -> Flow,
    ) -> Flow {
        let Ok(read) = dir.entries() else {
            self.summary.unreadable += 1;
            return Flow::Continue;
        };
        let mut entries: Vec<(OsString, EntryKind)> = read
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let kind = EntryKind::of(entry.file_type().ok()?);
                Some((entry.file_name(), kind))
            })
            .collect();
        entries.sort();
        for (name, kind) in entries {
            if self.cancel.load(Ordering::Relaxed) {
                self.summary.cancelled = true;
                return Flow::Stop;
            }
            let child = relative.join(&name);
            if self.protected.iter().any(|p| child.starts_with(p)) {
                continue;
            }
            let is_dir = kind == EntryKind::Dir;
            let ignored = name == ".git" || self.rules.is_ignored(&child, is_dir);
            let entry = Entry {
                relative: &child,
                name: &name,
                kind,
                ignored,
                parent: dir,
            };
            if visit(&entry) == Flow::Stop {
                return Flow::Stop;
            }
            if !is_dir || ignored || depth >= self.max_depth {
                continue;
            }
            // Never follows a symlink, even one swapped in since the look.
            let Ok(sub) = dir.open_dir_nofollow(&name) else {
                self.summary.unreadable += 1;
                continue;
            };
            let pushed = self.rules.push_dir(&sub, &child);
            let flow = self.walk_dir(&sub, &child, depth + 1, visit);
            if pushed {
                self.rules.pop();
            }
            if flow == Flow::Stop {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> (tempfile::TempDir, Workspace) {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("ws");
        for dir in ["ws/src/deep", "ws/target/debug", "ws/.git", "outside"] {
            fs::create_dir_all(temp.path().join(dir)).unwrap();
        }
        for (file, text) in [
            ("ws/.gitignore", "/target\n*.log\n!keep.log\n"),
            ("ws/src/.ignore", "generated.rs\n"),
            ("ws/src/lib.rs", ""),
            ("ws/src/generated.rs", ""),
            ("ws/src/deep/generated.rs", ""),
            ("ws/src/deep/a.log", ""),
            ("ws/src/deep/keep.log", ""),
            ("ws/target/debug/out", ""),
            ("outside/secret", ""),
        ] {
            fs::write(temp.path().join(file), text).unwrap();
        }
        std::os::unix::fs::symlink(temp.path().join("outside"), root.join("out_link")).unwrap();
        let ws = Workspace::open(&root).unwrap();
        (temp, ws)
    }

    fn collect(ws: &Workspace, start: &str, depth: usize) -> Vec<(String, &'static str, bool)> {
        let start = PathBuf::from(start);
        let dir = ws.dir().open_dir(dot_if_empty(&start)).unwrap();
        let mut rules = IgnoreRules::for_start(ws, &start);
        let mut seen = Vec::new();
        let cancel = AtomicBool::new(false);
        let summary = walk(&dir, &start, &mut rules, depth, &cancel, &[], &mut |e| {
            seen.push((
                e.relative.to_string_lossy().into_owned(),
                e.kind.as_str(),
                e.ignored,
            ));
            Flow::Continue
        });
        assert_eq!(summary, WalkSummary::default());
        seen
    }

    #[test]
    fn walks_in_name_order_marking_and_not_entering_ignored_dirs() {
        let (_temp, ws) = tree();
        let seen = collect(&ws, "", 10);
        let expected = [
            (".git", "dir", true),
            (".gitignore", "file", false),
            ("out_link", "symlink", false),
            ("src", "dir", false),
            ("src/.ignore", "file", false),
            ("src/deep", "dir", false),
            ("src/deep/a.log", "file", true),
            ("src/deep/generated.rs", "file", true),
            ("src/deep/keep.log", "file", false),
            ("src/generated.rs", "file", true),
            ("src/lib.rs", "file", false),
            ("target", "dir", true),
        ];
        let expected: Vec<(String, &str, bool)> = expected
            .into_iter()
            .map(|(p, k, i)| (p.to_owned(), k, i))
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn depth_limits_the_walk_and_rules_of_ancestors_apply_below_the_start() {
        let (_temp, ws) = tree();
        let seen = collect(&ws, "", 1);
        assert_eq!(seen.len(), 5, "{seen:?}");
        let seen = collect(&ws, "src/deep", 1);
        let ignored: Vec<bool> = seen.iter().map(|s| s.2).collect();
        assert_eq!(ignored, [true, true, false], "{seen:?}");
    }

    #[test]
    fn a_set_cancel_flag_stops_the_walk() {
        let (_temp, ws) = tree();
        let mut rules = IgnoreRules::default();
        let cancel = AtomicBool::new(true);
        let mut visited = 0;
        let summary = walk(
            ws.dir(),
            Path::new(""),
            &mut rules,
            10,
            &cancel,
            &[],
            &mut |_| {
                visited += 1;
                Flow::Continue
            },
        );
        assert!(summary.cancelled);
        assert_eq!(visited, 0);
    }
}
