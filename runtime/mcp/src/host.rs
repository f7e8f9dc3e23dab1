//! The MCP host: every configured server, each run by its own supervisor
//! task, their states, and tool calls with a timeout and cancellation.
//!
//! [`McpHost::start`] returns at once; servers connect in the background
//! and their tools appear in the registry as they arrive.
//! [`McpHost::reconfigure`] applies a new server list (a config reload):
//! servers removed or changed are stopped (their tools leave the
//! registry), servers added or changed are started, and the others keep
//! their connection. Accepted definitions (pins) live in the host's gate,
//! not in a server's slot, so a restarted server is checked against the
//! pins it had.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient, ServiceError};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::McpServerConfig;
use super::result::{McpToolOutput, map_result};
use super::subscriptions::{NOTICES_CAPACITY, ResourceNotice};
use super::supervisor::{self, Backoff, Gate, IntegrityEvent, Slot};
use super::{DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, McpCallError};
use quiver_tool::integrity::{self, MemoryPins, Pin, PinStore, PinStoreError};
use quiver_tool::progress::Progress;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::status::{McpStatusView, ServerState, ServerStatus};

/// Why an acceptance could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// No server of that name is configured.
    #[error("no MCP server `{server}` is configured; configured: {configured}")]
    UnknownServer {
        /// The name asked for.
        server: String,
        /// The configured names.
        configured: String,
    },
    /// A named tool is not quarantined.
    #[error("server `{server}` has no quarantined tool `{tool}`; quarantined: {quarantined}")]
    NotQuarantined {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The quarantined tools.
        quarantined: String,
    },
    /// The pins could not be stored.
    #[error("server `{server}`: cannot store the accepted definitions: {error}")]
    Store {
        /// The server.
        server: String,
        /// The store's message.
        error: PinStoreError,
    },
}

impl AcceptError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            AcceptError::UnknownServer { .. } => "unknown_server",
            AcceptError::NotQuarantined { .. } => "not_quarantined",
            AcceptError::Store { .. } => "store_error",
        }
    }
}

/// How the host runs its servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpHostOptions {
    /// Reconnection pacing.
    pub backoff: Backoff,
}

impl Default for McpHostOptions {
    fn default() -> Self {
        McpHostOptions {
            backoff: Backoff {
                initial: DEFAULT_BACKOFF_INITIAL,
                max: DEFAULT_BACKOFF_MAX,
            },
        }
    }
}

/// One configured server: its shared state and, when enabled, the
/// supervisor task running it with the token that stops it alone.
struct Server {
    slot: Arc<Slot>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// What [`McpHost::reconfigure`] changed, by server name (sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct McpChanges {
    /// Servers started that were not configured before.
    pub added: Vec<String>,
    /// Servers stopped that are no longer configured.
    pub removed: Vec<String>,
    /// Servers whose settings changed: stopped, then started anew.
    pub changed: Vec<String>,
}

impl McpChanges {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Every configured MCP server.
pub struct McpHost {
    registry: Arc<ToolRegistry>,
    options: McpHostOptions,
    gate: Arc<Gate>,
    servers: RwLock<BTreeMap<String, Server>>,
    /// Serialises reconfigurations and shutdown.
    changing: tokio::sync::Mutex<()>,
    shutdown: CancellationToken,
    changes: tokio::sync::broadcast::Sender<ServerStatus>,
    notices: tokio::sync::broadcast::Sender<ResourceNotice>,
}

/// State changes a receiver of [`McpHost::subscribe_changes`] may fall
/// behind by before it loses the oldest.
const CHANGES_CAPACITY: usize = 256;

impl McpHost {
    /// Starts a supervisor task for every enabled server and returns at
    /// once, with accepted definitions kept in memory only. Must be called
    /// inside a tokio runtime.
    pub fn start(
        registry: Arc<ToolRegistry>,
        servers: impl IntoIterator<Item = McpServerConfig>,
        options: McpHostOptions,
    ) -> McpHost {
        McpHost::start_with_pins(registry, servers, options, Arc::new(MemoryPins::default()))
    }

