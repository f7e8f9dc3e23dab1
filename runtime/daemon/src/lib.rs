//! The daemon behind `quiver serve` and `quiver chat`: every tool source
//! started from one validated config (core tools, watched plugin
//! directories, MCP servers), the dispatch chain, the models, the agent
//! loop, and sessions persisted in the state directory.
//!
//! [`Daemon::start`] brings it all up; [`api`] serves it over HTTP with a
//! bearer token, and [`gateway`] as an MCP server (stdio or Streamable
//! HTTP) showing each client the assembled view of its grant.

pub mod api;
pub mod approvals;
pub mod attachments;
pub mod auth;
pub mod config;
pub mod console;
pub mod credentials;
pub mod gateway;
pub mod head_limits;
pub mod http;
pub mod instance;
pub mod jsonrpc;
pub mod locks;
pub mod savings;
pub mod settings;
pub mod startup;
pub mod stdio;
pub mod telemetry;
pub mod turn_stream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use serde_json::{Value, json};
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;

use crate::config::Config;
use quiver_agent::{Agent, Turn, TurnError, TurnOutcome};
use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::semantic::{SemanticError, SemanticIndex};
use quiver_core_tools::{CoreToolSet, CoreToolsError};
use quiver_dispatch::{
    ActivityFeed, Approver, ChainParts, Dispatcher, Executors, Session, SessionError,
    standard_chain,
};
use quiver_mcp::{McpExecutor, McpHost, McpHostOptions};
use quiver_model::{Message, ModelError, ModelProvider};
use quiver_plugins::{
    PluginError, PluginExecutor, PluginHost, PluginHostOptions, PluginWatcher, ReloadOutcome,
};
use quiver_store::{
    EventRecord, Notice, SessionKind, SessionRecord, Store, StoreError, StoredMessage,
};

use crate::approvals::{Approvals, StoredApprover};
use crate::instance::Instance;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::{Scope, ScopeError};

/// What every MCP gateway client's session id starts with
/// (`gateway-NAME`); sessions made through the API may not.
pub const GATEWAY_SESSION_PREFIX: &str = "gateway-";

/// The database file in the state directory (the SQLite store).
pub const DATABASE_FILE: &str = quiver_store::DATABASE_FILE;

/// Why the daemon could not start or a request could not be served.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The state directory could not be made or used.
    #[error("state directory {path}: {detail}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The API token file is unusable.
    #[error("token file {path}: {detail}")]
    Token {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another running instance of the shared store has this instance's id.
    #[error(
        "instance id `{id}` is in use by process {pid} on {host}{listening}, which renewed its lease within store.lease_s; give each instance its own serve.instance_id (or its own state directory), or, if that process was killed, start again once its lease has run out"
    )]
    InstanceIdInUse {
        /// The id.
        id: String,
        /// The other process's host.
        host: String,
        /// The other process's id.
        pid: u32,
        /// `, listening on ADDR` when it serves HTTP.
        listening: String,
    },
    /// The core tools could not start.
    #[error(transparent)]
    CoreTools(#[from] CoreToolsError),
    /// The plugin host or watcher could not start.
    #[error(transparent)]
    Plugins(#[from] PluginError),
    /// A configured model could not be set up, or failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The embedding model of `tools.tool_search.embeddings` could not be
    /// loaded.
    #[error(transparent)]
    Semantic(#[from] SemanticError),
    /// A glob of the config could not be compiled.
    #[error("invalid glob in the config: {0}")]
    Glob(#[from] globset::Error),
    /// A grant is not a valid glob.
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// A subagent asked for more than its parent has.
    #[error(transparent)]
    Subagent(#[from] SessionError),
    /// No session has this id.
    #[error("no session `{0}`")]
    UnknownSession(String),
    /// A resource or prompt attached to a message could not be read.
    #[error(transparent)]
    Attachment(#[from] attachments::AttachmentError),
    /// No model has this name.
    #[error("no model `{name}`; configured: {allowed}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The configured names.
        allowed: String,
    },
    /// The session's model is no longer configured (a reload removed it).
    #[error(
        "session `{session}` uses model `{model}`, which is no longer configured; switch it with PATCH /v1/sessions/{session} {{\"model\": NAME}} (configured: {allowed})"
    )]
    SessionModelGone {
        /// The session.
        session: String,
        /// Its model.
        model: String,
        /// The configured names.
        allowed: String,
    },
    /// The session has no model to talk to.
    #[error("session `{0}` has no model: configure one under `models` (and `default_model`)")]
    NoModel(String),
    /// A turn is already running in the session.
    #[error(
        "a turn is already running in session `{0}` (in this process or another on the same state directory); wait for it to end"
    )]
    TurnBusy(String),
    /// A session id of the MCP gateway's (`gateway-NAME`) is held by a
    /// session of another kind.
    #[error(
        "session `{id}` is not an MCP gateway session, so gateway client `{client}` cannot use it; rename the client"
    )]
    GatewaySessionTaken {
        /// The session id.
        id: String,
        /// The gateway client.
        client: String,
    },
    /// A gateway session cannot run turns.
    #[error("session `{0}` is an MCP gateway session, not a chat")]
    NotAChat(String),
    /// A grant names no known toolset and matches no tool.
    #[error(
        "grant `{grant}` matches no toolset and no tool; known toolsets: {known} (a grant is a toolset or a glob over toolsets and tool names)"
    )]
    UnknownGrant {
        /// The grant as given.
        grant: String,
        /// The toolsets there are, comma-joined.
        known: String,
    },
    /// A request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// A reloaded config was not applied; the one in force keeps serving.
    #[error("config {file} not applied (the running config keeps serving): {}", errors.join("; "))]
    ConfigRefused {
        /// The file read.
        file: String,
        /// Every problem found.
        errors: Vec<String>,
    },
    /// Tool definitions could not be accepted.
    #[error(transparent)]
    Accept(#[from] quiver_mcp::AcceptError),
    /// The turn failed.
    #[error(transparent)]
    Turn(#[from] TurnError),
    /// A spawned turn task ended abnormally.
    #[error("the turn of session `{session}` ended abnormally: {detail}")]
    TurnAborted {
        /// The session.
        session: String,
        /// The join error.
        detail: String,
    },
}

impl DaemonError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            DaemonError::StateDir { .. } => "state_dir",
            DaemonError::Token { .. } => "token_file",
            DaemonError::Store(e) => e.code(),
            DaemonError::InstanceIdInUse { .. } => "instance_id_in_use",
            DaemonError::CoreTools(_) => "core_tools",
            DaemonError::Plugins(_) => "plugins",
            DaemonError::Model(e) => e.code(),
            DaemonError::Semantic(_) => "embedding_model",
            DaemonError::Glob(_) => "invalid_glob",
            DaemonError::Scope(_) => "invalid_grant",
            DaemonError::Subagent(_) => "beyond_parent_grant",
            DaemonError::UnknownSession(_) => "unknown_session",
            DaemonError::Attachment(e) => e.code(),
            DaemonError::UnknownModel { .. } => "unknown_model",
            DaemonError::NoModel(_) => "no_model",
            DaemonError::SessionModelGone { .. } => "session_model_gone",
            DaemonError::TurnBusy(_) => "turn_in_progress",
            DaemonError::NotAChat(_) => "not_a_chat_session",
            DaemonError::GatewaySessionTaken { .. } => "session_id_taken",
            DaemonError::BadRequest(_) => "bad_request",
            DaemonError::UnknownGrant { .. } => "unknown_grant",
            DaemonError::ConfigRefused { .. } => "config_refused",
            DaemonError::Accept(e) => e.code(),
            DaemonError::Turn(e) => e.code(),
            DaemonError::TurnAborted { .. } => "turn_aborted",
        }
    }
}

/// How to start a daemon, beyond its config.
#[derive(Clone, Default)]
pub struct DaemonOptions {
    /// Relax the plugin trust checks (local development).
    pub dev: bool,
    /// Who approves calls; `None`: the API queue ([`Daemon::approvals`]).
    pub approver: Option<Arc<dyn Approver>>,
    /// Watch the plugin directories for changes (on for `serve` and `chat`).
    pub watch_plugins: bool,
    /// The config file it was started with, if any: kept from the core
    /// tools with the state directory, and read again by a reload.
    pub config_file: Option<PathBuf>,
    /// What the command line sets over the file (applied again on reload).
    pub overrides: ConfigOverrides,
    /// This is the state directory's daemon (`quiver serve` over HTTP, which
    /// holds its lock): it is the instance whose id the state directory
    /// keeps. Other processes on the directory (`quiver chat` without a
    /// daemon, `serve --stdio`, `status`) are instances of their own,
    /// `ID.PID`.
    pub primary: bool,
}

/// Settings given on the command line, over the config file's.
#[derive(Debug, Clone, Default)]
pub struct ConfigOverrides {
    /// `--listen`: `serve.listen`.
    pub listen: Option<std::net::SocketAddr>,
    /// `--state-dir`: `serve.state_dir`.
    pub state_dir: Option<PathBuf>,
}

impl ConfigOverrides {
    /// Sets what was given in `config`.
    pub fn apply(&self, config: &mut Config) {
        if let Some(listen) = self.listen {
            config.serve.listen = listen;
        }
        if let Some(dir) = &self.state_dir {
            config.serve.state_dir = Some(dir.clone());
        }
    }
}

