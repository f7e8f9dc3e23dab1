//! The per-server task: connect (bounded by `connect_timeout_s`), publish
//! the tool list, refresh it on every `notifications/tools/list_changed`,
//! and when the connection drops, take the tools out of the registry and
//! reconnect with capped exponential backoff until shutdown.
//!
//! Only this server's registry source ever changes, so every other server's
//! part of the catalog stays as it was.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::McpError;
use super::config::McpServerConfig;
use super::connection::{self, Connection};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::status::{ServerState, ServerStatus};
use quiver_tool::tool::{ToolSource, ToolSpec};

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
    /// Every state change, for whoever reports them (the startup summary).
    changes: broadcast::Sender<ServerStatus>,
}

/// The states a server's `quiver_mcp_server_state` gauge has a series for.
const STATE_NAMES: [&str; 5] = ["disabled", "connecting", "ready", "failed", "stopped"];

impl Slot {
    pub(crate) fn new(config: McpServerConfig, changes: broadcast::Sender<ServerStatus>) -> Slot {
        let state = if config.enabled {
            ServerState::Connecting { attempt: 1 }
        } else {
            ServerState::Disabled
        };
        let slot = Slot {
            config,
            state: Mutex::new(state.clone()),
            peer: RwLock::new(None),
            reconnects: AtomicU32::new(0),
            changes,
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
        }
    }
}

enum Ended {
    Shutdown,
    Closed,
}

fn publish(slot: &Slot, registry: &ToolRegistry, specs: Vec<ToolSpec>) -> usize {
    let server = slot.config.name.as_str();
    let report = registry.set_source_tools(ToolSource::Mcp(server.to_owned()), specs);
    for refused in &report.refused {
        tracing::warn!(server, tool = %refused.name, reason = %refused.reason, "MCP tool refused");
    }
    tracing::info!(
        server,
        tools = report.registered.len(),
        generation = report.generation,
        "MCP tools published"
    );
    report.registered.len()
}

async fn connect_and_list(
    config: &McpServerConfig,
    list_changed: Arc<Notify>,
) -> Result<(Connection, Vec<ToolSpec>), McpError> {
    let connection = connection::connect(config, list_changed).await?;
    let specs = connection::list_tools(config, &connection.peer()).await?;
    Ok((connection, specs))
}

/// Runs one server until `shutdown` is cancelled.
pub(crate) async fn run(
    slot: Arc<Slot>,
    registry: Arc<ToolRegistry>,
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
            outcome = tokio::time::timeout(timeout, connect_and_list(&slot.config, list_changed.clone())) => outcome,
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
                let tools = publish(&slot, &registry, specs);
                slot.set_peer(Some(connection.peer()));
                slot.set_state(ServerState::Ready { tools });
                tracing::info!(server = %server, tools, "MCP server connected");
                failures = 0;
                let ended = serve(&slot, &registry, connection, list_changed, &shutdown).await;
                slot.set_peer(None);
                registry.remove_source(&source);
                if let Ended::Shutdown = ended {
                    break;
                }
                tracing::warn!(server = %server, "MCP server connection closed; its tools left the catalog; reconnecting");
                "the connection closed".to_owned()
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
    registry.remove_source(&source);
    slot.set_state(ServerState::Stopped);
}

/// Serves a connected session until it closes or shutdown.
async fn serve(
    slot: &Slot,
    registry: &ToolRegistry,
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
            _ = list_changed.notified() => {
                match connection::list_tools(&slot.config, &peer).await {
                    Ok(specs) => {
                        let tools = publish(slot, registry, specs);
                        slot.set_state(ServerState::Ready { tools });
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
