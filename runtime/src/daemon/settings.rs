//! The `serve:`, `agent:` and `gateway:` sections of `quiver.yaml`: raw
//! shapes (read by [`crate::config`], keeping line and column) and their
//! validated forms.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::config::{ConfigError, ConfigWarning, clamp, invalid_at};

/// Where `quiver serve` listens when `serve.listen` is not given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

/// The system prompt used when `agent.system_prompt` is not given.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Quiver, an agent that completes tasks with tools. \
Tools that are not in your tools list can be found with tool_search, read with tool_describe \
and run with tool_call. Search with a few keywords, call the tool you found, and answer \
from its result. Say so plainly when no tool can do what was asked.";

/// The validated `serve` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// The HTTP address (API and MCP gateway).
    pub listen: SocketAddr,
    /// Sessions, the token, the database and plugin copies live here.
    /// `None`: `$XDG_STATE_HOME/quiver`, else `~/.local/state/quiver`,
    /// else `quiver-UID` in the temp dir.
    pub state_dir: Option<PathBuf>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8765)),
            state_dir: None,
        }
    }
}

impl ServeConfig {
    pub(crate) fn resolve_relative_to(&mut self, base: &Path) {
        if let Some(dir) = self.state_dir.as_mut().filter(|d| d.is_relative()) {
            *dir = base.join(&*dir);
        }
    }

    /// The state directory: as configured, else the default.
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(default_state_dir)
    }
}

/// `$XDG_STATE_HOME/quiver`, else `$HOME/.local/state/quiver`, else
/// `quiver-UID` under the system temp dir (see [`state_dir_from`]).
pub fn default_state_dir() -> PathBuf {
    state_dir_from(
        std::env::var_os("XDG_STATE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        &std::env::temp_dir(),
        crate::plugins::files::current_uid().unwrap_or(0),
    )
}

/// The default state directory for these environment values:
/// `XDG_STATE_HOME/quiver` when it is an absolute path (the XDG spec says
/// to ignore relative ones), else `HOME/.local/state/quiver` when `HOME`
/// is set, else `temp/quiver-UID` (a directory of this user's own, never
/// the shared temp dir itself).
pub fn state_dir_from(
    xdg_state_home: Option<&OsStr>,
    home: Option<&OsStr>,
    temp: &Path,
    uid: u32,
) -> PathBuf {
    if let Some(state) = xdg_state_home.map(Path::new).filter(|p| p.is_absolute()) {
        return state.join("quiver");
    }
    if let Some(home) = home.filter(|h| !h.is_empty()) {
        return Path::new(home).join(".local/state/quiver");
    }
    temp.join(format!("quiver-{uid}"))
}

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

/// The validated `gateway` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// What the stdio gateway and the daemon's own token on `/mcp` are
    /// granted (clients with their own token get their own grant).
    pub grants: Vec<String>,
    /// The context size the gateway assembles for, in tokens.
    pub context_tokens: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            grants: vec!["*".to_owned()],
            context_tokens: 200_000,
        }
    }
}

