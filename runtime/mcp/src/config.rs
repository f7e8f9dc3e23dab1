//! The `mcp_servers:` section of `quiver.yaml`: the raw shape serde reads,
//! its validation, and the validated [`McpServerConfig`] of each server.
//!
//! ```yaml
//! mcp_servers:
//!   github:
//!     url: https://example.invalid/mcp
//!     headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}
//!   time:
//!     command: uvx
//!     args: [mcp-server-time]
//!     env: {TZ: UTC}
//!     call_timeout_s: 10
//!     tools: {include: ["get_*"], exclude: ["get_secret"]}
//!     trust: pinned
//!     tools:
//!       overrides:
//!         get_time: {description: "Current time in a time zone."}
//! ```
//!
//! `trust` says which tool definitions are served without an operator
//! accepting them (see `quiver_tool::integrity` and docs/TOOL_INTEGRITY.md).
//!
//! `${VAR}` in `headers` and `env` values is replaced by the variable's
//! value when the file is loaded; an unset variable is a config error that
//! names the server and the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use quiver_config::Spanned;
use serde::Deserialize;

use quiver_config::expand_vars;
use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, invalid_at};
use quiver_process::environment::{DEFAULT_ENV_INHERIT, inherit_pattern_problem, variable_problem};
use quiver_tool::integrity::{ToolOverride, Trust};

/// Default `connect_timeout_s`.
pub const DEFAULT_CONNECT_TIMEOUT_S: u64 = CONNECT_TIMEOUT_S.default_int() as u64;
/// Default `call_timeout_s`.
pub const DEFAULT_CALL_TIMEOUT_S: u64 = CALL_TIMEOUT_S.default_int() as u64;
/// Largest `connect_timeout_s` and `call_timeout_s`.
pub const MAX_TIMEOUT_S: u64 = CALL_TIMEOUT_S.range().1 as u64;

