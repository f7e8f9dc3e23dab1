//! `quiver.yaml`: the raw shape serde reads, and the validated [`Config`]
//! the rest of the runtime uses.
//!
//! Parsing happens in two steps, like ripgrep's: serde reads the file into
//! raw structs that keep every value's line and column, then [`validate`]
//! clamps numbers (with a warning), checks globs and builds [`Config`].
//! Wrong types, unknown words and unknown keys are [`ConfigError`]s naming
//! the file, line, column, key and the allowed values.
//!
//! Every key is described once, in its section's crate; [`settings`]
//! collects them. [`check`] (what `quiver config check` runs) reports every
//! problem of a file at once; [`json_schema`] and [`markdown_table`] are
//! the committed `docs/quiver.schema.json` and the README's table.

use std::collections::BTreeMap;
use std::path::Path;

use quiver_catalog::settings::{RawToolSearchSetting, ToolSearchConfig};
use quiver_config::{ConfigError, ConfigWarning, Setting, Spanned};
use quiver_plugins::settings::{PluginsConfig, RawPlugins};
use serde::Deserialize;

/// The configuration used when no file is given.
pub const EMBEDDED_DEFAULT: &str = include_str!("default_config.yaml");

/// The validated configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `tools.tool_search`.
    pub tool_search: ToolSearchConfig,
    /// `plugins`.
    pub plugins: PluginsConfig,
    /// `mcp_servers`, by server name.
    pub mcp_servers: BTreeMap<String, quiver_mcp::config::McpServerConfig>,
    /// `guardrails`.
    pub guardrails: quiver_dispatch::settings::GuardrailsConfig,
    /// `approval`.
    pub approval: quiver_dispatch::settings::ApprovalConfig,
    /// `feed`.
    pub feed: quiver_dispatch::settings::FeedConfig,
    /// `core_tools`.
    pub core_tools: quiver_core_tools::CoreToolsConfig,
    /// `models` and `default_model`.
    pub models: quiver_model::settings::ModelsConfig,
    /// `serve`.
    pub serve: crate::settings::ServeConfig,
    /// `agent`.
    pub agent: quiver_agent::settings::AgentConfig,
    /// `gateway`.
    pub gateway: crate::settings::GatewayConfig,
    /// `store`.
    pub store: quiver_store::StoreConfig,
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
    mcp_servers: Option<quiver_mcp::config::RawMcpServers>,
    guardrails: Option<quiver_dispatch::settings::RawGuardrails>,
    approval: Option<quiver_dispatch::settings::RawApproval>,
    feed: Option<quiver_dispatch::settings::RawFeed>,
    core_tools: Option<quiver_core_tools::settings::RawCoreTools>,
    models: Option<quiver_model::settings::RawModels>,
    default_model: Option<Spanned<String>>,
    serve: Option<crate::settings::RawServe>,
    agent: Option<quiver_agent::settings::RawAgent>,
    gateway: Option<crate::settings::RawGateway>,
    store: Option<quiver_store::settings::RawStore>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTools {
    tool_search: Option<RawToolSearchSetting>,
}

// ---- keys and what they allow --------------------------------------------

/// Every key of `quiver.yaml`, section by section, in the order of the
/// README's table.
pub fn settings() -> Vec<Setting> {
    [
        quiver_catalog::settings::SETTINGS,
        quiver_plugins::settings::SETTINGS,
        quiver_mcp::config::SETTINGS,
        quiver_dispatch::settings::SETTINGS,
        quiver_core_tools::settings::SETTINGS,
        quiver_model::settings::SETTINGS,
        crate::settings::SERVE_SETTINGS,
        quiver_agent::settings::SETTINGS,
        crate::settings::GATEWAY_SETTINGS,
        quiver_store::settings::SETTINGS,
    ]
    .concat()
}

/// The JSON Schema (draft 2020-12) of `quiver.yaml`, from [`settings`].
pub fn json_schema() -> serde_json::Value {
    quiver_config::setting::json_schema(&settings(), "quiver.yaml")
}

/// The markdown table of every key, from [`settings`].
pub fn markdown_table() -> String {
    quiver_config::setting::markdown_table(&settings())
}

