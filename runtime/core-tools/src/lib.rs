//! The built-in core tools: `read_file`, `write_file`, `list_dir`,
//! `search_files` and `run_command`, confined to the workspace root set by
//! `core_tools.workspace`.
//!
//! They are [`ToolSource::Core`] tools: always in the tools array, never
//! deferred. [`CoreToolSet`] is the set `core_tools.enabled` names:
//! [`CoreToolSet::specs`] (or [`CoreToolSet::register`]) puts them in the
//! registry, [`CoreToolSet::executor`] runs them for the dispatch chain
//! (`Executors::with_core`), and `run_command` waits for approval when
//! `core_tools.run_command.require_approval` is set (the chain's approval
//! globs get it from [`CoreToolsConfig::approval_globs`]).
//!
//! - [`workspace`]: the root as a cap-std directory handle, the only way
//!   any tool touches the file system;
//! - [`walk`]: the confined, ignore-file-aware walk behind `list_dir` and
//!   `search_files`;
//! - [`files`]: `read_file`, `write_file`, `list_dir`;
//! - [`search`]: the `search_files` tool;
//! - [`command`]: the `run_command` tool;
//! - [`error`]: typed errors with stable codes;
//! - [`settings`]: the `core_tools:` config section.

pub mod command;
pub mod error;
pub mod files;
pub mod sandbox;
pub mod search;
pub mod settings;
pub mod walk;
pub mod workspace;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

pub use error::{CoreToolError, ErrorKind};
use quiver_tool::executor::{CoreTools, ToolError};
use quiver_tool::registry::{RegistrationReport, ToolRegistry};
use quiver_tool::tool::{ToolAnnotations, ToolMetadata, ToolSource, ToolSpec};
use settings::SandboxMode;
pub use settings::{CommandEnvironment, CoreToolName, CoreToolsConfig, RunCommandConfig};
use workspace::Workspace;

/// The core tools could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CoreToolsError {
    /// `core_tools.workspace` names nothing.
    #[error("`core_tools.workspace`: the directory {} does not exist", path.display())]
    WorkspaceMissing {
        /// The configured path (resolved against the config file).
        path: PathBuf,
    },
    /// `core_tools.workspace` names a file.
    #[error("`core_tools.workspace`: {} is not a directory", path.display())]
    WorkspaceNotADirectory {
        /// The configured path.
        path: PathBuf,
    },
    /// `core_tools.workspace` could not be opened.
    #[error("`core_tools.workspace`: cannot open {}: {source}", path.display())]
    WorkspaceUnreadable {
        /// The configured path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

struct Inner {
    config: CoreToolsConfig,
    workspace: Arc<Workspace>,
}

/// The enabled core tools over one open workspace. Cheap to clone.
#[derive(Clone)]
pub struct CoreToolSet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CoreToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreToolSet")
            .field("workspace", &self.inner.workspace.root())
            .field("enabled", &self.inner.config.enabled)
            .finish()
    }
}

