//! `quiver serve`: runs the daemon. Over HTTP (the API under `/v1` and the
//! MCP gateway at `/mcp`, on loopback unless `--allow-non-loopback`), or
//! as an MCP server on stdin/stdout with `--stdio` (for `claude mcp add`
//! and other MCP clients). Stops cleanly on SIGINT or SIGTERM; SIGHUP
//! reloads the config (`Daemon::reload`, as `POST /v1/reload` does).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use rmcp::ServiceExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use quiver_daemon::config::{Config, ConfigOrigin};
use quiver_daemon::gateway::{GatewayHandler, GatewayIdentity};
use quiver_daemon::{ConfigOverrides, Daemon, DaemonOptions, api, auth, locks, startup};
use quiver_dispatch::approval::DenyAll;

/// The file in the state directory that tells other commands where a
/// running daemon listens.
pub(crate) const DAEMON_FILE: &str = "daemon.json";

/// What [`DAEMON_FILE`] holds: where the running daemon listens, its
/// process and its token file. Read leniently: a missing or malformed field
/// reads as empty (`pid` 0), so a reader can say which part is wrong.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct DaemonFile {
    /// `http://ADDRESS:PORT`.
    pub url: String,
    /// The daemon's process id.
    pub pid: u32,
    /// The bearer token's file.
    pub token_file: String,
}

impl DaemonFile {
    /// Its path in `state_dir`.
    pub(crate) fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(DAEMON_FILE)
    }

    /// The file of `state_dir`; `None` when there is none.
    pub(crate) fn read(state_dir: &Path) -> Option<DaemonFile> {
        let text = std::fs::read_to_string(DaemonFile::path(state_dir)).ok()?;
        Some(serde_json::from_str(&text).unwrap_or_default())
    }

    /// Writes it to `path` whole (a temporary file renamed over it).
    fn write(&self, path: &Path) -> Result<()> {
        let temporary = path.with_extension("json.tmp");
        serde_json::to_string(self)
            .map_err(std::io::Error::other)
            .and_then(|body| std::fs::write(&temporary, body))
            .and_then(|()| std::fs::rename(&temporary, path))
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// `quiver serve` arguments.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Config file (default: ./quiver.yaml, else $XDG_CONFIG_HOME/quiver/quiver.yaml
    /// or ~/.config/quiver/quiver.yaml, else the embedded default config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on, overriding `serve.listen` (port 0: any free port).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// State directory, overriding `serve.state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Allow listening on an address other than loopback.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Serve the MCP gateway on stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// With --stdio: toolsets or tool globs granted to the client (default: `gateway.grants`).
    #[arg(long = "grant")]
    grants: Vec<String>,
    /// Relax the plugin trust checks, for local development.
    #[arg(long)]
    dev: bool,
}

