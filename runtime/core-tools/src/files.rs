//! `read_file`, `write_file` and `list_dir`: paged reads that say what was
//! cut, atomic writes (a temporary file renamed into place) and listings,
//! every access through the workspace's handle.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::{CoreToolError, ErrorKind};
use super::parse_args;
use super::settings::CoreToolsConfig;
use super::walk::{self, EntryKind, Flow, IgnoreRules};
use super::workspace::{Workspace, shown};

/// `read_file`.
pub const READ_FILE: &str = "read_file";
/// `write_file`.
pub const WRITE_FILE: &str = "write_file";
/// `list_dir`.
pub const LIST_DIR: &str = "list_dir";

/// A file holding a NUL byte in its first this-many bytes is binary (the
/// rule git and ripgrep use).
pub(crate) const BINARY_PROBE_BYTES: usize = 8192;

/// Deepest `list_dir` goes.
pub const MAX_LIST_DEPTH: u64 = 16;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    start_line: Option<u64>,
    max_lines: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    create_dirs: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    path: Option<String>,
    depth: Option<u64>,
}

/// Whether `reader` has nothing left.
fn at_eof(reader: &mut impl BufRead) -> io::Result<bool> {
    Ok(reader.fill_buf()?.is_empty())
}

/// Consumes the rest of the current line (through its `\n`) without
/// holding it in memory; false when there was nothing left.
fn skip_line(reader: &mut impl BufRead) -> io::Result<bool> {
    let mut consumed = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(consumed);
        }
        consumed = true;
        if let Some(end) = buffer.iter().position(|&b| b == b'\n') {
            reader.consume(end + 1);
            return Ok(true);
        }
        let all = buffer.len();
        reader.consume(all);
    }
}

/// Whether the first bytes of `reader` (looked at, not consumed) hold a NUL.
pub(crate) fn looks_binary(reader: &mut impl BufRead) -> io::Result<bool> {
    let buffer = reader.fill_buf()?;
    Ok(buffer[..buffer.len().min(BINARY_PROBE_BYTES)].contains(&0))
}

/// Drops a UTF-8 sequence cut short at the end of `bytes`.
fn trim_partial_char(bytes: &mut Vec<u8>) {
    if let Err(error) = std::str::from_utf8(bytes)
        && error.error_len().is_none()
    {
        bytes.truncate(error.valid_up_to());
    }
}

/// Why a read stopped before the end of the file.
enum Stop {
    /// `max_lines` lines were read.
    Lines,
    /// The next line would not fit in `max_read_bytes`.
    Bytes,
    /// The first line alone is longer than `max_read_bytes`; its start is shown.
    LongLine,
}

