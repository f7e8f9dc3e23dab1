//! The `core_tools:` section of `quiver.yaml`: its raw shape (read by
//! [`quiver_daemon::config`], keeping line and column) and the validated
//! [`CoreToolsConfig`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::Spanned;
use serde::Deserialize;

pub use crate::sandbox::SandboxMode;

use quiver_config::{ConfigError, ConfigWarning, IntKey, clamp, invalid_at};

/// One built-in core tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoreToolName {
    /// `read_file`.
    ReadFile,
    /// `write_file`.
    WriteFile,
    /// `list_dir`.
    ListDir,
    /// `search_files`.
    SearchFiles,
    /// `run_command`.
    RunCommand,
}

impl CoreToolName {
    /// Every core tool, in the order they are listed.
    pub const ALL: [CoreToolName; 5] = [
        CoreToolName::ReadFile,
        CoreToolName::WriteFile,
        CoreToolName::ListDir,
        CoreToolName::SearchFiles,
        CoreToolName::RunCommand,
    ];

    /// The tool's name as registered and called.
    pub fn as_str(self) -> &'static str {
        match self {
            CoreToolName::ReadFile => "read_file",
            CoreToolName::WriteFile => "write_file",
            CoreToolName::ListDir => "list_dir",
            CoreToolName::SearchFiles => "search_files",
            CoreToolName::RunCommand => "run_command",
        }
    }
}

impl std::fmt::Display for CoreToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The validated `core_tools.run_command` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCommandConfig {
    /// Whether every call waits for an approver (added to the approval
    /// globs by `dispatch::ChainParts::from_config`).
    pub require_approval: bool,
    /// Longest a command may run, in seconds; a call may ask for less.
    pub timeout_s: u64,
    /// Bytes kept of each of stdout and stderr (the start and the end).
    pub max_output_bytes: usize,
    /// The program and leading arguments the command string is appended
    /// to, e.g. `["sh", "-c"]`.
    pub shell: Vec<String>,
    /// The environment commands start with.
    pub environment: CommandEnvironment,
    /// The sandbox commands run in (see [`crate::sandbox`]).
    pub sandbox: SandboxMode,
}

impl Default for RunCommandConfig {
    fn default() -> Self {
        RunCommandConfig {
            require_approval: true,
            timeout_s: 60,
            max_output_bytes: 32_768,
            shell: vec!["sh".to_owned(), "-c".to_owned()],
            environment: CommandEnvironment::default(),
            sandbox: SandboxMode::default(),
        }
    }
}

/// The daemon's variables a command inherits by default: what programs
/// need to run and to read and write text, and nothing that usually holds
/// a secret (model API keys stay with the daemon).
pub const DEFAULT_ENV_INHERIT: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ", "TMPDIR",
];

/// The environment a command starts with: the daemon's variables whose
/// names match one of the `inherit` globs, then the `set` ones (which win).
///
/// ```
/// use std::collections::BTreeMap;
/// use quiver_core_tools::CommandEnvironment;
///
/// let set = BTreeMap::from([("CI".to_owned(), "1".to_owned())]);
/// let environment = CommandEnvironment::new(vec!["PATH".into(), "LC_*".into()], set).unwrap();
/// let daemon = [("PATH", "/bin"), ("LC_ALL", "C"), ("OPENAI_API_KEY", "sk-x")]
///     .map(|(k, v)| (k.into(), v.into()));
/// let names: Vec<_> = environment.resolve(daemon).into_iter().map(|(k, _)| k).collect();
/// assert_eq!(names, ["PATH", "LC_ALL", "CI"]);
/// ```
#[derive(Debug, Clone)]
pub struct CommandEnvironment {
    inherit: Vec<String>,
    matcher: GlobSet,
    set: BTreeMap<String, String>,
}

