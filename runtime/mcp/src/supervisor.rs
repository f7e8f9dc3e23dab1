//! The per-server task: connect (bounded by `connect_timeout_s`), publish
//! the tool list, refresh it on every `notifications/tools/list_changed`,
//! and when the connection drops, take the tools out of the registry and
//! reconnect with capped exponential backoff until shutdown.
//!
//! Only this server's registry source ever changes, so every other server's
//! part of the catalog stays as it was.
//!
//! Every listing passes the definition review ([`quiver_tool::integrity`])
//! before the registry sees it: tools whose definition is not accepted are
//! held back here, so search, listings, `tool_describe` and dispatch all
//! lack them alike.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::{Peer, RoleClient};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::McpError;
use super::config::McpServerConfig;
use super::connection::{self, Connection};
use super::subscriptions::{self, Interest, ResourceNotice};
use quiver_tool::integrity::{self, DefinitionChange, PinStore, Quarantined, Trust};
use quiver_tool::naming::mcp_tool_name;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::status::{ServerState, ServerStatus};
use quiver_tool::tool::{ToolSource, ToolSpec};

/// Definition changes kept per server for `quiver status`.
pub const CHANGES_KEPT: usize = 64;

/// A change of a server's tool definitions, as the host announces it.
#[derive(Debug, Clone, PartialEq)]
pub struct IntegrityEvent {
    /// The server.
    pub server: String,
    /// The tool's natural exposed name (`mcp_SERVER_TOOL`).
    pub exposed: String,
    /// What happened.
    pub change: DefinitionChange,
}

/// Where definitions are pinned and changes announced; shared by every
/// server of a host.
pub(crate) struct Gate {
    pub(crate) pins: Arc<dyn PinStore>,
    pub(crate) events: tokio::sync::broadcast::Sender<Arc<IntegrityEvent>>,
}

/// One server's definition review state.
#[derive(Default)]
pub(crate) struct Integrity {
    /// The last listing as the server sent it (`None` while disconnected).
    last: Option<Vec<ToolSpec>>,
    /// Each listed tool's definition hash at the last review.
    previous: HashMap<String, String>,
    /// Tools held back from the last listing.
    pub(crate) quarantined: Vec<Quarantined>,
    /// Recent changes, oldest first.
    pub(crate) changes: VecDeque<DefinitionChange>,
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Reconnection pacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Pause after the first failure.
    pub initial: Duration,
    /// Longest pause.
    pub max: Duration,
}

impl Backoff {
    /// The pause after `failures` consecutive failures (1 = the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// One server's shared state: what the host reads and the task writes.
pub(crate) struct Slot {
    pub(crate) config: McpServerConfig,
    state: Mutex<ServerState>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    reconnects: AtomicU32,
    integrity: Mutex<Integrity>,
    /// How many tools the last review held back, readable without the
    /// integrity lock: a state change reports it while a review holds it.
    quarantined: AtomicUsize,
    /// Routes the server's progress notifications to the calls waiting
    /// for them, across reconnects (a token is only ever heard on the
    /// session its call went out on).
    pub(crate) progress: ProgressDispatcher,
    /// Every state change, for whoever reports them (the startup summary).
    changes: broadcast::Sender<ServerStatus>,
    /// Who wants which of the server's resources, and what is held.
    pub(crate) interest: Interest,
    /// Where the server's notices about its resources and prompts go
    /// (shared by every server of a host).
    pub(crate) notices: broadcast::Sender<ResourceNotice>,
    /// An OAuth server's login as status shows it (`None`: no OAuth).
    login: Option<connection::LoginView>,
    /// Woken when the server refused a request for want of a token (a
    /// logout, a revoked or unrefreshable token): the session ends, and
    /// the reconnect finds whether a login is needed.
    pub(crate) login_refused: Notify,
}

/// The states a server's `quiver_mcp_server_state` gauge has a series for.
const STATE_NAMES: [&str; 6] = [
    "disabled",
    "connecting",
    "ready",
    "failed",
    "needs_login",
    "stopped",
];

/// How often a server waiting for an OAuth login looks at its stored credentials.
const LOGIN_POLL: Duration = Duration::from_secs(1);

impl Slot {
    pub(crate) fn new(
        config: McpServerConfig,
        changes: broadcast::Sender<ServerStatus>,
        notices: broadcast::Sender<ResourceNotice>,
    ) -> Slot {
        let state = if config.enabled {
            ServerState::Connecting { attempt: 1 }
        } else {
            ServerState::Disabled
        };
        #[cfg(feature = "mcp-http")]
        let login = crate::oauth::current_login(&config);
        #[cfg(not(feature = "mcp-http"))]
        let login = None;
        let slot = Slot {
            config,
            state: Mutex::new(state.clone()),
            peer: RwLock::new(None),
            reconnects: AtomicU32::new(0),
            integrity: Mutex::new(Integrity::default()),
            quarantined: AtomicUsize::new(0),
            progress: ProgressDispatcher::new(),
            changes,
            interest: Interest::default(),
            notices,
            login,
            login_refused: Notify::new(),
        };
        slot.record_state(&state);
        slot
    }

