//! Plugin tools as a [`ToolExecutor`]: each call runs on the plugin host's
//! blocking pool, and a plugin's own failures keep their kind.

use std::sync::Arc;

use quiver_tool::executor::{BoxFuture, ToolError, ToolErrorKind, ToolExecutor};
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
                .map_err(ToolError::from)
        })
    }
}

impl From<PluginCallError> for ToolError {
    /// A code per kind of failure; a plugin's own error keeps the code the
    /// plugin gave it.
    fn from(error: PluginCallError) -> ToolError {
        if let PluginCallError::Failed { code, data, .. } = &error {
            // The plugin's structured error reaches the model as it was
            // given: its code, its message (prefixed with plugin and tool)
            // and its data.
            let code = if code.is_empty() {
                ToolErrorKind::Failed.default_code().to_owned()
            } else {
                code.clone()
            };
            let mut out = ToolError::new(ToolErrorKind::Failed, code, error.to_string());
            if let Some(data) = data {
                out = out.with_data((**data).clone());
            }
            return out;
        }
        let (kind, code) = match &error {
            PluginCallError::Timeout { .. } => (ToolErrorKind::TimedOut, "timed_out"),
            PluginCallError::UnknownTool { .. } => (ToolErrorKind::Unavailable, "tool_unavailable"),
            PluginCallError::Unhealthy { .. } => (ToolErrorKind::Unavailable, "plugin_unhealthy"),
            PluginCallError::Panicked { .. } => (ToolErrorKind::Failed, "plugin_panicked"),
            PluginCallError::BadResult { .. } => (ToolErrorKind::Failed, "plugin_bad_result"),
            PluginCallError::Pool { .. } => (ToolErrorKind::Unavailable, "tool_unavailable"),
            PluginCallError::Failed { .. } => (ToolErrorKind::Failed, "tool_failed"),
        };
        ToolError::new(kind, code, error.to_string())
    }
}