/// Runs `quiver serve` until a signal (HTTP) or the client leaves (stdio).
pub(crate) fn run(args: ServeArgs) -> Result<ExitCode> {
    let origin = quiver_daemon::config::discover(args.config.as_deref());
    let mut config = crate::load_config_from(&origin)?.config;
    let overrides = ConfigOverrides {
        listen: args.listen,
        state_dir: args.state_dir.clone(),
    };
    overrides.apply(&mut config);
    if !args.stdio && !config.serve.listen.ip().is_loopback() && !args.allow_non_loopback {
        bail!(
            "refusing to listen on {}: not a loopback address; pass --allow-non-loopback to accept connections from other machines",
            config.serve.listen
        );
    }
    // One daemon per state directory, decided before anything starts: a
    // refused second one must not run plugins' startup code, start MCP
    // servers, open the database or clear the first one's plugin copies.
    let _serving = lock_state_dir(&config.serve.state_dir())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(async move {
        if args.stdio {
            serve_stdio(config, origin, overrides, args.grants, args.dev).await
        } else {
            serve_http(config, origin, overrides, args.allow_non_loopback, args.dev).await
        }
    });
    // Connections a forced stop left open, or stdin's blocking reader, must
    // not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

async fn serve_stdio(
    config: Config,
    origin: ConfigOrigin,
    overrides: ConfigOverrides,
    grants: Vec<String>,
    dev: bool,
) -> Result<()> {
    let grants = if grants.is_empty() {
        config.gateway.grants.clone()
    } else {
        grants
    };
    // stdin and stdout carry the protocol: nobody can be asked.
    let daemon = Daemon::start(
        config,
        DaemonOptions {
            dev,
            approver: Some(Arc::new(DenyAll)),
            watch_plugins: true,
            // Absolute: a reload reads the same file whatever the
            // current directory is by then.
            config_file: origin
                .file()
                .map(|file| quiver_config::paths::absolute(Path::new("."), file)),
            overrides,
            primary: false,
        },
    )
    .await?;
    // stderr is free: stdout carries the protocol.
    startup::report(&daemon, &origin, &startup::Endpoints::default());
    // Reload outcomes go to stderr only, too.
    let reloads = watch_for_reloads(daemon.clone(), CancellationToken::new())?;
    let handler = GatewayHandler::fixed(
        daemon.clone(),
        GatewayIdentity {
            client: api::STDIO_CLIENT.to_owned(),
            grants,
        },
    );
    let mut transport = quiver_daemon::stdio::StdioTransport::stdio();
    let Some(pipes) = transport.rmcp() else {
        bail!("the stdio transport was taken twice");
    };
    let running = match handler.serve(pipes).await {
        Ok(running) => running,
        Err(error) => {
            // The MCP servers this process started end with it.
            daemon.shutdown().await;
            return Err(anyhow::Error::new(error).context("MCP handshake on stdio failed"));
        }
    };
    let outcome = running.waiting().await;
    reloads.abort();
    // The last answers reach stdout before the process ends.
    transport.finish(Duration::from_secs(2)).await;
    daemon.shutdown().await;
    outcome.context("MCP session on stdio failed")?;
    // stdin's blocking reader may still hold the runtime; the session is over.
    std::process::exit(0);
}

async fn serve_http(
    config: Config,
    origin: ConfigOrigin,
    overrides: ConfigOverrides,
    any_host: bool,
    dev: bool,
) -> Result<()> {
    let listen = config.serve.listen;
    let daemon = Daemon::start(
        config,
        DaemonOptions {
            dev,
            approver: None,
            watch_plugins: true,
            // Absolute: a reload reads the same file whatever the
            // current directory is by then.
            config_file: origin
                .file()
                .map(|file| quiver_config::paths::absolute(Path::new("."), file)),
            overrides,
            primary: true,
        },
    )
    .await?;
    // Whatever goes wrong from here, the MCP servers started are ended.
    let served = serve_started(&daemon, &origin, listen, any_host).await;
    daemon.shutdown().await;
    served
}

/// Makes `state_dir` (private) and takes its [`locks::SERVE_LOCK`]: a
/// second daemon would share its database and overwrite its `daemon.json`.
fn lock_state_dir(state_dir: &Path) -> Result<locks::FileLock> {
    quiver_config::paths::make_private_dir(state_dir)
        .with_context(|| format!("state directory {}", state_dir.display()))?;
    let lock_path = state_dir.join(locks::SERVE_LOCK);
    locks::try_lock_path(&lock_path)
        .with_context(|| format!("cannot lock {}", lock_path.display()))?
        .with_context(|| {
            let running = DaemonFile::read(state_dir)
                .map(|d| {
                    let url = if d.url.is_empty() { "?" } else { &d.url };
                    format!(" (process {}, {url})", d.pid)
                })
                .unwrap_or_default();
            format!(
                "another quiver serve{running} uses the state directory {}; stop it, or give this one its own --state-dir",
                state_dir.display()
            )
        })
}

/// Serves the started `daemon` on `listen` until a signal.
async fn serve_started(
    daemon: &Arc<Daemon>,
    origin: &ConfigOrigin,
    listen: SocketAddr,
    any_host: bool,
) -> Result<()> {
    let token = auth::load_or_create_token(daemon.state_dir())?;
    let shutdown = CancellationToken::new();
    // Watched before anyone can learn where the daemon listens, so a
    // SIGHUP sent as soon as it is up reloads instead of ending it.
    watch_for_reloads(daemon.clone(), shutdown.clone())?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let address = listener.local_addr()?;
    daemon.listening_on(address.to_string()).await?;
    let url = format!("http://{address}");
    let token_file = auth::token_path(daemon.state_dir());
    let daemon_file = DaemonFile::path(daemon.state_dir());
    DaemonFile {
        url: url.clone(),
        pid: std::process::id(),
        token_file: token_file.display().to_string(),
    }
    .write(&daemon_file)?;
    let console = Arc::new(quiver_daemon::console::ConsoleSessions::new(
        &daemon.config().serve,
    ));
    {
        // One write of both lines (formatted first: `write!` would write
        // piece by piece), so that a reader that takes the first line and
        // closes the pipe cannot make the second fail.
        let lines = format!(
            "quiver listening on {url} (console {url}/, API {url}/v1, MCP gateway {url}/mcp); token in {}\nconsole sign-in link, works once within {} s: {url}/#once={}\n",
            token_file.display(),
            console.link_lifetime().as_secs(),
            console.one_time_code(),
        );
        let mut out = std::io::stdout().lock();
        out.write_all(lines.as_bytes())?;
        out.flush()?;
    }
    startup::report(
        daemon,
        origin,
        &startup::Endpoints {
            url: Some(url.clone()),
            token_file: Some(token_file.clone()),
        },
    );
    let router =
        api::router_with_console(daemon.clone(), &token, any_host, shutdown.clone(), console);
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signal.cancel();
    });
    let limits = quiver_daemon::http::HttpLimits::from_settings(&daemon.config().serve);
    tokio::select! {
        () = quiver_daemon::http::serve(listener, router, limits, shutdown.clone()) => {}
        () = forced_stop(&shutdown) => {}
    }
    let _ = std::fs::remove_file(&daemon_file);
    Ok(())
}

/// How long a stop waits for open requests (a running turn, say) before
/// it ends them.
const GRACEFUL_STOP: Duration = Duration::from_secs(10);

/// Resolves when a graceful stop has gone on too long: a second signal, or
/// [`GRACEFUL_STOP`] after the first.
async fn forced_stop(shutdown: &CancellationToken) {
    shutdown.cancelled().await;
    tokio::select! {
        () = wait_for_signal() => {
            tracing::warn!("second signal: stopping without waiting for open requests");
        }
        () = tokio::time::sleep(GRACEFUL_STOP) => {
            tracing::warn!(
                seconds = GRACEFUL_STOP.as_secs(),
                "open requests did not finish in time; stopping anyway"
            );
        }
    }
}

/// Reloads the config on every SIGHUP until `stop` fires; the reload
/// says in summary lines (stderr and the log) what was applied or why it
/// was refused.
fn watch_for_reloads(
    daemon: Arc<Daemon>,
    stop: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                received = hangups.recv() => if received.is_none() { break },
            }
            // The outcome is reported as summary lines (stderr and log).
            let _ = daemon.reload().await;
        }
    }))
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
