//! Turns per second and the approval round trip of real `quiver serve`
//! processes: one instance on the embedded SQLite store, and two
//! instances sharing one PostgreSQL database (a throwaway cluster on a
//! unix socket), each turn sent to the instances in turn as a load
//! balancer would.
//!
//! ```text
//! cargo run --release -p quiver-benches --example shared_store_load
//! ```
//!
//! - **Turns**: `CLIENTS` clients, each in a session of its own, send turns
//!   for `SECONDS` (a turn is two model requests to a scripted model on
//!   loopback and one plugin tool call, with its messages and activity
//!   stored); a new session every 20 turns. Reported: turns per second.
//! - **Approval round trip**: `ROUND_TRIPS` times, a turn on A calls a tool
//!   that needs approval; once B lists the request, the clock starts, the
//!   answer is posted to B, and the clock stops when A's activity feed
//!   shows the call's result (so it covers B's answer, the store telling
//!   A, A's call going on and its event reaching a client). One instance:
//!   the same on A alone. Reported: p50, p99 and max.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_tests::daemon::{Fixture, TestDaemon};
use quiver_tests::model::ScriptedModel;
use quiver_tests::postgres::Cluster;
use serde_json::{Value, json};

const CLIENTS: usize = 8;
const SECONDS: u64 = 20;
const ROUND_TRIPS: usize = 200;
const TURNS_PER_SESSION: usize = 20;

fn script() -> Value {
    let mut count = Vec::new();
    for _ in 0..TURNS_PER_SESSION {
        count.push(json!({"tool_calls": [{"name": "tool_call", "arguments": {"name": "word_count", "arguments": {"text": "one two three"}}}]}));
        count.push(json!({"content": "counted"}));
    }
    json!([
        {"match": "count", "steps": count},
        {"match": "digest", "steps": [
            {"tool_calls": [{"name": "tool_call", "arguments": {"name": "hash", "arguments": {"text": "x", "algorithm": "sha256"}}}]},
            {"content": "hashed"}
        ]}
    ])
}

async fn turns_per_second(instances: &[Arc<TestDaemon>]) -> f64 {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(SECONDS);
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let instances: Vec<Arc<TestDaemon>> = instances.to_vec();
        clients.push(tokio::spawn(async move {
            let mut turns = 0usize;
            let mut session = String::new();
            while Instant::now() < deadline {
                let on = &instances[(client + turns) % instances.len()];
                if turns.is_multiple_of(TURNS_PER_SESSION) {
                    session = on.session(json!({})).await;
                }
                let outcome = on.say(&session, "count these").await;
                assert_eq!(outcome["reply"], "counted", "{outcome}");
                turns += 1;
            }
            turns
        }));
    }
    let mut total = 0;
    for client in clients {
        total += client.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Times from the answer posted on `answering` to the call's result in
/// `asking`'s feed.
async fn approval_round_trips(asking: &Arc<TestDaemon>, answering: &TestDaemon) -> Vec<Duration> {
    let (results, mut seen) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let feed = asking.open_events("/v1/events").await;
    let reader = tokio::spawn(async move {
        quiver_tests::daemon::read_named_events(feed, Duration::from_secs(3600), move |_, data| {
            if data["tool"] == "hash" && data["status"] == "ok" {
                let _ =
                    results.send((data["session"].as_str().unwrap().to_owned(), Instant::now()));
            }
            false
        })
        .await;
    });
    let mut times = Vec::new();
    for n in 0..ROUND_TRIPS {
        let session = asking.session(json!({"id": format!("rt-{n}")})).await;
        let turn = tokio::spawn({
            let asking = asking.clone();
            let session = session.clone();
            async move { asking.say(&session, "digest this").await }
        });
        let request = loop {
            let (_, body) = answering
                .get(&format!("/v1/approvals?session={session}"))
                .await;
            if let Some(first) = body["approvals"].as_array().and_then(|a| a.first()) {
                break first.clone();
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let start = Instant::now();
        let (status, body) = answering
            .post(
                &format!("/v1/approvals/{}", request["id"]),
                json!({"decision": "approve", "digest": request["digest"]}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (done, at) = seen.recv().await.unwrap();
        assert_eq!(done, session);
        times.push(at - start);
        assert_eq!(turn.await.unwrap()["reply"], "hashed");
    }
    reader.abort();
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

async fn measure(label: &str, instances: Vec<Arc<TestDaemon>>) {
    for daemon in &instances {
        daemon.ready().await;
    }
    let rate = turns_per_second(&instances).await;
    let answering = instances.last().unwrap().clone();
    let times = approval_round_trips(&instances[0], &answering).await;
    println!(
        "{label:<34} {rate:>8.1} turns/s   approval round trip p50 {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
        percentile(&times, 0.50).as_secs_f64() * 1000.0,
        percentile(&times, 0.99).as_secs_f64() * 1000.0,
        times.last().unwrap().as_secs_f64() * 1000.0,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let model = ScriptedModel::start(&script(), &[]);
    let approval = "approval:\n  require: [hash]\n  timeout_s: 600\n";

    let fixture = Fixture::new();
    let config = fixture.config(&model.base_url, approval);
    let one = Arc::new(TestDaemon::start(&config, &fixture.state()));
    measure("1 instance, SQLite", vec![one]).await;

    let cluster = Cluster::start();
    let fixture = Fixture::new();
    let config = fixture.config(
        &model.base_url,
        &format!(
            "{approval}store:\n  backend: postgres\n  url: \"{}\"\n",
            cluster.url()
        ),
    );
    let a = Arc::new(TestDaemon::start(&config, &fixture.path().join("state-a")));
    let b = Arc::new(TestDaemon::start(&config, &fixture.path().join("state-b")));
    measure("2 instances, one PostgreSQL", vec![a, b]).await;
}
