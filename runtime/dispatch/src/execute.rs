//! The innermost service: runs the real tool on its [`ToolExecutor`], with
//! a time limit for the whole call whatever the source.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;

use super::{BoxFuture, DispatchCall, DispatchError, ToolOutput};
use quiver_tool::executor::{ToolError, ToolErrorKind, ToolExecutor};
use serde_json::Value;

/// A tool that ran and failed, took too long, or could not run: the
/// executor's [`ToolError`] (code, message and data kept as they are) and
/// the tool it was.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{tool}` {}: {}", verb(self.error.kind), self.error.message)]
pub struct ExecuteError {
    /// The tool's exposed name.
    pub tool: String,
    /// What the executor reported.
    pub error: ToolError,
}

fn verb(kind: ToolErrorKind) -> &'static str {
    match kind {
        ToolErrorKind::Failed => "failed",
        ToolErrorKind::TimedOut => "timed out",
        ToolErrorKind::Unavailable => "is unavailable",
    }
}

impl ExecuteError {
    /// The executor's code.
    pub fn code(&self) -> &str {
        &self.error.code
    }

    /// Whether a time limit passed.
    pub fn is_timeout(&self) -> bool {
        self.error.kind == ToolErrorKind::TimedOut
    }

    /// The error as the model receives it: `{"error": code, "message",
    /// "data"?}`, the message naming the tool.
    pub fn to_json(&self) -> Value {
        let mut out = self.error.to_json();
        out["message"] = Value::String(self.to_string());
        out
    }
}

/// Runs the call on an executor, within `timeout`.
#[derive(Clone)]
pub struct ExecuteService {
    executor: Arc<dyn ToolExecutor>,
    timeout: Duration,
}

impl std::fmt::Debug for ExecuteService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteService")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ExecuteService {
    /// Runs calls on `executor`, each for at most `timeout`.
    pub fn new(executor: Arc<dyn ToolExecutor>, timeout: Duration) -> ExecuteService {
        ExecuteService { executor, timeout }
    }
}

impl Service<DispatchCall> for ExecuteService {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        let executor = self.executor.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            let tool = call.tool.name();
            let outcome =
                tokio::time::timeout(timeout, executor.execute(&call.tool, &call.arguments)).await;
            let error = match outcome {
                Ok(Ok(content)) => return Ok(ToolOutput::new(content)),
                Ok(Err(error)) => error,
                Err(_) => ToolError::timed_out(format!(
                    "no answer within {} ms (guardrails.call_timeout_ms)",
                    timeout.as_millis()
                )),
            };
            let error = ExecuteError {
                tool: tool.to_owned(),
                error,
            };
            Err(error.into())
        })
    }
}
