//! `quiver status`: what the daemon has: plugins, MCP servers and
//! sessions. When a daemon of this state directory is running, it is asked
//! (`/v1/status`); otherwise the plugins are loaded and the MCP servers
//! connected here for a few seconds, and the sessions are read from the
//! state database.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};

use quiver_runtime::daemon::DATABASE_FILE;
use quiver_runtime::mcp::{McpHost, McpHostOptions};
use quiver_runtime::plugins::{PluginHost, PluginHostOptions};
use quiver_runtime::registry::ToolRegistry;
use quiver_runtime::store::Store;

/// `quiver status` arguments.
#[derive(Args)]
pub struct StatusArgs {
    /// Config file (default: the embedded default config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// State directory, overriding `serve.state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Longest wait for servers still on their first connection attempt, in seconds.
    #[arg(long, default_value_t = 5.0)]
    wait_s: f64,
    /// Print one JSON object per line: the daemon, then each MCP server,
    /// plugin and session (`kind` tells which).
    #[arg(long)]
    json: bool,
    /// Relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
}

/// Runs `quiver status`; exits non-zero when an enabled MCP server is not ready.
pub fn run(args: StatusArgs) -> Result<ExitCode> {
    let mut config = crate::load_config(args.config.as_deref())?.config;
    if let Some(dir) = &args.state_dir {
        config.serve.state_dir = Some(dir.clone());
    }
    let state_dir = config.serve.state_dir();
    let wait = Duration::try_from_secs_f64(args.wait_s.max(0.0)).unwrap_or(Duration::ZERO);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let status = match runtime.block_on(ask_daemon(&state_dir)) {
        Some(status) => status,
        None => runtime.block_on(local_status(&config, &state_dir, wait, args.dev))?,
    };
    print(&status, args.json)?;
    let all_ok = status["mcp_servers"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|s| matches!(s["state"].as_str(), Some("ready" | "disabled")));
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The running daemon's `/v1/status`, when `daemon.json` names one that answers.
async fn ask_daemon(state_dir: &Path) -> Option<Value> {
    let file = std::fs::read_to_string(state_dir.join(crate::serve_cli::DAEMON_FILE)).ok()?;
    let daemon: Value = serde_json::from_str(&file).ok()?;
    let url = daemon["url"].as_str()?;
    let token_file = daemon["token_file"].as_str()?;
    let token = std::fs::read_to_string(token_file).ok()?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .ok()?;
    let response = client
        .get(format!("{url}/v1/status"))
        .bearer_auth(token.trim())
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut status: Value = response.json().await.ok()?;
    status["daemon"] = json!({"running": true, "url": url});
    Some(status)
}

async fn local_status(
    config: &quiver_runtime::config::Config,
    state_dir: &Path,
    wait: Duration,
    dev: bool,
) -> Result<Value> {
    let registry = Arc::new(ToolRegistry::new());
    let mut plugin_config = config.plugins.clone();
    if plugin_config.state_dir.is_none() {
        plugin_config.state_dir = Some(state_dir.join("plugins"));
    }
    let plugins = PluginHost::new(
        registry.clone(),
        PluginHostOptions::from_config(&plugin_config, dev),
    )?;
    plugins.load_dirs(&plugin_config.dirs);
    let host = McpHost::start(
        registry,
        config.mcp_servers.clone().into_values(),
        McpHostOptions::default(),
    );
    let servers = host.settle(wait).await;
    host.shutdown().await;
    let database = state_dir.join(DATABASE_FILE);
    let sessions = if database.exists() {
        json!(Store::open(&database)?.sessions()?)
    } else {
        json!([])
    };
    Ok(json!({
        "daemon": {"running": false},
        "mcp_servers": servers,
        "plugins": plugins.list_json(),
        "sessions": sessions,
    }))
}

fn print(status: &Value, json_out: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let list = |key: &str| status[key].as_array().cloned().unwrap_or_default();
    if json_out {
        let mut daemon = status["daemon"].clone();
        daemon["kind"] = json!("daemon");
        writeln!(out, "{daemon}")?;
        for (key, kind) in [
            ("mcp_servers", "mcp_server"),
            ("plugins", "plugin"),
            ("sessions", "session"),
        ] {
            for mut item in list(key) {
                item["kind"] = json!(kind);
                writeln!(out, "{item}")?;
            }
        }
        return Ok(());
    }
    match status["daemon"]["url"].as_str() {
        Some(url) => writeln!(out, "daemon: running at {url}")?,
        None => writeln!(out, "daemon: not running (showing a local check)")?,
    }
    let servers = list("mcp_servers");
    if servers.is_empty() {
        writeln!(out, "no MCP servers configured")?;
    }
    for server in &servers {
        writeln!(
            out,
            "{:<24} {:<6} {:<11} {}",
            server["name"].as_str().unwrap_or_default(),
            server["transport"].as_str().unwrap_or_default(),
            server["state"].as_str().unwrap_or_default(),
            describe(server)
        )?;
    }
    let plugins = list("plugins");
    writeln!(out, "plugins: {}", plugins.len())?;
    for plugin in &plugins {
        let tools = plugin["tools"].as_array().map_or(0, Vec::len);
        writeln!(
            out,
            "  {:<22} generation {:<4} {} tools  {}{}",
            plugin["name"].as_str().unwrap_or("(not loaded)"),
            plugin["generation"],
            tools,
            plugin["health"].as_str().unwrap_or_default(),
            plugin["last_error"]
                .as_str()
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        )?;
    }
    let sessions = list("sessions");
    writeln!(out, "sessions: {}", sessions.len())?;
    for session in &sessions {
        writeln!(
            out,
            "  {:<24} {:<8} {:>5} messages  model {}  grants {}",
            session["id"].as_str().unwrap_or_default(),
            session["kind"].as_str().unwrap_or_default(),
            session["messages"],
            session["model"].as_str().unwrap_or("-"),
            session["grants"]
        )?;
    }
    Ok(())
}

/// The state in words, as `ServerState::describe` gives it.
fn describe(server: &Value) -> String {
    serde_json::from_value::<quiver_runtime::mcp::ServerState>(server.clone())
        .map(|state| state.describe())
        .unwrap_or_else(|_| server["state"].as_str().unwrap_or_default().to_owned())
}
