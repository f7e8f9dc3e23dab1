//! The workspace root every core tool is confined to, as a capability:
//! one open directory handle ([`cap_std::fs::Dir`]) that every file access
//! goes through.
//!
//! The confinement is cap-std's, not a check made before the access: each
//! open resolves the path relative to the root's handle (on Linux with
//! `openat2(RESOLVE_BENEATH)`, elsewhere component by component), so `..`
//! above the root, absolute paths and symlinks leading out are refused at
//! the moment of the access, including a symlink swapped in after any
//! earlier look. Symlinks that stay inside are followed, but only relative
//! ones: an absolute symlink target is refused even when it names a place
//! inside, since resolving it would mean trusting a path outside the handle.
//!
//! [`Workspace::relative`] only turns what the model wrote into a path
//! relative to the root (and refuses a `..` climbing above it or an
//! absolute path elsewhere up front, for a clear error); it grants nothing.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};

use super::error::{CoreToolError, ErrorKind};

/// The confined root directory.
#[derive(Debug)]
pub struct Workspace {
    /// As configured (absolute or relative to the process's directory).
    given: PathBuf,
    /// The canonical absolute path of the root when it was opened.
    root: PathBuf,
    dir: Dir,
    /// Protected paths, canonical and absolute.
    protected: Vec<PathBuf>,
    /// The protected paths inside the root, relative to it (empty: the
    /// root itself is protected).
    protected_inside: Vec<PathBuf>,
}

