//! The directory watcher: notify + notify-debouncer-full on each plugin
//! directory (the directories, not the files, so that atomic renames are
//! seen). After the debounce, each changed path that is a plugin file is
//! reloaded when it exists and removed when it does not; dotfiles and
//! `*.tmp` are ignored, and an unchanged hash does nothing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::RecursiveMode;
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
                        for event in &events {
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
