//! Resident memory of a running `quiver serve` through a connection flood
//! on loopback: RSS before, with the flood held open (connections up to
//! `serve.max_connections` half-sent and idle, the rest refused), and
//! after the flood ends; and whether `/v1/health` answers afterwards.
//!
//! ```text
//! cargo build --release -p quiver
//! cargo run --release -p quiver-benches --example connection_flood
//! ```
//!
//! It runs the `quiver` binary built beside it (`target/release/quiver`),
//! as an operator would, and reads the daemon's `VmRSS`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Connections the flood opens (the machine's open-file limit must allow
/// this many for the client side).
const FLOOD: usize = 5_000;

fn quiver_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let binary = dir.join("quiver");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build --release -p quiver` first",
        binary.display()
    );
    binary
}

fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap();
    kb / 1024.0
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn health(address: &str, token: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!(
        "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split_whitespace().nth(1)?.parse().ok()
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().join("work");
    let plugins = temp.path().join("plugins");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&plugins).unwrap();
    let config = temp.path().join("quiver.yaml");
    std::fs::write(
        &config,
        "plugins:\n  dirs: [plugins]\ncore_tools:\n  workspace: work\nserve:\n  header_read_timeout_s: 2\n",
    )
    .unwrap();
    let state = temp.path().join("state");
    let address = format!("127.0.0.1:{}", free_port());
    let child = Command::new(quiver_binary())
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(&state)
        .args(["--listen", &address])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let daemon = Daemon(child);
    let pid = daemon.0.id();
    let token_file = state.join("token");
    let started = Instant::now();
    let token = loop {
        if let Ok(token) = std::fs::read_to_string(&token_file)
            && health(&address, token.trim()) == Some(200)
        {
            break token.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_mb(pid);

    let mut held = Vec::with_capacity(FLOOD);
    let mut refused = 0usize;
    for _ in 0..FLOOD {
        match TcpStream::connect(&address) {
            Ok(mut stream) => {
                let _ = stream.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n");
                held.push(stream);
            }
            Err(_) => refused += 1,
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let flooded = rss_mb(pid);
    let during = health(&address, &token);

    drop(held);
    // The header timeout (2 s here) closes whatever the daemon still holds.
    std::thread::sleep(Duration::from_secs(4));
    let after = rss_mb(pid);
    let answered = health(&address, &token);
    println!(
        "flood of {FLOOD} connections ({refused} refused at connect): RSS {before:.1} MB before, {flooded:.1} MB during, {after:.1} MB after; /v1/health during: {during:?}, after: {answered:?}"
    );
}
