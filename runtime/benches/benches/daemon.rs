//! The daemon's own costs, apart from the model's and the tools' time:
//! one agent turn (a search, a call through `tool_call`, an answer) against
//! an in-process scripted model over the 1,138 tools of `mcp-popular`, with
//! and without storing the messages in SQLite; the store's writes; and one
//! tool call through the MCP gateway over loopback HTTP (rmcp client to
//! rmcp server) against the same call dispatched in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use quiver_agent::{Agent, DiscardLog, Turn, TurnLog};
use quiver_catalog::catalog_file;
use quiver_daemon::config;
use quiver_daemon::{Daemon, DaemonOptions, api};
use quiver_dispatch::BoxFuture;
use quiver_model::{
    Completion, CompletionRequest, FinishReason, Message, ModelError, ModelProvider, Role,
    ToolCall, Usage,
};
use quiver_store::{EventRecord, Store, StoreError};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Searches, calls `read_file` through `tool_call`, then answers.
struct ScriptedModel;

impl ModelProvider for ScriptedModel {
    fn complete<'a>(
        &'a self,
        request: CompletionRequest<'a>,
    ) -> BoxFuture<'a, Result<Completion, ModelError>> {
        let step = request
            .messages
            .iter()
            .rev()
            .take_while(|m| m.role != Role::User)
            .filter(|m| m.role == Role::Assistant)
            .count();
        let call = |name: &str, arguments: serde_json::Value| ToolCall {
            id: format!("c{step}"),
            name: name.to_owned(),
            arguments: arguments.to_string(),
        };
        let message = match step {
            0 => Message::assistant(
                "",
                vec![call("tool_search", json!({"query": "read a file"}))],
            ),
            1 => Message::assistant(
                "",
                vec![call(
                    "tool_call",
                    json!({"name": "read_file", "arguments": {"path": "notes.txt"}}),
                )],
            ),
            _ => Message::assistant("the file says hello", Vec::new()),
        };
        let finish = if message.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        Box::pin(std::future::ready(Ok(Completion {
            message,
            finish,
            usage: Usage::default(),
        })))
    }

    fn name(&self) -> &str {
        "scripted"
    }

    fn context_tokens(&self) -> u64 {
        200_000
    }
}

struct StoreLog<'a>(&'a dyn Store, &'a str);

#[async_trait::async_trait]
impl TurnLog for StoreLog<'_> {
    async fn append(&mut self, message: &Message) -> Result<(), StoreError> {
        self.0.append_message(self.1, message).await.map(|_| ())
    }
}

fn catalog(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/catalogs")
        .join(name)
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let work = scratch.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "hello\n").unwrap();
    let text = format!(
        "core_tools:\n  workspace: {}\nserve:\n  state_dir: {}\n",
        work.display(),
        scratch.path().join("state").display()
    );
    let config = config::parse(&text, "bench.yaml").unwrap().config;
    let daemon = runtime
        .block_on(Daemon::start(config.clone(), DaemonOptions::default()))
        .unwrap();
    let document = catalog_file::read(&catalog("mcp-popular.json")).unwrap();
    catalog_file::register(daemon.registry(), [document]);
    let session = runtime
        .block_on(daemon.create_session(quiver_daemon::NewSession::default()))
        .unwrap();
    let live = runtime.block_on(daemon.session(&session.id)).unwrap();
    let agent = Agent::new(
        daemon.registry().clone(),
        Arc::new(quiver_catalog::assembly::Assembler::new(
            config.tool_search.clone(),
        )),
        daemon.dispatcher().clone(),
        config.agent.clone(),
    );
    let store = daemon.store().clone();

    let mut group = c.benchmark_group("agent");
    group.bench_function("turn_3_steps_1138_tools", |b| {
        b.iter(|| {
            let mut history = Vec::new();
            let outcome = runtime
                .block_on(agent.run_turn(
                    Turn {
                        session: &live.session,
                        model: &ScriptedModel,
                        context_tokens: 200_000,
                        history: &mut history,
                        log: &mut DiscardLog,
                    },
                    "what does notes.txt say?",
                ))
                .unwrap();
            assert_eq!(outcome.steps, 3);
        })
    });
    group.bench_function("turn_3_steps_1138_tools_stored", |b| {
        b.iter(|| {
            let mut history = Vec::new();
            runtime
                .block_on(agent.run_turn(
                    Turn {
                        session: &live.session,
                        model: &ScriptedModel,
                        context_tokens: 200_000,
                        history: &mut history,
                        log: &mut StoreLog(&*store, &session.id),
                    },
                    "what does notes.txt say?",
                ))
                .unwrap()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("store");
    let message = Message::tool_result("c1", "read_file", "x".repeat(200));
    group.bench_function("append_message", |b| {
        b.iter(|| {
            runtime
                .block_on(store.append_message(&session.id, &message))
                .unwrap()
        })
    });
    let event = EventRecord {
        id: 0,
        time_ms: 0,
        instance: Some("bench".into()),
        session: session.id.clone(),
        call_id: 1,
        tool: "read_file".into(),
        via_bridge: true,
        arguments: json!({"path": "notes.txt"}),
        status: quiver_dispatch::Status::Ok,
        duration_ms: 1,
        detail: None,
        result: None,
        answered_by: None,
        line: "read_file via tool_call  ok  1 ms".into(),
    };
    group.bench_function("record_event", |b| {
        b.iter(|| runtime.block_on(store.record_event(&event)).unwrap())
    });
    group.finish();

    // The gateway on loopback, and the same call in-process.
    let token = "bench-token";
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let router = api::router(daemon.clone(), token, false, shutdown.clone());
    runtime.spawn(async move { axum::serve(listener, router).await });
    // The transport spawns its worker, so it is made inside the runtime.
    let client = runtime
        .block_on(async {
            ().serve(StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
                    .auth_header(token.to_owned()),
            ))
            .await
        })
        .unwrap();
    let mut params = CallToolRequestParams::new("read_file");
    params.arguments = json!({"path": "notes.txt"}).as_object().cloned();
    let gateway = runtime
        .block_on(daemon.gateway_session("daemon", &["*".to_owned()]))
        .unwrap();
    let arguments = json!({"path": "notes.txt"});

    let mut group = c.benchmark_group("gateway");
    group.bench_function("read_file_in_process", |b| {
        b.iter(|| {
            let assembly = daemon.assemble(&gateway.session, gateway.record.context_tokens);
            runtime
                .block_on(daemon.dispatcher().dispatch(
                    &gateway.session,
                    &assembly,
                    "read_file",
                    &arguments,
                ))
                .unwrap()
        })
    });
    group.bench_function("read_file_over_mcp_http", |b| {
        b.iter(|| {
            let result = runtime.block_on(client.call_tool(params.clone())).unwrap();
            assert_ne!(result.is_error, Some(true));
        })
    });
    group.finish();
    runtime.block_on(async {
        client.cancel().await.ok();
        shutdown.cancel();
        daemon.shutdown().await;
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
