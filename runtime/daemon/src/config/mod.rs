//! `quiver.yaml`: the raw shape serde reads, and the validated [`Config`]
//! the rest of the runtime uses.
//!
//! Parsing happens in two steps, like ripgrep's: serde reads the file into
//! raw structs that keep every value's line and column, then [`validate`]
//! clamps numbers (with a warning), checks globs and builds [`Config`].
//! Wrong types, unknown words and unknown keys are [`ConfigError`]s naming
//! the file, line, column, key and the allowed values.

use std::collections::BTreeMap;
use std::path::Path;

use quiver_catalog::settings::{RawToolSearchSetting, ToolSearchConfig};
use quiver_config::{ConfigError, ConfigWarning, Spanned};
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTools {
    tool_search: Option<RawToolSearchSetting>,
}

// ---- keys and what they allow --------------------------------------------

/// What a key accepts, for error messages.
fn allowed_for(key: &str) -> String {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    match (key, leaf) {
        ("<root>", _) | (".", _) => {
            "a map with keys tools, plugins, mcp_servers, guardrails, approval, feed, core_tools, models, default_model, serve, agent, gateway".into()
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
        for server in self.mcp_servers.values_mut() {
            server.resolve_relative_to(base);
        }
        for model in self.models.models.values_mut() {
            model.resolve_relative_to(base);
        }
    }
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

/// Parses and validates config text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<LoadedConfig, ConfigError> {
    let raw: RawConfig = quiver_config::read_document(text, file, allowed_for)?;
    validate(raw, file)
}

fn validate(raw: RawConfig, file: &str) -> Result<LoadedConfig, ConfigError> {
    let mut warnings = Vec::new();
    let plugins = quiver_plugins::settings::validate_plugins(
        raw.plugins.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let guardrails = quiver_dispatch::settings::validate_guardrails(
        raw.guardrails.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let approval = quiver_dispatch::settings::validate_approval(
        raw.approval.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let feed = quiver_dispatch::settings::validate_feed(
        raw.feed.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let mcp_servers =
        quiver_mcp::config::validate(raw.mcp_servers.unwrap_or_default(), file, &mut warnings)?;
    let serve = crate::settings::validate_serve(raw.serve.unwrap_or_default(), file)?;
    let agent =
        quiver_agent::settings::validate_agent(raw.agent.unwrap_or_default(), file, &mut warnings)?;
    let gateway =
        crate::settings::validate_gateway(raw.gateway.unwrap_or_default(), file, &mut warnings)?;
    let core_tools = quiver_core_tools::settings::validate_core_tools(
        raw.core_tools.unwrap_or_default(),
        file,
        &mut warnings,
    )?;
    let models = quiver_model::settings::validate(
        raw.models.unwrap_or_default(),
        raw.default_model,
        file,
        &mut warnings,
    )?;
    let tool_search = quiver_catalog::settings::validate_tool_search(
        raw.tools.and_then(|t| t.tool_search),
        file,
        &mut warnings,
    )?;
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
    mod core_tools;
    mod dispatch;
    mod model;
    mod root;
    mod serve;
}
