//! `quiver mcp login NAME` and `quiver mcp logout NAME`: the OAuth login
//! of a Streamable HTTP server configured with `oauth`.
//!
//! A login discovers the server's authorization server, registers a client
//! when none is configured, prints the authorization URL (PKCE S256,
//! `state`, `resource`) for the user to open, and waits for the redirect on
//! a listener of its own on 127.0.0.1 (a random port, path `/callback`).
//! It checks the redirect's `state`, exchanges the code and writes the
//! tokens to the config's state store (`STATE_DIR/oauth/NAME.json`, mode
//! 0600, with the embedded store; the shared database with PostgreSQL). A
//! daemon on the same store notices the new tokens within a second and
//! connects the server; nothing needs restarting. Nothing is opened for
//! the user: the URL is printed, so a login works over SSH too.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use quiver_mcp::McpServerConfig;
use quiver_mcp::oauth::{PendingLogin, tokens};

/// `quiver mcp` subcommands.
#[derive(Subcommand)]
pub(crate) enum McpCommand {
    /// Log in to an MCP server that uses OAuth: prints the URL to open,
    /// waits for the redirect on 127.0.0.1 and stores the tokens in the
    /// state directory.
    Login(LoginArgs),
    /// Remove the stored OAuth tokens of an MCP server.
    Logout(ServerArgs),
}

/// Which server, and where its config and state are.
#[derive(Args)]
pub(crate) struct ServerArgs {
    /// The server (its name under `mcp_servers`).
    server: String,
    /// Config file (default: ./quiver.yaml, else the user config directory's, else the embedded default).
    #[arg(long)]
    config: Option<PathBuf>,
    /// State directory, overriding `serve.state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

/// `quiver mcp login` arguments.
#[derive(Args)]
pub(crate) struct LoginArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Longest wait for the redirect, in seconds.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
}

/// Runs `quiver mcp ...`.
pub(crate) fn run(command: McpCommand) -> Result<ExitCode> {
    match command {
        McpCommand::Login(args) => login(args),
        McpCommand::Logout(args) => logout(args),
    }
}