/// `read_file`: lines `start_line..` of a file, at most `max_read_bytes`
/// bytes and `max_lines` lines, whole lines only unless one line alone is
/// over the limit. Binary files are reported, not dumped.
pub(crate) fn read_file(
    workspace: &Workspace,
    config: &CoreToolsConfig,
    arguments: Map<String, Value>,
    cancel: &AtomicBool,
) -> Result<Value, CoreToolError> {
    let args: ReadArgs = parse_args(READ_FILE, arguments)?;
    let relative = workspace.relative(READ_FILE, &args.path)?;
    let path = shown(&relative);
    let file = workspace.open_regular(READ_FILE, &relative, &args.path)?;
    let io_error = |e: io::Error| CoreToolError::io(READ_FILE, &args.path, &e);
    let size = file.metadata().map_err(io_error)?.len();
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    if looks_binary(&mut reader).map_err(io_error)? {
        return Ok(json!({
            "path": path,
            "size_bytes": size,
            "binary": true,
            "note": format!("`{path}` is a binary file (a NUL byte in its first {BINARY_PROBE_BYTES} bytes); its content is not shown"),
        }));
    }
    let start = args.start_line.unwrap_or(1).max(1);
    let mut line = 1;
    while line < start && skip_line(&mut reader).map_err(io_error)? {
        line += 1;
        // Skipping to a far line of a huge file takes a while: stop when
        // the caller has gone away.
        if line.is_multiple_of(4096) && cancel.load(Ordering::Relaxed) {
            return Err(CoreToolError::new(
                READ_FILE,
                ErrorKind::Internal {
                    message: "the call was cancelled".into(),
                },
            ));
        }
    }
    if line < start || (start > 1 && at_eof(&mut reader).map_err(io_error)?) {
        let lines = line - 1;
        return Ok(json!({
            "path": path,
            "size_bytes": size,
            "start_line": start,
            "content": "",
            "total_lines": lines,
            "truncated": false,
            "note": format!("start_line {start} is past the end: `{path}` has {lines} lines"),
        }));
    }
    let budget = config.max_read_bytes;
    let mut content = Vec::new();
    let mut lines_read: u64 = 0;
    let mut stop = None;
    loop {
        if args.max_lines.is_some_and(|max| lines_read >= max) {
            stop = Some(Stop::Lines);
            break;
        }
        let before = content.len();
        let room = budget - before;
        if room == 0 {
            stop = Some(Stop::Bytes);
            break;
        }
        let read = (&mut reader)
            .take(room as u64)
            .read_until(b'\n', &mut content)
            .map_err(io_error)?;
        if read == 0 {
            break;
        }
        if content.last() == Some(&b'\n') || at_eof(&mut reader).map_err(io_error)? {
            lines_read += 1;
            continue;
        }
        // The line does not fit in what is left of the budget.
        if lines_read == 0 {
            lines_read = 1;
            trim_partial_char(&mut content);
            skip_line(&mut reader).map_err(io_error)?;
            stop = Some(Stop::LongLine);
        } else {
            content.truncate(before);
            stop = Some(Stop::Bytes);
        }
        break;
    }
    let more = !at_eof(&mut reader).map_err(io_error)?;
    // The last line shown; `start - 1` when none was (an empty file).
    let end = start + lines_read - 1;
    let mut result = json!({
        "path": path,
        "size_bytes": size,
        "start_line": start,
        "content": String::from_utf8_lossy(&content),
        "truncated": more || matches!(stop, Some(Stop::LongLine)),
    });
    let next = end + 1;
    let read_on = if more {
        format!("; read on with start_line {next}")
    } else {
        String::new()
    };
    let note = match stop {
        Some(Stop::LongLine) => Some(format!(
            "line {start} is longer than `core_tools.max_read_bytes` ({budget} bytes); showed its first {} bytes{read_on}",
            content.len()
        )),
        Some(Stop::Bytes) if more => Some(format!(
            "showed lines {start}-{end} ({} bytes; the next line would pass `core_tools.max_read_bytes`, {budget} bytes){read_on}",
            content.len()
        )),
        Some(Stop::Lines) if more => Some(format!(
            "showed lines {start}-{end} (max_lines {lines_read}){read_on}"
        )),
        _ => None,
    };
    if let Some(object) = result.as_object_mut() {
        if lines_read > 0 {
            object.insert("end_line".into(), json!(end));
        }
        if more {
            object.insert("next_start_line".into(), json!(next));
        } else {
            object.insert("total_lines".into(), json!(end));
        }
        if let Some(note) = note {
            object.insert("note".into(), json!(note));
        }
    }
    Ok(result)
}

