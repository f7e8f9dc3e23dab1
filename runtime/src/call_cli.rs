//! `quiver call`: runs one tool call through the dispatch chain exactly as
//! the daemon would (plugins and MCP servers from the config, guardrails,
//! approval on the terminal, validation, result cap), prints the result,
//! and renders the activity feed with the real tool name on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use quiver_runtime::assembly::Assembler;
use quiver_runtime::dispatch::approval::DenyAll;
use quiver_runtime::dispatch::approval::terminal::TerminalApprover;
use quiver_runtime::dispatch::{
    ActivityFeed, Approver, ChainParts, Dispatcher, Executors, McpExecutor, PluginExecutor,
    Session, standard_chain,
};
use quiver_runtime::mcp::{McpHost, McpHostOptions};
use quiver_runtime::plugins::{PluginHost, PluginHostOptions, ReloadOutcome};
use quiver_runtime::registry::ToolRegistry;
use quiver_runtime::scope::Scope;

/// `quiver call` arguments.
#[derive(Args)]
pub struct CallArgs {
    /// The tool to call: an exposed tool name, or a bridge tool
    /// (`tool_call`, `tool_search`, `tool_describe`).
    name: String,
    /// The call's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    arguments: String,
    /// Config file (default: the embedded default config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Toolsets or tool globs granted to the session (default: everything).
    #[arg(long = "grant")]
    grants: Vec<String>,
    /// Relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
    /// Longest wait for MCP servers still on their first connection, in seconds.
    #[arg(long, default_value_t = 10.0)]
    wait_s: f64,
    /// The session's context size, for the assembly the call is resolved in.
    #[arg(long, default_value_t = 200_000)]
    context_tokens: u64,
}

/// Runs `quiver call`; exits non-zero when the call fails or is refused.
pub fn run(args: CallArgs) -> Result<ExitCode> {
    let config = crate::load_config(args.config.as_deref())?.config;
    let arguments: Value = serde_json::from_str(&args.arguments)
        .with_context(|| format!("--arguments is not JSON: {}", args.arguments))?;
    let scope = if args.grants.is_empty() {
        Scope::all()
    } else {
        Scope::new(args.grants.iter().cloned())?
    };
    let wait = Duration::try_from_secs_f64(args.wait_s.max(0.0)).unwrap_or(Duration::ZERO);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let registry = Arc::new(ToolRegistry::new());
        let plugins = Arc::new(PluginHost::new(
            registry.clone(),
            PluginHostOptions::from_config(&config.plugins, args.dev),
        )?);
        for (path, outcome) in plugins.load_dirs(&config.plugins.dirs) {
            if let ReloadOutcome::Failed(reason) = outcome {
                eprintln!("warning: plugin {} not loaded: {reason}", path.display());
            }
        }
        let mcp = Arc::new(McpHost::start(
            registry.clone(),
            config.mcp_servers.clone().into_values(),
            McpHostOptions::default(),
        ));
        mcp.settle(wait).await;
        let executors = Executors::new()
            .with_plugins(Arc::new(PluginExecutor::new(plugins)))
            .with_mcp(Arc::new(McpExecutor::new(mcp.clone())));
        // Approvals are asked on the terminal; with no terminal to ask on,
        // a call that needs approval is denied rather than left waiting.
        let approver: Arc<dyn Approver> = if std::io::stdin().is_terminal() {
            Arc::new(TerminalApprover::stdio())
        } else {
            Arc::new(DenyAll)
        };
        let chain = standard_chain(ChainParts::from_config(
            &config,
            approver,
            Arc::new(executors),
        )?);
        let dispatcher = Dispatcher::new(chain);
        let feed = Arc::new(ActivityFeed::new(
            config.feed.redact.clone(),
            config.feed.capacity,
        ));
        let session = Session::new("cli", scope, feed);
        let mut events = session.subscribe();
        let assembler = Assembler::new(config.tool_search.clone());
        let assembly = session.assemble(&assembler, &registry.snapshot(), args.context_tokens);
        let result = dispatcher
            .dispatch(&session, &assembly, &args.name, &arguments)
            .await;
        while let Ok(event) = events.try_recv() {
            eprintln!("{}", event.render());
        }
        mcp.shutdown().await;
        match result {
            Ok(value) => {
                println!("{value}");
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                println!("{}", error.to_json());
                Ok(ExitCode::FAILURE)
            }
        }
    })
}
