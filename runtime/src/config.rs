//! `quiver.yaml`: the raw shape serde reads, and the validated [`Config`]
//! the rest of the runtime uses.
//!
//! Parsing happens in two steps, like ripgrep's: serde reads the file into
//! raw structs that keep every value's line and column, then [`validate`]
//! clamps numbers (with a warning), checks globs and builds [`Config`].
//! Wrong types, unknown words and unknown keys are [`ConfigError`]s naming
//! the file, line, column, key and the allowed values.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_saphyr::Spanned;

/// The configuration used when no file is given.
pub const EMBEDDED_DEFAULT: &str = include_str!("default_config.yaml");

/// `auto`, `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    /// Decide from the situation (see each key).
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

/// The retrieval algorithm behind `tool_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over name, description and parameter names.
    Classic,
    /// BM25F over weighted fields with identifier splitting, stemming,
    /// stop words, typo tolerance, an exact-name pre-pass and `server:`
    /// filters (see `enhanced`).
    Enhanced,
}

/// The validated `tools.tool_search` settings.
#[derive(Debug, Clone)]
pub struct ToolSearchConfig {
    /// `auto`: the bridge appears when a deferrable tool exists; `on`: the
    /// bridge is always there, so the tools array keeps its shape while
    /// plugins and servers come and go; `off`: every tool is sent eagerly.
    pub enabled: Switch,
    /// Percent of the session's context that the listing may use.
    pub threshold_pct: u32,
    /// Matches returned when `tool_search` gets no `limit`.
    pub search_default_limit: usize,
    /// Largest `limit` honoured.
    pub max_search_limit: usize,
    /// `auto`: the listing's budget is `min(threshold_pct% of context,
    /// listing_max_tokens)`; `on`: the budget is `listing_max_tokens`
    /// whatever the context; `off`: no listing, only the deferred count.
    pub listing: Switch,
    /// Hard cap on the listing, in tokens.
    pub listing_max_tokens: u64,
    /// Globs of tool names that are never deferred.
    pub eager: Vec<String>,
    eager_set: GlobSet,
    /// The retrieval algorithm.
    pub mode: SearchMode,
}

impl ToolSearchConfig {
    /// Whether `name` matches an `eager` glob.
    pub fn is_eager(&self, name: &str) -> bool {
        !self.eager.is_empty() && self.eager_set.is_match(name)
    }

    /// `limit` (or the default when absent) clamped to `1..=max_search_limit`.
    pub fn effective_limit(&self, limit: Option<i64>) -> usize {
        match limit {
            None => self.search_default_limit,
            Some(n) => n.clamp(1, self.max_search_limit as i64) as usize,
        }
    }

    /// A key covering every setting that changes what a catalog holds.
    pub fn catalog_key(&self) -> String {
        self.eager.join("\u{1f}")
    }
}

