//! Running the real tool: the [`ToolExecutor`] trait, an executor for
//! in-process core tools ([`CoreTools`], a registry of closures), one for
//! `.so` plugins ([`PluginExecutor`]) and a router by tool source
//! ([`Executors`]) that MCP plugs into with [`Executors::with_mcp`].

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{BoxFuture, DispatchCall};
use crate::mcp::{McpCallError, McpHost};
use crate::plugins::{PluginCallError, PluginHost};
use crate::tool::ToolSource;

/// Why a tool did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The tool ran and reported a failure.
    #[error("{0}")]
    Failed(String),
    /// The tool's own time limit passed (e.g. `plugins.call_timeout_ms`).
    #[error("{0}")]
    TimedOut(String),
    /// Nothing can run this tool right now.
    #[error("{0}")]
    Unavailable(String),
}

/// Runs a tool call. `async fn` in a trait is not object safe, so the
/// future is boxed: executors are held as `Arc<dyn ToolExecutor>`.
pub trait ToolExecutor: Send + Sync {
    /// Runs `call.tool` with `call.arguments`.
    fn execute<'a>(&'a self, call: &'a DispatchCall) -> BoxFuture<'a, Result<Value, ToolError>>;
}

type CoreFn =
    dyn Fn(Map<String, Value>) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync;

/// In-process core tools: a closure per tool name.
#[derive(Default, Clone)]
pub struct CoreTools {
    tools: HashMap<String, Arc<CoreFn>>,
}

impl std::fmt::Debug for CoreTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.tools.keys().collect();
        names.sort();
        f.debug_struct("CoreTools").field("tools", &names).finish()
    }
}

impl CoreTools {
    /// No tools.
    pub fn new() -> CoreTools {
        CoreTools::default()
    }

    /// Adds a synchronous tool.
    pub fn with_fn<F>(mut self, name: &str, f: F) -> CoreTools
    where
        F: Fn(Map<String, Value>) -> Result<Value, ToolError> + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        self.tools.insert(
            name.to_owned(),
            Arc::new(move |arguments| {
                let result = f(arguments);
                Box::pin(std::future::ready(result))
            }),
        );
        self
    }

    /// Adds an asynchronous tool.
    pub fn with_async<F, Fut>(mut self, name: &str, f: F) -> CoreTools
    where
        F: Fn(Map<String, Value>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.tools.insert(
            name.to_owned(),
            Arc::new(move |arguments| Box::pin(f(arguments))),
        );
        self
    }
}

impl ToolExecutor for CoreTools {
    fn execute<'a>(&'a self, call: &'a DispatchCall) -> BoxFuture<'a, Result<Value, ToolError>> {
        let Some(tool) = self.tools.get(call.tool.original_name()) else {
            let name = call.tool.name().to_owned();
            return Box::pin(async move {
                Err(ToolError::Unavailable(format!(
                    "no core implementation of `{name}`"
                )))
            });
        };
        let arguments = match &call.arguments {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        tool(arguments)
    }
}

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
    fn execute<'a>(&'a self, call: &'a DispatchCall) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            self.host
                .call(call.tool.original_name(), &call.arguments)
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
    fn execute<'a>(&'a self, call: &'a DispatchCall) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let ToolSource::Mcp(server) = call.tool.source() else {
                return Err(ToolError::Unavailable(format!(
                    "`{}` is not an MCP tool",
                    call.tool.name()
                )));
            };
            self.host
                .call(
                    server,
                    call.tool.original_name(),
                    call.arguments.as_object().cloned().unwrap_or_default(),
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

/// Routes each call to the executor of its tool's source.
#[derive(Clone, Default)]
pub struct Executors {
    core: Option<Arc<dyn ToolExecutor>>,
    plugin: Option<Arc<dyn ToolExecutor>>,
    mcp: Option<Arc<dyn ToolExecutor>>,
}

impl std::fmt::Debug for Executors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executors")
            .field("core", &self.core.is_some())
            .field("plugin", &self.plugin.is_some())
            .field("mcp", &self.mcp.is_some())
            .finish()
    }
}

impl Executors {
    /// No executors: every call is `unavailable`.
    pub fn new() -> Executors {
        Executors::default()
    }

    /// Core tools run on `executor`.
    pub fn with_core(mut self, executor: Arc<dyn ToolExecutor>) -> Executors {
        self.core = Some(executor);
        self
    }

    /// Plugin tools run on `executor`.
    pub fn with_plugins(mut self, executor: Arc<dyn ToolExecutor>) -> Executors {
        self.plugin = Some(executor);
        self
    }

    /// MCP tools run on `executor`.
    pub fn with_mcp(mut self, executor: Arc<dyn ToolExecutor>) -> Executors {
        self.mcp = Some(executor);
        self
    }
}

impl ToolExecutor for Executors {
    fn execute<'a>(&'a self, call: &'a DispatchCall) -> BoxFuture<'a, Result<Value, ToolError>> {
        let executor = match call.tool.source() {
            ToolSource::Core => &self.core,
            ToolSource::Plugin(_) => &self.plugin,
            ToolSource::Mcp(_) => &self.mcp,
        };
        match executor {
            Some(executor) => executor.execute(call),
            None => {
                let message = format!(
                    "no executor for {} tools; `{}` was not called",
                    call.tool.source().kind(),
                    call.tool.name()
                );
                Box::pin(async move { Err(ToolError::Unavailable(message)) })
            }
        }
    }
}