    /// One series per state, 1 for the current one: a scrape sees which
    /// state each server is in without parsing a label value.
    fn record_state(&self, state: &ServerState) {
        for name in STATE_NAMES {
            metrics::gauge!("quiver_mcp_server_state", "server" => self.config.name.clone(), "state" => name)
                .set(if state.name() == name { 1.0 } else { 0.0 });
        }
    }

    pub(crate) fn state(&self) -> ServerState {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_state(&self, state: ServerState) {
        let changed = {
            let mut current = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = *current != state;
            *current = state.clone();
            changed
        };
        if changed {
            self.record_state(&state);
            // Nobody listening is not an error.
            let _ = self.changes.send(self.status());
        }
    }

    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        *self.peer.write().unwrap_or_else(PoisonError::into_inner) = peer;
    }

    pub(crate) fn status(&self) -> ServerStatus {
        ServerStatus {
            name: self.config.name.clone(),
            transport: self.config.transport.kind(),
            state: self.state(),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            quarantined: self.quarantined.load(Ordering::Relaxed),
            oauth: self
                .login
                .as_ref()
                .map(|login| login.lock().unwrap_or_else(PoisonError::into_inner).clone()),
        }
    }

    pub(crate) fn integrity(&self) -> MutexGuard<'_, Integrity> {
        self.integrity
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The toolset name pins are kept under (`mcp-NAME`).
    pub(crate) fn toolset(&self) -> String {
        ToolSource::Mcp(self.config.name.clone()).toolset()
    }
}

/// Records `change` in `integrity`, the log and the host's announcements.
pub(crate) fn announce(
    slot: &Slot,
    gate: &Gate,
    integrity: &mut Integrity,
    change: DefinitionChange,
) {
    let server = slot.config.name.as_str();
    let summary = change.summary(&slot.toolset());
    if change.served {
        tracing::info!(server, tool = %change.tool, diff = %change.diff, "{summary}");
    } else {
        tracing::warn!(server, tool = %change.tool, diff = %change.diff, "{summary}");
    }
    // A tool accepted on first sight is routine: logged, not kept.
    if change.change == "added" && change.served {
        return;
    }
    let _ = gate.events.send(Arc::new(IntegrityEvent {
        server: server.to_owned(),
        exposed: mcp_tool_name(server, &change.tool),
        change: change.clone(),
    }));
    if integrity.changes.len() == CHANGES_KEPT {
        integrity.changes.pop_front();
    }
    integrity.changes.push_back(change);
}

enum Ended {
    Shutdown,
    Closed,
}

/// Reviews `specs` (the server's listing, as sent) and publishes what may
/// be served; returns the number of tools registered.
fn publish(slot: &Slot, registry: &ToolRegistry, gate: &Gate, specs: Vec<ToolSpec>) -> usize {
    let mut integrity = slot.integrity();
    integrity.last = Some(specs);
    republish(slot, registry, gate, &mut integrity)
}

/// Reviews the last listing again (after an acceptance) and publishes it.
/// Runs under the slot's integrity lock, so a refresh and an acceptance
/// never publish out of order.
pub(crate) fn republish(
    slot: &Slot,
    registry: &ToolRegistry,
    gate: &Gate,
    integrity: &mut Integrity,
) -> usize {
    let server = slot.config.name.as_str();
    let Some(specs) = integrity.last.clone() else {
        return 0;
    };
    let toolset = slot.toolset();
    let (trust, pins) = match gate.pins.pins(&toolset) {
        Ok(pins) => (slot.config.trust, pins),
        Err(error) => {
            // Without the pins nothing can be told apart from a change:
            // serve only what an operator accepts now.
            tracing::error!(server, %error, "cannot read the accepted tool definitions; every tool is quarantined");
            (Trust::Pinned, Vec::new())
        }
    };
    let hashes: HashMap<String, String> = specs
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                integrity::definition_hash(&integrity::definition(s)),
            )
        })
        .collect();
    let review = integrity::review(
        specs,
        trust,
        &pins,
        &slot.config.overrides,
        &integrity.previous,
        now_ms(),
    );
    if !review.new_pins.is_empty()
        && let Err(error) = gate.pins.put_pins(&toolset, &review.new_pins)
    {
        tracing::warn!(server, %error, "cannot store the accepted tool definitions; they are served but will be reviewed again");
    }
    for change in review.changes {
        announce(slot, gate, integrity, change);
    }
    integrity.previous = hashes;
    slot.quarantined
        .store(review.quarantined.len(), Ordering::Relaxed);
    integrity.quarantined = review.quarantined;
    let report = registry.set_source_tools(ToolSource::Mcp(server.to_owned()), review.served);
    for refused in &report.refused {
        tracing::warn!(server, tool = %refused.name, reason = %refused.reason, "MCP tool refused");
    }
    tracing::info!(
        server,
        tools = report.registered.len(),
        generation = report.generation,
        "MCP tools published"
    );
    let registered = report.registered.len();
    if slot.state().is_ready() {
        slot.set_state(ServerState::Ready { tools: registered });
    }
    registered
}