/// Sets `cancel` when dropped: a blocking walk stops soon after its caller
/// goes away (e.g. the chain's timeout dropped the call).
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl CoreToolSet {
    /// Opens `config.workspace` (which must be an existing directory) and
    /// holds the tools `config.enabled` names.
    pub fn new(config: &CoreToolsConfig) -> Result<CoreToolSet, CoreToolsError> {
        CoreToolSet::protecting(config, &[])
    }

    /// As [`CoreToolSet::new`], with `protected` (the runtime's state
    /// directory, plugin state, config file, token files) kept from every
    /// file tool even where it lies inside the workspace: `path_protected`.
    pub fn protecting(
        config: &CoreToolsConfig,
        protected: &[PathBuf],
    ) -> Result<CoreToolSet, CoreToolsError> {
        let path = config.workspace.clone();
        let mut workspace = Workspace::open(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => CoreToolsError::WorkspaceMissing { path: path.clone() },
            io::ErrorKind::NotADirectory => {
                CoreToolsError::WorkspaceNotADirectory { path: path.clone() }
            }
            _ => CoreToolsError::WorkspaceUnreadable {
                path: path.clone(),
                source,
            },
        })?;
        if config.is_enabled(CoreToolName::RunCommand) {
            match config.run_command.sandbox {
                SandboxMode::Landlock if !sandbox::landlock_available() => tracing::warn!(
                    "this kernel does not enforce Landlock: run_command runs unconfined and every command needs approval"
                ),
                SandboxMode::Landlock => {
                    tracing::info!("run_command runs in the Landlock sandbox")
                }
                SandboxMode::Off => tracing::warn!(
                    "core_tools.run_command.sandbox is off: commands reach whatever this user can"
                ),
            }
        }
        workspace.protect(protected);
        Ok(CoreToolSet {
            inner: Arc::new(Inner {
                config: config.clone(),
                workspace: Arc::new(workspace),
            }),
        })
    }

    /// The canonical absolute path of the workspace root.
    pub fn workspace_root(&self) -> &Path {
        self.inner.workspace.root()
    }

    /// The enabled tools.
    pub fn enabled(&self) -> &[CoreToolName] {
        &self.inner.config.enabled
    }

    /// The specs of the enabled tools, in [`CoreToolName::ALL`] order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.enabled().iter().map(|&tool| self.spec(tool)).collect()
    }

    /// Replaces the registry's [`ToolSource::Core`] tools with these. (A
    /// daemon with core tools of its own registers [`CoreToolSet::specs`]
    /// together with them instead.)
    pub fn register(&self, registry: &ToolRegistry) -> RegistrationReport {
        registry.set_source_tools(ToolSource::Core, self.specs())
    }

    /// An executor for the dispatch chain (`Executors::with_core`) running
    /// the enabled tools by name; other core tools can be added to it.
    pub fn executor(&self) -> CoreTools {
        self.enabled()
            .iter()
            .fold(CoreTools::new(), |tools, &tool| {
                let set = self.clone();
                tools.with_async(tool.as_str(), move |arguments| {
                    let set = set.clone();
                    async move { set.call(tool, arguments).await.map_err(ToolError::from) }
                })
            })
    }

    /// Runs `tool` with `arguments` directly (the chain calls this through
    /// [`CoreToolSet::executor`]). File work runs on the blocking pool; a
    /// walk stops early when this future is dropped.
    pub async fn call(
        &self,
        tool: CoreToolName,
        arguments: Map<String, Value>,
    ) -> Result<Value, CoreToolError> {
        if !self.enabled().contains(&tool) {
            return Err(CoreToolError::new(
                tool.as_str(),
                ErrorKind::InvalidArguments {
                    message: format!("`{tool}` is not enabled in `core_tools.enabled`"),
                },
            ));
        }
        type Blocking = fn(
            &Workspace,
            &CoreToolsConfig,
            Map<String, Value>,
            &AtomicBool,
        ) -> Result<Value, CoreToolError>;
        let run: Blocking = match tool {
            CoreToolName::RunCommand => {
                let config = self.inner.config.run_command.clone();
                let workspace = self.inner.workspace.clone();
                return command::run_command(workspace, config, arguments).await;
            }
            CoreToolName::ReadFile => files::read_file,
            CoreToolName::WriteFile => files::write_file,
            CoreToolName::ListDir => files::list_dir,
            CoreToolName::SearchFiles => search::search_files,
        };
        let inner = self.inner.clone();
        let cancel = Arc::new(AtomicBool::new(false));
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        let task = tokio::task::spawn_blocking(move || {
            run(&inner.workspace, &inner.config, arguments, &cancel)
        });
        task.await.map_err(|e| {
            CoreToolError::new(
                tool.as_str(),
                ErrorKind::Internal {
                    message: e.to_string(),
                },
            )
        })?
    }

    fn spec(&self, tool: CoreToolName) -> ToolSpec {
        let config = &self.inner.config;
        let root = self.workspace_root().display();
        let path = |what: &str| json!({"type": "string", "description": format!("{what}, relative to the workspace root (an absolute path must lie inside it)")});
        let object = |properties: Value, required: &[&str]| {
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        };
        let (description, schema) = match tool {
            CoreToolName::ReadFile => (
                format!(
                    "Read a text file in the workspace ({root}). Returns whole lines from start_line, at most {} bytes per call; when more remains the result has truncated: true and next_start_line to read on. Binary files are reported (binary: true), not shown.",
                    config.max_read_bytes
                ),
                object(
                    json!({
                        "path": path("The file"),
                        "start_line": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)"},
                        "max_lines": {"type": "integer", "minimum": 1, "description": "Most lines to return (default: as many as fit)"},
                    }),
                    &["path"],
                ),
            ),
            CoreToolName::WriteFile => (
                format!(
                    "Write a text file in the workspace ({root}), replacing it whole if it exists. The write is atomic: readers see the old or the new content, never a part. At most {} bytes.",
                    config.max_write_bytes
                ),
                object(
                    json!({
                        "path": path("The file to write"),
                        "content": {"type": "string", "description": "The complete new content"},
                        "create_dirs": {"type": "boolean", "description": "Create missing parent directories (default false)"},
                    }),
                    &["path", "content"],
                ),
            ),
            CoreToolName::ListDir => (
                format!(
                    "List a directory in the workspace ({root}): each entry's path (relative to the workspace root), type (file, dir, symlink, other) and file size, in name order, at most {} entries. Entries excluded by .gitignore/.ignore are marked ignored: true; with depth > 1, ignored directories and .git are not entered.",
                    config.max_list_entries
                ),
                object(
                    json!({
                        "path": path("The directory (default: the workspace root)"),
                        "depth": {"type": "integer", "minimum": 1, "maximum": files::MAX_LIST_DEPTH, "description": "Levels to list: 1 is the directory's own entries (default 1)"},
                    }),
                    &[],
                ),
            ),
            CoreToolName::SearchFiles => (
                format!(
                    "Search the workspace's files ({root}) for lines matching a regular expression (Rust regex syntax). Returns each match's path, 1-based line number and text, in path order, at most {} matches. Skips files excluded by .gitignore/.ignore, .git, binary files and symlinks.",
                    config.max_search_matches
                ),
                object(
                    json!({
                        "pattern": {"type": "string", "minLength": 1, "description": "Regular expression searched in each line"},
                        "path": path("A directory to search below, or one file (default: the workspace root)"),
                        "glob": {"type": "string", "description": "Only files whose name matches, e.g. \"*.rs\"; a glob with a / is matched against the whole relative path, e.g. \"src/**/*.rs\""},
                        "case_insensitive": {"type": "boolean", "description": "Ignore case (default false)"},
                        "max_matches": {"type": "integer", "minimum": 1, "maximum": config.max_search_matches, "description": "Stop after this many matches"},
                    }),
                    &["pattern"],
                ),
            ),
            CoreToolName::RunCommand => {
                let run = &config.run_command;
                let approval = if run.require_approval {
                    " Each call waits for a person to approve it."
                } else {
                    ""
                };
                (
                    format!(
                        "Run a shell command (`{} <command>`) in a directory of the workspace ({root}), with stdin empty. Returns exit_code, stdout and stderr (each cut in the middle past {} bytes). Runs at most {} s; then the command and everything it started are killed. Background processes are ended when the command exits.{approval}",
                        run.shell.join(" "),
                        run.max_output_bytes,
                        run.timeout_s
                    ),
                    object(
                        json!({
                            "command": {"type": "string", "minLength": 1, "description": "The command line"},
                            "cwd": path("The working directory (default: the workspace root)"),
                            "timeout_s": {"type": "integer", "minimum": 1, "maximum": run.timeout_s, "description": format!("Seconds before it is killed (default {})", run.timeout_s)},
                        }),
                        &["command"],
                    ),
                )
            }
        };
        // What each tool does, as MCP hints, so that `annotation:*` rules
        // of guardrails and approval read core tools as they read MCP ones.
        let (read_only, destructive, idempotent, open_world) = match tool {
            CoreToolName::ReadFile | CoreToolName::ListDir | CoreToolName::SearchFiles => {
                (true, false, true, false)
            }
            CoreToolName::WriteFile => (false, true, true, false),
            CoreToolName::RunCommand => (false, true, false, true),
        };
        ToolSpec::new(tool.as_str(), description, schema).with_metadata(ToolMetadata {
            annotations: ToolAnnotations {
                read_only_hint: Some(read_only),
                destructive_hint: Some(destructive),
                idempotent_hint: Some(idempotent),
                open_world_hint: Some(open_world),
            },
            ..ToolMetadata::default()
        })
    }
}

