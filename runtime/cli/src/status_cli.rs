//! `quiver status`: what the daemon has: plugins, MCP servers and
//! sessions. When a daemon of this state directory is running, it is asked
//! (`/v1/status`); otherwise the same runtime the daemon would start is
//! started here (no watcher, no listener) for a few seconds and answers in
//! the same shape.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};

use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::approval::DenyAll;

use crate::serve_cli::DaemonFile;

/// `quiver status` arguments.
#[derive(Args)]
pub(crate) struct StatusArgs {
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
pub(crate) fn run(args: StatusArgs) -> Result<ExitCode> {
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
        DaemonAnswer::Status(status) => status,
        DaemonAnswer::NoDaemon => runtime.block_on(local_status(config.clone(), wait, args.dev))?,
        DaemonAnswer::Stale { file, pid } => {
            eprintln!(
                "note: {} names process {pid}, which is not running (a daemon that did not stop cleanly); showing what this process finds",
                file.display()
            );
            runtime.block_on(local_status(config.clone(), wait, args.dev))?
        }
        DaemonAnswer::NoAnswer { file, pid, error } => {
            // Starting a second copy of every MCP server beside a live
            // daemon would hide the problem; say it instead.
            anyhow::bail!(
                "the daemon named by {} (process {pid}) is running but did not answer: {error} (if process {pid} is no Quiver daemon, remove that file)",
                file.display()
            );
        }
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

/// What asking the daemon of a state directory gave.
pub(crate) enum DaemonAnswer {
    /// Its answer (`/v1/status` for `quiver status`).
    Status(Value),
    /// No `daemon.json`: no daemon runs on this state directory.
    NoDaemon,
    /// `daemon.json` names a process that is gone.
    Stale { file: PathBuf, pid: u32 },
    /// The process is alive but the request failed.
    NoAnswer {
        file: PathBuf,
        pid: u32,
        error: String,
    },
}

/// Asks the daemon `daemon.json` names for its `/v1/status`.
async fn ask_daemon(state_dir: &Path) -> DaemonAnswer {
    match request_daemon(state_dir, reqwest::Method::GET, "/v1/status", None).await {
        DaemonAnswer::Status(mut status) => {
            let url = DaemonFile::read(state_dir)
                .map(|d| d.url)
                .unwrap_or_default();
            status["daemon"] = json!({"running": true, "url": url});
            DaemonAnswer::Status(status)
        }
        other => other,
    }
}

/// Sends `method path` (with a JSON `body`) to the daemon `daemon.json`
/// names, with its token; a JSON error answer is given back as
/// [`DaemonAnswer::Status`] too, with its `error` (code) and `message`.
pub(crate) async fn request_daemon(
    state_dir: &Path,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> DaemonAnswer {
    let file = DaemonFile::path(state_dir);
    let Some(daemon) = DaemonFile::read(state_dir) else {
        return DaemonAnswer::NoDaemon;
    };
    let pid = daemon.pid;
    if pid == 0 || !process_is_alive(pid) {
        return DaemonAnswer::Stale { file, pid };
    }
    let no_answer = |error: String| DaemonAnswer::NoAnswer {
        file: file.clone(),
        pid,
        error,
    };
    let (url, token_file) = (daemon.url.as_str(), daemon.token_file.as_str());
    if url.is_empty() || token_file.is_empty() {
        return no_answer("the file has no `url` or `token_file`".to_owned());
    }
    let token = match std::fs::read_to_string(token_file) {
        Ok(token) => token,
        Err(error) => {
            return no_answer(format!("cannot read the token file {token_file}: {error}"));
        }
    };
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
    {
        Ok(client) => client,
        Err(error) => return no_answer(error.to_string()),
    };
    let mut request = client
        .request(method.clone(), format!("{url}{path}"))
        .bearer_auth(token.trim());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return no_answer(format!("{method} {url}{path}: {error}")),
    };
    let code = response.status();
    match response.json::<Value>().await {
        Ok(answer) if code.is_success() || answer["error"].is_string() => {
            DaemonAnswer::Status(answer)
        }
        Ok(_) => no_answer(format!("{method} {url}{path} answered {code}")),
        Err(error) => no_answer(format!("{method} {url}{path} ({code}): {error}")),
    }
}

/// Whether process `pid` exists (ours or not).
fn process_is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The status a daemon on this config would report, from the same runtime
/// `quiver serve` starts (no watcher), after waiting up to `wait` for the
/// MCP servers' first connections.
async fn local_status(
    config: quiver_daemon::config::Config,
    wait: Duration,
    dev: bool,
) -> Result<Value> {
    let daemon = Daemon::start(
        config,
        DaemonOptions {
            dev,
            approver: Some(Arc::new(DenyAll)),
            watch_plugins: false,
            config_file: None,
            overrides: Default::default(),
            primary: false,
        },
    )
    .await?;
    daemon.settle(wait).await;
    let status = daemon.status().await;
    daemon.shutdown().await;
    let mut status = status?;
    status["daemon"] = json!({"running": false});
    Ok(status)
}

fn print(status: &Value, json_out: bool) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let list = |key: &str| status[key].as_array().cloned().unwrap_or_default();
    if json_out {
        let mut daemon = status["daemon"].clone();
        daemon["kind"] = json!("daemon");
        daemon["instance"] = status["instance"].clone();
        daemon["store"] = status["store"].clone();
        writeln!(out, "{daemon}")?;
        let plugins = status["plugins"]["plugins"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (items, kind) in [
            (list("mcp_servers"), "mcp_server"),
            (plugins, "plugin"),
            (list("sessions"), "session"),
        ] {
            for mut item in items {
                item["kind"] = json!(kind);
                writeln!(out, "{item}")?;
            }
        }
        if status["embeddings"].is_object() {
            let mut embeddings = status["embeddings"].clone();
            embeddings["kind"] = json!("embeddings");
            writeln!(out, "{embeddings}")?;
        }
        return Ok(());
    }
    match status["daemon"]["url"].as_str() {
        Some(url) => writeln!(out, "daemon: running at {url}")?,
        None => writeln!(out, "daemon: not running (showing a local check)")?,
    }
    print_instances(&mut out, status)?;
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
        print_oauth(&mut out, server)?;
        print_integrity(&mut out, server)?;
    }
    // `/v1/status` gives `plugins: {plugins: [...], loaded_generations}`.
    let plugins = status["plugins"]["plugins"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    writeln!(out, "plugins: {}", plugins.len())?;
    for plugin in &plugins {
        let tools = plugin["tools"].as_array().map_or(0, Vec::len);
        writeln!(
            out,
            "  {:<22} generation {:<4} {} tools  {}{}",
            plugin["name"].as_str().unwrap_or("(not loaded)"),
            plugin["generation"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), |g| g.to_string()),
            tools,
            plugin["health"].as_str().unwrap_or_default(),
            plugin["last_error"]
                .as_str()
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        )?;
    }
    print_embeddings(&mut out, &status["embeddings"])?;
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

/// This instance, its store, and (a shared store) the other instances.
fn print_instances(out: &mut impl Write, status: &Value) -> Result<()> {
    let me = status["instance"]["id"].as_str().unwrap_or_default();
    writeln!(
        out,
        "instance: {me} on {}  store: {}",
        status["instance"]["host"].as_str().unwrap_or_default(),
        status["store"]["description"].as_str().unwrap_or_default(),
    )?;
    if status["store"]["shared"] != true {
        return Ok(());
    }
    for other in status["instances"].as_array().into_iter().flatten() {
        let id = other["id"].as_str().unwrap_or_default();
        if id == me {
            continue;
        }
        let state = match other["stop_reason"].as_str() {
            Some(reason) => format!("stopped ({reason})"),
            None => format!(
                "running, pid {} on {}{}",
                other["pid"],
                other["host"].as_str().unwrap_or_default(),
                other["listen"]
                    .as_str()
                    .map(|l| format!(", listening on {l}"))
                    .unwrap_or_default()
            ),
        };
        writeln!(out, "  instance {id:<20} {state}")?;
    }
    Ok(())
}

/// The embedding stage's progress: overall, then each source still
/// embedding (a source whose tools are all ready is only counted).
fn print_embeddings(out: &mut impl Write, embeddings: &Value) -> Result<()> {
    if !embeddings.is_object() {
        writeln!(out, "embeddings: off (lexical search only)")?;
        return Ok(());
    }
    let model = embeddings["model"].as_str().unwrap_or_default();
    let model = Path::new(model)
        .file_name()
        .map_or(model.into(), |name| name.to_string_lossy());
    writeln!(
        out,
        "embeddings: {model}  {}/{} tools ready  weight {}  {} cached  {} failed",
        embeddings["ready"],
        embeddings["total"],
        embeddings["weight"],
        embeddings["cached"],
        embeddings["failed"]
    )?;
    for source in embeddings["sources"].as_array().into_iter().flatten() {
        if source["ready"] != source["total"] {
            writeln!(
                out,
                "  {:<22} {}/{} ready",
                source["source"].as_str().unwrap_or_default(),
                source["ready"],
                source["total"]
            )?;
        }
    }
    Ok(())
}

/// A server's quarantined tools (reason, flags, diff) and its recent
/// definition changes, indented under its line.
fn print_integrity(out: &mut impl Write, server: &Value) -> Result<()> {
    let name = server["name"].as_str().unwrap_or_default();
    let held = server["quarantined_tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !held.is_empty() {
        writeln!(
            out,
            "  {} quarantined (trust {}); accept with `quiver tools accept {name} [TOOL...]`:",
            held.len(),
            server["trust"].as_str().unwrap_or_default()
        )?;
    }
    for tool in &held {
        let mut reason = tool["reason"].as_str().unwrap_or_default().to_owned();
        if let Some(from) = tool["renamed_from"].as_str() {
            reason.push_str(&format!(" from `{from}`"));
        }
        writeln!(
            out,
            "    {}  {reason}  sha256 {}",
            tool["tool"].as_str().unwrap_or_default(),
            tool["hash"].as_str().unwrap_or_default()
        )?;
        for flag in tool["flags"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "      flagged {} at {}: {}",
                flag["code"].as_str().unwrap_or_default(),
                flag["where"].as_str().unwrap_or_default(),
                flag["detail"].as_str().unwrap_or_default()
            )?;
        }
        for line in tool["diff"].as_str().unwrap_or_default().lines() {
            writeln!(out, "      {line}")?;
        }
    }
    let changes = server["changes"].as_array().cloned().unwrap_or_default();
    let served: Vec<&Value> = changes.iter().filter(|c| c["served"] == true).collect();
    if !served.is_empty() {
        writeln!(out, "  recent definition changes:")?;
    }
    for change in served {
        let from = change["renamed_from"]
            .as_str()
            .map(|f| format!(" from `{f}`"))
            .unwrap_or_default();
        writeln!(
            out,
            "    {}  {}{from}",
            change["tool"].as_str().unwrap_or_default(),
            change["change"].as_str().unwrap_or_default()
        )?;
    }
    Ok(())
}

/// An OAuth server's login: who, and when the access token expires
/// (never a token).
fn print_oauth(out: &mut impl Write, server: &Value) -> Result<()> {
    let Ok(login) =
        serde_json::from_value::<quiver_tool::status::OAuthLogin>(server["oauth"].clone())
    else {
        return Ok(());
    };
    if !login.logged_in {
        return Ok(writeln!(
            out,
            "  oauth: not logged in; run `{}`",
            login.login_command
        )?);
    }
    let expiry = match login.expires_at {
        Some(at) => format!(
            ", access token expires {}{}",
            crate::mcp_cli::timestamp(at),
            if login.refreshable {
                " (refreshed before then)"
            } else {
                " (no refresh token: log in again then)"
            }
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "  oauth: logged in as {}{expiry}",
        login.account.as_deref().unwrap_or("?")
    )?;
    Ok(())
}

/// The state in words, as `ServerState::describe` gives it.
fn describe(server: &Value) -> String {
    serde_json::from_value::<quiver_mcp::ServerState>(server.clone())
        .map(|state| state.describe())
        .unwrap_or_else(|_| server["state"].as_str().unwrap_or_default().to_owned())
}
