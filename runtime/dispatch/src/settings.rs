//! The `guardrails:`, `approval:` and `feed:` sections of `quiver.yaml`:
//! raw shapes (read by [`quiver_daemon::config`], keeping line and column) and
//! their validated forms.

use quiver_config::Spanned;
use serde::Deserialize;

use super::approval::{ApprovalPolicy, OnTimeout};
use super::guardrail::{ArgumentPattern, GuardrailRule, Guardrails, RuleAction};
use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, int_setting, invalid_at};

/// Feed keys redacted when `feed.redact` is not given.
pub const DEFAULT_REDACT: [&str; 5] = ["password", "token", "secret", "api_key", "authorization"];

/// The validated `guardrails` section.
#[derive(Debug, Clone)]
pub struct GuardrailsConfig {
    /// What calls no rule matches get.
    pub default: RuleAction,
    /// The rules, in file order.
    pub rules: Vec<GuardrailRule>,
    /// Results longer than this many characters are cut.
    pub max_result_chars: usize,
    /// Longest a tool call may take, whatever its source, in milliseconds.
    pub call_timeout_ms: u64,
    /// Whether arguments are coerced to their declared types before
    /// validation (`"42"` for an integer); off for strict validation.
    pub coerce_arguments: bool,
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        GuardrailsConfig {
            default: RuleAction::Allow,
            rules: Vec::new(),
            max_result_chars: MAX_RESULT_CHARS.default_int() as usize,
            call_timeout_ms: CALL_TIMEOUT_MS.default_int() as u64,
            coerce_arguments: true,
        }
    }
}

impl GuardrailsConfig {
    /// The rules as the guardrail layer uses them.
    pub fn guardrails(&self) -> Guardrails {
        Guardrails::new(self.rules.clone(), self.default)
    }
}

/// The validated `approval` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalConfig {
    /// Globs of tools whose calls need approval.
    pub require: Vec<String>,
    /// Globs of tools approved without asking (among `require`).
    pub auto_approve: Vec<String>,
    /// How long a call waits for an answer, in seconds.
    pub timeout_s: u64,
    /// What happens then.
    pub on_timeout: OnTimeout,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        ApprovalConfig {
            require: Vec::new(),
            auto_approve: Vec::new(),
            timeout_s: TIMEOUT_S.default_int() as u64,
            on_timeout: OnTimeout::Deny,
        }
    }
}

impl ApprovalConfig {
    /// The policy for the approval layer.
    pub fn policy(&self) -> Result<ApprovalPolicy, globset::Error> {
        ApprovalPolicy::new(
            &self.require,
            std::time::Duration::from_secs(self.timeout_s),
        )
    }
}

/// The validated `feed` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedConfig {
    /// Argument keys shown as `[redacted]` (case-insensitive, any depth).
    pub redact: Vec<String>,
    /// Events a receiver may fall behind before losing the oldest.
    pub capacity: usize,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            redact: DEFAULT_REDACT.iter().map(|k| (*k).to_owned()).collect(),
            capacity: super::feed::DEFAULT_CAPACITY,
        }
    }
}

// ---- raw shapes ------------------------------------------------------------

/// Guardrails as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawGuardrails {
    default: Option<RuleAction>,
    rules: Option<Vec<RawRule>>,
    max_result_chars: Option<Spanned<i64>>,
    call_timeout_ms: Option<Spanned<i64>>,
    coerce_arguments: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: Spanned<String>,
    action: RuleAction,
    reason: Option<String>,
    arguments: Option<Vec<RawArgument>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArgument {
    pointer: Spanned<String>,
    regex: Spanned<String>,
}

/// Approval as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawApproval {
    require: Option<Vec<Spanned<String>>>,
    auto_approve: Option<Vec<Spanned<String>>>,
    timeout_s: Option<Spanned<i64>>,
    on_timeout: Option<OnTimeout>,
}

/// Feed as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFeed {
    redact: Option<Vec<String>>,
    capacity: Option<Spanned<i64>>,
}