/// The keys of `mcp_servers`, described once (see `quiver_config::setting`).
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "mcp_servers.NAME",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "an MCP server; `NAME` (1 to 64 of `[A-Za-z0-9_-]`) names its tools `mcp_NAME_<tool>` and its toolset `mcp-NAME`",
    },
    Setting {
        key: "mcp_servers.NAME.command",
        kind: Kind::Text("a program name or path"),
        default: DefaultValue::None,
        doc: "started in its own process group; the whole group is ended on shutdown, reconnect and crash",
    },
    Setting {
        key: "mcp_servers.NAME.args",
        kind: Kind::List("a list of strings"),
        default: DefaultValue::List(&[]),
        doc: "its arguments",
    },
    Setting {
        key: "mcp_servers.NAME.env",
        kind: Kind::Map("a map of variable name to value (${VAR} is expanded)"),
        default: DefaultValue::EmptyMap,
        doc: "variables set for the server (they win over inherited ones); `${VAR}` is expanded at load time (unset: config error naming server and key)",
    },
    Setting {
        key: "mcp_servers.NAME.env_inherit",
        kind: Kind::List(
            "a list of variable-name globs, e.g. [PATH, HOME, \"LC_*\"] ([\"*\"]: all)",
        ),
        default: DefaultValue::List(DEFAULT_ENV_INHERIT),
        doc: "the daemon's environment variables a stdio server gets; nothing else is passed on, so model API keys stay out of servers unless listed",
    },
    Setting {
        key: "mcp_servers.NAME.cwd",
        kind: Kind::Text("a directory path"),
        default: DefaultValue::Described("the current directory"),
        doc: "working directory (relative paths are relative to the config file)",
    },
    Setting {
        key: "mcp_servers.NAME.url",
        kind: Kind::Text("an http:// or https:// URL"),
        default: DefaultValue::None,
        doc: "a Streamable HTTP endpoint (`https` needs the `mcp-https` cargo feature)",
    },
    Setting {
        key: "mcp_servers.NAME.headers",
        kind: Kind::Map("a map of header name to value (${VAR} is expanded)"),
        default: DefaultValue::EmptyMap,
        doc: "sent with every request, e.g. `Authorization: \"Bearer ${TOKEN}\"`; `${VAR}` is expanded as in `env`",
    },
    Setting {
        key: "mcp_servers.NAME.oauth",
        kind: Kind::Table { or_bool: true },
        default: DefaultValue::Bool(false),
        doc: "a `url` server that signs in with OAuth 2.1 (authorization code with PKCE, as the MCP authorization spec says): `quiver mcp login NAME` logs in once, the tokens are kept by the state store (`oauth/NAME.json` in the state directory, mode 0600; with `store.backend: postgres`, in the shared database, so every instance uses one login) and refreshed before they expire; `true` is `{}` (dynamic client registration, the scopes the server asks for)",
    },
    Setting {
        key: "mcp_servers.NAME.oauth.client_id",
        kind: Kind::Text("a client id registered with the authorization server"),
        default: DefaultValue::Described("registered dynamically at login"),
        doc: "a pre-registered public client (its redirect URI is `http://127.0.0.1/callback` on any port); without it the client registers itself when the authorization server offers registration",
    },
    Setting {
        key: "mcp_servers.NAME.oauth.scopes",
        kind: Kind::List("a list of scope names"),
        default: DefaultValue::Described("the scopes the server's challenge or metadata names"),
        doc: "the scopes asked for at login",
    },
    Setting {
        key: "mcp_servers.NAME.enabled",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        doc: "`false`: never started, shown as disabled",
    },
    Setting::timeout(
        "mcp_servers.NAME.connect_timeout_s",
        1,
        3600,
        30,
        "longest a connection attempt (start, handshake, first tool listing) may take",
    ),
    Setting::timeout(
        "mcp_servers.NAME.call_timeout_s",
        1,
        3600,
        60,
        "longest a tool call may take; the call is then cancelled on the server",
    ),
    Setting {
        key: "mcp_servers.NAME.trust",
        kind: Kind::Enum(&["pinned", "accept_new", "all"]),
        default: DefaultValue::Str("accept_new"),
        doc: "which tool definitions are served without an operator accepting them (`quiver tools accept`): `pinned`: only accepted ones; `accept_new`: a tool seen for the first time is accepted and pinned unless screening flags it, a pinned tool whose definition (name, description, schema, title, hints) changes is quarantined; `all`: everything, pinned as it comes, changes still reported. See docs/TOOL_INTEGRITY.md",
    },
    Setting {
        key: "mcp_servers.NAME.tools",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "which of the server's tools join the catalog",
    },
    Setting {
        key: "mcp_servers.NAME.tools.include",
        kind: Kind::List("a list of tool-name globs"),
        default: DefaultValue::Described("`[]` (all)"),
        doc: "the server's own tool names that join the catalog",
    },
    Setting {
        key: "mcp_servers.NAME.tools.exclude",
        kind: Kind::List("a list of tool-name globs"),
        default: DefaultValue::List(&[]),
        doc: "tool names left out (applied after `include`)",
    },
    Setting {
        key: "mcp_servers.NAME.tools.overrides",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::EmptyMap,
        doc: "the operator's text for tools (by the server's own name) in place of the server's; the override is what is indexed, listed and described, while the server's own definition is what is pinned",
    },
    Setting {
        key: "mcp_servers.NAME.tools.overrides.NAME",
        kind: Kind::Table { or_bool: false },
        default: DefaultValue::None,
        doc: "one tool's replacements",
    },
    Setting {
        key: "mcp_servers.NAME.tools.overrides.NAME.description",
        kind: Kind::Text("a string"),
        default: DefaultValue::None,
        doc: "replaces the tool's description",
    },
    Setting {
        key: "mcp_servers.NAME.tools.overrides.NAME.title",
        kind: Kind::Text("a string"),
        default: DefaultValue::None,
        doc: "replaces the tool's title",
    },
];

const CONNECT_TIMEOUT_S: &Setting = by_key(SETTINGS, "mcp_servers.NAME.connect_timeout_s");
const CALL_TIMEOUT_S: &Setting = by_key(SETTINGS, "mcp_servers.NAME.call_timeout_s");

