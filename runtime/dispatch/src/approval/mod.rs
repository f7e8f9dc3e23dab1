//! Approval: calls of tools matching `approval.require` wait for an
//! [`Approver`] before they run.
//!
//! An approval is asked for the real tool and a digest of its arguments
//! (sha256 of their canonical JSON: keys sorted, no spaces), so an answer
//! given for one request cannot approve different arguments. The answer
//! may approve this call, approve the tool for the rest of the session
//! (any arguments), or deny. Waiting is asynchronous: a call waiting for
//! approval holds no lock and blocks no other call or session. After
//! `approval.timeout_s` without an answer the call is denied
//! (`on_timeout: deny`).
//!
//! Approvers: the daemon's stored approvals (`quiver_daemon::approvals`:
//! requests kept in the state store, listed and answered by id through any
//! instance's API), [`terminal::TerminalApprover`] (a prompt on a
//! terminal) and [`rules::AutoApprove`] (approves by tool-name glob,
//! otherwise asks another approver).

pub mod rules;
pub mod terminal;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tower::{Layer, Service};

use super::feed::Status;
use super::{BoxFuture, ChainService, DispatchCall, DispatchError, ToolOutput, ready_call};
use quiver_tool::tool::{Hint, Tool, annotation_pattern};

/// What to do when nobody answers in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// Deny the call.
    Deny,
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this call.
    Approve,
    /// Run this call and every later call of the same tool in this session.
    ApproveForSession,
    /// Do not run it.
    Deny {
        /// Why (shown to the model).
        reason: String,
    },
}

impl Decision {
    /// `approve`, `approve_for_session` or `deny`.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::ApproveForSession => "approve_for_session",
            Decision::Deny { .. } => "deny",
        }
    }
}

/// What an approver is asked.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: u64,
    /// The session's id.
    pub session: String,
    /// The real tool.
    pub tool: String,
    /// Whether the call came through `tool_call`.
    pub via_bridge: bool,
    /// The arguments, redacted as in the feed.
    pub arguments: Value,
    /// sha256 (hex) of the canonical JSON of the full arguments.
    pub digest: String,
}

/// Decides approval requests.
pub trait Approver: Send + Sync {
    /// Answers `request`; may take as long as a person needs (the layer
    /// applies the timeout).
    fn decide(&self, request: ApprovalRequest) -> BoxFuture<'static, Decision>;
}

/// Denies everything: the approver when none is configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

impl Approver for DenyAll {
    fn decide(&self, _: ApprovalRequest) -> BoxFuture<'static, Decision> {
        Box::pin(std::future::ready(Decision::Deny {
            reason: "no approver is configured".to_owned(),
        }))
    }
}

/// A call that was not approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// The approver said no.
    #[error("`{tool}` was not called: approval denied: {reason}")]
    Denied {
        /// The tool.
        tool: String,
        /// The approver's reason.
        reason: String,
    },
    /// Nobody answered in time.
    #[error("`{tool}` was not called: no approval within {}", seconds(*.timeout_ms))]
    TimedOut {
        /// The tool.
        tool: String,
        /// The limit.
        timeout_ms: u64,
    },
}

/// `12 s`, or `0.05 s` below a second.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{} s", ms as f64 / 1000.0)
    }
}

impl ApprovalError {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApprovalError::Denied { .. } => "approval_denied",
            ApprovalError::TimedOut { .. } => "approval_timed_out",
        }
    }
}

/// Which tools need approval and how long to wait.
#[derive(Debug, Clone)]
pub struct ApprovalPolicy {
    require: GlobSet,
    hints: Vec<Hint>,
    any: bool,
    timeout: Duration,
    on_timeout: OnTimeout,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            require: GlobSet::empty(),
            hints: Vec::new(),
            any: false,
            timeout: Duration::from_secs(300),
            on_timeout: OnTimeout::Deny,
        }
    }
}

impl ApprovalPolicy {
    /// Tools matching any of `require` (globs over the exposed name, or
    /// `annotation:NAME` for tools claiming that behaviour) wait at most
    /// `timeout` for an answer.
    pub fn new<I, S>(require: I, timeout: Duration) -> Result<ApprovalPolicy, globset::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut builder = GlobSetBuilder::new();
        let mut hints = Vec::new();
        let mut any = false;
        for pattern in require {
            match annotation_pattern(pattern.as_ref()) {
                Some(Ok(hint)) => hints.push(hint),
                // The config check refuses an unknown hint; here it is a
                // glob that matches no tool name.
                Some(Err(_)) | None => {
                    builder.add(Glob::new(pattern.as_ref())?);
                    any = true;
                }
            }
        }
        Ok(ApprovalPolicy {
            require: builder.build()?,
            hints,
            any,
            timeout,
            on_timeout: OnTimeout::Deny,
        })
    }

    /// Whether calls of the tool named `tool` need approval by name.
    pub fn requires(&self, tool: &str) -> bool {
        self.any && self.require.is_match(tool)
    }

    /// Whether calls of `tool` need approval, by name or by its hints.
    pub fn requires_tool(&self, tool: &Tool) -> bool {
        self.requires(tool.name()) || self.hints.iter().any(|&hint| tool.has_hint(hint))
    }

    /// How long a call waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// What happens after the timeout.
    pub fn on_timeout(&self) -> OnTimeout {
        self.on_timeout
    }
}

