//! The daemon behind `quiver serve` and `quiver chat`: every tool source
//! started from one validated config (core tools, watched plugin
//! directories, MCP servers), the dispatch chain, the models, the agent
//! loop, and sessions persisted in the state directory.
//!
//! [`Daemon::start`] brings it all up; [`api`] serves it over HTTP with a
//! bearer token, and [`gateway`] as an MCP server (stdio or Streamable
//! HTTP) showing each client the assembled view of its grant.

pub mod api;
pub mod auth;
pub mod config;
pub mod gateway;
pub mod head_limits;
pub mod http;
pub mod jsonrpc;
pub mod locks;
pub mod settings;
pub mod startup;
pub mod stdio;
pub mod telemetry;
pub mod turn_stream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;

use crate::config::Config;
use quiver_agent::{Agent, Turn, TurnError, TurnOutcome};
use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_core_tools::{CoreToolSet, CoreToolsError};
use quiver_dispatch::approval::queue::ApprovalQueue;
use quiver_dispatch::{
    ActivityFeed, Approver, ChainParts, Dispatcher, Executors, Session, SessionError,
    standard_chain,
};
use quiver_mcp::{McpExecutor, McpHost, McpHostOptions};
use quiver_model::{Message, ModelError, ModelProvider};
use quiver_plugins::{
    PluginError, PluginExecutor, PluginHost, PluginHostOptions, PluginWatcher, ReloadOutcome,
};
use quiver_store::{EventRecord, SessionKind, SessionRecord, Store, StoreError, StoredMessage};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::{Scope, ScopeError};

/// What every MCP gateway client's session id starts with
/// (`gateway-NAME`); sessions made through the API may not.
pub const GATEWAY_SESSION_PREFIX: &str = "gateway-";

