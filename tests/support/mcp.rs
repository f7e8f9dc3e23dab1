//! MCP helpers shared by the `mcp_*` end-to-end tests: a host over our test
//! server, polling with deadlines, the assembly a session would get, and
//! [`Served`], the whole runtime with only MCP servers, for calls through
//! the dispatcher as the model makes them.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::{DispatchError, Session};
use quiver_mcp::supervisor::Backoff;
use quiver_mcp::{McpHost, McpHostOptions, McpServerConfig, ServerState};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use serde_json::Value;

/// The longest any test waits for something that should happen at once.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A stdio config for our test server with `args`.
pub fn test_server(name: &str, args: &[&str]) -> McpServerConfig {
    let bin = crate::mcp_test_server();
    McpServerConfig::stdio(
        name,
        bin.to_string_lossy().into_owned(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    )
}

/// Fast reconnects, so tests do not wait for the default backoff.
pub fn fast_options() -> McpHostOptions {
    McpHostOptions {
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(500),
        },
    }
}

/// A host over `servers` with its own registry.
pub fn start(servers: Vec<McpServerConfig>) -> (Arc<ToolRegistry>, McpHost) {
    let registry = Arc::new(ToolRegistry::new());
    let host = McpHost::start(registry.clone(), servers, fast_options());
    (registry, host)
}

/// Polls `condition` every 10 ms until it holds; panics with `what` after
/// [`DEADLINE`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `server` is ready; returns its tool count.
pub async fn ready(host: &McpHost, server: &str) -> usize {
    let mut tools = 0;
    eventually(&format!("server {server} is ready"), || {
        match host.server_status(server).map(|s| s.state) {
            Some(ServerState::Ready { tools: n }) => {
                tools = n;
                true
            }
            _ => false,
        }
    })
    .await;
    tools
}

/// What a session with every grant and a 200k context gets this turn.
pub fn assemble(registry: &ToolRegistry) -> Assembly {
    Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    )
}

/// Exposed names of the deferred tools of `server` in `assembly`.
pub fn deferred_names(assembly: &Assembly, server: &str) -> Vec<String> {
    assembly
        .catalog()
        .groups()
        .iter()
        .filter(|g| g.name() == server)
        .flat_map(|g| g.tools().iter().map(|t| t.name().to_owned()))
        .collect()
}

/// The runtime `quiver serve` runs ([`Daemon::start`]) with `servers` as
/// its only MCP servers, its state in a scratch directory, and a session
/// granted everything: calls go through [`Served::call`], the path the
/// model's calls take.
pub struct Served {
    pub daemon: Arc<Daemon>,
    pub session: Arc<Session>,
    _state: tempfile::TempDir,
}

/// Starts [`Served`] over `servers`.
pub async fn serve(servers: Vec<McpServerConfig>) -> Served {
    let state = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.serve.state_dir = Some(state.path().join("state"));
    config.core_tools.workspace = state.path().to_path_buf();
    config.mcp_servers = servers.into_iter().map(|s| (s.name.clone(), s)).collect();
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let session = Session::new("mcp-test", Scope::all(), daemon.feed().clone());
    Served {
        daemon,
        session,
        _state: state,
    }
}

impl Served {
    /// The model's call of `name` with `arguments` this turn (200k
    /// context): the JSON result it receives, or the error.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, DispatchError> {
        let assembly = self.daemon.assemble(&self.session, 200_000);
        self.daemon
            .dispatcher()
            .dispatch(&self.session, &assembly, name, &arguments)
            .await
    }

    /// `tool_call` of `tool` with `arguments`; panics when it fails.
    pub async fn tool_call(&self, tool: &str, arguments: Value) -> Value {
        let request = serde_json::json!({"name": tool, "arguments": arguments});
        match self.call("tool_call", request).await {
            Ok(value) => value,
            Err(error) => panic!("tool_call {tool} failed: {}", error.to_json()),
        }
    }
}

/// The text blocks of an MCP tool result the model received, joined by
/// newlines.
pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
