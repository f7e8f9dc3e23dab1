//! The `serve:` and `gateway:` sections of `quiver.yaml`: raw
//! shapes (read by [`crate::config`], keeping line and column) and their
//! validated forms.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use quiver_config::Spanned;
use serde::Deserialize;

use quiver_config::setting::{DefaultValue, Kind, Setting, by_key};
use quiver_config::{ConfigError, ConfigWarning, int_setting, invalid_at};

/// Where `quiver serve` listens when `serve.listen` is not given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8765";

/// The validated `serve` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// The HTTP address (API and MCP gateway).
    pub listen: SocketAddr,
    /// Sessions, the token, the database and plugin copies live here.
    /// `None`: `$XDG_STATE_HOME/quiver`, else `~/.local/state/quiver`,
    /// else `quiver-UID` in the temp dir.
    pub state_dir: Option<PathBuf>,
    /// Most connections served at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Longest a connection may take to send a request's headers, and
    /// longest an idle keep-alive connection is kept.
    pub header_read_timeout: std::time::Duration,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest request target (path and query), in bytes.
    pub max_uri_bytes: usize,
    /// Largest sum of a request's header names and values, in bytes.
    pub max_header_bytes: usize,
    /// `GET /metrics` answers loopback connections without the token.
    pub metrics_without_token: bool,
    /// How long a console sign-in lasts.
    pub console_session: std::time::Duration,
    /// How long the one-time console link printed at start stays usable.
    pub console_link: std::time::Duration,
    /// This instance's name in a shared store, status, metrics and the
    /// feed; `None`: the one kept in the state directory.
    pub instance_id: Option<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8765)),
            state_dir: None,
            max_connections: MAX_CONNECTIONS.default_int() as usize,
            header_read_timeout: std::time::Duration::from_secs(
                HEADER_READ_TIMEOUT_S.default_int() as u64,
            ),
            max_body_bytes: MAX_BODY_BYTES.default_int() as usize,
            max_uri_bytes: MAX_URI_BYTES.default_int() as usize,
            max_header_bytes: MAX_HEADER_BYTES.default_int() as usize,
            metrics_without_token: false,
            console_session: std::time::Duration::from_secs(CONSOLE_SESSION_S.default_int() as u64),
            console_link: std::time::Duration::from_secs(CONSOLE_LINK_S.default_int() as u64),
            instance_id: None,
        }
    }
}

impl ServeConfig {
    /// Makes `state_dir` absolute against `base` (the config file's
    /// directory).
    pub fn resolve_relative_to(&mut self, base: &Path) {
        if let Some(dir) = self.state_dir.as_mut() {
            *dir = quiver_config::paths::absolute(base, dir);
        }
    }

    /// The state directory, absolute: as configured (a `--state-dir` given
    /// on the command line is relative to the current directory), else the
    /// default. Everything written into `daemon.json` derives from it.
    pub fn state_dir(&self) -> PathBuf {
        let dir = self
            .state_dir
            .clone()
            .unwrap_or_else(quiver_config::paths::default_state_dir);
        quiver_config::paths::absolute(Path::new("."), &dir)
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
            context_tokens: CONTEXT_TOKENS.default_int() as u64,
        }
    }
}

// ---- raw shapes ------------------------------------------------------------

/// Serve as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServe {
    listen: Option<Spanned<String>>,
    state_dir: Option<Spanned<String>>,
    max_connections: Option<Spanned<i64>>,
    header_read_timeout_s: Option<Spanned<i64>>,
    max_body_bytes: Option<Spanned<i64>>,
    max_uri_bytes: Option<Spanned<i64>>,
    max_header_bytes: Option<Spanned<i64>>,
    metrics_without_token: Option<bool>,
    console_session_s: Option<Spanned<i64>>,
    console_link_s: Option<Spanned<i64>>,
    instance_id: Option<Spanned<String>>,
}

/// Gateway as written, values with their line and column (see `validate`).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawGateway {
    grants: Option<Vec<Spanned<String>>>,
    context_tokens: Option<Spanned<i64>>,
}