// ---- raw shapes ------------------------------------------------------------

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServe {
    listen: Option<Spanned<String>>,
    state_dir: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    max_steps: Option<Spanned<i64>>,
    max_consecutive_searches: Option<Spanned<i64>>,
    system_prompt: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGateway {
    grants: Option<Vec<Spanned<String>>>,
    context_tokens: Option<Spanned<i64>>,
}

/// What a key of these sections accepts, for error messages; `None` for
/// keys of other sections.
pub(crate) fn allowed_for(key: &str) -> Option<String> {
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let section = key.split(['.', '[']).next().unwrap_or(key);
    let text = match (section, leaf) {
        ("serve", "serve") => "a map with keys listen, state_dir",
        ("serve", "listen") => "an address and port, e.g. 127.0.0.1:8765",
        ("serve", "state_dir") => "a directory path",
        ("serve", _) => "keys listen, state_dir",
        ("agent", "agent") => "a map with keys max_steps, max_consecutive_searches, system_prompt",
        ("agent", "max_steps") => "an integer from 1 to 1000",
        ("agent", "max_consecutive_searches") => "an integer from 1 to 100",
        ("agent", "system_prompt") => "a string",
        ("agent", _) => "keys max_steps, max_consecutive_searches, system_prompt",
        ("gateway", "gateway") => "a map with keys grants, context_tokens",
        ("gateway", "grants") => "a list of toolset or tool-name globs, e.g. [core, \"mcp-*\"]",
        ("gateway", "context_tokens") => "an integer from 1000 to 10000000",
        ("gateway", _) => "keys grants, context_tokens",
        _ => return None,
    };
    Some(text.to_owned())
}

fn invalid<T>(file: &str, at: &Spanned<T>, key: String, message: String) -> ConfigError {
    let allowed = allowed_for(&key).unwrap_or_default();
    invalid_at(file, at, key, message, allowed)
}

pub(crate) fn validate_serve(raw: RawServe, file: &str) -> Result<ServeConfig, ConfigError> {
    let defaults = ServeConfig::default();
    let listen = match raw.listen {
        None => defaults.listen,
        Some(listen) => listen.value.parse().map_err(|_| {
            invalid(
                file,
                &listen,
                "serve.listen".into(),
                format!("`{}` is not an address and port", listen.value),
            )
        })?,
    };
    let state_dir = match raw.state_dir {
        Some(dir) if dir.value.trim().is_empty() => {
            return Err(invalid(
                file,
                &dir,
                "serve.state_dir".into(),
                "empty directory path".into(),
            ));
        }
        other => other.map(|d| PathBuf::from(d.value)),
    };
    Ok(ServeConfig { listen, state_dir })
}

pub(crate) fn validate_agent(
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

pub(crate) fn validate_gateway(
    raw: RawGateway,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<GatewayConfig, ConfigError> {
    let defaults = GatewayConfig::default();
    let grants = match raw.grants {
        None => defaults.grants,
        Some(grants) => {
            let mut out = Vec::new();
            for (index, grant) in grants.into_iter().enumerate() {
                if let Err(e) = globset::Glob::new(&grant.value) {
                    return Err(invalid(
                        file,
                        &grant,
                        format!("gateway.grants[{index}]"),
                        format!("`{}` is not a valid glob: {}", grant.value, e.kind()),
                    ));
                }
                out.push(grant.value);
            }
            out
        }
    };
    Ok(GatewayConfig {
        grants,
        context_tokens: clamp(
            &raw.context_tokens,
            "gateway.context_tokens",
            (1000, 10_000_000),
            defaults.context_tokens as i64,
            file,
            warnings,
        ) as u64,
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::path::Path;

    use super::state_dir_from;
    use crate::config::{ConfigError, parse};

    #[test]
    fn default_state_dir_follows_xdg_then_home_then_a_per_user_temp_dir() {
        let temp = Path::new("/tmp");
        let resolve = |xdg: Option<&str>, home: Option<&str>| {
            state_dir_from(xdg.map(OsStr::new), home.map(OsStr::new), temp, 1000)
        };
        assert_eq!(
            resolve(Some("/x/state"), Some("/home/u")),
            Path::new("/x/state/quiver")
        );
        assert_eq!(
            resolve(None, Some("/home/u")),
            Path::new("/home/u/.local/state/quiver")
        );
        // Empty or relative XDG_STATE_HOME is ignored, as the XDG spec says.
        assert_eq!(
            resolve(Some(""), Some("/home/u")),
            Path::new("/home/u/.local/state/quiver")
        );
        assert_eq!(
            resolve(Some("state"), Some("/home/u")),
            Path::new("/home/u/.local/state/quiver")
        );
        // Neither: a directory of this user's own, not the temp dir itself.
        assert_eq!(resolve(None, None), Path::new("/tmp/quiver-1000"));
        assert_eq!(resolve(Some(""), Some("")), Path::new("/tmp/quiver-1000"));
    }

    #[test]
    fn sections_are_read() {
        let text = "serve:\n  listen: 127.0.0.1:0\n  state_dir: state\nagent:\n  max_steps: 3\n  max_consecutive_searches: 2\n  system_prompt: be brief\ngateway:\n  grants: [core, \"plugin-*\"]\n  context_tokens: 8000\n";
        let loaded = parse(text, "q.yaml").unwrap();
        assert!(loaded.warnings.is_empty());
        let c = loaded.config;
        assert_eq!(c.serve.listen.to_string(), "127.0.0.1:0");
        assert_eq!(c.serve.state_dir.as_deref(), Some("state".as_ref()));
        assert_eq!(
            (c.agent.max_steps, c.agent.max_consecutive_searches),
            (3, 2)
        );
        assert_eq!(c.agent.system_prompt, "be brief");
        assert_eq!(c.gateway.grants, ["core", "plugin-*"]);
        assert_eq!(c.gateway.context_tokens, 8000);
    }

    #[test]
    fn errors_name_key_and_allowed_values() {
        match parse("serve:\n  listen: localhost\n", "q.yaml") {
            Err(ConfigError::Invalid {
                key, line, allowed, ..
            }) => {
                assert_eq!((key.as_str(), line), ("serve.listen", 2));
                assert!(allowed.contains("127.0.0.1:8765"), "{allowed}");
            }
            other => panic!("{other:?}"),
        }
        match parse("agent:\n  max_step: 3\n", "q.yaml") {
            Err(ConfigError::Invalid {
                message, allowed, ..
            }) => {
                assert!(message.contains("max_step"), "{message}");
                assert!(allowed.contains("max_consecutive_searches"), "{allowed}");
            }
            other => panic!("{other:?}"),
        }
        let loaded = parse("agent:\n  max_steps: 0\n", "q.yaml").unwrap();
        assert_eq!(loaded.config.agent.max_steps, 1);
        assert_eq!(loaded.warnings[0].key, "agent.max_steps");
    }
}
