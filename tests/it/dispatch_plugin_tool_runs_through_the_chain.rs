//! A real `.so` plugin tool runs through the whole chain: reached through
//! `tool_call`, checked by hooks and guardrails, its result cut by the cap,
//! and recorded in the feed under its real name.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::guardrail::{ArgumentPattern, GuardrailRule, RuleAction};
use quiver_dispatch::hooks::PreHook;
use quiver_dispatch::{
    ActivityFeed, ApprovalPolicy, ChainParts, DispatchCall, Dispatcher, Executors, Guardrails,
    Hooks, Session, standard_chain,
};
use quiver_plugins::PluginExecutor;
use quiver_plugins::{PluginHost, PluginHostOptions};
use quiver_tests::{install_plugin, plugin_so};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use serde_json::json;

struct CountingHook(AtomicUsize);

impl PreHook for CountingHook {
    fn name(&self) -> &str {
        "count"
    }
    fn before(&self, call: &mut DispatchCall) -> Result<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        assert_eq!(call.tool.name(), "echo");
        Ok(())
    }
}

#[tokio::test]
async fn echo_plugin_through_tool_call() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("plugins");
    std::fs::create_dir(&dir).unwrap();
    install_plugin(&plugin_so("echo_v1"), &dir, "echo.so");
    let registry = Arc::new(ToolRegistry::new());
    let mut options = PluginHostOptions::new(temp.path().join("state"));
    options.stable_wait = Duration::from_millis(5);
    let host = Arc::new(PluginHost::new(registry.clone(), options).unwrap());
    host.load_dirs(std::slice::from_ref(&dir));

    let hook = Arc::new(CountingHook(AtomicUsize::new(0)));
    let deny = GuardrailRule::new(
        "echo",
        RuleAction::Deny,
        Some("no shouting".into()),
        vec![ArgumentPattern::new("/text", "^[A-Z ]+$").unwrap()],
    )
    .unwrap();
    let chain = standard_chain(ChainParts {
        hooks: Arc::new(Hooks::new().pre("echo", hook.clone()).unwrap()),
        guardrails: Arc::new(Guardrails::new(vec![deny], RuleAction::Allow)),
        approval: Arc::new(ApprovalPolicy::default()),
        approver: Arc::new(DenyAll),
        max_result_chars: 1000,
        call_timeout: Duration::from_secs(30),
        executor: Arc::new(Executors::new().with_plugins(Arc::new(PluginExecutor::new(host)))),
    });
    let dispatcher = Dispatcher::new(chain);
    let feed = Arc::new(ActivityFeed::new(["text"], 64));
    let session = Session::new("s1", Scope::new(["plugin-echo"]).unwrap(), feed);
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
            &json!({"name": "echo", "arguments": {"text": "hello"}}),
        )
        .await
        .unwrap();
    assert_eq!(out, json!({"version": 1, "arguments": {"text": "hello"}}));

    let denied = dispatcher
        .dispatch(
            &session,
            &assembly,
            "tool_call",
            &json!({"name": "echo", "arguments": {"text": "HELLO"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(denied.code(), "denied_by_guardrail");

    let long = "x".repeat(5000);
    let cut = dispatcher
        .dispatch(&session, &assembly, "echo", &json!({"text": long}))
        .await
        .unwrap();
    let cut = cut.as_str().unwrap();
    assert!(cut.ends_with("characters]"), "{cut}");
    assert!(cut.contains("showed 1000 of"), "{cut}");

    let invalid = dispatcher
        .dispatch(&session, &assembly, "echo", &json!({"delay_ms": "soon"}))
        .await
        .unwrap_err();
    assert_eq!(invalid.code(), "invalid_arguments");
    assert_eq!(hook.0.load(Ordering::SeqCst), 4);

    let seen: Vec<String> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| {
            // `text` is a redacted key in this feed.
            if let Some(text) = e.arguments.get("text") {
                assert_eq!(text, "[redacted]");
            }
            let line = e.render();
            line.rsplit_once("  ")
                .map(|(head, _)| head.to_owned())
                .unwrap_or(line)
        })
        .collect();
    assert_eq!(
        seen,
        [
            "echo via tool_call  ok",
            "echo via tool_call  denied",
            "echo  ok",
            "echo  error",
        ]
    );
}
