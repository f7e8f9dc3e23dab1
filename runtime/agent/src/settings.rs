//! The `agent:` section of `quiver.yaml`: its raw shape, what each key
//! allows, and the validated [`AgentConfig`] the agent loop runs with.

use quiver_config::{ConfigError, ConfigWarning, Spanned, clamp};
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
            max_steps: 24,
            max_consecutive_searches: 5,
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

/// What an `agent...` key accepts; `None` for keys of other sections.
pub fn allowed_for(key: &str) -> Option<String> {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let section = key.split(['.', '[']).next().unwrap_or(key);
    let text = match (section, leaf) {
        ("agent", "agent") => "a map with keys max_steps, max_consecutive_searches, system_prompt",
        ("agent", "max_steps") => "an integer from 1 to 1000",
        ("agent", "max_consecutive_searches") => "an integer from 1 to 100",
        ("agent", "system_prompt") => "a string",
        ("agent", _) => "keys max_steps, max_consecutive_searches, system_prompt",
        _ => return None,
    };
    Some(text.to_owned())
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_agent(
    raw: RawAgent,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<AgentConfig, ConfigError> {
    let defaults = AgentConfig::default();
    Ok(AgentConfig {
        max_steps: clamp(
            &raw.max_steps,
            "agent.max_steps",
            (1, 1000),
            i64::from(defaults.max_steps),
            file,
            warnings,
        ) as u32,
        max_consecutive_searches: clamp(
            &raw.max_consecutive_searches,
            "agent.max_consecutive_searches",
            (1, 100),
            i64::from(defaults.max_consecutive_searches),
            file,
            warnings,
        ) as u32,
        system_prompt: raw.system_prompt.unwrap_or(defaults.system_prompt),
    })
}
