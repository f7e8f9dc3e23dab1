//! A guardrail rule keyed on the real tool (and an argument pattern)
//! denies the call whether it comes through `tool_call` or directly by
//! name; the tool never runs, and the feed shows the real tool name.

use quiver_tests::dispatch as dispatch_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dispatch_support::{drain, fixture};
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::guardrail::{ArgumentPattern, GuardrailRule, RuleAction};
use quiver_dispatch::{ApprovalPolicy, Guardrails, Status};
use serde_json::json;

#[tokio::test]
async fn deny_rule_applies_to_the_real_tool_behind_tool_call() {
    let rule = GuardrailRule::new(
        "mcp_github_create_*",
        RuleAction::Deny,
        Some("no issues in production repositories".into()),
        vec![ArgumentPattern::new("/repo", "^prod/").unwrap()],
    )
    .unwrap();
    let f = fixture(
        Guardrails::new(vec![rule], RuleAction::Allow),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let session = f.session("s1", &["core", "mcp-github"]);
    let mut events = session.subscribe();

    let denied = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": {"repo": "prod/api", "title": "t"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");
    assert!(
        denied.to_string().contains("no issues in production"),
        "{denied}"
    );

    // The same tool called directly by name (deferred, never searched for).
    let denied = f
        .call(
            &session,
            "mcp_github_create_issue",
            json!({"repo": "prod/web", "title": "t"}),
        )
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");
    // Arguments as a JSON string are unwrapped the same way.
    let denied = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": "{\"repo\": \"prod/x\", \"title\": \"t\"}"}),
        )
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);

    let ok = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_create_issue", "arguments": {"repo": "dev/api", "title": "t"}}),
        )
        .await
        .unwrap();
    assert_eq!(ok["ran"], "create_issue");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 1);

    let events = drain(&mut events);
    let seen: Vec<(String, bool, Status)> = events
        .iter()
        .map(|e| (e.tool.clone(), e.via_bridge, e.status))
        .collect();
    let tool = "mcp_github_create_issue".to_owned();
    assert_eq!(
        seen,
        [
            (tool.clone(), true, Status::Denied),
            (tool.clone(), false, Status::Denied),
            (tool.clone(), true, Status::Denied),
            (tool.clone(), true, Status::Ok),
        ]
    );
    assert!(
        events[0]
            .render()
            .starts_with("mcp_github_create_issue via tool_call  denied  "),
        "{}",
        events[0].render()
    );
    assert!(
        events[1]
            .render()
            .starts_with("mcp_github_create_issue  denied  ")
    );
}

#[tokio::test]
async fn default_deny_lets_only_allowed_tools_through() {
    let allow = GuardrailRule::new("mcp_github_list_*", RuleAction::Allow, None, vec![]).unwrap();
    let f = fixture(
        Guardrails::new(vec![allow], RuleAction::Deny),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let session = f.session("s1", &["*"]);
    f.call(
        &session,
        "tool_call",
        json!({"name": "mcp_github_list_issues"}),
    )
    .await
    .unwrap();
    let denied = f
        .call(&session, "read_file", json!({"path": "/etc/passwd"}))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 1);
}