/// The keys of `serve`, described once (see `quiver_config::setting`).
pub const SERVE_SETTINGS: &[Setting] = &[
    Setting {
        key: "serve.listen",
        kind: Kind::Text("an address and port, e.g. 127.0.0.1:8765"),
        default: DefaultValue::Str("127.0.0.1:8765"),
        doc: "where `quiver serve` listens (API and MCP gateway); an address other than loopback is refused unless `--allow-non-loopback` is given",
    },
    Setting {
        key: "serve.state_dir",
        kind: Kind::Text("a directory path"),
        default: DefaultValue::Described(
            "`$XDG_STATE_HOME/quiver` (an absolute path), else `~/.local/state/quiver`, else `quiver-UID` in the temp dir when neither is set",
        ),
        doc: "the database (`quiver.db`: sessions, messages, activity log, gateway clients), the token file, `daemon.json` and plugin copies (`plugins/`, unless `plugins.state_dir` is set); made with mode 0700; refused when group or others may read or write it (fix: `chmod 700`) or another user owns it. `quiver.db` and its `-wal`/`-shm` files are mode 0600",
    },
    Setting::int(
        "serve.max_connections",
        1,
        100000,
        512,
        "most HTTP connections served at once (API, event streams and `/mcp` together); past it a connection is answered `503` with the JSON error shape and closed, so a flood cannot exhaust the open-file limit",
    ),
    Setting::timeout(
        "serve.header_read_timeout_s",
        1,
        3600,
        15,
        "longest a connection may take to send a request's headers; an idle keep-alive connection is closed after it too (a response being streamed, such as the event feed, is not idle)",
    ),
    Setting::int(
        "serve.max_body_bytes",
        1024,
        1073741824,
        4194304,
        "largest request body; a larger one is answered `413`",
    ),
    Setting::int(
        "serve.max_uri_bytes",
        256,
        1048576,
        8192,
        "longest request target (path and query); a longer one is answered `414` with the JSON error shape",
    ),
    Setting::int(
        "serve.max_header_bytes",
        1024,
        1048576,
        32768,
        "largest sum of a request's header names and values; larger headers are answered `431` with the JSON error shape (a request head beyond both limits plus 16 KiB is cut off by the HTTP parser, which answers `431` without a body)",
    ),
    Setting {
        key: "serve.metrics_without_token",
        kind: Kind::Bool,
        default: DefaultValue::Bool(false),
        doc: "`true`: `GET /metrics` answers connections from loopback without the bearer token (a Prometheus on the same host); connections from elsewhere still need it. `/healthz` and `/readyz` never need it",
    },
    Setting::int(
        "serve.console_session_s",
        60,
        2592000,
        43200,
        "how long a web console sign-in lasts, in seconds (the session cookie's lifetime; the daemon forgets the session then, and a restart signs everyone out); read at start",
    ),
    Setting::int(
        "serve.console_link_s",
        60,
        86400,
        900,
        "how long the one-time console sign-in link that `quiver serve` prints at start stays usable, in seconds (it works once); read at start",
    ),
    Setting {
        key: "serve.instance_id",
        kind: Kind::Text("1 to 64 of [A-Za-z0-9._-], e.g. quiver-a"),
        default: DefaultValue::Described(
            "the id kept in `STATE_DIR/instance-id`, made at first start from the host name and a random suffix",
        ),
        doc: "this instance's name: shown by `quiver status`, as the `instance` label of every `/metrics` series and on every activity event, and what a shared store (`store.backend: postgres`) knows it by (its approvals, leases and turns); each instance sharing a store needs its own. Read at start",
    },
];

const MAX_CONNECTIONS: &Setting = by_key(SERVE_SETTINGS, "serve.max_connections");
const HEADER_READ_TIMEOUT_S: &Setting = by_key(SERVE_SETTINGS, "serve.header_read_timeout_s");
const MAX_BODY_BYTES: &Setting = by_key(SERVE_SETTINGS, "serve.max_body_bytes");
const MAX_URI_BYTES: &Setting = by_key(SERVE_SETTINGS, "serve.max_uri_bytes");
const MAX_HEADER_BYTES: &Setting = by_key(SERVE_SETTINGS, "serve.max_header_bytes");
const CONSOLE_SESSION_S: &Setting = by_key(SERVE_SETTINGS, "serve.console_session_s");
const CONSOLE_LINK_S: &Setting = by_key(SERVE_SETTINGS, "serve.console_link_s");

