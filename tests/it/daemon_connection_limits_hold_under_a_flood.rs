//! The daemon's HTTP limits hold against a flood on loopback: connections
//! past `serve.max_connections` are answered 503 with the JSON error shape
//! and closed, idle and half-sent connections are closed after
//! `serve.header_read_timeout_s`, and afterwards the API answers again.
//! Every loop is bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use quiver_tests::daemon::{Fixture, TestDaemon};
use serde_json::Value;

fn connect(url: &str) -> TcpStream {
    let stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_is_capped_and_idle_connections_are_closed() {
    let fixture = Fixture::new();
    let config = fixture.config(
        "http://127.0.0.1:9",
        "serve:\n  max_connections: 8\n  header_read_timeout_s: 1\n",
    );
    let daemon = TestDaemon::start(&config, &fixture.state());
    let url = daemon.url.clone();

    // Eight connections that send half a request and stop.
    let mut held: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut stream = connect(&url);
            stream
                .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            stream
        })
        .collect();
    // Give the daemon a moment to take them all.
    std::thread::sleep(Duration::from_millis(300));

    // The ninth is refused at once, in the JSON error shape.
    let mut extra = connect(&url);
    let mut answer = String::new();
    extra.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "too_many_connections", "{body}");

    // The half-sent ones are closed by the header timeout.
    let started = Instant::now();
    for stream in &mut held {
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(held);

    // And the API answers again.
    let mut answered = false;
    for _ in 0..50 {
        let (status, _) = daemon.get("/v1/status").await;
        if status == 200 {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "the API did not answer after the flood");
}