/// The keys of `guardrails`, `approval` and `feed`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "guardrails.default",
        kind: Kind::Enum(&["allow", "deny"]),
        default: DefaultValue::Str("allow"),
        doc: "what a call no rule matches gets (see [Dispatch](#dispatch-hooks-guardrails-approval-feed))",
    },
    Setting {
        key: "guardrails.rules",
        kind: Kind::Tables,
        default: DefaultValue::List(&[]),
        doc: "each rule matches calls by `tool` (and `arguments`); the first matching rule decides",
    },
    Setting {
        key: "guardrails.rules[].tool",
        kind: Kind::Text(
            "a tool-name glob, e.g. \"mcp_github_*\", or annotation:read_only, annotation:destructive, annotation:idempotent, annotation:open_world",
        ),
        default: DefaultValue::Required,
        doc: "a glob over the exposed tool name, or `annotation:NAME`: the tools whose source claims that behaviour (MCP `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`; an unset hint reads as MCP's default: not read-only, destructive, not idempotent, open world). Hints are the server's claim, not a guarantee (see docs/TOOL_INTEGRITY.md)",
    },
    Setting {
        key: "guardrails.rules[].action",
        kind: Kind::Enum(&["allow", "deny"]),
        default: DefaultValue::Required,
        doc: "what a matching call gets",
    },
    Setting {
        key: "guardrails.rules[].reason",
        kind: Kind::Text("a string"),
        default: DefaultValue::None,
        doc: "shown to the model when the call is denied",
    },
    Setting {
        key: "guardrails.rules[].arguments",
        kind: Kind::Tables,
        default: DefaultValue::List(&[]),
        doc: "the rule matches only if every pattern matches: `pointer` is a JSON pointer into the arguments (`\"\"` or `/key/...`), `regex` (Rust syntax, unanchored) is searched in the value (strings as they are, other values as compact JSON); a missing value does not match",
    },
    Setting {
        key: "guardrails.rules[].arguments[].pointer",
        kind: Kind::Text("a JSON pointer: \"\" or a path such as /repo"),
        default: DefaultValue::Required,
        doc: "a JSON pointer into the arguments (`\"\"` or `/key/...`)",
    },
    Setting {
        key: "guardrails.rules[].arguments[].regex",
        kind: Kind::Text("a regular expression (Rust regex syntax)"),
        default: DefaultValue::Required,
        doc: "searched (unanchored) in the value: strings as they are, other values as compact JSON",
    },
    Setting::int(
        "guardrails.max_result_chars",
        1000,
        10000000,
        100000,
        "a result longer than this (characters of its JSON text) is cut there and ends with `[quiver: result cut: showed N of M characters]`",
    ),
    Setting::timeout(
        "guardrails.call_timeout_ms",
        1,
        3600000,
        120000,
        "longest any tool call may take, whatever its source (the source's own limit, e.g. `plugins.call_timeout_ms`, also applies)",
    ),
    Setting {
        key: "guardrails.coerce_arguments",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        doc: "before validation, arguments are read as their declared types where the schema leaves one reading: `\"42\"` for an `integer` or `number`, `\"true\"`/`\"false\"` for a `boolean`, JSON text for an `object` or `array` (never for a property that also accepts a string). The result says what was coerced (a `[quiver: arguments coerced ...]` text block, or `quiver_note`), and so does the feed event's detail. `false`: strict. `null` is accepted for `nullable: true` (OpenAPI) as for `type: [T, \"null\"]`, either way",
    },
    Setting {
        key: "approval.require",
        kind: Kind::List(
            "a list of tool-name globs or annotation:NAME, e.g. [\"mcp_github_create_*\", \"annotation:destructive\"]",
        ),
        default: DefaultValue::List(&[]),
        doc: "tools (exposed names) whose calls wait for an approver; `annotation:NAME` (`read_only`, `destructive`, `idempotent`, `open_world`) names the tools whose source claims that behaviour, an unset hint reading as MCP's default (so `annotation:destructive` also takes tools that say nothing)",
    },
    Setting {
        key: "approval.auto_approve",
        kind: Kind::List("a list of tool-name globs, e.g. [\"mcp_github_create_*\"]"),
        default: DefaultValue::List(&[]),
        doc: "among those, tools approved at once without asking",
    },
    Setting::timeout(
        "approval.timeout_s",
        1,
        86400,
        300,
        "how long a call waits for an answer",
    ),
    Setting {
        key: "approval.on_timeout",
        kind: Kind::Enum(&["deny"]),
        default: DefaultValue::Str("deny"),
        doc: "what happens then: the call is denied (`approval_timed_out`)",
    },
    Setting {
        key: "feed.redact",
        kind: Kind::List("a list of argument keys, e.g. [token, password]"),
        default: DefaultValue::List(&DEFAULT_REDACT),
        doc: "keys shown as `\"[redacted]\"` in the activity feed and approval requests (case-insensitive, at any depth)",
    },
    Setting::int(
        "feed.capacity",
        16,
        1000000,
        1024,
        "events a feed receiver may fall behind before it loses the oldest",
    ),
];