impl CommandEnvironment {
    /// Inherits the variables named by `inherit` (globs: `LC_*`; `*` is
    /// all), then sets `set`. Fails on a glob that does not parse.
    pub fn new(
        inherit: Vec<String>,
        set: BTreeMap<String, String>,
    ) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for pattern in &inherit {
            builder.add(Glob::new(pattern)?);
        }
        Ok(CommandEnvironment {
            matcher: builder.build()?,
            inherit,
            set,
        })
    }

    /// The globs of inherited variable names.
    pub fn inherit(&self) -> &[String] {
        &self.inherit
    }

    /// The variables set for every command.
    pub fn set(&self) -> &BTreeMap<String, String> {
        &self.set
    }

    /// The variables a command starts with, given the daemon's `from`
    /// (in its order, then the set ones).
    pub fn resolve(
        &self,
        from: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let mut variables: Vec<(OsString, OsString)> = from
            .into_iter()
            .filter(|(name, _)| {
                !name.to_str().is_some_and(|n| self.set.contains_key(n))
                    && self.matcher.is_match(Path::new(name))
            })
            .collect();
        variables.extend(
            self.set
                .iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        );
        variables
    }
}

impl Default for CommandEnvironment {
    fn default() -> Self {
        let inherit: Vec<String> = DEFAULT_ENV_INHERIT.iter().map(|&p| p.to_owned()).collect();
        CommandEnvironment::new(inherit.clone(), BTreeMap::new()).unwrap_or(CommandEnvironment {
            inherit,
            matcher: GlobSet::empty(),
            set: BTreeMap::new(),
        })
    }
}

impl PartialEq for CommandEnvironment {
    fn eq(&self, other: &Self) -> bool {
        self.inherit == other.inherit && self.set == other.set
    }
}

impl Eq for CommandEnvironment {}

/// The validated `core_tools` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreToolsConfig {
    /// The tools offered, in [`CoreToolName::ALL`] order, without repeats.
    pub enabled: Vec<CoreToolName>,
    /// The directory every tool is confined to (relative paths are
    /// resolved against the config file's directory).
    pub workspace: PathBuf,
    /// Most bytes `read_file` returns in one call.
    pub max_read_bytes: usize,
    /// Largest `content` `write_file` accepts, in bytes.
    pub max_write_bytes: usize,
    /// Most entries `list_dir` returns.
    pub max_list_entries: usize,
    /// Most matching lines `search_files` returns.
    pub max_search_matches: usize,
    /// `run_command`.
    pub run_command: RunCommandConfig,
}

impl Default for CoreToolsConfig {
    fn default() -> Self {
        CoreToolsConfig {
            enabled: CoreToolName::ALL.to_vec(),
            workspace: PathBuf::from("."),
            max_read_bytes: 65_536,
            max_write_bytes: 10_485_760,
            max_list_entries: 1000,
            max_search_matches: 200,
            run_command: RunCommandConfig::default(),
        }
    }
}

impl CoreToolsConfig {
    /// Whether `tool` is offered.
    pub fn is_enabled(&self, tool: CoreToolName) -> bool {
        self.enabled.contains(&tool)
    }

    /// Tool-name globs that must join `approval.require`: `run_command`
    /// when it is enabled and `run_command.require_approval` is set, or
    /// when its Landlock sandbox was asked for and this kernel cannot
    /// enforce it (an unconfined command is never run unasked).
    pub fn approval_globs(&self) -> Vec<String> {
        let unconfined = self.run_command.sandbox == SandboxMode::Landlock
            && !crate::sandbox::landlock_available();
        let needs = self.is_enabled(CoreToolName::RunCommand)
            && (self.run_command.require_approval || unconfined);
        needs
            .then(|| CoreToolName::RunCommand.as_str().to_owned())
            .into_iter()
            .collect()
    }

    /// Makes the workspace absolute against `base` (the config file's
    /// directory).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        self.workspace = quiver_config::paths::absolute(base, &self.workspace);
    }
}

// ---- raw shape -------------------------------------------------------------

/// CoreTools as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCoreTools {
    enabled: Option<Vec<CoreToolName>>,
    workspace: Option<Spanned<String>>,
    max_read_bytes: Option<Spanned<i64>>,
    max_write_bytes: Option<Spanned<i64>>,
    max_list_entries: Option<Spanned<i64>>,
    max_search_matches: Option<Spanned<i64>>,
    run_command: Option<RawRunCommand>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRunCommand {
    require_approval: Option<bool>,
    timeout_s: Option<Spanned<i64>>,
    max_output_bytes: Option<Spanned<i64>>,
    shell: Option<Spanned<Vec<String>>>,
    env_inherit: Option<Spanned<Vec<String>>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    sandbox: Option<SandboxMode>,
}

