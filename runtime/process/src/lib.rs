//! Process groups of the children Quiver starts (stdio MCP servers,
//! `run_command`): each child leads a group of its own (`process_group(0)`),
//! so that wrappers such as `npx`, `uvx` or `sh -c` cannot leave
//! grandchildren behind: ending the child signals the whole group.

pub mod environment;

use std::time::Duration;

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
