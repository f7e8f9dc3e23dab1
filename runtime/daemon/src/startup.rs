//! The startup summary: what a started daemon runs, in a few lines an
//! operator can act on (the config file and how it was found, the listen
//! address, the token file, each plugin, each MCP server's state as it
//! changes, the default model and whether it answered a probe, with the
//! likely fix when not, and what tool search saves).
//!
//! Every line is a `tracing` event of target [`SUMMARY_TARGET`] at `info`,
//! with its facts as fields: the binary prints them as plain lines on
//! stderr, or as JSON log records with `QUIVER_LOG_FORMAT=json`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use quiver_tool::scope::Scope;
use quiver_tool::status::{ServerState, ServerStatus};
use quiver_tool::tool::ToolSource;

use crate::Daemon;
use crate::config::ConfigOrigin;

/// The `tracing` target of the summary's lines.
pub const SUMMARY_TARGET: &str = "quiver::summary";

/// Where the daemon can be reached, for the summary.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// `http://ADDRESS:PORT`; `None` for the stdio gateway.
    pub url: Option<String>,
    /// The bearer token's file.
    pub token_file: Option<std::path::PathBuf>,
}

/// Longest the summary waits for the MCP servers' first connection
/// attempts before it reports what tool search saves (it reports then
/// with the tools that have arrived).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// Reports the summary of `daemon`: what is known now at once, then (in a
/// background task that ends with the daemon) the model probe, every MCP
/// server state change and, once the servers' first attempts are over,
/// the token saving.
pub fn report(daemon: &Arc<Daemon>, origin: &ConfigOrigin, endpoints: &Endpoints) {
    // Subscribed before the states are read, so no change falls between.
    let changes = daemon.mcp().subscribe_changes();
    tracing::info!(
        target: SUMMARY_TARGET,
        version = env!("CARGO_PKG_VERSION"),
        config = origin.file().map(|p| p.display().to_string()),
        "quiver {}: config {}",
        env!("CARGO_PKG_VERSION"),
        origin.describe()
    );
    if let Some(url) = &endpoints.url {
        tracing::info!(
            target: SUMMARY_TARGET,
            url = %url,
            "listening on {url} (console {url}/, API {url}/v1, MCP gateway {url}/mcp, {url}/healthz, {url}/readyz, {url}/metrics)"
        );
    }
    if let Some(token) = &endpoints.token_file {
        tracing::info!(target: SUMMARY_TARGET, token_file = %token.display(), "token in {}", token.display());
    }
    tracing::info!(
        target: SUMMARY_TARGET,
        state_dir = %daemon.state_dir().display(),
        "state directory {}",
        daemon.state_dir().display()
    );
    let store = daemon.store();
    tracing::info!(
        target: SUMMARY_TARGET,
        instance = %daemon.instance().id,
        store = store.backend().as_str(),
        location = %store.location(),
        shared = store.is_shared(),
        "instance {}, store {}{}",
        daemon.instance().id,
        store.describe(),
        if store.is_shared() {
            " (shared: quiver status lists the other instances)"
        } else {
            ""
        }
    );
    report_core_tools(daemon);
    report_plugins(daemon);
    for status in daemon.mcp().status() {
        report_server(&status);
    }
    let weak = Arc::downgrade(daemon);
    let probe = probe_default_model(weak.clone());
    tokio::spawn(async move {
        tokio::join!(probe, follow_servers(weak, changes));
    });
}

fn report_core_tools(daemon: &Daemon) {
    let snapshot = daemon.registry().snapshot();
    let core: Vec<&str> = snapshot
        .tools()
        .filter(|t| *t.source() == ToolSource::Core)
        .map(|t| t.name())
        .collect();
    tracing::info!(
        target: SUMMARY_TARGET,
        tools = core.len(),
        workspace = %daemon.applied().core_workspace.display(),
        "core tools: {} (workspace {})",
        if core.is_empty() { "none".to_owned() } else { core.join(", ") },
        daemon.applied().core_workspace.display()
    );
}

fn report_plugins(daemon: &Daemon) {
    let dirs = &daemon.config().plugins.dirs;
    let plugins = daemon.plugins().list();
    if plugins.is_empty() {
        let where_ = if dirs.is_empty() {
            "plugins.dirs is empty".to_owned()
        } else {
            format!("no plugin file in {}", join_paths(dirs))
        };
        tracing::info!(target: SUMMARY_TARGET, "plugins: none ({where_})");
        return;
    }
    for plugin in plugins {
        let file = plugin.file.display().to_string();
        match (&plugin.name, plugin.generation) {
            (Some(name), Some(generation)) => {
                let failed = plugin
                    .last_error
                    .as_deref()
                    .map(|e| format!("; its last load failed: {e}"))
                    .unwrap_or_default();
                tracing::info!(
                    target: SUMMARY_TARGET,
                    plugin = %name,
                    file = %file,
                    tools = plugin.tools.len(),
                    generation,
                    "plugin {name}: {file}, {} tools, generation {generation}{failed}",
                    plugin.tools.len()
                );
            }
            _ => {
                let reason = plugin.last_error.as_deref().unwrap_or("not loaded");
                tracing::warn!(
                    target: SUMMARY_TARGET,
                    file = %file,
                    error = %reason,
                    "plugin file {file} not loaded: {reason}"
                );
            }
        }
    }
}

