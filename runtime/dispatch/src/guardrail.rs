//! Guardrails: rules by tool-name glob (or behaviour hint) and,
//! optionally, argument patterns (a JSON pointer and a regex), each
//! allowing or denying with a reason.
//!
//! A rule's `tool` written `annotation:NAME` (`read_only`, `destructive`,
//! `idempotent`, `open_world`) matches the tools whose source claims that
//! behaviour (MCP `readOnlyHint`, `destructiveHint`, ...; an unset hint
//! reads as MCP's default, see [`quiver_tool::tool::ToolAnnotations::has`]).
//! Hints are the server's claim, not a guarantee: deny by name what must
//! never run.
//!
//! Precedence (deny overrides, order does not matter):
//!
//! 1. a rule *matches* a call when its glob matches the real tool's name
//!    (whole name, case-sensitive, as registered) and every one of its
//!    argument patterns matches;
//! 2. if any matching rule is `deny`, the call is denied, with the reason
//!    of the first such rule in file order;
//! 3. otherwise, if any matching rule is `allow`, the call is allowed;
//! 4. otherwise `guardrails.default` decides (`allow` unless set).
//!
//! An argument pattern matches when the value at its pointer exists and
//! the regex finds a match in it (strings as they are, other values as
//! compact JSON; unanchored: write `^...$` for a whole-value match).

use std::sync::Arc;
use std::task::{Context, Poll};

use globset::{Glob, GlobMatcher};
use regex::Regex;
use serde_json::Value;
use tower::{Layer, Service};

use super::{BoxFuture, ChainService, DispatchCall, DispatchError, ToolOutput};
use quiver_tool::tool::{Hint, Tool, ToolAnnotations, annotation_pattern};

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Let the call through.
    Allow,
    /// Refuse the call.
    Deny,
}

/// A rule that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The tool glob is invalid.
    #[error("`{glob}` is not a valid glob: {reason}")]
    Glob {
        /// The glob.
        glob: String,
        /// Why.
        reason: String,
    },
    /// The pointer is not a JSON pointer.
    #[error("`{0}` is not a JSON pointer: use \"\" or a path starting with `/`, e.g. /repo")]
    Pointer(String),
    /// An `annotation:NAME` pattern names no hint.
    #[error("{0}")]
    Annotation(String),
    /// The regex is invalid.
    #[error("`{regex}` is not a valid regex: {reason}")]
    Regex {
        /// The regex.
        regex: String,
        /// Why.
        reason: String,
    },
}

/// A JSON pointer and a regex over the value it points to.
#[derive(Debug, Clone)]
pub struct ArgumentPattern {
    pointer: String,
    regex: Regex,
}

impl ArgumentPattern {
    /// A pattern; `pointer` is `""` (the whole arguments) or starts with `/`.
    pub fn new(pointer: &str, regex: &str) -> Result<ArgumentPattern, RuleError> {
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            return Err(RuleError::Pointer(pointer.to_owned()));
        }
        let regex = Regex::new(regex).map_err(|e| RuleError::Regex {
            regex: regex.to_owned(),
            reason: e.to_string(),
        })?;
        Ok(ArgumentPattern {
            pointer: pointer.to_owned(),
            regex,
        })
    }

    /// The pointer.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// Whether the value at the pointer exists and matches.
    pub fn matches(&self, arguments: &Value) -> bool {
        match arguments.pointer(&self.pointer) {
            None => false,
            Some(Value::String(text)) => self.regex.is_match(text),
            Some(other) => self.regex.is_match(&other.to_string()),
        }
    }
}

/// What a rule's `tool` matches: exposed names by glob, or a behaviour hint.
#[derive(Debug, Clone)]
enum ToolMatcher {
    Glob(GlobMatcher),
    Annotation(Hint),
}

/// One guardrail rule.
#[derive(Debug, Clone)]
pub struct GuardrailRule {
    tool: String,
    matcher: ToolMatcher,
    arguments: Vec<ArgumentPattern>,
    action: RuleAction,
    reason: Option<String>,
}

