//! Plugin tools as a [`ToolExecutor`]: each call runs on the plugin host's
//! blocking pool, and a plugin's own failures keep their kind.

use std::sync::Arc;

use quiver_tool::executor::{BoxFuture, ToolError, ToolExecutor};
use quiver_tool::tool::Tool;
use serde_json::Value;

use crate::{PluginCallError, PluginHost};

/// Runs plugin tools on a [`PluginHost`].
#[derive(Debug, Clone)]
pub struct PluginExecutor {
    host: Arc<PluginHost>,
}

impl PluginExecutor {
    /// An executor calling into `host`.
    pub fn new(host: Arc<PluginHost>) -> PluginExecutor {
        PluginExecutor { host }
    }
}

impl ToolExecutor for PluginExecutor {
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            self.host
                .call(tool.original_name(), arguments)
                .await
                .map_err(|error| match error {
                    PluginCallError::Timeout { .. } => ToolError::TimedOut(error.to_string()),
                    PluginCallError::UnknownTool { .. } | PluginCallError::Unhealthy { .. } => {
                        ToolError::Unavailable(error.to_string())
                    }
                    other => ToolError::Failed(other.to_string()),
                })
        })
    }
}
