//! `tool_search` and `tool_describe` run no tool hooks but are recorded in
//! the feed; a deferred tool called directly by name, without searching
//! first, runs through the same chain (hooks included) as through
//! `tool_call`; a tool slower than the call timeout is reported as timed out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_dispatch::approval::DenyAll;
use quiver_dispatch::hooks::PreHook;
use quiver_dispatch::{
    ActivityFeed, ApprovalPolicy, ChainParts, CoreTools, DispatchCall, Dispatcher, Executors,
    Guardrails, Hooks, Session, Status, standard_chain,
};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::json;

struct Seen(std::sync::Mutex<Vec<String>>);

impl PreHook for Seen {
    fn name(&self) -> &str {
        "seen"
    }
    fn before(&self, call: &mut DispatchCall) -> Result<(), String> {
        self.0.lock().unwrap().push(call.tool.name().to_owned());
        Ok(())
    }
}

#[tokio::test]
async fn bridge_answers_are_recorded_and_tools_hooked() {
    let registry = Arc::new(ToolRegistry::new());
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            ToolSpec::new("list_issues", "List issues", json!({"type": "object"})),
            ToolSpec::new("hang", "Never answers", json!({"type": "object"})),
        ],
    );
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let tools = CoreTools::new()
        .with_fn("list_issues", move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(json!([]))
        })
        .with_async("hang", |_| std::future::pending());
    let seen = Arc::new(Seen(Default::default()));
    let chain = standard_chain(ChainParts {
        hooks: Arc::new(Hooks::new().pre("*", seen.clone()).unwrap()),
        guardrails: Arc::new(Guardrails::default()),
        approval: Arc::new(ApprovalPolicy::default()),
        approver: Arc::new(DenyAll),
        max_result_chars: 1000,
        call_timeout: Duration::from_millis(20),
        executor: Arc::new(Executors::new().with_mcp(Arc::new(tools))),
    });
    let dispatcher = Dispatcher::new(chain);
    let session = Session::new("s1", Scope::all(), Arc::new(ActivityFeed::default()));
    let mut events = session.subscribe();
    let assembly = session.assemble(
        &Assembler::new(ToolSearchConfig::default()),
        &registry.snapshot(),
        200_000,
    );
    let run = |name: &'static str, arguments: serde_json::Value| {
        let (dispatcher, session) = (dispatcher.clone(), session.clone());
        let assembly = &assembly;
        async move {
            dispatcher
                .dispatch(&session, assembly, name, &arguments)
                .await
        }
    };
    run("tool_search", json!({"query": "issues"}))
        .await
        .unwrap();
    run("tool_describe", json!({"name": "mcp_github_list_issues"}))
        .await
        .unwrap();
    run("tool_search", json!({})).await.unwrap_err();
    run("mcp_github_list_issues", json!({})).await.unwrap();
    run("tool_call", json!({"name": "mcp_github_list_issues"}))
        .await
        .unwrap();
    let timed_out = run("tool_call", json!({"name": "mcp_github_hang"}))
        .await
        .unwrap_err();
    assert_eq!(timed_out.code(), "timed_out");
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            "mcp_github_list_issues",
            "mcp_github_list_issues",
            "mcp_github_hang"
        ]
    );
    let seen: Vec<(String, bool, Status)> = std::iter::from_fn(|| events.try_recv().ok())
        .map(|e| (e.tool.clone(), e.via_bridge, e.status))
        .collect();
    let s = |t: &str, b: bool, st: Status| (t.to_owned(), b, st);
    assert_eq!(
        seen,
        [
            s("tool_search", false, Status::Ok),
            s("tool_describe", false, Status::Ok),
            s("tool_search", false, Status::Error),
            s("mcp_github_list_issues", false, Status::Ok),
            s("mcp_github_list_issues", true, Status::Ok),
            s("mcp_github_hang", true, Status::TimedOut),
        ]
    );
}