/// How to reach a server.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransportConfig {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for the server (already expanded); they win over
        /// inherited ones.
        env: BTreeMap<String, String>,
        /// Globs of the daemon's variables the server inherits (nothing
        /// else is passed on).
        env_inherit: Vec<String>,
        /// Working directory (relative paths follow the config file).
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint URL.
        url: String,
        /// Headers sent with every request (already expanded).
        headers: BTreeMap<String, String>,
    },
}

/// `mcp_servers.NAME.oauth`: the server signs in with OAuth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthConfig {
    /// A pre-registered client id (`None`: dynamic registration).
    pub client_id: Option<String>,
    /// Scopes asked for at login (empty: what the server names).
    pub scopes: Vec<String>,
    /// Where the server's credentials are kept; given by the daemon from
    /// its state store ([`McpServerConfig::with_tokens`]), `None` until
    /// then.
    pub tokens: Option<crate::tokens::Tokens>,
}

impl fmt::Debug for McpTransportConfig {
    /// Values of `env` and `headers` may be secrets: only their names are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpTransportConfig::Stdio {
                command,
                args,
                env,
                env_inherit,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("env_inherit", env_inherit)
                .field("cwd", cwd)
                .finish(),
            McpTransportConfig::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl McpTransportConfig {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            McpTransportConfig::Stdio { .. } => "stdio",
            McpTransportConfig::Http { .. } => "http",
        }
    }
}

/// Which of a server's tools join the catalog: those matching an `include`
/// glob (every tool when `include` is empty) and no `exclude` glob. Globs
/// match the server's own tool names.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    /// Globs of tool names to keep (empty: all).
    pub include: Vec<String>,
    /// Globs of tool names to drop.
    pub exclude: Vec<String>,
    include_set: GlobSet,
    exclude_set: GlobSet,
}

impl PartialEq for ToolFilter {
    fn eq(&self, other: &Self) -> bool {
        self.include == other.include && self.exclude == other.exclude
    }
}

impl ToolFilter {
    /// A filter from glob patterns.
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Result<ToolFilter, globset::Error> {
        let build = |patterns: &[String]| -> Result<GlobSet, globset::Error> {
            let mut builder = GlobSetBuilder::new();
            for pattern in patterns {
                builder.add(Glob::new(pattern)?);
            }
            builder.build()
        };
        Ok(ToolFilter {
            include_set: build(&include)?,
            exclude_set: build(&exclude)?,
            include,
            exclude,
        })
    }

    /// Whether the tool called `name` on the server joins the catalog.
    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include_set.is_match(name))
            && (self.exclude.is_empty() || !self.exclude_set.is_match(name))
    }
}

/// One validated `mcp_servers` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The configured name (`[A-Za-z0-9_-]`, 1 to 64 characters).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransportConfig,
    /// `false`: never started; shown as disabled.
    pub enabled: bool,
    /// Longest a connection attempt (spawn or connect, then initialize and
    /// the first tool listing) may take.
    pub connect_timeout: Duration,
    /// Longest a tool call may take.
    pub call_timeout: Duration,
    /// Which tools join the catalog.
    pub tools: ToolFilter,
    /// Which definitions are served without an operator accepting them.
    pub trust: Trust,
    /// The operator's text in place of the server's, by tool name.
    pub overrides: BTreeMap<String, ToolOverride>,
    /// `Some`: a `url` server that signs in with OAuth.
    pub oauth: Option<OAuthConfig>,
}

