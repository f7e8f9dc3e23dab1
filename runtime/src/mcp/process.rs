//! stdio servers as child processes: each child leads a process group of
//! its own (`process_group(0)`), so that wrappers such as `npx`, `uvx` or
//! `sh -c` cannot leave grandchildren behind: ending the connection (on
//! shutdown, reconnect or a crash) signals the whole group. The child's
//! stderr is read line by line and logged under the server's name
//! (target `quiver::mcp::stderr`, level info).

use std::process::Stdio;
use std::time::Duration;

use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};

use super::McpError;
use super::config::McpTransportConfig;

/// How long a group gets between SIGTERM and SIGKILL on a clean shutdown.
pub const TERM_GRACE: Duration = Duration::from_millis(300);

/// The process group of one stdio server. Dropping it kills the group.
#[derive(Debug)]
pub struct ProcessGroup {
    server: String,
    pgid: i32,
}

impl ProcessGroup {
    /// The group led by `pgid`, a child this process spawned with
    /// `process_group(0)`; `owner` names it in logs. Dropping the value
    /// kills the group.
    pub fn new(owner: &str, pgid: i32) -> ProcessGroup {
        ProcessGroup {
            server: owner.to_owned(),
            pgid,
        }
    }

    /// The group id (the child's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Sends `signal` to every process of the group; returns whether any
    /// process received it.
    pub fn signal(&self, signal: i32) -> bool {
        if self.pgid <= 1 {
            return false;
        }
        // SAFETY: killpg only reads its two integer arguments. The group id
        // is the pid of a child this process spawned into a new group;
        // pgid > 1 rules out signalling our own group (0) or every process.
        let sent = unsafe { libc::killpg(self.pgid, signal) } == 0;
        if sent {
            tracing::debug!(owner = %self.server, pgid = self.pgid, signal, "signalled the process group");
        }
        sent
    }

    /// SIGTERM to the group, then SIGKILL after [`TERM_GRACE`] unless the
    /// group is already gone.
    pub async fn terminate(&self) {
        if !self.signal(libc::SIGTERM) {
            return;
        }
        let deadline = tokio::time::Instant::now() + TERM_GRACE;
        while tokio::time::Instant::now() < deadline {
            // Signal 0 only checks that some member is left.
            if !self.signal(0) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.signal(libc::SIGKILL);
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// Spawns the command of a stdio server in a new process group, with its
/// stderr forwarded to tracing; returns the rmcp transport and the group.
pub fn spawn(
    server: &str,
    transport: &McpTransportConfig,
) -> Result<(TokioChildProcess, ProcessGroup), McpError> {
    let McpTransportConfig::Stdio {
        command,
        args,
        env,
        cwd,
    } = transport
    else {
        return Err(McpError::Connect {
            server: server.to_owned(),
            detail: "not a stdio server".into(),
        });
    };
    let spawn_error = |detail: String| McpError::Spawn {
        server: server.to_owned(),
        command: command.clone(),
        detail,
    };
    let mut cmd = Command::new(command);
    cmd.args(args).envs(env).process_group(0).kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let (child, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(e.to_string()))?;
    let pid = child
        .id()
        .ok_or_else(|| spawn_error("the child exited before its pid was read".into()))?;
    let group = ProcessGroup::new(server, pid as i32);
    tracing::info!(server, pid, command = %command, "started MCP server process");
    if let Some(stderr) = stderr {
        forward_stderr(server.to_owned(), stderr);
    }
    Ok((child, group))
}

fn forward_stderr(server: String, stderr: ChildStderr) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    tracing::info!(target: "quiver::mcp::stderr", server = %server, "{line}")
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(server = %server, %error, "stopped reading the server's stderr");
                    break;
                }
            }
        }
    });
}