/// The smallest context window a session may have, in tokens.
pub const MIN_CONTEXT_TOKENS: u64 = 1000;
/// The largest context window a session may have, in tokens.
pub const MAX_CONTEXT_TOKENS: u64 = 10_000_000;

/// How long a loaded session may stay unused before it leaves memory
/// (it is loaded again from the store on use).
pub const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(600);

/// How often idle sessions are looked for.
pub const SESSION_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

/// A session the daemon has loaded.
#[derive(Debug)]
pub struct LiveSession {
    /// As stored.
    pub record: SessionRecord,
    /// Its scope, approvals and event stream.
    pub session: Arc<Session>,
    turn: Arc<AsyncMutex<()>>,
    last_used: std::sync::Mutex<Instant>,
}

impl LiveSession {
    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn idle_for(&self) -> std::time::Duration {
        self.last_used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
    }
}

/// What a new session asks for.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// Its id (1 to 64 of `[A-Za-z0-9_-]`); generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Toolsets or tool globs granted (`core`, `plugin-NAME`, `mcp-SERVER`,
    /// exposed tool names); absent: the parent's grant for a subagent,
    /// else everything.
    #[serde(default, alias = "toolsets")]
    pub grants: Option<Vec<String>>,
    /// The model (a name under `models`); absent: `default_model`.
    #[serde(default)]
    pub model: Option<String>,
    /// Its context window; absent: the model's.
    #[serde(default)]
    pub context_tokens: Option<u64>,
    /// The parent session, for a subagent (granted a subset of the parent's grant).
    #[serde(default)]
    pub parent: Option<String>,
}

/// What a `PATCH` of a session changes; absent fields stay.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionChange {
    /// Another model (a name under `models`); its context window comes
    /// with it unless `context_tokens` is given.
    #[serde(default)]
    pub model: Option<String>,
    /// Another grant (a subagent's stays within its parent's).
    #[serde(default, alias = "toolsets")]
    pub grants: Option<Vec<String>>,
    /// Another context window.
    #[serde(default)]
    pub context_tokens: Option<u64>,
}

/// The running daemon.
pub struct Daemon {
    state_dir: PathBuf,
    store: Arc<dyn Store>,
    instance: Instance,
    /// Where it listens, as the store records it.
    listen: instance::ListenAddress,
    registry: Arc<ToolRegistry>,
    plugins: Arc<PluginHost>,
    mcp: Arc<McpHost>,
    approvals: Arc<Approvals>,
    /// Who approves calls, kept to build the chain of each config.
    approver: Arc<dyn Approver>,
    feed: Arc<ActivityFeed>,
    /// What the config in force built; replaced whole by a reload.
    applied: std::sync::RwLock<Arc<Applied>>,
    options: DaemonOptions,
    /// One reload at a time.
    reloading: AsyncMutex<()>,
    reloads: std::sync::Mutex<ReloadHistory>,
    sessions: DashMap<String, Arc<LiveSession>>,
    started: Instant,
    watcher: std::sync::Mutex<Option<PluginWatcher>>,
    persister: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// The tasks that follow the store (relay, notices, lease).
    followers: std::sync::Mutex<Vec<JoinHandle<()>>>,
    records: tokio::sync::broadcast::Sender<Arc<EventRecord>>,
    turn_items: turn_stream::TurnItems,
    /// Savings and activity totals over the daemon's life.
    savings: Arc<savings::Series>,
}

/// What one config builds, swapped whole on a reload: a request or turn
/// holds one `Arc` of it and sees one config throughout.
struct Applied {
    config: Arc<Config>,
    assembler: Arc<Assembler>,
    dispatcher: Dispatcher,
    models: BTreeMap<String, Arc<dyn ModelProvider>>,
    agent: Agent,
    core_workspace: PathBuf,
}

impl Applied {
    fn model(&self, name: &str) -> Result<&Arc<dyn ModelProvider>, DaemonError> {
        self.models
            .get(name)
            .ok_or_else(|| DaemonError::UnknownModel {
                name: name.to_owned(),
                allowed: self.model_names(),
            })
    }

    /// The configured model names, comma-joined (`none` when there is none).
    fn model_names(&self) -> String {
        if self.models.is_empty() {
            "none".to_owned()
        } else {
            self.models.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}

/// The tool sources of a config, built and checked, waiting to be put in
/// force by [`Daemon::apply_sources`].
struct Sources {
    core: CoreToolSet,
    plugin_options: PluginHostOptions,
    plugin_dirs: Vec<PathBuf>,
    /// `Some`: the watcher to install (`Some(None)`: none, no directory
    /// left); `None`: the directories did not change, keep the watcher.
    watcher: Option<Option<PluginWatcher>>,
    mcp_servers: Vec<quiver_mcp::McpServerConfig>,
}

/// What putting a config's sources in force changed.
struct SourceChanges {
    plugins_removed: Vec<PathBuf>,
    plugins_failed: Vec<Value>,
    mcp: quiver_mcp::McpChanges,
}

/// The daemon's parts a config is built against.
struct Parts<'a> {
    state_dir: &'a Path,
    options: &'a DaemonOptions,
    registry: &'a Arc<ToolRegistry>,
    plugins: &'a Arc<PluginHost>,
    mcp: &'a Arc<McpHost>,
    approver: &'a Arc<dyn Approver>,
    /// Where OAuth servers keep their credentials.
    tokens: &'a quiver_mcp::tokens::Tokens,
}

/// Reloads so far.
#[derive(Debug, Clone, Default)]
struct ReloadHistory {
    applied: u64,
    refused: u64,
    last: Option<Value>,
}

/// What an applied reload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    /// The config generation now in force (1 is the config of the start).
    pub generation: u64,
    /// The file read (or `<embedded default>`).
    pub file: String,
    /// Top-level sections whose settings differ from the old config.
    pub changed: Vec<String>,
    /// MCP servers added, removed and changed.
    pub mcp_servers: quiver_mcp::McpChanges,
    /// Plugin files whose tools left (their directory is no longer listed,
    /// or `plugins.include` no longer takes them).
    pub plugins_removed: Vec<PathBuf>,
    /// Plugin files of the directories that did not load, with why.
    pub plugins_failed: Vec<Value>,
    /// Models no longer configured (sessions using them are told so on
    /// their next turn, and can be switched with `PATCH`).
    pub models_removed: Vec<String>,
    /// Sections read only at start whose change waits for a restart.
    pub restart_required: Vec<String>,
    /// Values the new config had clamped.
    pub warnings: Vec<String>,
}

/// The top-level sections whose settings differ between two configs.
fn changed_sections(old: &Config, new: &Config) -> Vec<String> {
    // Debug text compares every field, whether or not a section's type
    // implements `PartialEq`.
    let sections: [(&str, String, String); 12] = [
        (
            "tools.tool_search",
            format!("{:?}", old.tool_search),
            format!("{:?}", new.tool_search),
        ),
        (
            "plugins",
            format!("{:?}", old.plugins),
            format!("{:?}", new.plugins),
        ),
        (
            "mcp_servers",
            format!("{:?}", old.mcp_servers),
            format!("{:?}", new.mcp_servers),
        ),
        (
            "guardrails",
            format!("{:?}", old.guardrails),
            format!("{:?}", new.guardrails),
        ),
        (
            "approval",
            format!("{:?}", old.approval),
            format!("{:?}", new.approval),
        ),
        ("feed", format!("{:?}", old.feed), format!("{:?}", new.feed)),
        (
            "core_tools",
            format!("{:?}", old.core_tools),
            format!("{:?}", new.core_tools),
        ),
        (
            "models",
            format!("{:?}", old.models),
            format!("{:?}", new.models),
        ),
        (
            "serve",
            format!("{:?}", old.serve),
            format!("{:?}", new.serve),
        ),
        (
            "agent",
            format!("{:?}", old.agent),
            format!("{:?}", new.agent),
        ),
        (
            "gateway",
            format!("{:?}", old.gateway),
            format!("{:?}", new.gateway),
        ),
        (
            "store",
            format!("{:?}", old.store),
            format!("{:?}", new.store),
        ),
    ];
    sections
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, _, _)| name.to_owned())
        .collect()
}

/// How long [`Daemon::search_ready`] waits for a generation's index.
const SEARCH_READY_WAIT: Duration = Duration::from_secs(5);

/// The sessions `config` says will come, each a scope and the context
/// size it assembles at, for the background pass to prepare and arrange
/// before their first turn: every tool at each model's context size (a
/// session's default is its model's; the gateway's when no model is the
/// default), and the gateway's grant at the gateway's.
fn expected_sessions(config: &Config) -> Vec<(Scope, u64)> {
    let clamp = |context: u64| context.clamp(MIN_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS);
    let mut sessions: Vec<(Scope, u64)> = config
        .models
        .models
        .values()
        .map(|model| (Scope::all(), clamp(model.context_tokens)))
        .collect();
    if config.models.default_model.is_none() {
        sessions.push((Scope::all(), clamp(config.gateway.context_tokens)));
    }
    // Validated with the config; a grant that is not a pattern is refused
    // there, not here.
    if let Ok(scope) = Scope::new(config.gateway.grants.iter().cloned()) {
        sessions.push((scope, clamp(config.gateway.context_tokens)));
    }
    sessions
}

