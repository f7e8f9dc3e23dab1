//! Cross-process locks as files held with an exclusive advisory lock,
//! released when dropped or when the process ends, even by a crash: the
//! SQLite store's turn locks, and `quiver serve`'s lock on its state
//! directory.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Takes the lock of the file at `path` (made, mode 0600, with its
/// directory, mode 0700, if missing) without waiting: `Ok(None)` when it is
/// held elsewhere (another process, or another handle in this one).
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
    fn one_holder_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/a.lock");
        let held = try_lock_path(&path).unwrap().unwrap();
        // A second open file description is another holder, as another
        // process would be.
        assert!(try_lock_path(&path).unwrap().is_none());
        assert!(
            try_lock_path(&dir.path().join("x/b.lock"))
                .unwrap()
                .is_some()
        );
        drop(held);
        assert!(try_lock_path(&path).unwrap().is_some());
    }
}