impl Default for ToolSearchConfig {
    fn default() -> Self {
        ToolSearchConfig {
            enabled: Switch::Auto,
            threshold_pct: 5,
            search_default_limit: 5,
            max_search_limit: 20,
            listing: Switch::Auto,
            listing_max_tokens: 20_000,
            eager: Vec::new(),
            eager_set: GlobSet::empty(),
            mode: SearchMode::Enhanced,
        }
    }
}

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

    fn resolve_relative_to(&mut self, base: &Path) {
        for dir in self.dirs.iter_mut().chain(self.state_dir.as_mut()) {
            if dir.is_relative() {
                *dir = base.join(&*dir);
            }
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `tools.tool_search`.
    pub tool_search: ToolSearchConfig,
    /// `plugins`.
    pub plugins: PluginsConfig,
    /// `mcp_servers`, by server name.
    pub mcp_servers: BTreeMap<String, crate::mcp::config::McpServerConfig>,
    /// `guardrails`.
    pub guardrails: crate::dispatch::settings::GuardrailsConfig,
    /// `approval`.
    pub approval: crate::dispatch::settings::ApprovalConfig,
    /// `feed`.
    pub feed: crate::dispatch::settings::FeedConfig,
    /// `core_tools`.
    pub core_tools: crate::core_tools::CoreToolsConfig,
    /// `models` and `default_model`.
    pub models: crate::model::settings::ModelsConfig,
    /// `serve`.
    pub serve: crate::daemon::settings::ServeConfig,
    /// `agent`.
    pub agent: crate::daemon::settings::AgentConfig,
    /// `gateway`.
    pub gateway: crate::daemon::settings::GatewayConfig,
}

/// A value that was out of range and was clamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file (or `<embedded default>`).
    pub file: String,
    /// 1-based line of the value.
    pub line: u32,
    /// 1-based column of the value.
    pub column: u32,
    /// Dotted key, e.g. `tools.tool_search.threshold_pct`.
    pub key: String,
    /// The value as written.
    pub given: i64,
    /// The value used instead.
    pub used: i64,
    /// The allowed range, e.g. `0..100`.
    pub range: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: `{}` = {} is outside {}; using {}",
            self.file, self.line, self.column, self.key, self.given, self.range, self.used
        )
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file was read but a key or value is wrong.
    #[error("{file}:{line}:{column}: `{key}`: {message}; allowed: {allowed}")]
    Invalid {
        /// The file (or `<embedded default>`).
        file: String,
        /// 1-based line (0 when the parser could not tell).
        line: u32,
        /// 1-based column (0 when the parser could not tell).
        column: u32,
        /// Dotted key path (`<root>` for the document itself).
        key: String,
        /// What is wrong.
        message: String,
        /// What would be accepted there.
        allowed: String,
    },
}

/// A parsed configuration and the warnings validation produced.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The validated configuration.
    pub config: Config,
    /// Values that were clamped.
    pub warnings: Vec<ConfigWarning>,
}

// ---- raw shape -----------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    tools: Option<RawTools>,
    plugins: Option<RawPlugins>,
    mcp_servers: Option<crate::mcp::config::RawMcpServers>,
    guardrails: Option<crate::dispatch::settings::RawGuardrails>,
    approval: Option<crate::dispatch::settings::RawApproval>,
    feed: Option<crate::dispatch::settings::RawFeed>,
    core_tools: Option<crate::core_tools::settings::RawCoreTools>,
    models: Option<crate::model::settings::RawModels>,
    default_model: Option<Spanned<String>>,
    serve: Option<crate::daemon::settings::RawServe>,
    agent: Option<crate::daemon::settings::RawAgent>,
    gateway: Option<crate::daemon::settings::RawGateway>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPlugins {
    dirs: Option<Vec<Spanned<String>>>,
    state_dir: Option<Spanned<String>>,
    call_timeout_ms: Option<Spanned<i64>>,
    reload_warn_after: Option<Spanned<i64>>,
    pin: Option<BTreeMap<String, Spanned<String>>>,
    include: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTools {
    tool_search: Option<RawToolSearchSetting>,
}

#[derive(Debug)]
enum RawToolSearchSetting {
    Bool(bool),
    Map(Box<RawToolSearch>),
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawToolSearch {
    enabled: Option<Switch>,
    threshold_pct: Option<Spanned<i64>>,
    search_default_limit: Option<Spanned<i64>>,
    max_search_limit: Option<Spanned<i64>>,
    listing: Option<Switch>,
    listing_max_tokens: Option<Spanned<i64>>,
    eager: Option<Vec<Spanned<String>>>,
    mode: Option<SearchMode>,
}

impl<'de> Deserialize<'de> for RawToolSearchSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SettingVisitor;
        impl<'de> serde::de::Visitor<'de> for SettingVisitor {
            type Value = RawToolSearchSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a map")
            }
            fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
                Ok(RawToolSearchSetting::Bool(value))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RawToolSearch::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|map| RawToolSearchSetting::Map(Box::new(map)))
            }
        }
        deserializer.deserialize_any(SettingVisitor)
    }
}