impl Workspace {
    /// Opens `path` as the workspace root; it must be an existing directory.
    pub fn open(path: &Path) -> io::Result<Workspace> {
        let root = std::fs::canonicalize(path)?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())?;
        Ok(Workspace {
            given: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
            root,
            dir,
            protected: Vec::new(),
            protected_inside: Vec::new(),
        })
    }

    /// Keeps every tool out of `paths` (and everything under them), even
    /// where they lie inside the root. Paths that do not exist yet are
    /// protected as written (made absolute).
    pub fn protect(&mut self, paths: &[PathBuf]) {
        for path in paths {
            let canonical = std::fs::canonicalize(path)
                .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.clone()));
            if self.root.starts_with(&canonical) {
                self.protected_inside.push(PathBuf::new());
            } else if let Ok(inside) = canonical.strip_prefix(&self.root) {
                self.protected_inside.push(inside.to_path_buf());
            }
            self.protected.push(canonical);
        }
    }

    /// Whether `canonical` (relative to the root, symlinks resolved) is a
    /// protected path or under one.
    pub fn is_protected(&self, canonical: &Path) -> bool {
        self.protected_inside
            .iter()
            .any(|p| canonical.starts_with(p))
    }

    /// The protected paths inside the root, relative to it (walks skip them).
    pub(crate) fn protected_inside(&self) -> &[PathBuf] {
        &self.protected_inside
    }

    /// Refuses `canonical` (relative to the root) when it is protected.
    pub fn check_protected(
        &self,
        tool: &'static str,
        canonical: &Path,
        shown: &str,
    ) -> Result<(), CoreToolError> {
        if self.is_protected(canonical) {
            return Err(CoreToolError::new(
                tool,
                ErrorKind::PathProtected {
                    path: shown.to_owned(),
                },
            ));
        }
        Ok(())
    }

    /// Refuses an open `file` that is a protected file, whatever path led
    /// to it (checked on the descriptor, so a symlink swapped in after a
    /// look is caught too).
    fn check_open_file(
        &self,
        tool: &'static str,
        file: &File,
        shown: &str,
    ) -> Result<(), CoreToolError> {
        if self.protected.is_empty() {
            return Ok(());
        }
        use std::os::fd::AsRawFd;
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let protected = match real {
            Ok(real) => self.protected.iter().any(|p| real.starts_with(p)),
            // Cannot tell: refuse rather than hand it out.
            Err(_) => true,
        };
        if protected {
            return Err(CoreToolError::new(
                tool,
                ErrorKind::PathProtected {
                    path: shown.to_owned(),
                },
            ));
        }
        Ok(())
    }

    /// The canonical absolute path of the root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root's handle: every access goes through it.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// `requested` as a path relative to the root (empty for the root
    /// itself). An absolute path is accepted when it lies under the root;
    /// a `..` that climbs above the root is refused here. Symlinks are not
    /// looked at: the access itself confines them.
    pub fn relative(&self, tool: &'static str, requested: &str) -> Result<PathBuf, CoreToolError> {
        let outside = || {
            CoreToolError::new(
                tool,
                ErrorKind::PathOutsideWorkspace {
                    path: requested.to_owned(),
                },
            )
        };
        if requested.contains('\0') {
            return Err(CoreToolError::new(
                tool,
                ErrorKind::InvalidArguments {
                    message: format!("path {requested:?} contains a NUL character"),
                },
            ));
        }
        let path = Path::new(requested);
        let path = if path.is_absolute() {
            path.strip_prefix(&self.root)
                .or_else(|_| path.strip_prefix(&self.given))
                .map_err(|_| outside())?
        } else {
            path
        };
        let mut depth = 0usize;
        let mut relative = PathBuf::new();
        for component in path.components() {
            match component {
                Component::Normal(part) => {
                    depth += 1;
                    relative.push(part);
                }
                Component::ParentDir => {
                    depth = depth.checked_sub(1).ok_or_else(outside)?;
                    relative.push("..");
                }
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
            }
        }
        Ok(relative)
    }

    /// Opens a regular file for reading. Never blocks on a FIFO and never
    /// reads a device: anything but a regular file is refused.
    pub fn open_regular(
        &self,
        tool: &'static str,
        relative: &Path,
        shown: &str,
    ) -> Result<File, CoreToolError> {
        // A protected file that does not exist (yet) is refused as
        // protected too, so the answer never tells whether it exists: its
        // directory is resolved instead, or the path folded as written.
        let canonical = match self.dir.canonicalize(dot_if_empty(relative)) {
            Ok(canonical) => canonical,
            Err(_) => match (relative.parent(), relative.file_name()) {
                (Some(parent), Some(name)) => match self.dir.canonicalize(dot_if_empty(parent)) {
                    Ok(parent) => parent.join(name),
                    Err(_) => fold_lexically(relative),
                },
                _ => fold_lexically(relative),
            },
        };
        let canonical: PathBuf = canonical
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        self.check_protected(tool, &canonical, shown)?;
        let file = open_regular_in(&self.dir, relative, true, tool, shown)?;
        self.check_open_file(tool, &file, shown)?;
        Ok(file)
    }

    /// Opens a directory, following symlinks that stay inside.
    pub fn open_dir(
        &self,
        tool: &'static str,
        relative: &Path,
        shown: &str,
    ) -> Result<Dir, CoreToolError> {
        self.dir
            .open_dir(dot_if_empty(relative))
            .map_err(|e| self.dir_error(tool, relative, shown, &e))
    }

    /// The path relative to the root with every symlink resolved, for
    /// reporting where a walk really is.
    pub fn canonical(
        &self,
        tool: &'static str,
        relative: &Path,
        shown: &str,
    ) -> Result<PathBuf, CoreToolError> {
        let canonical = self
            .dir
            .canonicalize(dot_if_empty(relative))
            .map_err(|e| CoreToolError::io(tool, shown, &e))?;
        Ok(canonical
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect())
    }

    /// An error opening a directory: "not a directory" when the path is a
    /// file (the OS error alone is ambiguous there).
    fn dir_error(
        &self,
        tool: &'static str,
        relative: &Path,
        shown: &str,
        error: &io::Error,
    ) -> CoreToolError {
        let kind = ErrorKind::from_io(shown, error);
        match kind {
            ErrorKind::Io { .. } | ErrorKind::NotFound { .. }
                if self.dir.is_file(dot_if_empty(relative)) =>
            {
                CoreToolError::new(
                    tool,
                    ErrorKind::NotADirectory {
                        path: shown.to_owned(),
                    },
                )
            }
            kind => CoreToolError::new(tool, kind),
        }
    }
}