/// Builds everything `config` needs without putting any of it in force:
/// the core tools, the chain, the models, the agent, the assembler, the
/// plugin options and watcher. `old`: the config in force (on a reload),
/// whose plugin watcher is kept when the directories did not change;
/// `old_assembler`: the assembler in force, whose search segments the new
/// one starts from.
fn prepare(
    parts: &Parts<'_>,
    config: Config,
    old: Option<&Config>,
    old_assembler: Option<&Assembler>,
) -> Result<(Applied, Sources), DaemonError> {
    let Parts {
        state_dir,
        options,
        registry,
        plugins,
        mcp,
        approver,
        tokens,
    } = *parts;
    // The model never reads or writes the state (the token, the
    // database, plugin copies) or the config, even inside its workspace.
    let mut protected = vec![state_dir.to_path_buf()];
    protected.extend(config.plugins.state_dir.clone());
    protected.extend(options.config_file.clone());
    let mut core = CoreToolSet::protecting(&config.core_tools, &protected)?;
    let state_real = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    // Said once, not again by every reload that leaves the core tools be.
    let tell =
        old.is_none_or(|old| format!("{:?}", old.core_tools) != format!("{:?}", config.core_tools));
    if state_real.starts_with(core.workspace_root()) {
        // The file tools refuse protected paths, but a command's
        // sandbox can only allow whole trees: it would see the state.
        let run_command = quiver_core_tools::CoreToolName::RunCommand;
        if options.config_file.is_none() && config.core_tools.is_enabled(run_command) {
            // The embedded default never offers it there.
            if tell {
                tracing::warn!(
                    state_dir = %state_dir.display(),
                    workspace = %core.workspace_root().display(),
                    "the embedded default was started in a directory that holds its state directory: run_command is not offered (its sandbox could not keep the token out); start quiver in a project directory, or pass --config with core_tools.workspace set"
                );
            }
            let mut core_tools = config.core_tools.clone();
            core_tools.enabled.retain(|tool| *tool != run_command);
            core = CoreToolSet::protecting(&core_tools, &protected)?;
        } else if tell {
            tracing::warn!(
                state_dir = %state_dir.display(),
                workspace = %core.workspace_root().display(),
                "the state directory (token, sessions) lies inside the core tools' workspace, where commands can read it; set serve.state_dir or core_tools.workspace so that it does not"
            );
        }
    }
    let core_workspace = core.workspace_root().to_path_buf();
    let mut plugin_config = config.plugins.clone();
    plugin_config.state_dir = Some(plugins.options().state_dir.clone());
    let plugin_options = PluginHostOptions::from_config(&plugin_config, options.dev);
    let dirs_changed = old.is_none_or(|old| old.plugins.dirs != config.plugins.dirs);
    let watcher = if !dirs_changed {
        None
    } else if options.watch_plugins && !config.plugins.dirs.is_empty() {
        Some(Some(PluginWatcher::start(
            plugins.clone(),
            &config.plugins.dirs,
            quiver_plugins::watcher::DEFAULT_DEBOUNCE,
        )?))
    } else {
        Some(None)
    };
    let executors = Executors::new()
        .with_core(Arc::new(core.executor()))
        .with_plugins(Arc::new(PluginExecutor::new(plugins.clone())))
        .with_mcp(Arc::new(McpExecutor::new(mcp.clone())));
    let chain = standard_chain(ChainParts::from_settings(
        &config.guardrails,
        &config.approval,
        config.core_tools.approval_globs(),
        approver.clone(),
        Arc::new(executors),
    )?);
    let dispatcher = Dispatcher::new(chain)
        .with_mcp_status(mcp.clone())
        .with_coercion(config.guardrails.coerce_arguments)
        .with_max_bridge_result_chars(config.guardrails.max_result_chars);
    // A reload keeps the search segments of unchanged sources.
    // The embedding model is loaded once and kept across reloads that do
    // not change its settings (its worker and vectors with it).
    let semantic = match &config.tool_search.embeddings {
        None => None,
        Some(wanted) => match old_assembler
            .and_then(|a| a.semantic())
            .filter(|s| s.config() == wanted)
        {
            Some(same) => Some(same.clone()),
            None => Some(Arc::new(SemanticIndex::open(
                wanted,
                Some(parts.state_dir),
            )?)),
        },
    };
    let assembler = match old_assembler {
        Some(old) => Assembler::succeeding(old, config.tool_search.clone(), semantic),
        None => Assembler::with_semantic(config.tool_search.clone(), semantic),
    };
    let assembler = Arc::new(assembler.expecting(expected_sessions(&config)));
    let models = quiver_model::build_all(&config.models)?;
    let agent = Agent::new(
        registry.clone(),
        assembler.clone(),
        dispatcher.clone(),
        config.agent.clone(),
    );
    let sources = Sources {
        core,
        plugin_options,
        plugin_dirs: config.plugins.dirs.clone(),
        watcher,
        // OAuth servers keep their credentials in the state store.
        mcp_servers: config
            .mcp_servers
            .values()
            .map(|server| server.clone().with_tokens(tokens))
            .collect(),
    };
    let applied = Applied {
        config: Arc::new(config),
        assembler,
        dispatcher,
        models,
        agent,
        core_workspace,
    };
    Ok((applied, sources))
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl Daemon {
    /// Starts every tool source of `config` and opens the state directory.
    /// Returns once plugins are loaded; MCP servers connect in the
    /// background. Must be called inside a tokio runtime.
    pub async fn start(
        mut config: Config,
        options: DaemonOptions,
    ) -> Result<Arc<Daemon>, DaemonError> {
        options.overrides.apply(&mut config);
        let state_dir = config.serve.state_dir();
        make_private_dir(&state_dir)?;
        let mut instance = Instance::resolve(&state_dir, config.serve.instance_id.as_deref())
            .map_err(|detail| DaemonError::StateDir {
                path: state_dir.clone(),
                detail,
            })?;
        if !options.primary {
            instance.id = format!("{}.{}", instance.id, instance.pid);
        }
        // Before any source starts, so that their first states are counted
        // (and every series carries the instance).
        telemetry::set_instance(&instance.id);
        telemetry::handle();
        let store = quiver_store::open(&config.store, &state_dir).await?;
        let listen =
            instance::ListenAddress::new(options.primary.then(|| config.serve.listen.to_string()));
        let abandoned =
            instance::register(&*store, &instance, listen.get(), config.store.lease).await?;
        if !abandoned.is_empty() {
            tracing::warn!(instance = %instance.id, ?abandoned, "approvals left waiting by this instance's last run are abandoned");
        }
        let registry = Arc::new(ToolRegistry::new());
        let plugin_state_dir = config
            .plugins
            .state_dir
            .clone()
            .unwrap_or_else(|| state_dir.join("plugins"));
        let mut plugin_config = config.plugins.clone();
        plugin_config.state_dir = Some(plugin_state_dir);
        let plugins = Arc::new(PluginHost::new(
            registry.clone(),
            PluginHostOptions::from_config(&plugin_config, options.dev),
        )?);
        // Started empty: its servers come with the rest of the config's
        // sources, the same way at start as on a reload.
        let mcp = Arc::new(McpHost::start_with_pins(
            registry.clone(),
            Vec::new(),
            McpHostOptions::default(),
            store.pin_store(),
        ));
        let approvals = Approvals::new(store.clone(), &instance.id);
        let approver = options
            .approver
            .clone()
            .unwrap_or_else(|| Arc::new(StoredApprover(approvals.clone())));
        let tokens = credentials::tokens_of(&store);
        let parts = Parts {
            state_dir: &state_dir,
            options: &options,
            registry: &registry,
            plugins: &plugins,
            mcp: &mcp,
            approver: &approver,
            tokens: &tokens,
        };
        let (applied, sources) = prepare(&parts, config, None, None)?;
        // Search segments are built when the registry publishes, off the
        // request path (a model's tool_search never waits for an index).
        applied.assembler.index_in_background(&registry);
        metrics::gauge!("quiver_config_generation").set(1.0);
        let feed_config = applied.config.feed.clone();
        let store_config = applied.config.store.clone();
        let feed = Arc::new(ActivityFeed::new(
            feed_config.redact.clone(),
            feed_config.capacity,
        ));
        let records = tokio::sync::broadcast::channel(feed_config.capacity.max(16)).0;
        let config_capacity = feed_config.capacity;
        // Subscribed before the persister writes anything, so that the
        // relay misses nothing.
        let notices = store.notices();
        let persister = tokio::spawn(persist_events(
            feed.clone(),
            store.clone(),
            records.clone(),
            approvals.clone(),
            instance.id.clone(),
        ));
        let mut followers = vec![
            tokio::spawn(relay_events(store.clone(), notices, records.clone())),
            tokio::spawn(approvals.clone().watch()),
        ];
        if store.is_shared() {
            followers.push(tokio::spawn(instance::keep_lease(
                store.clone(),
                instance.clone(),
                store_config.lease,
                listen.clone(),
            )));
        }
        tokio::spawn(announce_definition_changes(
            mcp.subscribe_integrity(),
            feed.clone(),
        ));
        let savings =
            savings::Series::start(records.subscribe(), store.clone(), instance.id.clone());
        let daemon = Arc::new(Daemon {
            state_dir,
            store,
            instance,
            listen,
            registry,
            plugins,
            mcp,
            approvals,
            approver,
            feed,
            applied: std::sync::RwLock::new(Arc::new(applied)),
            options,
            reloading: AsyncMutex::new(()),
            reloads: std::sync::Mutex::new(ReloadHistory::default()),
            sessions: DashMap::new(),
            started: Instant::now(),
            watcher: std::sync::Mutex::new(None),
            persister: std::sync::Mutex::new(Some(persister)),
            followers: std::sync::Mutex::new(Vec::new()),
            savings,
            records,
            // Deltas come many to an answer: room for several answers.
            turn_items: tokio::sync::broadcast::channel((config_capacity * 4).max(256)).0,
        });
        followers.push(tokio::spawn(follow_changes(Arc::downgrade(&daemon))));
        *daemon
            .followers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = followers;
        daemon.apply_sources(sources).await;
        let weak = Arc::downgrade(&daemon);
        tokio::spawn(async move {
            let mut sweep = tokio::time::interval(SESSION_SWEEP);
            sweep.tick().await;
            loop {
                sweep.tick().await;
                let Some(daemon) = weak.upgrade() else { break };
                let dropped = daemon.evict_idle_sessions(SESSION_IDLE);
                if dropped > 0 {
                    release_free_memory();
                    tracing::debug!(dropped, "idle sessions left memory");
                }
            }
        });
        Ok(daemon)
    }

    /// Puts the tool sources of a prepared config in force: the core
    /// tools, the plugin options and directories (and their watcher), the
    /// MCP servers. Nothing here can fail as a whole: a plugin file that
    /// does not load is logged and skipped, as at start.
    async fn apply_sources(&self, sources: Sources) -> SourceChanges {
        sources.core.register(&self.registry);
        let (removed, loaded) = self
            .plugins
            .reconfigure(sources.plugin_options, &sources.plugin_dirs);
        let mut failed = Vec::new();
        for (path, outcome) in &loaded {
            if let ReloadOutcome::Failed(reason) = outcome {
                tracing::warn!(plugin = %path.display(), %reason, "plugin not loaded");
                failed.push(json!({"file": path, "reason": reason}));
            }
        }
        if let Some(watcher) = sources.watcher {
            *self
                .watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = watcher;
        }
        let mcp = self.mcp.reconfigure(sources.mcp_servers).await;
        SourceChanges {
            plugins_removed: removed,
            plugins_failed: failed,
            mcp,
        }
    }

    /// Reads the config again (the file the daemon was started with, or
    /// the embedded default), with the command line's overrides, and
    /// applies it with [`Daemon::reload_with`]. What `SIGHUP` and
    /// `POST /v1/reload` run. A file with errors is refused with all of
    /// them ([`DaemonError::ConfigRefused`]); the config in force keeps
    /// serving. Either way the outcome is reported in the startup
    /// summary's style ([`startup::report_reload`]).
    pub async fn reload(self: &Arc<Self>) -> Result<ReloadReport, DaemonError> {
        let outcome = self.read_and_reload().await;
        startup::report_reload(self, &outcome);
        outcome
    }

    async fn read_and_reload(&self) -> Result<ReloadReport, DaemonError> {
        let file = self.options.config_file.clone();
        let file_name = file.as_ref().map_or_else(
            || "<embedded default>".to_owned(),
            |f| f.display().to_string(),
        );
        let loaded = match &file {
            Some(path) => config::check_file(path),
            None => config::embedded_default().map_err(|e| vec![e]),
        };
        let refused = |errors: Vec<String>| DaemonError::ConfigRefused {
            file: file_name.clone(),
            errors,
        };
        let loaded = match loaded {
            Ok(loaded) => loaded,
            Err(errors) => {
                let error = refused(errors.iter().map(ToString::to_string).collect());
                self.record_reload(Err(&error));
                return Err(error);
            }
        };
        for warning in &loaded.warnings {
            tracing::warn!(file = %file_name, "{warning}");
        }
        let mut config = loaded.config;
        self.options.overrides.apply(&mut config);
        self.reload_with(config).await.map(|mut report| {
            report.warnings = loaded.warnings.iter().map(ToString::to_string).collect();
            report
        })
    }

    /// Applies `config` in place of the one in force: everything it needs
    /// is built and checked first (core tools' workspace, models, globs of
    /// guardrails and approval, the plugin watcher), so a config that
    /// cannot serve is refused whole and the old one keeps serving; then
    /// the core tools, plugin directories and MCP servers (added, removed,
    /// changed; unchanged servers keep their connection) are applied, and
    /// the chain, models, agent settings and tool search settings are
    /// swapped at once. The next assembly and the next turn use it; a turn
    /// already running ends with the settings it started with. Keys read
    /// only at start (`serve`, `feed`, `plugins.state_dir`) are named in
    /// [`ReloadReport::restart_required`] and keep their old values.
    pub async fn reload_with(&self, mut config: Config) -> Result<ReloadReport, DaemonError> {
        let _serial = self.reloading.lock().await;
        let old = self.config();
        let mut restart_required = Vec::new();
        if config.serve != old.serve {
            restart_required.push("serve".to_owned());
            config.serve = old.serve.clone();
        }
        if config.store != old.store {
            restart_required.push("store".to_owned());
            config.store = old.store.clone();
        }
        if config.feed != old.feed {
            restart_required.push("feed".to_owned());
            config.feed = old.feed.clone();
        }
        if config.plugins.state_dir != old.plugins.state_dir {
            restart_required.push("plugins.state_dir".to_owned());
            config.plugins.state_dir = old.plugins.state_dir.clone();
        }
        let tokens = credentials::tokens_of(&self.store);
        let parts = Parts {
            state_dir: &self.state_dir,
            options: &self.options,
            registry: &self.registry,
            plugins: &self.plugins,
            mcp: &self.mcp,
            approver: &self.approver,
            tokens: &tokens,
        };
        let old_assembler = self.applied().assembler.clone();
        let (applied, sources) = match prepare(&parts, config, Some(&old), Some(&old_assembler)) {
            Ok(prepared) => prepared,
            Err(error) => {
                let error = DaemonError::ConfigRefused {
                    file: self.config_file_name(),
                    errors: vec![error.to_string()],
                };
                self.record_reload(Err(&error));
                return Err(error);
            }
        };
        let new = applied.config.clone();
        let sections = changed_sections(&old, &new);
        let old_models: Vec<String> = old.models.models.keys().cloned().collect();
        let changes = self.apply_sources(sources).await;
        applied.assembler.index_in_background(&self.registry);
        *self
            .applied
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(applied);
        let generation = self.record_reload(Ok(()));
        let models_removed: Vec<String> = old_models
            .into_iter()
            .filter(|m| !new.models.models.contains_key(m))
            .collect();
        let report = ReloadReport {
            generation,
            file: self.config_file_name(),
            changed: sections,
            mcp_servers: changes.mcp,
            plugins_removed: changes.plugins_removed,
            plugins_failed: changes.plugins_failed,
            models_removed,
            restart_required,
            warnings: Vec::new(),
        };
        tracing::info!(
            generation,
            changed = ?report.changed,
            mcp = ?report.mcp_servers,
            restart_required = ?report.restart_required,
            "config reloaded"
        );
        Ok(report)
    }

    fn config_file_name(&self) -> String {
        self.options.config_file.as_ref().map_or_else(
            || "<embedded default>".to_owned(),
            |f| f.display().to_string(),
        )
    }

    /// Notes a reload's outcome for `status`; returns the config
    /// generation in force (1 at start, one more per applied reload).
    fn record_reload(&self, outcome: Result<(), &DaemonError>) -> u64 {
        let mut history = self
            .reloads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let label = if outcome.is_ok() {
            "applied"
        } else {
            "refused"
        };
        metrics::counter!("quiver_config_reloads_total", "outcome" => label).increment(1);
        match outcome {
            Ok(()) => {
                history.applied += 1;
                history.last = Some(json!({"ok": true, "time_ms": quiver_store::now_ms()}));
            }
            Err(error) => {
                history.refused += 1;
                let errors = match error {
                    DaemonError::ConfigRefused { errors, .. } => errors.clone(),
                    other => vec![other.to_string()],
                };
                history.last = Some(json!({
                    "ok": false,
                    "time_ms": quiver_store::now_ms(),
                    "errors": errors,
                }));
            }
        }
        let generation = history.applied + 1;
        metrics::gauge!("quiver_config_generation").set(generation as f64);
        generation
    }

    /// The validated config in force (replaced whole by a reload).
    pub fn config(&self) -> Arc<Config> {
        self.applied().config.clone()
    }

    /// What the config in force built (cheap to clone: all `Arc`s).
    /// Resolves once searches see registry generation `generation` (its
    /// search segments are built in the background when it is published),
    /// or after [`SEARCH_READY_WAIT`] at most, when searches go on with the
    /// previous generation's index a little longer.
    pub async fn search_ready(&self, generation: u64) {
        let assembler = self.applied().assembler.clone();
        let _ = tokio::time::timeout(SEARCH_READY_WAIT, assembler.index_ready(generation)).await;
    }

    /// Waits up to `wait` for the MCP servers still on their first
    /// connection attempt, then for searches to see what they registered
    /// (see [`Daemon::search_ready`]); returns the servers' states. A
    /// one-shot command (`quiver call`, `quiver tools`) runs this before its
    /// one assembly: without it, `tool_search` would answer from the index
    /// of the generation before those servers' tools arrived.
    pub async fn settle(&self, wait: Duration) -> Vec<quiver_tool::status::ServerStatus> {
        let servers = self.mcp.settle(wait).await;
        let generation = self.registry().snapshot().generation();
        self.search_ready(generation).await;
        servers
    }

    fn applied(&self) -> Arc<Applied> {
        self.applied
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The state store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Who this process is among the store's instances.
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Records where this instance listens once its socket is bound (the
    /// config may say port 0). Called before anything is served, so
    /// registering again abandons nothing of this run.
    pub async fn listening_on(&self, address: String) -> Result<(), DaemonError> {
        self.listen.set(address);
        self.store
            .register_instance(&self.instance.record(self.listen.get()))
            .await?;
        Ok(())
    }

    /// The live tool registry.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// The MCP servers.
    pub fn mcp(&self) -> &Arc<McpHost> {
        &self.mcp
    }

    /// The plugins.
    pub fn plugins(&self) -> &Arc<PluginHost> {
        &self.plugins
    }

    /// The approvals in the store, and this instance's waiting calls
    /// (when no other approver was given).
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Savings and activity totals over the daemon's life (see [`savings`]).
    pub fn savings(&self) -> &savings::Series {
        &self.savings
    }

    /// The process-wide activity feed.
    pub fn feed(&self) -> &Arc<ActivityFeed> {
        &self.feed
    }

    /// Activity events as they are stored (with their log ids), for the
    /// API's event streams.
    pub fn subscribe_records(&self) -> tokio::sync::broadcast::Receiver<Arc<EventRecord>> {
        self.records.subscribe()
    }

    /// What running turns produce as it happens (text deltas, whole
    /// answers, tool activity), every session's, in order; see
    /// [`turn_stream`].
    pub fn subscribe_turns(&self) -> tokio::sync::broadcast::Receiver<Arc<turn_stream::TurnItem>> {
        self.turn_items.subscribe()
    }

    /// The dispatcher every call goes through (the chain of the config
    /// in force).
    pub fn dispatcher(&self) -> Dispatcher {
        self.applied().dispatcher.clone()
    }

    /// This turn's view for `session` at `context_tokens`.
    pub fn assemble(&self, session: &Session, context_tokens: u64) -> Assembly {
        session.assemble(
            &self.applied().assembler,
            &self.registry.snapshot(),
            context_tokens,
        )
    }

    /// What `scope` sees at `context_tokens`, outside any session.
    pub fn assemble_scope(&self, scope: &Scope, context_tokens: u64) -> Assembly {
        self.applied()
            .assembler
            .assemble(&self.registry.snapshot(), scope, context_tokens)
    }

    /// Creates and stores a session.
    pub async fn create_session(&self, request: NewSession) -> Result<SessionRecord, DaemonError> {
        let id = match request.id {
            Some(id) => {
                if !quiver_tool::naming::is_valid_plain_name(&id) {
                    return Err(DaemonError::BadRequest(format!(
                        "session id `{id}` is not valid: use 1 to 64 characters from [A-Za-z0-9_-]"
                    )));
                }
                id
            }
            None => format!("s-{}", auth::random_hex(8)),
        };
        if id.starts_with(GATEWAY_SESSION_PREFIX) {
            return Err(DaemonError::BadRequest(format!(
                "session id `{id}` is reserved: ids starting with `{GATEWAY_SESSION_PREFIX}` are the MCP gateway clients' sessions"
            )));
        }
        let parent = match &request.parent {
            Some(parent) => Some(self.session(parent).await?),
            None => None,
        };
        let grants = match (request.grants, &parent) {
            (Some(grants), _) => grants,
            (None, Some(parent)) => parent.record.grants.clone(),
            (None, None) => vec!["*".to_owned()],
        };
        Scope::new(grants.iter().cloned())?;
        self.check_grants(&grants)?;
        let applied = self.applied();
        let model = match request.model {
            Some(name) => {
                applied.model(&name)?;
                Some(name)
            }
            None => parent
                .as_ref()
                .and_then(|p| p.record.model.clone())
                .or_else(|| applied.config.models.default_model.clone()),
        };
        check_context_tokens(request.context_tokens)?;
        let context_tokens = request
            .context_tokens
            .or_else(|| {
                model
                    .as_ref()
                    .and_then(|m| applied.models.get(m))
                    .map(|m| m.context_tokens())
            })
            .unwrap_or(applied.config.gateway.context_tokens)
            .clamp(MIN_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS);
        let record = SessionRecord {
            id,
            kind: SessionKind::Chat,
            parent: request.parent,
            grants,
            model,
            context_tokens,
            created_ms: quiver_store::now_ms(),
            messages: 0,
        };
        // Built before storing, so a subagent beyond its parent's grant
        // leaves nothing behind.
        let live = self.build_live(record.clone(), parent.as_deref(), Origin::New)?;
        self.store.create_session(&record).await?;
        self.publish(live);
        Ok(record)
    }

    /// The toolsets a grant may name now: `core`, every toolset with tools
    /// in the registry, and every configured MCP server's (connected or
    /// not), sorted.
    pub fn known_toolsets(&self) -> Vec<String> {
        let mut known: std::collections::BTreeSet<String> = self
            .registry
            .snapshot()
            .tools()
            .map(|t| t.source().toolset())
            .collect();
        known.insert("core".to_owned());
        known.extend(self.mcp.configs().iter().map(|s| format!("mcp-{}", s.name)));
        known.into_iter().collect()
    }

    /// Refuses a grant that can match nothing: each must match a known
    /// toolset or a tool of the registry, or be a tool glob of an MCP
    /// server that is configured but has no tools yet (still connecting).
    pub fn check_grants(&self, grants: &[String]) -> Result<(), DaemonError> {
        let known = self.known_toolsets();
        let snapshot = self.registry.snapshot();
        let waiting: Vec<String> = self
            .mcp
            .configs()
            .iter()
            .map(|s| format!("mcp_{}_", quiver_tool::naming::sanitize(&s.name)))
            .collect();
        for grant in grants {
            let scope = Scope::new([grant.clone()])?;
            let matches = grant == "*"
                || known.iter().any(|toolset| scope.grants_text(toolset))
                || snapshot.tools().any(|tool| scope.allows(tool))
                || waiting
                    .iter()
                    .any(|prefix| grant.starts_with(prefix.as_str()));
            if !matches {
                return Err(DaemonError::UnknownGrant {
                    grant: grant.clone(),
                    known: known.join(", "),
                });
            }
        }
        Ok(())
    }

    /// Deletes session `id` with its messages, and its subagents (theirs
    /// first); returns the ids deleted. Refused while a turn runs in any
    /// of them ([`DaemonError::TurnBusy`]). Their activity log entries stay.
    pub async fn delete_session(&self, id: &str) -> Result<Vec<String>, DaemonError> {
        if self.store.session(id).await?.is_none() {
            return Err(DaemonError::UnknownSession(id.to_owned()));
        }
        // Children before parents, so no stored subagent is left without
        // its parent.
        let mut order = vec![id.to_owned()];
        let mut next = 0;
        while next < order.len() {
            let children = self.store.subagents(&order[next]).await?;
            order.extend(children);
            next += 1;
        }
        order.reverse();
        // Every turn lock first: nothing is deleted while any runs.
        let mut held = Vec::new();
        let mut claims = Vec::new();
        for session in &order {
            if let Some(live) = self.sessions.get(session).map(|l| l.clone()) {
                held.push(
                    live.turn
                        .clone()
                        .try_lock_owned()
                        .map_err(|_| DaemonError::TurnBusy(session.clone()))?,
                );
            }
            // A turn of it may run in another process or instance.
            let claim = self
                .store
                .claim_turn(session, &self.instance.id)
                .await?
                .ok_or_else(|| DaemonError::TurnBusy(session.clone()))?;
            claims.push(claim);
        }
        for session in &order {
            self.store.delete_session(session).await?;
            self.sessions.remove(session);
        }
        for claim in claims {
            claim.release().await;
        }
        tracing::info!(session = id, deleted = ?order, "session deleted");
        Ok(order)
    }

    /// Changes session `id`'s model, grant or context window (see
    /// [`SessionChange`]); returns the record as stored. The model must be
    /// configured and the grant known ([`Daemon::check_grants`]) and, for
    /// a subagent, within its parent's. Refused while a turn runs.
    /// Approvals given "for this session" end with a grant change.
    pub async fn update_session(
        &self,
        id: &str,
        change: SessionChange,
    ) -> Result<SessionRecord, DaemonError> {
        let live = self.session(id).await?;
        if live.record.kind != SessionKind::Chat {
            return Err(DaemonError::NotAChat(id.to_owned()));
        }
        let _turn = live
            .turn
            .clone()
            .try_lock_owned()
            .map_err(|_| DaemonError::TurnBusy(id.to_owned()))?;
        check_context_tokens(change.context_tokens)?;
        let applied = self.applied();
        let mut record = live.record.clone();
        if let Some(model) = &change.model {
            let provider = applied.model(model)?;
            record.model = Some(model.clone());
            record.context_tokens = provider
                .context_tokens()
                .clamp(MIN_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS);
        }
        if let Some(tokens) = change.context_tokens {
            record.context_tokens = tokens;
        }
        let mut rebuilt = None;
        if let Some(grants) = change.grants {
            Scope::new(grants.iter().cloned())?;
            self.check_grants(&grants)?;
            record.grants = grants;
            let parent = match &record.parent {
                Some(parent) => Some(self.session(parent).await?),
                None => None,
            };
            // Checked against the parent's grant as a new subagent is.
            rebuilt = Some(self.build_live(record.clone(), parent.as_deref(), Origin::New)?);
            // Loaded subagents hold this session's old scope as their
            // bound: they are loaded again, under the new one, on use.
            for child in self.store.subagents(id).await? {
                if let Some((_, loaded)) = self.sessions.remove(&child)
                    && loaded.turn.try_lock().is_err()
                {
                    self.sessions.insert(child.clone(), loaded);
                    return Err(DaemonError::TurnBusy(child));
                }
            }
            self.store.set_session_grants(id, &record.grants).await?;
        }
        self.store
            .set_session_model(id, record.model.as_deref(), record.context_tokens)
            .await?;
        let session = match rebuilt {
            Some(rebuilt) => rebuilt.session.clone(),
            None => live.session.clone(),
        };
        // The same turn lock, so that no turn can start on a copy while
        // this one is held.
        self.sessions.insert(
            id.to_owned(),
            Arc::new(LiveSession {
                record: record.clone(),
                session,
                turn: live.turn.clone(),
                last_used: std::sync::Mutex::new(Instant::now()),
            }),
        );
        let mut stored = self
            .store
            .session(id)
            .await?
            .ok_or_else(|| DaemonError::UnknownSession(id.to_owned()))?;
        stored.messages = stored.messages.max(record.messages);
        Ok(stored)
    }

    /// A session, loaded from the store when this process has not seen it yet.
    pub async fn session(&self, id: &str) -> Result<Arc<LiveSession>, DaemonError> {
        if let Some(live) = self.sessions.get(id) {
            live.touch();
            return Ok(live.clone());
        }
        let record = self
            .store
            .session(id)
            .await?
            .ok_or_else(|| DaemonError::UnknownSession(id.to_owned()))?;
        let parent = match &record.parent {
            Some(parent) => Some(Box::pin(self.session(parent)).await?),
            None => None,
        };
        // Checked against its parent's grant when it was created; the
        // registry may lack tools now (an MCP server still connecting).
        let live = self.build_live(record, parent.as_deref(), Origin::Stored)?;
        Ok(self.sessions.entry(id.to_owned()).or_insert(live).clone())
    }

    /// Makes `live` the loaded copy of its session, unless a request
    /// loaded (and may have locked) one since its record was stored: that
    /// one is kept and returned, so a session never has two turn locks.
    fn publish(&self, live: Arc<LiveSession>) -> Arc<LiveSession> {
        self.sessions
            .entry(live.record.id.clone())
            .or_insert(live)
            .clone()
    }

    fn build_live(
        &self,
        record: SessionRecord,
        parent: Option<&LiveSession>,
        origin: Origin,
    ) -> Result<Arc<LiveSession>, DaemonError> {
        let scope = Scope::new(record.grants.iter().cloned())?;
        let session = match (parent, origin) {
            (Some(parent), Origin::New) => {
                parent
                    .session
                    .subagent(record.id.clone(), scope, &self.registry.snapshot())?
            }
            (Some(parent), Origin::Stored) => {
                parent.session.restored_subagent(record.id.clone(), scope)
            }
            (None, _) => Session::new(record.id.clone(), scope, self.feed.clone()),
        };
        Ok(Arc::new(LiveSession {
            record,
            session,
            turn: Arc::new(AsyncMutex::new(())),
            last_used: std::sync::Mutex::new(Instant::now()),
        }))
    }

    /// The session an MCP gateway client's calls run in (one per client,
    /// created on first use and kept across restarts).
    pub async fn gateway_session(
        &self,
        client: &str,
        grants: &[String],
    ) -> Result<Arc<LiveSession>, DaemonError> {
        let id = format!("{GATEWAY_SESSION_PREFIX}{client}");
        let taken = || DaemonError::GatewaySessionTaken {
            id: id.clone(),
            client: client.to_owned(),
        };
        if let Some(live) = self.sessions.get(&id) {
            if live.record.kind != SessionKind::Gateway {
                return Err(taken());
            }
            if live.record.grants == grants {
                live.touch();
                return Ok(live.clone());
            }
        }
        let record = match self.store.session(&id).await? {
            Some(record) if record.kind != SessionKind::Gateway => return Err(taken()),
            Some(record) if record.grants == grants => record,
            Some(mut record) => {
                // The client's grant changed: the session keeps its id
                // and history, with the new grant stored.
                self.store.set_session_grants(&id, grants).await?;
                record.grants = grants.to_vec();
                record
            }
            None => {
                let record = SessionRecord {
                    id: id.clone(),
                    kind: SessionKind::Gateway,
                    parent: None,
                    grants: grants.to_vec(),
                    model: None,
                    context_tokens: self.config().gateway.context_tokens,
                    created_ms: quiver_store::now_ms(),
                    messages: 0,
                };
                match self.store.create_session(&record).await {
                    Ok(()) | Err(StoreError::SessionExists(_)) => {}
                    Err(other) => return Err(other.into()),
                }
                record
            }
        };
        let live = self.build_live(record, None, Origin::Stored)?;
        // A copy another request loaded meanwhile is kept (it may be in
        // use), unless it has the client's old grant.
        Ok(match self.sessions.entry(id) {
            dashmap::Entry::Occupied(mut held) if held.get().record.grants != grants => {
                held.insert(live.clone());
                live
            }
            dashmap::Entry::Occupied(held) => held.get().clone(),
            dashmap::Entry::Vacant(slot) => slot.insert(live).clone(),
        })
    }

    /// Drops session `id` from memory when its stored record (changed by
    /// another process or instance, or deleted) is no longer the loaded
    /// one, unless a turn runs in it; it is loaded again on use.
    async fn forget_if_changed(&self, id: &str) {
        let Some(loaded) = self.sessions.get(id).map(|l| l.record.clone()) else {
            return;
        };
        let stored = match self.store.session(id).await {
            Ok(stored) => stored,
            Err(error) => {
                tracing::debug!(%error, session = id, "cannot compare a loaded session with the store");
                return;
            }
        };
        let same = stored.is_some_and(|mut stored| {
            stored.messages = loaded.messages;
            stored == loaded
        });
        if !same {
            self.sessions
                .remove_if(id, |_, live| live.turn.try_lock().is_ok());
        }
    }

    /// Drops from memory every loaded session unused for `idle` that holds
    /// nothing the store does not: no request holds it, no turn runs, no
    /// one watches its events, no tool was approved for it, and no loaded
    /// subagent names it as parent. It is loaded again from the store on
    /// its next use. Returns how many were dropped. A background task of
    /// [`Daemon::start`] runs this every [`SESSION_SWEEP`] with
    /// [`SESSION_IDLE`].
    pub fn evict_idle_sessions(&self, idle: std::time::Duration) -> usize {
        let parents: std::collections::HashSet<String> = self
            .sessions
            .iter()
            .filter_map(|live| live.record.parent.clone())
            .collect();
        let before = self.sessions.len();
        self.sessions.retain(|id, live| {
            let unused = Arc::strong_count(live) == 1
                && live.turn.try_lock().is_ok()
                && live.session.is_idle()
                && !parents.contains(id)
                && live.idle_for() >= idle;
            !unused
        });
        before.saturating_sub(self.sessions.len())
    }

    /// How many sessions are loaded in memory now.
    pub fn loaded_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Every stored session.
    pub async fn sessions(&self) -> Result<Vec<SessionRecord>, DaemonError> {
        Ok(self.store.sessions().await?)
    }

    /// A session's stored messages.
    pub async fn messages(&self, id: &str) -> Result<Vec<StoredMessage>, DaemonError> {
        self.session(id).await?;
        Ok(self.store.messages(id).await?)
    }

    /// Runs one turn of session `id` for `text`. The turn runs in a task of
    /// its own: it finishes (and is stored) even if the caller goes away.
    /// One turn at a time per session; another is [`DaemonError::TurnBusy`].
    pub async fn run_turn(
        self: &Arc<Self>,
        id: &str,
        text: String,
    ) -> Result<TurnOutcome, DaemonError> {
        self.start_turn(id, text)
            .await?
            .await
            .map_err(|e| DaemonError::TurnAborted {
                session: id.to_owned(),
                detail: e.to_string(),
            })?
    }

    /// Starts one turn of session `id` for `text` in a task of its own,
    /// after the checks that refuse it ([`Daemon::run_turn`] waits for it);
    /// what it produces goes to [`Daemon::subscribe_turns`] as it happens.
    /// Dropping the handle leaves the turn running.
    pub async fn start_turn(
        self: &Arc<Self>,
        id: &str,
        text: String,
    ) -> Result<JoinHandle<Result<TurnOutcome, DaemonError>>, DaemonError> {
        let live = self.session(id).await?;
        if live.record.kind != SessionKind::Chat {
            return Err(DaemonError::NotAChat(id.to_owned()));
        }
        let model_name = live
            .record
            .model
            .clone()
            .ok_or_else(|| DaemonError::NoModel(id.to_owned()))?;
        let applied = self.applied();
        let model = applied.models.get(&model_name).cloned().ok_or_else(|| {
            DaemonError::SessionModelGone {
                session: id.to_owned(),
                model: model_name.clone(),
                allowed: applied.model_names(),
            }
        })?;
        let agent = applied.agent.clone();
        // A message that cannot fit the session's context is refused here,
        // before any model request (an eighth stays for the answer, as the
        // agent loop reserves it).
        let message_tokens = quiver_tool::tokens::count(&text);
        let room = live.record.context_tokens - live.record.context_tokens / 8;
        if message_tokens > room {
            return Err(DaemonError::BadRequest(format!(
                "the message is about {message_tokens} tokens, more than the {room} that fit session `{id}`'s context of {} tokens; send a shorter message or use a session with a larger context_tokens",
                live.record.context_tokens
            )));
        }
        let guard = live
            .turn
            .clone()
            .try_lock_owned()
            .map_err(|_| DaemonError::TurnBusy(id.to_owned()))?;
        // Another process on this state directory (`quiver chat --session`)
        // or another instance on the store may be running a turn of it.
        let claim = self
            .store
            .claim_turn(id, &self.instance.id)
            .await?
            .ok_or_else(|| DaemonError::TurnBusy(id.to_owned()))?;
        let daemon = self.clone();
        let task = tokio::spawn(async move {
            let _guard = guard;
            let history = match daemon.store.messages(&live.record.id).await {
                Ok(stored) => stored,
                Err(error) => {
                    claim.release().await;
                    return Err(error.into());
                }
            };
            let mut history: Vec<Message> = history.into_iter().map(|m| m.message).collect();
            turn_stream::observe(&live.session, &daemon.turn_items, &daemon.instance.id);
            let mut log = turn_stream::StreamingLog {
                store: daemon.store.clone(),
                session: live.record.id.clone(),
                items: daemon.turn_items.clone(),
            };
            let outcome = agent
                .run_turn(
                    Turn {
                        session: &live.session,
                        model: model.as_ref(),
                        context_tokens: live.record.context_tokens,
                        history: &mut history,
                        log: &mut log,
                    },
                    &text,
                )
                .await;
            // Free before the answer goes out: the next turn may come to
            // another instance at once.
            claim.release().await;
            Ok::<_, DaemonError>(outcome?)
        });
        Ok(task)
    }

    /// The daemon's state, for `quiver status` and `/v1/status`.
    pub async fn status(&self) -> Result<Value, DaemonError> {
        let sessions = self.store.sessions().await?;
        let pending = self.store.pending_approvals(None).await?.len();
        let instances = self.store.instances().await?;
        let snapshot = self.registry.snapshot();
        let applied = self.applied();
        let reloads = self
            .reloads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let models: Vec<Value> = applied
            .models
            .values()
            .map(|m| serde_json::json!({"name": m.name(), "context_tokens": m.context_tokens()}))
            .collect();
        Ok(serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.started.elapsed().as_secs(),
            "state_dir": self.state_dir,
            "workspace": applied.core_workspace,
            "tools": snapshot.len(),
            "generation": snapshot.generation(),
            "plugins": self.plugins.list_json(),
            "mcp_servers": self.mcp_status(),
            "models": models,
            "default_model": applied.config.models.default_model,
            "config": {
                "file": self.config_file_name(),
                "generation": reloads.applied + 1,
                "reloads_applied": reloads.applied,
                "reloads_refused": reloads.refused,
                "last_reload": reloads.last,
            },
            "sessions": sessions,
            "pending_approvals": pending,
            "instance": self.instance.json(),
            "store": {
                "backend": self.store.backend().as_str(),
                "location": self.store.location(),
                "description": self.store.describe(),
                "shared": self.store.is_shared(),
            },
            "instances": instances,
            "embeddings": applied.assembler.semantic().map(|s| s.status()),
        }))
    }

    /// The instances using the store as the status stream shows them:
    /// id, host, pid, where it listens, whether it runs (or why it
    /// stopped) and how many approvals wait on it; `[]` when the store
    /// cannot be read.
    pub async fn instances_json(&self) -> Value {
        let (Ok(instances), Ok(pending)) = (
            self.store.instances().await,
            self.store.pending_approvals(None).await,
        ) else {
            return json!([]);
        };
        instances
            .iter()
            .map(|i| {
                json!({
                    "id": i.id,
                    "host": i.host,
                    "pid": i.pid,
                    "listen": i.listen,
                    "running": i.stopped_ms.is_none(),
                    "stop_reason": i.stop_reason,
                    "pending_approvals": pending.iter().filter(|p| p.instance == i.id).count(),
                    "this": i.id == self.instance.id,
                })
            })
            .collect()
    }

    /// Every MCP server's state, each with its trust mode, its quarantined
    /// tools (reason, screening flags, diff) and its recent definition
    /// changes.
    pub fn mcp_status(&self) -> Vec<Value> {
        self.mcp
            .status()
            .into_iter()
            .map(|server| {
                let mut entry = serde_json::to_value(&server).unwrap_or(Value::Null);
                if let (Some(map), Some(Value::Object(integrity))) =
                    (entry.as_object_mut(), self.mcp.integrity(&server.name))
                {
                    map.extend(integrity);
                }
                entry
            })
            .collect()
    }

    /// Accepts quarantined tool definitions of an MCP server (all of them
    /// when `tools` is empty); they are served at once.
    pub async fn accept_tools(&self, server: &str, tools: &[String]) -> Result<Value, DaemonError> {
        let pins = self.mcp.accept(server, tools)?;
        // Answered once the acceptance is durable, for every instance.
        self.store.flush_pins().await?;
        Ok(serde_json::json!({
            "server": server,
            "accepted": pins
                .iter()
                .map(|p| serde_json::json!({"tool": p.tool, "hash": p.hash}))
                .collect::<Vec<_>>(),
        }))
    }

    /// Whether the daemon is ready for traffic (`GET /readyz`): plugins
    /// are loaded once it started, so it waits only for the enabled MCP
    /// servers still on their first connection attempt (a server that
    /// failed it is retried in the background, and does not hold
    /// readiness). The names of those it waits for.
    pub fn waiting_for(&self) -> Vec<String> {
        self.mcp
            .status()
            .into_iter()
            .filter(|s| {
                matches!(
                    s.state,
                    quiver_tool::status::ServerState::Connecting { attempt: 1 }
                )
            })
            .map(|s| s.name)
            .collect()
    }

    /// The embedding stage of hybrid search, when configured.
    pub fn semantic(&self) -> Option<Arc<SemanticIndex>> {
        self.applied().assembler.semantic().cloned()
    }

    /// When `tools.tool_search.embeddings.readiness_waits` is set and some
    /// tools' vectors are not ready yet: how many are (`ready`, `total`).
    /// `/readyz` waits for them.
    pub fn waiting_for_embeddings(&self) -> Option<(usize, usize)> {
        let semantic = self.semantic()?;
        if !semantic.config().readiness_waits {
            return None;
        }
        let status = semantic.status();
        // Texts the model failed on never get a vector: readiness does not
        // wait for them once nothing else is queued.
        let embedding = !semantic.is_idle() || (status.ready < status.total && status.failed == 0);
        embedding.then_some((status.ready, status.total))
    }

    /// Stops the MCP servers, flushes the activity log and the accepted
    /// tool definitions, and records this instance as stopped (abandoning
    /// the approvals its calls still waited for).
    pub async fn shutdown(&self) {
        self.mcp.shutdown().await;
        let persister = self
            .persister
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(persister) = persister {
            // Events already published are in the channel; give the writer
            // a moment to drain them, then stop it.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            persister.abort();
        }
        if let Err(error) = self.store.flush_pins().await {
            tracing::warn!(%error, "accepted tool definitions not all stored at shutdown");
        }
        for follower in self
            .followers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
        {
            follower.abort();
        }
        if let Err(error) = self.store.stop_instance(&self.instance.id, "stopped").await {
            tracing::warn!(%error, "cannot record this instance as stopped");
        }
    }
}

/// Refuses a `context_tokens` outside its range.
fn check_context_tokens(asked: Option<u64>) -> Result<(), DaemonError> {
    match asked {
        Some(asked) if !(MIN_CONTEXT_TOKENS..=MAX_CONTEXT_TOKENS).contains(&asked) => {
            Err(DaemonError::BadRequest(format!(
                "`context_tokens` {asked} is outside {MIN_CONTEXT_TOKENS}..{MAX_CONTEXT_TOKENS}"
            )))
        }
        _ => Ok(()),
    }
}

/// Whether a session is being made or rebuilt from its stored record
/// (whose grant was checked when it was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    New,
    Stored,
}