async fn connect_and_list(
    slot: &Slot,
    list_changed: Arc<Notify>,
) -> Result<(Connection, Vec<ToolSpec>), McpError> {
    let config = &slot.config;
    let connection = connection::connect(
        config,
        list_changed,
        slot.progress.clone(),
        slot.notices.clone(),
        slot.login.clone(),
    )
    .await?;
    let specs = connection::list_tools(config, &connection.peer()).await?;
    Ok((connection, specs))
}

/// Runs one server until `shutdown` is cancelled.
pub(crate) async fn run(
    slot: Arc<Slot>,
    registry: Arc<ToolRegistry>,
    gate: Arc<Gate>,
    backoff: Backoff,
    shutdown: CancellationToken,
) {
    let server = slot.config.name.clone();
    let source = ToolSource::Mcp(server.clone());
    let mut failures = 0u32;
    loop {
        slot.set_state(ServerState::Connecting {
            attempt: failures + 1,
        });
        let list_changed = Arc::new(Notify::new());
        let timeout = slot.config.connect_timeout;
        let attempt = tokio::select! {
            _ = shutdown.cancelled() => break,
            outcome = tokio::time::timeout(timeout, connect_and_list(&slot, list_changed.clone())) => outcome,
        };
        let error = match attempt {
            Ok(Ok((connection, specs))) => {
                // What the server says it is for ranks its tools in search
                // (server context); set before its tools so that the first
                // snapshot with them already has it.
                if let Some(info) = connection.peer().peer_info() {
                    registry.set_descriptions([(
                        source.clone(),
                        connection::server_description(&info),
                    )]);
                }
                let tools = publish(&slot, &registry, &gate, specs);
                slot.set_peer(Some(connection.peer()));
                slot.set_state(ServerState::Ready { tools });
                tracing::info!(server = %server, tools, "MCP server connected");
                failures = 0;
                // Resource subscriptions are held anew on each connection.
                let follow = tokio::spawn(subscriptions::follow(slot.clone(), connection.peer()));
                let ended =
                    serve(&slot, &registry, &gate, connection, list_changed, &shutdown).await;
                follow.abort();
                slot.set_peer(None);
                slot.integrity().last = None;
                registry.remove_source(&source);
                if let Ended::Shutdown = ended {
                    break;
                }
                tracing::warn!(server = %server, "MCP server connection closed; its tools left the catalog; reconnecting");
                "the connection closed".to_owned()
            }
            Ok(Err(McpError::NeedsLogin { command, .. })) => {
                // Retrying cannot help: wait for a login to write tokens.
                tracing::warn!(server = %server, "MCP server needs an OAuth login: run `{command}`; waiting for it");
                slot.set_state(ServerState::NeedsLogin { command });
                if !wait_for_login(&slot.config, &shutdown).await {
                    break;
                }
                tracing::info!(server = %server, "OAuth tokens changed; connecting");
                continue;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => McpError::ConnectTimeout {
                server: server.clone(),
                timeout_s: timeout.as_secs(),
            }
            .to_string(),
        };
        failures = failures.saturating_add(1);
        slot.reconnects.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("quiver_mcp_reconnects_total", "server" => server.clone()).increment(1);
        let delay = backoff.delay(failures);
        tracing::warn!(server = %server, %error, retry_in_ms = delay.as_millis() as u64, "MCP server unavailable");
        slot.set_state(ServerState::Failed {
            error,
            attempt: failures,
            retry_in_ms: delay.as_millis() as u64,
        });
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    slot.set_peer(None);
    slot.integrity().last = None;
    registry.remove_source(&source);
    slot.set_state(ServerState::Stopped);
}

/// Waits until the server's stored credentials change (a login, from
/// `quiver mcp login` in another process or on another instance); `false`
/// on shutdown. A look at when they were stored each [`LOGIN_POLL`] is
/// all it costs.
async fn wait_for_login(config: &McpServerConfig, shutdown: &CancellationToken) -> bool {
    let seen = credentials_stamp(config).await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(LOGIN_POLL) => {}
        }
        let now = credentials_stamp(config).await;
        if now.is_some() && now != seen {
            return true;
        }
    }
}

