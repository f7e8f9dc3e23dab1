//! Daemon helpers shared by the `daemon_*` end-to-end tests (included with
//! `#[path = "support/daemon.rs"] mod daemon;`): `quiver serve` started as
//! a real process on 127.0.0.1 with a config written into a scratch
//! directory, the real text plugin and our rmcp test MCP server as tool
//! sources, and an HTTP client carrying the daemon's token.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A scratch directory with a plugin directory holding the real text
/// plugin, a core-tools workspace, and the paths a config needs.
pub struct Fixture {
    /// The scratch directory (removed on drop).
    pub dir: tempfile::TempDir,
}

impl Fixture {
    /// Makes `plugins/` (with the text plugin installed) and `work/`.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("plugins")).unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        crate::install_plugin(
            &crate::plugin_so("text"),
            &dir.path().join("plugins"),
            "text.so",
        );
        Fixture { dir }
    }

    /// The scratch directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The plugin directory the config watches.
    pub fn plugins(&self) -> PathBuf {
        self.path().join("plugins")
    }

    /// The core tools' workspace.
    pub fn work(&self) -> PathBuf {
        self.path().join("work")
    }

    /// The state directory.
    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    /// A config with two copies of the rmcp test server: `notes` offers
    /// resources, subscriptions and prompts (`--resources`), `plain`
    /// offers none; the core tools in the fixture's workspace.
    pub fn notes_config(&self) -> PathBuf {
        self.test_servers_config(
            "notes.yaml",
            &[("notes", &["--resources"]), ("plain", &[])],
            "",
        )
    }

    /// Writes `file` in the scratch directory: the rmcp test server as
    /// each MCP server `(name, args)`, the core tools in the fixture's
    /// workspace, and `extra` YAML appended.
    pub fn test_servers_config(
        &self,
        file: &str,
        servers: &[(&str, &[&str])],
        extra: &str,
    ) -> PathBuf {
        let mut text = String::from("mcp_servers:\n");
        for (name, args) in servers {
            text.push_str(&format!(
                "  {name}:\n    command: {server}\n",
                server = crate::mcp_test_server().display(),
            ));
            if !args.is_empty() {
                // A JSON array of strings is a YAML flow sequence.
                text.push_str(&format!("    args: {}\n", json!(args)));
            }
        }
        text.push_str(&format!(
            "core_tools:\n  workspace: {work}\n{extra}",
            work = self.work().display(),
        ));
        let path = self.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A config with the text plugin, the rmcp test server as MCP server
    /// `test`, the core tools, the model `scripted` at `model_url` (its
    /// base URL, `/v1` is added) and `extra` YAML appended.
    pub fn config(&self, model_url: &str, extra: &str) -> PathBuf {
        let text = format!(
            "plugins:\n  dirs: [{plugins}]\nmcp_servers:\n  test:\n    command: {server}\ncore_tools:\n  workspace: {work}\nmodels:\n  scripted:\n    provider: openai\n    base_url: {model_url}/v1\n    model: scripted\n    max_retries: 0\n    context_tokens: 64000\ndefault_model: scripted\n{extra}",
            plugins = self.plugins().display(),
            server = crate::mcp_test_server().display(),
            work = self.work().display(),
        );
        let path = self.path().join("quiver.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A running `quiver serve`; stopped (SIGTERM, then killed) when dropped.
pub struct TestDaemon {
    child: Option<crate::KillOnDrop>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The daemon's bearer token.
    pub token: String,
    client: reqwest::Client,
}

impl TestDaemon {
    /// Starts `quiver serve --config CONFIG --state-dir STATE --listen 127.0.0.1:0`
    /// and waits until it listens.
    pub fn start(config: &Path, state: &Path) -> TestDaemon {
        TestDaemon::start_with(config, state, &[])
    }

    /// As [`TestDaemon::start`], with more arguments.
    pub fn start_with(config: &Path, state: &Path, args: &[&str]) -> TestDaemon {
        let mut command = crate::quiver_command();
        command.arg("serve").arg("--config").arg(config).args(args);
        TestDaemon::spawn(command, state)
    }

    /// Runs `command` (a `quiver serve` without `--listen` and
    /// `--state-dir`, which are added) and waits until it listens.
    pub fn spawn(mut command: Command, state: &Path) -> TestDaemon {
        command
            .args(["--listen", "127.0.0.1:0", "--state-dir"])
            .arg(state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = crate::KillOnDrop(command.spawn().unwrap());
        let mut line = String::new();
        BufReader::new(child.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("quiver serve printed {line:?}"))
            .to_owned();
        let token = std::fs::read_to_string(state.join("token"))
            .unwrap()
            .trim()
            .to_owned();
        TestDaemon {
            child: Some(child),
            url,
            token,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
        }
    }

    /// The daemon's stderr, when the command it was spawned from piped it,
    /// read line by line in the background.
    pub fn stderr_lines(&mut self) -> StderrLines {
        let stderr = self
            .child
            .as_mut()
            .and_then(|c| c.0.stderr.take())
            .expect("spawn the daemon with stderr piped to read its lines");
        StderrLines::read(stderr)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.0.id()).unwrap_or(0)
    }

    /// Waits (bounded) until `/readyz` answers 200: every listed MCP server
    /// is past its first connection attempt, so its tools are registered.
    pub async fn ready(&self) {
        for _ in 0..600 {
            if self.get("/readyz").await.0 == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the daemon never became ready");
    }

    /// Waits (bounded) until the first MCP server of `/v1/status` (the
    /// fixture's test server) is ready, so its tools are in the catalog.
    pub async fn first_mcp_ready(&self) {
        for _ in 0..300 {
            if self.get("/v1/status").await.1["mcp_servers"][0]["state"] == "ready" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the test MCP server never became ready");
    }

    /// `GET path` with the token: (status, JSON body).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        decode(response).await
    }

    /// `POST path` with the token and a JSON body: (status, JSON body).
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        decode(response).await
    }

    /// The roles of a session's stored messages, in order.
    pub async fn stored_roles(&self, session: &str) -> Vec<String> {
        let (status, stored) = self.get(&format!("/v1/sessions/{session}")).await;
        assert_eq!(status, 200, "{stored}");
        stored["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Creates a session; returns its id.
    pub async fn session(&self, body: Value) -> String {
        let (status, session) = self.post("/v1/sessions", body).await;
        assert_eq!(status, 201, "{session}");
        session["id"].as_str().unwrap().to_owned()
    }

    /// Posts a message to a session and returns the turn's outcome.
    pub async fn say(&self, session: &str, text: &str) -> Value {
        let (status, outcome) = self
            .post(
                &format!("/v1/sessions/{session}/messages"),
                json!({"content": text}),
            )
            .await;
        assert_eq!(status, 200, "{outcome}");
        outcome
    }

    /// Reads the server-sent events of `path` until `count` have come (or
    /// `timeout` passed); returns their `data` as JSON.
    pub async fn events(&self, path: &str, count: usize, timeout: Duration) -> Vec<Value> {
        let mut response = self
            .client
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let deadline = Instant::now() + timeout;
        let mut buffer = String::new();
        let mut events = Vec::new();
        while events.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(Ok(Some(chunk))) = tokio::time::timeout(left, response.chunk()).await else {
                break;
            };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                for line in block.lines() {
                    if let Some(data) = line.strip_prefix("data:") {
                        events.push(serde_json::from_str(data.trim()).unwrap());
                    }
                }
            }
        }
        events
    }

    /// `GET path` with the token, answered as server-sent events: the
    /// response, its headers read (the stream is subscribed by then).
    pub async fn open_events(&self, path: &str) -> reqwest::Response {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        response
    }

    /// Posts `text` to `session` with `?stream=true`: every event of the
    /// answer, `(event name, data)`, until the stream ends (or `timeout`).
    pub async fn say_streaming(
        &self,
        session: &str,
        text: &str,
        timeout: Duration,
    ) -> Vec<(String, Value)> {
        let response = self.post_streaming(session, text).await;
        read_named_events(response, timeout, |_, _| false).await
    }

    /// Posts `text` to `session` with `?stream=true`; the response, its
    /// headers read.
    pub async fn post_streaming(&self, session: &str, text: &str) -> reqwest::Response {
        let response = self
            .client
            .post(format!(
                "{}/v1/sessions/{session}/messages?stream=true",
                self.url
            ))
            .bearer_auth(&self.token)
            .json(&json!({"content": text}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        response
    }

    /// Stops the daemon with SIGTERM and waits for it to exit.
    pub fn stop(&mut self) {
        let status = self
            .signal_and_wait(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("quiver serve did not stop within 15 s of SIGTERM"));
        assert!(status.success(), "quiver serve exited with {status}");
    }

    /// Sends the daemon SIGTERM and waits up to `limit` for it to exit:
    /// its exit status, or `None` if it is still running (it can be
    /// signalled again).
    pub fn signal_and_wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let _ = Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status();
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.0.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// An HTTP client and request builder for `path` with the token, for
    /// requests the helpers above do not cover (streams kept open, say).
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token)
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        // KillOnDrop ends it if `stop` was not called.
        self.child.take();
    }
}

/// Lines a process writes to stderr, collected by a thread as they come.
pub struct StderrLines {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl StderrLines {
    /// Starts collecting the lines of `stderr`.
    pub fn read(stderr: impl std::io::Read + Send + 'static) -> StderrLines {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        StderrLines { lines }
    }

    /// Every line so far.
    pub fn all(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The first line containing `text`, waiting up to `timeout` for it;
    /// panics with every line so far when none comes.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.all().into_iter().find(|l| l.contains(text)) {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "no stderr line contains {text:?} within {timeout:?}; lines:\n{}",
                self.all().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn decode(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}

/// The server-sent events of `response`, `(event name, data as JSON)`,
/// until the stream ends, `timeout` passes, or `last` says an event was the
/// last wanted. Comment lines (keep-alives) are skipped.
pub async fn read_named_events(
    mut response: reqwest::Response,
    timeout: Duration,
    mut last: impl FnMut(&str, &Value) -> bool,
) -> Vec<(String, Value)> {
    let deadline = Instant::now() + timeout;
    let mut buffer = String::new();
    let mut events = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok(Some(chunk))) = tokio::time::timeout(left, response.chunk()).await else {
            return events;
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut name = "message".to_owned();
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    name = value.trim().to_owned();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data = Some(serde_json::from_str::<Value>(value.trim()).unwrap());
                }
            }
            if let Some(data) = data {
                let done = last(&name, &data);
                events.push((name, data));
                if done {
                    return events;
                }
            }
        }
    }
}

/// The names of an OpenAI-style tools array.
pub fn tool_names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}
