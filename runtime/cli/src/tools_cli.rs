//! `quiver tools`: `dump` writes the live catalog (the live-sources setup
//! of `catalog assemble`) and `accept SERVER [TOOL...]` accepts the quarantined tool
//! definitions of an MCP server, exactly as `quiver status` shows them.
//! When a daemon runs on the state directory it is asked
//! (`POST /v1/mcp/servers/SERVER/accept`) and serves them at once;
//! otherwise the runtime is started here, the server listed, and the
//! definitions it offers now are pinned in the state database for the
//! next start.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::approval::DenyAll;

use crate::status_cli::{DaemonAnswer, request_daemon};

/// `quiver tools` subcommands.
#[derive(Subcommand)]
pub(crate) enum ToolsCommand {
    /// Write the deferrable tools of the live sources (plugins, MCP servers)
    /// in the shared catalog format (`{"servers": [{"name", "tools": [...]}]}`).
    Dump {
        /// Config file (default: ./quiver.yaml, else the user config directory's, else the embedded default).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// How long to wait for the MCP servers' first connection, in seconds.
        #[arg(long, default_value_t = 10.0)]
        wait_s: f64,
        /// Relax the plugin trust checks, for local development.
        #[arg(long)]
        dev: bool,
    },
    /// Accept quarantined tool definitions of an MCP server (all of them
    /// unless TOOLs are named); they are pinned and served.
    Accept(AcceptArgs),
}

/// `quiver tools accept` arguments.
#[derive(Args)]
pub(crate) struct AcceptArgs {
    /// The MCP server (its name under `mcp_servers`).
    server: String,
    /// The server's own names of the tools to accept (default: every
    /// quarantined one).
    tools: Vec<String>,
    /// Config file (default: the embedded default config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// State directory, overriding `serve.state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Without a running daemon: longest wait for the server's first
    /// connection, in seconds.
    #[arg(long, default_value_t = 10.0)]
    wait_s: f64,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    /// Relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
}

/// Runs `quiver tools ...`.
pub(crate) fn run(command: ToolsCommand) -> Result<ExitCode> {
    match command {
        ToolsCommand::Accept(args) => accept(args),
        ToolsCommand::Dump {
            config,
            output,
            wait_s,
            dev,
        } => dump(config, output, wait_s, dev),
    }
}

fn dump(
    config: Option<PathBuf>,
    output: Option<PathBuf>,
    wait_s: f64,
    dev: bool,
) -> Result<ExitCode> {
    let document = crate::live_sources(config.as_deref(), wait_s, dev, |daemon| {
        quiver_catalog::catalog_file::dump(daemon.registry())
    })?;
    let text = serde_json::to_string_pretty(&document)? + "\n";
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

fn accept(args: AcceptArgs) -> Result<ExitCode> {
    let mut config = crate::load_config(args.config.as_deref())?.config;
    if let Some(dir) = &args.state_dir {
        config.serve.state_dir = Some(dir.clone());
    }
    crate::configured_mcp_server(&config, &args.server)?;
    let state_dir = config.serve.state_dir();
    let wait = Duration::try_from_secs_f64(args.wait_s.max(0.0)).unwrap_or(Duration::ZERO);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let path = format!("/v1/mcp/servers/{}/accept", args.server);
    let body = json!({"tools": args.tools});
    let answer =
        match runtime.block_on(request_daemon(
            &state_dir,
            reqwest::Method::POST,
            &path,
            Some(body),
        )) {
            DaemonAnswer::Status(answer) => answer,
            DaemonAnswer::NoDaemon | DaemonAnswer::Stale { .. } => runtime.block_on(
                accept_locally(config, &args.server, &args.tools, wait, args.dev),
            )?,
            DaemonAnswer::NoAnswer { file, pid, error } => bail!(
                "the daemon named by {} (process {pid}) is running but did not answer: {error}",
                file.display()
            ),
        };
    if let Some(code) = answer["error"].as_str() {
        bail!(
            "{} ({code})",
            answer["message"].as_str().unwrap_or("the daemon refused")
        );
    }
    if args.json {
        println!("{answer}");
    } else {
        let accepted = answer["accepted"].as_array().cloned().unwrap_or_default();
        println!("accepted {} tools of {}", accepted.len(), args.server);
        for tool in &accepted {
            println!(
                "  {}  sha256 {}",
                tool["tool"].as_str().unwrap_or_default(),
                tool["hash"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the runtime here (no listener, no watcher), waits for the
/// server's listing and accepts what it quarantined.
async fn accept_locally(
    config: quiver_daemon::config::Config,
    server: &str,
    tools: &[String],
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
    let state = daemon.mcp().server_status(server).map(|s| s.state);
    let outcome = match state {
        Some(state) if state.is_ready() => {
            daemon.accept_tools(server, tools).await.map_err(Into::into)
        }
        Some(state) => Err(anyhow::anyhow!(
            "server `{server}` is {}: its tools cannot be listed, so nothing was accepted",
            state.describe()
        )),
        None => Err(anyhow::anyhow!("no MCP server `{server}` is configured")),
    };
    daemon.shutdown().await;
    outcome
}