/// `arguments` read into a tool's argument struct; a mismatch (normally
/// caught by the chain's schema validation first) is `invalid_arguments`.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &'static str,
    arguments: Map<String, Value>,
) -> Result<T, CoreToolError> {
    serde_json::from_value(Value::Object(arguments)).map_err(|e| {
        CoreToolError::new(
            tool,
            ErrorKind::InvalidArguments {
                message: e.to_string(),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_workspace_names_the_key_and_the_path() {
        let temp = tempfile::tempdir().unwrap();
        let config = CoreToolsConfig {
            workspace: temp.path().join("nope"),
            ..CoreToolsConfig::default()
        };
        let error = CoreToolSet::new(&config).unwrap_err();
        assert!(matches!(error, CoreToolsError::WorkspaceMissing { .. }));
        let text = error.to_string();
        assert!(text.contains("core_tools.workspace"), "{text}");
        assert!(text.contains("nope"), "{text}");
        std::fs::write(temp.path().join("file"), "").unwrap();
        let config = CoreToolsConfig {
            workspace: temp.path().join("file"),
            ..CoreToolsConfig::default()
        };
        let error = CoreToolSet::new(&config).unwrap_err();
        assert!(
            matches!(error, CoreToolsError::WorkspaceNotADirectory { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn specs_are_the_enabled_tools_with_closed_schemas() {
        let temp = tempfile::tempdir().unwrap();
        let config = CoreToolsConfig {
            workspace: temp.path().to_path_buf(),
            ..CoreToolsConfig::default()
        };
        let set = CoreToolSet::new(&config).unwrap();
        let names: Vec<String> = set.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "write_file",
                "list_dir",
                "search_files",
                "run_command"
            ]
        );
        for spec in set.specs() {
            let schema = spec.input_schema.value();
            assert_eq!(schema["additionalProperties"], false, "{}", spec.name);
            assert!(jsonschema::validator_for(schema).is_ok(), "{}", spec.name);
            for required in schema["required"].as_array().unwrap() {
                let key = required.as_str().unwrap();
                assert!(
                    schema["properties"].get(key).is_some(),
                    "{}: {key}",
                    spec.name
                );
            }
        }
        let config = CoreToolsConfig {
            workspace: temp.path().to_path_buf(),
            enabled: vec![CoreToolName::ReadFile],
            ..CoreToolsConfig::default()
        };
        let set = CoreToolSet::new(&config).unwrap();
        assert_eq!(set.specs().len(), 1);
        assert!(format!("{:?}", set.executor()).contains("read_file"));
        assert!(!format!("{:?}", set.executor()).contains("run_command"));
    }

    #[tokio::test]
    async fn a_disabled_tool_cannot_be_called_directly() {
        let temp = tempfile::tempdir().unwrap();
        let config = CoreToolsConfig {
            workspace: temp.path().to_path_buf(),
            enabled: vec![CoreToolName::ReadFile],
            ..CoreToolsConfig::default()
        };
        let set = CoreToolSet::new(&config).unwrap();
        let error = set
            .call(CoreToolName::RunCommand, Map::new())
            .await
            .unwrap_err();
        assert_eq!(error.code(), "invalid_arguments");
    }
}