/// The keys of `gateway`, described once (see `quiver_config::setting`).
pub const GATEWAY_SETTINGS: &[Setting] = &[
    Setting {
        key: "gateway.grants",
        kind: Kind::List("a list of toolset or tool-name globs, e.g. [core, \"mcp-*\"]"),
        default: DefaultValue::List(&["*"]),
        doc: "what the stdio gateway (unless `--grant` is given) and the daemon's own token on `/mcp` may see and call; gateway clients made through the API have their own grant",
    },
    Setting::int(
        "gateway.context_tokens",
        1000,
        10000000,
        200000,
        "the context size the gateway assembles for (it sizes the listing)",
    ),
];

const CONTEXT_TOKENS: &Setting = by_key(GATEWAY_SETTINGS, "gateway.context_tokens");

/// What a key of these sections accepts (from [`SERVE_SETTINGS`] and
/// [`GATEWAY_SETTINGS`]), for error messages; `None` for keys of other
/// sections.
pub fn allowed_for(key: &str) -> Option<String> {
    let section = key.split(['.', '[']).next().unwrap_or(key);
    match section {
        "serve" => quiver_config::setting::allowed_in(SERVE_SETTINGS, key),
        "gateway" => quiver_config::setting::allowed_in(GATEWAY_SETTINGS, key),
        _ => None,
    }
}

fn invalid<T>(file: &str, at: &Spanned<T>, key: String, message: String) -> ConfigError {
    let allowed = allowed_for(&key).unwrap_or_default();
    invalid_at(file, at, key, message, allowed)
}

/// Whether `id` can name an instance: 1 to 64 of `[A-Za-z0-9._-]`.
pub fn is_instance_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_serve(
    raw: RawServe,
    file: &str,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<ServeConfig, ConfigError> {
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
    let max_connections = int_setting(
        &raw.max_connections,
        MAX_CONNECTIONS,
        MAX_CONNECTIONS.key,
        file,
        warnings,
    )?;
    let header_read_timeout_s = int_setting(
        &raw.header_read_timeout_s,
        HEADER_READ_TIMEOUT_S,
        HEADER_READ_TIMEOUT_S.key,
        file,
        warnings,
    )?;
    let max_body_bytes = int_setting(
        &raw.max_body_bytes,
        MAX_BODY_BYTES,
        MAX_BODY_BYTES.key,
        file,
        warnings,
    )?;
    let max_uri_bytes = int_setting(
        &raw.max_uri_bytes,
        MAX_URI_BYTES,
        MAX_URI_BYTES.key,
        file,
        warnings,
    )?;
    let max_header_bytes = int_setting(
        &raw.max_header_bytes,
        MAX_HEADER_BYTES,
        MAX_HEADER_BYTES.key,
        file,
        warnings,
    )?;
    let console_session_s = int_setting(
        &raw.console_session_s,
        CONSOLE_SESSION_S,
        CONSOLE_SESSION_S.key,
        file,
        warnings,
    )?;
    let console_link_s = int_setting(
        &raw.console_link_s,
        CONSOLE_LINK_S,
        CONSOLE_LINK_S.key,
        file,
        warnings,
    )?;
    let instance_id = match raw.instance_id {
        None => None,
        Some(id) if is_instance_id(&id.value) => Some(id.value),
        Some(id) => {
            return Err(invalid(
                file,
                &id,
                "serve.instance_id".into(),
                format!("`{}` is not an instance id", id.value),
            ));
        }
    };
    Ok(ServeConfig {
        instance_id,
        listen,
        state_dir,
        max_connections: max_connections as usize,
        header_read_timeout: std::time::Duration::from_secs(header_read_timeout_s as u64),
        max_body_bytes: max_body_bytes as usize,
        max_uri_bytes: max_uri_bytes as usize,
        max_header_bytes: max_header_bytes as usize,
        metrics_without_token: raw
            .metrics_without_token
            .unwrap_or(defaults.metrics_without_token),
        console_session: std::time::Duration::from_secs(console_session_s as u64),
        console_link: std::time::Duration::from_secs(console_link_s as u64),
    })
}

/// Checks the raw section and builds its validated form; clamped values add warnings.
pub fn validate_gateway(
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
        context_tokens: int_setting(
            &raw.context_tokens,
            CONTEXT_TOKENS,
            CONTEXT_TOKENS.key,
            file,
            warnings,
        )? as u64,
    })
}