impl GuardrailRule {
    /// A rule for tools matching `tool` (a glob over the exposed name, or
    /// `annotation:NAME`).
    pub fn new(
        tool: &str,
        action: RuleAction,
        reason: Option<String>,
        arguments: Vec<ArgumentPattern>,
    ) -> Result<GuardrailRule, RuleError> {
        let matcher = match annotation_pattern(tool) {
            Some(Ok(hint)) => ToolMatcher::Annotation(hint),
            Some(Err(message)) => return Err(RuleError::Annotation(message)),
            None => ToolMatcher::Glob(
                Glob::new(tool)
                    .map_err(|e| RuleError::Glob {
                        glob: tool.to_owned(),
                        reason: e.kind().to_string(),
                    })?
                    .compile_matcher(),
            ),
        };
        Ok(GuardrailRule {
            tool: tool.to_owned(),
            matcher,
            arguments,
            action,
            reason,
        })
    }

    /// The tool glob.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The action.
    pub fn action(&self) -> RuleAction {
        self.action
    }

    /// Whether the rule matches a call of the tool named `tool` with
    /// these behaviour `hints` and `arguments`.
    pub fn matches(&self, tool: &str, hints: &ToolAnnotations, arguments: &Value) -> bool {
        let tool_matches = match &self.matcher {
            ToolMatcher::Glob(glob) => glob.is_match(tool),
            ToolMatcher::Annotation(hint) => hints.has(*hint),
        };
        tool_matches && self.arguments.iter().all(|p| p.matches(arguments))
    }
}

/// A call a guardrail denied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{tool}` was not called: denied by guardrail {}: {reason}", rule.map_or_else(|| "default".to_owned(), |r| format!("rule {r}")))]
pub struct GuardrailDenied {
    /// The real tool.
    pub tool: String,
    /// The 0-based index of the denying rule; `None` for the default.
    pub rule: Option<usize>,
    /// The rule's reason.
    pub reason: String,
}

/// The rules, with the default for calls no rule matches.
#[derive(Debug, Clone)]
pub struct Guardrails {
    rules: Vec<GuardrailRule>,
    default: RuleAction,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails {
            rules: Vec::new(),
            default: RuleAction::Allow,
        }
    }
}

impl Guardrails {
    /// Rules in file order, and the default.
    pub fn new(rules: Vec<GuardrailRule>, default: RuleAction) -> Guardrails {
        Guardrails { rules, default }
    }

    /// The rules.
    pub fn rules(&self) -> &[GuardrailRule] {
        &self.rules
    }

    /// Applies the precedence of the module documentation to a call of
    /// the tool named `tool` that says nothing of its behaviour (its hints
    /// read as MCP's defaults).
    pub fn check(&self, tool: &str, arguments: &Value) -> Result<(), GuardrailDenied> {
        self.check_with_hints(tool, &ToolAnnotations::default(), arguments)
    }

    /// [`Guardrails::check`] for a registered tool, with its hints.
    pub fn check_tool(&self, tool: &Tool, arguments: &Value) -> Result<(), GuardrailDenied> {
        let hints = tool.metadata().map(|m| m.annotations).unwrap_or_default();
        self.check_with_hints(tool.name(), &hints, arguments)
    }

    fn check_with_hints(
        &self,
        tool: &str,
        hints: &ToolAnnotations,
        arguments: &Value,
    ) -> Result<(), GuardrailDenied> {
        let mut allowed = false;
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.matches(tool, hints, arguments) {
                continue;
            }
            match rule.action {
                RuleAction::Deny => {
                    return Err(GuardrailDenied {
                        tool: tool.to_owned(),
                        rule: Some(index),
                        reason: rule.reason.clone().unwrap_or_else(|| {
                            format!("tools matching `{}` are denied", rule.tool)
                        }),
                    });
                }
                RuleAction::Allow => allowed = true,
            }
        }
        if allowed || self.default == RuleAction::Allow {
            Ok(())
        } else {
            Err(GuardrailDenied {
                tool: tool.to_owned(),
                rule: None,
                reason: "no guardrail rule allows this tool and the default is deny".to_owned(),
            })
        }
    }
}

/// Adds [`Guardrail`] around a service.
#[derive(Debug, Clone)]
pub struct GuardrailLayer {
    guardrails: Arc<Guardrails>,
}

impl GuardrailLayer {
    /// Checks calls against `guardrails`.
    pub fn new(guardrails: Arc<Guardrails>) -> GuardrailLayer {
        GuardrailLayer { guardrails }
    }
}

impl<S> Layer<S> for GuardrailLayer {
    type Service = Guardrail<S>;
    fn layer(&self, inner: S) -> Guardrail<S> {
        Guardrail {
            guardrails: self.guardrails.clone(),
            inner,
        }
    }
}