fn join_paths(paths: &[std::path::PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn report_server(status: &ServerStatus) {
    let name = &status.name;
    let state = status.state.name();
    match &status.state {
        ServerState::Ready { tools } => tracing::info!(
            target: SUMMARY_TARGET,
            server = %name,
            state,
            tools,
            "mcp server {name} ({}): ready, {tools} tools",
            status.transport
        ),
        ServerState::Failed {
            error, retry_in_ms, ..
        } => tracing::warn!(
            target: SUMMARY_TARGET,
            server = %name,
            state,
            error = %error,
            retry_in_ms,
            "mcp server {name} ({}): failed: {error}; retrying in {} s",
            status.transport,
            retry_in_ms.div_ceil(1000)
        ),
        ServerState::NeedsLogin { command } => tracing::warn!(
            target: SUMMARY_TARGET,
            server = %name,
            state,
            "mcp server {name} ({}): needs an OAuth login: run `{command}`",
            status.transport
        ),
        other => tracing::info!(
            target: SUMMARY_TARGET,
            server = %name,
            state,
            "mcp server {name} ({}): {}",
            status.transport,
            match other {
                ServerState::Connecting { .. } => "connecting".to_owned(),
                other => other.describe(),
            }
        ),
    }
}

/// Reports each MCP server state change worth an operator's attention
/// (ready, failed with a new error, stopped) until the daemon is gone,
/// and the token saving once no server is on its first attempt.
async fn follow_servers(
    daemon: Weak<Daemon>,
    mut changes: tokio::sync::broadcast::Receiver<ServerStatus>,
) {
    use tokio::sync::broadcast::error::RecvError;
    let mut last_error: std::collections::HashMap<String, String> = Default::default();
    let mut saving_reported = false;
    let settle_deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    loop {
        if !saving_reported {
            let Some(strong) = daemon.upgrade() else {
                return;
            };
            let settled = strong
                .mcp()
                .status()
                .iter()
                .all(|s| !matches!(s.state, ServerState::Connecting { attempt: 1 }));
            if settled || tokio::time::Instant::now() >= settle_deadline {
                report_saving(&strong);
                saving_reported = true;
            }
        }
        let next = if saving_reported {
            changes.recv().await
        } else {
            // Re-check the deadline now and then while servers connect.
            match tokio::time::timeout(Duration::from_millis(500), changes.recv()).await {
                Ok(next) => next,
                Err(_) => continue,
            }
        };
        match next {
            Ok(status) => {
                let worth = match &status.state {
                    ServerState::Failed { error, .. } => {
                        last_error.get(&status.name) != Some(error)
                    }
                    ServerState::Ready { .. }
                    | ServerState::Stopped
                    | ServerState::NeedsLogin { .. } => true,
                    ServerState::Connecting { .. } | ServerState::Disabled => false,
                };
                match &status.state {
                    ServerState::Failed { error, .. } => {
                        last_error.insert(status.name.clone(), error.clone());
                    }
                    ServerState::Ready { .. } => {
                        last_error.remove(&status.name);
                    }
                    _ => {}
                }
                if worth {
                    report_server(&status);
                }
            }
            Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
    }
}

fn report_saving(daemon: &Daemon) {
    let context = daemon
        .config()
        .models
        .default_model
        .as_deref()
        .and_then(|name| daemon.applied().models.get(name).cloned())
        .map(|m| m.context_tokens())
        .unwrap_or(daemon.config().gateway.context_tokens);
    let assembly = daemon.assemble_scope(&Scope::all(), context);
    let savings = assembly.savings();
    tracing::info!(
        target: SUMMARY_TARGET,
        tools = assembly.tool_count(),
        context_tokens = context,
        tokens_without_tool_search = savings.tokens_without_tool_search,
        tokens_with_tool_search = savings.tokens_with_tool_search,
        bridge_tokens = savings.bridge_tokens,
        saved_pct = savings.saved_pct(),
        "tool search: {} (tier {}, context {context})",
        savings.describe(assembly.tool_count()),
        assembly.tier() as u8
    );
}

/// Probes the default model once and says whether it answered, with the
/// likely fix when it did not.
async fn probe_default_model(daemon: Weak<Daemon>) {
    let Some(strong) = daemon.upgrade() else {
        return;
    };
    let Some(name) = strong.config().models.default_model.clone() else {
        tracing::warn!(
            target: SUMMARY_TARGET,
            "model: none configured, so sessions cannot run turns; add one under `models` (and `default_model`)"
        );
        return;
    };
    let Some(model) = strong.applied().models.get(&name).cloned() else {
        return;
    };
    let config = strong.config().models.models.get(&name).cloned();
    drop(strong);
    let described = match &config {
        Some(c) => format!(
            "{name} ({} `{}` at {})",
            c.provider.as_str(),
            c.model,
            c.base_url
        ),
        None => name.clone(),
    };
    match model.probe().await {
        Ok(Some(probe)) => tracing::info!(
            target: SUMMARY_TARGET,
            model = %name,
            url = %probe.url,
            status = probe.status,
            answered = true,
            "default model {described}: answered a probe (HTTP {} from {})",
            probe.status,
            probe.url
        ),
        Ok(None) => tracing::info!(
            target: SUMMARY_TARGET,
            model = %name,
            "default model {described}: not probed"
        ),
        Err(error) => {
            let fix = error.likely_fix().unwrap_or_default();
            tracing::warn!(
                target: SUMMARY_TARGET,
                model = %name,
                answered = false,
                code = error.code(),
                error = %error,
                fix = %fix,
                "default model {described}: did not answer a probe: {error}{}",
                if fix.is_empty() { String::new() } else { format!("; likely fix: {fix}") }
            );
        }
    }
}

/// Reports a reload the way the startup summary reports a start: on
/// success the config and what changed, what waits for a restart, the
/// plugins again when they changed, each MCP server removed, added or
/// changed (later state changes of the new ones follow as at start, when
/// [`report`] runs), the default model's probe again when the models
/// changed, and the token saving once the new servers' first attempts are
/// over; on refusal the errors, and that the running config keeps serving.
pub fn report_reload(
    daemon: &Arc<Daemon>,
    outcome: &Result<crate::ReloadReport, crate::DaemonError>,
) {
    let report = match outcome {
        Ok(report) => report,
        Err(crate::DaemonError::ConfigRefused { file, errors }) => {
            tracing::warn!(
                target: SUMMARY_TARGET,
                config = %file,
                errors = errors.len(),
                "config {file} refused, the running config keeps serving: {}",
                errors.join("; ")
            );
            return;
        }
        Err(error) => {
            tracing::warn!(
                target: SUMMARY_TARGET,
                error = %error,
                "config reload failed, the running config keeps serving: {error}"
            );
            return;
        }
    };
    let changed = if report.changed.is_empty() {
        "nothing".to_owned()
    } else {
        report.changed.join(", ")
    };
    tracing::info!(
        target: SUMMARY_TARGET,
        config = %report.file,
        generation = report.generation,
        "config {} reloaded (generation {}): changed: {changed}",
        report.file,
        report.generation
    );
    if !report.restart_required.is_empty() {
        tracing::warn!(
            target: SUMMARY_TARGET,
            "needs a restart to change: {} (the old values stay in force)",
            report.restart_required.join(", ")
        );
    }
    for warning in &report.warnings {
        tracing::warn!(target: SUMMARY_TARGET, "config: {warning}");
    }
    let changed_section = |name: &str| report.changed.iter().any(|c| c == name);
    if changed_section("core_tools") {
        report_core_tools(daemon);
    }
    for file in &report.plugins_removed {
        tracing::info!(
            target: SUMMARY_TARGET,
            file = %file.display(),
            "plugin file {}: removed by the reload, its tools are gone",
            file.display()
        );
    }
    if changed_section("plugins") {
        report_plugins(daemon);
    }
    for name in &report.mcp_servers.removed {
        tracing::info!(
            target: SUMMARY_TARGET,
            server = %name,
            state = "removed",
            "mcp server {name}: removed by the reload, its tools are gone"
        );
    }
    for name in report
        .mcp_servers
        .added
        .iter()
        .chain(&report.mcp_servers.changed)
    {
        if let Some(status) = daemon.mcp().server_status(name) {
            report_server(&status);
        }
    }
    for model in &report.models_removed {
        tracing::warn!(
            target: SUMMARY_TARGET,
            model = %model,
            "model {model}: removed by the reload; sessions using it are told so and can be switched (PATCH /v1/sessions/ID {{\"model\": NAME}})"
        );
    }
    let weak = Arc::downgrade(daemon);
    let probe = changed_section("models").then(|| probe_default_model(weak.clone()));
    let saving = (changed_section("mcp_servers")
        || changed_section("plugins")
        || changed_section("tools.tool_search"))
    .then(|| report_saving_when_settled(weak));
    tokio::spawn(async move {
        tokio::join!(
            async move {
                if let Some(probe) = probe {
                    probe.await;
                }
            },
            async move {
                if let Some(saving) = saving {
                    saving.await;
                }
            }
        );
    });
}

/// Reports the token saving once no MCP server is on its first attempt
/// (or after [`SETTLE_LIMIT`]).
async fn report_saving_when_settled(daemon: Weak<Daemon>) {
    let settle = {
        let Some(strong) = daemon.upgrade() else {
            return;
        };
        let mcp = strong.mcp().clone();
        async move { mcp.settle(SETTLE_LIMIT).await }
    };
    settle.await;
    if let Some(strong) = daemon.upgrade() {
        report_saving(&strong);
    }
}
