//! MCP tools as a [`ToolExecutor`]: each call goes through the host to its
//! server, with the server's own call timeout.

use std::sync::Arc;

use quiver_tool::executor::{BoxFuture, ToolError, ToolExecutor};
use quiver_tool::tool::{Tool, ToolSource};
use serde_json::Value;

use crate::{McpCallError, McpHost};

/// Runs MCP tools on an [`McpHost`] (with its per-server call timeout).
#[derive(Clone)]
pub struct McpExecutor {
    host: Arc<McpHost>,
}

impl McpExecutor {
    /// An executor calling through `host`.
    pub fn new(host: Arc<McpHost>) -> McpExecutor {
        McpExecutor { host }
    }
}

impl ToolExecutor for McpExecutor {
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let ToolSource::Mcp(server) = tool.source() else {
                return Err(ToolError::Unavailable(format!(
                    "`{}` is not an MCP tool",
                    tool.name()
                )));
            };
            self.host
                .call(
                    server,
                    tool.original_name(),
                    arguments.as_object().cloned().unwrap_or_default(),
                )
                .await
                .map(|output| output.to_json())
                .map_err(|error| match error {
                    McpCallError::Timeout { .. } => ToolError::TimedOut(error.to_string()),
                    McpCallError::NotConnected { .. }
                    | McpCallError::UnknownServer { .. }
                    | McpCallError::Disconnected { .. } => {
                        ToolError::Unavailable(error.to_string())
                    }
                    other => ToolError::Failed(other.to_string()),
                })
        })
    }
}
