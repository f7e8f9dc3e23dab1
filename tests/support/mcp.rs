//! MCP helpers shared by the `mcp_*` end-to-end tests (included with
//! `#[path = "support/mcp.rs"] mod mcp;`): a host over our test server,
//! polling with deadlines, and the assembly a session would get.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use quiver_catalog::assembly::{Assembler, Assembly};
use quiver_catalog::settings::ToolSearchConfig;
use quiver_mcp::supervisor::Backoff;
use quiver_mcp::{McpHost, McpHostOptions, McpServerConfig, ServerState};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;

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
