//! Resident memory of the daemon's runtime as sessions are created and
//! left idle: RSS at start, after 10,000 sessions (each loaded, none
//! watched), and after the idle sweep drops them from memory (and hands
//! the freed heap back, as the daemon's sweep does); at the
//! default `feed.capacity` and at 200,000 (event buffers exist only while
//! someone watches a session, so the capacity costs nothing per session).
//!
//! ```text
//! cargo run --release -p quiver-benches --example session_memory
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use quiver_daemon::config::Config;
use quiver_daemon::{Daemon, DaemonOptions, NewSession};

const SESSIONS: usize = 10_000;

fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / 1_048_576.0
}

async fn measure(capacity: usize) {
    let temp = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.serve.state_dir = Some(temp.path().join("state"));
    config.core_tools.workspace = temp.path().to_path_buf();
    config.feed.capacity = capacity;
    let daemon = Daemon::start(config, DaemonOptions::default())
        .await
        .unwrap();
    let start = rss_mb();
    for _ in 0..SESSIONS {
        daemon.create_session(NewSession::default()).await.unwrap();
    }
    let loaded = rss_mb();
    let dropped = daemon.evict_idle_sessions(Duration::ZERO);
    quiver_daemon::release_free_memory();
    let after = rss_mb();
    println!(
        "feed.capacity {capacity:>7}: RSS {start:7.1} MB at start, {loaded:7.1} MB with {SESSIONS} sessions loaded ({:.1} KB each), {after:7.1} MB after {dropped} left memory",
        (loaded - start) * 1024.0 / SESSIONS as f64
    );
    daemon.shutdown().await;
}

#[tokio::main]
async fn main() {
    measure(1024).await;
    measure(200_000).await;
}