thread_local! {
    static FAILED_PATH: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The root, read through serde_path_to_error so that a failure knows its
/// key path; the path travels beside the parser's own error, which keeps
/// the line and column.
struct TrackedRaw(RawConfig);

impl<'de> Deserialize<'de> for TrackedRaw {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_path_to_error::deserialize(deserializer)
            .map(TrackedRaw)
            .map_err(|error| {
                FAILED_PATH.with(|p| *p.borrow_mut() = Some(error.path().to_string()));
                error.into_inner()
            })
    }
}

// ---- keys and what they allow --------------------------------------------

/// A numeric key and its allowed range.
pub(crate) struct IntKey {
    pub(crate) key: &'static str,
    pub(crate) min: i64,
    pub(crate) max: i64,
}

const THRESHOLD_PCT: IntKey = IntKey {
    key: "tools.tool_search.threshold_pct",
    min: 0,
    max: 100,
};
const MAX_SEARCH_LIMIT: IntKey = IntKey {
    key: "tools.tool_search.max_search_limit",
    min: 1,
    max: 50,
};
const LISTING_MAX_TOKENS: IntKey = IntKey {
    key: "tools.tool_search.listing_max_tokens",
    min: 200,
    max: 60_000,
};
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
const PLUGINS_KEYS: &str = "dirs, include, state_dir, call_timeout_ms, reload_warn_after, pin";
const SEARCH_DEFAULT_LIMIT: &str = "tools.tool_search.search_default_limit";

const TOOL_SEARCH_KEYS: &str = "enabled, threshold_pct, search_default_limit, max_search_limit, listing, listing_max_tokens, eager, mode";

/// What a key accepts, for error messages.
fn allowed_for(key: &str) -> String {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    match (key, leaf) {
        ("<root>", _) | (".", _) => {
            "a map with keys tools, plugins, mcp_servers, guardrails, approval, feed, core_tools, models, default_model, serve, agent, gateway".into()
        }
        _ if crate::core_tools::settings::allowed_for(key).is_some() => {
            crate::core_tools::settings::allowed_for(key).unwrap_or_default()
        }
        _ if crate::model::settings::allowed_for(key).is_some() => {
            crate::model::settings::allowed_for(key).unwrap_or_default()
        }
        _ if crate::daemon::settings::allowed_for(key).is_some() => {
            crate::daemon::settings::allowed_for(key).unwrap_or_default()
        }
        _ if crate::dispatch::settings::allowed_for(key).is_some() => {
            crate::dispatch::settings::allowed_for(key).unwrap_or_default()
        }
        _ if key == "mcp_servers" || key.starts_with("mcp_servers.") => {
            crate::mcp::config::allowed_for(key)
        }
        ("plugins", _) => format!("a map with keys {PLUGINS_KEYS}"),
        ("plugins.dirs", _) => "a list of directory paths".into(),
        ("plugins.state_dir", _) => "a directory path".into(),
        _ if key.starts_with("plugins.include") => {
            "a list of file-name globs, e.g. [\"libquiver_plugin_*.so\"]".into()
        }
        ("plugins.call_timeout_ms", _) => "an integer from 1 to 600000".into(),
        ("plugins.reload_warn_after", _) => "an integer from 1 to 100000".into(),
        _ if key.starts_with("plugins.pin") => {
            "a map of plugin file name (without .so) to its sha256 as 64 hex digits".into()
        }
        _ if key.starts_with("plugins.dirs") => "a directory path".into(),
        _ if key.starts_with("plugins") => format!("keys {PLUGINS_KEYS}"),
        ("tools", _) => "a map with key tool_search".into(),
        ("tools.tool_search", _) => format!("true, false or a map with keys {TOOL_SEARCH_KEYS}"),
        (_, "enabled") | (_, "listing") => "auto, on, off".into(),
        (_, "mode") => "classic, enhanced".into(),
        (_, "threshold_pct") => "an integer from 0 to 100".into(),
        (_, "max_search_limit") => "an integer from 1 to 50".into(),
        (_, "search_default_limit") => "an integer from 1 to max_search_limit".into(),
        (_, "listing_max_tokens") => "an integer from 200 to 60000".into(),
        (_, "eager") => "a list of tool-name globs, e.g. [\"mcp_github_*\", \"echo\"]".into(),
        _ if key.starts_with("tools.tool_search") => format!("keys {TOOL_SEARCH_KEYS}"),
        _ if key.starts_with("tools") => "key tool_search".into(),
        _ => "keys tools, plugins, mcp_servers, guardrails, approval, feed, core_tools, models, default_model, serve, agent, gateway".into(),
    }
}