/// Where the README's table starts and ends.
pub const TABLE_MARKERS: (&str, &str) = ("<!-- settings:start -->", "<!-- settings:end -->");

/// The committed schema, relative to the repository's root.
pub const SCHEMA_PATH: &str = "docs/quiver.schema.json";

/// The command that rewrites the generated docs.
pub const REFRESH_COMMAND: &str = "cargo run -p quiver -- config schema --write .";

/// The generated files under `root` (a checkout of the repository): the
/// schema's path and text, and the README's path and text with its table
/// replaced. Fails when the README has no table markers.
pub fn generated_docs(root: &Path) -> Result<Vec<(std::path::PathBuf, String)>, String> {
    let schema = serde_json::to_string_pretty(&json_schema()).map_err(|e| e.to_string())? + "\n";
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path)
        .map_err(|e| format!("{}: {e}", readme_path.display()))?;
    let (start, end) = TABLE_MARKERS;
    let readme = quiver_config::setting::replace_between(&readme, start, end, &markdown_table())
        .ok_or_else(|| {
            format!(
                "{} has no `{start}` ... `{end}` markers",
                readme_path.display()
            )
        })?;
    Ok(vec![
        (root.join(SCHEMA_PATH), schema),
        (readme_path, readme),
    ])
}

/// Rewrites the generated docs under `root`; returns the files changed.
pub fn write_docs(root: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut changed = Vec::new();
    for (path, text) in generated_docs(root)? {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            changed.push(path);
        }
    }
    Ok(changed)
}

/// What a key accepts, for error messages.
fn allowed_for(key: &str) -> String {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    match (key, leaf) {
        ("<root>", _) | (".", _) => {
            "a map with keys tools, plugins, mcp_servers, guardrails, approval, feed, core_tools, models, default_model, serve, agent, gateway, store".into()
        }
        _ if quiver_core_tools::settings::allowed_for(key).is_some() => {
            quiver_core_tools::settings::allowed_for(key).unwrap_or_default()
        }
        _ if quiver_model::settings::allowed_for(key).is_some() => {
            quiver_model::settings::allowed_for(key).unwrap_or_default()
        }
        _ if crate::settings::allowed_for(key).is_some() => {
            crate::settings::allowed_for(key).unwrap_or_default()
        }
        _ if quiver_agent::settings::allowed_for(key).is_some() => {
            quiver_agent::settings::allowed_for(key).unwrap_or_default()
        }
        _ if quiver_dispatch::settings::allowed_for(key).is_some() => {
            quiver_dispatch::settings::allowed_for(key).unwrap_or_default()
        }
        _ if key == "mcp_servers" || key.starts_with("mcp_servers.") => {
            quiver_mcp::config::allowed_for(key)
        }
        _ if quiver_plugins::settings::allowed_for(key).is_some() => {
            quiver_plugins::settings::allowed_for(key).unwrap_or_default()
        }
        _ if quiver_catalog::settings::allowed_for(key).is_some() => {
            quiver_catalog::settings::allowed_for(key).unwrap_or_default()
        }
        _ if quiver_store::settings::allowed_for(key).is_some() => {
            quiver_store::settings::allowed_for(key).unwrap_or_default()
        }
        _ => "keys tools, plugins, mcp_servers, guardrails, approval, feed, core_tools, models, default_model, serve, agent, gateway, store".into(),
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
    let base =
        quiver_config::paths::absolute(Path::new("."), path.parent().unwrap_or(Path::new("")));
    loaded.config.resolve_relative_to(&base);
    Ok(loaded)
}

impl Config {
    /// Makes every path of the config absolute against `base`: done once,
    /// at load, so that nothing later depends on the working directory.
    pub fn resolve_relative_to(&mut self, base: &Path) {
        self.plugins.resolve_relative_to(base);
        self.core_tools.resolve_relative_to(base);
        self.serve.resolve_relative_to(base);
        self.tool_search.resolve_relative_to(base);
        for server in self.mcp_servers.values_mut() {
            server.resolve_relative_to(base);
        }
        for model in self.models.models.values_mut() {
            model.resolve_relative_to(base);
        }
    }
}

/// The file a config file is looked for under, in the current directory
/// and in the user's config directory (`quiver/quiver.yaml` there).
pub const CONFIG_FILE_NAME: &str = "quiver.yaml";

/// Where the config in use came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// `--config FILE`.
    Given(std::path::PathBuf),
    /// `./quiver.yaml` (the path as found, made absolute).
    CurrentDir(std::path::PathBuf),
    /// `$XDG_CONFIG_HOME/quiver/quiver.yaml`, or `~/.config/quiver/quiver.yaml`
    /// when `XDG_CONFIG_HOME` is not set.
    UserConfig(std::path::PathBuf),
    /// No file: the embedded default. The paths looked at, in order.
    Embedded(Vec<std::path::PathBuf>),
}

