//! `run_command`: a shell command run in its own process group, in a
//! directory inside the workspace, with a time limit; stdout and stderr are
//! captured (their start and end kept, the middle cut past
//! `max_output_bytes`) and the exit code reported.
//!
//! The whole group is ended when the call ends: after the command exits
//! (so a background job it left cannot outlive it), when it times out, and
//! when the caller goes away (the dispatch chain's own timeout drops the
//! call). The working directory is entered through the workspace handle
//! (`fchdir` on the directory opened inside the root), so a directory
//! swapped for a symlink cannot move it out. With
//! `run_command.sandbox: landlock` (the default) the command runs in the
//! Landlock sandbox of [`crate::sandbox`]: the system read-only, the
//! workspace and a private temporary directory read-write, nothing else
//! (no state directory, config, `HOME` or `/proc`). Where the kernel has
//! no Landlock, or with `sandbox: off`, it can reach whatever the daemon's
//! user can, which is why it needs approval by default.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::error::{CoreToolError, ErrorKind};
use super::parse_args;
use super::sandbox::CommandSandbox;
use super::settings::{RunCommandConfig, SandboxMode};
use super::workspace::{Workspace, dot_if_empty, shown};
use quiver_process::ProcessGroup;

/// `run_command`.
pub const RUN_COMMAND: &str = "run_command";

/// How long output is still read after the command exited or was killed
/// (a process that left the group may hold the pipes open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandArgs {
    command: String,
    cwd: Option<String>,
    timeout_s: Option<u64>,
}

/// One output stream as kept: its first half-limit bytes, its last
/// half-limit bytes and how many there were in all.
#[derive(Debug)]
pub(crate) struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_limit: usize,
    tail_limit: usize,
    total: u64,
}

impl CappedOutput {
    /// Keeps at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> CappedOutput {
        CappedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_limit: limit / 2,
            tail_limit: limit - limit / 2,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let to_head = bytes.len().min(self.head_limit - self.head.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        bytes = &bytes[to_head..];
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.tail_limit..];
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Whether bytes were dropped.
    pub(crate) fn truncated(&self) -> bool {
        self.total > (self.head.len() + self.tail.len()) as u64
    }

    /// The kept text, with a marker where the middle was cut.
    pub(crate) fn text(&self) -> String {
        let mut bytes = self.head.clone();
        if self.truncated() {
            let cut = self.total - (self.head.len() + self.tail.len()) as u64;
            bytes.extend_from_slice(format!("\n[quiver: {cut} bytes cut]\n").as_bytes());
        }
        bytes.extend(self.tail.iter());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

type Shared = Arc<Mutex<CappedOutput>>;

fn lock(output: &Shared) -> std::sync::MutexGuard<'_, CappedOutput> {
    output.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `stream` to its end into `output`.
async fn pump(stream: Option<impl AsyncRead + Unpin>, output: Shared) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(read) = stream.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        lock(&output).push(&buffer[..read]);
    }
}

