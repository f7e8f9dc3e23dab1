//! The `agent:` section of `quiver.yaml`: its raw shape, what each key
//! allows, and the validated [`AgentConfig`] the agent loop runs with.

use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, Spanned, int_setting};
use serde::Deserialize;

/// The system prompt used when `agent.system_prompt` is not given.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Quiver, an agent that completes tasks with tools. \
Tools that are not in your tools list can be found with tool_search, read with tool_describe \
and run with tool_call. Search with a few keywords, call the tool you found, and answer \
from its result. Say so plainly when no tool can do what was asked.";

/// The validated `agent` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Most model requests in one turn.
    pub max_steps: u32,
    /// Consecutive `tool_search` calls allowed in one turn; past it the
    /// model is told to stop searching and the turn ends.
    pub max_consecutive_searches: u32,
    /// The system prompt.
    pub system_prompt: String,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_steps: MAX_STEPS.default_int() as u32,
            max_consecutive_searches: MAX_CONSECUTIVE_SEARCHES.default_int() as u32,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
        }
    }
}

/// Agent as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawAgent {
    max_steps: Option<Spanned<i64>>,
    max_consecutive_searches: Option<Spanned<i64>>,
    system_prompt: Option<String>,
}

/// The keys of `agent`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting::int(
        "agent.max_steps",
        1,
        1000,
        24,
        "model requests in one turn; then the model is told so and asked once more, without tools, for its answer (`stop: step_limit`)",
    ),
    Setting::int(
        "agent.max_consecutive_searches",
        1,
        100,
        5,
        "`tool_search` calls in a row allowed in one turn; the next one is not run, the model is told to stop searching and asked once more, without tools (`stop: search_limit`)",
    ),
    Setting {
        key: "agent.system_prompt",
        kind: Kind::Text("a string"),
        default: DefaultValue::Described("a short prompt explaining the bridge tools"),
        doc: "the system prompt of every turn",
    },
];

const MAX_STEPS: &Setting = by_key(SETTINGS, "agent.max_steps");
const MAX_CONSECUTIVE_SEARCHES: &Setting = by_key(SETTINGS, "agent.max_consecutive_searches");

/// What an `agent...` key accepts (from [`SETTINGS`]); `None` for keys of
/// other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    if key != "agent" && !key.starts_with("agent.") {
        return None;
    }
    quiver_config::setting::allowed_in(SETTINGS, key)
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_agent(
    raw: RawAgent,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<AgentConfig, ConfigError> {
    let defaults = AgentConfig::default();
    Ok(AgentConfig {
        max_steps: int_setting(&raw.max_steps, MAX_STEPS, MAX_STEPS.key, file, warnings)? as u32,
        max_consecutive_searches: int_setting(
            &raw.max_consecutive_searches,
            MAX_CONSECUTIVE_SEARCHES,
            MAX_CONSECUTIVE_SEARCHES.key,
            file,
            warnings,
        )? as u32,
        system_prompt: raw.system_prompt.unwrap_or(defaults.system_prompt),
    })
}
