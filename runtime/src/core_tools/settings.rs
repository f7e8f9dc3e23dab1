//! The `core_tools:` section of `quiver.yaml`: its raw shape (read by
//! [`crate::config`], keeping line and column) and the validated
//! [`CoreToolsConfig`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::{ConfigError, ConfigWarning, IntKey, clamp, invalid_at};

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
}

impl Default for RunCommandConfig {
    fn default() -> Self {
        RunCommandConfig {
            require_approval: true,
            timeout_s: 60,
            max_output_bytes: 32_768,
            shell: vec!["sh".to_owned(), "-c".to_owned()],
            environment: CommandEnvironment::default(),
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
/// use quiver_runtime::core_tools::CommandEnvironment;
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
    /// when it is enabled and `run_command.require_approval` is set.
    pub fn approval_globs(&self) -> Vec<String> {
        let needs = self.is_enabled(CoreToolName::RunCommand) && self.run_command.require_approval;
        needs
            .then(|| CoreToolName::RunCommand.as_str().to_owned())
            .into_iter()
            .collect()
    }

    pub(crate) fn resolve_relative_to(&mut self, base: &Path) {
        if self.workspace.is_relative() {
            self.workspace = base.join(&self.workspace);
        }
    }
}

// ---- raw shape -------------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCoreTools {
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
}

const CORE_TOOLS_KEYS: &str = "enabled, workspace, max_read_bytes, max_write_bytes, max_list_entries, max_search_matches, run_command";
const RUN_COMMAND_KEYS: &str =
    "require_approval, timeout_s, max_output_bytes, shell, env_inherit, env";
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
pub(crate) fn allowed_for(key: &str) -> Option<String> {
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

pub(crate) fn validate_core_tools(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{invalid_parts as invalid, parse};

    #[test]
    fn defaults_offer_every_tool_with_approval_for_commands() {
        let c = parse("", "q.yaml").unwrap().config.core_tools;
        assert_eq!(c, CoreToolsConfig::default());
        assert_eq!(c.enabled, CoreToolName::ALL);
        assert_eq!(c.workspace, PathBuf::from("."));
        assert!(c.run_command.require_approval);
        assert_eq!(c.approval_globs(), ["run_command"]);
    }

    #[test]
    fn full_section_is_read() {
        let text = "core_tools:\n  enabled: [run_command, read_file, read_file]\n  workspace: work\n  max_read_bytes: 2048\n  max_write_bytes: 100\n  max_list_entries: 10\n  max_search_matches: 5\n  run_command:\n    require_approval: false\n    timeout_s: 7\n    max_output_bytes: 4096\n    shell: [bash, -lc]\n";
        let loaded = parse(text, "q.yaml").unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let c = loaded.config.core_tools;
        assert_eq!(
            c.enabled,
            [CoreToolName::ReadFile, CoreToolName::RunCommand]
        );
        assert_eq!(c.workspace, PathBuf::from("work"));
        assert_eq!(
            (
                c.max_read_bytes,
                c.max_write_bytes,
                c.max_list_entries,
                c.max_search_matches
            ),
            (2048, 100, 10, 5)
        );
        assert_eq!(
            c.run_command,
            RunCommandConfig {
                require_approval: false,
                timeout_s: 7,
                max_output_bytes: 4096,
                shell: vec!["bash".into(), "-lc".into()],
                environment: CommandEnvironment::default(),
            }
        );
        assert!(c.approval_globs().is_empty());
    }

    #[test]
    fn disabled_run_command_needs_no_approval_glob() {
        let c = parse("core_tools:\n  enabled: [read_file]\n", "q.yaml")
            .unwrap()
            .config
            .core_tools;
        assert!(c.approval_globs().is_empty());
        assert!(!c.is_enabled(CoreToolName::RunCommand));
    }

    #[test]
    fn out_of_range_numbers_are_clamped_with_warnings() {
        let text = "core_tools:\n  max_read_bytes: 1\n  max_list_entries: 0\n  run_command:\n    timeout_s: 999999\n    max_output_bytes: 0\n";
        let loaded = parse(text, "q.yaml").unwrap();
        let c = &loaded.config.core_tools;
        assert_eq!(c.max_read_bytes, 1024);
        assert_eq!(c.max_list_entries, 1);
        assert_eq!(c.run_command.timeout_s, 3600);
        assert_eq!(c.run_command.max_output_bytes, 1024);
        let keys: Vec<(&str, u32, u32)> = loaded
            .warnings
            .iter()
            .map(|w| (w.key.as_str(), w.line, w.column))
            .collect();
        assert_eq!(
            keys,
            [
                ("core_tools.max_read_bytes", 2, 19),
                ("core_tools.max_list_entries", 3, 21),
                ("core_tools.run_command.timeout_s", 5, 16),
                ("core_tools.run_command.max_output_bytes", 6, 23),
            ]
        );
    }

    #[test]
    fn errors_name_key_location_and_allowed_values() {
        let (key, line, _, message, allowed) =
            invalid("core_tools:\n  enabled: [read_file, delete_file]\n");
        assert!(key.starts_with("core_tools.enabled"), "{key}");
        assert_eq!(line, 2);
        assert!(message.contains("delete_file"), "{message}");
        assert!(allowed.contains("search_files"), "{allowed}");
        let (key, line, column, message, allowed) =
            invalid("core_tools:\n  run_command:\n    approval: false\n");
        assert!(key.starts_with("core_tools.run_command"), "{key}");
        assert_eq!((line, column), (3, 5));
        assert!(message.contains("approval"), "{message}");
        assert!(allowed.contains("require_approval"), "{allowed}");
        let (key, line, _, _, allowed) = invalid("core_tools:\n  workspace: \"\"\n");
        assert_eq!((key.as_str(), line), ("core_tools.workspace", 2));
        assert!(allowed.contains("directory"), "{allowed}");
        let (key, line, ..) = invalid("core_tools:\n  run_command:\n    shell: []\n");
        assert_eq!((key.as_str(), line), ("core_tools.run_command.shell", 3));
        let (key, line, _, message, allowed) =
            invalid("core_tools:\n  run_command:\n    env_inherit: [PATH, \"LC_[\"]\n");
        assert_eq!(
            (key.as_str(), line),
            ("core_tools.run_command.env_inherit", 3)
        );
        assert!(message.contains("not a glob"), "{message}");
        assert!(allowed.contains("LC_*"), "{allowed}");
        let (key, _, _, message, _) =
            invalid("core_tools:\n  run_command:\n    env_inherit: [PATH, \" \"]\n");
        assert_eq!(key, "core_tools.run_command.env_inherit");
        assert!(message.contains("item 2"), "{message}");
        let (key, line, _, message, _) =
            invalid("core_tools:\n  run_command:\n    env: {\"A=B\": x}\n");
        assert_eq!((key.as_str(), line), ("core_tools.run_command.env", 3));
        assert!(message.contains("A=B"), "{message}");
        let (key, _, _, message, allowed) = invalid("core_tools:\n  max_read_bytes: lots\n");
        assert_eq!(key, "core_tools.max_read_bytes");
        assert!(message.contains("integer"), "{message}");
        assert_eq!(allowed, "an integer from 1024 to 67108864");
        let (key, _, _, _, allowed) = invalid("core_tools:\n  workdir: x\n");
        assert!(key.starts_with("core_tools"), "{key}");
        assert!(allowed.contains("max_search_matches"), "{allowed}");
    }

    #[test]
    fn the_environment_inherits_by_glob_and_set_variables_win() {
        let daemon = || {
            [
                ("PATH", "/bin"),
                ("LC_ALL", "C"),
                ("API_KEY", "k"),
                ("CI", "0"),
            ]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        };
        let names = |e: &CommandEnvironment| -> Vec<(String, String)> {
            e.resolve(daemon())
                .into_iter()
                .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
                .collect()
        };
        let defaults = CommandEnvironment::default();
        assert_eq!(
            names(&defaults),
            [
                ("PATH".into(), "/bin".into()),
                ("LC_ALL".into(), "C".into())
            ]
        );
        let set = BTreeMap::from([("CI".to_owned(), "1".to_owned())]);
        let all = CommandEnvironment::new(vec!["*".into()], set).unwrap();
        assert_eq!(
            names(&all),
            [
                ("PATH".into(), "/bin".into()),
                ("LC_ALL".into(), "C".into()),
                ("API_KEY".into(), "k".into()),
                ("CI".into(), "1".into())
            ]
        );
        let loaded = parse(
            "core_tools:\n  run_command:\n    env_inherit: [HOME]\n    env: {CI: \"1\"}\n",
            "q.yaml",
        )
        .unwrap();
        let environment = &loaded.config.core_tools.run_command.environment;
        assert_eq!(environment.inherit(), ["HOME"]);
        assert_eq!(environment.set().get("CI").map(String::as_str), Some("1"));
    }

    #[test]
    fn relative_workspace_follows_the_config_file() {
        let mut c = CoreToolsConfig {
            workspace: "ws".into(),
            ..CoreToolsConfig::default()
        };
        c.resolve_relative_to(Path::new("/etc/quiver"));
        assert_eq!(c.workspace, PathBuf::from("/etc/quiver/ws"));
        let mut c = CoreToolsConfig {
            workspace: "/abs".into(),
            ..CoreToolsConfig::default()
        };
        c.resolve_relative_to(Path::new("/etc/quiver"));
        assert_eq!(c.workspace, PathBuf::from("/abs"));
    }
}
