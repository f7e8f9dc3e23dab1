//! MCP tools as a [`ToolExecutor`]: each call goes through the host to its
//! server, with the server's own call timeout.

use std::sync::Arc;

use quiver_tool::executor::{BoxFuture, ToolError, ToolErrorKind, ToolExecutor};
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
                return Err(ToolError::unavailable(format!(
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
                .map_err(ToolError::from)
        })
    }
}

impl From<McpCallError> for ToolError {
    /// The MCP error's own code; an `isError` result keeps the tool's
    /// `content` (and structured content) in `data`.
    fn from(error: McpCallError) -> ToolError {
        let kind = match &error {
            McpCallError::Timeout { .. } => ToolErrorKind::TimedOut,
            McpCallError::NotConnected { .. }
            | McpCallError::UnknownServer { .. }
            | McpCallError::Disconnected { .. } => ToolErrorKind::Unavailable,
            _ => ToolErrorKind::Failed,
        };
        let data = match &error {
            McpCallError::ToolError { output, .. } => Some(output.to_json()),
            _ => None,
        };
        let tool_error = ToolError::new(kind, error.code(), error.to_string());
        match data {
            Some(data) => tool_error.with_data(data),
            None => tool_error,
        }
    }
}
