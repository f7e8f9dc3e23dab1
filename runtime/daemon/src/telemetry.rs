//! The process's metrics: the Prometheus recorder that every crate's
//! `metrics::counter!`/`gauge!`/`histogram!` calls land in, installed once
//! per process, and its text rendering for `GET /metrics`.
//!
//! The series are recorded where things happen: tool calls, their
//! latency and refusals in the dispatcher (`quiver_tool_calls_total`,
//! `quiver_tool_call_duration_seconds`, `quiver_tool_call_refusals_total`),
//! `tool_search` queries and empty results and deferred tools called
//! before any search (dispatcher), tokens per assembly with and without
//! tool search (assembler), MCP server states and reconnects (their
//! supervisors), plugin generations and load failures (plugin host), model
//! request latency and tokens (model clients) and pending approvals
//! (approval queue).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets of latencies, in seconds.
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Histogram buckets of token counts.
const TOKENS_BUCKETS: &[f64] = &[
    100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 25000.0, 50000.0, 100000.0, 250000.0,
];

/// The instance every series is labelled with, set before the recorder
/// is installed (the first daemon of a process names it).
static INSTANCE: OnceLock<String> = OnceLock::new();

/// Labels every series of this process with `instance` (the `instance`
/// label), unless the recorder is installed already.
pub fn set_instance(instance: &str) {
    let _ = INSTANCE.set(instance.to_owned());
}

/// The recorder's handle, installing the recorder on first use. Where
/// another recorder was installed first (an embedding program's), metrics
/// go there and this one renders nothing: said once in the log.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let base = || match INSTANCE.get() {
            Some(instance) => PrometheusBuilder::new().add_global_label("instance", instance),
            None => PrometheusBuilder::new(),
        };
        let builder = base()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_tokens".into()), TOKENS_BUCKETS)
            });
        let builder = match builder {
            Ok(builder) => builder,
            Err(error) => {
                tracing::warn!(%error, "metric buckets refused; histograms are summaries");
                base()
            }
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if let Err(error) = metrics::set_global_recorder(recorder) {
            tracing::warn!(%error, "another metrics recorder is installed; /metrics shows nothing");
        }
        describe();
        handle
    })
}

/// The Prometheus text exposition of every series now.
pub fn render() -> String {
    let handle = handle();
    // Histograms are drained into their buckets on upkeep; a scrape is the
    // moment it matters.
    handle.run_upkeep();
    handle.render()
}

/// The `# HELP` text of every series.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "quiver_tool_calls_total",
        "tool calls that ran through the dispatch chain, by tool, source (core, plugin, mcp) and final status"
    );
    describe_histogram!(
        "quiver_tool_call_duration_seconds",
        metrics::Unit::Seconds,
        "tool call latency through the whole chain (approval waits included), by tool and source"
    );
    describe_counter!(
        "quiver_tool_call_refusals_total",
        "tool calls refused before the chain (unknown tool, not granted, bad arguments JSON), by error code"
    );
    describe_counter!(
        "quiver_tool_search_queries_total",
        "tool_search queries run (each query of a batch counts)"
    );
    describe_counter!(
        "quiver_tool_search_empty_results_total",
        "tool_search queries that matched nothing"
    );
    describe_counter!(
        "quiver_deferred_calls_without_search_total",
        "deferred tools called in a session that had not run tool_search or tool_describe, by source"
    );
    describe_histogram!(
        "quiver_assembly_tool_tokens",
        "tokens of tool definitions per assembly: tool_search=with is what was sent, without is every tool sent eagerly"
    );
    describe_gauge!(
        "quiver_mcp_server_state",
        "1 for the state each MCP server is in (disabled, connecting, ready, failed, needs_login, stopped), 0 for the others"
    );
    describe_counter!(
        "quiver_mcp_reconnects_total",
        "MCP connection attempts that failed or connections that dropped, by server"
    );
    describe_gauge!(
        "quiver_plugin_generation",
        "the serving generation of each plugin (0 once removed)"
    );
    describe_gauge!(
        "quiver_plugin_generations_loaded",
        "plugin generations loaded by the process (none is ever unloaded)"
    );
    describe_counter!(
        "quiver_plugin_load_failures_total",
        "plugin files that failed to load, by file name"
    );
    describe_histogram!(
        "quiver_model_request_duration_seconds",
        metrics::Unit::Seconds,
        "model requests, retries included, by model and outcome (ok or the error code)"
    );
    describe_counter!(
        "quiver_model_tokens_total",
        "tokens the model servers counted, by model and kind (input, output)"
    );
    describe_gauge!(
        "quiver_approvals_pending",
        "tool calls waiting for an approval"
    );
    describe_counter!(
        "quiver_config_reloads_total",
        "config reloads (SIGHUP, POST /v1/reload), by outcome (applied, refused)"
    );
    describe_gauge!(
        "quiver_config_generation",
        "the config generation in force (1 at start, one more per applied reload)"
    );
}
