//! The innermost service: runs the real tool on its [`ToolExecutor`], with
//! a time limit for the whole call whatever the source.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;

use super::{BoxFuture, DispatchCall, DispatchError, ToolOutput};
use quiver_tool::executor::{ToolError, ToolExecutor};

/// A tool that ran and failed, or took too long.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecuteError {
    /// The call took longer than `guardrails.call_timeout_ms` (or the
    /// source's own limit).
    #[error("`{tool}` timed out: {detail}")]
    Timeout {
        /// The tool.
        tool: String,
        /// Which limit passed.
        detail: String,
    },
    /// The tool reported an error.
    #[error("`{tool}` failed: {message}")]
    Failed {
        /// The tool.
        tool: String,
        /// What it said.
        message: String,
    },
    /// Nothing could run the tool.
    #[error("`{tool}` is unavailable: {message}")]
    Unavailable {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
}

impl ExecuteError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ExecuteError::Timeout { .. } => "timed_out",
            ExecuteError::Failed { .. } => "tool_failed",
            ExecuteError::Unavailable { .. } => "tool_unavailable",
        }
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
                Err(_) => ExecuteError::Timeout {
                    tool: tool.to_owned(),
                    detail: format!("no answer within {} ms", timeout.as_millis()),
                },
                Ok(Err(ToolError::TimedOut(detail))) => ExecuteError::Timeout {
                    tool: tool.to_owned(),
                    detail,
                },
                Ok(Err(ToolError::Failed(message))) => ExecuteError::Failed {
                    tool: tool.to_owned(),
                    message,
                },
                Ok(Err(ToolError::Unavailable(message))) => ExecuteError::Unavailable {
                    tool: tool.to_owned(),
                    message,
                },
            };
            Err(error.into())
        })
    }
}
