//! Why a core tool call failed: [`CoreToolError`] names the tool and, in
//! its [`ErrorKind`], the path or command and a stable code; it becomes a
//! [`ToolError`] for the dispatch chain.

use std::io;

use quiver_tool::executor::{ToolError, ToolErrorKind};

/// A core tool call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{tool}`: {kind}")]
pub struct CoreToolError {
    /// The tool (`read_file`, ...).
    pub tool: &'static str,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong in a core tool call. Paths are shown as the model gave
/// them (relative to the workspace).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The path (or a symlink on the way) leads outside the workspace.
    #[error(
        "`{path}` is outside the workspace (paths are relative to the workspace root; `..` above it, absolute paths elsewhere and symlinks leading out are refused)"
    )]
    PathOutsideWorkspace {
        /// The path.
        path: String,
    },
    /// The path is (or is inside) something the runtime keeps from the
    /// tools: the state directory, plugin state, the config file, tokens.
    #[error(
        "`{path}` is protected: the daemon's state directory, plugin state, config file and token files are not available to tools"
    )]
    PathProtected {
        /// The path.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The path.
        path: String,
    },
    /// `write_file` was asked to write into a directory that does not exist.
    #[error(
        "the directory `{parent}` of `{path}` does not exist; pass create_dirs: true to create it"
    )]
    ParentNotFound {
        /// The file.
        path: String,
        /// Its missing directory.
        parent: String,
    },
    /// A file was expected and the path is a directory.
    #[error("`{path}` is a directory")]
    IsADirectory {
        /// The path.
        path: String,
    },
    /// A directory was expected (or a path component is a file).
    #[error("`{path}` is not a directory")]
    NotADirectory {
        /// The path.
        path: String,
    },
    /// The path is a FIFO, socket or device, which the tools never open.
    #[error("`{path}` is not a regular file")]
    NotARegularFile {
        /// The path.
        path: String,
    },
    /// The input is over a configured limit.
    #[error("`{path}`: {size} bytes is over `{key}` ({limit} bytes)")]
    TooLarge {
        /// The path.
        path: String,
        /// The size given.
        size: u64,
        /// The limit.
        limit: u64,
        /// The config key that sets it.
        key: &'static str,
    },
    /// The operating system refused access.
    #[error("`{path}`: permission denied")]
    PermissionDenied {
        /// The path.
        path: String,
    },
    /// An argument the schema cannot express is wrong.
    #[error("invalid arguments: {message}")]
    InvalidArguments {
        /// What is wrong.
        message: String,
    },
    /// `search_files` got a pattern that is not a valid regex.
    #[error("`{pattern}` is not a valid regular expression: {message}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// The regex compiler's message.
        message: String,
    },
    /// The call's task ended without an answer (it panicked).
    #[error("the call stopped unexpectedly: {message}")]
    Internal {
        /// What the runtime reported.
        message: String,
    },
    /// Another I/O failure.
    #[error("`{path}`: {message}")]
    Io {
        /// The path.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// `run_command` could not start the shell.
    #[error("cannot start `{program}` for `{command}`: {message}")]
    Spawn {
        /// The shell program.
        program: String,
        /// The command.
        command: String,
        /// Why.
        message: String,
    },
    /// `run_command` ran out of time; its process group was killed.
    #[error(
        "`{command}` ran longer than {timeout_s} s; its process group was killed\nstdout so far:\n{stdout}\nstderr so far:\n{stderr}"
    )]
    TimedOut {
        /// The command.
        command: String,
        /// The limit.
        timeout_s: u64,
        /// What it wrote to stdout (capped).
        stdout: String,
        /// What it wrote to stderr (capped).
        stderr: String,
    },
}