impl ConfigOrigin {
    /// The config file, unless it is the embedded default.
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigOrigin::Given(path)
            | ConfigOrigin::CurrentDir(path)
            | ConfigOrigin::UserConfig(path) => Some(path),
            ConfigOrigin::Embedded(_) => None,
        }
    }

    /// Which config this is and how it was found, for the startup summary.
    pub fn describe(&self) -> String {
        match self {
            ConfigOrigin::Given(path) => format!("{} (--config)", path.display()),
            ConfigOrigin::CurrentDir(path) => {
                format!("{} (found in the current directory)", path.display())
            }
            ConfigOrigin::UserConfig(path) => {
                format!("{} (found in the user config directory)", path.display())
            }
            ConfigOrigin::Embedded(looked) => {
                let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                format!(
                    "the embedded default (no {}; pass --config FILE or put a {CONFIG_FILE_NAME} there)",
                    looked.join(" nor ")
                )
            }
        }
    }

    /// Reads and validates the config it names.
    pub fn load(&self) -> Result<LoadedConfig, ConfigError> {
        match self.file() {
            Some(path) => load_file(path),
            None => embedded_default(),
        }
    }
}

/// The config a command without `--config` uses: `./quiver.yaml`, else
/// `$XDG_CONFIG_HOME/quiver/quiver.yaml` (`XDG_CONFIG_HOME` absolute; when
/// it is not set, `~/.config/quiver/quiver.yaml`), else the embedded
/// default. `given` (`--config`) wins over all of them.
pub fn discover(given: Option<&Path>) -> ConfigOrigin {
    discover_in(
        given,
        Path::new("."),
        std::env::var_os("XDG_CONFIG_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// [`discover`] from `cwd` with these environment values.
pub fn discover_in(
    given: Option<&Path>,
    cwd: &Path,
    xdg_config_home: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> ConfigOrigin {
    if let Some(path) = given {
        return ConfigOrigin::Given(path.to_path_buf());
    }
    let mut looked = Vec::new();
    let local = quiver_config::paths::absolute(cwd, Path::new(CONFIG_FILE_NAME));
    if local.is_file() {
        return ConfigOrigin::CurrentDir(local);
    }
    looked.push(local);
    // The XDG spec: an unset or empty XDG_CONFIG_HOME means ~/.config,
    // and a relative one is invalid, so ignored the same way.
    let user_dir = match xdg_config_home.map(Path::new).filter(|d| d.is_absolute()) {
        Some(dir) => Some(dir.to_path_buf()),
        None => home
            .filter(|h| !h.is_empty())
            .map(|h| Path::new(h).join(".config")),
    };
    if let Some(dir) = user_dir {
        let user = dir.join("quiver").join(CONFIG_FILE_NAME);
        if user.is_file() {
            return ConfigOrigin::UserConfig(user);
        }
        looked.push(user);
    }
    ConfigOrigin::Embedded(looked)
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
            *plugin_dir = quiver_config::paths::absolute(&dir, plugin_dir);
        }
        for server in loaded.config.mcp_servers.values_mut() {
            server.resolve_command(&dir);
        }
    }
    loaded.config.resolve_relative_to(Path::new("."));
    Ok(loaded)
}

/// Parses and validates config text; `file` names it in messages. The
/// first problem is the error (see [`check`] for all of them).
pub fn parse(text: &str, file: &str) -> Result<LoadedConfig, ConfigError> {
    let raw: RawConfig = quiver_config::read_document(text, file, allowed_for)?;
    validate(raw, file).map_err(|mut errors| errors.remove(0))
}

/// Like [`parse`], but every problem that can be told: the syntax error,
/// or else every duplicate key, unknown key (with the closest known one),
/// wrong type, unknown word and number under its minimum of the whole
/// file; when there is none of those, every section's own problems
/// (globs, URLs, names...). Never an empty list.
pub fn check(text: &str, file: &str) -> Result<LoadedConfig, Vec<ConfigError>> {
    let problems = quiver_config::check_document(text, file, &settings());
    if !problems.is_empty() {
        return Err(problems);
    }
    let raw: RawConfig =
        quiver_config::read_document(text, file, allowed_for).map_err(|e| vec![e])?;
    validate(raw, file)
}

/// [`check`] of a file, with its paths made absolute like [`load_file`].
pub fn check_file(path: &Path) -> Result<LoadedConfig, Vec<ConfigError>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| {
        vec![ConfigError::Io {
            file: file.clone(),
            source,
        }]
    })?;
    let mut loaded = check(&text, &file)?;
    let base =
        quiver_config::paths::absolute(Path::new("."), path.parent().unwrap_or(Path::new("")));
    loaded.config.resolve_relative_to(&base);
    Ok(loaded)
}

