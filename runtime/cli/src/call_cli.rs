//! `quiver call`: runs one tool call exactly as the daemon would, on the
//! same runtime ([`Daemon::start`]: core tools, plugins and MCP servers
//! from the config, the standard chain with approval on the terminal),
//! prints the result the model would get, and renders the activity feed
//! with the real tool name on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::Session;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::approval::terminal::TerminalApprover;
use quiver_dispatch::{Approver, DispatchError};
use quiver_tool::scope::Scope;

/// `quiver call` arguments.
#[derive(Args)]
pub(crate) struct CallArgs {
    /// The tool to call: an exposed tool name, or a bridge tool
    /// (`tool_call`, `tool_search`, `tool_describe`).
    name: String,
    /// The call's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    arguments: String,
    /// Config file (default: ./quiver.yaml, else the user config directory's, else the embedded default).
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
pub(crate) fn run(args: CallArgs) -> Result<ExitCode> {
    let origin = quiver_daemon::config::discover(args.config.as_deref());
    let config = crate::load_config_from(&origin)?.config;
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
        // Approvals are asked on the terminal; with no terminal to ask on,
        // a call that needs approval is denied rather than left waiting.
        let approver: Arc<dyn Approver> = if std::io::stdin().is_terminal() {
            Arc::new(TerminalApprover::stdio())
        } else {
            Arc::new(DenyAll)
        };
        let daemon = Daemon::start(
            config,
            DaemonOptions {
                dev: args.dev,
                approver: Some(approver),
                watch_plugins: false,
                config_file: origin.file().map(std::path::Path::to_path_buf),
                overrides: Default::default(),
                primary: false,
            },
        )
        .await?;
        daemon.settle(wait).await;
        let session = Session::new("cli", scope, daemon.feed().clone());
        let mut events = session.subscribe();
        let assembly = daemon.assemble(&session, args.context_tokens);
        let result = daemon
            .dispatcher()
            .dispatch(&session, &assembly, &args.name, &arguments)
            .await;
        while let Ok(event) = events.try_recv() {
            eprintln!("{}", event.render());
        }
        daemon.shutdown().await;
        Ok(print(result))
    })
}

fn print(result: Result<Value, DispatchError>) -> ExitCode {
    match result {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("{}", error.to_json());
            ExitCode::FAILURE
        }
    }
}
