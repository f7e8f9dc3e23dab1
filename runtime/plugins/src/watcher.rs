//! The directory watcher: notify + notify-debouncer-full on each plugin
//! directory (the directories, not the files, so that atomic renames are
//! seen). After the debounce, each changed path that is a plugin file is
//! reloaded when it exists and removed when it does not; dotfiles and
//! `*.tmp` are ignored.
//!
//! Only events that can change a file's content or presence count
//! ([`changes_content`]): creation, close after writing, renames,
//! removal, and metadata changes (a chmod can make a refused file
//! trusted). Opens, reads and close-after-reading are ignored: inotify
//! reports them, and the host's own read of a file would otherwise be the
//! next event, re-reading the file forever. An event on a file whose
//! metadata did not change since the last attempt reads nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::RecursiveMode;
use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use super::PluginError;
use super::host::PluginHost;

/// Debounce used when none is given.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// A running watcher; dropping it stops watching.
pub struct PluginWatcher {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for PluginWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginWatcher")
    }
}

impl PluginWatcher {
    /// Watches `dirs` and applies their changes to `host`.
    pub fn start(
        host: Arc<PluginHost>,
        dirs: &[PathBuf],
        debounce: Duration,
    ) -> Result<PluginWatcher, PluginError> {
        let watched: Vec<PathBuf> = dirs.to_vec();
        let roots = watched.clone();
        let mut debouncer =
            new_debouncer(
                debounce,
                None,
                move |result: DebounceEventResult| match result {
                    Ok(events) => {
                        let mut paths = BTreeSet::new();
                        for event in events.iter().filter(|e| changes_content(&e.kind)) {
                            for path in &event.paths {
                                let in_root =
                                    path.parent().is_some_and(|p| roots.iter().any(|r| r == p));
                                if in_root && host.accepts(path) {
                                    paths.insert(path.clone());
                                }
                            }
                        }
                        for path in paths {
                            if path.exists() {
                                host.reload_path(&path);
                            } else {
                                host.remove_path(&path);
                            }
                        }
                    }
                    Err(errors) => {
                        for error in errors {
                            tracing::warn!(%error, "plugin directory watcher error");
                        }
                    }
                },
            )
            .map_err(|e| PluginError::Watch {
                path: watched.first().cloned().unwrap_or_default(),
                detail: e.to_string(),
            })?;
        for dir in &watched {
            debouncer
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|e| PluginError::Watch {
                    path: dir.clone(),
                    detail: e.to_string(),
                })?;
        }
        Ok(PluginWatcher {
            _debouncer: debouncer,
        })
    }
}

/// Whether an event of `kind` can change a file's content, presence or
/// trust: not an open, a read, or a close without writing.
pub fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        // Writes in progress end with a close-after-write; acting on each
        // one would read a half-written file.
        EventKind::Modify(ModifyKind::Data(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Any | EventKind::Other => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, MetadataKind, RenameMode};

    #[test]
    fn reads_are_not_changes() {
        assert!(!changes_content(&EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!changes_content(&EventKind::Access(AccessKind::Read)));
        assert!(!changes_content(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
        assert!(changes_content(&EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(changes_content(&EventKind::Create(CreateKind::File)));
        assert!(changes_content(&EventKind::Modify(ModifyKind::Name(
            RenameMode::Both
        ))));
        assert!(changes_content(&EventKind::Modify(ModifyKind::Metadata(
            MetadataKind::Any
        ))));
    }
}
