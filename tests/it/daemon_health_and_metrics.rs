//! Health, readiness and metrics of the real daemon: `/healthz` and
//! `/readyz` answer without the token; `/metrics` needs it (unless
//! `serve.metrics_without_token` and a loopback connection) and serves
//! Prometheus text whose series move after a turn that searches and calls
//! a deferred tool.

use quiver_tests::daemon;
use quiver_tests::model;

use std::collections::BTreeMap;
use std::time::Duration;

use daemon::{Fixture, TestDaemon};
use model::ScriptedModel;
use serde_json::json;

/// One sample: its metric name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text exposition format strictly: every line is a
/// `# HELP`/`# TYPE` comment or `name{label="value",...} number`.
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            assert!(
                comment.starts_with("HELP ") || comment.starts_with("TYPE "),
                "bad comment line: {line}"
            );
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            other => other
                .parse()
                .unwrap_or_else(|_| panic!("bad value {other:?}: {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels: {line}"));
                let mut labels = BTreeMap::new();
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (key, value) = pair
                        .split_once("=\"")
                        .unwrap_or_else(|| panic!("bad label {pair:?}: {line}"));
                    labels.insert(key.to_owned(), value.trim_end_matches('"').to_owned());
                }
                (name, labels)
            }
        };
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name: {line}"
        );
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

/// The value of the series `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

async fn get_without_token(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn scrape(daemon: &TestDaemon) -> Vec<Sample> {
    let response = daemon
        .request(reqwest::Method::GET, "/metrics")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    parse(&response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn probes_need_no_token_and_metrics_move_after_a_turn() {
    let script = json!([{"match": "echo it", "steps": [
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "echo text back"}}]},
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": "zzzqqq xylophone"}}]},
        {"tool_calls": [{"name": "tool_call", "arguments": {"name": "mcp_test_echo", "arguments": {"text": "hi"}}}]},
        {"content": "done"}
    ]}]);
    let model = ScriptedModel::start(&script, &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "");
    let daemon = TestDaemon::start(&config, &fixture.state());

    let (status, body) = get_without_token(&format!("{}/healthz", daemon.url)).await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    // Ready once the MCP server is past its first connection attempt.
    let mut ready = None;
    for _ in 0..600 {
        let (status, body) = get_without_token(&format!("{}/readyz", daemon.url)).await;
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        if status == 200 {
            ready = Some(body);
            break;
        }
        assert_eq!(
            (status, &body["error"]),
            (503, &json!("not_ready")),
            "{body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ready, Some(json!({"status": "ready"})));
    // /metrics is the token's by default.
    let (status, body) = get_without_token(&format!("{}/metrics", daemon.url)).await;
    assert_eq!(status, 401, "{body}");

    let before = scrape(&daemon).await;
    // Every series names the instance, as status does.
    let (_, status) = daemon.get("/v1/status").await;
    let instance = status["instance"]["id"].as_str().unwrap().to_owned();
    assert!(!before.is_empty());
    for sample in &before {
        assert_eq!(
            sample.labels.get("instance"),
            Some(&instance),
            "{} has no instance label",
            sample.name
        );
    }
    assert_eq!(
        value(
            &before,
            "quiver_mcp_server_state",
            &[("server", "test"), ("state", "ready")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &before,
            "quiver_mcp_server_state",
            &[("server", "test"), ("state", "connecting")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&before, "quiver_plugin_generation", &[("plugin", "text")]),
        Some(1.0)
    );
    let echo = [
        ("tool", "mcp_test_echo"),
        ("source", "mcp"),
        ("status", "ok"),
    ];
    assert_eq!(value(&before, "quiver_tool_calls_total", &echo), None);

    let session = daemon.session(json!({})).await;
    let outcome = daemon.say(&session, "please echo it").await;
    assert_eq!(outcome["reply"], "done", "{outcome}");

    let after = scrape(&daemon).await;
    assert_eq!(value(&after, "quiver_tool_calls_total", &echo), Some(1.0));
    assert_eq!(
        value(
            &after,
            "quiver_tool_call_duration_seconds_count",
            &[("tool", "mcp_test_echo"), ("source", "mcp")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "quiver_tool_search_queries_total", &[]),
        Some(2.0)
    );
    assert_eq!(
        value(&after, "quiver_tool_search_empty_results_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &after,
            "quiver_model_request_duration_seconds_count",
            &[("model", "scripted"), ("status", "ok")]
        ),
        Some(4.0)
    );
    assert!(
        value(
            &after,
            "quiver_model_tokens_total",
            &[("model", "scripted"), ("kind", "input")]
        )
        .is_some_and(|v| v > 0.0)
    );
    let with = value(
        &after,
        "quiver_assembly_tool_tokens_sum",
        &[("tool_search", "with")],
    )
    .unwrap();
    let without = value(
        &after,
        "quiver_assembly_tool_tokens_sum",
        &[("tool_search", "without")],
    )
    .unwrap();
    assert!(
        with > 0.0 && with < without,
        "with {with}, without {without}"
    );
    assert_eq!(value(&after, "quiver_approvals_pending", &[]), Some(0.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_can_be_opened_to_loopback() {
    let model = ScriptedModel::start(&json!([]), &[]);
    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, "serve:\n  metrics_without_token: true\n");
    let daemon = TestDaemon::start(&config, &fixture.state());
    let (status, body) = get_without_token(&format!("{}/metrics", daemon.url)).await;
    assert_eq!(status, 200, "{body}");
    assert!(!parse(&body).is_empty());
    // The API itself still needs the token.
    let (status, _) = get_without_token(&format!("{}/v1/status", daemon.url)).await;
    assert_eq!(status, 401);
}
