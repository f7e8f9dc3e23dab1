//! The MCP host: every configured server, each run by its own supervisor
//! task, their states, and tool calls with a timeout and cancellation.
//!
//! [`McpHost::start`] returns at once; servers connect in the background
//! and their tools appear in the registry as they arrive.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::McpServerConfig;
use super::result::{McpToolOutput, map_result};
use super::supervisor::{self, Backoff, Slot};
use super::{DEFAULT_BACKOFF_INITIAL, DEFAULT_BACKOFF_MAX, McpCallError};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::status::{McpStatusView, ServerState, ServerStatus};

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
    /// once. Must be called inside a tokio runtime.
    pub fn start(
        registry: Arc<ToolRegistry>,
        servers: impl IntoIterator<Item = McpServerConfig>,
        options: McpHostOptions,
    ) -> McpHost {
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
        let request = tokio::time::timeout(timeout, peer.call_tool(params));
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