/// `run_command`: runs `command` through the configured shell in `cwd`
/// (a directory inside the workspace, default its root) for at most
/// `timeout_s` seconds (at most `run_command.timeout_s`).
pub(crate) async fn run_command(
    workspace: Arc<Workspace>,
    config: RunCommandConfig,
    arguments: Map<String, Value>,
) -> Result<Value, CoreToolError> {
    let args: CommandArgs = parse_args(RUN_COMMAND, arguments)?;
    let fail = |kind| CoreToolError::new(RUN_COMMAND, kind);
    if args.command.trim().is_empty() {
        return Err(fail(ErrorKind::InvalidArguments {
            message: "command is empty".into(),
        }));
    }
    let requested = args.cwd.as_deref().unwrap_or(".");
    let relative = workspace.relative(RUN_COMMAND, requested)?;
    let cwd = workspace.open_dir(RUN_COMMAND, &relative, requested)?;
    let cwd_real = workspace.canonical(RUN_COMMAND, &relative, requested)?;
    let timeout_s = args
        .timeout_s
        .unwrap_or(config.timeout_s)
        .clamp(1, config.timeout_s);
    let (program, leading) = config.shell.split_first().ok_or_else(|| {
        fail(ErrorKind::InvalidArguments {
            message: "`core_tools.run_command.shell` is empty".into(),
        })
    })?;
    let mut command = Command::new(program);
    command
        .args(leading)
        .arg(&args.command)
        // Only the configured variables: the daemon's own environment may
        // hold model API keys and other secrets.
        .env_clear()
        .envs(config.environment.resolve(std::env::vars_os()))
        .env(
            "PWD",
            workspace
                .root()
                .join(dot_if_empty(&cwd_real))
                .components()
                .collect::<PathBuf>(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let cwd_fd = cwd.as_raw_fd();
    let enter_cwd = move || {
        // SAFETY: fchdir only reads its integer argument.
        if unsafe { libc::fchdir(cwd_fd) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: `enter_cwd` runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes one `fchdir` call
    // and builds an io::Error from errno, allocating nothing. `cwd_fd`
    // stays open in the parent until `spawn` has returned (`cwd` lives to
    // the end of this function), so the child inherits a valid descriptor.
    unsafe {
        command.pre_exec(enter_cwd);
    }
    // The sandbox and its private temporary directory live to the end of
    // the call (the ruleset descriptor must outlive `spawn`; the directory
    // is removed when the call ends).
    let (_sandbox, _temp) = match config.sandbox {
        SandboxMode::Off => (None, None),
        SandboxMode::Landlock => {
            let temp = tempfile::Builder::new()
                .prefix("quiver-run-command-")
                .tempdir()
                .map_err(|e| {
                    fail(ErrorKind::Spawn {
                        program: program.clone(),
                        command: args.command.clone(),
                        message: format!("cannot make the command's temporary directory: {e}"),
                    })
                })?;
            let sandbox = CommandSandbox::new(workspace.root(), temp.path()).map_err(|e| {
                fail(ErrorKind::Spawn {
                    program: program.clone(),
                    command: args.command.clone(),
                    message: format!("cannot set up the Landlock sandbox: {e}"),
                })
            })?;
            command.env("TMPDIR", temp.path());
            if let Some(sandbox) = &sandbox {
                // SAFETY: the closure makes two raw system calls and
                // allocates nothing (see `CommandSandbox::pre_exec`); the
                // ruleset descriptor stays open until spawn has returned.
                unsafe {
                    command.pre_exec(sandbox.pre_exec());
                }
            }
            (sandbox, Some(temp))
        }
    };
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        fail(ErrorKind::Spawn {
            program: program.clone(),
            command: args.command.clone(),
            message: e.to_string(),
        })
    })?;
    // Dropping the group (when this future ends or is dropped) kills
    // whatever is left of it.
    let group = child
        .id()
        .map(|pid| ProcessGroup::new(RUN_COMMAND, pid as i32));
    let stdout: Shared = Arc::new(Mutex::new(CappedOutput::new(config.max_output_bytes)));
    let stderr: Shared = Arc::new(Mutex::new(CappedOutput::new(config.max_output_bytes)));
    let readers = {
        let (out_pipe, err_pipe) = (child.stdout.take(), child.stderr.take());
        let (stdout, stderr) = (stdout.clone(), stderr.clone());
        async move { tokio::join!(pump(out_pipe, stdout), pump(err_pipe, stderr)) }
    };
    tokio::pin!(readers);
    let mut readers_done = false;
    let limit = Duration::from_secs(timeout_s);
    let waited = tokio::time::timeout(limit, async {
        loop {
            tokio::select! {
                status = child.wait() => break status,
                _ = &mut readers, if !readers_done => readers_done = true,
            }
        }
    })
    .await;
    let status = match waited {
        Ok(status) => {
            // The command is done: end what it left running in its group.
            if let Some(group) = &group {
                group.signal(libc::SIGKILL);
            }
            status
        }
        Err(_) => {
            if let Some(group) = &group {
                group.terminate().await;
            }
            let _ = child.wait().await;
            if !readers_done {
                let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
            }
            return Err(fail(ErrorKind::TimedOut {
                command: args.command,
                timeout_s,
                stdout: lock(&stdout).text(),
                stderr: lock(&stderr).text(),
            }));
        }
    };
    if !readers_done {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
    }
    let status = status.map_err(|e| {
        fail(ErrorKind::Io {
            path: shown(&cwd_real),
            message: format!("waiting for `{}`: {e}", args.command),
        })
    })?;
    let stdout = lock(&stdout);
    let stderr = lock(&stderr);
    Ok(json!({
        "command": args.command,
        "cwd": shown(&cwd_real),
        "exit_code": status.code(),
        "signal": status.signal(),
        "success": status.success(),
        "duration_ms": started.elapsed().as_millis() as u64,
        "stdout": stdout.text(),
        "stderr": stderr.text(),
        "stdout_bytes": stdout.total,
        "stderr_bytes": stderr.total,
        "stdout_truncated": stdout.truncated(),
        "stderr_truncated": stderr.truncated(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut out = CappedOutput::new(10);
        out.push(b"abc");
        out.push(b"defghij");
        assert!(!out.truncated());
        assert_eq!(out.text(), "abcdefghij");
    }

    #[test]
    fn long_output_keeps_its_start_and_end() {
        let mut out = CappedOutput::new(10);
        for chunk in [&b"01234"[..], b"5678", b"9abcdefghij", b"klm", b"n"] {
            out.push(chunk);
        }
        assert!(out.truncated());
        assert_eq!(out.total, 24);
        assert_eq!(out.text(), "01234\n[quiver: 14 bytes cut]\njklmn");
        let mut out = CappedOutput::new(4);
        out.push(&[b'x'; 100_000]);
        out.push(b"end");
        assert_eq!(out.text(), "xx\n[quiver: 99999 bytes cut]\nnd");
    }
}
