//! The `core_tools:` section of `quiver.yaml`: its raw shape (read by
//! [`quiver_daemon::config`], keeping line and column) and the validated
//! [`CoreToolsConfig`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quiver_config::Spanned;
use serde::Deserialize;

pub use crate::sandbox::SandboxMode;

use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, int_setting, invalid_at};
use quiver_process::environment::{inherit_pattern_problem, variable_problem};

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
            timeout_s: TIMEOUT_S.default_int() as u64,
            max_output_bytes: MAX_OUTPUT_BYTES.default_int() as usize,
            shell: vec!["sh".to_owned(), "-c".to_owned()],
            environment: CommandEnvironment::default(),
            sandbox: SandboxMode::default(),
        }
    }
}

pub use quiver_process::environment::{CommandEnvironment, DEFAULT_ENV_INHERIT};

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
            max_read_bytes: MAX_READ_BYTES.default_int() as usize,
            max_write_bytes: MAX_WRITE_BYTES.default_int() as usize,
            max_list_entries: MAX_LIST_ENTRIES.default_int() as usize,
            max_search_matches: MAX_SEARCH_MATCHES.default_int() as usize,
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

/// The keys of `core_tools`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "core_tools.enabled",
        kind: Kind::List(
            "a list of tool names from: read_file, write_file, list_dir, search_files, run_command",
        ),
        default: DefaultValue::Described("all five"),
        doc: "the [core tools](#core-tools) offered (always sent, never deferred)",
    },
    Setting {
        key: "core_tools.workspace",
        kind: Kind::Text("a directory path (relative to the config file)"),
        default: DefaultValue::Str("."),
        doc: "the root every core tool is confined to (relative paths are relative to the config file); it must exist when the tools start",
    },
    Setting::int(
        "core_tools.max_read_bytes",
        1024,
        67108864,
        65536,
        "most bytes one `read_file` call returns (whole lines; it says where to read on)",
    ),
    Setting::int(
        "core_tools.max_write_bytes",
        1,
        1073741824,
        10485760,
        "largest `content` `write_file` accepts",
    ),
    Setting::int(
        "core_tools.max_list_entries",
        1,
        100000,
        1000,
        "most entries `list_dir` returns",
    ),
    Setting::int(
        "core_tools.max_search_matches",
        1,
        10000,
        200,
        "most matching lines `search_files` returns (a call's `max_matches` may ask for fewer)",
    ),
    Setting {
        key: "core_tools.run_command",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "how `run_command` runs commands",
    },
    Setting {
        key: "core_tools.run_command.require_approval",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        doc: "`true` adds `run_command` to `approval.require`",
    },
    Setting::timeout(
        "core_tools.run_command.timeout_s",
        1,
        3600,
        60,
        "longest a command runs (a call's `timeout_s` may ask for less); then its whole process group is killed. `guardrails.call_timeout_ms` also applies",
    ),
    Setting::int(
        "core_tools.run_command.max_output_bytes",
        1024,
        16777216,
        32768,
        "bytes kept of each of stdout and stderr: the first and last halves, with `[quiver: N bytes cut]` between",
    ),
    Setting {
        key: "core_tools.run_command.shell",
        kind: Kind::List("a non-empty list: the program and its leading arguments, e.g. [sh, -c]"),
        default: DefaultValue::List(&["sh", "-c"]),
        doc: "the program and leading arguments; the command string is appended as the last argument",
    },
    Setting {
        key: "core_tools.run_command.env_inherit",
        kind: Kind::List(
            "a list of variable-name globs, e.g. [PATH, HOME, \"LC_*\"] ([\"*\"]: all)",
        ),
        default: DefaultValue::List(DEFAULT_ENV_INHERIT),
        doc: "the daemon's environment variables a command gets; nothing else is passed on (and the sandbox keeps commands out of the daemon's `/proc/PID/environ`). `[\"*\"]` passes everything",
    },
    Setting {
        key: "core_tools.run_command.env",
        kind: Kind::Map(
            "a map of variable name (no `=`, not empty) to string value, e.g. {CI: \"1\"}",
        ),
        default: DefaultValue::EmptyMap,
        doc: "variables set for every command (they win over inherited ones)",
    },
    Setting {
        key: "core_tools.run_command.sandbox",
        kind: Kind::Enum(&["landlock", "off"]),
        default: DefaultValue::Str("landlock"),
        doc: "the [sandbox](#core-tools) commands run in; without Landlock in the kernel, commands always need approval",
    },
];

const MAX_READ_BYTES: &Setting = by_key(SETTINGS, "core_tools.max_read_bytes");
const MAX_WRITE_BYTES: &Setting = by_key(SETTINGS, "core_tools.max_write_bytes");
const MAX_LIST_ENTRIES: &Setting = by_key(SETTINGS, "core_tools.max_list_entries");
const MAX_SEARCH_MATCHES: &Setting = by_key(SETTINGS, "core_tools.max_search_matches");
const TIMEOUT_S: &Setting = by_key(SETTINGS, "core_tools.run_command.timeout_s");
const MAX_OUTPUT_BYTES: &Setting = by_key(SETTINGS, "core_tools.run_command.max_output_bytes");

/// What a key of this section accepts (from [`SETTINGS`]), for error
/// messages; `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "core_tools" && !key.starts_with("core_tools.") && !key.starts_with("core_tools[") {
        return None;
    }
    let text = quiver_config::setting::allowed_in(SETTINGS, key)?;
    Some(if key == "core_tools.run_command.env_inherit" {
        format!("{text}; default [{}]", DEFAULT_ENV_INHERIT.join(", "))
    } else {
        text
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
            let bad = set
                .value
                .iter()
                .find_map(|(name, value)| variable_problem(name, value));
            if let Some(message) = bad {
                return Err(invalid(file, &set, "core_tools.run_command.env", message));
            }
            set.value
        }
    };
    let Some(inherit) = inherit else {
        return Ok(defaults.with_set(set_value));
    };
    let problem = inherit
        .value
        .iter()
        .enumerate()
        .find_map(|(index, pattern)| {
            inherit_pattern_problem(pattern).map(|why| format!("item {}: {why}", index + 1))
        });
    if let Some(message) = problem {
        return Err(invalid(
            file,
            &inherit,
            "core_tools.run_command.env_inherit",
            message,
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
    setting: &Setting,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<usize, ConfigError> {
    int_setting(value, setting, setting.key, file, warnings).map(|n| n as usize)
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
    let max_read_bytes = clamped(&raw.max_read_bytes, MAX_READ_BYTES, file, warnings)?;
    let max_write_bytes = clamped(&raw.max_write_bytes, MAX_WRITE_BYTES, file, warnings)?;
    let max_list_entries = clamped(&raw.max_list_entries, MAX_LIST_ENTRIES, file, warnings)?;
    let max_search_matches = clamped(&raw.max_search_matches, MAX_SEARCH_MATCHES, file, warnings)?;
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
        timeout_s: clamped(&raw_run.timeout_s, TIMEOUT_S, file, warnings)? as u64,
        max_output_bytes: clamped(&raw_run.max_output_bytes, MAX_OUTPUT_BYTES, file, warnings)?,
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
