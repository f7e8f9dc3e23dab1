//! Dispatch chain overhead: one call of a trivial in-process tool through
//! the standard chain (pre-call hooks, guardrails, approval, argument
//! validation, post-call hooks, result cap, execution with timeout),
//! against the same tool called through its executor alone.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::guardrail::{ArgumentPattern, GuardrailRule, RuleAction};
use quiver_dispatch::{
    ActivityFeed, ApprovalPolicy, ChainParts, CoreTools, DispatchCall, Dispatcher, Executors,
    Guardrails, Hooks, Session, ToolExecutor, standard_chain,
};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let registry = ToolRegistry::new();
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![ToolSpec::new(
            "create_issue",
            "Create an issue",
            json!({"type": "object", "properties": {"repo": {"type": "string"}, "title": {"type": "string"}}, "required": ["repo", "title"]}),
        )],
    );
    let tools: Arc<CoreTools> =
        Arc::new(CoreTools::new().with_fn("create_issue", |_| Ok(json!({"number": 1}))));
    let rules = vec![
        GuardrailRule::new("mcp_github_delete_*", RuleAction::Deny, None, vec![]).unwrap(),
        GuardrailRule::new(
            "mcp_github_*",
            RuleAction::Deny,
            None,
            vec![ArgumentPattern::new("/repo", "^prod/").unwrap()],
        )
        .unwrap(),
    ];
    let chain = standard_chain(ChainParts {
        hooks: Arc::new(Hooks::new()),
        guardrails: Arc::new(Guardrails::new(rules, RuleAction::Allow)),
        approval: Arc::new(
            ApprovalPolicy::new(["mcp_github_merge_*"], Duration::from_secs(60)).unwrap(),
        ),
        approver: Arc::new(DenyAll),
        max_result_chars: 100_000,
        call_timeout: Duration::from_secs(30),
        executor: Arc::new(Executors::new().with_mcp(tools.clone())),
    });
    let dispatcher = Dispatcher::new(chain);
    let session = Session::new(
        "bench",
        Scope::all(),
        Arc::new(ActivityFeed::new(["token"], 1024)),
    );
    let assembly = session.assemble(
        &Assembler::new(ToolSearchConfig::default()),
        &registry.snapshot(),
        200_000,
    );
    let arguments =
        json!({"name": "mcp_github_create_issue", "arguments": {"repo": "dev/api", "title": "t"}});
    // Warm the validator cache.
    runtime
        .block_on(dispatcher.dispatch(&session, &assembly, "tool_call", &arguments))
        .unwrap();

    let mut group = c.benchmark_group("dispatch");
    group.bench_function("executor_alone", |b| {
        let resolved = bridge::call(&assembly, &arguments).unwrap();
        let call = DispatchCall::new(session.clone(), resolved);
        b.iter(|| {
            runtime
                .block_on(tools.execute(&call.tool, &call.arguments))
                .unwrap()
        })
    });
    group.bench_function("tool_call_through_chain", |b| {
        b.iter(|| {
            runtime
                .block_on(dispatcher.dispatch(&session, &assembly, "tool_call", &arguments))
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
