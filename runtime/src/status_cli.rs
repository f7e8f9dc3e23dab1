//! `quiver status`: connects the configured MCP servers for a few seconds
//! and prints each one's state (ready with its tool count, still
//! connecting, failing with the reason, or disabled).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use quiver_runtime::mcp::{McpHost, McpHostOptions, ServerState};
use quiver_runtime::registry::ToolRegistry;

/// `quiver status` arguments.
#[derive(Args)]
pub struct StatusArgs {
    /// Config file (default: the embedded default config, which has no servers).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Longest wait for servers still on their first connection attempt, in seconds.
    #[arg(long, default_value_t = 5.0)]
    wait_s: f64,
    /// Print one JSON object per server.
    #[arg(long)]
    json: bool,
}

/// Runs `quiver status`; exits non-zero when an enabled server is not ready.
pub fn run(args: StatusArgs) -> Result<ExitCode> {
    let loaded = crate::load_config(args.config.as_deref())?;
    let servers: Vec<_> = loaded.config.mcp_servers.into_values().collect();
    let wait = Duration::try_from_secs_f64(args.wait_s.max(0.0)).unwrap_or(Duration::ZERO);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let statuses = runtime.block_on(async {
        let host = McpHost::start(
            Arc::new(ToolRegistry::new()),
            servers,
            McpHostOptions::default(),
        );
        let statuses = host.settle(wait).await;
        host.shutdown().await;
        statuses
    });
    let mut out = std::io::stdout().lock();
    if statuses.is_empty() && !args.json {
        writeln!(out, "no MCP servers configured")?;
    }
    for status in &statuses {
        if args.json {
            serde_json::to_writer(&mut out, status)?;
            writeln!(out)?;
        } else {
            writeln!(
                out,
                "{:<24} {:<6} {:<11} {}",
                status.name,
                status.transport,
                status.state.name(),
                status.state.describe()
            )?;
        }
    }
    let all_ok = statuses
        .iter()
        .all(|s| matches!(s.state, ServerState::Ready { .. } | ServerState::Disabled));
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
