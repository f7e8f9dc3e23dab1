//! A real MCP server's tool runs through the whole dispatch chain: reached
//! through `tool_call`, stopped by a guardrail keyed on its real name, and
//! recorded in the feed under that name.

use quiver_tests::mcp;

use std::sync::Arc;
use std::time::Duration;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::guardrail::{GuardrailRule, RuleAction};
use quiver_dispatch::{
    ActivityFeed, ApprovalPolicy, ChainParts, Dispatcher, Executors, Guardrails, Hooks, Session,
    standard_chain,
};
use quiver_mcp::McpExecutor;
use quiver_tool::scope::Scope;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn mcp_echo_through_tool_call() {
    let (registry, host) = mcp::start(vec![mcp::test_server("tester", &[])]);
    mcp::ready(&host, "tester").await;
    let host = Arc::new(host);

    let deny_add = GuardrailRule::new(
        "mcp_tester_add",
        RuleAction::Deny,
        Some("no sums".into()),
        vec![],
    )
    .unwrap();
    let chain = standard_chain(ChainParts {
        hooks: Arc::new(Hooks::new()),
        guardrails: Arc::new(Guardrails::new(vec![deny_add], RuleAction::Allow)),
        approval: Arc::new(ApprovalPolicy::default()),
        approver: Arc::new(DenyAll),
        max_result_chars: 10_000,
        call_timeout: Duration::from_secs(30),
        executor: Arc::new(Executors::new().with_mcp(Arc::new(McpExecutor::new(host.clone())))),
    });
    let dispatcher = Dispatcher::new(chain);
    let feed = Arc::new(ActivityFeed::new(Vec::<String>::new(), 64));
    let session = Session::new("s1", Scope::new(["mcp-tester"]).unwrap(), feed);
    let mut events = session.subscribe();
    let assembly = session.assemble(
        &Assembler::new(ToolSearchConfig::default()),
        &registry.snapshot(),
        200_000,
    );

    let out = dispatcher
        .dispatch(
            &session,
            &assembly,
            "tool_call",
            &json!({"name": "mcp_tester_echo", "arguments": {"text": "hello"}}),
        )
        .await
        .unwrap();
    assert!(out.to_string().contains("hello"), "{out}");

    let denied = dispatcher
        .dispatch(
            &session,
            &assembly,
            "tool_call",
            &json!({"name": "mcp_tester_add", "arguments": {"a": 1, "b": 2}}),
        )
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");

    let seen: Vec<String> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| {
            let line = e.render();
            line.rsplit_once("  ")
                .map(|(head, _)| head.to_owned())
                .unwrap_or(line)
        })
        .collect();
    assert_eq!(
        seen,
        [
            "mcp_tester_echo via tool_call  ok",
            "mcp_tester_add via tool_call  denied",
        ]
    );
    host.shutdown().await;
}