/// Canonical JSON: object keys sorted at every depth, no whitespace (the
/// same text tool-definition pins hash).
pub fn canonical_json(value: &Value) -> String {
    quiver_tool::integrity::canonical_json(value)
}

/// sha256 (lowercase hex) of the canonical JSON of `arguments`.
pub fn arguments_digest(arguments: &Value) -> String {
    let hash = Sha256::digest(canonical_json(arguments).as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Adds [`Approval`] around a service.
#[derive(Clone)]
pub struct ApprovalLayer {
    policy: Arc<ApprovalPolicy>,
    approver: Arc<dyn Approver>,
}

impl std::fmt::Debug for ApprovalLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalLayer")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ApprovalLayer {
    /// Asks `approver` for the calls `policy` names.
    pub fn new(policy: Arc<ApprovalPolicy>, approver: Arc<dyn Approver>) -> ApprovalLayer {
        ApprovalLayer { policy, approver }
    }
}

impl<S> Layer<S> for ApprovalLayer {
    type Service = Approval<S>;
    fn layer(&self, inner: S) -> Approval<S> {
        Approval {
            policy: self.policy.clone(),
            approver: self.approver.clone(),
            inner,
        }
    }
}

/// Waits for approval when needed, then runs the inner service.
#[derive(Clone)]
pub struct Approval<S> {
    policy: Arc<ApprovalPolicy>,
    approver: Arc<dyn Approver>,
    inner: S,
}

impl<S> std::fmt::Debug for Approval<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approval")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<S: ChainService> Service<DispatchCall> for Approval<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        let tool = call.tool.name();
        if !self.policy.requires_tool(&call.tool) || call.session.is_approved_for_session(tool) {
            return self.inner.call(call);
        }
        let policy = self.policy.clone();
        let approver = self.approver.clone();
        let inner = self.inner.clone();
        Box::pin(async move {
            let tool = call.tool.name().to_owned();
            let request = ApprovalRequest {
                call_id: call.id,
                session: call.session.id().to_owned(),
                tool: tool.clone(),
                via_bridge: call.via_bridge,
                arguments: call.session.feed().redact(&call.arguments),
                digest: arguments_digest(&call.arguments),
            };
            call.record(Status::AwaitingApproval, None);
            let decision = tokio::time::timeout(policy.timeout, approver.decide(request)).await;
            match decision {
                Ok(Decision::Approve) => {}
                Ok(Decision::ApproveForSession) => call.session.approve_for_session(&tool),
                Ok(Decision::Deny { reason }) => {
                    return Err(ApprovalError::Denied { tool, reason }.into());
                }
                Err(_) => match policy.on_timeout {
                    OnTimeout::Deny => {
                        return Err(ApprovalError::TimedOut {
                            tool,
                            timeout_ms: policy.timeout.as_millis() as u64,
                        }
                        .into());
                    }
                },
            }
            ready_call(inner, call).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, "x"], "x": null}});
        let b = json!({"a": {"x": null, "y": [1, "x"]}, "b": 1});
        assert_eq!(arguments_digest(&a), arguments_digest(&b));
        assert_ne!(arguments_digest(&a), arguments_digest(&json!({"b": 2})));
        assert_eq!(canonical_json(&b), r#"{"a":{"x":null,"y":[1,"x"]},"b":1}"#);
        assert_eq!(arguments_digest(&a).len(), 64);
    }

    #[test]
    fn annotation_patterns_require_approval_by_hint() {
        use quiver_tool::tool::{ToolAnnotations, ToolMetadata, ToolSource, ToolSpec};
        let p = ApprovalPolicy::new(["annotation:destructive"], Duration::from_secs(1)).unwrap();
        let tool = |read_only: Option<bool>| {
            let spec =
                ToolSpec::new("t", "", json!({"type": "object"})).with_metadata(ToolMetadata {
                    annotations: ToolAnnotations {
                        read_only_hint: read_only,
                        ..ToolAnnotations::default()
                    },
                    ..ToolMetadata::default()
                });
            Tool::new("mcp_s_t".into(), ToolSource::Mcp("s".into()), &spec)
        };
        assert!(p.requires_tool(&tool(None)));
        assert!(p.requires_tool(&tool(Some(false))));
        assert!(!p.requires_tool(&tool(Some(true))));
        assert!(!p.requires("annotation:destructive"));
    }

    #[test]
    fn policy_matches_whole_names() {
        let p = ApprovalPolicy::new(["mcp_github_create_*"], Duration::from_secs(1)).unwrap();
        assert!(p.requires("mcp_github_create_issue"));
        assert!(!p.requires("MCP_github_create_issue"));
        assert!(!ApprovalPolicy::default().requires("x"));
    }
}

#[cfg(test)]
mod timeout_message_tests {
    use super::*;

    #[test]
    fn sub_second_timeouts_are_not_shown_as_zero() {
        assert_eq!(seconds(50), "0.05 s");
        assert_eq!(seconds(12_000), "12 s");
        let error = ApprovalError::TimedOut {
            tool: "t".into(),
            timeout_ms: 250,
        };
        assert_eq!(
            error.to_string(),
            "`t` was not called: no approval within 0.25 s"
        );
    }
}
