//! A subagent gets a subset of its parent's grant: asking for more is an
//! error, and whatever it sees or calls stays inside its own grant and its
//! parent's ("not available in this session", no schema leak), even when
//! handed an assembly built for a wider scope.

use quiver_tests::dispatch as dispatch_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use dispatch_support::fixture;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::{ApprovalPolicy, Guardrails, SessionError};
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

#[tokio::test]
async fn subagent_asking_for_more_is_an_error() {
    let f = fixture(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let parent = f.session("parent", &["core", "mcp-github"]);
    let snapshot = f.registry.snapshot();
    for grant in [
        "*",
        "mcp-*",
        "mcp-secret",
        "mcp_secret_launch",
        "mcp_*",
        "plugin-text",
    ] {
        let err = parent
            .subagent("child", Scope::new([grant]).unwrap(), &snapshot)
            .unwrap_err();
        assert!(matches!(err, SessionError::BeyondParent { .. }), "{grant}");
    }
    assert!(
        parent
            .subagent("child", Scope::new(["mcp-github"]).unwrap(), &snapshot)
            .is_ok()
    );
}

#[tokio::test]
async fn subagent_sees_and_calls_only_its_grant() {
    let f = fixture(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let parent = f.session("parent", &["core", "mcp-github"]);
    let snapshot = f.registry.snapshot();
    let child = parent
        .subagent(
            "child",
            Scope::new(["mcp_github_list_issues"]).unwrap(),
            &snapshot,
        )
        .unwrap();

    let search = f
        .call(
            &child,
            "tool_search",
            json!({"query": "list issues create delete launch repository", "limit": 20}),
        )
        .await
        .unwrap();
    let names: Vec<&str> = search["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mcp_github_list_issues"]);

    for name in ["mcp_github_create_issue", "mcp_secret_launch", "read_file"] {
        let described = f
            .call(&child, "tool_describe", json!({"name": name}))
            .await
            .unwrap_err();
        assert_eq!(described.code(), "not_available", "{name}");
        assert!(described.to_json().get("input_schema").is_none());
        let called = f
            .call(&child, "tool_call", json!({"name": name, "arguments": {}}))
            .await
            .unwrap_err();
        assert_eq!(called.code(), "not_available", "{name}");
        assert!(!called.to_json().to_string().contains("properties"));
    }

    // Handed an assembly built for everything, the dispatcher still applies
    // the session's own scope.
    let wide = f.assembler.assemble(&snapshot, &Scope::all(), 200_000);
    let err = f
        .dispatcher
        .dispatch(
            &child,
            &wide,
            "tool_call",
            &json!({"name": "mcp_secret_launch", "arguments": {}}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_available");
    assert_eq!(f.invoked.load(Ordering::SeqCst), 0);

    f.call(
        &child,
        "tool_call",
        json!({"name": "mcp_github_list_issues"}),
    )
    .await
    .unwrap();
    assert_eq!(f.invoked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tools_added_later_outside_the_parent_stay_out_of_reach() {
    let f = fixture(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(DenyAll),
    );
    let parent = f.session("parent", &["mcp-github"]);
    // `mcp_gitlab_*` matches no tool yet, but it is no part of the
    // parent's grant either: refused.
    let child = parent
        .subagent(
            "child",
            Scope::new(["mcp-github", "mcp_gitlab_*"]).unwrap(),
            &f.registry.snapshot(),
        )
        .unwrap_err();
    assert!(matches!(child, SessionError::BeyondParent { .. }));
    let child = parent
        .subagent(
            "child",
            Scope::new(["mcp-github"]).unwrap(),
            &f.registry.snapshot(),
        )
        .unwrap();
    // A server added afterwards stays outside the subagent's reach.
    f.registry.set_source_tools(
        ToolSource::Mcp("gitlab".into()),
        vec![ToolSpec::new("merge", "Merge", json!({"type": "object"}))],
    );
    let err = f
        .call(&child, "tool_call", json!({"name": "mcp_gitlab_merge"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "not_available");
}