impl McpServerConfig {
    /// A stdio server with default settings.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        McpServerConfig::with_transport(
            name,
            McpTransportConfig::Stdio {
                command: command.into(),
                args,
                env: BTreeMap::new(),
                env_inherit: default_env_inherit(),
                cwd: None,
            },
        )
    }

    /// A Streamable HTTP server with default settings.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig::with_transport(
            name,
            McpTransportConfig::Http {
                url: url.into(),
                headers: BTreeMap::new(),
            },
        )
    }

    fn with_transport(name: impl Into<String>, transport: McpTransportConfig) -> Self {
        McpServerConfig {
            name: name.into(),
            transport,
            enabled: true,
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_S),
            call_timeout: Duration::from_secs(DEFAULT_CALL_TIMEOUT_S),
            tools: ToolFilter::default(),
            trust: Trust::default(),
            overrides: BTreeMap::new(),
            oauth: None,
        }
    }

    /// Keeps an OAuth server's credentials in `tokens`.
    pub fn with_tokens(mut self, tokens: &crate::tokens::Tokens) -> Self {
        if let Some(oauth) = &mut self.oauth {
            oauth.tokens = Some(tokens.clone());
        }
        self
    }

    /// A stdio command written as a relative path (`./NAME`, `bin/NAME`:
    /// with a `/`, not a bare name looked up on `PATH`) becomes absolute
    /// against `base`.
    pub fn resolve_command(&mut self, base: &std::path::Path) {
        if let McpTransportConfig::Stdio { command, .. } = &mut self.transport
            && command.contains('/')
            && !command.starts_with('/')
        {
            *command = quiver_config::paths::absolute(base, std::path::Path::new(command))
                .to_string_lossy()
                .into_owned();
        }
    }

    /// Makes a stdio server's command path and `cwd` absolute against
    /// `base` (the config file's directory).
    pub fn resolve_relative_to(&mut self, base: &std::path::Path) {
        self.resolve_command(base);
        if let McpTransportConfig::Stdio { cwd: Some(cwd), .. } = &mut self.transport {
            *cwd = quiver_config::paths::absolute(base, cwd);
        }
    }
}

// ---- raw shape -----------------------------------------------------------

/// McpServer as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpServer {
    command: Option<Spanned<String>>,
    args: Option<Vec<Spanned<String>>>,
    env: Option<BTreeMap<String, Spanned<String>>>,
    env_inherit: Option<Vec<Spanned<String>>>,
    cwd: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
    headers: Option<BTreeMap<String, Spanned<String>>>,
    enabled: Option<bool>,
    connect_timeout_s: Option<Spanned<i64>>,
    call_timeout_s: Option<Spanned<i64>>,
    tools: Option<RawToolFilter>,
    trust: Option<Spanned<String>>,
    oauth: Option<Spanned<RawOAuthSetting>>,
}

/// `oauth` as written: `true`, `false` or a map.
#[derive(Debug)]
pub enum RawOAuthSetting {
    /// `true` or `false`.
    Bool(bool),
    /// The map.
    Map(RawOAuth),
}

/// The `oauth` map as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOAuth {
    client_id: Option<Spanned<String>>,
    scopes: Option<Vec<Spanned<String>>>,
}

impl<'de> Deserialize<'de> for RawOAuthSetting {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawOAuthSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false or a map with keys client_id, scopes")
            }
            fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
                Ok(RawOAuthSetting::Bool(value))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RawOAuth::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawOAuthSetting::Map)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolFilter {
    include: Option<Vec<Spanned<String>>>,
    exclude: Option<Vec<Spanned<String>>>,
    overrides: Option<BTreeMap<String, Spanned<RawOverride>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    description: Option<Spanned<String>>,
    title: Option<Spanned<String>>,
}

/// The raw section: server name to entry, with the entry's position.
pub type RawMcpServers = BTreeMap<String, Spanned<RawMcpServer>>;

/// What a `mcp_servers` key accepts, for error messages.
pub fn allowed_for(key: &str) -> String {
    if key == "mcp_servers" {
        return "a map of server name to {command, args, env, cwd} or {url, headers}".into();
    }
    quiver_config::setting::allowed_in(SETTINGS, key).unwrap_or_default()
}

// ---- validation ------------------------------------------------------------

struct Ctx<'a> {
    file: &'a str,
    server: &'a str,
}

impl Ctx<'_> {
    fn error<T>(&self, at: &Spanned<T>, key: &str, message: String) -> ConfigError {
        let key = if key.is_empty() {
            format!("mcp_servers.{}", self.server)
        } else {
            format!("mcp_servers.{}.{key}", self.server)
        };
        let allowed = allowed_for(&key);
        invalid_at(self.file, at, key, message, allowed)
    }
}

