//! The contract at the bottom of dispatch: a [`ToolExecutor`] runs one
//! call of a real tool and answers its result or a [`ToolError`]. Each tool
//! source implements it in its own crate (core tools, plugins, MCP);
//! [`CoreTools`] runs in-process closures and [`Executors`] routes a call
//! to the executor of its tool's source.

use std::borrow::Cow;
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

/// How the chain treats a [`ToolError`]: the feed status it gives and
/// whether a retry may help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The tool ran and reported a failure.
    Failed,
    /// A time limit passed (the tool's own, or the chain's).
    TimedOut,
    /// Nothing can run this tool right now (not loaded, not connected).
    Unavailable,
}

impl ToolErrorKind {
    /// The code an error of this kind has when its source gives none.
    pub fn default_code(self) -> &'static str {
        match self {
            ToolErrorKind::Failed => "tool_failed",
            ToolErrorKind::TimedOut => "timed_out",
            ToolErrorKind::Unavailable => "tool_unavailable",
        }
    }
}

/// Why a tool did not produce a result, in the shape of MCP's error data:
/// a stable `code` (a field, never text inside the message), a `message`
/// for the model, and `data` with whatever the source has to add (an MCP
/// tool's own `content`, a command's output so far). What the model
/// receives is [`ToolError::to_json`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// How the chain treats it.
    pub kind: ToolErrorKind,
    /// A short stable code, e.g. `not_found`, `tool_error`, `timed_out`.
    pub code: Cow<'static, str>,
    /// What went wrong, for the model.
    pub message: String,
    /// Anything else the source reports.
    pub data: Option<Value>,
}

impl ToolError {
    /// An error of `kind` with `code` and `message`.
    pub fn new(
        kind: ToolErrorKind,
        code: impl Into<Cow<'static, str>>,
        message: impl Into<String>,
    ) -> ToolError {
        ToolError {
            kind,
            code: code.into(),
            message: message.into(),
            data: None,
        }
    }

    /// The tool ran and failed (`tool_failed`).
    pub fn failed(message: impl Into<String>) -> ToolError {
        let kind = ToolErrorKind::Failed;
        ToolError::new(kind, kind.default_code(), message)
    }

    /// A time limit passed (`timed_out`).
    pub fn timed_out(message: impl Into<String>) -> ToolError {
        let kind = ToolErrorKind::TimedOut;
        ToolError::new(kind, kind.default_code(), message)
    }

    /// Nothing can run the tool (`tool_unavailable`).
    pub fn unavailable(message: impl Into<String>) -> ToolError {
        let kind = ToolErrorKind::Unavailable;
        ToolError::new(kind, kind.default_code(), message)
    }

    /// The same error with `data` attached.
    pub fn with_data(mut self, data: Value) -> ToolError {
        self.data = Some(data);
        self
    }

    /// The error as the model receives it: `{"error": code, "message",
    /// "data"?}`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::json!({"error": self.code, "message": self.message});
        if let Some(data) = &self.data {
            out["data"] = data.clone();
        }
        out
    }
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
                Err(ToolError::unavailable(format!(
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
                Box::pin(async move { Err(ToolError::unavailable(message)) })
            }
        }
    }
}