/// The database file in the state directory.
pub const DATABASE_FILE: &str = "quiver.db";

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
    /// The core tools could not start.
    #[error(transparent)]
    CoreTools(#[from] CoreToolsError),
    /// The plugin host or watcher could not start.
    #[error(transparent)]
    Plugins(#[from] PluginError),
    /// A configured model could not be set up, or failed.
    #[error(transparent)]
    Model(#[from] ModelError),
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
    /// No model has this name.
    #[error("no model `{name}`; configured: {allowed}")]
    UnknownModel {
        /// The name asked for.
        name: String,
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
    /// A request is malformed.
    #[error("{0}")]
    BadRequest(String),
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
            DaemonError::Store(_) => "store_error",
            DaemonError::CoreTools(_) => "core_tools",
            DaemonError::Plugins(_) => "plugins",
            DaemonError::Model(e) => e.code(),
            DaemonError::Glob(_) => "invalid_glob",
            DaemonError::Scope(_) => "invalid_grant",
            DaemonError::Subagent(_) => "beyond_parent_grant",
            DaemonError::UnknownSession(_) => "unknown_session",
            DaemonError::UnknownModel { .. } => "unknown_model",
            DaemonError::NoModel(_) => "no_model",
            DaemonError::TurnBusy(_) => "turn_in_progress",
            DaemonError::NotAChat(_) => "not_a_chat_session",
            DaemonError::GatewaySessionTaken { .. } => "session_id_taken",
            DaemonError::BadRequest(_) => "bad_request",
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
    /// tools with the state directory.
    pub config_file: Option<PathBuf>,
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

/// The running daemon.
pub struct Daemon {
    config: Config,
    state_dir: PathBuf,
    store: Arc<Store>,
    registry: Arc<ToolRegistry>,
    plugins: Arc<PluginHost>,
    mcp: Arc<McpHost>,
    assembler: Arc<Assembler>,
    dispatcher: Dispatcher,
    approvals: ApprovalQueue,
    feed: Arc<ActivityFeed>,
    models: BTreeMap<String, Arc<dyn ModelProvider>>,
    agent: Agent,
    sessions: DashMap<String, Arc<LiveSession>>,
    core_workspace: PathBuf,
    started: Instant,
    _watcher: Option<PluginWatcher>,
    persister: std::sync::Mutex<Option<JoinHandle<()>>>,
    records: tokio::sync::broadcast::Sender<Arc<EventRecord>>,
    turn_items: turn_stream::TurnItems,
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
    pub async fn start(config: Config, options: DaemonOptions) -> Result<Arc<Daemon>, DaemonError> {
        // Before any source starts, so that their first states are counted.
        telemetry::handle();
        let state_dir = config.serve.state_dir();
        make_private_dir(&state_dir)?;
        let store = Arc::new(Store::open(&state_dir.join(DATABASE_FILE))?);
        let registry = Arc::new(ToolRegistry::new());

        // The model never reads or writes the state (the token, the
        // database, plugin copies) or the config, even inside its workspace.
        let mut protected = vec![state_dir.clone()];
        protected.extend(config.plugins.state_dir.clone());
        protected.extend(options.config_file.clone());
        let mut core = CoreToolSet::protecting(&config.core_tools, &protected)?;
        let state_real = std::fs::canonicalize(&state_dir).unwrap_or_else(|_| state_dir.clone());
        if state_real.starts_with(core.workspace_root()) {
            // The file tools refuse protected paths, but a command's
            // sandbox can only allow whole trees: it would see the state.
            let run_command = quiver_core_tools::CoreToolName::RunCommand;
            if options.config_file.is_none() && config.core_tools.is_enabled(run_command) {
                // The embedded default never offers it there.
                tracing::warn!(
                    state_dir = %state_dir.display(),
                    workspace = %core.workspace_root().display(),
                    "the embedded default was started in a directory that holds its state directory: run_command is not offered (its sandbox could not keep the token out); start quiver in a project directory, or pass --config with core_tools.workspace set"
                );
                let mut core_tools = config.core_tools.clone();
                core_tools.enabled.retain(|tool| *tool != run_command);
                core = CoreToolSet::protecting(&core_tools, &protected)?;
            } else {
                tracing::warn!(
                    state_dir = %state_dir.display(),
                    workspace = %core.workspace_root().display(),
                    "the state directory (token, sessions) lies inside the core tools' workspace, where commands can read it; set serve.state_dir or core_tools.workspace so that it does not"
                );
            }
        }
        core.register(&registry);
        let core_workspace = core.workspace_root().to_path_buf();

        let mut plugin_config = config.plugins.clone();
        if plugin_config.state_dir.is_none() {
            plugin_config.state_dir = Some(state_dir.join("plugins"));
        }
        let plugins = Arc::new(PluginHost::new(
            registry.clone(),
            PluginHostOptions::from_config(&plugin_config, options.dev),
        )?);
        for (path, outcome) in plugins.load_dirs(&plugin_config.dirs) {
            if let ReloadOutcome::Failed(reason) = outcome {
                tracing::warn!(plugin = %path.display(), %reason, "plugin not loaded");
            }
        }
        let watcher = if options.watch_plugins && !plugin_config.dirs.is_empty() {
            Some(PluginWatcher::start(
                plugins.clone(),
                &plugin_config.dirs,
                quiver_plugins::watcher::DEFAULT_DEBOUNCE,
            )?)
        } else {
            None
        };
        let mcp = Arc::new(McpHost::start_with_pins(
            registry.clone(),
            config.mcp_servers.clone().into_values(),
            McpHostOptions::default(),
            store.clone(),
        ));

        let approvals = ApprovalQueue::new();
        let approver = options
            .approver
            .unwrap_or_else(|| Arc::new(approvals.clone()));
        let executors = Executors::new()
            .with_core(Arc::new(core.executor()))
            .with_plugins(Arc::new(PluginExecutor::new(plugins.clone())))
            .with_mcp(Arc::new(McpExecutor::new(mcp.clone())));
        let chain = standard_chain(ChainParts::from_settings(
            &config.guardrails,
            &config.approval,
            config.core_tools.approval_globs(),
            approver,
            Arc::new(executors),
        )?);
        let dispatcher = Dispatcher::new(chain)
            .with_mcp_status(mcp.clone())
            .with_coercion(config.guardrails.coerce_arguments)
            .with_max_bridge_result_chars(config.guardrails.max_result_chars);
        let feed = Arc::new(ActivityFeed::new(
            config.feed.redact.clone(),
            config.feed.capacity,
        ));
        let assembler = Arc::new(Assembler::new(config.tool_search.clone()));
        let models = quiver_model::build_all(&config.models)?;
        let agent = Agent::new(
            registry.clone(),
            assembler.clone(),
            dispatcher.clone(),
            config.agent.clone(),
        );
        let records = tokio::sync::broadcast::channel(config.feed.capacity.max(16)).0;
        let config_capacity = config.feed.capacity;
        let persister = tokio::spawn(persist_events(feed.clone(), store.clone(), records.clone()));
        tokio::spawn(announce_definition_changes(
            mcp.subscribe_integrity(),
            feed.clone(),
        ));
        let daemon = Arc::new(Daemon {
            config,
            state_dir,
            store,
            registry,
            plugins,
            mcp,
            assembler,
            dispatcher,
            approvals,
            feed,
            models,
            agent,
            sessions: DashMap::new(),
            core_workspace,
            started: Instant::now(),
            _watcher: watcher,
            persister: std::sync::Mutex::new(Some(persister)),
            records,
            // Deltas come many to an answer: room for several answers.
            turn_items: tokio::sync::broadcast::channel((config_capacity * 4).max(256)).0,
        });
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

    /// The validated config it runs.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The database.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
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

    /// Pending approvals (when no other approver was given).
    pub fn approvals(&self) -> &ApprovalQueue {
        &self.approvals
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

    /// The dispatcher every call goes through.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// This turn's view for `session` at `context_tokens`.
    pub fn assemble(&self, session: &Session, context_tokens: u64) -> Assembly {
        session.assemble(&self.assembler, &self.registry.snapshot(), context_tokens)
    }

    /// What `scope` sees at `context_tokens`, outside any session.
    pub fn assemble_scope(&self, scope: &Scope, context_tokens: u64) -> Assembly {
        self.assembler
            .assemble(&self.registry.snapshot(), scope, context_tokens)
    }

    /// Creates and stores a session.
    pub fn create_session(&self, request: NewSession) -> Result<SessionRecord, DaemonError> {
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
            Some(parent) => Some(self.session(parent)?),
            None => None,
        };
        let grants = match (request.grants, &parent) {
            (Some(grants), _) => grants,
            (None, Some(parent)) => parent.record.grants.clone(),
            (None, None) => vec!["*".to_owned()],
        };
        Scope::new(grants.iter().cloned())?;
        let model = match request.model {
            Some(name) => {
                self.model(&name)?;
                Some(name)
            }
            None => parent
                .as_ref()
                .and_then(|p| p.record.model.clone())
                .or_else(|| self.config.models.default_model.clone()),
        };
        if let Some(asked) = request.context_tokens
            && !(MIN_CONTEXT_TOKENS..=MAX_CONTEXT_TOKENS).contains(&asked)
        {
            return Err(DaemonError::BadRequest(format!(
                "`context_tokens` {asked} is outside {MIN_CONTEXT_TOKENS}..{MAX_CONTEXT_TOKENS}"
            )));
        }
        let context_tokens = request
            .context_tokens
            .or_else(|| {
                model
                    .as_ref()
                    .and_then(|m| self.models.get(m))
                    .map(|m| m.context_tokens())
            })
            .unwrap_or(self.config.gateway.context_tokens)
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
        self.store.create_session(&record)?;
        self.publish(live);
        Ok(record)
    }

    /// A session, loaded from the store when this process has not seen it yet.
    pub fn session(&self, id: &str) -> Result<Arc<LiveSession>, DaemonError> {
        if let Some(live) = self.sessions.get(id) {
            live.touch();
            return Ok(live.clone());
        }
        let record = self
            .store
            .session(id)?
            .ok_or_else(|| DaemonError::UnknownSession(id.to_owned()))?;
        let parent = match &record.parent {
            Some(parent) => Some(self.session(parent)?),
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
    pub fn gateway_session(
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
        let record = match self.store.session(&id)? {
            Some(record) if record.kind != SessionKind::Gateway => return Err(taken()),
            Some(record) if record.grants == grants => record,
            Some(mut record) => {
                // The client's grant changed: the session keeps its id
                // and history, with the new grant stored.
                self.store.set_session_grants(&id, grants)?;
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
                    context_tokens: self.config.gateway.context_tokens,
                    created_ms: quiver_store::now_ms(),
                    messages: 0,
                };
                match self.store.create_session(&record) {
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
    pub fn sessions(&self) -> Result<Vec<SessionRecord>, DaemonError> {
        Ok(self.store.sessions()?)
    }

    /// A session's stored messages.
    pub fn messages(&self, id: &str) -> Result<Vec<StoredMessage>, DaemonError> {
        self.session(id)?;
        Ok(self.store.messages(id)?)
    }

    fn model(&self, name: &str) -> Result<&Arc<dyn ModelProvider>, DaemonError> {
        self.models
            .get(name)
            .ok_or_else(|| DaemonError::UnknownModel {
                name: name.to_owned(),
                allowed: if self.models.is_empty() {
                    "none".to_owned()
                } else {
                    self.models.keys().cloned().collect::<Vec<_>>().join(", ")
                },
            })
    }

    /// Runs one turn of session `id` for `text`. The turn runs in a task of
    /// its own: it finishes (and is stored) even if the caller goes away.
    /// One turn at a time per session; another is [`DaemonError::TurnBusy`].
    pub async fn run_turn(
        self: &Arc<Self>,
        id: &str,
        text: String,
    ) -> Result<TurnOutcome, DaemonError> {
        self.start_turn(id, text)?
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
    pub fn start_turn(
        self: &Arc<Self>,
        id: &str,
        text: String,
    ) -> Result<JoinHandle<Result<TurnOutcome, DaemonError>>, DaemonError> {
        let live = self.session(id)?;
        if live.record.kind != SessionKind::Chat {
            return Err(DaemonError::NotAChat(id.to_owned()));
        }
        let model_name = live
            .record
            .model
            .clone()
            .ok_or_else(|| DaemonError::NoModel(id.to_owned()))?;
        let model = self.model(&model_name)?.clone();
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
        // may be running a turn of the same session.
        let file_lock = locks::try_lock(&self.state_dir, id)
            .map_err(|error| DaemonError::StateDir {
                path: locks::lock_path(&self.state_dir, id),
                detail: format!("cannot take the session's turn lock: {error}"),
            })?
            .ok_or_else(|| DaemonError::TurnBusy(id.to_owned()))?;
        let daemon = self.clone();
        let task = tokio::spawn(async move {
            let _guard = guard;
            let _file_lock = file_lock;
            let mut history: Vec<Message> = daemon
                .store
                .messages(&live.record.id)?
                .into_iter()
                .map(|m| m.message)
                .collect();
            turn_stream::observe(&live.session, &daemon.turn_items);
            let mut log = turn_stream::StreamingLog {
                store: daemon.store.clone(),
                session: live.record.id.clone(),
                items: daemon.turn_items.clone(),
            };
            let outcome = daemon
                .agent
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
                .await?;
            Ok::<_, DaemonError>(outcome)
        });
        Ok(task)
    }

    /// The daemon's state, for `quiver status` and `/v1/status`.
    pub fn status(&self) -> Result<Value, DaemonError> {
        let sessions = self.store.sessions()?;
        let snapshot = self.registry.snapshot();
        let models: Vec<Value> = self
            .models
            .values()
            .map(|m| serde_json::json!({"name": m.name(), "context_tokens": m.context_tokens()}))
            .collect();
        Ok(serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.started.elapsed().as_secs(),
            "state_dir": self.state_dir,
            "workspace": self.core_workspace,
            "tools": snapshot.len(),
            "generation": snapshot.generation(),
            "plugins": self.plugins.list_json(),
            "mcp_servers": self.mcp_status(),
            "models": models,
            "default_model": self.config.models.default_model,
            "sessions": sessions,
            "pending_approvals": self.approvals.len(),
        }))
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
    pub fn accept_tools(&self, server: &str, tools: &[String]) -> Result<Value, DaemonError> {
        let pins = self.mcp.accept(server, tools)?;
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

    /// Stops the MCP servers and flushes the activity log.
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
    }
}

/// Whether a session is being made or rebuilt from its stored record
/// (whose grant was checked when it was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    New,
    Stored,
}

/// Writes every event of the feed to the activity log, then passes it on
/// with its log id (so a stream can replay the log and go on live without
/// gaps or repeats).
async fn persist_events(
    feed: Arc<ActivityFeed>,
    store: Arc<Store>,
    records: tokio::sync::broadcast::Sender<Arc<EventRecord>>,
) {
    let mut events = feed.subscribe_all();
    loop {
        match events.recv().await {
            Ok(event) => {
                let mut record = EventRecord::from_event(&event);
                match store.record_event(&record) {
                    Ok(id) => record.id = id,
                    Err(error) => tracing::warn!(%error, "activity event not stored"),
                }
                // No receiver is not an error: nobody is watching.
                let _ = records.send(Arc::new(record));
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                tracing::warn!(lost, "activity log fell behind; events lost");
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
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

    #[tokio::test]
    async fn a_session_loaded_meanwhile_is_kept_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let daemon = test_daemon(dir.path()).await;
        daemon
            .create_session(NewSession {
                id: Some("busy".into()),
                ..NewSession::default()
            })
            .unwrap();
        let loaded = daemon.session("busy").unwrap();
        let _turn = loaded.turn.clone().try_lock_owned().unwrap();
        // Another copy built from the same record (as a racing create or
        // gateway request would) must not take the locked one's place.
        let record = daemon.store.session("busy").unwrap().unwrap();
        let other = daemon.build_live(record, None, Origin::Stored).unwrap();
        let kept = daemon.publish(other);
        assert!(Arc::ptr_eq(&kept, &loaded));
        assert!(daemon.session("busy").unwrap().turn.try_lock().is_err());
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
            .unwrap();
        match daemon.gateway_session("foo", &["*".to_owned()]) {
            Err(DaemonError::GatewaySessionTaken { id, client }) => {
                assert_eq!((id.as_str(), client.as_str()), ("gateway-foo", "foo"));
            }
            other => panic!("{other:?}"),
        }
        daemon.session("gateway-foo").unwrap();
        assert!(matches!(
            daemon.gateway_session("foo", &["*".to_owned()]),
            Err(DaemonError::GatewaySessionTaken { .. })
        ));
        assert!(matches!(
            daemon.create_session(NewSession {
                id: Some("gateway-bar".into()),
                ..NewSession::default()
            }),
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
        drop(Store::open(&db).unwrap());
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let daemon = test_daemon(dir.path()).await;
        daemon.create_session(NewSession::default()).unwrap();
        for name in [DATABASE_FILE, "quiver.db-wal", "quiver.db-shm"] {
            let mode = std::fs::metadata(state.join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name}: {:o}", mode & 0o777);
        }
    }
}