const MAX_RESULT_CHARS: &Setting = by_key(SETTINGS, "guardrails.max_result_chars");
const CALL_TIMEOUT_MS: &Setting = by_key(SETTINGS, "guardrails.call_timeout_ms");
const TIMEOUT_S: &Setting = by_key(SETTINGS, "approval.timeout_s");
const CAPACITY: &Setting = by_key(SETTINGS, "feed.capacity");

/// What a key of these sections accepts (from [`SETTINGS`]), for error
/// messages; `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    let section = key.split(['.', '[']).next().unwrap_or(key);
    if !matches!(section, "guardrails" | "approval" | "feed") {
        return None;
    }
    quiver_config::setting::allowed_in(SETTINGS, key)
}

fn invalid<T>(file: &str, at: &Spanned<T>, key: String, message: String) -> ConfigError {
    let allowed = allowed_for(&key).unwrap_or_default();
    invalid_at(file, at, key, message, allowed)
}

fn globs(
    raw: Option<Vec<Spanned<String>>>,
    key: &str,
    file: &str,
) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for (index, glob) in raw.unwrap_or_default().into_iter().enumerate() {
        if let Some(Err(message)) = quiver_tool::tool::annotation_pattern(&glob.value) {
            return Err(invalid(file, &glob, format!("{key}[{index}]"), message));
        }
        if let Err(e) = globset::Glob::new(&glob.value) {
            return Err(invalid(
                file,
                &glob,
                format!("{key}[{index}]"),
                format!("`{}` is not a valid glob: {}", glob.value, e.kind()),
            ));
        }
        out.push(glob.value);
    }
    Ok(out)
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_guardrails(
    raw: RawGuardrails,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<GuardrailsConfig, ConfigError> {
    let defaults = GuardrailsConfig::default();
    let max_result_chars = int_setting(
        &raw.max_result_chars,
        MAX_RESULT_CHARS,
        MAX_RESULT_CHARS.key,
        file,
        warnings,
    )?;
    let call_timeout_ms = int_setting(
        &raw.call_timeout_ms,
        CALL_TIMEOUT_MS,
        CALL_TIMEOUT_MS.key,
        file,
        warnings,
    )?;
    let mut rules = Vec::new();
    for (index, rule) in raw.rules.unwrap_or_default().into_iter().enumerate() {
        let mut patterns = Vec::new();
        for (a, argument) in rule.arguments.unwrap_or_default().into_iter().enumerate() {
            let at = |field: &str| format!("guardrails.rules[{index}].arguments[{a}].{field}");
            let pattern = ArgumentPattern::new(&argument.pointer.value, &argument.regex.value)
                .map_err(|e| match e {
                    super::guardrail::RuleError::Pointer(_) => {
                        invalid(file, &argument.pointer, at("pointer"), e.to_string())
                    }
                    other => invalid(file, &argument.regex, at("regex"), other.to_string()),
                })?;
            patterns.push(pattern);
        }
        let built = GuardrailRule::new(&rule.tool.value, rule.action, rule.reason, patterns)
            .map_err(|e| {
                invalid(
                    file,
                    &rule.tool,
                    format!("guardrails.rules[{index}].tool"),
                    e.to_string(),
                )
            })?;
        rules.push(built);
    }
    Ok(GuardrailsConfig {
        default: raw.default.unwrap_or(defaults.default),
        rules,
        max_result_chars: max_result_chars as usize,
        call_timeout_ms: call_timeout_ms as u64,
        coerce_arguments: raw.coerce_arguments.unwrap_or(defaults.coerce_arguments),
    })
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_approval(
    raw: RawApproval,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ApprovalConfig, ConfigError> {
    let defaults = ApprovalConfig::default();
    Ok(ApprovalConfig {
        require: globs(raw.require, "approval.require", file)?,
        auto_approve: globs(raw.auto_approve, "approval.auto_approve", file)?,
        timeout_s: int_setting(&raw.timeout_s, TIMEOUT_S, TIMEOUT_S.key, file, warnings)? as u64,
        on_timeout: raw.on_timeout.unwrap_or(defaults.on_timeout),
    })
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_feed(
    raw: RawFeed,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<FeedConfig, ConfigError> {
    let defaults = FeedConfig::default();
    Ok(FeedConfig {
        redact: raw.redact.unwrap_or(defaults.redact),
        capacity: int_setting(&raw.capacity, CAPACITY, CAPACITY.key, file, warnings)? as usize,
    })
}