const CORE_TOOLS_KEYS: &str = "enabled, workspace, max_read_bytes, max_write_bytes, max_list_entries, max_search_matches, run_command";
const RUN_COMMAND_KEYS: &str =
    "require_approval, timeout_s, max_output_bytes, shell, env_inherit, env, sandbox";
const TOOL_NAMES: &str = "read_file, write_file, list_dir, search_files, run_command";

const MAX_READ_BYTES: IntKey = IntKey {
    key: "core_tools.max_read_bytes",
    min: 1024,
    max: 67_108_864,
};
const MAX_WRITE_BYTES: IntKey = IntKey {
    key: "core_tools.max_write_bytes",
    min: 1,
    max: 1_073_741_824,
};
const MAX_LIST_ENTRIES: IntKey = IntKey {
    key: "core_tools.max_list_entries",
    min: 1,
    max: 100_000,
};
const MAX_SEARCH_MATCHES: IntKey = IntKey {
    key: "core_tools.max_search_matches",
    min: 1,
    max: 10_000,
};
const TIMEOUT_S: IntKey = IntKey {
    key: "core_tools.run_command.timeout_s",
    min: 1,
    max: 3600,
};
const MAX_OUTPUT_BYTES: IntKey = IntKey {
    key: "core_tools.run_command.max_output_bytes",
    min: 1024,
    max: 16_777_216,
};

fn range_text(range: &IntKey) -> String {
    format!("an integer from {} to {}", range.min, range.max)
}

/// What a key of this section accepts, for error messages; `None` for keys
/// of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "core_tools" && !key.starts_with("core_tools.") && !key.starts_with("core_tools[") {
        return None;
    }
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let in_run_command = key.starts_with("core_tools.run_command");
    Some(match (in_run_command, leaf) {
        (false, "core_tools") => format!("a map with keys {CORE_TOOLS_KEYS}"),
        (false, "enabled") => format!("a list of tool names from: {TOOL_NAMES}"),
        (false, "workspace") => "a directory path (relative to the config file)".into(),
        (false, "max_read_bytes") => range_text(&MAX_READ_BYTES),
        (false, "max_write_bytes") => range_text(&MAX_WRITE_BYTES),
        (false, "max_list_entries") => range_text(&MAX_LIST_ENTRIES),
        (false, "max_search_matches") => range_text(&MAX_SEARCH_MATCHES),
        (false, _) => format!("keys {CORE_TOOLS_KEYS}"),
        (true, "run_command") => format!("a map with keys {RUN_COMMAND_KEYS}"),
        (true, "require_approval") => "true, false".into(),
        (true, "timeout_s") => range_text(&TIMEOUT_S),
        (true, "max_output_bytes") => range_text(&MAX_OUTPUT_BYTES),
        (true, "shell") => {
            "a non-empty list: the program and its leading arguments, e.g. [sh, -c]".into()
        }
        (true, "env_inherit") => format!(
            "a list of variable-name globs, e.g. [PATH, HOME, \"LC_*\"] ([\"*\"]: all); default [{}]",
            DEFAULT_ENV_INHERIT.join(", ")
        ),
        (true, "sandbox") => "landlock, off".into(),
        (true, "env") => {
            "a map of variable name (no `=`, not empty) to string value, e.g. {CI: \"1\"}".into()
        }
        (true, _) => format!("keys {RUN_COMMAND_KEYS}"),
    })
}

