//! A shared fixture for the dispatch tests: a registry with one core tool
//! and two MCP servers whose tools are in-process closures that count how
//! often they really ran, behind the standard chain.
// Each test file uses a different part of the fixture.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use quiver_catalog::assembly::Assembler;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_dispatch::{
    ActivityFeed, ApprovalPolicy, Approver, ChainParts, CoreTools, DispatchError, Dispatcher,
    Event, Executors, Guardrails, Hooks, Session, standard_chain,
};
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use quiver_tool::tool::{ToolSource, ToolSpec};
use serde_json::{Value, json};

/// The registry, the dispatcher and what the tools did.
pub struct Fixture {
    pub registry: Arc<ToolRegistry>,
    pub assembler: Assembler,
    pub dispatcher: Dispatcher,
    pub feed: Arc<ActivityFeed>,
    /// How many times a tool implementation actually ran.
    pub invoked: Arc<AtomicUsize>,
}

/// The approvals a daemon keeps, in a SQLite store of their own (removed
/// with the returned directory), watched for answers: the approver
/// `quiver serve` gives its chain.
pub async fn stored_approvals() -> (tempfile::TempDir, Arc<quiver_daemon::approvals::Approvals>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn quiver_store::Store> =
        Arc::new(quiver_store::sqlite::SqliteStore::open(&dir.path().join("quiver.db")).unwrap());
    let approvals = quiver_daemon::approvals::Approvals::new(store, "test");
    tokio::spawn(approvals.clone().watch());
    (dir, approvals)
}

/// The approver of [`stored_approvals`].
pub fn approver(approvals: &Arc<quiver_daemon::approvals::Approvals>) -> Arc<dyn Approver> {
    Arc::new(quiver_daemon::approvals::StoredApprover(approvals.clone()))
}

/// The fixture with these guardrails and approval settings.
pub fn fixture(
    guardrails: Guardrails,
    policy: ApprovalPolicy,
    approver: Arc<dyn Approver>,
) -> Fixture {
    fixture_with(guardrails, policy, approver, Vec::new())
}

/// The fixture with every call allowed and nothing to approve, plus the
/// tools of `shop`, an MCP server whose tools echo their arguments like
/// the others (`mcp_shop_NAME`).
pub fn fixture_with_shop(shop: Vec<ToolSpec>) -> Fixture {
    fixture_with(
        Guardrails::default(),
        ApprovalPolicy::default(),
        Arc::new(quiver_dispatch::approval::DenyAll),
        shop,
    )
}

fn fixture_with(
    guardrails: Guardrails,
    policy: ApprovalPolicy,
    approver: Arc<dyn Approver>,
    shop: Vec<ToolSpec>,
) -> Fixture {
    let registry = Arc::new(ToolRegistry::new());
    let shop_names: Vec<String> = shop.iter().map(|spec| spec.name.clone()).collect();
    if !shop.is_empty() {
        registry.set_source_tools(ToolSource::Mcp("shop".into()), shop);
    }
    registry.set_source_tools(
        ToolSource::Core,
        vec![ToolSpec::new(
            "read_file",
            "Read a file",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )],
    );
    registry.set_source_tools(
        ToolSource::Mcp("github".into()),
        vec![
            ToolSpec::new(
                "create_issue",
                "Create an issue",
                json!({"type": "object", "properties": {"repo": {"type": "string"}, "title": {"type": "string"}, "tag": {"type": "string"}}, "required": ["repo", "title"]}),
            ),
            ToolSpec::new(
                "delete_repo",
                "Delete a repository",
                json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
            ),
            ToolSpec::new("list_issues", "List issues", json!({"type": "object"})),
        ],
    );
    registry.set_source_tools(
        ToolSource::Mcp("secret".into()),
        vec![ToolSpec::new(
            "launch",
            "Launch",
            json!({"type": "object", "properties": {"code": {"type": "string"}}}),
        )],
    );
    let invoked = Arc::new(AtomicUsize::new(0));
    let tools = [
        "read_file",
        "create_issue",
        "delete_repo",
        "list_issues",
        "launch",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(shop_names)
    .fold(CoreTools::new(), |tools, name| {
        let invoked = invoked.clone();
        let ran = name.clone();
        tools.with_fn(&name, move |arguments| {
            invoked.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"ran": ran, "arguments": arguments}))
        })
    });
    let tools: Arc<CoreTools> = Arc::new(tools);
    let executors = Executors::new().with_core(tools.clone()).with_mcp(tools);
    let chain = standard_chain(ChainParts {
        hooks: Arc::new(Hooks::new()),
        guardrails: Arc::new(guardrails),
        approval: Arc::new(policy),
        approver,
        max_result_chars: 100_000,
        call_timeout: Duration::from_secs(30),
        executor: Arc::new(executors),
    });
    Fixture {
        registry,
        assembler: Assembler::new(ToolSearchConfig::default()),
        dispatcher: Dispatcher::new(chain),
        feed: Arc::new(ActivityFeed::new(["token"], 8192)),
        invoked,
    }
}

impl Fixture {
    /// A session granted `grants`.
    pub fn session(&self, id: &str, grants: &[&str]) -> Arc<Session> {
        Session::new(
            id,
            Scope::new(grants.iter().copied()).unwrap(),
            self.feed.clone(),
        )
    }

    /// Assembles this turn for `session` and dispatches one call.
    pub async fn call(
        &self,
        session: &Arc<Session>,
        name: &str,
        arguments: Value,
    ) -> Result<Value, DispatchError> {
        let assembly = session.assemble(&self.assembler, &self.registry.snapshot(), 200_000);
        self.dispatcher
            .dispatch(session, &assembly, name, &arguments)
            .await
    }
}

/// Every event received so far.
pub fn drain(receiver: &mut tokio::sync::broadcast::Receiver<Arc<Event>>) -> Vec<Arc<Event>> {
    let mut events = Vec::new();
    while let Ok(event) = receiver.try_recv() {
        events.push(event);
    }
    events
}
