//! Attempts to get around a guardrail by naming the tool differently:
//! case changes, Unicode look-alikes, surrounding whitespace, nested
//! `tool_call`, a bridge name in another case. None reaches the tool or a
//! different rule; names are matched exactly as registered.

use quiver_tests::dispatch as dispatch_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dispatch_support::{drain, fixture};
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::guardrail::{GuardrailRule, RuleAction};
use quiver_dispatch::{ApprovalPolicy, Guardrails, Status};
use serde_json::json;

const VARIANTS: [&str; 9] = [
    "MCP_github_delete_repo",
    "mcp_github_Delete_repo",
    "mcp_github_delete_repo ",
    " mcp_github_delete_repo",
    "mcp_github_delete_repo\n",
    "mcp_github_del\u{0435}te_repo",  // Cyrillic е
    "mcp_github_delete_rep\u{043e}",  // Cyrillic о
    "ｍcp_github_delete_repo",        // fullwidth m
    "mcp_github_delete\u{200b}_repo", // zero-width space
];

fn deny_delete() -> Guardrails {
    let deny = GuardrailRule::new(
        "mcp_github_delete_repo",
        RuleAction::Deny,
        Some("deleting repositories is not allowed".into()),
        vec![],
    )
    .unwrap();
    Guardrails::new(vec![deny], RuleAction::Allow)
}

#[tokio::test]
async fn name_variants_never_reach_the_tool() {
    let f = fixture(deny_delete(), ApprovalPolicy::default(), Arc::new(DenyAll));
    let session = f.session("s1", &["*"]);
    let mut events = session.subscribe();
    for variant in VARIANTS {
        let through = f
            .call(
                &session,
                "tool_call",
                json!({"name": variant, "arguments": {"repo": "x"}}),
            )
            .await
            .unwrap_err();
        assert_eq!(through.code(), "unknown_tool", "{variant:?}: {through}");
        let direct = f
            .call(&session, variant, json!({"repo": "x"}))
            .await
            .unwrap_err();
        assert_eq!(direct.code(), "unknown_tool", "{variant:?}: {direct}");
    }
    let exact = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_delete_repo", "arguments": {"repo": "x"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(exact.code(), "denied_by_guardrail");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);
    let events = drain(&mut events);
    assert_eq!(events.len(), VARIANTS.len() * 2 + 1);
    assert!(events.iter().all(|e| e.status != Status::Ok));
}

#[tokio::test]
async fn nested_tool_call_is_refused() {
    let f = fixture(deny_delete(), ApprovalPolicy::default(), Arc::new(DenyAll));
    let session = f.session("s1", &["*"]);
    for bridge in ["tool_call", "tool_search", "tool_describe"] {
        let nested = f
            .call(
                &session,
                "tool_call",
                json!({"name": bridge, "arguments": {"name": "mcp_github_delete_repo", "arguments": {"repo": "x"}}}),
            )
            .await
            .unwrap_err();
        assert_eq!(nested.code(), "bridge_tool_named", "{bridge}");
    }
    for odd in ["Tool_Call", "tool_call ", "TOOL_CALL"] {
        let err = f
            .call(
                &session,
                odd,
                json!({"name": "mcp_github_delete_repo", "arguments": {"repo": "x"}}),
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), "unknown_tool", "{odd:?}");
    }
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_case_variant_rule_does_not_open_the_real_tool() {
    // Allowing `MCP_GITHUB_*` must not allow `mcp_github_*` under default deny.
    let allow = GuardrailRule::new("MCP_GITHUB_*", RuleAction::Allow, None, vec![]).unwrap();
    let f = fixture(
        Guardrails::new(vec![allow], RuleAction::Deny),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let session = f.session("s1", &["*"]);
    let err = f
        .call(
            &session,
            "tool_call",
            json!({"name": "mcp_github_list_issues"}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "denied_by_guardrail");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);
}