// ---- entry points ----------------------------------------------------------

/// Reads and validates a config file.
pub fn load_file(path: &Path) -> Result<LoadedConfig, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        file: file.clone(),
        source,
    })?;
    let mut loaded = parse(&text, &file)?;
    let base = path.parent().unwrap_or(Path::new("."));
    loaded.config.plugins.resolve_relative_to(base);
    loaded.config.core_tools.resolve_relative_to(base);
    loaded.config.serve.resolve_relative_to(base);
    for server in loaded.config.mcp_servers.values_mut() {
        server.resolve_relative_to(base);
    }
    for model in loaded.config.models.models.values_mut() {
        model.resolve_relative_to(base);
    }
    Ok(loaded)
}

/// The embedded default configuration.
///
/// Its plugin directories and its stdio MCP commands written `./NAME` are
/// relative to the running executable's directory (the bundled plugins and
/// example server sit beside `quiver`); everything else relative is
/// relative to the current directory.
pub fn embedded_default() -> Result<LoadedConfig, ConfigError> {
    let mut loaded = parse(EMBEDDED_DEFAULT, "<embedded default>")?;
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        for plugin_dir in loaded.config.plugins.dirs.iter_mut() {
            if plugin_dir.is_relative() {
                *plugin_dir = dir.join(&*plugin_dir).components().collect();
            }
        }
        for server in loaded.config.mcp_servers.values_mut() {
            server.resolve_dot_command(&dir);
        }
    }
    Ok(loaded)
}

/// Parses and validates config text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<LoadedConfig, ConfigError> {
    let raw = if text.trim().is_empty() {
        RawConfig::default()
    } else {
        FAILED_PATH.with(|p| p.borrow_mut().take());
        match serde_saphyr::from_str::<Option<TrackedRaw>>(text) {
            Ok(raw) => raw.map(|r| r.0).unwrap_or_default(),
            Err(error) => return Err(parse_error(&error, file)),
        }
    };
    validate(raw, file)
}

fn parse_error(error: &serde_saphyr::Error, file: &str) -> ConfigError {
    let key = FAILED_PATH
        .with(|p| p.borrow_mut().take())
        // `Spanned` fields add a `.value` segment of their own.
        .map(|p| p.strip_suffix(".value").map(str::to_owned).unwrap_or(p))
        .map(|p| p.replace(".value.", "."))
        .filter(|p| !p.is_empty() && p != ".")
        .unwrap_or_else(|| "<root>".to_owned());
    let (line, column) = error
        .location()
        .map(|l| (l.line() as u32, l.column() as u32))
        .unwrap_or((0, 0));
    // The parser's Display adds a source snippet; keep only its first line,
    // without the location prefix that we print ourselves.
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    let message = first
        .trim_start_matches("error: ")
        .split_once(": ")
        .filter(|(prefix, _)| prefix.starts_with("line "))
        .map(|(_, rest)| rest)
        .unwrap_or(first)
        .to_owned();
    let message = message
        .replace("invalid i64", "expected an integer")
        .replace("invalid type: ", "wrong type: ")
        .replace(
            "expected string scalar",
            "expected a single value, not a list or map",
        );
    ConfigError::Invalid {
        file: file.to_owned(),
        line,
        column,
        allowed: allowed_for(&key),
        key,
        message,
    }
}