/// The configured OAuth server `args.server`, its credentials in the
/// config's state store; refuses an unknown server, a stdio one and one
/// without `oauth`.
async fn oauth_server(args: &ServerArgs) -> Result<McpServerConfig> {
    let mut config = crate::load_config(args.config.as_deref())?.config;
    if let Some(dir) = &args.state_dir {
        config.serve.state_dir = Some(dir.clone());
    }
    let server = crate::configured_mcp_server(&config, &args.server)?;
    if server.transport.kind() != "http" {
        bail!(
            "server `{}` is a stdio server; OAuth is for `url` (Streamable HTTP) servers",
            args.server
        );
    }
    if server.oauth.is_none() {
        bail!(
            "server `{0}` does not use OAuth (set `mcp_servers.{0}.oauth: true` in the config)",
            args.server
        );
    }
    let server = server.clone();
    let state_dir = config.serve.state_dir();
    quiver_config::paths::make_private_dir(&state_dir)
        .map_err(|e| anyhow::anyhow!("state directory {}: {}", e.path.display(), e.detail))?;
    let store = quiver_store::open(&config.store, &state_dir).await?;
    Ok(server.with_tokens(&quiver_daemon::credentials::tokens_of(&store)))
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn login(args: LoginArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let server = oauth_server(&args.server).await?;
        login_flow(&server, Duration::from_secs(args.timeout_s)).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A redirect's query and where to send the page that answers it.
type Redirect = (
    HashMap<String, String>,
    tokio::sync::oneshot::Sender<String>,
);

async fn login_flow(server: &McpServerConfig, timeout: Duration) -> Result<()> {
    let name = server.name.as_str();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot listen on 127.0.0.1 for the redirect")?;
    let redirect_uri = format!("http://{}/callback", listener.local_addr()?);
    let pending = PendingLogin::start(server, &redirect_uri).await?;

    let (sender, mut redirects) = tokio::sync::mpsc::channel::<Redirect>(4);
    let app = axum::Router::new().route(
        "/callback",
        axum::routing::get(
            move |axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>| {
                let sender = sender.clone();
                async move {
                    let (reply, page) = tokio::sync::oneshot::channel();
                    if sender.send((query, reply)).await.is_err() {
                        return axum::response::Html("This login has ended.".to_owned());
                    }
                    axum::response::Html(page.await.unwrap_or_default())
                }
            },
        ),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let listening = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopped.cancelled().await })
            .await
    });

    let mut out = std::io::stdout().lock();
    writeln!(out, "Open this URL in a browser to log in to {name}:")?;
    writeln!(out)?;
    writeln!(out, "  {}", pending.authorization_url())?;
    writeln!(out)?;
    writeln!(
        out,
        "Waiting up to {} s for the redirect to {redirect_uri} ...",
        timeout.as_secs()
    )?;
    out.flush()?;
    drop(out);

    let outcome = match tokio::time::timeout(timeout, redirects.recv()).await {
        Err(_) | Ok(None) => Err(anyhow::anyhow!(
            "no redirect reached {redirect_uri} within {} s; nothing was stored (run `quiver mcp login {name}` again)",
            timeout.as_secs()
        )),
        Ok(Some((query, reply))) => {
            let outcome = pending.finish(&query).await;
            let page = match &outcome {
                Ok(_) => format!("Quiver is logged in to {name}. You can close this tab."),
                Err(error) => format!("Quiver could not log in: {}", html_text(&error.to_string())),
            };
            let _ = reply.send(page);
            outcome.map_err(anyhow::Error::from)
        }
    };
    stop.cancel();
    // The answer page is sent before the listener stops; a client that
    // keeps its connection open does not hold the command up.
    let _ = tokio::time::timeout(Duration::from_secs(2), listening).await;
    let login = outcome?;
    let file = pending.stored_in();
    let expiry = match login.expires_at {
        Some(at) => format!("; the access token expires {}", timestamp(at)),
        None => String::new(),
    };
    println!(
        "Logged in to {name} as {}{expiry}.",
        login.account.as_deref().unwrap_or("?")
    );
    println!("Tokens stored in {file}; a running daemon connects {name} within a second.");
    Ok(())
}

fn logout(args: ServerArgs) -> Result<ExitCode> {
    runtime()?.block_on(async {
        let server = oauth_server(&args).await?;
        let Some(tokens) = tokens(&server) else {
            bail!("server `{}`: no token store", server.name);
        };
        let place = tokens.0.place(&server.name);
        if tokens.0.remove(&server.name).await.map_err(anyhow::Error::msg)? {
            println!(
                "Logged out of {}: removed {place}. A running daemon's connection stops authenticating; `quiver mcp login {}` logs in again.",
                server.name, server.name
            );
        } else {
            println!("No OAuth tokens are stored for {}.", server.name);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `at` (seconds since the Unix epoch) in RFC 3339, with how far off it is.
pub(crate) fn timestamp(at: u64) -> String {
    let Ok(when) = jiff::Timestamp::from_second(i64::try_from(at).unwrap_or(i64::MAX)) else {
        return at.to_string();
    };
    let now = jiff::Timestamp::now().as_second();
    let left = when.as_second() - now;
    let relative = if left < 0 {
        format!("{} ago", span(-left))
    } else {
        format!("in {}", span(left))
    };
    format!("{when} ({relative})")
}

/// Seconds in the largest unit that fits.
fn span(seconds: i64) -> String {
    if seconds < 120 {
        format!("{seconds} s")
    } else if seconds < 7_200 {
        format!("{} min", seconds / 60)
    } else if seconds < 172_800 {
        format!("{} h", seconds / 3_600)
    } else {
        format!("{} days", seconds / 86_400)
    }
}

/// Text safe inside an HTML page.
fn html_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