/// `.` for the empty path (cap-std wants a path to open).
pub(crate) fn dot_if_empty(relative: &Path) -> &Path {
    if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    }
}

/// A relative path as shown to the model: `/`-separated, `.` for the root.
pub(crate) fn shown(relative: &Path) -> String {
    if relative.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        relative.to_string_lossy().into_owned()
    }
}

/// Opens `relative` in `dir` as a regular file for reading: non-blocking
/// (a FIFO cannot hang the call) and checked on the open handle, so a file
/// swapped for something else after a look is still caught. Without
/// `follow`, a symlink as the last component is refused.
pub(crate) fn open_regular_in(
    dir: &Dir,
    relative: &Path,
    follow: bool,
    tool: &'static str,
    shown: &str,
) -> Result<File, CoreToolError> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    if !follow {
        options.follow(FollowSymlinks::No);
    }
    let file = dir
        .open_with(dot_if_empty(relative), &options)
        .map_err(|e| CoreToolError::io(tool, shown, &e))?;
    let metadata = file
        .metadata()
        .map_err(|e| CoreToolError::io(tool, shown, &e))?;
    let path = shown.to_owned();
    if metadata.is_dir() {
        return Err(CoreToolError::new(tool, ErrorKind::IsADirectory { path }));
    }
    if !metadata.is_file() {
        return Err(CoreToolError::new(
            tool,
            ErrorKind::NotARegularFile { path },
        ));
    }
    Ok(file)
}

/// `relative` with `.` dropped and `..` taken back lexically (`relative`
/// has been checked not to climb above the root).
fn fold_lexically(relative: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir(temp.path().join("ws")).unwrap();
        let ws = Workspace::open(&temp.path().join("ws")).unwrap();
        (temp, ws)
    }

    #[test]
    fn relative_paths_stay_relative() {
        let (_temp, ws) = workspace();
        let rel = |p: &str| ws.relative("t", p).map_err(|e| e.code());
        assert_eq!(rel(""), Ok(PathBuf::new()));
        assert_eq!(rel("."), Ok(PathBuf::new()));
        assert_eq!(rel("./a/b"), Ok(PathBuf::from("a/b")));
        assert_eq!(rel("a/../b"), Ok(PathBuf::from("a/../b")));
        assert_eq!(rel("a/.."), Ok(PathBuf::from("a/..")));
        let inside = ws.root().join("src/lib.rs");
        assert_eq!(
            rel(inside.to_str().unwrap()),
            Ok(PathBuf::from("src/lib.rs"))
        );
        assert_eq!(rel(ws.root().to_str().unwrap()), Ok(PathBuf::new()));
    }

    #[test]
    fn climbing_out_or_absolute_elsewhere_is_refused() {
        let (_temp, ws) = workspace();
        for path in ["..", "../ws/x", "a/../../x", "/etc/passwd", "/"] {
            assert_eq!(
                ws.relative("t", path).unwrap_err().code(),
                "path_outside_workspace",
                "{path}"
            );
        }
        assert_eq!(
            ws.relative("t", "a\0b").unwrap_err().code(),
            "invalid_arguments"
        );
    }

    #[test]
    fn a_sibling_sharing_the_root_prefix_is_outside() {
        let (_temp, ws) = workspace();
        let sibling = format!("{}-other/file", ws.root().display());
        assert_eq!(
            ws.relative("t", &sibling).unwrap_err().code(),
            "path_outside_workspace"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_temp, ws) = workspace();
        let fifo = ws.root().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let error = ws
            .open_regular("read_file", Path::new("pipe"), "pipe")
            .unwrap_err();
        assert_eq!(error.code(), "not_a_regular_file");
    }

    #[test]
    fn opening_a_file_as_a_directory_says_so() {
        let (_temp, ws) = workspace();
        std::fs::write(ws.root().join("f"), "x").unwrap();
        let error = ws.open_dir("list_dir", Path::new("f"), "f").unwrap_err();
        assert_eq!(error.code(), "not_a_directory");
        let error = ws
            .open_regular("read_file", Path::new(""), ".")
            .unwrap_err();
        assert_eq!(error.code(), "is_a_directory");
    }
}
