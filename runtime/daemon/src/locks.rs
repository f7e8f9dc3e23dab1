//! Cross-process locks on the state directory, as files held with an
//! exclusive advisory lock (released when dropped or when the process
//! ends, even by a crash):
//!
//! - a turn lock per session under `STATE_DIR/turns/`, held while a turn
//!   runs, so that `quiver chat --session ID` and a daemon on the same state
//!   directory never run turns of one session at once (their messages would
//!   interleave and tool calls would lose their results);
//! - [`SERVE_LOCK`], held by `quiver serve` while it runs, so that two
//!   daemons never share a state directory (and its `daemon.json`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::auth;

/// The directory of the turn lock files, inside the state directory.
pub const TURNS_DIR: &str = "turns";

/// The lock file `quiver serve` holds, inside the state directory.
pub const SERVE_LOCK: &str = "serve.lock";

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// The lock file of `session`: named by a digest of the id, so any id
/// makes a plain file name.
pub fn lock_path(state_dir: &Path, session: &str) -> PathBuf {
    let name = auth::digest(session);
    state_dir.join(TURNS_DIR).join(format!("{name}.lock"))
}

/// Takes the turn lock of `session` without waiting: `Ok(None)` when
/// another process (or another handle in this one) holds it.
pub fn try_lock(state_dir: &Path, session: &str) -> io::Result<Option<FileLock>> {
    try_lock_path(&lock_path(state_dir, session))
}

/// Takes the lock of the file at `path` (made, mode 0600, with its
/// directory, mode 0700, if missing) without waiting: `Ok(None)` when it is
/// held elsewhere.
pub fn try_lock_path(path: &Path) -> io::Result<Option<FileLock>> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(FileLock { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let held = try_lock(dir.path(), "s1").unwrap().unwrap();
        // A second open file description is another holder, as another
        // process would be.
        assert!(try_lock(dir.path(), "s1").unwrap().is_none());
        assert!(try_lock(dir.path(), "s2").unwrap().is_some());
        drop(held);
        assert!(try_lock(dir.path(), "s1").unwrap().is_some());
        assert_ne!(lock_path(dir.path(), "a/../b"), lock_path(dir.path(), "a"));
    }
}