/// Whether `name` is a valid server name.
pub fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn timeout(
    ctx: &Ctx<'_>,
    raw: &Option<Spanned<i64>>,
    setting: &Setting,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Duration, ConfigError> {
    let leaf = setting.key.rsplit('.').next().unwrap_or_default();
    let key = format!("mcp_servers.{}.{leaf}", ctx.server);
    let used = quiver_config::int_setting(raw, setting, &key, ctx.file, warnings)?;
    Ok(Duration::from_secs(used as u64))
}

fn expanded_map(
    ctx: &Ctx<'_>,
    raw: Option<BTreeMap<String, Spanned<String>>>,
    key: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, value) in raw.unwrap_or_default() {
        let expanded = expand_vars(&value.value, env_lookup)
            .map_err(|message| ctx.error(&value, &format!("{key}.{name}"), message))?;
        if key == "env"
            && let Some(message) = variable_problem(&name, &expanded)
        {
            return Err(ctx.error(&value, &format!("{key}.{name}"), message));
        }
        out.insert(name, expanded);
    }
    Ok(out)
}

/// The default allow-list: the same safe list `run_command` inherits.
fn default_env_inherit() -> Vec<String> {
    DEFAULT_ENV_INHERIT.iter().map(|&g| g.to_owned()).collect()
}

/// `env_inherit` checked: each item a non-empty, valid glob.
fn env_inherit(
    ctx: &Ctx<'_>,
    raw: Option<Vec<Spanned<String>>>,
) -> Result<Vec<String>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(default_env_inherit());
    };
    let mut out = Vec::new();
    for (index, pattern) in raw.into_iter().enumerate() {
        if let Some(message) = inherit_pattern_problem(&pattern.value) {
            return Err(ctx.error(&pattern, &format!("env_inherit[{index}]"), message));
        }
        out.push(pattern.value);
    }
    Ok(out)
}

fn globs(
    ctx: &Ctx<'_>,
    raw: Option<Vec<Spanned<String>>>,
    key: &str,
) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    for (index, pattern) in raw.unwrap_or_default().into_iter().enumerate() {
        if let Err(error) = Glob::new(&pattern.value) {
            return Err(ctx.error(
                &pattern,
                &format!("tools.{key}[{index}]"),
                format!("`{}` is not a valid glob: {}", pattern.value, error.kind()),
            ));
        }
        out.push(pattern.value);
    }
    Ok(out)
}

/// `tools.overrides` checked: each replacement a non-blank text.
fn overrides(
    ctx: &Ctx<'_>,
    raw: Option<BTreeMap<String, Spanned<RawOverride>>>,
) -> Result<BTreeMap<String, ToolOverride>, ConfigError> {
    let mut out = BTreeMap::new();
    for (tool, entry) in raw.unwrap_or_default() {
        let text = |value: Option<Spanned<String>>, key: &str| match value {
            Some(value) if value.value.trim().is_empty() => Err(ctx.error(
                &value,
                &format!("tools.overrides.{tool}.{key}"),
                "an override must not be blank (leave the key out to keep the server's text)"
                    .into(),
            )),
            Some(value) => Ok(Some(value.value)),
            None => Ok(None),
        };
        let replacement = ToolOverride {
            description: text(entry.value.description, "description")?,
            title: text(entry.value.title, "title")?,
        };
        out.insert(tool, replacement);
    }
    Ok(out)
}

