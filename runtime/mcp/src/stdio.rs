//! stdio MCP servers as child processes, each leading a process group of
//! its own ([`ProcessGroup`]), so that ending the connection (on shutdown,
//! reconnect or a crash) signals the whole group. The child's stderr is read
//! line by line and logged under the server's name (target
//! `quiver::mcp::stderr`, level info).

use std::process::Stdio;

use quiver_process::ProcessGroup;
use quiver_process::environment::CommandEnvironment;
use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, Command};

use super::McpError;
use super::config::McpTransportConfig;

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
        env_inherit,
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
    // Only the allowed variables of the daemon's environment, which may
    // hold model API keys, and the server's own.
    let environment = CommandEnvironment::new(env_inherit.clone(), env.clone())
        .map_err(|e| spawn_error(format!("env_inherit: {e}")))?;
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .envs(environment.resolve(std::env::vars_os()))
        .process_group(0)
        .kill_on_drop(true);
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
