//! The Landlock sandbox `run_command` runs in (Linux 5.13 and later), the
//! way codex-rs's Linux sandbox confines commands, in-process: the ruleset
//! is built in the daemon and applied in the child between fork and exec
//! with two raw system calls, so nothing allocates after the fork.
//!
//! A sandboxed command may:
//! - read and execute the system directories (`/usr`, `/bin`, `/sbin`,
//!   `/lib*`, `/etc`, `/opt`) and read `/dev/urandom`, `/dev/random`;
//! - read and write the workspace, a private temporary directory of its
//!   own (its `TMPDIR`, removed after the call), and `/dev/null`,
//!   `/dev/zero`, `/dev/tty`.
//!
//! It cannot read or write anything else: not the state directory (the
//! token, the database, plugin copies), not the config file, not `HOME`
//! (unless it is inside the workspace), and not `/proc`, so not the
//! daemon's `/proc/PID/environ` (Landlock also refuses ptrace-mode access
//! to processes outside the sandbox). It does not stop: network access,
//! signals to processes of the same user outside the sandbox, reading
//! what lies inside the workspace (so a state directory placed inside
//! the workspace is readable: the daemon warns about that), or using CPU
//! and memory (the time limit and process group still apply).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    path_beneath_rules,
};
use serde::{Deserialize, Serialize};

/// `core_tools.run_command.sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Landlock where the kernel has it (the default); where it does not,
    /// commands run unconfined and always need approval.
    #[default]
    Landlock,
    /// No sandbox: commands reach whatever the daemon's user can.
    Off,
}

/// The Landlock ABI the rules are written for; older kernels enforce the
/// part they know (best effort).
const ABI_TARGET: ABI = ABI::V5;

const READ_ONLY: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/dev/urandom",
    "/dev/random",
];

const READ_WRITE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/tty"];

/// Whether this kernel enforces Landlock. Probed once per process (the
/// answer cannot change while it runs): startup asks it more than once.
pub fn landlock_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        Ruleset::default()
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|ruleset| ruleset.create())
            .map(|created| Option::<OwnedFd>::from(created).is_some())
            .unwrap_or(false)
    })
}

/// A ruleset ready to be applied in a child: read-only system directories,
/// read-write `workspace`, `temp` and a few devices.
#[derive(Debug)]
pub struct CommandSandbox {
    ruleset: OwnedFd,
}

impl CommandSandbox {
    /// The ruleset for a command in `workspace` with its own `temp`; `None`
    /// when the kernel does not enforce Landlock.
    pub fn new(workspace: &Path, temp: &Path) -> Result<Option<CommandSandbox>, RulesetError> {
        let read_write: Vec<PathBuf> = [workspace, temp]
            .into_iter()
            .map(Path::to_path_buf)
            .chain(READ_WRITE_DEVICES.iter().map(PathBuf::from))
            .collect();
        let created = Ruleset::default()
            .handle_access(AccessFs::from_all(ABI_TARGET))?
            .create()?
            .add_rules(path_beneath_rules(
                READ_ONLY,
                AccessFs::from_read(ABI_TARGET),
            ))?
            .add_rules(path_beneath_rules(
                &read_write,
                AccessFs::from_all(ABI_TARGET),
            ))?;
        Ok(Option::<OwnedFd>::from(created).map(|ruleset| CommandSandbox { ruleset }))
    }

    /// The function to run in the child between fork and exec: sets
    /// `no_new_privs` (Landlock requires it for an unprivileged process)
    /// and restricts the child with the ruleset.
    ///
    /// It makes two system calls and builds an `io::Error` from errno on
    /// failure, allocating nothing, so it is safe after a fork. The ruleset
    /// descriptor must stay open until the child is spawned (`self` must
    /// outlive `spawn`).
    pub fn pre_exec(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let fd = self.ruleset.as_raw_fd();
        move || {
            // SAFETY: prctl and landlock_restrict_self only read their
            // integer arguments; `fd` is the ruleset descriptor the parent
            // keeps open until spawn returns.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        }
    }
}
