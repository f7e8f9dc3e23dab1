//! The path rules of the whole runtime, in one place: a path from the
//! config is made absolute once, at load, against the config file's
//! directory ([`absolute`]); every directory Quiver creates is private to
//! its user ([`make_private_dir`]); and the default state directory
//! ([`default_state_dir`]).

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// `path` made absolute against `base` (itself made absolute against the
/// current directory when relative), with `.` and `..` components folded
/// lexically, so that paths compare equal with the absolute ones `notify`
/// reports.
pub fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let joined = if joined.is_absolute() {
        joined
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(&joined))
            .unwrap_or(joined)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The uid this process runs as (the owner of `/proc/self`).
pub fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Why a private directory could not be made or used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {detail}", path.display())]
pub struct PrivateDirError {
    /// The directory.
    pub path: PathBuf,
    /// What is wrong, and what to do about it.
    pub detail: String,
}

/// Creates `dir` and its missing parents with mode 0700; refuses an
/// existing `dir` that group or others can read or write, or that another
/// user owns. Every directory Quiver creates for itself (the state
/// directory, plugin copies, lock files, the example server's notes) is
/// made here, so that none is ever left 0755 for a later check to refuse.
pub fn make_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    let error = |detail: String| PrivateDirError {
        path: dir.to_path_buf(),
        detail,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| error(e.to_string()))?;
    let metadata = std::fs::metadata(dir).map_err(|e| error(e.to_string()))?;
    let uid = current_uid().unwrap_or(0);
    if metadata.uid() != uid {
        return Err(error(format!(
            "owned by uid {}, not by this user (uid {uid}); use a directory of your own",
            metadata.uid()
        )));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(error(format!(
            "mode {mode:o} lets group or others in, and it holds private state; run chmod 700 {}",
            dir.display()
        )));
    }
    Ok(())
}

/// `$XDG_STATE_HOME/quiver`, else `$HOME/.local/state/quiver`, else
/// `quiver-UID` under the system temp dir (see [`state_dir_from`]).
pub fn default_state_dir() -> PathBuf {
    state_dir_from(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        &std::env::temp_dir(),
        current_uid().unwrap_or(0),
    )
}

/// The default state directory for these environment values:
/// `XDG_STATE_HOME/quiver` when it is an absolute path (the XDG spec says
/// to ignore relative ones), else `HOME/.local/state/quiver` when `HOME`
/// is set, else `temp/quiver-UID` (a directory of this user's own, never
/// the shared temp dir itself).
pub fn state_dir_from(
    xdg_state_home: Option<&OsStr>,
    home: Option<&OsStr>,
    temp: &Path,
    uid: u32,
) -> PathBuf {
    if let Some(state) = xdg_state_home.map(Path::new).filter(|p| p.is_absolute()) {
        return state.join("quiver");
    }
    if let Some(home) = home.filter(|h| !h.is_empty()) {
        return Path::new(home).join(".local/state/quiver");
    }
    temp.join(format!("quiver-{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_folds_dots_against_the_base() {
        assert_eq!(
            absolute(Path::new("/etc/quiver"), Path::new("./plugins/../p")),
            PathBuf::from("/etc/quiver/p")
        );
        assert_eq!(
            absolute(Path::new("/etc"), Path::new("/abs/./x")),
            PathBuf::from("/abs/x")
        );
        let relative = absolute(Path::new("conf"), Path::new("p"));
        assert!(
            relative.is_absolute() && relative.ends_with("conf/p"),
            "{relative:?}"
        );
    }

    #[test]
    fn private_dirs_are_made_0700_and_open_ones_refused() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("a/b");
        make_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = make_private_dir(&dir).unwrap_err();
        assert!(error.detail.contains("chmod 700"), "{error}");
    }
}