/// `oauth` checked: only on a `url` server, a non-blank client id, scopes
/// without spaces.
fn oauth(
    ctx: &Ctx<'_>,
    server: &RawMcpServer,
    raw: Option<&Spanned<RawOAuthSetting>>,
) -> Result<Option<OAuthConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let map = match &raw.value {
        RawOAuthSetting::Bool(false) => return Ok(None),
        RawOAuthSetting::Bool(true) => None,
        RawOAuthSetting::Map(map) => Some(map),
    };
    if server.url.is_none() {
        return Err(ctx.error(
            raw,
            "oauth",
            "OAuth is for `url` (Streamable HTTP) servers; a `command` server takes `env`".into(),
        ));
    }
    if let Some((header, value)) = server
        .headers
        .iter()
        .flatten()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        return Err(ctx.error(
            value,
            &format!("headers.{header}"),
            "an `oauth` server sends its own Authorization header; leave this one out".into(),
        ));
    }
    let mut config = OAuthConfig::default();
    if let Some(map) = map {
        if let Some(id) = &map.client_id {
            if id.value.trim().is_empty() {
                return Err(ctx.error(
                    id,
                    "oauth.client_id",
                    "the client id must not be blank (leave the key out to register dynamically)"
                        .into(),
                ));
            }
            config.client_id = Some(id.value.clone());
        }
        for (index, scope) in map.scopes.iter().flatten().enumerate() {
            let value = scope.value.as_str();
            if value.is_empty()
                || value
                    .chars()
                    .any(|c| c.is_whitespace() || c == '"' || c == '\\')
            {
                return Err(ctx.error(
                    scope,
                    &format!("oauth.scopes[{index}]"),
                    format!("`{value}` is not a scope name (one word, no spaces or quotes)"),
                ));
            }
            config.scopes.push(value.to_owned());
        }
    }
    Ok(Some(config))
}