/// How long the log writer keeps trying to store an event while the store
/// is unreachable before it gives that event up.
const STORE_EVENT_PATIENCE: Duration = Duration::from_secs(30);

/// Writes every event of the feed to the activity log, as recorded by
/// `instance`; [`relay_events`] passes them on once stored. The outcome of
/// a call that waited for approval says who answered it. While the store
/// is unreachable the writer waits (events queue in the feed's channel)
/// for up to [`STORE_EVENT_PATIENCE`] per event; an event that cannot be
/// stored is passed on without a log id.
async fn persist_events(
    feed: Arc<ActivityFeed>,
    store: Arc<dyn Store>,
    records: tokio::sync::broadcast::Sender<Arc<EventRecord>>,
    approvals: Arc<Approvals>,
    instance: String,
) {
    let mut events = feed.subscribe_all();
    loop {
        match events.recv().await {
            Ok(event) => {
                let mut record = EventRecord::from_event(&event, Some(&instance));
                if event.call_id != 0 && event.status.is_final() {
                    record.answered_by = approvals.answered_by(event.call_id);
                }
                let deadline = Instant::now() + STORE_EVENT_PATIENCE;
                let mut pause = Duration::from_millis(50);
                loop {
                    match store.record_event(&record).await {
                        Ok(_) => break,
                        Err(error) if error.is_unavailable() && Instant::now() < deadline => {
                            tracing::debug!(%error, "activity event waits for the store");
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_secs(2));
                        }
                        Err(error) => {
                            tracing::warn!(%error, "activity event not stored");
                            // No receiver is not an error: nobody is watching.
                            let _ = records.send(Arc::new(record));
                            break;
                        }
                    }
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                tracing::warn!(lost, "activity log fell behind; events lost");
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// Events read back from the log as the store says they were stored,
/// every instance's, in log order, passed on with their ids (so a stream
/// can replay the log and go on live without gaps or repeats): this
/// instance's own and, with a shared store, the others'.
async fn relay_events(
    store: Arc<dyn Store>,
    mut notices: tokio::sync::broadcast::Receiver<Notice>,
    records: tokio::sync::broadcast::Sender<Arc<EventRecord>>,
) {
    let mut last = match store.last_event_id().await {
        Ok(last) => last,
        Err(error) => {
            tracing::warn!(%error, "cannot read where the activity log stands; relaying from its start");
            0
        }
    };
    loop {
        let wanted = match notices.recv().await {
            Ok(Notice::Event { id }) => id > last,
            Ok(Notice::Resync) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => true,
            Ok(_) => false,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
        };
        if !wanted {
            continue;
        }
        loop {
            match store.events(None, last, RELAY_PAGE).await {
                Ok(page) => {
                    let full = page.len() >= RELAY_PAGE;
                    for record in page {
                        last = last.max(record.id);
                        let _ = records.send(Arc::new(record));
                    }
                    if !full {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read new activity events; they follow with the next");
                    break;
                }
            }
        }
    }
}

/// Events the relay reads at a time.
const RELAY_PAGE: usize = 256;

/// Follows what other processes and instances change in the store: a
/// session whose stored record is no longer the one loaded here leaves
/// memory (it is loaded again on use) unless a turn runs in it; a source
/// whose accepted definitions changed is reviewed again (another
/// instance's acceptance releases its quarantined tools here too).
async fn follow_changes(daemon: std::sync::Weak<Daemon>) {
    let Some(mut notices) = daemon.upgrade().map(|d| d.store.notices()) else {
        return;
    };
    loop {
        let notice = match notices.recv().await {
            Ok(notice) => notice,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Notice::Resync,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
        };
        let Some(daemon) = daemon.upgrade() else {
            break;
        };
        match notice {
            Notice::Session { id } => daemon.forget_if_changed(&id).await,
            Notice::Pins { source } => {
                if let Some(server) = source.strip_prefix("mcp-") {
                    daemon.mcp.review_again(server);
                }
            }
            Notice::Resync => {
                let loaded: Vec<String> = daemon.sessions.iter().map(|l| l.key().clone()).collect();
                for id in loaded {
                    daemon.forget_if_changed(&id).await;
                }
                for server in daemon.mcp.configs() {
                    daemon.mcp.review_again(&server.name);
                }
            }
            _ => {}
        }
    }
}

/// Puts every definition change the MCP host announces into the activity
/// feed (and so the activity log): the tool's natural name, `quarantined`
/// or `definition changed`, and the summary with its diff as detail.
async fn announce_definition_changes(
    mut changes: tokio::sync::broadcast::Receiver<Arc<quiver_mcp::IntegrityEvent>>,
    feed: Arc<ActivityFeed>,
) {
    loop {
        match changes.recv().await {
            Ok(event) => {
                let change = &event.change;
                let status = if change.served {
                    quiver_dispatch::Status::DefinitionChanged
                } else {
                    quiver_dispatch::Status::Quarantined
                };
                let mut detail = change.summary(&format!("mcp-{}", event.server));
                for flag in &change.flags {
                    detail.push_str(&format!("\n{} at {}: {}", flag.code, flag.at, flag.detail));
                }
                if !change.diff.is_empty() {
                    detail.push('\n');
                    detail.push_str(&change.diff);
                }
                feed.announce(quiver_dispatch::Event {
                    time: std::time::SystemTime::now(),
                    call_id: 0,
                    session: String::new(),
                    tool: event.exposed.clone(),
                    via_bridge: false,
                    arguments: Value::Null,
                    status,
                    duration: std::time::Duration::ZERO,
                    detail: Some(detail),
                    result: None,
                });
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                tracing::warn!(
                    lost,
                    "definition changes were not all put in the activity feed"
                );
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
        }
    }
}

/// Hands memory freed by dropped sessions back to the system: glibc's
/// allocator keeps freed heap pages otherwise, so a daemon's RSS would
/// only ever grow after a burst of sessions.
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes an integer and only walks the allocator's
    // own free lists, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The state directory, made private (it holds the token and every
/// session) by the one function every Quiver directory is made with.
fn make_private_dir(dir: &Path) -> Result<(), DaemonError> {
    quiver_config::paths::make_private_dir(dir).map_err(|e| DaemonError::StateDir {
        path: e.path,
        detail: e.detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon with no tool sources beyond the core tools, its state in
    /// `dir`.
    pub(crate) async fn test_daemon(dir: &Path) -> Arc<Daemon> {
        let mut config = Config::default();
        config.serve.state_dir = Some(dir.join("state"));
        config.core_tools.workspace = dir.to_path_buf();
        Daemon::start(config, DaemonOptions::default())
            .await
            .unwrap()
    }

    #[test]
    fn the_expected_sessions_are_the_models_and_the_gateways() {
        let keys = |text: &str| -> Vec<(String, u64)> {
            let config = crate::config::parse(text, "q.yaml").unwrap().config;
            expected_sessions(&config)
                .into_iter()
                .map(|(scope, context)| (scope.cache_key(), context))
                .collect()
        };
        let everything = Scope::all().cache_key();
        let gateway = Scope::new(["core", "plugin-*"]).unwrap().cache_key();
        assert_eq!(
            keys("gateway:\n  grants: [core, \"plugin-*\"]\n  context_tokens: 8000\n"),
            [(everything.clone(), 8000), (gateway.clone(), 8000)],
            "no model: sessions take the gateway's context size"
        );
        let models = "models:\n  big:\n    provider: openai\n    model: x\n    context_tokens: 200000\n  small:\n    provider: openai\n    model: y\n    context_tokens: 16000\ndefault_model: small\ngateway:\n  grants: [core, \"plugin-*\"]\n  context_tokens: 8000\n";
        assert_eq!(
            keys(models),
            [
                (everything.clone(), 200_000),
                (everything, 16_000),
                (gateway, 8000)
            ]
        );
    }

    #[tokio::test]
    async fn a_session_loaded_meanwhile_is_kept_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let daemon = test_daemon(dir.path()).await;
        daemon
            .create_session(NewSession {
                id: Some("busy".into()),
                ..NewSession::default()
            })
            .await
            .unwrap();
        let loaded = daemon.session("busy").await.unwrap();
        let _turn = loaded.turn.clone().try_lock_owned().unwrap();
        // Another copy built from the same record (as a racing create or
        // gateway request would) must not take the locked one's place.
        let record = daemon.store.session("busy").await.unwrap().unwrap();
        let other = daemon.build_live(record, None, Origin::Stored).unwrap();
        let kept = daemon.publish(other);
        assert!(Arc::ptr_eq(&kept, &loaded));
        assert!(
            daemon
                .session("busy")
                .await
                .unwrap()
                .turn
                .try_lock()
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_chat_session_with_a_gateway_id_is_not_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let daemon = test_daemon(dir.path()).await;
        // Stored before such ids were reserved.
        daemon
            .store
            .create_session(&SessionRecord {
                id: "gateway-foo".into(),
                kind: SessionKind::Chat,
                parent: None,
                grants: vec!["*".into()],
                model: None,
                context_tokens: 8000,
                created_ms: 0,
                messages: 0,
            })
            .await
            .unwrap();
        match daemon.gateway_session("foo", &["*".to_owned()]).await {
            Err(DaemonError::GatewaySessionTaken { id, client }) => {
                assert_eq!((id.as_str(), client.as_str()), ("gateway-foo", "foo"));
            }
            other => panic!("{other:?}"),
        }
        daemon.session("gateway-foo").await.unwrap();
        assert!(matches!(
            daemon.gateway_session("foo", &["*".to_owned()]).await,
            Err(DaemonError::GatewaySessionTaken { .. })
        ));
        assert!(matches!(
            daemon
                .create_session(NewSession {
                    id: Some("gateway-bar".into()),
                    ..NewSession::default()
                })
                .await,
            Err(DaemonError::BadRequest(_))
        ));
    }

    #[test]
    fn a_state_dir_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
        let message = make_private_dir(&state).unwrap_err().to_string();
        assert!(message.contains(&state.display().to_string()), "{message}");
        assert!(message.contains("755"), "{message}");
        assert!(message.contains("chmod 700"), "{message}");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
        make_private_dir(&state).unwrap();
    }

    #[tokio::test]
    async fn the_database_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A database made earlier with the usual umask.
        let db = state.join(DATABASE_FILE);
        drop(quiver_store::sqlite::SqliteStore::open(&db).unwrap());
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let daemon = test_daemon(dir.path()).await;
        daemon.create_session(NewSession::default()).await.unwrap();
        for name in [DATABASE_FILE, "quiver.db-wal", "quiver.db-shm"] {
            let mode = std::fs::metadata(state.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {:o}", mode & 0o777);
        }
    }
}