/// The value of `result`, or `None` with its error kept in `errors`.
fn keep<T>(errors: &mut Vec<ConfigError>, result: Result<T, ConfigError>) -> Option<T> {
    result.map_err(|error| errors.push(error)).ok()
}

/// Validates every section, collecting the error of each that has one.
fn validate(raw: RawConfig, file: &str) -> Result<LoadedConfig, Vec<ConfigError>> {
    let mut warnings = Vec::new();
    let mut errors = Vec::new();
    let plugins = keep(
        &mut errors,
        quiver_plugins::settings::validate_plugins(
            raw.plugins.unwrap_or_default(),
            file,
            &mut warnings,
        ),
    );
    let guardrails = keep(
        &mut errors,
        quiver_dispatch::settings::validate_guardrails(
            raw.guardrails.unwrap_or_default(),
            file,
            &mut warnings,
        ),
    );
    let approval = keep(
        &mut errors,
        quiver_dispatch::settings::validate_approval(
            raw.approval.unwrap_or_default(),
            file,
            &mut warnings,
        ),
    );
    let feed = keep(
        &mut errors,
        quiver_dispatch::settings::validate_feed(raw.feed.unwrap_or_default(), file, &mut warnings),
    );
    let mcp_servers = keep(
        &mut errors,
        quiver_mcp::config::validate(raw.mcp_servers.unwrap_or_default(), file, &mut warnings),
    );
    let serve = keep(
        &mut errors,
        crate::settings::validate_serve(raw.serve.unwrap_or_default(), file, &mut warnings),
    );
    let agent = keep(
        &mut errors,
        quiver_agent::settings::validate_agent(raw.agent.unwrap_or_default(), file, &mut warnings),
    );
    let gateway = keep(
        &mut errors,
        crate::settings::validate_gateway(raw.gateway.unwrap_or_default(), file, &mut warnings),
    );
    let core_tools = keep(
        &mut errors,
        quiver_core_tools::settings::validate_core_tools(
            raw.core_tools.unwrap_or_default(),
            file,
            &mut warnings,
        ),
    );
    let models = keep(
        &mut errors,
        quiver_model::settings::validate(
            raw.models.unwrap_or_default(),
            raw.default_model,
            file,
            &mut warnings,
        ),
    );
    let store = keep(
        &mut errors,
        quiver_store::settings::validate(
            raw.store.unwrap_or_default(),
            file,
            &mut warnings,
            |name| std::env::var(name).ok(),
        ),
    );
    let tool_search = keep(
        &mut errors,
        quiver_catalog::settings::validate_tool_search(
            raw.tools.and_then(|t| t.tool_search),
            file,
            &mut warnings,
        ),
    );
    let (
        Some(tool_search),
        Some(plugins),
        Some(mcp_servers),
        Some(guardrails),
        Some(approval),
        Some(feed),
        Some(core_tools),
        Some(models),
        Some(serve),
        Some(agent),
        Some(gateway),
        Some(store),
    ) = (
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
        store,
    )
    else {
        return Err(errors);
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
            store,
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
    mod core_tools;
    mod dispatch;
    mod docs;
    mod model;
    mod root;
    mod serve;
}
