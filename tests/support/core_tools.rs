//! A shared fixture for the core-tools tests: a real temporary directory
//! holding a workspace (`ws/`), a directory beside it (`outside/`) and a
//! `quiver.yaml` loaded from disk, run by the runtime `quiver serve` runs
//! ([`Daemon::start`]), with its stored approvals as approver.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_daemon::config::{Config, load_file};
use quiver_daemon::{Daemon, DaemonOptions};
use quiver_dispatch::{DispatchError, Session};
use quiver_tool::scope::Scope;
use serde_json::Value;

/// The directories, the runtime and a session.
pub struct Env {
    /// Holds everything; removed on drop.
    pub temp: tempfile::TempDir,
    /// The workspace root (canonical).
    pub ws: PathBuf,
    /// A directory beside the workspace (canonical).
    pub outside: PathBuf,
    pub config: Config,
    pub daemon: Arc<Daemon>,
    pub queue: Arc<quiver_daemon::approvals::Approvals>,
    pub session: Arc<Session>,
}

/// Writes `yaml` to `quiver.yaml` beside `ws/` and `outside/`, loads it
/// and starts the runtime on it (state in the temporary directory).
/// `yaml` should set `core_tools.workspace: ws` (relative to the file)
/// unless the test wants otherwise.
pub async fn env(yaml: &str) -> Env {
    let temp = tempfile::tempdir().unwrap();
    std::fs::create_dir(temp.path().join("ws")).unwrap();
    std::fs::create_dir(temp.path().join("outside")).unwrap();
    let file = temp.path().join("quiver.yaml");
    std::fs::write(&file, yaml).unwrap();
    let loaded = load_file(&file).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let mut config = loaded.config;
    config.serve.state_dir = Some(temp.path().join("state"));
    let daemon = Daemon::start(config.clone(), DaemonOptions::default())
        .await
        .unwrap();
    let session = Session::new("core", Scope::all(), daemon.feed().clone());
    Env {
        ws: std::fs::canonicalize(temp.path().join("ws")).unwrap(),
        outside: std::fs::canonicalize(temp.path().join("outside")).unwrap(),
        temp,
        config,
        queue: daemon.approvals().clone(),
        daemon,
        session,
    }
}

impl Env {
    /// Assembles this turn and dispatches one call of `name`, as the model
    /// would make it.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<Value, DispatchError> {
        let assembly = self.daemon.assemble(&self.session, 200_000);
        self.daemon
            .dispatcher()
            .dispatch(&self.session, &assembly, name, &arguments)
            .await
    }

    /// The error `name` gives with `arguments`, as the model sees it.
    pub async fn error(&self, name: &str, arguments: Value) -> Value {
        match self.call(name, arguments.clone()).await {
            Ok(value) => panic!("{name} {arguments} should fail, got {value}"),
            Err(error) => error.to_json(),
        }
    }

    /// A path under the workspace.
    pub fn ws_path(&self, relative: &str) -> PathBuf {
        self.ws.join(relative)
    }
}

/// Pids of the live processes whose command line holds `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // Zombies have an empty command line: they are gone.
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `limit` for no process to hold `marker`; returns those left.
pub async fn wait_until_gone(marker: &str, limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A symlink at `link` pointing to `target`.
pub fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}
