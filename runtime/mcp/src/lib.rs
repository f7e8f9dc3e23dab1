//! MCP servers through rmcp, the official Rust SDK: stdio child processes
//! and Streamable HTTP endpoints, connected in the background, their tools
//! kept in the registry as `mcp_<server>_<tool>`.
//!
//! - [`config`]: the `mcp_servers:` section, `${VAR}` expansion, tool filters;
//! - [`schema`]: input-schema normalisation (or skipping, with a warning);
//! - [`result`]: `tools/call` results mapped to the runtime's tool result;
//! - [`process`]: stdio children in their own process group, stderr to tracing;
//! - [`connection`]: one live rmcp client session, tool listing with pagination;
//! - [`subscriptions`]: resource subscriptions held upstream for gateway
//!   clients, and servers' notices about their resources and prompts;
//! - [`supervisor`]: the per-server task: connect, refresh on
//!   `notifications/tools/list_changed`, reconnect with capped backoff;
//! - [`host`]: every configured server, its state, and calls;
//! - [`oauth`]: OAuth sign-in of Streamable HTTP servers: token files,
//!   the refreshing credential store, discovery and the login flow;
//! - [`status`]: the state view that `tool_search` and `quiver status` read.
//!
//! Startup never waits for a server: [`McpHost::start`] spawns one tokio
//! task per server and returns at once. A server's tools appear in the
//! registry when its first listing arrives, are replaced on every
//! `list_changed`, and leave it when the connection drops.

use std::time::Duration;

pub mod config;
pub mod connection;
pub mod executor;
#[cfg(feature = "mcp-http")]
pub mod oauth;
mod resources;
pub mod result;
pub mod schema;
#[cfg(feature = "mcp-stdio")]
pub mod stdio;
pub mod subscriptions;
pub mod supervisor;
pub mod tokens;

pub mod host;

pub use config::{McpServerConfig, McpTransportConfig, OAuthConfig, ToolFilter};
pub use executor::McpExecutor;
pub use host::{AcceptError, McpChanges, McpHost, McpHostOptions};
pub use quiver_tool::status::{McpStatusView, ScopedStatus, ServerState, ServerStatus};
pub use resources::{RESOURCE_URI_PREFIX, resource_uri, split_resource_uri};
pub use result::McpToolOutput;
pub use subscriptions::{ResourceNotice, ResourceSubscription};
pub use supervisor::IntegrityEvent;

/// Why a connection to a server could not be made or kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The stdio command could not be started.
    #[error("server `{server}`: cannot start `{command}`: {detail}")]
    Spawn {
        /// The server.
        server: String,
        /// The command.
        command: String,
        /// The operating system's message.
        detail: String,
    },
    /// The transport or the MCP handshake failed.
    #[error("server `{server}`: cannot connect: {detail}")]
    Connect {
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
    /// Connecting (handshake and first listing) took longer than `connect_timeout_s`.
    #[error("server `{server}`: no answer within connect_timeout_s ({timeout_s} s)")]
    ConnectTimeout {
        /// The server.
        server: String,
        /// The limit.
        timeout_s: u64,
    },
    /// An OAuth server has no usable token (none stored, or expired and
    /// not refreshable); it waits for a login instead of retrying.
    #[error("server `{server}` needs an OAuth login: run `{command}`")]
    NeedsLogin {
        /// The server.
        server: String,
        /// The command that logs in.
        command: String,
    },
    /// `tools/list` failed.
    #[error("server `{server}`: cannot list tools: {detail}")]
    ListTools {
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
    /// The transport was left out of this build (cargo features).
    #[error(
        "server `{server}`: {transport} servers are not supported by this build (cargo feature {feature})"
    )]
    Unsupported {
        /// The server.
        server: String,
        /// `stdio` or `http`.
        transport: &'static str,
        /// The feature that adds it.
        feature: &'static str,
    },
}

/// A call of an MCP tool that did not produce a result. Every variant names
/// the server and the tool; the message is written for the model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum McpCallError {
    /// The tool is not an MCP tool.
    #[error("`{tool}` is not an MCP tool")]
    NotMcpTool {
        /// The tool.
        tool: String,
    },
    /// No server of that name is configured.
    #[error("no MCP server `{server}` is configured (tool `{tool}`)")]
    UnknownServer {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The server is not connected right now.
    #[error("MCP server `{server}` is {state}; `{tool}` was not called")]
    NotConnected {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What the server is doing, e.g. `still connecting`.
        state: String,
    },
    /// The call took longer than `call_timeout_s`; it was cancelled.
    #[error(
        "MCP server `{server}` tool `{tool}` did not answer within {timeout_ms} ms; the call was cancelled"
    )]
    Timeout {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The caller cancelled the call.
    #[error("MCP server `{server}` tool `{tool}`: the call was cancelled")]
    Cancelled {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The connection dropped while the call was in flight.
    #[error(
        "MCP server `{server}` disconnected while `{tool}` was running; it is reconnecting, try again shortly"
    )]
    Disconnected {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The server answered with a JSON-RPC error (unknown tool, bad params...).
    #[error("MCP server `{server}` refused `{tool}`: {message} (error {code})")]
    Protocol {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The tool ran and reported an error (`isError: true`).
    #[error("MCP server `{server}` tool `{tool}` failed: {message}")]
    ToolError {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The tool's text content.
        message: String,
        /// The whole result, as for a success.
        output: Box<McpToolOutput>,
    },
    /// Anything else the SDK reported.
    #[error("MCP server `{server}` tool `{tool}`: {detail}")]
    Transport {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The SDK's message.
        detail: String,
    },
}

impl McpCallError {
    /// A short stable code for the error kind.
    pub fn code(&self) -> &'static str {
        match self {
            McpCallError::NotMcpTool { .. } => "not_mcp_tool",
            McpCallError::UnknownServer { .. } => "unknown_server",
            McpCallError::NotConnected { .. } => "server_not_connected",
            McpCallError::Timeout { .. } => "timeout",
            McpCallError::Cancelled { .. } => "cancelled",
            McpCallError::Disconnected { .. } => "server_disconnected",
            McpCallError::Protocol { .. } => "protocol_error",
            McpCallError::ToolError { .. } => "tool_error",
            McpCallError::Transport { .. } => "transport_error",
        }
    }
}

/// Initial pause before reconnecting; doubled after each failure.
pub const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_millis(250);
/// Longest pause between reconnection attempts.
pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