/// When the server's credentials were last stored (`None`: none, or no
/// OAuth in this build).
async fn credentials_stamp(config: &McpServerConfig) -> Option<i64> {
    #[cfg(feature = "mcp-http")]
    {
        let tokens = crate::oauth::tokens(config)?;
        tokens
            .0
            .load(&config.name)
            .await
            .ok()
            .flatten()
            .map(|(_, stamp)| stamp)
    }
    #[cfg(not(feature = "mcp-http"))]
    {
        let _ = config;
        None
    }
}

/// Serves a connected session until it closes or shutdown.
async fn serve(
    slot: &Slot,
    registry: &ToolRegistry,
    gate: &Gate,
    connection: Connection,
    list_changed: Arc<Notify>,
    shutdown: &CancellationToken,
) -> Ended {
    let peer = connection.peer();
    let cancel = connection.running.cancellation_token();
    #[cfg(feature = "mcp-stdio")]
    let group = connection.group;
    let mut waiting = Box::pin(connection.running.waiting());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                slot.set_peer(None);
                #[cfg(feature = "mcp-stdio")]
                if let Some(group) = &group {
                    group.terminate().await;
                }
                cancel.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut waiting).await;
                return Ended::Shutdown;
            }
            _ = &mut waiting => {
                // The transport closed (the child exited or the stream
                // dropped); the group is killed when it is dropped here.
                return Ended::Closed;
            }
            _ = slot.login_refused.notified() => {
                tracing::warn!(server = %slot.config.name, "the server refused the OAuth token; reconnecting to see whether a login is needed");
                slot.set_peer(None);
                cancel.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut waiting).await;
                return Ended::Closed;
            }
            _ = list_changed.notified() => {
                match connection::list_tools(&slot.config, &peer).await {
                    Ok(specs) => {
                        publish(slot, registry, gate, specs);
                    }
                    Err(error) => {
                        tracing::warn!(server = %slot.config.name, %error, "refreshing the tool list failed; keeping the previous list");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let backoff = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let delays: Vec<u128> = (1..=6).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff.delay(1000), Duration::from_secs(1));
    }
}
