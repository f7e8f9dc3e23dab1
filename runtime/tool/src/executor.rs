//! The contract at the bottom of dispatch: a [`ToolExecutor`] runs one
//! call of a real tool and answers its result or a [`ToolError`]. Each tool
//! source implements it in its own crate (core tools, plugins, MCP);
//! [`CoreTools`] runs in-process closures and [`Executors`] routes a call
//! to the executor of its tool's source.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::tool::{Tool, ToolSource};

/// A boxed, sendable future: what executors and the dispatch chain return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool call resolved to the real tool: what the dispatch chain runs.
#[derive(Debug, Clone)]
pub struct ResolvedCall {
    /// The real tool.
    pub tool: Arc<Tool>,
    /// Its arguments (always an object).
    pub arguments: Map<String, Value>,
    /// Whether the model reached it through `tool_call`.
    pub via_bridge: bool,
}

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
    /// Runs `tool` with `arguments` (a JSON object).
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
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
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let Some(run) = self.tools.get(tool.original_name()) else {
            let name = tool.name().to_owned();
            return Box::pin(async move {
                Err(ToolError::Unavailable(format!(
                    "no core implementation of `{name}`"
                )))
            });
        };
        let arguments = match arguments {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        run(arguments)
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
    fn execute<'a>(
        &'a self,
        tool: &'a Tool,
        arguments: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let executor = match tool.source() {
            ToolSource::Core => &self.core,
            ToolSource::Plugin(_) => &self.plugin,
            ToolSource::Mcp(_) => &self.mcp,
        };
        match executor {
            Some(executor) => executor.execute(tool, arguments),
            None => {
                let message = format!(
                    "no executor for {} tools; `{}` was not called",
                    tool.source().kind(),
                    tool.name()
                );
                Box::pin(async move { Err(ToolError::Unavailable(message)) })
            }
        }
    }
}
