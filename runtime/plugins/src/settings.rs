//! The `plugins` section of `quiver.yaml`: its raw shape, what each key
//! allows, and the validated [`PluginsConfig`] the plugin host reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, Spanned, int_setting};
use serde::Deserialize;

/// The validated `plugins` settings.
#[derive(Debug, Clone, PartialEq)]
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
    /// Plugin name to its own settings (`plugins.config.NAME`), checked
    /// against the schema the plugin declares when it loads and handed to
    /// its `init`.
    pub config: BTreeMap<String, serde_json::Value>,
}

impl Default for PluginsConfig {
    fn default() -> Self {
        PluginsConfig {
            dirs: Vec::new(),
            state_dir: None,
            call_timeout_ms: CALL_TIMEOUT_MS.default_int() as u64,
            reload_warn_after: RELOAD_WARN_AFTER.default_int() as u64,
            pin: BTreeMap::new(),
            include: Vec::new(),
            max_file_bytes: crate::files::DEFAULT_MAX_FILE_BYTES,
            config: BTreeMap::new(),
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

/// The keys of `plugins`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "plugins.dirs",
        kind: Kind::List("a list of directory paths"),
        default: DefaultValue::List(&[]),
        doc: "directories whose `*.so` files are plugins, watched for changes (relative paths are relative to the config file)",
    },
    Setting {
        key: "plugins.include",
        kind: Kind::List("a list of file-name globs, e.g. [\"libquiver_plugin_*.so\"]"),
        default: DefaultValue::Described("`[]` (every `*.so`)"),
        doc: "only plugin files whose name matches are loaded (the embedded default loads `libquiver_plugin_*.so` from beside the binary)",
    },
    Setting {
        key: "plugins.state_dir",
        kind: Kind::Text("a directory path"),
        default: DefaultValue::Described("`plugins/` in the default `serve.state_dir`"),
        doc: "where a private copy of each loaded plugin generation is kept; must not be writable by others",
    },
    Setting::timeout(
        "plugins.call_timeout_ms",
        1,
        600000,
        30000,
        "longest a plugin call may take; a plugin that times out 3 times in a row is marked unhealthy and not called until it reloads",
    ),
    Setting::int(
        "plugins.reload_warn_after",
        1,
        100000,
        100,
        "warn once this many plugin generations are loaded (they are never unloaded; each keeps about its `.so` size mapped)",
    ),
    Setting::int(
        "plugins.max_file_bytes",
        4096,
        4294967296,
        268435456,
        "largest plugin file considered: a larger one is refused before any of it is read (a file is also refused unless it is a regular file that starts with the ELF magic)",
    ),
    Setting {
        key: "plugins.config",
        kind: Kind::Map("a map of plugin name (from its manifest) to that plugin's own settings"),
        default: DefaultValue::EmptyMap,
        doc: "each plugin's own settings, checked at load against the config schema the plugin declares (a plugin that declares none refuses a section) and handed to its `init`",
    },
    Setting {
        key: "plugins.pin",
        kind: Kind::Map("a map of plugin file name (without .so) to its sha256 as 64 hex digits"),
        default: DefaultValue::EmptyMap,
        doc: "a plugin file whose sha256 differs from its pin is refused before it is opened",
    },
];

const CALL_TIMEOUT_MS: &Setting = by_key(SETTINGS, "plugins.call_timeout_ms");
const RELOAD_WARN_AFTER: &Setting = by_key(SETTINGS, "plugins.reload_warn_after");
const MAX_FILE_BYTES: &Setting = by_key(SETTINGS, "plugins.max_file_bytes");

/// What a `plugins...` key accepts (from [`SETTINGS`]); `None` for keys of
/// other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "plugins" && !key.starts_with("plugins.") && !key.starts_with("plugins[") {
        return None;
    }
    quiver_config::setting::allowed_in(SETTINGS, key)
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
    config: Option<BTreeMap<String, serde_json::Value>>,
}

/// Validates the `plugins` section.
pub fn validate_plugins(
    raw: RawPlugins,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<PluginsConfig, ConfigError> {
    let call_timeout_ms = int_setting(
        &raw.call_timeout_ms,
        CALL_TIMEOUT_MS,
        CALL_TIMEOUT_MS.key,
        file,
        warnings,
    )?;
    let reload_warn_after = int_setting(
        &raw.reload_warn_after,
        RELOAD_WARN_AFTER,
        RELOAD_WARN_AFTER.key,
        file,
        warnings,
    )?;
    let max_file_bytes = int_setting(
        &raw.max_file_bytes,
        MAX_FILE_BYTES,
        MAX_FILE_BYTES.key,
        file,
        warnings,
    )?;
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
    let mut config = BTreeMap::new();
    for (name, section) in raw.config.unwrap_or_default() {
        if !quiver_tool::naming::is_valid_plain_name(&name) {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: 0,
                column: 0,
                key: format!("plugins.config.{name}"),
                message: format!("`{name}` is not a plugin name"),
                allowed: allowed("plugins.config"),
            });
        }
        config.insert(name, section);
    }
    Ok(PluginsConfig {
        config,
        dirs,
        state_dir: raw.state_dir.map(|s| PathBuf::from(s.value)),
        call_timeout_ms: call_timeout_ms as u64,
        reload_warn_after: reload_warn_after as u64,
        max_file_bytes: max_file_bytes as u64,
        pin,
        include,
    })
}
