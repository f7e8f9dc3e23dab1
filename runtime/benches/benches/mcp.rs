//! MCP call overhead: one `tools/call` of the test server's `echo` through
//! quiver's path (bridge resolve of `tool_call`, then the MCP executor the
//! chain ends in, with its timeout, cancellation and result mapping) against a direct rmcp
//! client calling the same local stdio server binary (a process of its own).
//!
//! Builds `quiver-test-mcp-server` in release mode first.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use quiver_catalog::assembly::Assembler;
use quiver_catalog::bridge;
use quiver_catalog::settings::ToolSearchConfig;
use quiver_mcp::{McpExecutor, McpHost, McpHostOptions, McpServerConfig};
use quiver_tool::executor::ToolExecutor;
use quiver_tool::registry::ToolRegistry;
use quiver_tool::scope::Scope;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn test_server() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "quiver-test-mcp-servers",
        ])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(status.success());
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("release")
        .join("quiver-test-mcp-server")
}

fn bench_call(c: &mut Criterion) {
    let server = test_server();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let arguments = json!({"text": "hello"});

    // Direct rmcp client.
    let direct = runtime.block_on(async {
        let transport = TokioChildProcess::new(tokio::process::Command::new(&server)).unwrap();
        ().serve(transport).await.unwrap()
    });
    let params =
        CallToolRequestParams::new("echo").with_arguments(arguments.as_object().unwrap().clone());

    // Quiver: host, registry, assembly, bridge resolve.
    let registry = Arc::new(ToolRegistry::new());
    let host = runtime.block_on(async {
        let host = McpHost::start(
            registry.clone(),
            [McpServerConfig::stdio(
                "bench",
                server.to_string_lossy().into_owned(),
                vec![],
            )],
            McpHostOptions::default(),
        );
        host.settle(Duration::from_secs(30)).await;
        Arc::new(host)
    });
    let executor = McpExecutor::new(host.clone());
    let assembly = Assembler::new(ToolSearchConfig::default()).assemble(
        &registry.snapshot(),
        &Scope::all(),
        200_000,
    );
    assert!(assembly.snapshot().get("mcp_bench_echo").is_some());
    let tool_call = json!({"name": "mcp_bench_echo", "arguments": arguments});

    let mut group = c.benchmark_group("mcp_call");
    group.sample_size(100);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("direct_rmcp", |b| {
        b.iter(|| runtime.block_on(async { direct.call_tool(params.clone()).await.unwrap() }))
    });
    group.bench_function("quiver_tool_call", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let resolved = bridge::call(&assembly, &tool_call).unwrap();
                let arguments = Value::Object(resolved.arguments);
                executor.execute(&resolved.tool, &arguments).await.unwrap()
            })
        })
    });
    group.finish();

    // Criterion measures the two paths one after the other, so a change in
    // machine load between them shows up as overhead (or as a gain). This
    // interleaves them call by call and compares the medians.
    let pairs = 3000;
    let (mut direct_times, mut quiver_times) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        for _ in 0..pairs {
            let start = std::time::Instant::now();
            direct.call_tool(params.clone()).await.unwrap();
            direct_times.push(start.elapsed());
            let start = std::time::Instant::now();
            let resolved = bridge::call(&assembly, &tool_call).unwrap();
            let arguments = Value::Object(resolved.arguments);
            executor.execute(&resolved.tool, &arguments).await.unwrap();
            quiver_times.push(start.elapsed());
        }
    });
    direct_times.sort();
    quiver_times.sort();
    let (d, q) = (direct_times[pairs / 2], quiver_times[pairs / 2]);
    println!(
        "mcp_call/interleaved: {pairs} pairs, median direct_rmcp {:.1} us, quiver_tool_call {:.1} us, overhead {:+.1}%",
        d.as_secs_f64() * 1e6,
        q.as_secs_f64() * 1e6,
        (q.as_secs_f64() / d.as_secs_f64() - 1.0) * 100.0
    );
    runtime.block_on(async {
        host.shutdown().await;
        let _ = direct.cancel().await;
    });
}

criterion_group!(benches, bench_call);
criterion_main!(benches);