    /// Like [`McpHost::start`], keeping accepted definitions in `pins`
    /// (the state database in the daemon).
    pub fn start_with_pins(
        registry: Arc<ToolRegistry>,
        servers: impl IntoIterator<Item = McpServerConfig>,
        options: McpHostOptions,
        pins: Arc<dyn PinStore>,
    ) -> McpHost {
        let gate = Arc::new(Gate {
            pins,
            events: tokio::sync::broadcast::channel(256).0,
        });
        let host = McpHost {
            registry,
            options,
            gate,
            servers: RwLock::new(BTreeMap::new()),
            changing: tokio::sync::Mutex::new(()),
            shutdown: CancellationToken::new(),
            changes: tokio::sync::broadcast::channel(CHANGES_CAPACITY).0,
            notices: tokio::sync::broadcast::channel(NOTICES_CAPACITY).0,
        };
        let started: BTreeMap<String, Server> = servers
            .into_iter()
            .map(|config| (config.name.clone(), host.launch(config)))
            .collect();
        *host.write_servers() = started;
        host
    }

    /// A server's slot, with its supervisor task when it is enabled.
    fn launch(&self, config: McpServerConfig) -> Server {
        let slot = Arc::new(Slot::new(
            config,
            self.changes.clone(),
            self.notices.clone(),
        ));
        let stop = self.shutdown.child_token();
        let task = if slot.config.enabled {
            Some(tokio::spawn(supervisor::run(
                slot.clone(),
                self.registry.clone(),
                self.gate.clone(),
                self.options.backoff,
                stop.clone(),
            )))
        } else {
            tracing::info!(server = %slot.config.name, "MCP server disabled");
            None
        };
        Server { slot, stop, task }
    }

