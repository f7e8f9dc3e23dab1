//! The MCP gateway's transports against each other: one `tool_call` (of
//! the core tool `read_file`, through the bridge and the dispatch chain)
//! made by an rmcp client, with the 1,138 tools of `mcp-popular` deferred
//! beside the core tools, over the gateway's stdio transport (the line
//! filter and rmcp's line codec, on an in-memory pipe) and over Streamable
//! HTTP on loopback through the daemon's own accept loop
//! (`quiver_daemon::http::serve`, the one `quiver serve` runs), with a
//! keep-alive client. Same daemon, same session view, same call: the
//! difference is the transport's cost.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use quiver_daemon::config;
use quiver_daemon::gateway::{GatewayHandler, GatewayIdentity};
use quiver_daemon::stdio::StdioTransport;
use quiver_daemon::{Daemon, DaemonOptions, api, http};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

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
    // Deferrable tools, so that the bridge (and `tool_call`) is active.
    let catalog = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/catalogs/mcp-popular.json");
    let document = quiver_catalog::catalog_file::read(&catalog).unwrap();
    quiver_catalog::catalog_file::register(daemon.registry(), [document]);
    let grants = vec!["*".to_owned()];

    // stdio: the gateway's transport on a pipe.
    let (client_side, server_side) = tokio::io::duplex(256 * 1024);
    let stdio_client = runtime
        .block_on(async {
            let (server_in, server_out) = tokio::io::split(server_side);
            let mut transport = StdioTransport::new(server_in, server_out);
            let handler = GatewayHandler::fixed(
                daemon.clone(),
                GatewayIdentity {
                    client: api::STDIO_CLIENT.to_owned(),
                    grants: grants.clone(),
                },
            );
            let pipes = transport.rmcp().unwrap();
            tokio::spawn(async move {
                let running = handler.serve(pipes).await.unwrap();
                let _ = running.waiting().await;
                transport.finish(Duration::from_secs(1)).await;
            });
            ().serve(client_side).await
        })
        .unwrap();

    // Streamable HTTP through the daemon's accept loop.
    let token = "bench-token";
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let router = api::router(daemon.clone(), token, false, shutdown.clone());
    let limits = http::HttpLimits::from_settings(&daemon.config().serve);
    runtime.spawn(http::serve(listener, router, limits, shutdown.clone()));
    let http_client = runtime
        .block_on(async {
            ().serve(StreamableHttpClientTransport::from_config(
                StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
                    .auth_header(token.to_owned()),
            ))
            .await
        })
        .unwrap();

    let mut params = CallToolRequestParams::new("tool_call");
    params.arguments = json!({"name": "read_file", "arguments": {"path": "notes.txt"}})
        .as_object()
        .cloned();
    let call = |client: &rmcp::service::RunningService<rmcp::RoleClient, ()>| {
        let result = runtime.block_on(client.call_tool(params.clone())).unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
    };

    let mut group = c.benchmark_group("gateway_tool_call");
    group.bench_function("stdio", |b| b.iter(|| call(&stdio_client)));
    group.bench_function("streamable_http", |b| b.iter(|| call(&http_client)));
    group.finish();

    // Interleaved, call by call: fairer on a loaded machine than two runs
    // one after the other.
    let mut stdio = Vec::new();
    let mut over_http = Vec::new();
    for _ in 0..2_000 {
        let start = Instant::now();
        call(&stdio_client);
        stdio.push(start.elapsed());
        let start = Instant::now();
        call(&http_client);
        over_http.push(start.elapsed());
    }
    stdio.sort();
    over_http.sort();
    let (stdio, over_http) = (stdio[stdio.len() / 2], over_http[over_http.len() / 2]);
    println!(
        "interleaved medians of 2,000 pairs: stdio {stdio:?}, streamable HTTP {over_http:?} (HTTP adds {:?})",
        over_http.saturating_sub(stdio)
    );

    runtime.block_on(async {
        stdio_client.cancel().await.ok();
        http_client.cancel().await.ok();
        shutdown.cancel();
        daemon.shutdown().await;
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