/// `write_file`: writes `content` to a temporary file in the target's
/// directory, syncs it and renames it over the target, so readers see the
/// old file or the new one, never a part. A symlink inside the workspace
/// is written through (its target is replaced); an existing file keeps its
/// permissions.
pub(crate) fn write_file(
    workspace: &Workspace,
    config: &CoreToolsConfig,
    arguments: Map<String, Value>,
    _cancel: &AtomicBool,
) -> Result<Value, CoreToolError> {
    let args: WriteArgs = parse_args(WRITE_FILE, arguments)?;
    let fail = |kind| CoreToolError::new(WRITE_FILE, kind);
    let io_error = |path: &str, e: io::Error| CoreToolError::io(WRITE_FILE, path, &e);
    if args.content.len() > config.max_write_bytes {
        return Err(fail(ErrorKind::TooLarge {
            path: args.path,
            size: args.content.len() as u64,
            limit: config.max_write_bytes as u64,
            key: "core_tools.max_write_bytes",
        }));
    }
    let relative = workspace.relative(WRITE_FILE, &args.path)?;
    let (Some(parent), Some(_)) = (relative.parent(), relative.file_name()) else {
        return Err(fail(if relative.as_os_str().is_empty() {
            ErrorKind::IsADirectory { path: args.path }
        } else {
            ErrorKind::InvalidArguments {
                message: format!("path `{}` must end in a file name", args.path),
            }
        }));
    };
    let parent_shown = shown(parent);
    if args.create_dirs && !parent.as_os_str().is_empty() {
        match workspace.dir().create_dir_all(parent) {
            // Something that is not a directory (a file, a symlink leading
            // out) is in the way: resolving the path below says which.
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(io_error(&parent_shown, e));
            }
            _ => {}
        }
    }
    // Where the file really is: a symlink that stays inside is written
    // through; one that leads out fails here and again at the rename.
    let target = match workspace.dir().canonicalize(&relative) {
        Ok(target) => target,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = workspace
                .canonical(WRITE_FILE, parent, &parent_shown)
                .map_err(|error| match error.kind {
                    ErrorKind::NotFound { path } => fail(ErrorKind::ParentNotFound {
                        path: args.path.clone(),
                        parent: path,
                    }),
                    _ => error,
                })?;
            parent.join(relative.file_name().unwrap_or_default())
        }
        Err(e) => return Err(io_error(&args.path, e)),
    };
    let (Some(target_parent), Some(target_name)) = (target.parent(), target.file_name()) else {
        return Err(fail(ErrorKind::IsADirectory { path: args.path }));
    };
    workspace.check_protected(WRITE_FILE, &target, &args.path)?;
    let directory = workspace.open_dir(WRITE_FILE, target_parent, &parent_shown)?;
    let existing = match directory.symlink_metadata(target_name) {
        Ok(metadata) => Some(metadata),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(&args.path, e)),
    };
    if existing.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(fail(ErrorKind::IsADirectory { path: args.path }));
    }
    // A FIFO, socket or device is not replaced by a regular file.
    if existing
        .as_ref()
        .is_some_and(|m| !m.is_file() && !m.file_type().is_symlink())
    {
        return Err(fail(ErrorKind::NotARegularFile { path: args.path }));
    }
    let mut temp =
        cap_tempfile::TempFile::new(&directory).map_err(|e| io_error(&parent_shown, e))?;
    temp.write_all(args.content.as_bytes())
        .map_err(|e| io_error(&args.path, e))?;
    if let Some(metadata) = existing.as_ref().filter(|m| m.is_file()) {
        temp.as_file()
            .set_permissions(metadata.permissions())
            .map_err(|e| io_error(&args.path, e))?;
    }
    temp.as_file()
        .sync_all()
        .map_err(|e| io_error(&args.path, e))?;
    temp.replace(target_name)
        .map_err(|e| io_error(&args.path, e))?;
    let mut result = json!({
        "path": shown(&relative),
        "bytes_written": args.content.len(),
        "created": existing.is_none(),
    });
    if target != normalised(&relative)
        && let Some(object) = result.as_object_mut()
    {
        object.insert("written_to".into(), json!(shown(&target)));
    }
    Ok(result)
}

/// `relative` without `.` components (what canonicalisation gives when no
/// symlink and no `..` is on the way).
fn normalised(relative: &Path) -> PathBuf {
    relative.components().collect()
}

