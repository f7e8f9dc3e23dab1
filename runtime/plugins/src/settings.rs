//! The `plugins` section of `quiver.yaml`: its raw shape, what each key
//! allows, and the validated [`PluginsConfig`] the plugin host reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::{ConfigError, ConfigWarning, IntKey, Spanned, clamp};
use serde::Deserialize;

/// The validated `plugins` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginsConfig {
    /// Directories whose `*.so` files are plugins (relative paths are
    /// resolved against the config file's directory).
    pub dirs: Vec<PathBuf>,
    /// Where private per-generation copies of loaded plugins are kept;
    /// `None`: `$XDG_STATE_HOME/quiver/plugins` (or `~/.local/state/...`).
    pub state_dir: Option<PathBuf>,
    /// Longest a plugin call may take, in milliseconds.
    pub call_timeout_ms: u64,
    /// Warn when this many plugin generations have been loaded in the
    /// process (they are never unloaded).
    pub reload_warn_after: u64,
    /// Plugin file name (without `.so`) to the lowercase hex sha256 it must have.
    pub pin: BTreeMap<String, String>,
    /// Globs over file names: only matching plugin files are loaded
    /// (empty: every `*.so`).
    pub include: Vec<String>,
    /// Plugin files larger than this are refused before they are read.
    pub max_file_bytes: u64,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            dirs: Vec::new(),
            state_dir: None,
            call_timeout_ms: 30_000,
            reload_warn_after: 100,
            pin: BTreeMap::new(),
            include: Vec::new(),
            max_file_bytes: crate::files::DEFAULT_MAX_FILE_BYTES,
        }
    }
}

impl PluginsConfig {
    /// The `include` globs as one set (`None` when empty). Each was checked
    /// when the config was validated.
    pub fn include_set(&self) -> Option<GlobSet> {
        if self.include.is_empty() {
            return None;
        }
        let mut builder = GlobSetBuilder::new();
        for glob in &self.include {
            if let Ok(glob) = Glob::new(glob) {
                builder.add(glob);
            }
        }
        builder.build().ok()
    }

    /// Makes the plugin directories and `state_dir` absolute against
    /// `base` (the config file's directory): the watcher compares them with
    /// the absolute paths `notify` reports.
    pub fn resolve_relative_to(&mut self, base: &Path) {
        for dir in self.dirs.iter_mut().chain(self.state_dir.as_mut()) {
            *dir = quiver_config::paths::absolute(base, dir);
        }
    }
}

const CALL_TIMEOUT_MS: IntKey = IntKey {
    key: "plugins.call_timeout_ms",
    min: 1,
    max: 600_000,
};
const RELOAD_WARN_AFTER: IntKey = IntKey {
    key: "plugins.reload_warn_after",
    min: 1,
    max: 100_000,
};
const MAX_FILE_BYTES: IntKey = IntKey {
    key: "plugins.max_file_bytes",
    min: 4096,
    max: 4 * 1024 * 1024 * 1024,
};
const PLUGINS_KEYS: &str =
    "dirs, include, state_dir, call_timeout_ms, reload_warn_after, max_file_bytes, pin";

/// What a `plugins...` key accepts; `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "plugins" && !key.starts_with("plugins.") && !key.starts_with("plugins[") {
        return None;
    }
    Some(match (key, ()) {
        ("plugins", ()) => format!("a map with keys {PLUGINS_KEYS}"),
        ("plugins.dirs", ()) => "a list of directory paths".into(),
        ("plugins.state_dir", ()) => "a directory path".into(),
        _ if key.starts_with("plugins.include") => {
            "a list of file-name globs, e.g. [\"libquiver_plugin_*.so\"]".into()
        }
        ("plugins.call_timeout_ms", ()) => "an integer from 1 to 600000".into(),
        ("plugins.reload_warn_after", ()) => "an integer from 1 to 100000".into(),
        ("plugins.max_file_bytes", ()) => "an integer from 4096 to 4294967296".into(),
        _ if key.starts_with("plugins.pin") => {
            "a map of plugin file name (without .so) to its sha256 as 64 hex digits".into()
        }
        _ if key.starts_with("plugins.dirs") => "a directory path".into(),
        _ => format!("keys {PLUGINS_KEYS}"),
    })
}

fn allowed(key: &str) -> String {
    allowed_for(key).unwrap_or_default()
}

/// Plugins as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawPlugins {
    dirs: Option<Vec<Spanned<String>>>,
    state_dir: Option<Spanned<String>>,
    call_timeout_ms: Option<Spanned<i64>>,
    reload_warn_after: Option<Spanned<i64>>,
    max_file_bytes: Option<Spanned<i64>>,
    pin: Option<BTreeMap<String, Spanned<String>>>,
    include: Option<Vec<Spanned<String>>>,
}

/// Validates the `plugins` section.
pub fn validate_plugins(
    raw: RawPlugins,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<PluginsConfig, ConfigError> {
    let defaults = PluginsConfig::default();
    let call_timeout_ms = clamp(
        &raw.call_timeout_ms,
        CALL_TIMEOUT_MS.key,
        (CALL_TIMEOUT_MS.min, CALL_TIMEOUT_MS.max),
        defaults.call_timeout_ms as i64,
        file,
        warnings,
    );
    let reload_warn_after = clamp(
        &raw.reload_warn_after,
        RELOAD_WARN_AFTER.key,
        (RELOAD_WARN_AFTER.min, RELOAD_WARN_AFTER.max),
        defaults.reload_warn_after as i64,
        file,
        warnings,
    );
    let max_file_bytes = clamp(
        &raw.max_file_bytes,
        MAX_FILE_BYTES.key,
        (MAX_FILE_BYTES.min, MAX_FILE_BYTES.max),
        defaults.max_file_bytes as i64,
        file,
        warnings,
    );
    let mut dirs = Vec::new();
    for (index, dir) in raw.dirs.unwrap_or_default().into_iter().enumerate() {
        if dir.value.trim().is_empty() {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: dir.referenced.line() as u32,
                column: dir.referenced.column() as u32,
                key: format!("plugins.dirs[{index}]"),
                message: "empty directory path".into(),
                allowed: allowed("plugins.dirs[]"),
            });
        }
        dirs.push(PathBuf::from(dir.value));
    }
    let mut pin = BTreeMap::new();
    for (name, hash) in raw.pin.unwrap_or_default() {
        let value = hash.value.trim().to_ascii_lowercase();
        if value.len() != 64 || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: hash.referenced.line() as u32,
                column: hash.referenced.column() as u32,
                key: format!("plugins.pin.{name}"),
                message: format!("`{}` is not a sha256 digest", hash.value),
                allowed: allowed("plugins.pin"),
            });
        }
        pin.insert(name, value);
    }
    let mut include = Vec::new();
    for (index, glob) in raw.include.unwrap_or_default().into_iter().enumerate() {
        if let Err(e) = Glob::new(&glob.value) {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: glob.referenced.line() as u32,
                column: glob.referenced.column() as u32,
                key: format!("plugins.include[{index}]"),
                message: format!("`{}` is not a valid glob: {}", glob.value, e.kind()),
                allowed: allowed("plugins.include"),
            });
        }
        include.push(glob.value);
    }
    Ok(PluginsConfig {
        dirs,
        state_dir: raw.state_dir.map(|s| PathBuf::from(s.value)),
        call_timeout_ms: call_timeout_ms as u64,
        reload_warn_after: reload_warn_after as u64,
        max_file_bytes: max_file_bytes as u64,
        pin,
        include,
    })
}