/// A [`ConfigError::Invalid`] at the position of `at` in `file`; each
/// config section passes the allowed values of its own keys.
pub(crate) fn invalid_at<T>(
    file: &str,
    at: &Spanned<T>,
    key: String,
    message: String,
    allowed: String,
) -> ConfigError {
    ConfigError::Invalid {
        file: file.to_owned(),
        line: at.referenced.line() as u32,
        column: at.referenced.column() as u32,
        key,
        message,
        allowed,
    }
}

/// `value` (or `default` when absent) clamped to `min..=max`; a clamped
/// value adds a warning naming `key`, the value given and the value used.
/// Every config section reads its numbers through this.
pub(crate) fn clamp(
    value: &Option<Spanned<i64>>,
    key: &str,
    (min, max): (i64, i64),
    default: i64,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> i64 {
    let Some(spanned) = value else {
        return default;
    };
    let used = spanned.value.clamp(min, max);
    if used != spanned.value {
        warnings.push(ConfigWarning {
            file: file.to_owned(),
            line: spanned.referenced.line() as u32,
            column: spanned.referenced.column() as u32,
            key: key.to_owned(),
            given: spanned.value,
            used,
            range: format!("{min}..{max}"),
        });
    }
    used
}

fn validate_plugins(
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
    let mut dirs = Vec::new();
    for (index, dir) in raw.dirs.unwrap_or_default().into_iter().enumerate() {
        if dir.value.trim().is_empty() {
            return Err(ConfigError::Invalid {
                file: file.to_owned(),
                line: dir.referenced.line() as u32,
                column: dir.referenced.column() as u32,
                key: format!("plugins.dirs[{index}]"),
                message: "empty directory path".into(),
                allowed: allowed_for("plugins.dirs[]"),
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
                allowed: allowed_for("plugins.pin"),
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
                allowed: allowed_for("plugins.include"),
            });
        }
        include.push(glob.value);
    }
    Ok(PluginsConfig {
        dirs,
        state_dir: raw.state_dir.map(|s| PathBuf::from(s.value)),
        call_timeout_ms: call_timeout_ms as u64,
        reload_warn_after: reload_warn_after as u64,
        pin,
        include,
    })
}

fn validate(raw: RawConfig, file: &str) -> Result<LoadedConfig, ConfigError> {
    let mut warnings = Vec::new();
    let plugins = validate_plugins(raw.plugins.unwrap_or_default(), file, &mut warnings)?;
    let guardrails = crate::dispatch::settings::validate_guardrails(
        raw.guardrails.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let approval = crate::dispatch::settings::validate_approval(
        raw.approval.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let feed = crate::dispatch::settings::validate_feed(
        raw.feed.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let mcp_servers =
        crate::mcp::config::validate(raw.mcp_servers.unwrap_or_default(), file, &mut warnings)?;
    let serve = crate::daemon::settings::validate_serve(raw.serve.unwrap_or_default(), file)?;
    let agent = crate::daemon::settings::validate_agent(
        raw.agent.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let gateway = crate::daemon::settings::validate_gateway(
        raw.gateway.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let core_tools = crate::core_tools::settings::validate_core_tools(
        raw.core_tools.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let models = crate::model::settings::validate(
        raw.models.unwrap_or_default(),
        raw.default_model,
        file,
        &mut warnings,
    )?;
    let defaults = ToolSearchConfig::default();
    let raw_search = match raw.tools.and_then(|t| t.tool_search) {
        None | Some(RawToolSearchSetting::Bool(true)) => RawToolSearch::default(),
        Some(RawToolSearchSetting::Bool(false)) => RawToolSearch {
            enabled: Some(Switch::Off),
            ..RawToolSearch::default()
        },
        Some(RawToolSearchSetting::Map(map)) => *map,
    };
    let threshold_pct = clamp(
        &raw_search.threshold_pct,
        THRESHOLD_PCT.key,
        (THRESHOLD_PCT.min, THRESHOLD_PCT.max),
        defaults.threshold_pct as i64,
        file,
        &mut warnings,
    );
    let max_search_limit = clamp(
        &raw_search.max_search_limit,
        MAX_SEARCH_LIMIT.key,
        (MAX_SEARCH_LIMIT.min, MAX_SEARCH_LIMIT.max),
        defaults.max_search_limit as i64,
        file,
        &mut warnings,
    );
    let search_default_limit = clamp(
        &raw_search.search_default_limit,
        SEARCH_DEFAULT_LIMIT,
        (1, max_search_limit),
        (defaults.search_default_limit as i64).min(max_search_limit),
        file,
        &mut warnings,
    );
    let listing_max_tokens = clamp(
        &raw_search.listing_max_tokens,
        LISTING_MAX_TOKENS.key,
        (LISTING_MAX_TOKENS.min, LISTING_MAX_TOKENS.max),
        defaults.listing_max_tokens as i64,
        file,
        &mut warnings,
    );
    let mut eager = Vec::new();
    let mut builder = GlobSetBuilder::new();
    for (index, pattern) in raw_search.eager.unwrap_or_default().into_iter().enumerate() {
        let glob = Glob::new(&pattern.value).map_err(|e| ConfigError::Invalid {
            file: file.to_owned(),
            line: pattern.referenced.line() as u32,
            column: pattern.referenced.column() as u32,
            key: format!("tools.tool_search.eager[{index}]"),
            message: format!("`{}` is not a valid glob: {}", pattern.value, e.kind()),
            allowed: allowed_for("tools.tool_search.eager"),
        })?;
        builder.add(glob);
        eager.push(pattern.value);
    }
    let eager_set = builder.build().map_err(|e| ConfigError::Invalid {
        file: file.to_owned(),
        line: 0,
        column: 0,
        key: "tools.tool_search.eager".into(),
        message: e.to_string(),
        allowed: allowed_for("tools.tool_search.eager"),
    })?;
    let tool_search = ToolSearchConfig {
        enabled: raw_search.enabled.unwrap_or(defaults.enabled),
        threshold_pct: threshold_pct as u32,
        search_default_limit: search_default_limit as usize,
        max_search_limit: max_search_limit as usize,
        listing: raw_search.listing.unwrap_or(defaults.listing),
        listing_max_tokens: listing_max_tokens as u64,
        eager,
        eager_set,
        mode: raw_search.mode.unwrap_or(defaults.mode),
    };
    Ok(LoadedConfig {
        config: Config {
            tool_search,
            plugins,
            mcp_servers,
            guardrails,
            approval,
            feed,
            core_tools,
            models,
            serve,
            agent,
            gateway,
        },
        warnings,
    })
}

/// The key, line, column, message and allowed values of the error `text`
/// gives; the config tests of every section use it.
#[cfg(test)]
pub(crate) fn invalid_parts(text: &str) -> (String, u32, u32, String, String) {
    match parse(text, "q.yaml") {
        Err(ConfigError::Invalid {
            key,
            line,
            column,
            message,
            allowed,
            ..
        }) => (key, line, column, message, allowed),
        other => panic!("expected an invalid config, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::invalid_parts as invalid;
    use super::*;

    #[test]
    fn defaults_when_absent_or_empty() {
        for text in ["", "tools:\n  tool_search: true\n", "tools: {}\n"] {
            let c = parse(text, "q.yaml").unwrap().config.tool_search;
            assert_eq!(c.enabled, Switch::Auto);
            assert_eq!(c.threshold_pct, 5);
            assert_eq!(c.search_default_limit, 5);
            assert_eq!(c.max_search_limit, 20);
            assert_eq!(c.listing, Switch::Auto);
            assert_eq!(c.listing_max_tokens, 20_000);
            assert!(c.eager.is_empty());
        }
    }

    #[test]
    fn false_means_off() {
        let c = parse("tools:\n  tool_search: false\n", "q.yaml").unwrap();
        assert_eq!(c.config.tool_search.enabled, Switch::Off);
    }

    #[test]
    fn full_map_is_read() {
        let text = "tools:\n  tool_search:\n    enabled: on\n    threshold_pct: 10\n    search_default_limit: 7\n    max_search_limit: 30\n    listing: off\n    listing_max_tokens: 1000\n    eager: [\"mcp_github_*\", echo]\n    mode: classic\n";
        let loaded = parse(text, "q.yaml").unwrap();
        assert!(loaded.warnings.is_empty());
        let c = loaded.config.tool_search;
        assert_eq!(c.enabled, Switch::On);
        assert_eq!(c.threshold_pct, 10);
        assert_eq!(c.search_default_limit, 7);
        assert_eq!(c.max_search_limit, 30);
        assert_eq!(c.listing, Switch::Off);
        assert_eq!(c.listing_max_tokens, 1000);
        assert!(c.is_eager("mcp_github_create_issue"));
        assert!(c.is_eager("echo"));
        assert!(!c.is_eager("Echo"));
    }

    #[test]
    fn out_of_range_numbers_are_clamped_with_warnings() {
        let text = "tools:\n  tool_search:\n    threshold_pct: 500\n    max_search_limit: 0\n    search_default_limit: 9\n    listing_max_tokens: 10\n";
        let loaded = parse(text, "q.yaml").unwrap();
        let c = &loaded.config.tool_search;
        assert_eq!(c.threshold_pct, 100);
        assert_eq!(c.max_search_limit, 1);
        assert_eq!(c.search_default_limit, 1);
        assert_eq!(c.listing_max_tokens, 200);
        let w = &loaded.warnings[0];
        assert_eq!(
            (w.key.as_str(), w.given, w.used, w.line, w.column),
            ("tools.tool_search.threshold_pct", 500, 100, 3, 20)
        );
        assert_eq!(loaded.warnings.len(), 4);
        assert!(
            loaded.warnings[2]
                .to_string()
                .contains("`tools.tool_search.search_default_limit` = 9 is outside 1..1; using 1")
        );
    }

    #[test]
    fn default_limit_follows_a_small_max() {
        let c = parse(
            "tools:\n  tool_search:\n    max_search_limit: 3\n",
            "q.yaml",
        )
        .unwrap();
        assert_eq!(c.config.tool_search.search_default_limit, 3);
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn unknown_word_names_key_location_and_allowed_values() {
        let (key, line, column, message, allowed) =
            invalid("tools:\n  tool_search:\n    enabled: maybe\n");
        assert_eq!(key, "tools.tool_search.enabled");
        assert_eq!((line, column), (3, 14));
        assert!(message.contains("maybe"), "{message}");
        assert_eq!(allowed, "auto, on, off");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let (key, line, _, message, allowed) =
            invalid("tools:\n  tool_search:\n    threshold_pct: lots\n");
        assert_eq!(key, "tools.tool_search.threshold_pct");
        assert_eq!(line, 3);
        assert!(message.contains("integer"), "{message}");
        assert_eq!(allowed, "an integer from 0 to 100");
        let (key, ..) = invalid("tools:\n  tool_search: 5\n");
        assert_eq!(key, "tools.tool_search");
    }

    #[test]
    fn unknown_keys_are_errors() {
        let (key, line, column, message, allowed) =
            invalid("tools:\n  tool_search:\n    enable: on\n");
        assert!(key.starts_with("tools.tool_search"), "{key}");
        assert_eq!((line, column), (3, 5));
        assert!(message.contains("enable"), "{message}");
        assert!(allowed.contains("enabled"), "{allowed}");
        let (_, line, _, message, _) = invalid("tool:\n  x: 1\n");
        assert_eq!(line, 1);
        assert!(message.contains("tool"), "{message}");
    }

    #[test]
    fn bad_eager_glob_is_an_error() {
        let (key, line, ..) = invalid("tools:\n  tool_search:\n    eager: [ok, \"a[\"]\n");
        assert_eq!(key, "tools.tool_search.eager[1]");
        assert_eq!(line, 3);
    }

    #[test]
    fn yaml_syntax_error_has_a_location() {
        let (_, line, ..) = invalid("tools: [\n");
        assert!(line >= 1);
    }

    #[test]
    fn effective_limit_is_clamped() {
        let c = ToolSearchConfig::default();
        assert_eq!(c.effective_limit(None), 5);
        assert_eq!(c.effective_limit(Some(0)), 1);
        assert_eq!(c.effective_limit(Some(1000)), 20);
    }

    #[test]
    fn plugins_section_is_read() {
        let hash = "AB".repeat(32);
        let text = format!(
            "plugins:\n  dirs: [plugins, /opt/quiver/plugins]\n  state_dir: /var/lib/quiver\n  call_timeout_ms: 2500\n  reload_warn_after: 10\n  pin:\n    text: {hash}\n"
        );
        let loaded = parse(&text, "q.yaml").unwrap();
        assert!(loaded.warnings.is_empty());
        let p = loaded.config.plugins;
        assert_eq!(
            p.dirs,
            [
                PathBuf::from("plugins"),
                PathBuf::from("/opt/quiver/plugins")
            ]
        );
        assert_eq!(p.state_dir, Some(PathBuf::from("/var/lib/quiver")));
        assert_eq!((p.call_timeout_ms, p.reload_warn_after), (2500, 10));
        assert_eq!(p.pin["text"], "ab".repeat(32));
    }

    #[test]
    fn plugins_defaults_and_clamps() {
        let p = parse("", "q.yaml").unwrap().config.plugins;
        assert_eq!(p, PluginsConfig::default());
        let loaded = parse("plugins:\n  call_timeout_ms: 0\n", "q.yaml").unwrap();
        assert_eq!(loaded.config.plugins.call_timeout_ms, 1);
        assert_eq!(loaded.warnings[0].key, "plugins.call_timeout_ms");
        assert_eq!(
            (loaded.warnings[0].line, loaded.warnings[0].column),
            (2, 20)
        );
    }

    #[test]
    fn plugins_errors_name_key_and_allowed_values() {
        let (key, line, _, _, allowed) = invalid("plugins:\n  pin:\n    text: nothex\n");
        assert_eq!((key.as_str(), line), ("plugins.pin.text", 3));
        assert!(allowed.contains("sha256"), "{allowed}");
        let (key, line, column, message, allowed) = invalid("plugins:\n  dir: [x]\n");
        assert_eq!((line, column), (2, 3));
        assert!(key.starts_with("plugins"), "{key}");
        assert!(message.contains("dir"), "{message}");
        assert!(allowed.contains("state_dir"), "{allowed}");
        let (key, _, _, _, allowed) = invalid("plugins:\n  call_timeout_ms: soon\n");
        assert_eq!(key, "plugins.call_timeout_ms");
        assert_eq!(allowed, "an integer from 1 to 600000");
    }

    #[test]
    fn relative_plugin_paths_follow_the_config_file() {
        let mut p = PluginsConfig {
            dirs: vec!["p".into(), "/abs".into()],
            state_dir: Some("s".into()),
            ..PluginsConfig::default()
        };
        p.resolve_relative_to(Path::new("/etc/quiver"));
        assert_eq!(
            p.dirs,
            [PathBuf::from("/etc/quiver/p"), PathBuf::from("/abs")]
        );
        assert_eq!(p.state_dir, Some(PathBuf::from("/etc/quiver/s")));
    }

    #[test]
    fn embedded_default_is_valid() {
        let loaded = embedded_default().unwrap();
        assert!(loaded.warnings.is_empty());
    }
}