/// Validates `run_command.env_inherit` and `run_command.env`.
fn command_environment(
    inherit: Option<Spanned<Vec<String>>>,
    set: Option<Spanned<BTreeMap<String, String>>>,
    file: &str,
) -> Result<CommandEnvironment, ConfigError> {
    let defaults = CommandEnvironment::default();
    let set_value = match set {
        None => BTreeMap::new(),
        Some(set) => {
            let bad = set.value.iter().find_map(|(name, value)| {
                if name.is_empty() || name.contains(['=', '\0']) {
                    Some(format!(
                        "variable name {name:?} is empty or holds `=` or NUL"
                    ))
                } else if value.contains('\0') {
                    Some(format!("the value of {name} holds a NUL byte"))
                } else {
                    None
                }
            });
            if let Some(message) = bad {
                return Err(invalid(file, &set, "core_tools.run_command.env", message));
            }
            set.value
        }
    };
    let Some(inherit) = inherit else {
        return Ok(CommandEnvironment {
            set: set_value,
            ..defaults
        });
    };
    if let Some(empty) = inherit.value.iter().position(|p| p.trim().is_empty()) {
        return Err(invalid(
            file,
            &inherit,
            "core_tools.run_command.env_inherit",
            format!("item {} is empty", empty + 1),
        ));
    }
    CommandEnvironment::new(inherit.value.clone(), set_value).map_err(|error| {
        invalid(
            file,
            &inherit,
            "core_tools.run_command.env_inherit",
            format!("not a glob: {error}"),
        )
    })
}

fn invalid<T>(file: &str, at: &Spanned<T>, key: &str, message: String) -> ConfigError {
    let allowed = allowed_for(key).unwrap_or_default();
    invalid_at(file, at, key.to_owned(), message, allowed)
}

fn clamped(
    value: &Option<Spanned<i64>>,
    range: &IntKey,
    default: usize,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> usize {
    clamp(
        value,
        range.key,
        (range.min, range.max),
        default as i64,
        file,
        warnings,
    ) as usize
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_core_tools(
    raw: RawCoreTools,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<CoreToolsConfig, ConfigError> {
    let defaults = CoreToolsConfig::default();
    let enabled = match raw.enabled {
        None => defaults.enabled,
        Some(names) => CoreToolName::ALL
            .into_iter()
            .filter(|name| names.contains(name))
            .collect(),
    };
    let workspace = match raw.workspace {
        None => defaults.workspace,
        Some(dir) if dir.value.trim().is_empty() => {
            return Err(invalid(
                file,
                &dir,
                "core_tools.workspace",
                "empty directory path".into(),
            ));
        }
        Some(dir) => PathBuf::from(dir.value),
    };
    let max_read_bytes = clamped(
        &raw.max_read_bytes,
        &MAX_READ_BYTES,
        defaults.max_read_bytes,
        file,
        warnings,
    );
    let max_write_bytes = clamped(
        &raw.max_write_bytes,
        &MAX_WRITE_BYTES,
        defaults.max_write_bytes,
        file,
        warnings,
    );
    let max_list_entries = clamped(
        &raw.max_list_entries,
        &MAX_LIST_ENTRIES,
        defaults.max_list_entries,
        file,
        warnings,
    );
    let max_search_matches = clamped(
        &raw.max_search_matches,
        &MAX_SEARCH_MATCHES,
        defaults.max_search_matches,
        file,
        warnings,
    );
    let raw_run = raw.run_command.unwrap_or_default();
    let run_defaults = defaults.run_command;
    let shell = match raw_run.shell {
        None => run_defaults.shell,
        Some(shell) if shell.value.first().is_none_or(|p| p.trim().is_empty()) => {
            return Err(invalid(
                file,
                &shell,
                "core_tools.run_command.shell",
                "the program (first item) is missing or empty".into(),
            ));
        }
        Some(shell) => shell.value,
    };
    let environment = command_environment(raw_run.env_inherit, raw_run.env, file)?;
    let run_command = RunCommandConfig {
        require_approval: raw_run
            .require_approval
            .unwrap_or(run_defaults.require_approval),
        timeout_s: clamped(
            &raw_run.timeout_s,
            &TIMEOUT_S,
            run_defaults.timeout_s as usize,
            file,
            warnings,
        ) as u64,
        max_output_bytes: clamped(
            &raw_run.max_output_bytes,
            &MAX_OUTPUT_BYTES,
            run_defaults.max_output_bytes,
            file,
            warnings,
        ),
        shell,
        environment,
        sandbox: raw_run.sandbox.unwrap_or_default(),
    };
    Ok(CoreToolsConfig {
        enabled,
        workspace,
        max_read_bytes,
        max_write_bytes,
        max_list_entries,
        max_search_matches,
        run_command,
    })
}