/// `list_dir`: the entries of a directory (and below, up to `depth`
/// levels), in name order, at most `max_list_entries`. Ignored entries are
/// listed and marked; ignored directories and `.git` are not entered.
pub(crate) fn list_dir(
    workspace: &Workspace,
    config: &CoreToolsConfig,
    arguments: Map<String, Value>,
    cancel: &AtomicBool,
) -> Result<Value, CoreToolError> {
    let args: ListArgs = parse_args(LIST_DIR, arguments)?;
    let requested = args.path.as_deref().unwrap_or(".");
    let depth = args.depth.unwrap_or(1).clamp(1, MAX_LIST_DEPTH) as usize;
    let relative = workspace.relative(LIST_DIR, requested)?;
    let dir = workspace.open_dir(LIST_DIR, &relative, requested)?;
    let start = workspace.canonical(LIST_DIR, &relative, requested)?;
    workspace.check_protected(LIST_DIR, &start, requested)?;
    let mut rules = IgnoreRules::for_start(workspace, &start);
    let mut entries = Vec::new();
    let mut truncated = false;
    let protected = workspace.protected_inside();
    let summary = walk::walk(
        &dir,
        &start,
        &mut rules,
        depth,
        cancel,
        protected,
        &mut |entry| {
            if entries.len() >= config.max_list_entries {
                truncated = true;
                return Flow::Stop;
            }
            let mut item = Map::new();
            item.insert("path".into(), json!(shown(entry.relative)));
            item.insert("type".into(), json!(entry.kind.as_str()));
            if entry.kind == EntryKind::File
                && let Ok(metadata) = entry.parent.symlink_metadata(entry.name)
            {
                item.insert("size".into(), json!(metadata.len()));
            }
            if entry.ignored {
                item.insert("ignored".into(), json!(true));
            }
            entries.push(Value::Object(item));
            Flow::Continue
        },
    );
    let mut result = json!({
        "path": shown(&start),
        "depth": depth,
        "entries": entries,
        "truncated": truncated,
    });
    if let Some(object) = result.as_object_mut() {
        if truncated {
            object.insert(
                "note".into(),
                json!(format!(
                    "stopped at `core_tools.max_list_entries` ({} entries); list a subdirectory or a smaller depth",
                    config.max_list_entries
                )),
            );
        }
        if summary.unreadable > 0 {
            object.insert("unreadable_dirs".into(), json!(summary.unreadable));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::FileTypeExt;

    fn setup(max_read_bytes: usize) -> (tempfile::TempDir, Workspace, CoreToolsConfig) {
        let temp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(temp.path()).unwrap();
        let config = CoreToolsConfig {
            max_read_bytes,
            max_write_bytes: 64,
            max_list_entries: 3,
            ..CoreToolsConfig::default()
        };
        (temp, ws, config)
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn read(ws: &Workspace, config: &CoreToolsConfig, value: Value) -> Value {
        read_file(ws, config, args(value), &AtomicBool::new(false)).unwrap()
    }

    #[test]
    fn a_fifo_is_not_replaced_by_write_file() {
        let (temp, ws, config) = setup(1024);
        let fifo = temp.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let error = write_file(
            &ws,
            &config,
            args(json!({"path": "pipe", "content": "x"})),
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert_eq!(error.code(), "not_a_regular_file");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn whole_small_file_is_read_with_its_line_count() {
        let (temp, ws, config) = setup(1024);
        fs::write(temp.path().join("a.txt"), "one\ntwo\nthree").unwrap();
        let r = read(&ws, &config, json!({"path": "a.txt"}));
        assert_eq!(r["content"], "one\ntwo\nthree");
        assert_eq!(
            (r["start_line"].as_u64(), r["end_line"].as_u64()),
            (Some(1), Some(3))
        );
        assert_eq!(r["total_lines"], 3);
        assert_eq!(r["truncated"], false);
        assert!(r.get("note").is_none());
        fs::write(temp.path().join("empty"), "").unwrap();
        let r = read(&ws, &config, json!({"path": "empty"}));
        assert_eq!(
            (r["content"].as_str(), r["total_lines"].as_u64()),
            (Some(""), Some(0))
        );
        assert!(r.get("end_line").is_none());
    }

    #[test]
    fn pages_by_lines_and_by_bytes_and_says_where_to_go_on() {
        let (temp, ws, config) = setup(1024);
        let text: String = (1..=400).map(|i| format!("line {i:04}\n")).collect();
        fs::write(temp.path().join("big.txt"), &text).unwrap();
        let r = read(
            &ws,
            &config,
            json!({"path": "big.txt", "start_line": 10, "max_lines": 2}),
        );
        assert_eq!(r["content"], "line 0010\nline 0011\n");
        assert_eq!(r["next_start_line"], 12);
        assert!(r["note"].as_str().unwrap().contains("start_line 12"));
        // 10 bytes a line: 102 whole lines fit in 1024 bytes.
        let r = read(&ws, &config, json!({"path": "big.txt"}));
        assert_eq!(r["end_line"], 102);
        assert_eq!(r["content"].as_str().unwrap().len(), 1020);
        assert_eq!(r["truncated"], true);
        assert_eq!(r["next_start_line"], 103);
        assert!(
            r["note"].as_str().unwrap().contains("max_read_bytes"),
            "{r}"
        );
        let r = read(&ws, &config, json!({"path": "big.txt", "start_line": 400}));
        assert_eq!(
            (r["content"].as_str(), r["total_lines"].as_u64()),
            (Some("line 0400\n"), Some(400))
        );
        let r = read(&ws, &config, json!({"path": "big.txt", "start_line": 401}));
        assert_eq!(r["content"], "");
        assert!(r["note"].as_str().unwrap().contains("has 400 lines"), "{r}");
    }

    #[test]
    fn a_line_longer_than_the_limit_is_cut_on_a_character_boundary() {
        let (temp, ws, config) = setup(1024);
        let long = "é".repeat(1000);
        fs::write(temp.path().join("long.txt"), format!("{long}\nnext\n")).unwrap();
        let r = read(&ws, &config, json!({"path": "long.txt"}));
        let content = r["content"].as_str().unwrap();
        assert_eq!(content.len(), 1024);
        assert!(!content.contains('\u{fffd}'));
        assert_eq!(r["truncated"], true);
        assert_eq!(r["next_start_line"], 2);
        assert!(
            r["note"].as_str().unwrap().contains("line 1 is longer"),
            "{r}"
        );
        let r = read(&ws, &config, json!({"path": "long.txt", "start_line": 2}));
        assert_eq!(r["content"], "next\n");
    }

    #[test]
    fn binary_files_are_reported_not_dumped() {
        let (temp, ws, config) = setup(1024);
        fs::write(temp.path().join("bin"), b"\x7fELF\x00\x01\x02").unwrap();
        let r = read(&ws, &config, json!({"path": "bin"}));
        assert_eq!(r["binary"], true);
        assert!(r.get("content").is_none());
        assert_eq!(r["size_bytes"], 7);
    }

    #[test]
    fn write_is_atomic_keeps_permissions_and_reports_creation() {
        use std::os::unix::fs::PermissionsExt;
        let (temp, ws, config) = setup(1024);
        let w = |value: Value| write_file(&ws, &config, args(value), &AtomicBool::new(false));
        let r = w(json!({"path": "new.txt", "content": "hello"})).unwrap();
        assert_eq!(
            (r["created"].as_bool(), r["bytes_written"].as_u64()),
            (Some(true), Some(5))
        );
        let script = temp.path().join("run.sh");
        fs::write(&script, "old").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).unwrap();
        let r = w(json!({"path": "run.sh", "content": "#!/bin/sh\n"})).unwrap();
        assert_eq!(r["created"], false);
        assert_eq!(fs::read_to_string(&script).unwrap(), "#!/bin/sh\n");
        assert_eq!(
            fs::metadata(&script).unwrap().permissions().mode() & 0o777,
            0o750
        );
        // No temporary file is left beside the targets.
        let mut names: Vec<String> = fs::read_dir(temp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["new.txt", "run.sh"]);
    }

    #[test]
    fn write_errors_name_the_problem() {
        let (temp, ws, config) = setup(1024);
        let code = |value: Value| {
            write_file(&ws, &config, args(value), &AtomicBool::new(false))
                .unwrap_err()
                .code()
        };
        assert_eq!(
            code(json!({"path": "x", "content": "y".repeat(65)})),
            "too_large"
        );
        assert_eq!(
            code(json!({"path": "a/b/c.txt", "content": ""})),
            "not_found"
        );
        fs::create_dir(temp.path().join("d")).unwrap();
        assert_eq!(code(json!({"path": "d", "content": ""})), "is_a_directory");
        assert_eq!(code(json!({"path": ".", "content": ""})), "is_a_directory");
        assert_eq!(
            code(json!({"path": "d/..", "content": ""})),
            "invalid_arguments"
        );
        fs::write(temp.path().join("f"), "").unwrap();
        assert_eq!(
            code(json!({"path": "f/x.txt", "content": "", "create_dirs": true})),
            "not_a_directory"
        );
        assert_eq!(
            code(json!({"path": "x", "content": "", "mode": 1})),
            "invalid_arguments"
        );
        let w = |value: Value| write_file(&ws, &config, args(value), &AtomicBool::new(false));
        let missing = w(json!({"path": "a/b/c.txt", "content": ""}))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("create_dirs"), "{missing}");
        let r = w(json!({"path": "a/b/c.txt", "content": "x", "create_dirs": true})).unwrap();
        assert_eq!(r["path"], "a/b/c.txt");
        assert_eq!(
            fs::read_to_string(temp.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[test]
    fn listing_stops_at_the_entry_limit_and_says_so() {
        let (temp, ws, config) = setup(1024);
        for name in ["a", "b", "c", "d"] {
            fs::write(temp.path().join(name), name).unwrap();
        }
        let cancel = AtomicBool::new(false);
        let r = list_dir(&ws, &config, Map::new(), &cancel).unwrap();
        assert_eq!(r["entries"].as_array().unwrap().len(), 3);
        assert_eq!(
            r["entries"][0],
            json!({"path": "a", "type": "file", "size": 1})
        );
        assert_eq!(r["truncated"], true);
        assert!(r["note"].as_str().unwrap().contains("max_list_entries"));
        let error = list_dir(&ws, &config, args(json!({"path": "a"})), &cancel).unwrap_err();
        assert_eq!(error.code(), "not_a_directory");
        let error = list_dir(&ws, &config, args(json!({"path": "nope"})), &cancel).unwrap_err();
        assert_eq!(error.code(), "not_found");
    }
}
