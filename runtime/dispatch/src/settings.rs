//! The `guardrails:`, `approval:` and `feed:` sections of `quiver.yaml`:
//! raw shapes (read by [`quiver_daemon::config`], keeping line and column) and
//! their validated forms.

use quiver_config::Spanned;
use serde::Deserialize;

use super::approval::{ApprovalPolicy, OnTimeout};
use super::guardrail::{ArgumentPattern, GuardrailRule, Guardrails, RuleAction};
use quiver_config::{ConfigError, ConfigWarning, clamp, invalid_at};

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
            max_result_chars: 100_000,
            call_timeout_ms: 120_000,
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
            timeout_s: 300,
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

const GUARDRAILS_KEYS: &str = "default, rules, max_result_chars, call_timeout_ms, coerce_arguments";
const RULE_KEYS: &str = "tool, action, reason, arguments";
const APPROVAL_KEYS: &str = "require, auto_approve, timeout_s, on_timeout";
const FEED_KEYS: &str = "redact, capacity";

/// What a key of these sections accepts, for error messages.
pub fn allowed_for(key: &str) -> Option<String> {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let section = key.split(['.', '[']).next().unwrap_or(key);
    Some(match (section, leaf) {
        ("guardrails", "guardrails") => format!("a map with keys {GUARDRAILS_KEYS}"),
        ("guardrails", "default") | ("guardrails", "action") => "allow, deny".into(),
        ("guardrails", "max_result_chars") => "an integer from 1000 to 10000000".into(),
        ("guardrails", "call_timeout_ms") => "an integer from 1 to 3600000".into(),
        ("guardrails", "coerce_arguments") => "true, false".into(),
        ("guardrails", "tool") => "a tool-name glob, e.g. \"mcp_github_*\"".into(),
        ("guardrails", "reason") => "a string".into(),
        ("guardrails", "pointer") => "a JSON pointer: \"\" or a path such as /repo".into(),
        ("guardrails", "regex") => "a regular expression (Rust regex syntax)".into(),
        ("guardrails", "arguments") => "a list of {pointer, regex} maps".into(),
        ("guardrails", "rules") if key.ends_with(']') || !key.ends_with("rules") => {
            format!("a map with keys {RULE_KEYS}")
        }
        ("guardrails", "rules") => format!("a list of maps with keys {RULE_KEYS}"),
        ("guardrails", _) => format!("keys {GUARDRAILS_KEYS}"),
        ("approval", "approval") => format!("a map with keys {APPROVAL_KEYS}"),
        ("approval", "require") | ("approval", "auto_approve") => {
            "a list of tool-name globs, e.g. [\"mcp_github_create_*\"]".into()
        }
        ("approval", "timeout_s") => "an integer from 1 to 86400".into(),
        ("approval", "on_timeout") => "deny".into(),
        ("approval", _) => format!("keys {APPROVAL_KEYS}"),
        ("feed", "feed") => format!("a map with keys {FEED_KEYS}"),
        ("feed", "redact") => "a list of argument keys, e.g. [token, password]".into(),
        ("feed", "capacity") => "an integer from 16 to 1000000".into(),
        ("feed", _) => format!("keys {FEED_KEYS}"),
        _ => return None,
    })
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
    let max_result_chars = clamp(
        &raw.max_result_chars,
        "guardrails.max_result_chars",
        (1000, 10_000_000),
        defaults.max_result_chars as i64,
        file,
        warnings,
    );
    let call_timeout_ms = clamp(
        &raw.call_timeout_ms,
        "guardrails.call_timeout_ms",
        (1, 3_600_000),
        defaults.call_timeout_ms as i64,
        file,
        warnings,
    );
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
        timeout_s: clamp(
            &raw.timeout_s,
            "approval.timeout_s",
            (1, 86_400),
            defaults.timeout_s as i64,
            file,
            warnings,
        ) as u64,
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
        capacity: clamp(
            &raw.capacity,
            "feed.capacity",
            (16, 1_000_000),
            defaults.capacity as i64,
            file,
            warnings,
        ) as usize,
    })
}