/// Refuses denied calls; passes the others on.
#[derive(Debug, Clone)]
pub struct Guardrail<S> {
    guardrails: Arc<Guardrails>,
    inner: S,
}

impl<S: ChainService> Service<DispatchCall> for Guardrail<S> {
    type Response = ToolOutput;
    type Error = DispatchError;
    type Future = BoxFuture<'static, Result<ToolOutput, DispatchError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), DispatchError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, call: DispatchCall) -> Self::Future {
        match self.guardrails.check_tool(&call.tool, &call.arguments) {
            Ok(()) => self.inner.call(call),
            Err(denied) => Box::pin(std::future::ready(Err(denied.into()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(tool: &str, action: RuleAction, args: &[(&str, &str)]) -> GuardrailRule {
        let args = args
            .iter()
            .map(|(p, r)| ArgumentPattern::new(p, r).unwrap())
            .collect();
        GuardrailRule::new(tool, action, Some(format!("{tool} {action:?}")), args).unwrap()
    }

    #[test]
    fn deny_overrides_allow_whatever_the_order() {
        let g = Guardrails::new(
            vec![
                rule("mcp_github_*", RuleAction::Allow, &[]),
                rule("mcp_github_delete_*", RuleAction::Deny, &[]),
            ],
            RuleAction::Deny,
        );
        assert!(g.check("mcp_github_list", &json!({})).is_ok());
        let denied = g.check("mcp_github_delete_repo", &json!({})).unwrap_err();
        assert_eq!(denied.rule, Some(1));
        assert!(
            g.check("mcp_gitlab_list", &json!({}))
                .unwrap_err()
                .rule
                .is_none()
        );
    }

    #[test]
    fn argument_patterns_must_all_match() {
        let g = Guardrails::new(
            vec![rule(
                "sqlite_query",
                RuleAction::Deny,
                &[("/sql", "(?i)^\\s*(drop|delete)"), ("/path", "prod")],
            )],
            RuleAction::Allow,
        );
        assert!(
            g.check("sqlite_query", &json!({"sql": "DROP t", "path": "prod.db"}))
                .is_err()
        );
        assert!(
            g.check("sqlite_query", &json!({"sql": "DROP t", "path": "dev.db"}))
                .is_ok()
        );
        assert!(g.check("sqlite_query", &json!({"sql": "DROP t"})).is_ok());
        assert!(
            g.check("sqlite_query", &json!({"sql": "select", "path": "prod"}))
                .is_ok()
        );
    }

    #[test]
    fn non_string_values_match_as_json() {
        let p = ArgumentPattern::new("/n", "^4[0-9]$").unwrap();
        assert!(p.matches(&json!({"n": 42})));
        assert!(!p.matches(&json!({"n": 7})));
        assert!(ArgumentPattern::new("n", "x").is_err());
        assert!(ArgumentPattern::new("/n", "(").is_err());
    }

    #[test]
    fn annotation_rules_match_claimed_hints_and_read_silence_as_mcp_defaults() {
        let g = Guardrails::new(
            vec![rule("annotation:open_world", RuleAction::Deny, &[])],
            RuleAction::Allow,
        );
        let closed = ToolAnnotations {
            open_world_hint: Some(false),
            ..ToolAnnotations::default()
        };
        assert!(g.check_with_hints("t", &closed, &json!({})).is_ok());
        assert!(g.check("t", &json!({})).is_err());
        let destructive =
            GuardrailRule::new("annotation:destructive", RuleAction::Deny, None, vec![]).unwrap();
        let read_only = ToolAnnotations {
            read_only_hint: Some(true),
            ..ToolAnnotations::default()
        };
        assert!(!destructive.matches("t", &read_only, &json!({})));
        assert!(destructive.matches("t", &ToolAnnotations::default(), &json!({})));
        let error = GuardrailRule::new("annotation:scary", RuleAction::Deny, None, vec![])
            .unwrap_err()
            .to_string();
        assert!(error.contains("annotation:destructive"), "{error}");
    }

    #[test]
    fn names_match_exactly() {
        let g = Guardrails::new(vec![rule("echo", RuleAction::Deny, &[])], RuleAction::Allow);
        assert!(g.check("echo", &json!({})).is_err());
        assert!(g.check("Echo", &json!({})).is_ok());
        assert!(g.check("echo ", &json!({})).is_ok());
    }
}