/// Validates the raw `mcp_servers` section.
pub fn validate(
    raw: RawMcpServers,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<BTreeMap<String, McpServerConfig>, ConfigError> {
    let mut servers = BTreeMap::new();
    for (name, entry) in raw {
        let ctx = Ctx {
            file,
            server: &name,
        };
        if !is_valid_server_name(&name) {
            return Err(ctx
                .error(&entry, "", format!("`{name}` is not a valid server name"))
                .with_allowed("1 to 64 characters from [A-Za-z0-9_-]"));
        }
        let at = &entry;
        let raw = &entry.value;
        let transport = match (&raw.command, &raw.url) {
            (Some(_), Some(url)) => {
                return Err(ctx.error(
                    url,
                    "url",
                    "a server has either `command` (stdio) or `url` (Streamable HTTP), not both"
                        .into(),
                ));
            }
            (None, None) => {
                return Err(ctx.error(
                    at,
                    "",
                    "the server needs `command` (stdio) or `url` (Streamable HTTP)".into(),
                ));
            }
            (Some(command), None) => {
                if let Some((header, value)) = raw.headers.as_ref().and_then(|h| h.iter().next()) {
                    return Err(ctx.error(
                        value,
                        &format!("headers.{header}"),
                        "`headers` is for `url` servers; a `command` server takes `env`".into(),
                    ));
                }
                if command.value.trim().is_empty() {
                    return Err(ctx.error(command, "command", "empty command".into()));
                }
                McpTransportConfig::Stdio {
                    command: command.value.clone(),
                    args: raw.args.iter().flatten().map(|a| a.value.clone()).collect(),
                    env: BTreeMap::new(),
                    env_inherit: env_inherit(&ctx, raw.env_inherit.clone())?,
                    cwd: raw.cwd.as_ref().map(|c| PathBuf::from(&c.value)),
                }
            }
            (None, Some(url)) => {
                let stdio_only = [
                    ("args", raw.args.as_ref().and_then(|a| a.first())),
                    ("cwd", raw.cwd.as_ref()),
                    ("env", raw.env.as_ref().and_then(|e| e.values().next())),
                    (
                        "env_inherit",
                        raw.env_inherit.as_ref().and_then(|e| e.first()),
                    ),
                ];
                if let Some((key, Some(value))) = stdio_only.iter().find(|(_, v)| v.is_some()) {
                    return Err(ctx.error(
                        *value,
                        key,
                        format!("`{key}` is for `command` servers; a `url` server takes `headers`"),
                    ));
                }
                let lower = url.value.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                    return Err(ctx.error(
                        url,
                        "url",
                        format!("`{}` is not an http:// or https:// URL", url.value),
                    ));
                }
                McpTransportConfig::Http {
                    url: url.value.clone(),
                    headers: BTreeMap::new(),
                }
            }
        };
        let transport = match transport {
            McpTransportConfig::Stdio {
                command,
                args,
                cwd,
                env_inherit,
                ..
            } => McpTransportConfig::Stdio {
                command,
                args,
                cwd,
                env_inherit,
                env: expanded_map(&ctx, entry.value.env.clone(), "env")?,
            },
            McpTransportConfig::Http { url, .. } => {
                let headers = expanded_map(&ctx, entry.value.headers.clone(), "headers")?;
                McpTransportConfig::Http { url, headers }
            }
        };
        let oauth = oauth(&ctx, &entry.value, entry.value.oauth.as_ref())?;
        let raw = entry.value;
        let trust = match &raw.trust {
            None => Trust::default(),
            Some(value) => match value.value.as_str() {
                "pinned" => Trust::Pinned,
                "accept_new" => Trust::AcceptNew,
                "all" => Trust::All,
                other => {
                    return Err(ctx.error(
                        value,
                        "trust",
                        format!("`{other}` is not a trust mode"),
                    ));
                }
            },
        };
        let (include, exclude, overrides) = match raw.tools {
            Some(filter) => (
                globs(&ctx, filter.include, "include")?,
                globs(&ctx, filter.exclude, "exclude")?,
                overrides(&ctx, filter.overrides)?,
            ),
            None => (Vec::new(), Vec::new(), BTreeMap::new()),
        };
        let tools = ToolFilter::new(include, exclude).map_err(|error| ConfigError::Invalid {
            file: file.to_owned(),
            line: 0,
            column: 0,
            key: format!("mcp_servers.{name}.tools"),
            message: error.to_string(),
            allowed: allowed_for("mcp_servers.x.tools"),
        })?;
        let server = McpServerConfig {
            transport,
            enabled: raw.enabled.unwrap_or(true),
            connect_timeout: timeout(&ctx, &raw.connect_timeout_s, CONNECT_TIMEOUT_S, warnings)?,
            call_timeout: timeout(&ctx, &raw.call_timeout_s, CALL_TIMEOUT_S, warnings)?,
            tools,
            trust,
            overrides,
            oauth,
            name: name.clone(),
        };
        servers.insert(name, server);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_variables() {
        let lookup = |name: &str| (name == "TOKEN").then(|| "s3cret".to_owned());
        assert_eq!(
            expand_vars("Bearer ${TOKEN}", lookup).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_vars("a $b ${TOKEN}$", lookup).unwrap(),
            "a $b s3cret$"
        );
        assert!(
            expand_vars("${MISSING}", lookup)
                .unwrap_err()
                .contains("`MISSING` is not set")
        );
        assert!(
            expand_vars("${TOKEN", lookup)
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(expand_vars("${}", lookup).is_err());
        assert!(expand_vars("${1X}", lookup).is_err());
    }

    #[test]
    fn tool_filter_includes_then_excludes() {
        let all = ToolFilter::default();
        assert!(all.allows("anything"));
        let filter = ToolFilter::new(vec!["get_*".into()], vec!["get_secret".into()]).unwrap();
        assert!(filter.allows("get_time"));
        assert!(!filter.allows("get_secret"));
        assert!(!filter.allows("set_time"));
        let exclude_only = ToolFilter::new(vec![], vec!["crash".into()]).unwrap();
        assert!(exclude_only.allows("echo"));
        assert!(!exclude_only.allows("crash"));
    }

    #[test]
    fn debug_hides_secret_values() {
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_owned(), "Bearer s3cret".to_owned());
        let transport = McpTransportConfig::Http {
            url: "http://127.0.0.1/mcp".into(),
            headers,
        };
        let text = format!("{transport:?}");
        assert!(
            text.contains("Authorization") && !text.contains("s3cret"),
            "{text}"
        );
    }

    #[test]
    fn server_names_are_checked() {
        assert!(is_valid_server_name("github-2_x"));
        assert!(!is_valid_server_name("my server"));
        assert!(!is_valid_server_name(""));
    }
}