    fn read_servers(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Server>> {
        self.servers.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_servers(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Server>> {
        self.servers.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn slot(&self, server: &str) -> Option<Arc<Slot>> {
        self.read_servers().get(server).map(|s| s.slot.clone())
    }

    /// The slot of `server` and its session's peer, or why there is none
    /// (`what`: the tool or request the error names).
    pub(crate) fn connected(
        &self,
        server: &str,
        what: &str,
    ) -> Result<(Arc<Slot>, Peer<RoleClient>), McpCallError> {
        let slot = self
            .slot(server)
            .ok_or_else(|| McpCallError::UnknownServer {
                server: server.to_owned(),
                tool: what.to_owned(),
            })?;
        let Some(peer) = slot.peer() else {
            return Err(McpCallError::NotConnected {
                server: server.to_owned(),
                tool: what.to_owned(),
                state: slot.state().describe(),
            });
        };
        Ok((slot, peer))
    }

    pub(crate) fn notices(&self) -> &tokio::sync::broadcast::Sender<ResourceNotice> {
        &self.notices
    }

    /// Makes `servers` the configured set: a server no longer listed, or
    /// listed with other settings, is stopped first (its process ended,
    /// its tools out of the registry), then the new and changed ones are
    /// started; servers listed with the same settings keep running
    /// untouched. A started server's definitions go through the same pins
    /// and quarantine as at start (the pins are the host's, so a changed
    /// server keeps those it had), and its state changes reach
    /// [`McpHost::subscribe_changes`]. Returns at once after the stops; new
    /// servers connect in the background, as at start.
    pub async fn reconfigure(
        &self,
        servers: impl IntoIterator<Item = McpServerConfig>,
    ) -> McpChanges {
        let _serial = self.changing.lock().await;
        let wanted: BTreeMap<String, McpServerConfig> = servers
            .into_iter()
            .map(|config| (config.name.clone(), config))
            .collect();
        let mut changes = McpChanges::default();
        let stopping: Vec<Server> = {
            let mut current = self.write_servers();
            let leaving: Vec<String> = current
                .iter()
                .filter(|(name, server)| wanted.get(*name) != Some(&server.slot.config))
                .map(|(name, _)| name.clone())
                .collect();
            leaving
                .into_iter()
                .filter_map(|name| {
                    if wanted.contains_key(&name) {
                        changes.changed.push(name.clone());
                    } else {
                        changes.removed.push(name.clone());
                    }
                    current.remove(&name)
                })
                .collect()
        };
        for server in stopping {
            server.stop.cancel();
            if let Some(task) = server.task {
                let _ = task.await;
            }
            tracing::info!(server = %server.slot.config.name, "MCP server stopped by a config reload");
        }
        if self.shutdown.is_cancelled() {
            return changes;
        }
        let mut current = self.write_servers();
        for (name, config) in wanted {
            if current.contains_key(&name) {
                continue;
            }
            if !changes.changed.contains(&name) {
                changes.added.push(name.clone());
            }
            current.insert(name, self.launch(config));
        }
        changes
    }

    /// The configured servers' settings, sorted by name.
    pub fn configs(&self) -> Vec<McpServerConfig> {
        self.read_servers()
            .values()
            .map(|s| s.slot.config.clone())
            .collect()
    }

    /// Every server's state changes from now on, as they happen (the
    /// status after the change).
    pub fn subscribe_changes(&self) -> tokio::sync::broadcast::Receiver<ServerStatus> {
        self.changes.subscribe()
    }

    /// The registry the servers' tools go to.
    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.registry
    }

    /// One server's status.
    pub fn server_status(&self, server: &str) -> Option<ServerStatus> {
        self.slot(server).map(|slot| slot.status())
    }

    /// Every server's status, sorted by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.read_servers()
            .values()
            .map(|server| server.slot.status())
            .collect()
    }

    /// Definition changes of every server from now on (quarantines,
    /// changes, renames and acceptances; not tools accepted on first sight).
    pub fn subscribe_integrity(&self) -> tokio::sync::broadcast::Receiver<Arc<IntegrityEvent>> {
        self.gate.events.subscribe()
    }

    /// What the definition review holds for `server`: its trust mode, the
    /// quarantined tools with their reasons, flags and diffs, and recent
    /// changes; `None` for an unknown server.
    pub fn integrity(&self, server: &str) -> Option<Value> {
        let slot = self.slot(server)?;
        let integrity = slot.integrity();
        Some(serde_json::json!({
            "trust": slot.config.trust,
            "quarantined_tools": integrity.quarantined,
            "changes": integrity.changes,
        }))
    }

    /// Reviews `server`'s last listing again against the pins now stored:
    /// what another process or instance accepted meanwhile is served. Does
    /// nothing for an unknown server or one with nothing quarantined.
    pub fn review_again(&self, server: &str) {
        let Some(slot) = self.slot(server) else {
            return;
        };
        let mut held = slot.integrity();
        if held.quarantined.is_empty() {
            return;
        }
        supervisor::republish(&slot, &self.registry, &self.gate, &mut held);
    }

    /// Accepts the quarantined definitions of `server` named in `tools`
    /// (every quarantined one when empty), exactly as they were offered:
    /// pins them and serves them at once if the server is connected.
    /// Returns the new pins.
    pub fn accept(&self, server: &str, tools: &[String]) -> Result<Vec<Pin>, AcceptError> {
        let slot = self.slot(server).ok_or_else(|| {
            let servers = self.read_servers();
            AcceptError::UnknownServer {
                server: server.to_owned(),
                configured: if servers.is_empty() {
                    "none".to_owned()
                } else {
                    servers.keys().cloned().collect::<Vec<_>>().join(", ")
                },
            }
        })?;
        let mut held = slot.integrity();
        let names = || {
            let names: Vec<&str> = held.quarantined.iter().map(|q| q.tool.as_str()).collect();
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        if let Some(missing) = tools
            .iter()
            .find(|t| !held.quarantined.iter().any(|q| &q.tool == *t))
        {
            return Err(AcceptError::NotQuarantined {
                server: server.to_owned(),
                tool: missing.clone(),
                quarantined: names(),
            });
        }
        let now = supervisor::now_ms();
        let accepted: Vec<_> = held
            .quarantined
            .iter()
            .filter(|q| tools.is_empty() || tools.contains(&q.tool))
            .cloned()
            .collect();
        let pins: Vec<Pin> = accepted
            .iter()
            .map(|q| integrity::accepted_pin(q, now))
            .collect();
        self.gate
            .pins
            .put_pins(&slot.toolset(), &pins)
            .map_err(|error| AcceptError::Store {
                server: server.to_owned(),
                error,
            })?;
        for q in accepted {
            let change = integrity::DefinitionChange {
                time_ms: now,
                tool: q.tool.clone(),
                change: "accepted".to_owned(),
                renamed_from: q.renamed_from.clone(),
                served: true,
                flags: q.flags.clone(),
                diff: q.diff.clone(),
            };
            supervisor::announce(&slot, &self.gate, &mut held, change);
        }
        held.quarantined
            .retain(|q| !pins.iter().any(|p| p.tool == q.tool));
        supervisor::republish(&slot, &self.registry, &self.gate, &mut held);
        Ok(pins)
    }

    /// Waits until no server is on its first connection attempt, or until
    /// `timeout`; returns the statuses then.
    pub async fn settle(&self, timeout: Duration) -> Vec<ServerStatus> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let status = self.status();
            let pending = status
                .iter()
                .any(|s| matches!(s.state, ServerState::Connecting { attempt: 1 }));
            if !pending || tokio::time::Instant::now() >= deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Calls `tool` (the server's own name for it) on `server`, bounded by
    /// the server's `call_timeout_s`.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<McpToolOutput, McpCallError> {
        self.call_with_cancel(server, tool, arguments, std::future::pending())
            .await
    }

    /// Like [`McpHost::call`], abandoned (and cancelled on the server with
    /// `notifications/cancelled`) as soon as `cancel` completes. Dropping
    /// the returned future cancels the call the same way.
    pub async fn call_with_cancel(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        cancel: impl Future<Output = ()>,
    ) -> Result<McpToolOutput, McpCallError> {
        let (slot, peer) = self.connected(server, tool)?;
        let timeout = slot.config.call_timeout;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request = tokio::time::timeout(
            timeout,
            call_reporting_progress(&peer, &slot.progress, params),
        );
        let outcome = tokio::select! {
            outcome = request => outcome,
            _ = cancel => {
                return Err(McpCallError::Cancelled {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                });
            }
        };
        match outcome {
            Err(_) => {
                tracing::warn!(
                    server,
                    tool,
                    timeout_ms = timeout.as_millis() as u64,
                    "MCP call timed out"
                );
                Err(McpCallError::Timeout {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    timeout_ms: timeout.as_millis() as u64,
                })
            }
            Ok(Ok(result)) => map_result(server, tool, result),
            Ok(Err(error)) if slot.config.oauth.is_some() && error.is_authorization_required() => {
                // No token the server accepts (a logout, a revoked token,
                // a refresh refused): the session ends and the reconnect
                // waits for a login.
                slot.login_refused.notify_one();
                Err(McpCallError::NotConnected {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    state: ServerState::NeedsLogin {
                        command: format!("quiver mcp login {server}"),
                    }
                    .describe(),
                })
            }
            Ok(Err(error)) => Err(service_error(server, tool, error)),
        }
    }

    /// Stops every server: ends each stdio server's process group, closes
    /// sessions and takes their tools out of the registry; waits for the
    /// supervisor tasks.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let _serial = self.changing.lock().await;
        let tasks: Vec<JoinHandle<()>> = self
            .write_servers()
            .values_mut()
            .filter_map(|server| server.task.take())
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    }
}

impl Drop for McpHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl McpStatusView for McpHost {
    fn servers(&self) -> Vec<ServerStatus> {
        self.status()
    }
}

/// Sends `tools/call` and waits for its answer, passing each
/// `notifications/progress` the server sends for it to the caller's
/// progress sink ([`quiver_tool::progress`]), when there is one. Dropped
/// before the answer (timeout, caller cancel), it tells the server with
/// `notifications/cancelled`.
async fn call_reporting_progress(
    peer: &Peer<RoleClient>,
    dispatcher: &ProgressDispatcher,
    params: CallToolRequestParams,
) -> Result<CallToolResult, ServiceError> {
    let sink = quiver_tool::progress::current();
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await?;
    let mut abandoned = CancelOnDrop {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    // rmcp gives every request a progress token of its own; only a call
    // somebody watches subscribes to it.
    let mut progress = match &sink {
        Some(_) => Some(dispatcher.subscribe(handle.progress_token.clone()).await),
        None => None,
    };
    let answer = handle.await_response();
    tokio::pin!(answer);
    let mut last = None;
    let answer = loop {
        tokio::select! {
            answer = &mut answer => break answer,
            Some(report) = async {
                match progress.as_mut() {
                    Some(progress) => progress.next().await,
                    None => std::future::pending().await,
                }
            } => last = pass_on(sink.as_ref(), report),
        }
    };
    abandoned.id = None;
    if let (Some(progress), Some(sink)) = (progress.as_mut(), sink.as_ref()) {
        drain_late_reports(progress, sink, last).await;
    }
    match answer? {
        ServerResult::CallToolResult(result) => Ok(result),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Hands one report to the sink; returns it for the completeness check.
fn pass_on(
    sink: Option<&quiver_tool::progress::ProgressSink>,
    report: rmcp::model::ProgressNotificationParam,
) -> Option<Progress> {
    let report = Progress {
        progress: report.progress,
        total: report.total,
        message: report.message,
    };
    if let Some(sink) = sink {
        sink(report.clone());
    }
    Some(report)
}

/// How long a finished call waits for progress reports the server sent
/// before its answer but that are still on their way to the dispatcher.
const LATE_PROGRESS_PATIENCE: Duration = Duration::from_millis(50);

/// Passes on the reports sent before the answer that have not arrived yet.
/// rmcp hands each notification to the handler on a task of its own, so
/// one sent before the answer can arrive after it. The tasks already
/// spawned get a few turns; when the last report says work was left
/// (`progress < total`), the rest get [`LATE_PROGRESS_PATIENCE`].
async fn drain_late_reports(
    progress: &mut rmcp::handler::client::progress::ProgressSubscriber,
    sink: &quiver_tool::progress::ProgressSink,
    mut last: Option<Progress>,
) {
    use futures_util::FutureExt;
    for _ in 0..8 {
        tokio::task::yield_now().await;
        while let Some(Some(report)) = progress.next().now_or_never() {
            last = pass_on(Some(sink), report);
        }
    }
    let unfinished = |last: &Option<Progress>| {
        last.as_ref()
            .is_some_and(|p| p.total.is_some_and(|total| p.progress < total))
    };
    let deadline = tokio::time::Instant::now() + LATE_PROGRESS_PATIENCE;
    while unfinished(&last) {
        match tokio::time::timeout_at(deadline, progress.next()).await {
            Ok(Some(report)) => last = pass_on(Some(sink), report),
            _ => break,
        }
    }
}

/// Sends `notifications/cancelled` for a request abandoned before its
/// answer, as rmcp's own `call_tool` does.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let reason = "the call was abandoned by its caller".to_owned();
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason)))
                .await;
        });
    }
}

pub(crate) fn service_error(server: &str, tool: &str, error: ServiceError) -> McpCallError {
    let server = server.to_owned();
    let tool = tool.to_owned();
    match error {
        ServiceError::McpError(error) => McpCallError::Protocol {
            server,
            tool,
            code: error.code.0,
            message: error.message.into_owned(),
        },
        ServiceError::TransportClosed => McpCallError::Disconnected { server, tool },
        ServiceError::Cancelled { .. } => McpCallError::Cancelled { server, tool },
        ServiceError::Timeout { timeout } => McpCallError::Timeout {
            server,
            tool,
            timeout_ms: timeout.as_millis() as u64,
        },
        other => McpCallError::Transport {
            server,
            tool,
            detail: other.to_string(),
        },
    }
}