impl ErrorKind {
    /// A short stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ErrorKind::PathOutsideWorkspace { .. } => "path_outside_workspace",
            ErrorKind::PathProtected { .. } => "path_protected",
            ErrorKind::NotFound { .. } | ErrorKind::ParentNotFound { .. } => "not_found",
            ErrorKind::IsADirectory { .. } => "is_a_directory",
            ErrorKind::NotADirectory { .. } => "not_a_directory",
            ErrorKind::NotARegularFile { .. } => "not_a_regular_file",
            ErrorKind::TooLarge { .. } => "too_large",
            ErrorKind::PermissionDenied { .. } => "permission_denied",
            ErrorKind::InvalidArguments { .. } => "invalid_arguments",
            ErrorKind::InvalidPattern { .. } => "invalid_pattern",
            ErrorKind::Io { .. } => "io_error",
            ErrorKind::Internal { .. } => "internal_error",
            ErrorKind::Spawn { .. } => "spawn_failed",
            ErrorKind::TimedOut { .. } => "timed_out",
        }
    }

    /// The kind for an I/O error on `path`. cap-std reports an escape
    /// attempt (`..` above the root, an absolute path, a symlink leading
    /// out) as `PermissionDenied` without an OS error code; openat2's
    /// `RESOLVE_BENEATH` refusal arrives as `EXDEV`.
    pub fn from_io(path: &str, error: &io::Error) -> ErrorKind {
        let path = path.to_owned();
        match (error.kind(), error.raw_os_error()) {
            (io::ErrorKind::PermissionDenied, None) => ErrorKind::PathOutsideWorkspace { path },
            (_, Some(libc::EXDEV)) => ErrorKind::PathOutsideWorkspace { path },
            (io::ErrorKind::PermissionDenied, Some(_)) => ErrorKind::PermissionDenied { path },
            (io::ErrorKind::NotFound, _) => ErrorKind::NotFound { path },
            (io::ErrorKind::IsADirectory, _) => ErrorKind::IsADirectory { path },
            (io::ErrorKind::NotADirectory, _) => ErrorKind::NotADirectory { path },
            _ => ErrorKind::Io {
                path,
                message: error.to_string(),
            },
        }
    }
}

impl CoreToolError {
    /// An error of `tool`.
    pub fn new(tool: &'static str, kind: ErrorKind) -> CoreToolError {
        CoreToolError { tool, kind }
    }

    /// An I/O error of `tool` on `path` (see [`ErrorKind::from_io`]).
    pub fn io(tool: &'static str, path: &str, error: &io::Error) -> CoreToolError {
        CoreToolError::new(tool, ErrorKind::from_io(path, error))
    }

    /// The kind's stable code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl From<CoreToolError> for ToolError {
    /// The kind's code as the code and what went wrong as the message (the
    /// chain adds the tool's name); a timed-out command's output so far is
    /// also in `data`.
    fn from(error: CoreToolError) -> ToolError {
        let kind = match error.kind {
            ErrorKind::TimedOut { .. } => ToolErrorKind::TimedOut,
            _ => ToolErrorKind::Failed,
        };
        let data = match &error.kind {
            ErrorKind::TimedOut { stdout, stderr, .. } => {
                Some(serde_json::json!({"stdout": stdout, "stderr": stderr}))
            }
            _ => None,
        };
        let tool_error = ToolError::new(kind, error.code(), error.kind.to_string());
        match data {
            Some(data) => tool_error.with_data(data),
            None => tool_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_map_to_codes() {
        let escape = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert_eq!(
            ErrorKind::from_io("../x", &escape).code(),
            "path_outside_workspace"
        );
        let cases = [
            (libc::EACCES, "permission_denied"),
            (libc::ENOENT, "not_found"),
            (libc::EISDIR, "is_a_directory"),
            (libc::ENOTDIR, "not_a_directory"),
            (libc::EXDEV, "path_outside_workspace"),
            (libc::EIO, "io_error"),
        ];
        for (errno, code) in cases {
            let error = io::Error::from_raw_os_error(errno);
            assert_eq!(ErrorKind::from_io("p", &error).code(), code, "{errno}");
        }
    }

    #[test]
    fn tool_errors_carry_the_code_and_path() {
        let error = CoreToolError::new(
            "read_file",
            ErrorKind::NotFound {
                path: "src/x.rs".into(),
            },
        );
        assert_eq!(error.to_string(), "`read_file`: `src/x.rs` does not exist");
        let tool_error = ToolError::from(error);
        assert_eq!(tool_error.code, "not_found");
        assert_eq!(tool_error.kind, ToolErrorKind::Failed);
        assert_eq!(tool_error.message, "`src/x.rs` does not exist");
        let timeout = CoreToolError::new(
            "run_command",
            ErrorKind::TimedOut {
                command: "sleep 9".into(),
                timeout_s: 1,
                stdout: String::new(),
                stderr: String::new(),
            },
        );
        let tool_error = ToolError::from(timeout);
        assert_eq!(tool_error.kind, ToolErrorKind::TimedOut);
        assert_eq!(tool_error.code, "timed_out");
        assert!(
            tool_error
                .message
                .starts_with("`sleep 9` ran longer than 1 s"),
            "{tool_error}"
        );
    }
}
