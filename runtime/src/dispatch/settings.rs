//! The `guardrails:`, `approval:` and `feed:` sections of `quiver.yaml`:
//! raw shapes (read by [`crate::config`], keeping line and column) and
//! their validated forms.

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::approval::{ApprovalPolicy, OnTimeout};
use super::guardrail::{ArgumentPattern, GuardrailRule, Guardrails, RuleAction};
use crate::config::{ConfigError, ConfigWarning, clamp, invalid_at};

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
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        GuardrailsConfig {
            default: RuleAction::Allow,
            rules: Vec::new(),
            max_result_chars: 100_000,
            call_timeout_ms: 120_000,
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

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGuardrails {
    default: Option<RuleAction>,
    rules: Option<Vec<RawRule>>,
    max_result_chars: Option<Spanned<i64>>,
    call_timeout_ms: Option<Spanned<i64>>,
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

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawApproval {
    require: Option<Vec<Spanned<String>>>,
    auto_approve: Option<Vec<Spanned<String>>>,
    timeout_s: Option<Spanned<i64>>,
    on_timeout: Option<OnTimeout>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFeed {
    redact: Option<Vec<String>>,
    capacity: Option<Spanned<i64>>,
}

const GUARDRAILS_KEYS: &str = "default, rules, max_result_chars, call_timeout_ms";
const RULE_KEYS: &str = "tool, action, reason, arguments";
const APPROVAL_KEYS: &str = "require, auto_approve, timeout_s, on_timeout";
const FEED_KEYS: &str = "redact, capacity";

/// What a key of these sections accepts, for error messages.
pub(crate) fn allowed_for(key: &str) -> Option<String> {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let section = key.split(['.', '[']).next().unwrap_or(key);
    Some(match (section, leaf) {
        ("guardrails", "guardrails") => format!("a map with keys {GUARDRAILS_KEYS}"),
        ("guardrails", "default") | ("guardrails", "action") => "allow, deny".into(),
        ("guardrails", "max_result_chars") => "an integer from 1000 to 10000000".into(),
        ("guardrails", "call_timeout_ms") => "an integer from 1 to 3600000".into(),
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

pub(crate) fn validate_guardrails(
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
    })
}

pub(crate) fn validate_approval(
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

pub(crate) fn validate_feed(
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

#[cfg(test)]
mod tests {
    use crate::config::{invalid_parts as invalid, parse};
    use serde_json::json;

    #[test]
    fn sections_are_read() {
        let text = "guardrails:\n  default: deny\n  max_result_chars: 5000\n  call_timeout_ms: 900\n  rules:\n    - tool: \"mcp_github_*\"\n      action: allow\n    - tool: mcp_github_delete_repo\n      action: deny\n      reason: never\n      arguments:\n        - pointer: /repo\n          regex: \"^prod\"\napproval:\n  require: [\"mcp_github_create_*\"]\n  auto_approve: [mcp_github_create_draft]\n  timeout_s: 30\n  on_timeout: deny\nfeed:\n  redact: [token]\n  capacity: 64\n";
        let loaded = parse(text, "q.yaml").unwrap();
        assert!(loaded.warnings.is_empty());
        let c = loaded.config;
        assert_eq!(c.guardrails.rules.len(), 2);
        assert_eq!(
            (c.guardrails.max_result_chars, c.guardrails.call_timeout_ms),
            (5000, 900)
        );
        let g = c.guardrails.guardrails();
        assert!(g.check("mcp_github_list", &json!({})).is_ok());
        assert!(
            g.check("mcp_github_delete_repo", &json!({"repo": "prod-1"}))
                .is_err()
        );
        assert!(g.check("read_file", &json!({})).is_err());
        assert_eq!(c.approval.timeout_s, 30);
        assert!(
            c.approval
                .policy()
                .unwrap()
                .requires("mcp_github_create_issue")
        );
        assert_eq!(c.feed.redact, ["token"]);
        assert_eq!(c.feed.capacity, 64);
    }

    #[test]
    fn defaults_and_clamps() {
        let c = parse("", "q.yaml").unwrap().config;
        assert!(c.guardrails.rules.is_empty());
        assert!(c.approval.require.is_empty());
        assert!(c.feed.redact.iter().any(|k| k == "password"));
        let loaded = parse(
            "approval:\n  timeout_s: 0\nfeed:\n  capacity: 1\n",
            "q.yaml",
        )
        .unwrap();
        let keys: Vec<&str> = loaded.warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(keys, ["approval.timeout_s", "feed.capacity"]);
        assert_eq!(
            (loaded.warnings[0].line, loaded.warnings[0].column),
            (2, 14)
        );
    }

    #[test]
    fn errors_name_file_line_key_and_allowed_values() {
        let (key, line, _, message, allowed) =
            invalid("guardrails:\n  rules:\n    - tool: x\n      action: maybe\n");
        assert_eq!(key, "guardrails.rules[0].action");
        assert_eq!(line, 4);
        assert!(message.contains("maybe"), "{message}");
        assert_eq!(allowed, "allow, deny");
        let (key, line, column, _, allowed) = invalid(
            "guardrails:\n  rules:\n    - tool: x\n      action: deny\n      arguments:\n        - pointer: repo\n          regex: x\n",
        );
        assert_eq!(key, "guardrails.rules[0].arguments[0].pointer");
        assert_eq!((line, column), (6, 20));
        assert!(allowed.contains("JSON pointer"), "{allowed}");
        let (key, line, ..) = invalid(
            "guardrails:\n  rules:\n    - tool: x\n      action: deny\n      arguments:\n        - pointer: /repo\n          regex: \"(\"\n",
        );
        assert_eq!(
            (key.as_str(), line),
            ("guardrails.rules[0].arguments[0].regex", 7)
        );
        let (key, line, ..) = invalid("approval:\n  require: [ok, \"a[\"]\n");
        assert_eq!((key.as_str(), line), ("approval.require[1]", 2));
        let (key, _, _, _, allowed) = invalid("approval:\n  on_timeout: approve\n");
        assert_eq!(
            (key.as_str(), allowed.as_str()),
            ("approval.on_timeout", "deny")
        );
        let (key, _, _, message, allowed) = invalid("feed:\n  redacted: [x]\n");
        assert!(key.starts_with("feed"), "{key}");
        assert!(message.contains("redacted"), "{message}");
        assert!(allowed.contains("capacity"), "{allowed}");
        let (_, _, _, _, allowed) = invalid("guardrails:\n  rules:\n    - action: deny\n");
        assert!(allowed.contains("tool"), "{allowed}");
    }
}
