//! The MCP host: every configured server, each run by its own supervisor
//! task, their states, and tool calls with a timeout and cancellation.
//!
//! [`McpHost::start`] returns at once; servers connect in the background
//! and their tools appear in the registry as they arrive.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
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

/// Every configured MCP server.
pub struct McpHost {
    registry: Arc<ToolRegistry>,
    gate: Arc<Gate>,
    slots: BTreeMap<String, Arc<Slot>>,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    changes: tokio::sync::broadcast::Sender<ServerStatus>,
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
        let shutdown = CancellationToken::new();
        let changes = tokio::sync::broadcast::channel(CHANGES_CAPACITY).0;
        let mut slots = BTreeMap::new();
        let mut tasks = Vec::new();
        for config in servers {
            let slot = Arc::new(Slot::new(config, changes.clone()));
            if slot.config.enabled {
                tasks.push(tokio::spawn(supervisor::run(
                    slot.clone(),
                    registry.clone(),
                    gate.clone(),
                    options.backoff,
                    shutdown.child_token(),
                )));
            } else {
                tracing::info!(server = %slot.config.name, "MCP server disabled");
            }
            slots.insert(slot.config.name.clone(), slot);
        }
        McpHost {
            registry,
            gate,
            slots,
            shutdown,
            tasks: Mutex::new(tasks),
            changes,
        }
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
        self.slots.get(server).map(|slot| slot.status())
    }

    /// Every server's status, sorted by name.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.slots.values().map(|slot| slot.status()).collect()
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
        let slot = self.slots.get(server)?;
        let integrity = slot.integrity();
        Some(serde_json::json!({
            "trust": slot.config.trust,
            "quarantined_tools": integrity.quarantined,
            "changes": integrity.changes,
        }))
    }

    /// Accepts the quarantined definitions of `server` named in `tools`
    /// (every quarantined one when empty), exactly as they were offered:
    /// pins them and serves them at once if the server is connected.
    /// Returns the new pins.
    pub fn accept(&self, server: &str, tools: &[String]) -> Result<Vec<Pin>, AcceptError> {
        let slot = self
            .slots
            .get(server)
            .ok_or_else(|| AcceptError::UnknownServer {
                server: server.to_owned(),
                configured: if self.slots.is_empty() {
                    "none".to_owned()
                } else {
                    self.slots.keys().cloned().collect::<Vec<_>>().join(", ")
                },
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
            supervisor::announce(slot, &self.gate, &mut held, change);
        }
        held.quarantined
            .retain(|q| !pins.iter().any(|p| p.tool == q.tool));
        supervisor::republish(slot, &self.registry, &self.gate, &mut held);
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
        let slot = self
            .slots
            .get(server)
            .ok_or_else(|| McpCallError::UnknownServer {
                server: server.to_owned(),
                tool: tool.to_owned(),
            })?;
        let Some(peer) = slot.peer() else {
            return Err(McpCallError::NotConnected {
                server: server.to_owned(),
                tool: tool.to_owned(),
                state: slot.state().describe(),
            });
        };
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
            Ok(Err(error)) => Err(service_error(server, tool, error)),
        }
    }

    /// Stops every server: ends each stdio server's process group, closes
    /// sessions and takes their tools out of the registry; waits for the
    /// supervisor tasks.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
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

fn service_error(server: &str, tool: &str, error: ServiceError) -> McpCallError {
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
